#!/usr/bin/env bash
# The whole test suite: install, build (warnings are errors), build again with
# AddressSanitizer + UndefinedBehaviorSanitizer and with ThreadSanitizer, then run every test
# with ctest. The sanitizer builds' tests run as tests of the main suite, so the last line
# printed is ctest's summary of everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAAS_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)" >/dev/null
# ThreadSanitizer build: its data loading tests (pipeline, sampler, fetch, formats) run as one
# test of the main suite too.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTAAS_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" >/dev/null
cmake -S . -B build -DTAAS_ASAN_BUILD_DIR="$(pwd)/build-asan" -DTAAS_TSAN_BUILD_DIR="$(pwd)/build-tsan" >/dev/null
# Jupyter clients look for the runtime dir; keep it private to this run.
export JUPYTER_RUNTIME_DIR="$(mktemp -d)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The browser test's playwright-core, at the version its package-lock.json pins.
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
ctest --test-dir build --output-on-failure -j"${TAAS_TEST_JOBS:-2}"

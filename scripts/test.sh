#!/usr/bin/env bash
# The whole test suite: install, build (warnings are errors in every build here), build the
# other configurations a user may pick (Release, Debug, clang), build again with
# AddressSanitizer + UndefinedBehaviorSanitizer, with ThreadSanitizer and with clang's
# libFuzzer, then run every test with ctest. The other builds' tests run as tests of the main
# suite, so ctest's summary counts everything; the last line printed is that count,
# "tests: N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh -DTAAS_WERROR=ON
# Every configuration a user may pick builds without a warning (warnings are errors here):
# Release and Debug with gcc, RelWithDebInfo with clang (build/ is gcc's RelWithDebInfo, with
# the CUDA plugin; these leave it out: build/ compiles it).
for cfg in "release Release gcc" "debug Debug gcc" "clang RelWithDebInfo clang"; do
  set -- $cfg
  CC=$3 cmake -S . -B "build-$1" -DCMAKE_BUILD_TYPE="$2" -DTAAS_WERROR=ON -DTAAS_CUDA=OFF >/dev/null
  cmake --build "build-$1" -j"$(nproc)" >/dev/null
done
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAAS_SANITIZE=ON -DTAAS_WERROR=ON >/dev/null
cmake --build build-asan -j"$(nproc)" >/dev/null
# ThreadSanitizer build: its data loading tests (pipeline, sampler, fetch, formats) run as one
# test of the main suite too.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTAAS_TSAN=ON -DTAAS_WERROR=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" >/dev/null
# Fuzz build (clang, libFuzzer, ASan + UBSan): only its harnesses are built; each fuzzes for
# 20 s and replays the inputs that once crashed, as one test of the main suite (tests/fuzz).
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAAS_FUZZ=ON \
  -DTAAS_WERROR=ON >/dev/null
cmake --build build-fuzz --target taas_fuzz -j"$(nproc)" >/dev/null
cmake -S . -B build -DTAAS_ASAN_BUILD_DIR="$(pwd)/build-asan" -DTAAS_TSAN_BUILD_DIR="$(pwd)/build-tsan" \
  -DTAAS_FUZZ_BUILD_DIR="$(pwd)/build-fuzz" >/dev/null
# Jupyter clients look for the runtime dir; keep it private to this run.
export JUPYTER_RUNTIME_DIR="$(mktemp -d)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The browser tests' playwright-core, at the version its package-lock.json pins, and the
# JupyterLab application built from its npm packages (tests/browser/jupyterlab: @jupyterlab/
# builder and webpack; Debian has no JupyterLab, only the server it runs on).
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
(cd tests/browser/jupyterlab && npm ci --no-audit --no-fund --loglevel=error && npx webpack >/dev/null)
# ctest ends with the list of skipped tests (the CUDA ones, without a GPU); the run's last line
# is the count, as "tests: N passed, N failed, N skipped".
log="$(mktemp)"
set +e
ctest --test-dir build --output-on-failure -j"${TAAS_TEST_JOBS:-2}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
total=$(sed -nE 's/^[0-9]+% tests passed, [0-9]+ tests? failed out of ([0-9]+)$/\1/p' "$log" | tail -1)
failed=$(sed -nE 's/^[0-9]+% tests passed, ([0-9]+) tests? failed out of [0-9]+$/\1/p' "$log" | tail -1)
# the skipped tests listed after the last summary (a failed sanitizer test prints its own run first)
skipped=$(awk '/^[0-9]+% tests passed/ {n = 0} /^[[:space:]]+[0-9]+ - .* \(Skipped\)$/ {n++} END {print n + 0}' "$log")
rm -f "$log"
if [ -n "$total" ] && [ -n "$failed" ]; then
  echo "tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$rc"

#!/usr/bin/env bash
# Builds taas into build/ (warnings are errors with -DTAAS_WERROR=ON, which the test command
# passes) and installs the binary and the kernelspec
# under /usr/local, where Jupyter finds them.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
cmake --install build >/dev/null
echo "taas: installed $(command -v taas-kernel) and the 'taas' kernelspec"

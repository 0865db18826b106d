#!/usr/bin/env bash
# The main job: install, build, then execute examples/hello.ipynb on the taas kernel with
# nbconvert and print where the executed notebook is.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
mkdir -p out
/usr/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=taas \
  --output-dir out --output hello.executed.ipynb examples/hello.ipynb
echo "taas: executed notebook: $(pwd)/out/hello.executed.ipynb"

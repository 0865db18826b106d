#!/usr/bin/env bash
# The main job: install, build, then train the docs/design.md §1 network on Fashion-MNIST by
# executing examples/fashion_mnist.ipynb in full on the taas kernel with nbconvert (nine
# epochs: a few minutes on two cores). It runs in out/ (where the trained weights,
# fashion_cnn.safetensors, are saved), and writes the executed notebook and its HTML export,
# which keeps the training display's final state. The executed notebook is signed (jupyter
# trust): this machine ran it, so Notebook and JupyterLab show its outputs whole, the chart
# included, instead of sanitizing them as they do a notebook from elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
mkdir -p out
cp examples/fashion_mnist.ipynb out/fashion_mnist.ipynb
/usr/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=taas \
  --ExecutePreprocessor.timeout=3600 --output fashion_mnist.executed.ipynb out/fashion_mnist.ipynb
/usr/bin/jupyter trust out/fashion_mnist.executed.ipynb
/usr/bin/jupyter nbconvert --to html out/fashion_mnist.executed.ipynb >/dev/null
echo "taas: executed notebook: $(pwd)/out/fashion_mnist.executed.ipynb (HTML: out/fashion_mnist.executed.html)"

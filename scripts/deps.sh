#!/usr/bin/env bash
# Installs what taas needs to build, run and test on Debian 12 (run as root).
set -euo pipefail
packages=(
  build-essential cmake pkg-config git procps
  libzmq3-dev libsodium-dev libjansson-dev libcmocka-dev
  libcurl4-openssl-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libopenblas-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist nginx-light openssl
  fortunes  # real text for the language-model tests (tests/protocol/test_text.py)
  jupyter-core jupyter-nbconvert jupyter-nbformat python3-jupyter-client python3-nbclient
  python3-jupyter-kernel-test python3-ipykernel python3-zmq
  python3-torch  # the test that loads taas's weights into torch.nn.Sequential
  python3-torchvision python3-pil  # the ResNet tests against torchvision (tests/protocol/test_torch_resnet.py), the photo folder
  jupyter-notebook chromium  # the browser test (tests/browser)
  python3-jupyterlab-server python3-jupyter-server libjs-mathjax  # JupyterLab built from npm (tests/browser/jupyterlab)
  jupyter-console tmux  # the console test (tests/clients), typed into a terminal
  slurm-wlm slurm-client munge openssh-server openssh-client tcpdump  # the test cluster (tests/lib/cluster.py)
  # the fuzz build (tests/fuzz, docs/testing.md): clang with libFuzzer and the sanitizer
  # runtimes (libclang-rt-dev, only recommended by clang), LLVM's OpenMP for the training
  # core under clang, and llvm-symbolizer for readable stack traces
  clang libclang-rt-dev libomp-dev llvm
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The S3 tests run a real S3-compatible server on Node.js, and the browser test drives Chromium
# from Node.js (playwright-core, from npm); a machine that has Node.js and npm from elsewhere
# keeps them.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "taas: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

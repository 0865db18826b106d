#!/usr/bin/env bash
# Installs what taas needs to build, run and test on Debian 12 (run as root).
set -euo pipefail
packages=(
  build-essential cmake pkg-config git procps
  libzmq3-dev libsodium-dev libjansson-dev libcmocka-dev
  jupyter-core jupyter-nbconvert python3-jupyter-client python3-nbclient
  python3-jupyter-kernel-test python3-ipykernel python3-zmq
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "taas: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

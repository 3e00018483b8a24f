#!/usr/bin/env bash
# Installs the Debian packages plainllama needs (when missing) and builds into build/.
# Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests also need python3-numpy (script tests), qemu-user (the binary on emulated older CPUs) and curl
# (models/fetch.sh against a local fake hub).
packages=(build-essential cmake pkg-config libcli11-dev nlohmann-json3-dev libsentencepiece-dev libonig-dev
          libedit-dev libgtest-dev libbenchmark-dev python3 python3-numpy qemu-user curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"

#!/usr/bin/env bash
# Installs the Debian packages plainllama needs (when missing) and builds into build/.
# Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests also need python3-numpy (script tests), qemu-user (the binary on emulated older CPUs) and curl
# (models/fetch.sh against a local fake hub).
packages=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libsentencepiece-dev libonig-dev
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

# The server's client test runs the `openai` package from the npm registry with Node.js (Debian's nodejs and npm
# when node is missing), installed into tests/openai/node_modules (git-ignored).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [[ ! -d tests/openai/node_modules/openai ]]; then
  (cd tests/openai && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
fi
# The GGUF test runs llama.cpp itself: node-llama-cpp (tests/llama_cpp/package.json) with its prebuilt CPU build for
# linux-x64 only, into tests/llama_cpp/node_modules (git-ignored, 83 MB). --omit=optional leaves out the other
# prebuilt builds (CUDA, Vulkan, other platforms); --ignore-scripts skips its postinstall, which would look for a GPU
# and build llama.cpp from source when no prebuilt build fits.
if [[ $(uname -sm) == "Linux x86_64" && ! -d tests/llama_cpp/node_modules/node-llama-cpp ]]; then
  (cd tests/llama_cpp && npm install --no-audit --no-fund --no-package-lock --omit=optional --ignore-scripts \
     --loglevel=error >/dev/null)
fi

build_dir=${BUILD_DIR:-build}
# Ninja compiles one target's files while another still links (make waits); a folder configured before keeps its
# generator.
generator=()
[[ -f $build_dir/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"

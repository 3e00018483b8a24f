#!/usr/bin/env bash
# Installs the Debian packages plainllama needs (when missing) and builds into build/.
# Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests also need python3-numpy (script tests), python3-matplotlib (scripts/report.py's charts), qemu-user (the
# binary on emulated older CPUs), curl (models/fetch.sh against a local fake hub), chromium (the chat page in a
# browser) and nginx (the scale-out test runs its own nginx from a temporary folder; on a machine with systemd,
# Debian's package also starts its default site: `systemctl disable --now nginx` stops it) and clang-format (the
# format check, tests/test_format.py).
packages=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libsentencepiece-dev libonig-dev
          libedit-dev libgtest-dev libbenchmark-dev python3 python3-numpy python3-matplotlib qemu-user curl chromium
          nginx clang-format)
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
# when node is missing), installed into tests/openai/node_modules (git-ignored); the chat page's browser test and
# the /metrics test run puppeteer-core and a Prometheus text-format parser from tests/web/node_modules; the structured
# output test runs the AI SDK and LangChain from tests/clients/node_modules.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
for dir in tests/openai tests/clients tests/web; do
  # installed again when package.json changes (a pinned version moved)
  if ! cmp -s "$dir/package.json" "$dir/node_modules/.package.json" 2>/dev/null; then
    (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
    cp "$dir/package.json" "$dir/node_modules/.package.json"
  fi
done
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

#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest).
# Needs ../shared beside the project root (the read-only test models and references).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" --timeout 900

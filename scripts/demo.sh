#!/usr/bin/env bash
# From a fresh Debian machine to a story: installs, builds, fetches the default model, generates.
# Usage: scripts/demo.sh ["prompt"] [extra generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"Once upon a time"}
shift || true
scripts/setup.sh
[[ -e models/default ]] || models/fetch.sh
exec build/plainllama generate -m models/default -p "$prompt" "$@"

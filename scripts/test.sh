#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest); then the sanitizer job: the
# library, the binary and every test again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
# Needs ../shared beside the project root (the read-only test models and references).
#   PLAINLLAMA_SKIP_SANITIZE=1  skip the sanitizer job
# Extra arguments are passed to cmake for both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 900)

[[ ${PLAINLLAMA_SKIP_SANITIZE:-0} == 1 ]] && exit 0
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan} scripts/setup.sh -DPLAINLLAMA_SANITIZE=ON -DPLAINLLAMA_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cd "${ASAN_BUILD_DIR:-build-asan}"
# The binary the tests run is instrumented too. libgomp is not; leaks are checked at exit; a UBSan report
# aborts (the build has -fno-sanitize-recover=undefined).
ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$(nproc)" --timeout 900

#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest; the kernel and forward tests run once
# per kernel variant this CPU supports, in the one test binary); then the sanitizer job: the library, the binary and
# every test again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
# Needs ../shared beside the project root (the read-only test models and references).
#   PLAINLLAMA_SKIP_SANITIZE=1  skip the sanitizer job
# Extra arguments are passed to cmake for both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
echo "== kernels: $("${BUILD_DIR:-build}/plainllama" inspect -m ../shared/models/stories260K --json | grep -o '"kernels": "[a-z0-9_]*"')"
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 900)

[[ ${PLAINLLAMA_SKIP_SANITIZE:-0} == 1 ]] && exit 0
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -O1 -g1 (line tables: reports still name file and line) compiles in half the time of -O2 -g.
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan} scripts/setup.sh -DPLAINLLAMA_SANITIZE=ON -DPLAINLLAMA_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "$@"
cd "${ASAN_BUILD_DIR:-build-asan}"
# The binary the tests run is instrumented too. libgomp is not; leaks are checked at exit (ASAN_OPTIONS above);
# a UBSan report aborts (the build has -fno-sanitize-recover=undefined).
ctest --output-on-failure -j"$(nproc)" --timeout 900

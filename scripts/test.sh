#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest; the kernel and forward tests run once
# per kernel variant this CPU supports, in the one test binary); then the sanitizer job: the library, the binary and
# every test again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
# Needs ../shared beside the project root (the read-only test models and references).
#   PLAINLLAMA_SKIP_SANITIZE=1  skip the sanitizer job
#   PLAINLLAMA_SKIP_FUZZ=1      skip the fuzz job: the libFuzzer targets (scripts/fuzz.sh), each for
#                               PLAINLLAMA_FUZZ_SECONDS (default 20), after the normal tests
# Extra arguments are passed to cmake for both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
echo "== kernels: $("${BUILD_DIR:-build}/plainllama" inspect -m ../shared/models/stories260K --json | grep -o '"kernels": "[a-z0-9_]*"')"
# Every skipped test is named after the run, and a skip for a reason that is not about the machine fails it
# (tests/allowed_skips.txt): a test the test command has what it needs for must run.
run_ctest() {
  local dir=$1
  [[ $dir == /* ]] || dir=$PWD/$dir
  export PLAINLLAMA_SKIP_LOG=$dir/skipped-tests.txt
  rm -f "$PLAINLLAMA_SKIP_LOG"
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" --timeout 900)
  /usr/bin/python3 tests/skip_report.py "$PLAINLLAMA_SKIP_LOG" tests/allowed_skips.txt
}
run_ctest "${BUILD_DIR:-build}"

# The fuzzers from the shared seeds and the regression inputs, a short fixed time each, side by side: clang's install
# (when missing), their build and the runs take under a minute (docs/testing.md). A crash fails the run.
if [[ ${PLAINLLAMA_SKIP_FUZZ:-0} != 1 ]]; then
  FUZZ_BUILD_JOBS=$(nproc) FUZZ_PARALLEL=1 scripts/fuzz.sh "${PLAINLLAMA_FUZZ_SECONDS:-20}"
fi

[[ ${PLAINLLAMA_SKIP_SANITIZE:-0} == 1 ]] && exit 0
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -O1 -g1 (line tables: reports still name file and line) compiles in half the time of -O2 -g.
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan} scripts/setup.sh -DPLAINLLAMA_SANITIZE=ON -DPLAINLLAMA_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "$@"
# The binary the tests run is instrumented too. libgomp is not; leaks are checked at exit (ASAN_OPTIONS above);
# a UBSan report aborts (the build has -fno-sanitize-recover=undefined).
run_ctest "${ASAN_BUILD_DIR:-build-asan}"

#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest); then the GoogleTest suite on the
# AVX2 (sanitized) and scalar kernel builds; then the sanitizer job: the library, the binary and every test again with
# AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
# Needs ../shared beside the project root (the read-only test models and references).
#   PLAINLLAMA_SKIP_VARIANTS=1  skip the AVX2 and scalar builds
#   PLAINLLAMA_SKIP_SANITIZE=1  skip the sanitizer job
# Extra arguments are passed to cmake for both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 900)

# The other kernel builds, on this machine: AVX2 (-mavx2 -mfma -mf16c, what a machine without AVX-512 runs; when
# this CPU has them) with AddressSanitizer + UndefinedBehaviorSanitizer, and the portable scalar build; the
# GoogleTest suite on each.
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
variant() {
  local dir=$1 json
  shift
  BUILD_DIR=$dir scripts/setup.sh -DPLAINLLAMA_NATIVE=OFF -DPLAINLLAMA_BUILD_BENCHMARKS=OFF "$@" >/dev/null
  json=$("$dir/plainllama" bench -m ../shared/models/stories260K -p 2 -n 1 -r 1 --json --quiet)
  echo "== $dir: $(grep -o '"kernels":"[a-z0-9_]*"' <<<"$json")"
  (cd "$dir" && OMP_WAIT_POLICY=passive timeout 900 tests/plainllama_tests --gtest_brief=1)
}
if [[ ${PLAINLLAMA_SKIP_VARIANTS:-0} != 1 ]]; then
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    variant build-avx2 "-DCMAKE_CXX_FLAGS=-mavx2 -mfma -mf16c" -DPLAINLLAMA_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
  fi
  variant build-portable "$@"
fi

[[ ${PLAINLLAMA_SKIP_SANITIZE:-0} == 1 ]] && exit 0
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan} scripts/setup.sh -DPLAINLLAMA_SANITIZE=ON -DPLAINLLAMA_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cd "${ASAN_BUILD_DIR:-build-asan}"
# The binary the tests run is instrumented too. libgomp is not; leaks are checked at exit (ASAN_OPTIONS above);
# a UBSan report aborts (the build has -fno-sanitize-recover=undefined).
ctest --output-on-failure -j"$(nproc)" --timeout 900

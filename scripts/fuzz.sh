#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang++ with -fsanitize=fuzzer,address,undefined) into build-fuzz/ and
# runs each one for SECONDS (default 60), niced, one job, one worker. The test command (scripts/test.sh) runs it too,
# for a short time (docs/testing.md).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]       TARGET: safetensors, config, gguf (default: all three)
#   FUZZ_MAX_LEN     largest input libFuzzer generates (default 65536: the real safetensors headers are ~5 KB, the
#                    GGUF seeds are shrunk to a few KB; larger seed files are read as their first FUZZ_MAX_LEN bytes)
#   FUZZ_BUILD_JOBS  parallel compile jobs (default 1: a shared machine; the test command gives every core)
#   FUZZ_PARALLEL    1: run the targets at the same time, one core each (the test command); default one by one
# Seeds come from ../shared/models (tests/fuzz/make_corpus.py) and tests/fuzz/regressions/TARGET/; the growing
# corpus stays in build-fuzz/corpus/TARGET/ between runs. A crash is written to build-fuzz/artifacts/TARGET/:
# minimise it (build-fuzz/tests/fuzz/fuzz_TARGET -minimize_crash=1 -runs=10000 FILE), fix the parser, and add
# the input to tests/fuzz/regressions/TARGET/ (the gtest FuzzRegressions replays every file there).
# Exit status: non-zero when a target found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(safetensors config gguf)
shared=$(cd .. && pwd)/shared
[[ -d $shared/models ]] || { echo "fuzz: no $shared/models (../shared beside the project root)" >&2; exit 1; }

# clang, its compiler-rt runtimes (libFuzzer, ASan, UBSan), llvm-symbolizer, and libomp (the library's OpenMP
# under clang; CMake finds it, and its omp.h, which kernels.h includes, even though the fuzz targets do not link it).
packages=(clang libclang-rt-dev llvm libomp-dev cmake nlohmann-json3-dev libcli11-dev libsentencepiece-dev
          pkg-config python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=build-fuzz
CXX=clang++ nice -n 19 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPLAINLLAMA_FUZZ=ON \
  -DPLAINLLAMA_BUILD_TESTS=OFF -DPLAINLLAMA_BUILD_BENCHMARKS=OFF >/dev/null
nice -n 19 cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-1}" --target "${targets[@]/#/fuzz_}"

rm -rf "$build/seeds"
python3 tests/fuzz/make_corpus.py "$shared" "$build/seeds"

# One target's run; its line, and status 1 when it found a crash.
fuzz_one() {
  local t=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1 logs=$build/logs/$1
  mkdir -p "$corpus" "$artifacts" "$logs" "tests/fuzz/regressions/$t"
  local bin=$(pwd)/$build/tests/fuzz/fuzz_$t start rc end log execs crashes
  start=$(date +%s)
  # -jobs=1 runs the one job in a child process whose output goes to $logs/fuzz-0.log.
  set +e
  (cd "$logs" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 nice -n 19 "$bin" \
     -jobs=1 -workers=1 -max_total_time="$seconds" -max_len="${FUZZ_MAX_LEN:-65536}" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -dict="$OLDPWD/tests/fuzz/$t.dict" -artifact_prefix="$OLDPWD/$artifacts/" \
     "$OLDPWD/$corpus" "$OLDPWD/$build/seeds/$t" "$OLDPWD/tests/fuzz/regressions/$t" >/dev/null 2>&1)
  rc=$?
  set -e
  end=$(date +%s)
  log=$logs/fuzz-0.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "$artifacts" -type f -newermt "@$start" | wc -l)
  echo "fuzz_$t: $((end - start)) s, ${execs:-?} executions, corpus $(find "$corpus" -type f | wc -l) files" \
       "($(du -sb "$corpus" | cut -f1) bytes), exit $rc, new artifacts: $crashes (log: $log)"
  if ((rc != 0)); then
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|fuzz_$t: invariant)" "$log" | head -5 >&2 || true
    return 1
  fi
}

status=0
if [[ ${FUZZ_PARALLEL:-0} == 1 ]]; then  # one core each
  pids=()
  for t in "${targets[@]}"; do
    fuzz_one "$t" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
else
  for t in "${targets[@]}"; do fuzz_one "$t" || status=1; done
fi
exit $status

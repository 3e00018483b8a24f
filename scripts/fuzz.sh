#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang++ with -fsanitize=fuzzer,address,undefined) into build-fuzz/ and
# runs each one for SECONDS (default 60), niced, one job, one worker.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]       TARGET: safetensors, config, gguf (default: all three)
#   FUZZ_MAX_LEN  largest input libFuzzer generates (default 65536: the real safetensors headers are ~5 KB, the
#                 GGUF seeds are shrunk to a few KB; larger seed files are read as their first FUZZ_MAX_LEN bytes)
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
nice -n 19 cmake --build "$build" -j1 --target "${targets[@]/#/fuzz_}"

rm -rf "$build/seeds"
python3 tests/fuzz/make_corpus.py "$shared" "$build/seeds"

status=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t artifacts=$build/artifacts/$t logs=$build/logs/$t
  mkdir -p "$corpus" "$artifacts" "$logs" "tests/fuzz/regressions/$t"
  bin=$(pwd)/$build/tests/fuzz/fuzz_$t
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
    status=1
  fi
done
exit $status

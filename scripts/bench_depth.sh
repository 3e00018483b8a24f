#!/usr/bin/env bash
# pp and tg by depth, per KV cache type: plainllama's bench, and llama.cpp's llama-bench on the same weights when a GGUF
# is given, each round both engines in turn (ours first, then llama.cpp), so both see the same minutes of a shared
# machine. Prints one Markdown row per (round, engine, cache type, depth) with tok/s, and for ours the read bandwidth
# and FMA peak measured in the same run and tg's share of the read (weights + the KV cache read at that depth).
# Usage: scripts/bench_depth.sh MODEL_DIR [GGUF] [-- extra flags for both]
#   env: DEPTHS="0 1024 4096 8064"  TYPES="f32 f16 q8_0"  ROUNDS=2  THREADS=2  P=128  N=32  REPS=2
#        LLAMA_BENCH=/tmp/llama.cpp/build/bin/llama-bench  PLAINLLAMA=build/plainllama
# llama-bench runs with -fa 1 (its flash attention: the only way it takes a q8_0 V cache) and -ctk/-ctv of the type;
# it refuses -ctk f32, so f32 rows are ours alone.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/bench_depth.sh MODEL_DIR [GGUF]}
gguf=${2:-}
DEPTHS=${DEPTHS:-"0 1024 4096 8064"}
TYPES=${TYPES:-"f32 f16 q8_0"}
ROUNDS=${ROUNDS:-2} THREADS=${THREADS:-2} P=${P:-128} N=${N:-32} REPS=${REPS:-2}
LLAMA_BENCH=${LLAMA_BENCH:-/tmp/llama.cpp/build/bin/llama-bench}
PLAINLLAMA=${PLAINLLAMA:-build/plainllama}
dflags=()
for d in $DEPTHS; do dflags+=(-d "$d"); done
ldepths=$(echo "$DEPTHS" | tr ' ' ',')

echo "| round | engine | cache | depth | pp$P tok/s | tg$N tok/s | read GB/s | tg share of the read | FMA peak GFLOP/s |"
echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for ((r = 1; r <= ROUNDS; r++)); do
  for t in $TYPES; do
    "$PLAINLLAMA" bench -m "$model" -t "$THREADS" -p "$P" -n "$N" -r "$REPS" "${dflags[@]}" --cache-type "$t" \
      --json --quiet | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
for d in j["depths"]:
    bw, tg, pp = d["bandwidth_gb_s"], d["tg"], d["pp"]
    share = tg["gb_s"] / bw if bw > 0 else 0
    print("| %s | plainllama | %s | %d | %.2f | %.2f | %.1f | %.0f%% | %.0f |"
          % (sys.argv[1], j["cache_type"], d["depth"], pp["tok_s"], tg["tok_s"], bw, 100 * share,
             j["fma_peak_gflops"]))
' "$r"
    if [[ -n $gguf && $t != f32 ]]; then  # llama-bench refuses -ctk f32
      "$LLAMA_BENCH" -m "$gguf" -t "$THREADS" -p "$P" -n "$N" -r "$REPS" -d "$ldepths" -fa 1 -ctk "$t" -ctv "$t" \
        -o json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
rows = {}
for x in json.load(sys.stdin):
    kind = "pp" if x["n_prompt"] > 0 else "tg"
    rows.setdefault(x["n_depth"], {})[kind] = x["avg_ts"]
for d in sorted(rows):
    print("| %s | llama.cpp | %s | %d | %.2f | %.2f | | | |"
          % (sys.argv[1], sys.argv[2], d, rows[d].get("pp", 0), rows[d].get("tg", 0)))
' "$r" "$t"
    fi
  done
done

#!/usr/bin/python3
"""Perplexity of several model folders on several text files, as a Markdown table (and CSV / JSON).

Runs `plainllama perplexity --json` for every model x dataset pair (llama.cpp's method, or --stride).

    scripts/perplexity.py                                  # ../shared/models/stories260K* x both shared texts
    scripts/perplexity.py -m models/small-bf16 -d my.txt --ctx 512 --chunks 50 --csv out.csv --json out.json
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("PLAINLLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))


def model_dtype(model_dir):
    """The dtype of the first layer's q_proj, read from the safetensors header (or the index's shard)."""
    name = "model.layers.0.self_attn.q_proj.weight"
    path = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            path = os.path.join(model_dir, json.load(f)["weight_map"][name])
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))[name]["dtype"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", action="append",
                    help="model folder (repeatable); default ../shared/models/stories260K*")
    ap.add_argument("-d", "--data", action="append",
                    help="text file (repeatable); default tinystories_val.txt and wiki.test.raw")
    ap.add_argument("-c", "--ctx", type=int, default=256, help="tokens per chunk (default 256)")
    ap.add_argument("--chunks", type=int, default=-1, help="first K chunks only (default all)")
    ap.add_argument("--stride", type=int, help="sliding-window mode with this stride")
    ap.add_argument("-t", "--threads", type=int, help="threads (default: the binary's)")
    ap.add_argument("--binary", default=os.environ.get("PLAINLLAMA_BINARY", os.path.join(ROOT, "build", "plainllama")))
    ap.add_argument("--csv", help="also write the table as CSV here")
    ap.add_argument("--json", help="also write the results as JSON here")
    args = ap.parse_args()

    models = args.model or sorted(d for d in glob.glob(os.path.join(SHARED, "models", "stories260K*"))
                                  if os.path.exists(os.path.join(d, "config.json")))
    data = args.data or [os.path.join(SHARED, "data", f) for f in ("tinystories_val.txt", "wiki.test.raw")]
    if not models or not data:
        sys.exit("perplexity.py: no models or data sets (give -m and -d)")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"perplexity.py: {args.binary} is not built (run scripts/setup.sh)")

    rows = []
    interrupted = False
    try:
        for m in models:
            for d in data:
                rows.append(run_one(args, m, d))
    except KeyboardInterrupt:  # Ctrl-C: what finished is still printed and written
        interrupted = True
        print("perplexity.py: interrupted; the table holds the runs that finished", file=sys.stderr)

    print("| model | dtype | dataset | ctx | chunks | PPL | tok/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r.get("error"):
            print(f"| {r['model']} | {r['dtype']} | {r['dataset']} | {r['ctx']} | — | failed: {r['error']} | — |")
        else:
            print(f"| {r['model']} | {r['dtype']} | {r['dataset']} | {r['ctx']} | {r['chunks']} | "
                  f"{r['ppl']:.4f} ± {r['ppl_err']:.4f} | {r['tok_s']:.1f} |")
    fields = ["model", "dtype", "dataset", "ctx", "chunks", "ppl", "ppl_err", "tok_s", "method", "error"]
    if args.csv and rows:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if interrupted:
        sys.exit(130)
    if any(r.get("error") for r in rows):
        sys.exit(1)


def run_one(args, m, d):
    """One model x data set: its row, with "error" set when the run failed."""
    cmd = [args.binary, "perplexity", "-m", m, "-f", d, "-c", str(args.ctx), "--json", "--quiet"]
    if args.chunks > 0:
        cmd += ["--chunks", str(args.chunks)]
    if args.stride:
        cmd += ["--stride", str(args.stride)]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    print(f"{os.path.basename(m)} on {os.path.basename(d)} ...", file=sys.stderr, flush=True)
    try:
        dtype = model_dtype(m)
    except (OSError, ValueError, KeyError) as e:
        dtype = "?"
    row = {"model": os.path.basename(os.path.normpath(m)), "dtype": dtype, "dataset": os.path.basename(d),
           "ctx": args.ctx, "chunks": None, "ppl": None, "ppl_err": None, "tok_s": None, "method": None, "error": ""}
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if r.returncode == 130 or r.returncode == -2:  # the child saw the Ctrl-C too
            raise KeyboardInterrupt
        row["error"] = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit status {r.returncode}"
        print(f"perplexity.py: {' '.join(cmd)} failed: {row['error']}", file=sys.stderr)
        return row
    try:
        j = json.loads(r.stdout)
        if j["ppl"] is None:  # NaN or Inf (a broken model): JSON has no number for it
            raise ValueError("the perplexity is not a number (NaN or Inf weights? try --check-tensors)")
        row.update({"chunks": j["n_chunks"], "ppl": round(j["ppl"], 4), "ppl_err": round(j["ppl_stderr"] or 0, 4),
                    "tok_s": round(j["tokens_per_second"], 1), "method": j["method"]})
    except (ValueError, KeyError, TypeError) as e:
        row["error"] = f"bad output: {e}"
        print(f"perplexity.py: {' '.join(cmd)}: {row['error']}", file=sys.stderr)
    return row


if __name__ == "__main__":
    main()

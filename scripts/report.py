#!/usr/bin/python3
"""One report of what plainllama does on this machine: speed, accuracy and serving, as tables and charts.

    scripts/report.py -o OUT                     the full run (says how long it will take first)
    scripts/report.py --quick -o OUT             the shared small models, a few minutes at most
    scripts/report.py -o OUT --llama-cpp /tmp/llama.cpp/build/bin     side by side with llama.cpp's tools
    scripts/report.py --compare A/report.json B/report.json -o OUT    the ratios of two reports, B over A

It writes OUT/report.md (tables, with the command, date, commit and CPU at its top: usable as docs/performance.md),
PNG charts beside it and OUT/report.json with every raw figure. Models it makes (the synthetic TinyLlama shape, F16 and
BF16 copies of a folder) go to a temporary folder, removed at the end.

- speed: `plainllama bench --json` per format (F16, BF16 folders; Q8_0, Q6_K, Q4_K_M with --quant; GGUF files given
  with --gguf) and depth, each bench measuring the read bandwidth and the FMA peak in the same run: tg is drawn as a
  share of the read bandwidth, pp as a share of the FMA peak.
- accuracy: `plainllama perplexity --kl-divergence` per quantized format against the unquantized model (F16 and BF16:
  perplexity alone), and the bytes per weight each format loads as (`inspect --json`).
- serving: scripts/loadgen.py at 1, 2, 4 and 8 concurrent streams against a `plainllama serve` it starts.
- with --llama-cpp DIR: the GGUF files (default: the shared tinystories3M ones) through both engines, in turn:
  plainllama bench / llama-bench, plainllama perplexity / llama-perplexity, plainllama serve / llama-server.
"""
import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # perfreport/, beside this file
from perfreport.charts import write_report  # noqa: E402
from perfreport.common import ALL_FORMATS, ROOT, SHARED, TTY, Fail, die  # noqa: E402
from perfreport.compare import compare  # noqa: E402
from perfreport.measure import default_ggufs, measure  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def commit():
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (c + ("-dirty" if dirty else "")) or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None


def check_model(path, flag):
    if not os.path.exists(path):
        die(f"{flag} {path}: no such file or folder")
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        die(f"{flag} {path}: not a model folder (no config.json)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__[__doc__.index(
                                     "\n\n") + 2:])
    ap.add_argument("-o", "--out", help="output folder (created if missing)")
    ap.add_argument("--quick", action="store_true", help="the shared small models, fewer runs: a few minutes")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "plainllama"), help="plainllama binary")
    ap.add_argument("--model", help="model for speed (folder or GGUF; default: a synthetic TinyLlama-shaped model, "
                                    "--quick: the shared tinystories3M)")
    ap.add_argument("--accuracy-model", default=os.path.join(SHARED, "models", "tinystories3M"),
                    help="model folder for accuracy (default: the shared tinystories3M)")
    ap.add_argument("--text", default=os.path.join(SHARED, "data", "tinystories_val.txt"),
                    help="text for perplexity (default: the shared tinystories_val.txt)")
    ap.add_argument("--serve-model", help="model for serving (default: --accuracy-model)")
    ap.add_argument("--formats", default=",".join(ALL_FORMATS),
                    help=f"comma-separated formats (default {','.join(ALL_FORMATS)})")
    ap.add_argument("--gguf", action="append", default=None,
                    help="GGUF file for speed (and side by side with --llama-cpp); repeatable (default with "
                         "--llama-cpp: the shared tinystories3M GGUF files)")
    ap.add_argument("--depths", help="comma-separated bench depths (default 0,512; --quick 0,128)")
    ap.add_argument("-t", "--threads", type=int, help="threads (default: plainllama's own, the physical cores other "
                                                      "processes leave free; llama.cpp gets the same count)")
    ap.add_argument("--llama-cpp", help="folder of llama.cpp's built tools (llama-bench, llama-perplexity, "
                                        "llama-server): the same measurements side by side")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two report.json files: draw the ratios B / A")
    args = ap.parse_args()

    if not args.out:
        die("-o OUT: give the output folder")
    if args.compare:
        compare(args.compare[0], args.compare[1], args.out)
        return
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        die(f"{e.name} is missing: apt-get install python3-matplotlib python3-numpy (scripts/setup.sh does)")
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        die(f"--binary {args.binary}: no such executable (build it with scripts/setup.sh)")
    args.formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    for f in args.formats:
        if f not in ALL_FORMATS:
            die(f"--formats: unknown format {f!r}; expected some of {', '.join(ALL_FORMATS)}")
    if args.depths:
        try:
            args.depths = sorted({int(d) for d in args.depths.split(",")})
        except ValueError:
            die(f"--depths {args.depths}: expected comma-separated integers")
        if args.depths[0] < 0:
            die(f"--depths: {args.depths[0]} is negative")
    args.bench_threads = None
    if args.threads is not None and args.threads < 1:
        die(f"--threads {args.threads}: expected at least 1")
    if args.model:
        check_model(args.model, "--model")
    check_model(args.accuracy_model, "--accuracy-model")
    if os.path.isdir(args.accuracy_model) and not any(n.endswith(".safetensors")
                                                      for n in os.listdir(args.accuracy_model)):
        die(f"--accuracy-model {args.accuracy_model}: no .safetensors file (perplexity --kl-divergence quantizes a "
            "folder at load)")
    if not os.path.isfile(args.text):
        die(f"--text {args.text}: no such file")
    args.serve_model = args.serve_model or args.accuracy_model
    check_model(args.serve_model, "--serve-model")
    if args.llama_cpp:
        for tool in ("llama-bench", "llama-perplexity", "llama-server"):
            if not os.access(os.path.join(args.llama_cpp, tool), os.X_OK):
                die(f"--llama-cpp {args.llama_cpp}: no executable {tool} there")
        if not args.gguf and not default_ggufs():
            die(f"--llama-cpp: no --gguf given and no GGUF file in {os.path.join(SHARED, 'models', 'gguf')}")
    args.gguf = args.gguf or []
    for g in args.gguf:
        if not os.path.isfile(g):
            die(f"--gguf {g}: no such file")

    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="plainllama-report-")
    try:
        rep = measure(args, tmp)
    except Fail as e:
        if TTY:
            print(file=sys.stderr)
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    raw = rep.get("bench_raw", [])
    rep["meta"] = {
        "command": "scripts/report.py " + " ".join(a for a in sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(), "cpu": cpu_name(), "cpus": os.cpu_count(),
        "threads": args.threads or args.bench_threads,
        "quick": args.quick, "seconds": round(time.time() - t0, 1),
        "bandwidth_gb_s": median([j.get("bandwidth_gb_s") for j in raw]),
        "fma_peak_gflops": median([j.get("fma_peak_gflops") for j in raw]),
        "kernels": raw[0].get("kernels") if raw else None,
    }
    rep["accuracy_model"] = args.accuracy_model
    rep["text"] = args.text
    write_report(rep, args.out)
    print(os.path.join(args.out, "report.md"))


if __name__ == "__main__":
    main()

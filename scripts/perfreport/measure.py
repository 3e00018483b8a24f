"""The measurements (plainllama's bench, perplexity, inspect and serve with scripts/loadgen.py; llama.cpp's
llama-bench, llama-perplexity and llama-server), the plan of a run (its settings and steps) and the run itself,
measure(), which returns the report's figures.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from .common import CONCURRENCY, QUANT_FORMATS, ROOT, SHARED, Fail, show
from .models import folder_dtype, format_variant
from .run import Progress, run, run_json


# ---- measurements

def threads(args):
    """-t for plainllama: the one given, else none (its default: the physical cores other processes leave free)."""
    return ["-t", str(args.threads)] if args.threads else []


def llama_threads(args):
    """-t for llama.cpp's tools: the one given, else the count plainllama's first bench chose."""
    return args.threads or args.bench_threads or os.cpu_count() or 1


def bench(args, model, quant, depths, p, n, reps):
    cmd = [args.binary, "bench", "-m", model, *threads(args), "-p", str(p), "-n", str(n), "-r", str(reps),
           "--json", "--quiet"]
    if quant and quant != "none":
        cmd += ["--quant", quant]
    for d in depths:
        cmd += ["-d", str(d)]
    return run_json(cmd)


def speed_rows(j, engine, fmt):
    rows = []
    for d in j["depths"]:
        bw, peak = d["bandwidth_gb_s"], j["fma_peak_gflops"]
        rows.append({"engine": engine, "format": fmt, "depth": d["depth"], "dtype": j["dtype"],
                     "pp_n": d["pp"]["n"], "pp_tok_s": d["pp"]["tok_s"], "pp_stdev": d["pp"]["stdev"],
                     "pp_gflops": d["pp"]["gflops"], "tg_n": d["tg"]["n"], "tg_tok_s": d["tg"]["tok_s"],
                     "tg_stdev": d["tg"]["stdev"], "tg_gb_s": d["tg"]["gb_s"], "bandwidth_gb_s": bw,
                     "fma_peak_gflops": peak, "tg_share": d["tg"]["gb_s"] / bw if bw > 0 else None,
                     "pp_share": d["pp"]["gflops"] / peak if peak > 0 else None,
                     "weight_bytes": j["weight_bytes"], "params": j["params"], "threads": j["threads"]})
    return rows


def llama_bench(args, gguf, depths, p, n, reps):
    cmd = [os.path.join(args.llama_cpp, "llama-bench"), "-m", gguf, "-t", str(llama_threads(args)), "-p", str(p),
           "-n", str(n), "-r", str(reps), "-d", ",".join(str(d) for d in depths), "-o", "json"]
    out = run_json(cmd)
    rows = {}
    for r in out:
        d = r.get("n_depth", 0)
        row = rows.setdefault(d, {"engine": "llama.cpp", "depth": d, "pp_n": p, "tg_n": n, "threads": r["n_threads"]})
        if r["n_prompt"] > 0 and r["n_gen"] == 0:
            row["pp_tok_s"], row["pp_stdev"] = r["avg_ts"], r["stddev_ts"]
        elif r["n_gen"] > 0 and r["n_prompt"] == 0:
            row["tg_tok_s"], row["tg_stdev"] = r["avg_ts"], r["stddev_ts"]
    return [rows[d] for d in sorted(rows)]


def perplexity(args, model, quant, text, ctx, chunks, kld):
    cmd = [args.binary, "perplexity", "-m", model, "-f", text, "-c", str(ctx), "--chunks", str(chunks),
           *threads(args), "--json", "--quiet"]
    if quant and quant != "none":
        cmd += ["--quant", quant]
    if kld:
        cmd += ["--kl-divergence"]
    return run_json(cmd)


def llama_perplexity(args, gguf, text, ctx, chunks):
    """(PPL, stderr) from llama-perplexity's final estimate. Its log is written by a thread that the process's exit
    may cut short, so the line is looked for in its --log-file and its output both, and the run tried again once."""
    for attempt in range(2):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.txt")
            cmd = [os.path.join(args.llama_cpp, "llama-perplexity"), "-m", gguf, "-f", text, "-c", str(ctx),
                   "--chunks", str(chunks), "-t", str(llama_threads(args)), "-b", str(ctx), "--log-file", log]
            with open(os.path.join(d, "out.txt"), "w+b") as f:
                p = subprocess.run(cmd, stdout=f, stderr=f, timeout=3600)
                f.seek(0)
                out = f.read().decode(errors="replace")
            if os.path.isfile(log):
                with open(log, errors="replace") as f:
                    out += f.read()
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
        if m:
            return float(m.group(1)), float(m.group(2))
        if p.returncode != 0:
            break
    lines = [l for l in out.strip().splitlines() if l.strip()]
    raise Fail(f"llama-perplexity (exit {p.returncode}) gave no final estimate: {lines[-1] if lines else ''} "
               f"[{' '.join(cmd)}]")


def loaded_bytes_per_weight(args, model, quant):
    cmd = [args.binary, "inspect", "-m", model, "--json"]
    if quant and quant != "none":
        cmd += ["--quant", quant]
    j = run_json(cmd)
    return j["n_loaded_bytes"] / j["n_params"] if j["n_params"] else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A server process on 127.0.0.1, ready to take requests; stopped on exit."""

    def __init__(self, cmd, port, what):
        self.what, self.port = what, port
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     env=dict(os.environ, OMP_WAIT_POLICY="passive"))
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                lines = [l for l in self.log.read().decode(errors="replace").splitlines() if l.strip()]
                raise Fail(f"{what} exited ({self.proc.returncode}) before it was ready: "
                           f"{lines[-1] if lines else ''} [{' '.join(cmd)}]")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise Fail(f"{what} was not ready within 120 s [{' '.join(cmd)}]")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def loadgen(args, port, k, requests, max_tokens):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "loadgen.py"), "--url", f"http://127.0.0.1:{port}",
           "-k", str(k), "-n", str(requests), "--max-tokens", str(max_tokens), "--prompt-tokens", "32", "--json"]
    j = run_json(cmd)
    return {"concurrency": k, "requests": j["requests"], "errors": j["errors"], "tokens_per_s": j["tokens_per_s"],
            "ttft_ms_median": (j["ttft_ms"] or {}).get("median"), "ttft_ms_p95": (j["ttft_ms"] or {}).get("p95"),
            "latency_ms_median": (j["latency_ms"] or {}).get("median"),
            "latency_ms_p95": (j["latency_ms"] or {}).get("p95"), "raw": j}


def serve_ours(args, model):
    port = free_port()
    cmd = [args.binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port), *threads(args),
           "--parallel", str(max(CONCURRENCY)), "--no-webui"]
    return Served(cmd, port, "plainllama serve")


def serve_llama(args, gguf, ctx):
    port = free_port()
    n = max(CONCURRENCY)
    cmd = [os.path.join(args.llama_cpp, "llama-server"), "-m", gguf, "--host", "127.0.0.1", "--port", str(port),
           "-t", str(llama_threads(args)), "-np", str(n), "-c", str(ctx * n)]
    return Served(cmd, port, "llama-server")


# ---- the plan

def plan(args):
    """The settings of this run, the GGUF files to make, and its steps with their estimated seconds."""
    q = args.quick
    s = {
        "p": 64 if q else 128, "n": 16 if q else 32, "reps": 2,
        "depths": args.depths or ([0, 128] if q else [0, 512]),
        "ppl_ctx": 256, "ppl_chunks": 8 if q else 40,
        "requests_per_stream": 2 if q else 4, "max_tokens": 16 if q else 48,
    }
    big = not q and not args.model
    speed_model_is_gguf = bool(args.model) and args.model.endswith(".gguf")
    # Side by side, the speed model in each format as a GGUF file (plainllama quantize), the same file for both
    # engines; the accuracy and serving side by side use the shared tinystories3M GGUF files (real weights).
    if args.gguf:
        s["speed_ggufs"], s["small_ggufs"], s["make_ggufs"] = args.gguf, args.gguf, False
    elif args.llama_cpp:
        small = default_ggufs()
        make = not q and not speed_model_is_gguf
        s["speed_ggufs"] = [] if make else (small if not args.model else [args.model])
        s["small_ggufs"], s["make_ggufs"] = small, make
    else:
        s["speed_ggufs"], s["small_ggufs"], s["make_ggufs"] = [], [], False
    # one plainllama bench (its read bandwidth passes after every token of a model beyond the caches take about as
    # long as the tokens) and one llama-bench, on an idle 2-core machine
    bench_s = 6 if q else (60 if big else 20)
    llama_bench_s = 4 if q else (30 if big else 10)
    steps = []
    if big:
        steps.append(("synthetic TinyLlama-shaped model", 60))
    if s["make_ggufs"]:
        for f in args.formats:
            steps.append((f"GGUF {f.upper()}", 20 if big else 5))
            steps.append((f"speed GGUF {f.upper()}", bench_s))
            steps.append((f"llama-bench GGUF {f.upper()}", llama_bench_s))
    else:
        for f in args.formats:
            steps.append((f"speed {f}", bench_s + (15 if big and f == "bf16" else 0)))
    for g in s["speed_ggufs"]:
        steps.append((f"speed {os.path.basename(g)}", 6 if q else 20))
        if args.llama_cpp:
            steps.append((f"llama-bench {os.path.basename(g)}", 4 if q else 10))
    for f in args.formats:
        steps.append((f"accuracy {f}", 3 if q else 8))
    for g in s["small_ggufs"] if args.llama_cpp else []:
        steps.append((f"perplexity {os.path.basename(g)}", 2 if q else 5))
        steps.append((f"llama-perplexity {os.path.basename(g)}", 2 if q else 5))
    for engine in ("plainllama", "llama.cpp") if args.llama_cpp and s["small_ggufs"] else ("plainllama",):
        for k in CONCURRENCY:
            steps.append((f"serving {engine} x{k}", 3 if q else 8))
    return s, steps


def default_ggufs():
    d = os.path.join(SHARED, "models", "gguf")
    names = ["tinystories3M-F16.gguf", "tinystories3M-Q8_0.gguf", "tinystories3M-Q6_K.gguf",
             "tinystories3M-Q4_K_M.gguf", "tinystories3M-Q4_0.gguf", "tinystories3M-Q5_K_M.gguf"]
    return [os.path.join(d, n) for n in names if os.path.isfile(os.path.join(d, n))]


def gguf_format(path):
    m = re.search(r"-([A-Za-z0-9_]+)\.gguf$", os.path.basename(path))
    return ("gguf " + m.group(1)) if m else os.path.basename(path)


def measure(args, tmp):
    s, steps = plan(args)
    if not args.quick:
        est = sum(x for _, x in steps)
        print(f"report.py: {len(steps)} steps, about {max(1, round(est / 60))} minutes on an idle 2-core machine "
              "(longer when other work shares it)", file=sys.stderr)
    prog = Progress(steps)
    rep = {"settings": s, "speed": [], "accuracy": [], "serving": [], "notes": []}

    speed_model = args.model
    if not speed_model:
        if args.quick:
            speed_model = os.path.join(SHARED, "models", "tinystories3M")
        else:
            prog.start("synthetic TinyLlama-shaped model")
            speed_model = os.path.join(tmp, "tinyllama-shape-f16")
            run([sys.executable, os.path.join(ROOT, "scripts", "make_synthetic_model.py"), speed_model,
                 "--preset", "tinyllama-1.1b", "--dtype", "f16"])
            prog.step()
    rep["speed_model"] = show(speed_model) if args.model else (
        "shared tinystories3M" if args.quick else "synthetic, the TinyLlama 1.1B shape (random weights)")

    # speed: each format in turn; GGUF files through both engines in turn
    def bench_gguf(g, fmt, name):
        prog.start(f"speed {name}")
        try:
            j = bench(args, g, None, s["depths"], s["p"], s["n"], s["reps"])
            rep["speed"] += speed_rows(j, "plainllama", fmt)
            rep.setdefault("bench_raw", []).append(j)
            args.bench_threads = j["threads"]  # llama-bench next, on as many
        except Fail as e:
            rep["notes"].append(f"plainllama bench on {os.path.basename(g)}: {e}")
        prog.step()
        if args.llama_cpp:
            prog.start(f"llama-bench {name}")
            for r in llama_bench(args, g, s["depths"], s["p"], s["n"], s["reps"]):
                r["format"] = fmt
                rep["speed"].append(r)
            prog.step()

    if s["make_ggufs"]:
        for f in args.formats:
            prog.start(f"GGUF {f.upper()}")
            m, quant = format_variant(speed_model, f, tmp)
            g = os.path.join(tmp, f"speed-{f.upper()}.gguf")
            run([args.binary, "quantize", "-m", m, "-o", g, "--quant", quant, *threads(args)])
            prog.step()
            bench_gguf(g, "gguf " + f.upper(), f"GGUF {f.upper()}")
            os.remove(g)
    elif speed_model.endswith(".gguf"):  # a GGUF file is its own one format
        if speed_model not in s["speed_ggufs"]:
            bench_gguf(speed_model, gguf_format(speed_model), os.path.basename(speed_model))
    else:
        for f in args.formats:
            prog.start(f"speed {f}")
            m, quant = format_variant(speed_model, f, tmp)
            j = bench(args, m, quant, s["depths"], s["p"], s["n"], s["reps"])
            rep["speed"] += speed_rows(j, "plainllama", f.upper())
            rep.setdefault("bench_raw", []).append(j)
            args.bench_threads = args.bench_threads or j["threads"]
            prog.step()
    for g in s["speed_ggufs"]:
        bench_gguf(g, gguf_format(g), os.path.basename(g))

    # accuracy: the quantized formats against the unquantized model, in one process each
    acc_model = args.accuracy_model
    ref = None
    for f in args.formats:
        prog.start(f"accuracy {f}")
        m, quant = format_variant(acc_model, f, tmp)
        j = perplexity(args, m, quant, args.text, s["ppl_ctx"], s["ppl_chunks"], kld=f in QUANT_FORMATS)
        row = {"engine": "plainllama", "format": f.upper(), "ppl": j["ppl"], "ppl_stderr": j["ppl_stderr"],
               "bytes_per_weight": loaded_bytes_per_weight(args, m, quant), "n_scored": j["n_scored"]}
        if "kld" in j:
            row.update(kld=j["kld"]["mean_kld"], kld_stderr=j["kld"]["kld_stderr"], same_top=j["kld"]["same_top"])
            ref = {"engine": "plainllama", "format": (folder_dtype(acc_model) or "F32") + " (reference)",
                   "ppl": j["kld"]["ref_ppl"], "bytes_per_weight": loaded_bytes_per_weight(args, acc_model, None)}
        rep["accuracy"].append(row)
        prog.step()
    if ref:
        rep["accuracy"].insert(0, ref)
    if args.llama_cpp:
        for g in s["small_ggufs"]:
            fmt = gguf_format(g)
            prog.start(f"perplexity {os.path.basename(g)}")
            try:
                j = perplexity(args, g, None, args.text, s["ppl_ctx"], s["ppl_chunks"], kld=False)
                rep["accuracy"].append({"engine": "plainllama", "format": fmt, "ppl": j["ppl"],
                                        "ppl_stderr": j["ppl_stderr"]})
            except Fail as e:
                rep["notes"].append(f"plainllama perplexity on {os.path.basename(g)}: {e}")
            prog.step()
            prog.start(f"llama-perplexity {os.path.basename(g)}")
            ppl, err = llama_perplexity(args, g, args.text, s["ppl_ctx"], s["ppl_chunks"])
            rep["accuracy"].append({"engine": "llama.cpp", "format": fmt, "ppl": ppl, "ppl_stderr": err})
            prog.step()

    # serving: one server per engine, the concurrency levels in turn
    serve_model = args.serve_model
    if args.llama_cpp and s["small_ggufs"]:  # the same file through both servers
        serve_model = s["small_ggufs"][0]
    rep["serve_model"] = serve_model
    engines = [("plainllama", lambda: serve_ours(args, serve_model))]
    if args.llama_cpp and s["small_ggufs"]:
        engines.append(("llama.cpp", lambda: serve_llama(args, serve_model, s["ppl_ctx"])))
    for engine, start in engines:
        with start() as srv:
            for k in CONCURRENCY:
                prog.start(f"serving {engine} x{k}")
                r = loadgen(args, srv.port, k, k * s["requests_per_stream"], s["max_tokens"])
                r["engine"] = engine
                rep["serving"].append(r)
                prog.step()
    prog.end()
    rep["step_seconds"] = prog.times
    return rep

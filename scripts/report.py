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
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
FOLDER_FORMATS = ("f16", "bf16")
QUANT_FORMATS = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0")
ALL_FORMATS = FOLDER_FORMATS + QUANT_FORMATS
CONCURRENCY = (1, 2, 4, 8)
TTY = sys.stderr.isatty()


class Fail(Exception):
    """A reason to stop, in one line."""


def die(msg):
    print(f"report.py: {msg}", file=sys.stderr)
    sys.exit(1)


# ---- running commands

def run(cmd, timeout=3600, env=None):
    """stdout of cmd; Fail naming the command and its last stderr line when it fails."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise Fail(f"{cmd[0]}: not found")
    except subprocess.TimeoutExpired:
        raise Fail(f"{os.path.basename(cmd[0])} took more than {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        raise Fail(f"{os.path.basename(cmd[0])} failed (exit {p.returncode}): {lines[-1] if lines else ''}"
                   f" [{' '.join(cmd)}]")
    return p.stdout


def run_json(cmd, timeout=3600):
    out = run(cmd, timeout)
    try:
        return json.loads(out)
    except ValueError:
        raise Fail(f"{os.path.basename(cmd[0])}: output is not JSON [{' '.join(cmd)}]")


class Progress:
    """Steps done and time left on stderr, when it is a terminal."""

    def __init__(self, steps):
        self.steps, self.done, self.t0 = steps, 0, time.time()  # steps: [(name, estimated seconds)]
        self.total = sum(s for _, s in steps) or 1
        self.times, self.name, self.t_step = [], None, self.t0  # [(name, seconds)] of the steps done

    def start(self, name):
        self.name, self.t_step = name, time.time()
        if not TTY:
            return
        spent = time.time() - self.t0
        est_done = sum(s for _, s in self.steps[:self.done])
        left = max(0.0, (self.total - est_done) * (spent / est_done if est_done > 0 else 1))
        print(f"\r\033[K[{self.done + 1}/{len(self.steps)}] {name}  ({fmt_time(spent)} elapsed, about "
              f"{fmt_time(left)} left)", end="", file=sys.stderr, flush=True)

    def step(self):
        self.done += 1
        self.times.append((self.name, round(time.time() - self.t_step, 1)))

    def end(self):
        if TTY:
            print(f"\r\033[Kdone in {fmt_time(time.time() - self.t0)}", file=sys.stderr)


def fmt_time(s):
    return f"{int(s) // 60}:{int(s) % 60:02d}"


# ---- models

def convert_safetensors(src, dst, dtype):
    """A copy of model folder src in dst with every F32/F16/BF16 tensor stored as dtype (f16 or bf16; BF16 rounded to
    nearest even); other files copied."""
    import numpy as np
    os.makedirs(dst, exist_ok=True)
    names = os.listdir(src)
    if not any(n.endswith(".safetensors") for n in names):
        raise Fail(f"{src}: no .safetensors file to convert to {dtype}")
    for name in names:
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        if not name.endswith(".safetensors"):
            shutil.copy(path, os.path.join(dst, name))
            continue
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            base = 8 + n
            out_header, parts, offset = {}, [], 0
            for key, t in header.items():
                if key == "__metadata__":
                    out_header[key] = t
                    continue
                b, e = t["data_offsets"]
                f.seek(base + b)
                raw = f.read(e - b)
                if t["dtype"] == "F32":
                    x = np.frombuffer(raw, dtype="<f4")
                elif t["dtype"] == "F16":
                    x = np.frombuffer(raw, dtype="<f2").astype(np.float32)
                elif t["dtype"] == "BF16":
                    x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
                else:
                    x = None
                if x is None:
                    data, dt = raw, t["dtype"]
                elif dtype == "f16":
                    data, dt = x.astype("<f2").tobytes(), "F16"
                else:
                    u = x.view(np.uint32)
                    data, dt = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes(), "BF16"
                out_header[key] = {"dtype": dt, "shape": t["shape"], "data_offsets": [offset, offset + len(data)]}
                parts.append(data)
                offset += len(data)
        h = json.dumps(out_header).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(dst, name), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for p in parts:
                f.write(p)


def folder_dtype(model):
    """The dtype of a folder's first weight matrix ("F32", "F16", "BF16", ...), or None."""
    for name in sorted(os.listdir(model)):
        if name.endswith(".safetensors"):
            with open(os.path.join(model, name), "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            for k, t in header.items():
                if k != "__metadata__" and len(t["shape"]) == 2:
                    return t["dtype"]
    return None


def format_variant(model, fmt, tmp):
    """(folder, --quant) running model in format fmt: a converted copy for f16/bf16 (the folder itself when it is
    already stored so), the folder with --quant for the quantized ones."""
    if fmt in QUANT_FORMATS:
        return model, fmt
    if folder_dtype(model) == fmt.upper():
        return model, "none"
    dst = os.path.join(tmp, os.path.basename(os.path.normpath(model)) + "-" + fmt)
    if not os.path.isdir(dst):
        convert_safetensors(model, dst, fmt)
    return dst, "none"


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


# ---- charts and tables

def plt_setup():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"figure.dpi": 100, "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.axisbelow": True})
    return plt


COLORS = {"plainllama": "#1f77b4", "llama.cpp": "#ff7f0e"}
CHARTS = {}  # what each chart drew, read back from its axes (report.json's "charts")


def describe(name, fig, extra=None):
    """Records the axes of a saved figure: title, axis labels, legend series, x tick labels, bar labels."""
    axes = []
    for i, ax in enumerate(fig.axes):
        legend = ax.get_legend()
        d = {"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
             "series": [t.get_text() for t in legend.get_texts()] if legend else [],
             "xticks": [t.get_text() for t in ax.get_xticklabels()],
             "bar_labels": [t.get_text() for t in ax.texts if t.get_text()]}
        d.update((extra or [{}] * len(fig.axes))[i])
        axes.append(d)
    CHARTS[name] = {"axes": axes}


def chart_speed(rep, out, key, share_key, title, ylabel, share_what):
    """Bars of tok/s per format, one group per format, one bar per (engine, depth), labelled with the share."""
    plt = plt_setup()
    rows = [r for r in rep["speed"] if r.get(key) is not None]
    formats = list(dict.fromkeys(r["format"] for r in rows))
    series = list(dict.fromkeys((r["engine"], r["depth"]) for r in rows))
    fig, ax = plt.subplots(figsize=(min(16, max(8, 0.32 * len(formats) * max(1, len(series)) + 3)), 5))
    width = 0.8 / max(1, len(series))
    shades = {}
    for i, (engine, depth) in enumerate(series):
        xs, ys, labels = [], [], []
        for fi, f in enumerate(formats):
            r = next((r for r in rows if r["format"] == f and r["engine"] == engine and r["depth"] == depth), None)
            if r:
                xs.append(fi - 0.4 + width * (i + 0.5))
                ys.append(r[key])
                sh = r.get(share_key)
                labels.append(f"{100 * sh:.0f}%" if sh is not None else "")
        depths = sorted({d for e, d in series if e == engine})
        alpha = 1.0 - 0.45 * depths.index(depth) / max(1, len(depths) - 1)
        shades[(engine, depth)] = alpha
        bars = ax.bar(xs, ys, width, color=COLORS.get(engine, "#888"), alpha=alpha,
                      label=f"{engine}, depth {depth}")
        ax.bar_label(bars, labels=labels, fontsize=8, padding=2)
    ax.set_xticks(range(len(formats)))
    ax.set_xticklabels(formats, rotation=20 if len(formats) > 6 else 0)
    ax.set_xlabel("weight format")
    ax.set_ylabel(ylabel)
    ax.set_title(title + f"\n(bar labels: share of the {share_what} measured in the same run)")
    ax.set_ylim(0, max([r[key] for r in rows] + [1]) * 1.18)
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = f"speed_{key.split('_')[0]}.png"
    fig.savefig(os.path.join(out, name))
    describe(name, fig)
    plt.close(fig)


def chart_accuracy(rep, out):
    plt = plt_setup()
    rows = [r for r in rep["accuracy"] if r.get("kld") is not None and r.get("bytes_per_weight")]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    ax.scatter([r["bytes_per_weight"] for r in rows], [r["kld"] for r in rows], s=50, color=COLORS["plainllama"],
               label="plainllama, quantized at load")
    for r in rows:
        ax.annotate(f"{r['format']}\nsame top {100 * r['same_top']:.1f}%", (r["bytes_per_weight"], r["kld"]),
                    textcoords="offset points", xytext=(6, 4), fontsize=8)
    if rows and min(r["kld"] for r in rows) > 0:
        import matplotlib.ticker as ticker
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("bytes per weight as loaded (all weights, embeddings included)")
    ax.set_ylabel("mean KL divergence from the unquantized model (nats)")
    ax.set_title("Accuracy lost per format")
    if rows:
        xs = [r["bytes_per_weight"] for r in rows]
        ax.set_xlim(min(xs) * 0.85, max(xs) * 1.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "accuracy_kld.png"))
    describe("accuracy_kld.png", fig, [{"points": [r["format"] for r in rows], "bar_labels": []}])
    plt.close(fig)


def chart_serving(rep, out):
    plt = plt_setup()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    panels = [("tokens_per_s", "aggregate generated tokens/s", "Throughput"),
              ("ttft_ms_median", "time to first token, median (ms)", "Time to first token"),
              ("latency_ms_p95", "request latency, p95 (ms)", "Latency, p95")]
    for ax, (key, ylabel, title) in zip(axes, panels):
        for engine in dict.fromkeys(r["engine"] for r in rep["serving"]):
            rows = sorted((r for r in rep["serving"] if r["engine"] == engine and r.get(key) is not None),
                          key=lambda r: r["concurrency"])
            ax.plot([r["concurrency"] for r in rows], [r[key] for r in rows], marker="o",
                    color=COLORS.get(engine, "#888"), label=engine)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(CONCURRENCY))
        ax.set_xticklabels([str(k) for k in CONCURRENCY])
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "serving.png"))
    describe("serving.png", fig)
    plt.close(fig)


def ratio_bars(out, name, groups, title, xlabel):
    """groups: [(label, {measure: ratio})]: one horizontal bar per (label, measure), coloured by measure, on a
    logarithmic axis with a line at 1, each bar labelled with its ratio."""
    plt = plt_setup()
    rows = [(g, k, v) for g, d in groups for k, v in d.items() if v is not None and v > 0]
    measures = list(dict.fromkeys(k for _, k, _ in rows))
    palette = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.28 * max(1, len(rows))))
    ys = list(range(len(rows)))[::-1]
    for m_i, m in enumerate(measures):
        sel = [(y, v) for y, (_, k, v) in zip(ys, rows) if k == m]
        bars = ax.barh([y for y, _ in sel], [v for _, v in sel], height=0.7, color=palette[m_i % len(palette)],
                       label=m)
        ax.bar_label(bars, labels=[f"{v:.2f}" for _, v in sel], fontsize=8, padding=2)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    import matplotlib.ticker as ticker
    vals = [v for _, _, v in rows] or [1.0]
    lo, hi = min(vals + [1.0]) / 1.5, max(vals + [1.0]) * 1.8
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(ticker.FixedLocator([2.0 ** e for e in range(-10, 11) if lo <= 2.0 ** e <= hi]))
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{g}: {k}" for g, k, _ in rows], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("format or concurrency: measure")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="measure", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name))
    describe(name, fig)
    plt.close(fig)


def side_by_side_groups(rep):
    """Ratios plainllama / llama.cpp per GGUF format: pp and tg per depth, and perplexity."""
    groups = []
    for f in dict.fromkeys(r["format"] for r in rep["speed"] if r["engine"] == "llama.cpp"):
        d = {}
        for ours in (r for r in rep["speed"] if r["engine"] == "plainllama" and r["format"] == f):
            theirs = next((r for r in rep["speed"] if r["engine"] == "llama.cpp" and r["format"] == f
                           and r["depth"] == ours["depth"]), None)
            if not theirs:
                continue
            for k in ("pp", "tg"):
                if theirs.get(k + "_tok_s"):
                    d[f"{k} @ depth {ours['depth']} (tokens/s)"] = ours[k + "_tok_s"] / theirs[k + "_tok_s"]
        ours = next((r for r in rep["accuracy"] if r["engine"] == "plainllama" and r["format"] == f), None)
        theirs = next((r for r in rep["accuracy"] if r["engine"] == "llama.cpp" and r["format"] == f), None)
        if ours and theirs:
            d["perplexity"] = ours["ppl"] / theirs["ppl"]
        if d:
            groups.append((f, d))
    serving = {}
    for k in CONCURRENCY:
        ours = next((r for r in rep["serving"] if r["engine"] == "plainllama" and r["concurrency"] == k), None)
        theirs = next((r for r in rep["serving"] if r["engine"] == "llama.cpp" and r["concurrency"] == k), None)
        if ours and theirs and theirs["tokens_per_s"]:
            serving[f"serving x{k}"] = {"aggregate tokens/s": ours["tokens_per_s"] / theirs["tokens_per_s"],
                                        "p95 latency": ours["latency_ms_p95"] / theirs["latency_ms_p95"]
                                        if theirs.get("latency_ms_p95") else None}
    return groups, list(serving.items())


def show(path):
    """A path as the report prints it: relative to the project root when beside it (../shared/...)."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return rel if not rel.startswith("../..") else path


def num(v, f="{:.2f}"):
    return "—" if v is None else f.format(v)


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" if i == 0 else "---:"
                                                                  for i in range(len(header))) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(rep, out):
    os.makedirs(out, exist_ok=True)
    m = rep["meta"]
    s = rep["settings"]
    md = ["# Performance", "",
          f"Produced by `{m['command']}` on {m['date']}, commit `{m['commit']}`.", "",
          f"- CPU: {m['cpu']} ({m['cpus']} logical CPUs); threads: {m['threads']}",
          f"- read bandwidth (bench's streaming-read test, median of its runs): {num(m['bandwidth_gb_s'], '{:.1f}')}"
          f" GB/s; FMA peak (bench, all threads): {num(m['fma_peak_gflops'], '{:.1f}')} GFLOP/s",
          f"- {'quick run: the shared small models' if m['quick'] else 'full run'}; the machine may have been busy"
          " (other processes are not stopped)", ""]
    if rep["speed"]:
        md += ["## Speed", "",
               f"`plainllama bench` on {rep['speed_model']}: pp{s['p']} and tg{s['n']}, {s['reps']} runs each, at "
               f"each depth (tokens already in the cache). tg's share is of the read bandwidth measured in the same "
               f"run; pp's of the FMA peak measured in the same run (quantized formats multiply in 8-bit integers "
               f"and BF16 in pairs, so their pp share of the f32 peak may pass 100%; so may tg's for a model that "
               f"fits in the caches)."
               + (" Each format is a GGUF file that `plainllama quantize` wrote from it, the same file through "
                  "llama-bench." if s.get("make_ggufs") else ""), ""]
        rows = []
        for r in rep["speed"]:
            rows.append([r["engine"], r["format"], r["threads"], r["depth"], num(r.get("pp_tok_s")), num(r.get("pp_stdev")),
                         num(r.get("pp_share"), "{:.0%}") if r.get("pp_share") is not None else "—",
                         num(r.get("tg_tok_s")), num(r.get("tg_stdev")),
                         num(r.get("tg_share"), "{:.0%}") if r.get("tg_share") is not None else "—"])
        md += [md_table(["engine", "format", "threads", "depth", "pp tokens/s", "± stdev", "pp share of FMA peak",
                         "tg tokens/s", "± stdev", "tg share of read bandwidth"], rows), "",
               "![tg tokens/s by format](speed_tg.png)", "", "![pp tokens/s by format](speed_pp.png)", ""]
    if rep["accuracy"]:
        md += ["## Accuracy", "",
               f"`plainllama perplexity --kl-divergence` on {show(rep['accuracy_model'])} and {show(rep['text'])}: "
               f"{s['ppl_chunks']} chunks of {s['ppl_ctx']} tokens. KLD and same top token against the unquantized "
               "model in the same run; F16 and BF16 copies give perplexity alone.", ""]
        rows = [[r["engine"], r["format"], num(r.get("bytes_per_weight"), "{:.3f}"), num(r["ppl"], "{:.4f}"),
                 num(r.get("ppl_stderr"), "{:.4f}"), num(r.get("kld"), "{:.6f}"),
                 num(r.get("same_top"), "{:.2%}") if r.get("same_top") is not None else "—"]
                for r in rep["accuracy"]]
        md += [md_table(["engine", "format", "bytes/weight", "PPL", "± stderr", "mean KLD", "same top token"], rows),
               "", "![bytes per weight against KLD](accuracy_kld.png)", ""]
    if rep["serving"]:
        md += ["## Serving", "",
               f"`scripts/loadgen.py` against `serve` on {show(rep['serve_model'])}: {s['requests_per_stream']} streamed "
               f"chat completions per stream, max_tokens {s['max_tokens']}, prompts of about 32 tokens.", ""]
        rows = [[r["engine"], r["concurrency"], r["requests"], r["errors"], num(r["tokens_per_s"], "{:.1f}"),
                 num(r["ttft_ms_median"], "{:.1f}"), num(r["ttft_ms_p95"], "{:.1f}"),
                 num(r["latency_ms_median"], "{:.1f}"), num(r["latency_ms_p95"], "{:.1f}")] for r in rep["serving"]]
        md += [md_table(["engine", "streams", "requests", "errors", "tokens/s", "TTFT median ms", "TTFT p95 ms",
                         "latency median ms", "latency p95 ms"], rows), "",
               "![serving against concurrency](serving.png)", ""]
    groups, serving = side_by_side_groups(rep)
    if groups or serving:
        md += ["## Side by side with llama.cpp", "",
               "The same GGUF files through llama-bench, llama-perplexity and llama-server, each measurement in turn "
               "with ours. Ratios are plainllama / llama.cpp (tokens/s: above 1 is faster; perplexity and latency: "
               "1 is the same, below 1 is lower).", ""]
        rows = [[g, k, num(v, "{:.3f}")] for g, d in groups + serving for k, v in d.items()]
        md += [md_table(["format", "measure", "plainllama / llama.cpp"], rows), "",
               "![plainllama / llama.cpp](llama_cpp_ratio.png)", ""]
    if rep["notes"]:
        md += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]] + [""]
    md += ["Raw figures: report.json. Compare two reports with "
           "`scripts/report.py --compare A/report.json B/report.json -o OUT`.", ""]
    draw(rep, out)
    rep["charts"] = CHARTS
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(rep, f, indent=1)


def draw(rep, out):
    if rep["speed"]:
        chart_speed(rep, out, "tg_tok_s", "tg_share", "Generation (tg) speed", "tokens/s (one stream)",
                    "read bandwidth")
        chart_speed(rep, out, "pp_tok_s", "pp_share", "Prompt processing (pp) speed", "tokens/s", "FMA peak")
    if rep["accuracy"]:
        chart_accuracy(rep, out)
    if rep["serving"]:
        chart_serving(rep, out)
    groups, serving = side_by_side_groups(rep)
    if groups or serving:
        ratio_bars(out, "llama_cpp_ratio.png", groups + serving, "plainllama / llama.cpp on the same GGUF files",
                   "ratio, plainllama / llama.cpp (log scale; tokens/s above 1: plainllama faster)")


# ---- compare

def compare(a_path, b_path, out):
    reps = []
    for p in (a_path, b_path):
        try:
            with open(p) as f:
                r = json.load(f)
            r["speed"], r["accuracy"], r["serving"]  # noqa: B018 (the keys a report has)
        except OSError as e:
            die(f"--compare {p}: {e.strerror}")
        except (ValueError, KeyError, TypeError):
            die(f"--compare {p}: not a report.json written by scripts/report.py")
        reps.append(r)
    a, b = reps
    groups = []
    for f in dict.fromkeys(r["format"] for r in b["speed"] if r["engine"] == "plainllama"):
        d = {}
        for rb in (r for r in b["speed"] if r["engine"] == "plainllama" and r["format"] == f):
            ra = next((r for r in a["speed"] if r["engine"] == "plainllama" and r["format"] == f
                       and r["depth"] == rb["depth"]), None)
            for k in ("pp", "tg"):
                if ra and ra.get(k + "_tok_s") and rb.get(k + "_tok_s"):
                    d[f"{k} @ depth {rb['depth']} (tokens/s)"] = rb[k + "_tok_s"] / ra[k + "_tok_s"]
        ra = next((r for r in a["accuracy"] if r["engine"] == "plainllama" and r["format"] == f), None)
        rb = next((r for r in b["accuracy"] if r["engine"] == "plainllama" and r["format"] == f), None)
        if ra and rb:
            d["perplexity"] = rb["ppl"] / ra["ppl"]
        if d:
            groups.append((f, d))
    for k in CONCURRENCY:
        ra = next((r for r in a["serving"] if r["engine"] == "plainllama" and r["concurrency"] == k), None)
        rb = next((r for r in b["serving"] if r["engine"] == "plainllama" and r["concurrency"] == k), None)
        if ra and rb and ra["tokens_per_s"]:
            groups.append((f"serving x{k}", {"aggregate tokens/s": rb["tokens_per_s"] / ra["tokens_per_s"],
                                            "p95 latency": rb["latency_ms_p95"] / ra["latency_ms_p95"]
                                            if ra.get("latency_ms_p95") else None}))
    if not groups:
        die(f"--compare: {a_path} and {b_path} have no measurement in common")
    os.makedirs(out, exist_ok=True)
    ratio_bars(out, "compare.png", groups, f"B / A: {os.path.basename(os.path.dirname(os.path.abspath(b_path)))} / "
               f"{os.path.basename(os.path.dirname(os.path.abspath(a_path)))}",
               "ratio, B / A (log scale; tokens/s above 1: B faster)")
    rows = [[g, k, num(v, "{:.3f}")] for g, d in groups for k, v in d.items()]
    md = ["# Comparison", "", f"A: `{a_path}` ({a['meta']['date']}, commit `{a['meta']['commit']}`, "
          f"{a['meta']['cpu']})", "",
          f"B: `{b_path}` ({b['meta']['date']}, commit `{b['meta']['commit']}`, {b['meta']['cpu']})", "",
          "Ratios B / A (tokens/s: above 1 is faster in B; perplexity and latency: below 1 is lower in B).", "",
          md_table(["format", "measure", "B / A"], rows), "", "![B / A](compare.png)", ""]
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump({"a": a_path, "b": b_path, "ratios": [{"group": g, "measure": k, "ratio": v}
                                                         for g, d in groups for k, v in d.items()]}, f, indent=1)


# ---- main

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

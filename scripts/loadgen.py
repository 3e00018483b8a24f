#!/usr/bin/python3
"""Load generator for an OpenAI-compatible server (`plainllama serve`): K concurrent chat clients.

Each of K threads sends chat completions back to back (temperature 0, max_tokens; streamed with
stream_options.include_usage, or with --mode plain or mixed not streamed, or every other one) until N requests are
done in all, and times every stream: time to first token
(the first content delta), total latency, and decode speed (tokens after the first / time from the first
content delta to the last). Reported: aggregate generated tok/s (completion tokens from the usage chunks / wall
time of the whole run), TTFT and latency median and p95, per-stream decode tok/s median.

    scripts/loadgen.py --url http://127.0.0.1:8080 -k 4 -n 32
    scripts/loadgen.py --url http://127.0.0.1:8080 --api-key KEY -k 8 -n 64 --max-tokens 128 --prompt-tokens 200 --json

Errors are counted by kind and reported, and the exit status is then 1: an HTTP status other than 200 ("http 502"),
no response at all ("connection"), a stream that breaks, carries an error event or ends without `data: [DONE]` or
without a finish_reason, and a response body that is not a whole completion ("stream cut", "bad response"). A reply
cut short never counts as a success.
"""
import argparse
import http.client
import json
import math
import statistics
import sys
import threading
import time
import urllib.parse

SENTENCE = "The little dog ran to the park. "  # 8 to 12 tokens with LLaMA tokenizers


class Target:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme not in ("http", "https"):
            sys.exit(f"loadgen.py: --url {url}: http or https only")
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname or "127.0.0.1", u.port or (443 if self.https else 80)
        base = u.path.rstrip("/")
        self.base = base if base.endswith("/v1") else base + "/v1"
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def model(self):
        """The first model the server lists, or "default"."""
        conn = self.connect()
        try:
            conn.request("GET", self.base + "/models", headers=self.headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status == 200:
                return json.loads(body)["data"][0]["id"]
        except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        return "default"


def failed(kind, detail, **extra):
    return {"error": f"{kind}: {detail}", "kind": kind, **extra}


def one_request(target, body, stream=True):
    """One chat completion, streamed or not; a dict of timings and counts, or one with "error" and its "kind"."""
    t0 = time.perf_counter()
    conn = target.connect()
    try:
        try:
            conn.request("POST", target.base + "/chat/completions", body=body, headers=target.headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            return failed("connection", f"{type(e).__name__}: {e}")
        if resp.status != 200:
            text = resp.read(500).decode("utf-8", errors="replace").strip()
            return failed(f"http {resp.status}", text[:300], status=resp.status)
        if not stream:
            return whole_reply(resp, t0)
        first = last = None
        deltas = 0
        usage = None
        done = False
        finish = None
        text = []
        data = []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
                continue
            if line or not data:  # comments, other fields; or a blank line without data
                continue
            payload, data = b"\n".join(data), []
            if payload == b"[DONE]":
                done = True
                break
            chunk = json.loads(payload)
            if "error" in chunk:
                return failed("stream cut", f"error event {json.dumps(chunk['error'])[:300]}", got=len(text))
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
                    deltas += 1
                    text.append(piece)
                finish = choice.get("finish_reason") or finish
        end = time.perf_counter()
        if not done or not finish:
            missing = "data: [DONE]" if not done else "a finish_reason"
            return failed("stream cut", "the stream ended without " + missing, got=len(text))
        if first is None:
            return failed("bad response", "no content in the stream")
        tokens = usage["completion_tokens"] if usage else deltas
        decode = (tokens - 1) / (last - first) if tokens > 1 and last > first else None
        return {"ttft": first - t0, "latency": end - t0, "tokens": tokens, "decode_tok_s": decode,
                "prompt_tokens": usage.get("prompt_tokens") if usage else None, "usage": usage is not None,
                "finish_reason": finish, "text": "".join(text), "stream": True}
    except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException) as e:
        return failed("stream cut", f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def whole_reply(resp, t0):
    """A non-streamed response read whole: a completion with its finish_reason and usage, else an error."""
    try:
        reply = json.loads(resp.read())
        choice = reply["choices"][0]
        text, finish, usage = choice["message"]["content"], choice["finish_reason"], reply["usage"]
        if not isinstance(text, str) or not finish or not isinstance(usage.get("completion_tokens"), int):
            raise ValueError("no content, finish_reason or usage")
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, http.client.HTTPException) as e:
        return failed("bad response", f"{type(e).__name__}: {e}")
    latency = time.perf_counter() - t0
    return {"ttft": None, "latency": latency, "tokens": usage["completion_tokens"], "decode_tok_s": None,
            "prompt_tokens": usage.get("prompt_tokens"), "usage": True, "finish_reason": finish, "text": text,
            "stream": False}


def p95(values):
    """Nearest-rank 95th percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def run(args):
    target = Target(args.url, args.api_key, args.timeout)
    model = args.model or target.model()
    prompt = args.prompt if args.prompt is not None else \
        (SENTENCE * max(1, round(args.prompt_tokens / 10)))[:-1]
    def streams(i):
        return args.mode == "stream" or (args.mode == "mixed" and i % 2 == 1)

    def body(i):  # each request's prompt starts differently: no request finds another's prompt in a slot's cache
        b = {"model": model, "messages": [{"role": "user", "content": f"{i}. {prompt}"}],
             "max_tokens": args.max_tokens, "temperature": 0}
        if streams(i):
            b.update(stream=True, stream_options={"include_usage": True})
        return json.dumps(b).encode()
    results, lock = [], threading.Lock()
    next_index = [0]
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with lock:
                if next_index[0] >= args.requests:
                    return
                next_index[0] += 1
                i = next_index[0]
            r = one_request(target, body(i), streams(i))
            r["index"], r["stream"] = i, streams(i)
            with lock:
                results.append(r)

    # Background streams: long requests that keep decoding while the measured ones run (not counted).
    bg_body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                          "max_tokens": args.background_max_tokens, "temperature": 0, "stream": True}).encode()

    def background():
        while not stop.is_set():
            one_request(target, bg_body)

    for _ in range(args.background):
        threading.Thread(target=background, daemon=True).start()
    if args.background:
        time.sleep(1.0)  # their prompts evaluated: they are decoding

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(args.concurrency, args.requests))]
    for t in threads:
        t.start()
    interrupted = False
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        interrupted = True
    wall = time.perf_counter() - t0
    stop.set()
    with lock:
        results = list(results)
    return summarize(args, model, prompt, results, wall), interrupted


def summarize(args, model, prompt, results, wall):
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    kinds = {}
    for r in results:
        if "error" in r:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    tokens = sum(r["tokens"] for r in ok)
    decode = [r["decode_tok_s"] for r in ok if r["decode_tok_s"] is not None]
    prompt_tokens = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]

    def stats(key):
        v = [r[key] * 1000 for r in ok if r[key] is not None]
        return {"median": round(statistics.median(v), 2), "p95": round(p95(v), 2)} if v else None

    rep = {
        "url": args.url, "model": model, "mode": args.mode, "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "prompt_chars": len(prompt),
        "prompt_tokens": statistics.median(prompt_tokens) if prompt_tokens else None,
        "requests": len(results), "ok": len(ok), "errors": len(errors), "errors_by_kind": kinds,
        "error_samples": sorted(set(errors))[:5],
        "wall_s": round(wall, 3), "completion_tokens": tokens,
        "tokens_per_s": round(tokens / wall, 2) if wall > 0 else 0.0,
        "ttft_ms": stats("ttft"), "latency_ms": stats("latency"),
        "decode_tok_s_median": round(statistics.median(decode), 2) if decode else None,
        "usage_missing": sum(1 for r in ok if not r["usage"]),
    }
    if args.per_request:  # each request's outcome, in the order they ended
        rep["results"] = [{k: r.get(k) for k in ("index", "stream", "error", "kind", "status", "tokens",
                                                  "finish_reason", "text", "got") if k in r} for r in results]
    return rep


def fmt(v):
    return "—" if v is None else f"{v:.1f}"


def print_table(rep):
    print(f"{rep['requests']} requests ({rep['ok']} ok, {rep['errors']} errors), concurrency {rep['concurrency']}, "
          f"model {rep['model']}, max_tokens {rep['max_tokens']}, prompt "
          + ("? tokens" if rep["prompt_tokens"] is None else f"{rep['prompt_tokens']:g} tokens"))
    print(f"{rep['completion_tokens']} tokens generated in {rep['wall_s']:.2f} s: "
          f"{rep['tokens_per_s']:.1f} tok/s aggregate")
    print()
    print("| metric | median | p95 |")
    print("| --- | ---: | ---: |")
    for name, key in (("time to first token (ms)", "ttft_ms"), ("request latency (ms)", "latency_ms")):
        s = rep[key] or {"median": None, "p95": None}
        print(f"| {name} | {fmt(s['median'])} | {fmt(s['p95'])} |")
    print(f"| decode tok/s per stream | {fmt(rep['decode_tok_s_median'])} | |")
    if rep["usage_missing"]:
        print(f"\nnote: {rep['usage_missing']} streams had no usage chunk: their tokens are counted as content deltas")
    if rep["errors_by_kind"]:
        print("\nerrors: " + ", ".join(f"{k} {n}" for k, n in sorted(rep["errors_by_kind"].items())))
    for e in rep["error_samples"]:
        print(f"error: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="server address, e.g. http://127.0.0.1:8080 (/v1 is added)")
    ap.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    ap.add_argument("-k", "--concurrency", type=int, default=4, help="concurrent clients (default 4)")
    ap.add_argument("-n", "--requests", type=int, default=32, help="requests in all (default 32)")
    ap.add_argument("--max-tokens", type=int, default=64, help="max_tokens of each request (default 64)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--prompt-tokens", type=int, default=32,
                       help="approximate prompt length: a short sentence repeated (default 32)")
    group.add_argument("--prompt", help="the prompt text")
    ap.add_argument("--model", help="model name to send (default: the first one /v1/models lists)")
    ap.add_argument("--timeout", type=float, default=300, help="socket timeout per request in seconds (default 300)")
    ap.add_argument("--background", type=int, default=0,
                    help="streams that keep decoding while the measured requests run, not counted (default 0): "
                         "e.g. time to first token with 3 other streams busy is -k 1 --background 3")
    ap.add_argument("--background-max-tokens", type=int, default=2048,
                    help="max_tokens of each background request (default 2048)")
    ap.add_argument("--mode", choices=("stream", "plain", "mixed"), default="stream",
                    help="streamed requests, non-streamed ones, or every other one (default stream)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--per-request", action="store_true",
                    help="with --json: each request's outcome too (its text, tokens, finish_reason or error)")
    args = ap.parse_args()
    if args.concurrency < 1 or args.requests < 1 or args.max_tokens < 1:
        ap.error("-k, -n and --max-tokens must be at least 1")

    rep, interrupted = run(args)
    if args.json:
        print(json.dumps(rep))
    else:
        print_table(rep)
    if interrupted:
        print("interrupted: the report holds the requests that finished", file=sys.stderr)
        return 130
    return 1 if rep["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

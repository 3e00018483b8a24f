"""What the server's tests share: `plainllama serve` started on a model (Server), requests and their replies,
the request bodies, streams started and aborted, a model slow enough to be caught generating, and raw sockets.

Not a test itself (ctest runs tests/test_*.py); imported by the server's test scripts (tests/test_server*.py).
"""
import http.client
import json
import math
import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import unittest

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")
MODEL_ID = "stories260K"
NODE_DIR = os.path.join(SOURCE_DIR, "tests", "openai")
LOADGEN = os.path.join(SOURCE_DIR, "scripts", "loadgen.py")
KEY = "sk-plainllama-test"
PROMPTS = ["Once upon a time", "The dog", "Lily and Ben", "Tom had a red ball", "The sun was shining",
           "One day, a little bird", "Mom said", "There was a big tree"]
LONG_PROMPT = "Once upon a time " * 200  # about 800 tokens: more than the 512-token context


def has_serve():
    if not os.access(BINARY, os.X_OK):
        return False
    r = subprocess.run([BINARY, "serve", "--help"], capture_output=True)
    return r.returncode == 0


HAS_SERVE = has_serve()


class Reply:
    """One HTTP exchange: what was asked (for failure messages) and what came back."""

    def __init__(self, asked, status, headers, body):
        self.asked, self.status, self.headers, self.body = asked, status, headers, body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise AssertionError(f"not JSON ({e}): {self}") from None

    def __str__(self):
        body = self.body[:1500].decode("utf-8", errors="replace")
        return f"\n  request:  {self.asked}\n  response: {self.status} {self.headers.get('content-type', '')} {body}"


def describe(method, path, body):
    if body is None:
        return f"{method} {path}"
    shown = body if isinstance(body, bytes) else json.dumps(body).encode()
    return f"{method} {path} {shown[:300].decode('utf-8', errors='replace')}" + (" ..." if len(shown) > 300 else "")


class Server:
    """`plainllama serve` on stories260K (or `model`) at 127.0.0.1:<a free port>; all it writes on stderr is kept in
    self.log. `env`: variables to set (None: to remove); PLAINLLAMA_API_KEY is removed unless given. wait=False:
    returns at once, without waiting for the line that says it listens (self.port is then None)."""

    def __init__(self, *extra, model=MODEL, env=None, port=0, wait=True):
        args = [BINARY, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", "1", *extra]
        self.args = args
        full_env = dict(os.environ, OMP_WAIT_POLICY="passive")
        full_env.pop("PLAINLLAMA_API_KEY", None)  # the server's default --api-key
        for k, v in (env or {}).items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = v
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env)
        self._err, self._out, self._eof = b"", b"", False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stderr, "_err"), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stdout, "_out"), daemon=True)]
        for t in self._threads:
            t.start()
        self.port = None
        if not wait:
            return
        m = self.wait_log(r"listening on http://127\.0\.0\.1:(\d+)", timeout=60)
        if not m:
            self.kill()
            raise AssertionError(f"the server did not start: {' '.join(args)}\nexit status {self.proc.returncode}; "
                                 f"stderr:\n{self.log}")
        self.port = int(m.group(1))

    def wait_exit(self, timeout):
        """The exit status, or None when the server still runs after `timeout` seconds. Once it has exited, all it
        wrote on stderr is in self.log."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        with self._cond:
            self._cond.wait_for(lambda: self._eof, 10)
        return status

    def status_kb(self, field):
        """A memory figure of /proc/PID/status in kB: VmRSS (now), VmHWM (the peak)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.proc.pid}/status")

    def reset_peak(self):
        """Makes VmHWM start again from VmRSS (Linux: 5 written to clear_refs); False when not allowed."""
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def _pump(self, pipe, attr):
        while True:
            data = pipe.read1(65536)
            with self._cond:
                if not data:
                    if attr == "_err":
                        self._eof = True
                    self._cond.notify_all()
                    return
                setattr(self, attr, getattr(self, attr) + data)
                self._cond.notify_all()

    @property
    def log(self):
        with self._cond:
            return self._err.decode("utf-8", errors="replace")

    def wait_log(self, pattern, timeout=10.0, start=0):
        """The first match of `pattern` in stderr at or after character `start`, waiting for it; None when the
        server closes stderr or the time runs out first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                m = re.compile(pattern).search(self._err.decode("utf-8", errors="replace"), start)
                left = deadline - time.monotonic()
                if m or self._eof or left <= 0:
                    return m
                self._cond.wait(left)

    def stop(self, sig, timeout=10.0):
        """Sends `sig`; the exit status, or None (and the process killed) when it did not exit within `timeout`."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._threads:
            t.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()

    def connect(self, timeout=30.0):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def send(self, conn, method, path, body=None, key=None, headers=None):
        """Sends a request on `conn` (a JSON body from a dict, or raw bytes); returns its description."""
        hdrs = {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if key is not None:
            hdrs["Authorization"] = f"Bearer {key}"
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        return describe(method, path, body)

    def request(self, method, path, body=None, key=None, headers=None, timeout=30.0):
        """One request on a new connection; the whole response read."""
        conn = self.connect(timeout)
        try:
            asked = self.send(conn, method, path, body, key, headers)
            resp = conn.getresponse()
            return Reply(asked, resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)


def sse_payloads(reply):
    """The payloads of a whole event stream; fails unless every event is exactly "data: <one line>\\n\\n"."""
    try:
        text = reply.body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"the stream is not UTF-8 ({e}): {reply}") from None
    if not text.endswith("\n\n"):
        raise AssertionError(f"the stream does not end with a blank line: {reply}")
    out = []
    for event in text[:-2].split("\n\n"):
        if not event.startswith("data: ") or "\n" in event or "\r" in event:
            raise AssertionError(f"event {event[:200]!r} is not 'data: <one line>': {reply}")
        out.append(event[len("data: "):])
    return out


def counts(usage):
    """The three token counts of a usage object (any further fields left out)."""
    return {k: (usage or {}).get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def chat_body(prompt, max_tokens=16, **extra):
    """A greedy chat request with one user message (max_tokens None: not sent)."""
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, **extra}
    return {k: v for k, v in body.items() if not (k == "max_tokens" and v is None)}


def completion_body(prompt, max_tokens=16, **extra):
    """A greedy text completion request (max_tokens None: not sent)."""
    body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra}
    return {k: v for k, v in body.items() if not (k == "max_tokens" and v is None)}


class ServerTest(unittest.TestCase):
    server_args = ()
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.server_args)

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.kill()

    def fail_with_log(self, msg):
        self.fail(f"{msg}\nserver stderr (last 3000 characters):\n{self.server.log[-3000:]}")

    def assertOk(self, reply):
        if reply.status != 200:
            self.fail_with_log(f"expected 200: {reply}")
        return reply.json()

    def assertError(self, reply, status, mentions=None, param=None):
        """`reply` has `status` and the OpenAI error body {"error": {"message", "type", "param", "code"}}; the
        message names `mentions`, and `param` is the field named (when given)."""
        self.assertEqual(reply.status, status, str(reply))
        err = reply.json().get("error")
        self.assertIsInstance(err, dict, f"no error object: {reply}")
        self.assertIsInstance(err.get("message"), str, str(reply))
        self.assertTrue(err["message"], f"empty error message: {reply}")
        self.assertIsInstance(err.get("type"), str, str(reply))
        self.assertIn("code", err, f"no error.code (a string or null): {reply}")
        self.assertTrue(err["code"] is None or isinstance(err["code"], str), str(reply))
        self.assertIn("param", err, f"no error.param (a string or null): {reply}")
        if mentions:
            self.assertIn(mentions.lower(), err["message"].lower(), f"the message does not name {mentions!r}: {reply}")
        if param:
            self.assertEqual(err["param"], param, f"error.param: {reply}")
        if status == 503:
            self.assertEqual(reply.headers.get("retry-after"), "1", f"a 503 without Retry-After: {reply}")
        return err

    def chat(self, prompt, max_tokens=16, **extra):
        """The content of a non-streamed greedy chat completion, and the whole response."""
        r = self.assertOk(self.server.post("/v1/chat/completions", chat_body(prompt, max_tokens, **extra)))
        return r["choices"][0]["message"]["content"], r

    def stream_chat(self, body, path="/v1/chat/completions"):
        """A streamed request read to its end; the reply and its JSON chunks (the final [DONE] checked, removed)."""
        reply = self.server.post(path, body)
        if reply.status != 200:
            self.fail_with_log(f"expected 200: {reply}")
        self.assertTrue(reply.headers.get("content-type", "").startswith("text/event-stream"), str(reply))
        payloads = sse_payloads(reply)
        self.assertEqual(payloads[-1], "[DONE]", str(reply))
        self.assertNotIn("[DONE]", payloads[:-1], str(reply))
        return reply, [json.loads(p) for p in payloads[:-1]]


def start_stream(server, body, rcvbuf=None):
    """Sends a streamed chat request and reads it up to its first event with content (the first event, with the
    role, may come before the request has a slot; a token means it is generating). Returns (conn, response, the
    bytes read). rcvbuf: a small receive buffer, so that a server writing more than it holds must wait."""
    conn = server.connect(30)
    sock = conn.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", server.port))
    asked = server.send(conn, "POST", "/v1/chat/completions", body)
    resp = conn.getresponse()
    resp.raw_socket = sock  # conn.sock is None already when the response says Connection: close
    if resp.status != 200:
        headers = {k.lower(): v for k, v in resp.getheaders()}
        raise AssertionError(f"expected 200: {Reply(asked, resp.status, headers, resp.read())}")
    got = b""
    while True:
        line = resp.readline()
        if not line:
            raise AssertionError(f"the stream ended before its first token: {got[:2000]!r}")
        got += line
        if line.startswith(b"data: {"):
            chunk = json.loads(line[6:])
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                return conn, resp, got


def abort(conn, resp):
    """Closes the connection with a reset (SO_LINGER 0), as a killed client does."""
    resp.raw_socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    resp.close()
    conn.close()
    resp.raw_socket.close()




def make_slow_model(folder, layers=4):
    """A LLaMA folder whose every token costs reading some 50 MB of weights per layer (hidden 1024, FFN 2816, F32,
    context 4096), so that a long reply takes seconds on any machine: tests catch it generating without relying on
    timing. The layers' matrices are all zero (written out: memory to read, as real weights are), the embeddings and
    norms all one, and lm_head one only in the row of " the" (id 265 of stories260K's tokenizer, copied in): the
    reply is " the" over and over, never an end of text, whatever the kernels and the sampling."""
    hidden, ffn, heads, vocab, token = 1024, 2816, 8, 512, 265
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
                   "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
                   "num_key_value_heads": heads, "vocab_size": vocab, "max_position_embeddings": 4096,
                   "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
                   "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}, f)
    shutil.copy(os.path.join(MODEL, "tokenizer.model"), folder)
    specs = [("model.embed_tokens.weight", [vocab, hidden], "ones"), ("model.norm.weight", [hidden], "ones"),
             ("lm_head.weight", [vocab, hidden], "row")]
    for i in range(layers):
        p = f"model.layers.{i}."
        specs += [(p + "input_layernorm.weight", [hidden], "ones"),
                  (p + "post_attention_layernorm.weight", [hidden], "ones")]
        specs += [(p + n, shape, "zero") for n, shape in (
            ("self_attn.q_proj.weight", [hidden, hidden]), ("self_attn.k_proj.weight", [hidden, hidden]),
            ("self_attn.v_proj.weight", [hidden, hidden]), ("self_attn.o_proj.weight", [hidden, hidden]),
            ("mlp.gate_proj.weight", [ffn, hidden]), ("mlp.up_proj.weight", [ffn, hidden]),
            ("mlp.down_proj.weight", [hidden, ffn]))]
    header, pos = {}, 0
    for name, shape, _ in specs:
        n = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    one = struct.pack("<f", 1.0)
    zeros = bytes(16 << 20)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape, kind in specs:
            n = math.prod(shape)
            if kind == "ones":
                f.write(one * n)
            elif kind == "row":
                f.write(bytes(4 * token * shape[1]) + one * shape[1] + bytes(4 * (n - (token + 1) * shape[1])))
            else:
                # written, not left as a hole: a hole reads as one shared page of zeros, from the cache, and the
                # model would be fast
                for at in range(0, 4 * n, len(zeros)):
                    f.write(zeros[:min(len(zeros), 4 * n - at)])
    return folder


def raw_socket(port, timeout=10.0, rcvbuf=None):
    """A TCP connection to the server, with `timeout` on every operation."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


class RawResponse:
    def __init__(self, status, headers, body, framing):
        self.status, self.headers, self.body, self.framing = status, headers, body, framing

    def __repr__(self):
        return f"{self.status} {self.framing} {self.headers} {self.body[:300]!r}"


def read_response(f):
    """Reads one HTTP response from the binary file `f` (sock.makefile("rb")): by Content-Length, by chunks, or up
    to the connection's end (framing "length", "chunked" or "close"). None when the connection ends first."""
    line = f.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise AssertionError(f"not a status line: {line!r}")
    status = int(parts[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status in (100,):
        return read_response(f)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return RawResponse(status, headers, body, "chunked")
            body += f.read(size)
            f.readline()
    if "content-length" in headers:
        return RawResponse(status, headers, f.read(int(headers["content-length"])), "length")
    return RawResponse(status, headers, f.read(), "close")


class SlowClients:
    """`n` connections that send a request's headers one byte at a time, one byte per connection every `interval`
    seconds, never finishing (slowloris); `idle=True`: connections that send nothing at all."""
    HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + b"X-Padding: " + b"x" * 4000 + b"\r\n")

    def __init__(self, port, n, interval=1.0, idle=False):
        self.socks, self.sent, self.closed = [], 0, 0
        for _ in range(n):
            self.socks.append(raw_socket(port))
        self._stop = threading.Event()
        self._thread = None
        if not idle:
            self._thread = threading.Thread(target=self._drip, args=(interval,), daemon=True)
            self._thread.start()

    def _drip(self, interval):
        i = 0
        while not self._stop.wait(interval):
            byte = self.HEAD[i % len(self.HEAD):i % len(self.HEAD) + 1]
            i += 1
            for s in self.socks:
                try:
                    s.send(byte)
                    self.sent += 1
                except OSError:
                    self.closed += 1

    def close(self):
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        for s in self.socks:
            s.close()

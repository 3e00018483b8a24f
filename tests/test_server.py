#!/usr/bin/python3
"""`plainllama serve`: the OpenAI-compatible HTTP server, tested over 127.0.0.1 with the standard library only.

Each test class starts its own server on stories260K (`--port 0`: the port is read from the "listening on
http://127.0.0.1:PORT" line the server prints on stderr once it is ready) and kills it when done. Checked:
/health and /v1/models; chat and text completions, plain and streamed (the SSE framing byte for byte: every
event is "data: ...\\n\\n", the first delta carries the role, the usage chunk when asked, "data: [DONE]\\n\\n" at
the end); `stop`; the OpenAI error shape and status of malformed or unsupported requests (400), a missing or
wrong key (401), a body over --max-body (413), an unknown path (404), a full wait queue (503); greedy outputs
that do not change when 8 requests share 4 slots; a client that hangs up mid-stream freeing its slot; SIGTERM
and SIGINT ending the server with status 0; the real `openai` npm client (tests/openai/client_test.mjs, skipped
without node or without tests/openai/node_modules, which scripts/setup.sh installs); scripts/loadgen.py.

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import http.client
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
import threading
import time
import unittest

import unittest_summary

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
    """`plainllama serve` on stories260K at 127.0.0.1:<a free port>; all it writes on stderr is kept in self.log."""

    def __init__(self, *extra):
        args = [BINARY, "serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0", "-t", "1", *extra]
        self.args = args
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        env.pop("PLAINLLAMA_API_KEY", None)  # the server's default --api-key
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)
        self._err, self._out, self._eof = b"", b"", False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stderr, "_err"), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stdout, "_out"), daemon=True)]
        for t in self._threads:
            t.start()
        m = self.wait_log(r"listening on http://127\.0\.0\.1:(\d+)", timeout=30)
        if not m:
            self.kill()
            raise AssertionError(f"the server did not start: {' '.join(args)}\nexit status {self.proc.returncode}; "
                                 f"stderr:\n{self.log}")
        self.port = int(m.group(1))

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

    def assertError(self, reply, status, mentions=None):
        """`reply` has `status` and the OpenAI error body {"error": {"message", "type", "code"}}."""
        self.assertEqual(reply.status, status, str(reply))
        err = reply.json().get("error")
        self.assertIsInstance(err, dict, f"no error object: {reply}")
        self.assertIsInstance(err.get("message"), str, str(reply))
        self.assertTrue(err["message"], f"empty error message: {reply}")
        self.assertIsInstance(err.get("type"), str, str(reply))
        self.assertIn("code", err, f"no error.code (a string or null): {reply}")
        self.assertTrue(err["code"] is None or isinstance(err["code"], str), str(reply))
        if mentions:
            self.assertIn(mentions.lower(), err["message"].lower(), f"the message does not name {mentions!r}: {reply}")
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


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Api(ServerTest):
    """The endpoints, the response shapes and the 400/404 errors on one server with default settings."""

    def test_health_and_models(self):
        r = self.server.request("GET", "/health")
        self.assertEqual(self.assertOk(r), {"status": "ok"}, str(r))
        self.assertIn("application/json", r.headers.get("content-type", ""), str(r))
        r = self.server.request("GET", "/v1/models")
        models = self.assertOk(r)
        self.assertEqual(models.get("object"), "list", str(r))
        self.assertEqual(len(models.get("data", [])), 1, str(r))
        m = models["data"][0]
        self.assertEqual((m.get("id"), m.get("object"), m.get("owned_by")), (MODEL_ID, "model", "plainllama"), str(r))
        self.assertIsInstance(m.get("created"), int, str(r))
        # one log line per request: the path shows up on stderr
        self.assertTrue(self.server.wait_log(r"/v1/models", 5), f"no log line for GET /v1/models:\n{self.server.log}")

    def test_chat_completion(self):
        text, r = self.chat("Once upon a time", 16, model="any-name-is-accepted")
        self.assertTrue(r.get("id", "").startswith("chatcmpl-"), r)
        self.assertEqual(r.get("object"), "chat.completion", r)
        self.assertIsInstance(r.get("created"), int, r)
        self.assertEqual(r.get("model"), MODEL_ID, r)
        self.assertEqual(len(r["choices"]), 1, r)
        c = r["choices"][0]
        self.assertEqual((c.get("index"), c["message"].get("role"), c.get("finish_reason")),
                         (0, "assistant", "length"), r)
        self.assertIsInstance(text, str, r)
        self.assertTrue(text.strip(), r)
        u = r["usage"]
        self.assertEqual(u["completion_tokens"], 16, r)
        self.assertGreater(u["prompt_tokens"], 0, r)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"], r)
        # greedy is deterministic; max_completion_tokens is max_tokens' newer name; the accepted extras change nothing
        again, r2 = self.chat("Once upon a time", None, max_completion_tokens=16, top_p=1, seed=42, n=1, user="u1",
                              frequency_penalty=0, presence_penalty=0, stream=False)
        self.assertEqual(again, text, r2)
        self.assertEqual(counts(r2["usage"]), counts(u), r2)
        _, r3 = self.chat("Once upon a time", None, max_completion_tokens=5)
        self.assertEqual(r3["usage"]["completion_tokens"], 5, r3)
        # several messages with roles are accepted (the raw template renders them as text)
        r4 = self.assertOk(self.server.post("/v1/chat/completions", {
            "model": MODEL_ID, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "system", "content": "Stories for kids."}, {"role": "user", "content": "The cat"},
                         {"role": "assistant", "content": "sat."}, {"role": "user", "content": "Then"}]}))
        self.assertEqual(r4["usage"]["completion_tokens"], 4, r4)

    def test_text_completion(self):
        r = self.assertOk(self.server.post("/v1/completions", completion_body("Once upon a time", 16)))
        self.assertEqual(r.get("object"), "text_completion", r)
        self.assertIsInstance(r.get("id"), str, r)
        self.assertIsInstance(r.get("created"), int, r)
        self.assertEqual(r.get("model"), MODEL_ID, r)
        c = r["choices"][0]
        self.assertEqual((c.get("index"), c.get("finish_reason")), (0, "length"), r)
        self.assertIsInstance(c.get("text"), str, r)
        self.assertTrue(c["text"].strip(), r)
        u = r["usage"]
        self.assertEqual(u["completion_tokens"], 16, r)
        self.assertGreater(u["prompt_tokens"], 0, r)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"], r)

    def test_stop(self):
        for path, body, get in (
                ("/v1/chat/completions", chat_body, lambda r: r["choices"][0]["message"]["content"]),
                ("/v1/completions", completion_body, lambda r: r["choices"][0]["text"])):
            full = get(self.assertOk(self.server.post(path, body("Once upon a time", 32))))
            # a 4-character piece from the middle of the unstopped output; the output is cut where it first occurs
            stop = full[len(full) // 2:len(full) // 2 + 4]
            self.assertEqual(len(stop), 4, full)
            cut = full[:full.index(stop)]
            for value in (stop, ["never in this story", stop]):
                r = self.assertOk(self.server.post(path, body("Once upon a time", 32, stop=value)))
                self.assertEqual((get(r), r["choices"][0]["finish_reason"]), (cut, "stop"),
                                 f"{path} stop={value!r}; the unstopped output: {full!r}; response: {r}")
                self.assertLess(r["usage"]["completion_tokens"], 32, r)

    def test_chat_stream_framing(self):
        text, plain = self.chat("Once upon a time", 16)
        for usage in (True, False):
            body = chat_body("Once upon a time", 16, stream=True)
            if usage:
                body["stream_options"] = {"include_usage": True}
            reply, chunks = self.stream_chat(body)
            self.assertTrue(reply.body.endswith(b"data: [DONE]\n\n"), str(reply))
            if usage:
                last = chunks.pop()
                self.assertEqual(last.get("choices"), [], f"no final usage chunk: {reply}")
                self.assertEqual(counts(last.get("usage")), counts(plain["usage"]), str(reply))
            for c in chunks:
                self.assertEqual(c.get("object"), "chat.completion.chunk", str(reply))
                self.assertEqual(c.get("model"), MODEL_ID, str(reply))
                self.assertIsInstance(c.get("created"), int, str(reply))
                self.assertTrue(c.get("id", "").startswith("chatcmpl-"), str(reply))
                self.assertEqual(len(c.get("choices", [])), 1, f"a chunk without its choice: {reply}")
            self.assertEqual(len({c["id"] for c in chunks}), 1, f"the chunks' ids differ: {reply}")
            self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant", str(reply))
            reasons = [c["choices"][0].get("finish_reason") for c in chunks]
            self.assertEqual(reasons[-1], "length", str(reply))
            self.assertEqual(reasons[:-1], [None] * (len(reasons) - 1), str(reply))
            joined = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
            self.assertEqual(joined, text, str(reply))

    def test_completion_stream(self):
        r = self.assertOk(self.server.post("/v1/completions", completion_body("The dog", 16)))
        reply, chunks = self.stream_chat(completion_body("The dog", 16, stream=True,
                                                         stream_options={"include_usage": True}),
                                         path="/v1/completions")
        last = chunks.pop()
        self.assertEqual((last.get("choices"), counts(last.get("usage"))), ([], counts(r["usage"])), str(reply))
        self.assertTrue(all(c.get("object") == "text_completion" for c in chunks), str(reply))
        self.assertEqual(chunks[-1]["choices"][0].get("finish_reason"), "length", str(reply))
        self.assertEqual("".join(c["choices"][0].get("text") or "" for c in chunks), r["choices"][0]["text"],
                         str(reply))

    def test_malformed_json(self):
        for body in (b'{"messages": [{"role": "user", "content": "hi"}', b"not json", b"", b"[1, 2]"):
            self.assertError(self.server.post("/v1/chat/completions", body), 400)
        self.assertError(self.server.post("/v1/completions", b'{"prompt": '), 400)

    def test_wrong_types_name_the_field(self):
        for field, value in (("max_tokens", "ten"), ("messages", "hi"), ("temperature", "hot"), ("top_p", "all"),
                             ("seed", "x"), ("stop", 5), ("stream", "yes"), ("max_completion_tokens", [1]),
                             ("stream_options", "on"), ("n", "two")):
            body = chat_body("Once upon a time", 4)
            body[field] = value
            self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions=field)
        self.assertError(self.server.post("/v1/completions", completion_body("x", "ten")), 400,
                         mentions="max_tokens")
        self.assertError(self.server.post("/v1/completions", completion_body(5, 4)), 400, mentions="prompt")
        self.assertError(self.server.post("/v1/chat/completions", {"model": MODEL_ID, "max_tokens": 4}), 400,
                         mentions="messages")
        # a content part whose type is not a string; a seed no 64-bit integer holds
        body = chat_body("x", 4)
        body["messages"][0]["content"] = [{"type": 1, "text": "x"}]
        self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions="content")
        for seed in (9223372036854775808.0, 1e300, 18446744073709551616, 1.5):
            self.assertError(self.server.post("/v1/chat/completions", chat_body("x", 4, seed=seed)), 400,
                             mentions="seed")

    def test_unsupported_values(self):
        self.assertError(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4, n=2)), 400)
        self.assertError(self.server.post("/v1/completions", completion_body("Once upon a time", 4, n=3)), 400)
        for field in ("frequency_penalty", "presence_penalty"):
            body = chat_body("Once upon a time", 4)
            body[field] = 0.5
            err = self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions=field)
            self.assertRegex(err["message"].lower(), "unsupported|not supported", err)

    def test_prompt_longer_than_the_context(self):
        self.assertError(self.server.post("/v1/chat/completions", chat_body(LONG_PROMPT, 4)), 400)
        self.assertError(self.server.post("/v1/completions", completion_body(LONG_PROMPT, 4)), 400)
        self.assertError(self.server.post("/v1/chat/completions", chat_body(LONG_PROMPT, 4, stream=True)), 400)

    def test_unknown_path(self):
        self.assertError(self.server.request("GET", "/v1/nothing"), 404)
        self.assertError(self.server.post("/v1/nothing", chat_body("hi")), 404)
        self.assertOk(self.server.request("GET", "/health"))  # still serving


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class AuthAndLimits(ServerTest):
    """--api-key (401 without or with a wrong key, /health open), --max-body (413), and the openai npm client."""
    server_args = ("--api-key", KEY, "--max-body", "100000")

    def test_api_key(self):
        self.assertOk(self.server.request("GET", "/health"))
        for key in (None, "wrong-key"):
            self.assertError(self.server.request("GET", "/v1/models", key=key), 401)
            self.assertError(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4), key=key), 401)
            self.assertError(self.server.post("/v1/completions", completion_body("Once upon a time", 4), key=key), 401)
        self.assertError(self.server.request("GET", "/v1/models", headers={"Authorization": KEY}), 401)
        self.assertOk(self.server.request("GET", "/v1/models", key=KEY))
        self.assertOk(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4), key=KEY))

    def test_body_over_max_body(self):
        # ~200 kB of valid JSON; the body is written from another thread while the reply is read, so a server that
        # answers before reading the whole body is seen answering (not as a client stuck in a write)
        body = json.dumps(chat_body("Once upon a time " * 12000, 4)).encode()
        self.assertGreater(len(body), 200000)
        conn = self.server.connect(30)
        try:
            conn.putrequest("POST", "/v1/chat/completions")
            for k, v in (("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                         ("Authorization", f"Bearer {KEY}")):
                conn.putheader(k, v)
            conn.endheaders()
            sock = conn.sock

            def write():
                try:
                    sock.sendall(body)
                except OSError:
                    pass  # the server closed the connection after its answer

            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            try:
                resp = conn.getresponse()
                reply = Reply(describe("POST", "/v1/chat/completions", body), resp.status,
                              {k.lower(): v for k, v in resp.getheaders()}, resp.read())
            except (ConnectionResetError, http.client.RemoteDisconnected) as e:
                self.fail_with_log(f"POST of {len(body)} bytes (--max-body 100000): no HTTP answer, the connection "
                                   f"was reset or closed ({e!r})")
            writer.join(10)
        finally:
            conn.close()
        self.assertError(reply, 413)
        self.assertOk(self.server.request("GET", "/health"))
        self.assertOk(self.server.post("/v1/completions", completion_body("Once upon a time", 4), key=KEY))

    @unittest.skipUnless(shutil.which("node"), "node is not installed")
    @unittest.skipUnless(os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")),
                         "tests/openai/node_modules/openai is not installed (scripts/setup.sh runs npm install)")
    def test_openai_node_client(self):
        env = dict(os.environ, PLAINLLAMA_BASE_URL=f"http://127.0.0.1:{self.server.port}/v1",
                   PLAINLLAMA_API_KEY=KEY, PLAINLLAMA_MODEL=MODEL)
        r = subprocess.run(["node", os.path.join(NODE_DIR, "client_test.mjs")], capture_output=True, text=True,
                           env=env, cwd=SOURCE_DIR, timeout=120)
        if r.returncode != 0:
            self.fail_with_log(f"node tests/openai/client_test.mjs: exit status {r.returncode}\nstdout:\n{r.stdout}\n"
                               f"stderr:\n{r.stderr}")


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Isolation(ServerTest):
    """4 slots decoding together: each greedy output is the one the request gets alone."""
    server_args = ("--parallel", "4", "--queue", "16")

    def run_one(self, i, stream):
        body = chat_body(PROMPTS[i], 48)
        if not stream:
            return self.chat(PROMPTS[i], 48)[0]
        _, chunks = self.stream_chat(dict(body, stream=True))
        return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)

    def test_concurrent_outputs_equal_the_outputs_alone(self):
        alone = [self.run_one(i, False) for i in range(len(PROMPTS))]
        self.assertGreater(len(set(alone)), 4, alone)
        for rnd in range(2):
            got = [None] * len(PROMPTS)
            errors = []
            barrier = threading.Barrier(len(PROMPTS))

            def client(i):
                try:
                    barrier.wait(10)
                    got[i] = self.run_one(i, (i + rnd) % 2 == 0)
                except BaseException as e:  # reported by the main thread
                    errors.append(f"{PROMPTS[i]!r}: {e}")

            threads = [threading.Thread(target=client, args=(i,)) for i in range(len(PROMPTS))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            self.assertEqual(errors, [], f"round {rnd}")
            for i, p in enumerate(PROMPTS):
                how = "streamed" if (i + rnd) % 2 == 0 else "plain"
                self.assertEqual(got[i], alone[i], f"round {rnd}: prompt {p!r} ({how}) among 8 concurrent requests "
                                 "differs from its output alone")

    def test_loadgen(self):
        r = subprocess.run([sys.executable, LOADGEN, "--url", f"http://127.0.0.1:{self.server.port}", "-k", "4",
                            "-n", "8", "--max-tokens", "16", "--prompt-tokens", "16", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}")
        rep = json.loads(r.stdout)
        self.assertEqual((rep["requests"], rep["ok"], rep["errors"]), (8, 8, 0), rep)
        self.assertEqual(rep["completion_tokens"], 8 * 16, rep)
        self.assertGreater(rep["tokens_per_s"], 0, rep)
        for k in ("ttft_ms", "latency_ms"):
            self.assertLessEqual(rep[k]["median"], rep[k]["p95"], rep)
        self.assertLessEqual(rep["ttft_ms"]["p95"], rep["latency_ms"]["p95"], rep)
        r = subprocess.run([sys.executable, LOADGEN, "--url", f"http://127.0.0.1:{self.server.port}", "-k", "2",
                            "-n", "2", "--max-tokens", "4"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}")
        self.assertIn("tok/s", r.stdout)


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


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Disconnect(ServerTest):
    """One slot: a client hanging up mid-stream frees it for the next request."""
    server_args = ("--parallel", "1")

    def test_hang_up_mid_stream_frees_the_slot(self):
        for _ in range(3):
            conn, resp, _ = start_stream(self.server, chat_body("Once upon a time", 480, stream=True))
            abort(conn, resp)
            t0 = time.monotonic()
            reply = self.server.post("/v1/chat/completions", chat_body("The dog", 8), timeout=10)
            self.assertOk(reply)
            self.assertLess(time.monotonic() - t0, 10)
        self.assertIsNone(self.server.proc.poll(), self.server.log)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class QueueFull(ServerTest):
    """One slot and a wait queue of one: a third concurrent request is refused with 503."""
    server_args = ("--parallel", "1", "--queue", "1")

    def test_503_when_the_queue_is_full(self):
        # A runs in the slot (a token has arrived; it is not read further, through a small receive buffer,
        # until B or C is answered), B and C are sent while A's 480 tokens are generated: one of them waits in the
        # queue, the other is refused. If the server does not stall on A's unread stream, the window is A's
        # generation (some 0.1 s at least); a retry covers a scheduler that stalls the test that long.
        seen = []
        for attempt in range(3):
            a, resp_a, _ = start_stream(self.server, chat_body("Once upon a time", 480, stream=True), rcvbuf=4096)
            replies, answered = [], threading.Event()

            def client(prompt):
                try:
                    replies.append(self.server.post("/v1/chat/completions", chat_body(prompt, 480, stream=True)))
                except Exception as e:  # shown by the main thread
                    replies.append(e)
                answered.set()

            threads = [threading.Thread(target=client, args=(p,)) for p in ("The dog", "Lily and Ben")]
            for t in threads:
                t.start()
            answered.wait(10)
            first = list(replies)
            rest_a = resp_a.read()  # now A may go on
            a.close()
            for t in threads:
                t.join(30)
            self.assertTrue(rest_a.endswith(b"data: [DONE]\n\n"), rest_a[-300:])
            for r in replies:
                if not isinstance(r, Reply):
                    self.fail_with_log(f"B or C: {r!r}")
            seen.append([r.status for r in replies])
            refused = [r for r in replies if r.status == 503]
            if refused:
                self.assertEqual(len(refused), 1, "".join(map(str, replies)))
                self.assertIs(first[0], refused[0], "the 503 came after the other request was served")
                self.assertError(refused[0], 503)
                served = [r for r in replies if r.status != 503][0]
                self.assertEqual(served.status, 200, str(served))
                self.assertEqual(sse_payloads(served)[-1], "[DONE]", str(served))
                break
            for r in replies:
                self.assertEqual(r.status, 200, str(r))
        else:
            self.fail_with_log(f"no 503 in 3 attempts (statuses of B and C in the order answered: {seen})")
        self.assertOk(self.server.post("/v1/chat/completions", chat_body("The dog", 8)))  # the queue drained


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Signals(unittest.TestCase):
    """SIGTERM during a stream, SIGINT when idle: exit status 0, the stream ended cleanly."""

    def setUp(self):
        self.server = Server("--parallel", "1")

    def tearDown(self):
        self.server.kill()

    def test_sigterm_during_a_stream(self):
        conn, resp, first = start_stream(self.server, chat_body("Once upon a time", 480, stream=True))
        try:
            self.assertEqual(self.server.proc.poll(), None)
            self.server.proc.send_signal(signal.SIGTERM)
            try:
                rest = resp.read()
            except (http.client.IncompleteRead, ConnectionError) as e:
                self.fail(f"after SIGTERM the stream did not end cleanly: {e!r}\n{self.server.log}")
        finally:
            conn.close()
        try:
            status = self.server.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.fail(f"the server did not exit within 10 s of SIGTERM\n{self.server.log}")
        self.assertEqual(status, 0, self.server.log)
        events = first + rest
        self.assertTrue(events.endswith(b"\n\n"), f"the stream stopped inside an event: {events[-300:]!r}")
        for e in events[:-2].split(b"\n\n"):
            self.assertTrue(e.startswith(b"data: "), e)
            if e != b"data: [DONE]":
                json.loads(e[6:])

    def test_sigint_when_idle(self):
        self.assertEqual(self.server.stop(signal.SIGINT), 0, self.server.log)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class LoadFailure(unittest.TestCase):
    def test_a_model_that_does_not_load_ends_the_server(self):
        # the socket is already listening when the load fails: the server must still exit, with the reason
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([BINARY, "serve", "-m", tmp, "--port", "0", "-t", "1"], capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("config.json", r.stderr)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

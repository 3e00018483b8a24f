#!/usr/bin/python3
"""`plainllama serve`: the OpenAI-compatible API, tested over 127.0.0.1 with the standard library only.

Each test class starts its own server on stories260K (`--port 0`: the port is read from the "listening on
http://127.0.0.1:PORT" line the server prints on stderr once it is ready) and kills it when done. Checked:
/health and /v1/models; chat and text completions, plain and streamed (the SSE framing byte for byte: every
event is "data: ...\\n\\n", the first delta carries the role, the usage chunk when asked, "data: [DONE]\\n\\n" at
the end); `stop` (16 strings at most); max_tokens 0 (nothing generated); per-request top_k, min_p and
repeat_penalty; seeds over the whole 64-bit range; the OpenAI error shape (message, type, param naming the field,
code) and status of malformed or unsupported requests (400; numbers beyond a double too), a missing or wrong key
(401; the key from --api-key or PLAINLLAMA_API_KEY, an empty one refused at start), a body over --max-body (413),
an unknown path (404); greedy outputs that do not change when 8 requests share 4 slots; the real `openai` npm
client (tests/openai/client_test.mjs, skipped without node or without tests/openai/node_modules, which
scripts/setup.sh installs); scripts/loadgen.py. Loading, draining, signals and hang-ups: test_server_lifecycle.py;
slow and hostile clients: test_server_hostile.py.

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

import unittest_summary
from server_util import (BINARY, HAS_SERVE, KEY, LOADGEN, LONG_PROMPT, MODEL, MODEL_ID, NODE_DIR, PROMPTS, SOURCE_DIR,
                         Reply, Server, ServerTest, chat_body, completion_body, counts, describe, raw_socket,
                         read_response)


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
            self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions=field, param=field)
        self.assertError(self.server.post("/v1/completions", completion_body("x", "ten")), 400,
                         mentions="max_tokens", param="max_tokens")
        self.assertError(self.server.post("/v1/completions", completion_body(5, 4)), 400, mentions="prompt")
        self.assertError(self.server.post("/v1/chat/completions", {"model": MODEL_ID, "max_tokens": 4}), 400,
                         mentions="messages")
        # a content part whose type is not a string; a seed no 64-bit integer holds
        body = chat_body("x", 4)
        body["messages"][0]["content"] = [{"type": 1, "text": "x"}]
        self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions="content")
        for seed in (9223372036854775808.0, 1e300, 18446744073709551616, -9223372036854775809, 1.5):
            self.assertError(self.server.post("/v1/chat/completions", chat_body("x", 4, seed=seed)), 400,
                             mentions="seed", param="seed")

    def test_numbers_beyond_a_double(self):
        # JSON numbers a double cannot hold: a 400 naming the field (not a 500)
        for field, text in (("max_tokens", b"1e999"), ("temperature", b"-1e999"), ("seed", b"1" + b"0" * 400)):
            body = b'{"messages": [{"role": "user", "content": "Once upon a time"}], "%s": %s}' % (field.encode(), text)
            self.assertError(self.server.post("/v1/chat/completions", body), 400, mentions=field, param=field)
        self.assertError(self.server.post("/v1/completions", b"1e999"), 400, mentions="out of range")

    def test_max_tokens_zero_generates_nothing(self):
        # no new token: the prompt only (what echo scoring will ask for)
        for path, body, text in (
                ("/v1/chat/completions", chat_body, lambda c: c["message"]["content"]),
                ("/v1/completions", completion_body, lambda c: c["text"])):
            r = self.assertOk(self.server.post(path, body("Once upon a time", 0)))
            c = r["choices"][0]
            self.assertEqual((text(c), c["finish_reason"], r["usage"]["completion_tokens"]), ("", "length", 0), r)
            self.assertGreater(r["usage"]["prompt_tokens"], 0, r)
        reply, chunks = self.stream_chat(chat_body("Once upon a time", 0, stream=True))
        self.assertEqual("".join(c["choices"][0]["delta"].get("content") or "" for c in chunks), "", str(reply))
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length", str(reply))

    def test_seed_takes_any_64_bit_integer(self):
        # signed or not: a negative seed is its two's complement, so each pair names one seed
        def sampled(seed):
            return self.chat("Once upon a time", 24, temperature=1.5, top_k=0, top_p=1, min_p=0, seed=seed)[0]

        for a, b in ((-1, 2**64 - 1), (-2**63, 2**63)):
            self.assertEqual(sampled(a), sampled(b), f"seeds {a} and {b}")
        self.assertNotEqual(sampled(2**63), sampled(2**63 + 1))

    # Fields the server refuses with a 400 naming them (remove one from here when the server learns it); the rest
    # of OpenAI's fields (logprobs, n, penalties, logit_bias, response_format): test_server_structured.py.
    UNSUPPORTED = {"tools": [{"type": "function", "function": {"name": "f"}}]}

    def test_unsupported_values(self):
        for field, value in self.UNSUPPORTED.items():
            for path, body in (("/v1/chat/completions", chat_body), ("/v1/completions", completion_body)):
                err = self.assertError(self.server.post(path, body("Once upon a time", 4, **{field: value})), 400,
                                       mentions=field, param=field)
                self.assertRegex(err["message"].lower(), "unsupported|not supported", err)
        # more choices than slots: each choice takes one
        self.assertError(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4, n=100)), 400,
                         mentions="slot", param="n")
        self.assertError(self.server.post("/v1/completions", completion_body("Once upon a time", 4, n=129)), 400,
                         param="n")

    def test_sampling_fields_per_request(self):
        # top_k, min_p, repeat_penalty, llama.cpp's fields, each changes the reply (the server's defaults: --top-k 40,
        # --min-p 0.05, --repeat-penalty 1)
        greedy, _ = self.chat("Once upon a time", 48)
        hot = dict(temperature=1.5, seed=7, top_p=1)
        free, _ = self.chat("Once upon a time", 48, **hot, top_k=0, min_p=0)
        self.assertNotEqual(free, greedy, "sampling at temperature 1.5 gave the greedy reply: the test shows nothing")
        self.assertEqual(self.chat("Once upon a time", 48, **hot, top_k=1, min_p=0)[0], greedy, "top_k 1")
        self.assertEqual(self.chat("Once upon a time", 48, **hot, top_k=0, min_p=1)[0], greedy, "min_p 1")
        penalized, _ = self.chat("Once upon a time", 48, repeat_penalty=1.5)
        self.assertNotEqual(penalized, greedy, "repeat_penalty 1.5 changed nothing")
        self.assertEqual(self.chat("Once upon a time", 48, repeat_penalty=1)[0], greedy)

    def test_sixteen_stop_strings_at_most(self):
        stops = [f"never{i}" for i in range(17)]
        self.assertOk(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4, stop=stops[:16])))
        self.assertError(self.server.post("/v1/chat/completions", chat_body("Once upon a time", 4, stop=stops)), 400,
                         mentions="16", param="stop")

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

    def test_api_key_scheme_and_bytes(self):
        # a NUL, or one byte more or less, is no match; the scheme in any case
        s = raw_socket(self.server.port)
        try:
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\x00XYZ\r\n\r\n" % KEY.encode())
            r = read_response(s.makefile("rb"))
        finally:
            s.close()
        self.assertEqual(r.status, 400, repr(r))
        for value in (f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", f"Basic {KEY}"):
            self.assertError(self.server.request("GET", "/v1/models", headers={"Authorization": value}), 401)
        self.assertOk(self.server.request("GET", "/v1/models", headers={"Authorization": f"bearer {KEY}"}))

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
class ApiKeys(unittest.TestCase):
    """Where the key comes from: --api-key, else PLAINLLAMA_API_KEY; an empty one is refused, blanks around it are
    left out with a warning."""

    def check_key(self, server, key):
        try:
            self.assertEqual(server.request("GET", "/v1/models").status, 401, server.log)
            self.assertEqual(server.request("GET", "/v1/models", key=key).status, 200, server.log)
        finally:
            server.kill()

    def test_key_from_the_environment(self):
        self.check_key(Server(env={"PLAINLLAMA_API_KEY": KEY}), KEY)
        self.check_key(Server("--api-key", "sk-flag", env={"PLAINLLAMA_API_KEY": KEY}), "sk-flag")

    def test_key_with_a_line_break_is_trimmed(self):
        server = Server(env={"PLAINLLAMA_API_KEY": KEY + "\n"})
        self.assertIn("PLAINLLAMA_API_KEY has blanks or line breaks around the key", server.log)
        self.check_key(server, KEY)

    def test_empty_or_blank_keys_are_refused(self):
        for args, env, says in ((("--api-key", ""), {}, "--api-key is empty"),
                                ((), {"PLAINLLAMA_API_KEY": ""}, "PLAINLLAMA_API_KEY is empty"),
                                ((), {"PLAINLLAMA_API_KEY": " \n"}, "PLAINLLAMA_API_KEY is blank"),
                                (("--api-key", "sk one"), {}, "byte 3 of the key")):
            server = Server(*args, env=env, wait=False)
            try:
                status = server.wait_exit(30)
                self.assertEqual(status, 2, f"{args} {env}: exit status {status}\n{server.log}")
                self.assertIn(says, server.log)
            finally:
                server.kill()


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


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

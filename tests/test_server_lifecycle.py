#!/usr/bin/python3
"""`plainllama serve` from loading to exit, with requests caught in the middle: /health while loading and a signal
then (exit 128 + N); a client hanging up mid-reply (its generation cancelled, its slot freed); a full queue (503);
SIGTERM during a stream (new requests 503, /health "shutting down", the stream cut by the 10 s drain cap with an
error event, exit 0), a second signal ending the drain at once; SIGINT when idle; a model that does not load.

stories260K writes a whole reply in a few milliseconds, too fast to catch in the middle without timing. These tests
use a model built for them (server_util.make_slow_model: ~400 MB of zero weights read per token, a reply of " the"
repeated, no end of text), so that a reply of a few thousand tokens lasts well over 10 s on any machine; the tests
wait for signs (a log line, a first token, a 503) and never for a fixed time. The loading state is held by the
server's own stderr: a pipe filled to the brim before it starts, so that the server, listening already, blocks on
its "loading" line until the test reads the pipe.

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import fcntl
import json
import os
import re
import select
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
from server_util import (BINARY, HAS_SERVE, Reply, Server, abort, chat_body, make_slow_model, raw_socket,
                         read_response, start_stream)

SLOW_DIR = None
LONG = 4000  # tokens asked for a reply that outlasts every wait here (the slow model's context is 4096)


def setUpModule():
    global SLOW_DIR
    # 8 layers: a 4,000-token reply reads some 1.6 TB, more than any machine reads within the 10 s drain
    SLOW_DIR = make_slow_model(os.path.join(tempfile.mkdtemp(prefix="plainllama-slow-"), "slow"), layers=8)


def tearDownModule():
    if SLOW_DIR:
        shutil.rmtree(os.path.dirname(SLOW_DIR), ignore_errors=True)


def slow_server(*extra):
    return Server("--parallel", "1", *extra, model=SLOW_DIR)


def events_of(data):
    """The payloads of a stream's events ("data: X\\n\\n" each); fails on anything else."""
    text = data.decode("utf-8")
    if not text.endswith("\n\n"):
        raise AssertionError(f"the stream stopped inside an event: {text[-300:]!r}")
    out = []
    for e in text[:-2].split("\n\n"):
        if not e.startswith("data: "):
            raise AssertionError(f"not an event: {e[:200]!r}")
        out.append(e[6:])
    return out


class Reader(threading.Thread):
    """Reads a streamed response to its end in the background (the client keeps up with the server)."""

    def __init__(self, resp):
        super().__init__(daemon=True)
        self.resp, self.data, self.error = resp, b"", None
        self.start()

    def run(self):
        try:
            while True:
                chunk = self.resp.read1(65536)
                if not chunk:
                    return
                self.data += chunk
        except Exception as e:  # shown by the test
            self.error = e


def generated(server, pattern, start=0, timeout=30):
    """Waits for a completion's log line matching `pattern` (after character `start`); its generated tokens."""
    m = server.wait_log(pattern, timeout, start)
    if not m:
        raise AssertionError(f"no log line {pattern!r}:\n{server.log[start:]}")
    return int(re.search(r"(\d+) generated", m.group(0)).group(1))


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class HangUp(unittest.TestCase):
    """A client that hangs up mid-reply: its generation stops there, and the one slot serves the next request."""

    @classmethod
    def setUpClass(cls):
        cls.server = slow_server("--queue", "0")

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def test_hang_up_mid_stream_frees_the_slot(self):
        for _ in range(2):
            start = len(self.server.log)
            conn, resp, _ = start_stream(self.server, chat_body("Once upon a time", LONG, stream=True))
            abort(conn, resp)
            n = generated(self.server, r"chatcmpl-\d+ 200 stream: [^\n]*finish cancelled \(client gone\)[^\n]*", start)
            self.assertLess(n, LONG // 3, f"the hang-up did not stop the generation:\n{self.server.log[start:]}")
            r = self.server.post("/v1/chat/completions", chat_body("The dog", 4), timeout=30)
            self.assertEqual(r.status, 200, f"the slot was not freed: {r}\n{self.server.log[start:]}")

    def test_hang_up_before_a_whole_reply(self):
        # A reply that is not streamed: the client goes away while it is generated. The sign that it generates: the
        # one slot is busy and there is no queue, so a second completion gets 503 queue_full. (Should the second
        # one take the slot first, the first gets that 503 instead: then it is sent again.)
        start = len(self.server.log)
        body = json.dumps(chat_body("Once upon a time", LONG)).encode()
        deadline = time.monotonic() + 60
        running = None
        while running is None:
            self.assertLess(time.monotonic(), deadline, f"the request never took the slot:\n{self.server.log}")
            s = raw_socket(self.server.port, 30)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            while running is None:
                if select.select([s], [], [], 0)[0]:  # answered already: refused
                    s.close()
                    break
                if self.server.post("/v1/chat/completions", chat_body("The dog", 1)).status == 503:
                    running = s
        running.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        running.close()  # a reset, as a killed client's
        n = generated(self.server, r"chatcmpl-\d+ 503: [^\n]*finish cancelled \(client gone\)[^\n]*", start)
        self.assertLess(n, LONG // 3, self.server.log[start:])
        self.assertEqual(self.server.post("/v1/chat/completions", chat_body("The dog", 4), timeout=30).status, 200)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class QueueFull(unittest.TestCase):
    """One slot, a wait queue of one: with A generating, of B and C one waits and the other gets 503 at once."""

    def test_503_when_the_queue_is_full(self):
        server = slow_server("--queue", "1")
        try:
            a, resp_a, _ = start_stream(server, chat_body("Once upon a time", LONG, stream=True))
            replies, answered = [], threading.Event()

            def client(prompt):
                try:
                    replies.append(server.post("/v1/chat/completions", chat_body(prompt, 4), timeout=60))
                except Exception as e:  # shown by the main thread
                    replies.append(e)
                answered.set()

            threads = [threading.Thread(target=client, args=(p,)) for p in ("The dog", "Lily and Ben")]
            for t in threads:
                t.start()
            self.assertTrue(answered.wait(30), "neither B nor C was answered while A generates")
            first = replies[0]
            self.assertIsInstance(first, Reply, repr(first))
            self.assertEqual(first.status, 503, f"{first}\n{server.log}")
            err = json.loads(first.body)["error"]
            self.assertEqual(err.get("code"), "queue_full", first)
            self.assertEqual(first.headers.get("retry-after"), "1", first)
            abort(a, resp_a)  # A goes: the one in the queue runs
            for t in threads:
                t.join(60)
            self.assertEqual([r.status for r in replies], [503, 200], replies)
        finally:
            server.kill()


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Draining(unittest.TestCase):
    """SIGTERM with a stream running: new requests 503, /health "shutting down"; the stream goes on until the
    10 s drain cap, then ends with an error event (never its `length` finish: it asked for more than 10 s of
    tokens), and the server exits 0. A second signal ends the drain at once."""

    def setUp(self):
        self.server = slow_server()

    def tearDown(self):
        self.server.kill()

    def start(self):
        # a small receive buffer, as a slow client's: the server must not wait on it to exit
        conn, resp, first = start_stream(self.server, chat_body("Once upon a time", LONG, stream=True), rcvbuf=4096)
        self.addCleanup(conn.close)
        return resp, first, Reader(resp)

    def check_cut(self, first, reader, status, took):
        reader.join(10)
        self.assertIsNone(reader.error, f"the stream did not end cleanly: {reader.error!r}\n{self.server.log}")
        self.assertEqual(status, 0, self.server.log)
        events = events_of(first + reader.data)
        self.assertEqual(events[-1], "[DONE]", events[-3:])
        last = json.loads(events[-2])
        self.assertIn("shutting down", last.get("error", {}).get("message", ""), f"the last event: {last}")
        finishes = [c.get("finish_reason") for e in events[:-2] for c in json.loads(e).get("choices", [])]
        self.assertNotIn("length", finishes, "the reply ran to its end: the signal came after it")
        self.assertTrue(self.server.wait_log(r"chatcmpl-1 200 stream: [^\n]*finish cancelled", 5), self.server.log)

    def test_sigterm_during_a_stream(self):
        resp, first, reader = self.start()
        t0 = time.monotonic()
        self.server.proc.send_signal(signal.SIGTERM)
        self.assertTrue(self.server.wait_log(r"stopping: 1 request to finish", 10), self.server.log)
        r = self.server.request("GET", "/health")
        self.assertEqual((r.status, json.loads(r.body)), (503, {"status": "shutting down"}), str(r))
        self.assertEqual(r.headers.get("retry-after"), "1", str(r))
        r = self.server.post("/v1/chat/completions", chat_body("The dog", 4))
        self.assertEqual(r.status, 503, str(r))
        self.assertEqual(json.loads(r.body)["error"]["code"], "shutting_down", str(r))
        self.assertEqual(r.headers.get("retry-after"), "1", str(r))
        status = self.server.wait_exit(20)
        took = time.monotonic() - t0
        self.assertGreater(took, 9.5, f"the drain did not wait for the stream:\n{self.server.log}")
        self.assertLess(took, 14, f"the drain went past its 10 s cap:\n{self.server.log}")
        self.check_cut(first, reader, status, took)

    def test_a_second_signal_ends_the_drain(self):
        resp, first, reader = self.start()
        self.server.proc.send_signal(signal.SIGTERM)
        self.assertTrue(self.server.wait_log(r"stopping: 1 request to finish", 10), self.server.log)
        t0 = time.monotonic()
        self.server.proc.send_signal(signal.SIGINT)
        status = self.server.wait_exit(10)
        took = time.monotonic() - t0
        self.assertLess(took, 4, f"the second signal did not end the drain:\n{self.server.log}")
        self.check_cut(first, reader, status, took)

    def test_sigint_when_idle(self):
        self.assertEqual(self.server.stop(signal.SIGINT), 0, self.server.log)


def signal_taken(pid, sig):
    """Whether `sig`, sent to process `pid`, is no longer pending (a thread of it has taken it)."""
    with open(f"/proc/{pid}/status") as f:
        masks = {k: int(v, 16) for k, _, v in (line.partition(":") for line in f) if k in ("ShdPnd", "SigPnd")}
    return not any(m & (1 << (sig - 1)) for m in masks.values())


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Loading(unittest.TestCase):
    """The server listens before it loads: /health 503 "loading" (and the other routes 503 with Retry-After); a
    signal then exits at once with 128 + its number."""

    def loading_server(self):
        """A server on the slow model, held on its "loading" line by a full stderr pipe: (process, port, pipe)."""
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        try:
            while True:
                os.write(w, b"x")
        except BlockingIOError:
            pass
        fcntl.fcntl(w, fcntl.F_SETFL, 0)  # the server's write blocks on the full pipe
        with socket.socket() as probe:  # a free port (the server cannot say which one it took: stderr is full)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        env.pop("PLAINLLAMA_API_KEY", None)
        proc = subprocess.Popen([BINARY, "serve", "-m", SLOW_DIR, "--port", str(port), "-t", "1"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w, env=env)
        os.close(w)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.addCleanup(os.close, r)
        deadline = time.monotonic() + 30
        while True:  # listening: the socket is bound before the model loads
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                self.assertIsNone(proc.poll(), "the server exited")
                self.assertLess(time.monotonic(), deadline, f"nothing listens on port {port}")
                time.sleep(0.01)
        return proc, port, r

    def request(self, port, method, path, body=b""):
        s = raw_socket(port, 10)
        try:
            s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (method, path, len(body), body))
            return read_response(s.makefile("rb"))
        finally:
            s.close()

    def test_health_while_loading_and_a_signal_then(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            proc, port, pipe = self.loading_server()
            r = self.request(port, b"GET", b"/health")
            self.assertEqual((r.status, json.loads(r.body)), (503, {"status": "loading"}), repr(r))
            self.assertEqual(r.headers.get("retry-after"), "1", repr(r))
            r = self.request(port, b"GET", b"/v1/models")
            self.assertEqual((r.status, json.loads(r.body)["error"]["code"]), (503, "loading"), repr(r))
            r = self.request(port, b"POST", b"/v1/completions", json.dumps({"prompt": "x"}).encode())
            self.assertEqual((r.status, json.loads(r.body)["error"]["code"]), (503, "loading"), repr(r))
            self.assertEqual(r.headers.get("retry-after"), "1", repr(r))
            proc.send_signal(sig)
            deadline = time.monotonic() + 10
            while not signal_taken(proc.pid, sig):
                self.assertLess(time.monotonic(), deadline, "the server does not take the signal")
                time.sleep(0.01)
            err = b""  # now let it write: the loading line, then the signal's
            while True:
                data = os.read(pipe, 65536)
                if not data:
                    break
                err += data
            status = proc.wait(30)
            self.assertEqual(status, 128 + sig, err[-2000:].decode(errors="replace"))
            self.assertIn(b"while loading", err[-2000:])


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

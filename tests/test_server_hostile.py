#!/usr/bin/python3
"""`plainllama serve` under slow, idle and hostile clients, over raw sockets (the standard library only).

Checked: /health answers within 1 s while 200 connections send their headers a byte a second, and while 200 sit
idle; a request that does not arrive within --timeout gets 408 and its connection closes, an idle one closes; one
connection over --max-connections gets 503 (with Retry-After) and the others are served; a chunked body over
--max-body gets 413 while the server's memory grows by less than the limit plus a few MB; pipelined requests each get
their response, in order; HTTP/1.0 clients get no chunked encoding (a stream ends with the connection); malformed
request heads get 4xx/5xx answers in OpenAI's error shape and the server goes on; SIGTERM with slow clients
connected exits 0 within 10 s; a second server on the same port fails with "address in use".

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import json
import signal
import socket
import sys
import threading
import time
import unittest

import unittest_summary
from server_util import (BINARY, HAS_SERVE, Reply, Server, ServerTest, SlowClients, completion_body, raw_socket,
                         read_response, sse_payloads)


def wait_until(predicate, timeout, what):
    """Polls `predicate` every 10 ms; fails when it is still false after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.01)


class HostileTest(ServerTest):
    def timed_health(self, limit=1.0):
        """GET /health on a new connection; fails unless it is answered 200 within `limit` seconds."""
        t0 = time.monotonic()
        try:
            r = self.server.request("GET", "/health", timeout=limit)
        except (socket.timeout, TimeoutError, OSError) as e:
            self.fail_with_log(f"GET /health: no answer within {limit} s ({e!r})")
        took = time.monotonic() - t0
        self.assertOk(r)
        self.assertLess(took, limit, "GET /health took too long")
        return took

    def exchange(self, data, timeout=10.0, responses=1):
        """Sends raw bytes on a new connection and reads `responses` responses (fewer when it closes first)."""
        s = raw_socket(self.server.port, timeout)
        try:
            s.sendall(data)
            f = s.makefile("rb")
            out = []
            for _ in range(responses):
                r = read_response(f)
                if r is None:
                    break
                out.append(r)
            return out
        finally:
            s.close()

    def assertRawError(self, r, status):
        self.assertIsNotNone(r, "no response")
        self.assertEqual(r.status, status, repr(r))
        err = json.loads(r.body).get("error")
        self.assertIsInstance(err, dict, repr(r))
        self.assertTrue(err.get("message"), repr(r))
        return err


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class SlowAndIdle(HostileTest):
    """200 slow or idle connections take no capacity from the others (--parallel 2 --queue 4: few completions)."""
    server_args = ("--parallel", "2", "--queue", "4")

    def test_health_under_200_slow_header_senders(self):
        slow = SlowClients(self.server.port, 200, interval=1.0)
        try:
            wait_until(lambda: slow.sent >= 400, 30, "200 slow clients sent 2 bytes each")
            for _ in range(5):
                self.timed_health(1.0)
            self.assertOk(self.server.post("/v1/completions", completion_body("Once upon a time", 4), timeout=5))
            self.assertEqual(slow.closed, 0, "the server closed slow connections before their deadline")
        finally:
            slow.close()

    def test_health_under_200_idle_connections(self):
        idle = SlowClients(self.server.port, 200, idle=True)
        try:
            for _ in range(5):
                self.timed_health(1.0)
        finally:
            idle.close()
        self.timed_health(1.0)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Deadlines(HostileTest):
    """--timeout 2: a request has 2 s to arrive whole, an idle connection is closed after 2 s."""
    server_args = ("--timeout", "2")

    def test_slow_headers_get_408_at_the_deadline(self):
        s = raw_socket(self.server.port, 10)
        t0 = time.monotonic()
        got, stop = b"", threading.Event()

        def drip():
            for b in SlowClients.HEAD:
                if stop.wait(0.2):
                    return
                try:
                    s.send(bytes([b]))
                except OSError:
                    return

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                got += data
        except OSError as e:
            got += f" [{e!r}]".encode()
        finally:
            stop.set()
            t.join(5)
            s.close()
        took = time.monotonic() - t0
        self.assertTrue(got.startswith(b"HTTP/1.1 408 "), f"after {took:.1f} s: {got[:500]!r}")
        self.assertGreater(took, 1.5, got[:300])
        self.assertLess(took, 6, got[:300])
        self.assertTrue(self.server.wait_log(r"408: the request did not arrive whole within 2 s", 5), self.server.log)

    def test_idle_connection_is_closed(self):
        s = raw_socket(self.server.port, 10)
        t0 = time.monotonic()
        try:
            self.assertEqual(s.recv(100), b"", "an idle connection got bytes")
        except OSError:
            pass  # reset: closed too
        finally:
            s.close()
        self.assertLess(time.monotonic() - t0, 6)
        # a keep-alive connection idle after a response is closed too, and new ones are served
        s = raw_socket(self.server.port, 10)
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            f = s.makefile("rb")
            self.assertEqual(read_response(f).status, 200)
            self.assertEqual(f.read(), b"")
        finally:
            s.close()
        self.timed_health(1.0)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class ConnectionCap(HostileTest):
    server_args = ("--max-connections", "8")

    def test_one_over_the_cap_gets_503(self):
        held = SlowClients(self.server.port, 8, idle=True)
        try:
            # the server has accepted the 8 (each answers a request, then stays open)
            for s in held.socks:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_response(s.makefile("rb")).status, 200)
            (r,) = self.exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            err = self.assertRawError(r, 503)
            self.assertIn("connections", err["message"])
            self.assertEqual(r.headers.get("retry-after"), "1", repr(r))
        finally:
            held.close()
        wait_until(lambda: self.exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0].status == 200, 10,
                   "a connection is served once the others closed")


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Bodies(HostileTest):
    """--max-body 1 MiB: chunked bodies are held to it as bodies with a length are."""
    server_args = ("--max-body", str(1 << 20))

    def test_chunked_body_over_the_limit_gets_413_with_bounded_memory(self):
        self.assertOk(self.server.request("GET", "/health"))
        peak = self.server.reset_peak()
        base = self.server.status_kb("VmRSS")
        rss_seen = [base]
        s = raw_socket(self.server.port, 30)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        sent = [0]

        def write():  # 64 MiB, the server's limit 64 times over
            try:
                for _ in range(1024):
                    s.sendall(chunk)
                    sent[0] += 65536
                    if sent[0] % (1 << 20) == 0:
                        rss_seen.append(self.server.status_kb("VmRSS"))
                s.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # the server answered and closed

        t = threading.Thread(target=write, daemon=True)
        t.start()
        try:
            r = read_response(s.makefile("rb"))
            sent_when_answered = sent[0]
        finally:
            t.join(30)
            s.close()
        err = self.assertRawError(r, 413)
        self.assertIn("larger than", err["message"])
        growth = (self.server.status_kb("VmHWM") if peak else max(rss_seen)) - base
        self.assertLess(growth, 1024 + 6 * 1024, f"the server grew by {growth} kB reading a chunked body "
                        f"(--max-body 1 MiB; {sent_when_answered >> 20} MiB sent when it answered)")
        self.assertLess(sent_when_answered, 32 << 20, "the server read far past the limit before answering")
        self.assertTrue(self.server.wait_log(r"POST /v1/chat/completions 413", 5), self.server.log)
        self.assertOk(self.server.request("GET", "/health"))

    def test_chunked_body_under_the_limit(self):
        body = json.dumps(completion_body("Once upon a time", 4)).encode()
        pieces = [body[i:i + 7] for i in range(0, len(body), 7)]
        data = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-Trailer: t\r\n\r\n")
        (r,) = self.exchange(data)
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(json.loads(r.body)["usage"]["completion_tokens"], 4, repr(r))

    def test_expect_100_continue(self):
        body = json.dumps(completion_body("Once upon a time", 4)).encode()
        s = raw_socket(self.server.port, 10)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                      % len(body))
            f = s.makefile("rb")
            self.assertEqual(f.readline(), b"HTTP/1.1 100 Continue\r\n")
            self.assertEqual(f.readline(), b"\r\n")
            s.sendall(body)
            self.assertEqual(read_response(f).status, 200)
            # a body over the limit: 413 at once, no 100
            s2 = raw_socket(self.server.port, 10)
            s2.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                       b"Content-Length: 99999999\r\n\r\n")
            self.assertRawError(read_response(s2.makefile("rb")), 413)
            s2.close()
        finally:
            s.close()


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Framing(HostileTest):
    """Pipelining, HTTP/1.0, malformed heads."""

    def test_pipelined_requests_each_get_their_response(self):
        rs = self.exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                           responses=2)
        self.assertEqual([r.status for r in rs], [200, 200], rs)
        body = json.dumps(completion_body("Once upon a time", 4)).encode()
        rs = self.exchange(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                           b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                           b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (len(body), body),
                           responses=4)
        self.assertEqual([r.status for r in rs], [200, 200, 200], rs)
        self.assertEqual(json.loads(rs[0].body)["object"], "list", rs)
        self.assertEqual(json.loads(rs[1].body)["object"], "text_completion", rs)
        self.assertEqual(json.loads(rs[2].body), {"status": "ok"}, rs)

    def test_http10_gets_no_chunks(self):
        (r,) = self.exchange(b"GET /health HTTP/1.0\r\n\r\n")
        self.assertEqual((r.status, r.framing), (200, "length"), repr(r))
        self.assertNotIn("transfer-encoding", r.headers, repr(r))
        body = json.dumps(completion_body("Once upon a time", 8, stream=True)).encode()
        s = raw_socket(self.server.port, 10)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            r = read_response(s.makefile("rb"))
        finally:
            s.close()
        self.assertEqual((r.status, r.framing), (200, "close"), repr(r))
        self.assertNotIn("transfer-encoding", r.headers, repr(r))
        payloads = sse_payloads(Reply("HTTP/1.0 stream", r.status, r.headers, r.body))
        self.assertEqual(payloads[-1], "[DONE]", repr(r))
        # HTTP/1.0 with keep-alive: a length, and the connection stays for the next request
        rs = self.exchange(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 2, responses=2)
        self.assertEqual([(r.status, r.framing) for r in rs], [(200, "length")] * 2, rs)
        self.assertEqual(rs[0].headers.get("connection", "").lower(), "keep-alive", rs)

    def test_malformed_heads(self):
        cases = [
            (b"GET /health HTTP/1.1\r\n folded: header\r\n\r\n", 400),
            (b"GET /health HTTP/1.1\r\nNo colon here\r\n\r\n", 400),
            (b"GET /health HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
            (b"GET /health HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400),
            (b"GET /health HTTP/1.1\r\nX-Big: " + b"y" * 20000 + b"\r\n\r\n", 431),
            (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", 414),
            (b"GET /health HTTP/2.0\r\n\r\n", 505),
            (b"GET /health\r\n\r\n", 400),
            (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400),
            (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400),
            (b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
            (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
            (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400),
            (b"POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"POST /v1/completions HTTP/1.1\r\nExpect: magic\r\nContent-Length: 2\r\n\r\n{}", 417),
            (b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
        ]
        for data, status in cases:
            rs = self.exchange(data)
            self.assertEqual(len(rs), 1, f"{data[:80]!r}: no response")
            self.assertRawError(rs[0], status)
            self.assertEqual(rs[0].headers.get("connection", "").lower(), "close", f"{data[:80]!r}: {rs[0]!r}")
        self.assertOk(self.server.request("GET", "/health"))
        # a wrong method on a known path, and HEAD on a GET route
        (r,) = self.exchange(b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertRawError(r, 405)
        s = raw_socket(self.server.port, 10)
        try:
            s.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            f = s.makefile("rb")
            line = f.readline()
            self.assertTrue(line.startswith(b"HTTP/1.1 200"), line)
            while f.readline() not in (b"\r\n", b""):
                pass
            r = read_response(f)  # HEAD had no body: the next bytes are the GET's response
            self.assertEqual((r.status, json.loads(r.body)), (200, {"status": "ok"}))
        finally:
            s.close()


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class SignalsAndPorts(unittest.TestCase):
    def test_sigterm_with_slow_clients_exits_0_within_10_s(self):
        server = Server()
        slow = None
        try:
            slow = SlowClients(server.port, 12, interval=1.0)
            wait_until(lambda: slow.sent >= 24, 30, "12 slow clients sent 2 bytes each")
            keep = raw_socket(server.port)  # and a keep-alive connection idle after its response
            keep.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(read_response(keep.makefile("rb")).status, 200)
            t0 = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            status = server.wait_exit(10)
            took = time.monotonic() - t0
            self.assertEqual(status, 0, f"SIGTERM with 12 slow clients: exit status {status} after {took:.1f} s\n"
                             f"{server.log}")
            keep.close()
        finally:
            if slow:
                slow.close()
            server.kill()

    def test_a_second_server_on_the_same_port_fails(self):
        first = Server()
        try:
            second = Server(port=first.port, wait=False)
            try:
                status = second.wait_exit(30)
                self.assertIsNotNone(status, f"a second server on port {first.port} is still running:\n"
                                     f"{second.log}")
                self.assertNotEqual(status, 0, second.log)
                self.assertIn("address is in use", second.log)
                self.assertNotIn("listening", second.log)
            finally:
                second.kill()
            for _ in range(10):
                r = first.request("GET", "/v1/models")
                self.assertEqual(r.status, 200, str(r))
        finally:
            first.kill()


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

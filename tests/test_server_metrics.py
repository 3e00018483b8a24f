#!/usr/bin/python3
"""`plainllama serve`: GET /metrics and GET /ready.

/metrics is parsed with a Prometheus text-format parser we did not write (the npm package
parse-prometheus-text-format, tests/web/parse_metrics.mjs), and read again after requests: the counters move by what
the responses themselves report (requests by endpoint and status, prompt tokens evaluated and cached, generated
tokens, the histograms' counts), the gauges say what the server holds (slots, queue, KV cache positions), the
families have the documented types, and the exposition needs the API key. /ready answers 200 while a slot is free
and 503 with Retry-After while the only slot generates (the slow model of server_util holds it), and 200 again once
the client hangs up.

Needs node and tests/web/node_modules (scripts/setup.sh installs them). Last line: "N passed, N failed".
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import shutil
import time
import unittest

import unittest_summary
from server_util import (BINARY, HAS_SERVE, KEY, SOURCE_DIR, Server, ServerTest, abort, chat_body, completion_body,
                         make_slow_model, start_stream)

WEB_DIR = os.path.join(SOURCE_DIR, "tests", "web")
TYPES = {"plainllama_build_info": "GAUGE", "plainllama_requests_total": "COUNTER",
         "plainllama_requests_in_flight": "GAUGE", "plainllama_prompt_tokens_evaluated_total": "COUNTER",
         "plainllama_prompt_tokens_cached_total": "COUNTER", "plainllama_generated_tokens_total": "COUNTER",
         "plainllama_time_to_first_token_seconds": "HISTOGRAM", "plainllama_request_duration_seconds": "HISTOGRAM",
         "plainllama_decode_tokens_total": "COUNTER", "plainllama_decode_seconds_total": "COUNTER",
         "plainllama_decode_tokens_per_second": "GAUGE", "plainllama_slots_busy": "GAUGE",
         "plainllama_slots_total": "GAUGE", "plainllama_queue_depth": "GAUGE",
         "plainllama_kv_cache_positions_used": "GAUGE", "plainllama_kv_cache_positions_total": "GAUGE",
         "plainllama_model_load_seconds": "GAUGE"}
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (\S+)$')


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(plainllama VERSION (\S+)", f.read()).group(1)


class Exposition:
    """A /metrics body, parsed by parse-prometheus-text-format: values by family and labels."""

    def __init__(self, text):
        self.text = text
        r = subprocess.run(["node", os.path.join(WEB_DIR, "parse_metrics.mjs")], input=text, capture_output=True,
                           text=True, timeout=60, cwd=WEB_DIR)
        if r.returncode != 0:
            raise AssertionError(f"the exposition does not parse: {r.stderr[-1500:]}\n{text}")
        self.families = {f["name"]: f for f in json.loads(r.stdout)}

    def type(self, name):
        return self.families[name]["type"]

    def value(self, name, **labels):
        """A counter's or gauge's value; 0 for a labelled series not shown yet."""
        f = self.families.get(name)
        if f is None:
            raise AssertionError(f"no family {name}:\n{self.text}")
        for m in f["metrics"]:
            if m.get("labels", {}) == {k: str(v) for k, v in labels.items()}:
                return float(m["value"])
        if labels:
            return 0.0
        raise AssertionError(f"no {name} without labels:\n{self.text}")

    def histogram(self, name):
        m = self.families[name]["metrics"][0]
        return {k: int(v) for k, v in m["buckets"].items()}, int(m["count"]), float(m["sum"])


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Metrics(ServerTest):
    server_args = ("--api-key", KEY, "--parallel", "2")

    def scrape(self):
        r = self.server.request("GET", "/metrics", key=KEY)
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(r.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8", str(r))
        text = r.body.decode()
        # the grammar line by line: HELP and TYPE before a family's samples, each series once
        typed, seen = set(), set()
        for line in text.splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                if line.startswith("# TYPE "):
                    typed.add(line.split()[2])
                continue
            m = SAMPLE.match(line)
            self.assertTrue(m, f"not a sample line: {line!r}")
            family = re.sub(r"_(bucket|sum|count)$", "", m.group(1)) if m.group(1) not in typed else m.group(1)
            self.assertIn(family, typed, f"a sample before its TYPE: {line!r}")
            self.assertNotIn(m.group(1) + (m.group(2) or ""), seen, f"a series twice: {line!r}")
            seen.add(m.group(1) + (m.group(2) or ""))
            float(m.group(3).replace("+Inf", "inf"))
        return Exposition(text)

    def test_needs_the_key(self):
        self.assertError(self.server.request("GET", "/metrics"), 401, "API key")
        self.assertError(self.server.request("GET", "/metrics", key="wrong"), 401, "wrong API key")
        self.scrape()

    def test_families_and_gauges(self):
        e = self.scrape()
        for name, kind in TYPES.items():
            self.assertEqual(e.type(name), kind, name)
        info = e.families["plainllama_build_info"]["metrics"]
        self.assertEqual(info, [{"value": "1", "labels": {"version": project_version()}}])
        self.assertEqual(e.value("plainllama_slots_total"), 2)
        self.assertEqual(e.value("plainllama_kv_cache_positions_total"), 2 * 512)  # stories260K: 512 positions
        self.assertGreater(e.value("plainllama_model_load_seconds"), 0)
        self.assertLess(e.value("plainllama_model_load_seconds"), 60)

    def test_counters_move_with_requests(self):
        before = self.scrape()
        replies = []
        for p in ("Once upon a time", "The dog", "Once upon a time"):  # the third finds the first in a slot's cache
            r = self.server.post("/v1/chat/completions", chat_body(p, 8), key=KEY)
            self.assertEqual(r.status, 200, str(r))
            replies.append(r.json()["usage"])
        for p in ("Lily and Ben", "Tom had a red ball"):
            r = self.server.post("/v1/chat/completions",
                                 chat_body(p, 6, stream=True, stream_options={"include_usage": True}), key=KEY)
            self.assertEqual(r.status, 200, str(r))
            usage = [json.loads(line[6:])["usage"] for line in r.body.decode().split("\n\n")
                     if line.startswith("data: {") and json.loads(line[6:]).get("usage")]
            replies.append(usage[0])
        r = self.server.post("/v1/completions", completion_body("The sun", 5), key=KEY)
        self.assertEqual(r.status, 200, str(r))
        replies.append(r.json()["usage"])
        self.assertEqual(self.server.post("/v1/chat/completions", {"messages": 3}, key=KEY).status, 400)
        self.assertEqual(self.server.request("GET", "/no/such/path").status, 404)
        self.assertEqual(self.server.request("GET", "/v1/models").status, 401)
        after = self.scrape()

        def moved(name, **labels):
            return after.value(name, **labels) - before.value(name, **labels)

        self.assertEqual(moved("plainllama_requests_total", endpoint="/v1/chat/completions", status=200), 5)
        self.assertEqual(moved("plainllama_requests_total", endpoint="/v1/completions", status=200), 1)
        self.assertEqual(moved("plainllama_requests_total", endpoint="/v1/chat/completions", status=400), 1)
        self.assertEqual(moved("plainllama_requests_total", endpoint="other", status=404), 1)
        self.assertEqual(moved("plainllama_requests_total", endpoint="/v1/models", status=401), 1)
        self.assertEqual(moved("plainllama_requests_total", endpoint="/metrics", status=200), 1)
        generated = sum(u["completion_tokens"] for u in replies)
        cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in replies)
        self.assertEqual(moved("plainllama_generated_tokens_total"), generated)
        self.assertEqual(moved("plainllama_prompt_tokens_cached_total"), cached)
        self.assertGreater(cached, 0, f"no prompt found in a slot's cache: {replies}")
        self.assertEqual(moved("plainllama_prompt_tokens_evaluated_total"),
                         sum(u["prompt_tokens"] for u in replies) - cached)
        # the first token of each reply comes from the prompt's pass, the others from batched steps
        self.assertEqual(moved("plainllama_decode_tokens_total"), generated - len(replies))
        self.assertGreater(moved("plainllama_decode_seconds_total"), 0)
        self.assertGreater(after.value("plainllama_decode_tokens_per_second"), 0)
        for name in ("plainllama_time_to_first_token_seconds", "plainllama_request_duration_seconds"):
            buckets, count, total = after.histogram(name)
            self.assertEqual(count - before.histogram(name)[1], len(replies), name)
            self.assertEqual(buckets["+Inf"], count, name)
            counts = [buckets[k] for k in sorted(buckets, key=lambda k: float(k.replace("+Inf", "inf")))]
            self.assertEqual(counts, sorted(counts), f"{name}: buckets not cumulative")
            self.assertGreater(total, 0, name)
        self.assertEqual(after.value("plainllama_slots_busy"), 0)
        self.assertEqual(after.value("plainllama_queue_depth"), 0)
        used = after.value("plainllama_kv_cache_positions_used")
        self.assertTrue(0 < used <= 2 * 512, used)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Ready(unittest.TestCase):
    def test_ready_while_a_slot_is_free(self):
        folder = tempfile.mkdtemp(prefix="plainllama-slow-")
        server = None
        try:
            server = Server("--parallel", "1", model=make_slow_model(os.path.join(folder, "slow")))
            r = server.request("GET", "/ready")
            self.assertEqual((r.status, r.json()), (200, {"status": "ready", "slots_free": 1}), str(r))
            conn, resp, _ = start_stream(server, chat_body("Once upon a time", 4000, stream=True))
            r = server.request("GET", "/ready")
            self.assertEqual((r.status, r.json()), (503, {"status": "busy", "slots_free": 0}), str(r))
            self.assertEqual(r.headers.get("retry-after"), "1", str(r))
            self.assertEqual(server.request("GET", "/health").status, 200, "/health stays 200 while busy")
            abort(conn, resp)
            deadline = time.monotonic() + 30
            while server.request("GET", "/ready").status != 200:
                self.assertLess(time.monotonic(), deadline, "/ready never came back after the client left")
                time.sleep(0.02)
        finally:
            if server:
                server.kill()
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

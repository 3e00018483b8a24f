#!/usr/bin/python3
"""Scale-out behind a real load balancer: Debian's nginx (its own configuration in a temporary folder, no system
service) in front of two `plainllama serve` replicas on loopback ports, with the recipe of docs/server.md
(least_conn, passive health checks, proxy_buffering off, a long proxy_read_timeout, proxy_next_upstream with
non_idempotent). scripts/loadgen.py runs streamed and non-streamed chat completions (every other one) through nginx;
one replica is killed with SIGKILL in the middle of the run. What the clients saw is then counted:

- ok: a whole reply (its finish_reason, and exactly max_tokens tokens of the slow model's " the");
- retried: ok after nginx passed the request on to the other replica (nginx's log: two upstream addresses);
- failed cleanly: an error the client sees (an HTTP 502, or a stream that ends without its finish_reason and
  "data: [DONE]": loadgen counts both as errors);
- lost: a reply taken for a success but cut short, or a request never answered. Must be 0.

Every non-streamed request must succeed (nginx retries those that the dead replica held, before a byte went to the
client), the failures must be streams the dead replica was answering, and the survivor must serve the rest. The
replicas run the slow model of server_util (a reply takes seconds): the kill comes when the replica to be killed is
seen generating (its /metrics), not after a fixed time.

Needs /usr/sbin/nginx (scripts/setup.sh installs it). Not run under the sanitizers (CMakeLists: it tests the
deployment, the server's code paths are covered by the other server tests there). Last line: "N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import unittest_summary
from server_util import BINARY, HAS_SERVE, LOADGEN, SOURCE_DIR, Server, make_slow_model

NGINX = "/usr/sbin/nginx"
REQUESTS, CLIENTS, MAX_TOKENS = 24, 6, 160

# The recipe of docs/server.md ("Scaling out"), with the test's ports and folder.
CONFIG = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format upstreams '$request_method $uri $status "$upstream_addr" "$upstream_status" $request_time';
    access_log {dir}/access.log upstreams;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    upstream plainllama {{
        least_conn;
        server 127.0.0.1:{a} max_fails=3 fail_timeout=10s;
        server 127.0.0.1:{b} max_fails=3 fail_timeout=10s;
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://plainllama;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            proxy_connect_timeout 2s;
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, headers=None, timeout=10):
    """(status, body) of a GET; a refused connection is status 0."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def gauge(text, name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class Nginx:
    def __init__(self, folder, a, b):
        self.folder = folder
        self.port = free_port()
        with open(os.path.join(folder, "nginx.conf"), "w") as f:
            f.write(CONFIG.format(dir=folder, a=a, b=b, port=self.port))
        # -e: the start-up error log too goes to the folder, not to /var/log/nginx
        self.proc = subprocess.Popen([NGINX, "-p", folder, "-c", os.path.join(folder, "nginx.conf"), "-e",
                                      os.path.join(folder, "error.log"), "-g", "daemon off;"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while get(f"http://127.0.0.1:{self.port}/health", timeout=2)[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"nginx did not start: {self.proc.stdout.read().decode()}\n{self.errors()}")
            time.sleep(0.1)

    def errors(self):
        try:
            with open(os.path.join(self.folder, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def access(self):
        """nginx's log lines: (method, uri, status, [upstream addresses], [upstream statuses])."""
        out = []
        with open(os.path.join(self.folder, "access.log")) as f:
            for line in f:
                m = re.match(r'(\S+) (\S+) (\d+) "([^"]*)" "([^"]*)"', line)
                if m:
                    out.append((m.group(1), m.group(2), int(m.group(3)), m.group(4).split(", "),
                                m.group(5).split(", ")))
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: finishes what it serves
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class ScaleOut(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(NGINX, os.X_OK), f"{NGINX} is missing: scripts/setup.sh installs nginx")
        self.folder = tempfile.mkdtemp(prefix="plainllama-nginx-")
        self.model = make_slow_model(os.path.join(self.folder, "slow"))
        self.replicas = [Server("--parallel", "2", "--queue", "16", model=self.model) for _ in range(2)]
        self.nginx = Nginx(self.folder, self.replicas[0].port, self.replicas[1].port)

    def tearDown(self):
        self.nginx.stop()
        for r in self.replicas:
            r.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_a_replica_killed_mid_run(self):
        victim, survivor = self.replicas
        run = subprocess.Popen([sys.executable, LOADGEN, "--url", f"http://127.0.0.1:{self.nginx.port}", "-k",
                                str(CLIENTS), "-n", str(REQUESTS), "--max-tokens", str(MAX_TOKENS), "--mode", "mixed",
                                "--timeout", "120", "--json", "--per-request"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Mid-run: the victim has answered a few requests and is generating (both slots busy).
        deadline = time.monotonic() + 120
        busy = None
        while time.monotonic() < deadline and run.poll() is None:
            _, text = get(f"http://127.0.0.1:{victim.port}/metrics")
            done = sum(int(n) for n in re.findall(
                r'^plainllama_requests_total\{endpoint="/v1/chat/completions",status="200"\} (\d+)$', text, re.M))
            busy = gauge(text, "plainllama_slots_busy")
            if done >= 2 and busy == 2:
                break
            time.sleep(0.02)
        else:
            run.kill()
            self.fail(f"the replica was never seen generating after 2 requests (slots busy: {busy})\n"
                      f"{victim.log[-2000:]}")
        in_flight = busy + gauge(text, "plainllama_queue_depth")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        try:
            out, err = run.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            run.kill()
            out, err = run.communicate()
            self.fail(f"loadgen did not finish in 300 s (requests never answered)\n{err}")
        rep = json.loads(out)
        results = rep["results"]
        self.assertEqual(len(results), REQUESTS, f"requests unaccounted for: {rep}")

        full = " the" * MAX_TOKENS
        ok = [r for r in results if "error" not in r]
        lost = [r for r in ok if r["finish_reason"] != "length" or r["tokens"] != MAX_TOKENS or r["text"] != full]
        failed = [r for r in results if "error" in r]
        clean = [r for r in failed if r["kind"] == "stream cut" or r["kind"] in ("http 502", "http 503", "http 504")]
        lines = [x for x in self.nginx.access() if x[1] == "/v1/chat/completions"]
        retried = [x for x in lines if len(x[4]) > 1 and x[2] == 200]
        victim_addr = f"127.0.0.1:{victim.port}"
        report = (f"{REQUESTS} requests through nginx (half streamed), a replica killed with {int(in_flight)} in "
                  f"flight: {len(ok)} ok ({len(retried)} retried by nginx), {len(clean)} failed cleanly "
                  f"({', '.join(f'{k} {n}' for k, n in sorted(rep['errors_by_kind'].items())) or 'none'}), "
                  f"{len(lost) + len(failed) - len(clean)} lost")
        print(report + "".join(f"\n  client saw: {e}" for e in rep["error_samples"]), file=sys.stderr)
        context = f"\n{report}\nloadgen: {json.dumps(rep)[:3000]}\nnginx error log:\n{self.nginx.errors()[-3000:]}"

        self.assertEqual(lost, [], f"replies cut short but taken for a success{context}")
        self.assertEqual(len(failed), len(clean), f"failures the client could not tell apart{context}")
        # nginx passes a non-streamed request on before a byte reaches the client: none may fail
        self.assertEqual([r for r in failed if not r["stream"]], [],
                         f"a non-streamed request failed{context}")
        self.assertEqual([r for r in failed if r["kind"] != "stream cut"], [], f"failures besides cut streams{context}")
        self.assertGreaterEqual(len(retried), 1, f"nginx retried nothing{context}")
        # the failures are the streams the dead replica was answering (one more may have reached it between the
        # last look at its /metrics and the kill); the survivor served the rest
        self.assertLessEqual(len(failed), in_flight + 1, f"more failures than requests on the dead replica{context}")
        for method, uri, status, addrs, statuses in lines:
            if addrs[-1] != victim_addr:
                self.assertEqual((status, statuses[-1]), (200, "200"), f"the survivor failed a request{context}")
        self.assertTrue(survivor.proc.poll() is None, "the survivor exited")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

#!/usr/bin/python3
"""`plainllama perplexity --json` stopped by Ctrl-C (SIGINT) after its first chunk: exit status 130 and a JSON
object that says it is partial ("stop": "interrupted") and covers the chunks finished; a full run says "complete".
Last line: "N passed, N failed".
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "tinystories3M")
DATA = os.path.join(SHARED_DIR, "data", "tinystories_val.txt")


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class PerplexityInterrupt(unittest.TestCase):
    def test_ctrl_c_gives_partial_json(self):
        p = subprocess.Popen([BINARY, "perplexity", "-m", MODEL, "-f", DATA, "-c", "256", "-t", "1", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            seen, deadline = b"", time.monotonic() + 120
            while b"[2]" not in seen:  # progress on stderr: "[1]4.1234,[2]..."
                self.assertLess(time.monotonic(), deadline, "no second chunk in 120 s")
                c = p.stderr.read(1)
                self.assertTrue(c, "perplexity ended before its second chunk: " + seen.decode(errors="replace"))
                seen += c
            p.send_signal(signal.SIGINT)
            out, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 130)
        j = json.loads(out)
        self.assertEqual(j["stop"], "interrupted")
        self.assertGreaterEqual(j["n_chunks"], 2)
        self.assertEqual(len(j["chunk_ppl"]), j["n_chunks"])

    def test_a_full_run_is_complete(self):
        out = subprocess.run([BINARY, "perplexity", "-m", MODEL, "-f", DATA, "-c", "256", "--chunks", "2", "--json",
                              "--quiet"], capture_output=True, check=True).stdout
        self.assertEqual(json.loads(out)["stop"], "complete")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

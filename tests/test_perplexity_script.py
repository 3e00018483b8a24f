#!/usr/bin/python3
"""scripts/perplexity.py: the table, CSV and JSON agree with `plainllama perplexity` run directly."""
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import unittest_summary

SHARED = os.environ["PLAINLLAMA_SHARED_DIR"]
BINARY = os.environ["PLAINLLAMA_BINARY"]
SCRIPT = os.path.join(os.environ["PLAINLLAMA_SOURCE_DIR"], "scripts", "perplexity.py")


class PerplexityScript(unittest.TestCase):
    def test_table_csv_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            models = [os.path.join(SHARED, "models", m) for m in ("stories260K", "stories260K-bf16")]
            data = os.path.join(SHARED, "data", "tinystories_val.txt")
            cmd = [sys.executable, SCRIPT, "--binary", BINARY, "-c", "128", "--chunks", "3", "-t", "1",
                   "-d", data, "--csv", os.path.join(tmp, "r.csv"), "--json", os.path.join(tmp, "r.json")]
            for m in models:
                cmd += ["-m", m]
            r = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.strip().splitlines()
            self.assertEqual(lines[0], "| model | dtype | dataset | ctx | chunks | PPL | tok/s |")
            self.assertEqual(len(lines), 4)
            rows = json.load(open(os.path.join(tmp, "r.json")))
            self.assertEqual([x["dtype"] for x in rows], ["F32", "BF16"])
            with open(os.path.join(tmp, "r.csv")) as f:
                self.assertEqual(len(list(csv.DictReader(f))), 2)
            direct = subprocess.run([BINARY, "perplexity", "-m", models[0], "-f", data, "-c", "128",
                                     "--chunks", "3", "--json", "--quiet"], capture_output=True, text=True)
            self.assertEqual(direct.returncode, 0, direct.stderr)
            self.assertAlmostEqual(rows[0]["ppl"], round(json.loads(direct.stdout)["ppl"], 4), places=4)
            self.assertEqual(rows[0]["chunks"], 3)
            self.assertIn(f"| stories260K | F32 | tinystories_val.txt | 128 | 3 | {rows[0]['ppl']:.4f} ±", r.stdout)

    def test_a_failed_run_keeps_the_finished_rows(self):
        # the second of three models is broken: the other two rows are printed and written, the failure marked,
        # and the script exits 1
        with tempfile.TemporaryDirectory() as tmp:
            broken = os.path.join(tmp, "broken")
            os.makedirs(broken)
            for f in ("config.json", "tokenizer.model"):
                with open(os.path.join(SHARED, "models", "stories260K", f), "rb") as src, \
                        open(os.path.join(broken, f), "wb") as dst:
                    dst.write(src.read())
            data = os.path.join(SHARED, "data", "tinystories_val.txt")
            cmd = [sys.executable, SCRIPT, "--binary", BINARY, "-c", "128", "--chunks", "2", "-t", "1", "-d", data,
                   "-m", os.path.join(SHARED, "models", "stories260K"), "-m", broken,
                   "-m", os.path.join(SHARED, "models", "stories260K-bf16"), "--json", os.path.join(tmp, "r.json"),
                   "--csv", os.path.join(tmp, "r.csv")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            rows = json.load(open(os.path.join(tmp, "r.json")))
            self.assertEqual([x["model"] for x in rows], ["stories260K", "broken", "stories260K-bf16"])
            self.assertEqual([bool(x["error"]) for x in rows], [False, True, False])
            self.assertIn("no model.safetensors", rows[1]["error"])
            self.assertIn("| broken | ? | tinystories_val.txt | 128 | — | failed:", r.stdout)
            self.assertNotIn("Traceback", r.stderr)

    def test_ctrl_c_keeps_the_finished_rows(self):
        # Ctrl-C (SIGINT to the process group, as a terminal sends it) during the second run: the first row is
        # printed and written, no traceback, exit status 130. The second data set is a FIFO nobody writes, so the
        # second run waits for it for as long as the test needs.
        with tempfile.TemporaryDirectory() as tmp:
            fifo = os.path.join(tmp, "never_written.txt")
            os.mkfifo(fifo)
            cmd = [sys.executable, SCRIPT, "--binary", BINARY, "-c", "128", "--chunks", "2", "-t", "1",
                   "-m", os.path.join(SHARED, "models", "stories260K"),
                   "-d", os.path.join(SHARED, "data", "tinystories_val.txt"), "-d", fifo,
                   "--json", os.path.join(tmp, "r.json")]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
            err = ""
            try:
                for line in p.stderr:
                    err += line
                    if "never_written.txt ..." in line:
                        break
                time.sleep(0.5)  # the second run is waiting on the FIFO
                os.killpg(p.pid, signal.SIGINT)
                out, rest = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            err += rest
            self.assertEqual(p.returncode, 130, err)
            self.assertNotIn("Traceback", err)
            self.assertIn("interrupted; the table holds the runs that finished", err)
            self.assertIn("| stories260K | F32 | tinystories_val.txt | 128 | 2 |", out)
            self.assertNotIn("never_written", out)
            rows = json.load(open(os.path.join(tmp, "r.json")))
            self.assertEqual([(x["dataset"], x["error"]) for x in rows], [("tinystories_val.txt", "")])

    def test_missing_binary(self):
        r = subprocess.run([sys.executable, SCRIPT, "--binary", "/nonexistent/plainllama"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not built", r.stderr)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

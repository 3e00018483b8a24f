#!/usr/bin/python3
"""scripts/report.py --quick: valid charts with the series they should draw, tables with a number in every cell that
should hold one, report.json with the same figures, --compare of two reports, and bad input refused in one line."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import unittest

import unittest_summary

SHARED = os.environ["PLAINLLAMA_SHARED_DIR"]
BINARY = os.environ["PLAINLLAMA_BINARY"]
SCRIPT = os.path.join(os.environ["PLAINLLAMA_SOURCE_DIR"], "scripts", "report.py")
OUT = os.path.join(os.environ.get("PLAINLLAMA_TEST_OUTPUT", "/tmp"), "test_report")
FORMATS = ["F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0"]
QUANTIZED = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0"]
CONCURRENCY = [1, 2, 4, 8]


def png_size(path):
    """(width, height) from a PNG's signature and IHDR chunk; AssertionError when it is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: no PNG signature"
    assert head[12:16] == b"IHDR", f"{path}: no IHDR chunk first"
    return struct.unpack(">II", head[16:24])


def tables(md):
    """The Markdown tables of md under their section titles: {title: [[cell, ...], ...]} (header row first)."""
    out, title = {}, None
    for line in md.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
        elif line.startswith("|") and not re.match(r"^\|\s*-", line):
            out.setdefault(title, []).append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def is_number(s):
    return re.fullmatch(r"-?[0-9]+(\.[0-9]+)?%?", s) is not None


class Report(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(OUT, ignore_errors=True)
        cls.quick = os.path.join(OUT, "quick")
        cls.result = subprocess.run([sys.executable, SCRIPT, "--quick", "--binary", BINARY, "-o", cls.quick],
                                 capture_output=True, text=True, timeout=300)
        cls.md = open(os.path.join(cls.quick, "report.md")).read() if cls.result.returncode == 0 else ""
        cls.rep = json.load(open(os.path.join(cls.quick, "report.json"))) if cls.result.returncode == 0 else {}

    def setUp(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)

    def test_header(self):
        head = self.md.splitlines()[:8]
        self.assertEqual(head[0], "# Performance")
        text = "\n".join(head)
        self.assertIn("scripts/report.py --quick", text)
        self.assertRegex(text, r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC, commit `[0-9a-f]{7,}")
        self.assertIn("CPU: ", text)
        self.assertGreater(self.rep["meta"]["bandwidth_gb_s"], 0)
        self.assertGreater(self.rep["meta"]["fma_peak_gflops"], 0)

    def test_charts_are_images_with_their_series(self):
        charts = self.rep["charts"]
        self.assertEqual(sorted(charts), ["accuracy_kld.png", "serving.png", "speed_pp.png", "speed_tg.png"])
        for name, c in charts.items():
            path = os.path.join(self.quick, name)
            w, h = png_size(path)
            self.assertGreaterEqual(w, 500, name)
            self.assertGreaterEqual(h, 300, name)
            self.assertIn(f"]({name})", self.md)
            for ax in c["axes"]:
                self.assertTrue(ax["xlabel"] and ax["ylabel"], f"{name}: an axis without a label")
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.image
        img = matplotlib.image.imread(os.path.join(self.quick, "speed_tg.png"))
        self.assertGreater(img.std(), 0.01, "a blank chart")
        depths = self.rep["settings"]["depths"]
        for name in ("speed_tg.png", "speed_pp.png"):
            ax = charts[name]["axes"][0]
            self.assertEqual(ax["series"], [f"plainllama, depth {d}" for d in depths])
            self.assertEqual(ax["xticks"], FORMATS)
            # one share label per bar: tg of the read bandwidth, pp of the FMA peak
            self.assertEqual(len(ax["bar_labels"]), len(FORMATS) * len(depths))
            for label in ax["bar_labels"]:
                self.assertRegex(label, r"^\d+%$")
        self.assertIn("read bandwidth", charts["speed_tg.png"]["axes"][0]["title"])
        self.assertIn("FMA peak", charts["speed_pp.png"]["axes"][0]["title"])
        acc = charts["accuracy_kld.png"]["axes"][0]
        self.assertEqual(acc["points"], QUANTIZED)
        self.assertIn("bytes per weight", acc["xlabel"])
        self.assertIn("KL divergence", acc["ylabel"])
        serving = charts["serving.png"]["axes"]
        self.assertEqual(len(serving), 3)
        for ax in serving:
            self.assertEqual(ax["series"], ["plainllama"])
            self.assertEqual(ax["xticks"], [str(k) for k in CONCURRENCY])
        self.assertEqual([ax["ylabel"] for ax in serving],
                         ["aggregate generated tokens/s", "time to first token, median (ms)",
                          "request latency, p95 (ms)"])

    def test_speed_table(self):
        rows = tables(self.md)["Speed"]
        self.assertEqual(rows[0][:4], ["engine", "format", "threads", "depth"])
        depths = self.rep["settings"]["depths"]
        self.assertEqual([(r[1], int(r[3])) for r in rows[1:]], [(f, d) for f in FORMATS for d in depths])
        for r in rows[1:]:
            for cell in r[2:]:
                self.assertTrue(is_number(cell), f"speed row {r}: {cell!r}")
        for r in self.rep["speed"]:
            self.assertGreater(r["tg_tok_s"], 0)
            self.assertGreater(r["pp_tok_s"], 0)
            # a small model runs from the caches (tg above the memory's read rate) and the quantized formats and BF16
            # multiply in 8-bit integers or BF16 pairs (pp above the f32 FMA peak): the shares are positive figures
            self.assertGreater(r["tg_share"], 0, r)
            self.assertGreater(r["pp_share"], 0, r)
            self.assertAlmostEqual(r["tg_share"], r["tg_gb_s"] / r["bandwidth_gb_s"], places=9)
            self.assertAlmostEqual(r["pp_share"], r["pp_gflops"] / r["fma_peak_gflops"], places=9)

    def test_accuracy_table(self):
        rows = tables(self.md)["Accuracy"]
        self.assertEqual(rows[0][:4], ["engine", "format", "bytes/weight", "PPL"])
        self.assertEqual([r[1] for r in rows[1:]], ["F32 (reference)"] + FORMATS)
        for r in rows[1:]:
            self.assertTrue(is_number(r[2]) and is_number(r[3]), r)
            if r[1] in QUANTIZED:
                self.assertTrue(all(is_number(c) for c in r[4:]), r)
        acc = {r["format"]: r for r in self.rep["accuracy"]}
        ref = acc["F32 (reference)"]
        self.assertEqual(ref["bytes_per_weight"], 4.0)
        # the formats in order of size lose accuracy in the same order; F16 stays close to the reference
        self.assertLess(acc["Q8_0"]["kld"], acc["Q4_K_M"]["kld"])
        self.assertGreater(acc["Q8_0"]["bytes_per_weight"], acc["Q6_K"]["bytes_per_weight"])
        self.assertGreater(acc["Q6_K"]["bytes_per_weight"], acc["Q4_K_M"]["bytes_per_weight"])
        self.assertAlmostEqual(acc["F16"]["ppl"], ref["ppl"], delta=0.01 * ref["ppl"])
        self.assertEqual(acc["F16"]["bytes_per_weight"], 2.0)

    def test_serving_table(self):
        rows = tables(self.md)["Serving"]
        self.assertEqual(rows[0][:4], ["engine", "streams", "requests", "errors"])
        self.assertEqual([int(r[1]) for r in rows[1:]], CONCURRENCY)
        for r in rows[1:]:
            self.assertEqual(r[3], "0", r)
            self.assertTrue(all(is_number(c) for c in r[4:]), r)

    def test_compare(self):
        j = os.path.join(self.quick, "report.json")
        out = os.path.join(OUT, "compare")
        r = subprocess.run([sys.executable, SCRIPT, "--compare", j, j, "-o", out], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        w, h = png_size(os.path.join(out, "compare.png"))
        self.assertGreater(w * h, 0)
        ratios = json.load(open(os.path.join(out, "compare.json")))["ratios"]
        groups = {x["group"] for x in ratios}
        self.assertTrue(set(FORMATS) <= groups, groups)
        self.assertTrue({f"serving x{k}" for k in CONCURRENCY} <= groups, groups)
        for x in ratios:  # a report against itself
            self.assertAlmostEqual(x["ratio"], 1.0, places=9, msg=x)
        self.assertIn("| format | measure | B / A |", open(os.path.join(out, "compare.md")).read())

    def test_bad_input(self):
        cases = [
            (["--quick", "--binary", "/nonexistent/plainllama", "-o", OUT + "/x"], "/nonexistent/plainllama"),
            (["--quick", "--binary", BINARY, "--formats", "q3_k", "-o", OUT + "/x"], "q3_k"),
            (["--quick", "--binary", BINARY, "--model", "/nonexistent/model", "-o", OUT + "/x"], "/nonexistent/model"),
            (["--quick", "--binary", BINARY, "--llama-cpp", "/nonexistent/bin", "-o", OUT + "/x"], "/nonexistent/bin"),
            (["--compare", "/nonexistent/a.json", "/nonexistent/b.json", "-o", OUT + "/x"], "/nonexistent/a.json"),
        ]
        for args, name in cases:
            r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, args)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(name, lines[0])
            self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(OUT + "/x"))


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

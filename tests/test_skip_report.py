#!/usr/bin/python3
"""The test command's skip report: unittest_summary.py names each skipped test with its reason and appends it to
$PLAINLLAMA_SKIP_LOG; skip_report.py prints every skip and fails on one whose reason is not about the machine
(tests/allowed_skips.txt), such as a dependency the test command installs. (The gtest side: skip_log_test.cpp.)
Last line: "N passed, N failed".
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import unittest_summary

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ALLOWED = os.path.join(TESTS_DIR, "allowed_skips.txt")

MODULE = textwrap.dedent('''
    import sys
    import unittest
    sys.path.insert(0, {tests!r})
    import unittest_summary

    class T(unittest.TestCase):
        def test_runs(self):
            pass

        @unittest.skip({reason!r})
        def test_skipped(self):
            pass

    if __name__ == "__main__":
        sys.exit(unittest_summary.run(__name__))
''')


def run_module(tmp, reason):
    """A test file with one passing and one skipped test, run with a skip log: (its output, the log's lines)."""
    path = os.path.join(tmp, "test_sample.py")
    with open(path, "w") as f:
        f.write(MODULE.format(tests=TESTS_DIR, reason=reason))
    log = os.path.join(tmp, "skipped.txt")
    if os.path.exists(log):
        os.remove(log)
    r = subprocess.run([sys.executable, path], capture_output=True, text=True,
                       env=dict(os.environ, PLAINLLAMA_SKIP_LOG=log))
    assert r.returncode == 0, r.stdout + r.stderr
    with open(log) as f:
        return r.stdout, f.read().splitlines(), log


def report(log):
    r = subprocess.run([sys.executable, os.path.join(TESTS_DIR, "skip_report.py"), log, ALLOWED],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


class SkipReport(unittest.TestCase):
    def test_a_skip_is_named_and_logged(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, lines, _ = run_module(tmp, "machine: no  such\ndevice")
            self.assertEqual(lines, ["python test_sample.T.test_skipped: machine: no such device"])
            self.assertIn("skipped: python test_sample.T.test_skipped: machine: no such device\n", out)
            self.assertTrue(out.endswith("1 passed, 0 failed, 1 skipped\n"), out)

    def test_only_reasons_about_the_machine_pass(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, _, log = run_module(tmp, "machine: 1 physical core")
            status, out = report(log)
            self.assertEqual(status, 0, out)
            self.assertIn("skipped: python test_sample.T.test_skipped: machine: 1 physical core\n", out)
            # a dependency the test command installs (node) is not the machine's lack: CI fails
            _, _, log = run_module(tmp, "node is not installed")
            status, out = report(log)
            self.assertEqual(status, 1, out)
            self.assertIn("test_sample.T.test_skipped: node is not installed   <- not a reason about the machine", out)
            # no skips at all
            status, out = report(os.path.join(tmp, "none.txt"))
            self.assertEqual((status, out), (0, "skipped tests: 0\n"))


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

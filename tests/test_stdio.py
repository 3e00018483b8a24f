#!/usr/bin/python3
"""Prompt files that are pipes or devices, stdin that is closed or a directory, and stdout that cannot be written:
`-f /dev/stdin` and `-f <(cmd)` read the text; `-f -` from a directory or a closed stdin is an error, not an empty
prompt; output to /dev/full is an error with exit status 1 naming ENOSPC (generate, inspect, perplexity --json, help);
a closed pipe ends the program quietly (SIGPIPE), as other Unix tools.
Last line: "N passed, N failed".
"""
import os
import signal
import subprocess
import sys
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")
DATA = os.path.join(SHARED_DIR, "data", "tinystories_val.txt")
GEN = [BINARY, "generate", "-m", MODEL, "-n", "4", "--temp", "0", "--quiet"]


def sh(cmd):
    """bash -c cmd: (status, stdout, stderr)."""
    r = subprocess.run(["bash", "-c", cmd], capture_output=True)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def q(args):
    return " ".join("'" + a + "'" for a in args)


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class Stdio(unittest.TestCase):
    def test_prompt_from_pipes_and_devices(self):
        want = subprocess.run(GEN + ["-p", "Once upon"], capture_output=True, check=True).stdout.decode()
        for cmd in ("printf 'Once upon' | " + q(GEN) + " -f /dev/stdin",
                    q(GEN) + " -f <(printf 'Once upon')",
                    "printf 'Once upon' | " + q(GEN) + " -f -"):
            status, out, err = sh(cmd)
            self.assertEqual((status, out), (0, want), cmd + ": " + err)

    def test_stdin_closed_or_a_directory(self):
        for redirect, why in (("< /", "stdin: is a directory"), ("<&-", "stdin: cannot be read")):
            status, out, err = sh(q(GEN) + " -f - " + redirect)
            self.assertEqual(status, 1, err)
            self.assertIn(why, err)
            self.assertEqual(out, "")

    def test_stdout_that_cannot_be_written(self):
        for args in (GEN + ["-p", "Once upon"], [BINARY, "inspect", "-m", MODEL], [BINARY, "--version"],
                     [BINARY, "generate", "--help"],
                     [BINARY, "perplexity", "-m", MODEL, "-f", DATA, "-c", "64", "--chunks", "2", "--json", "--quiet"]):
            status, _, err = sh(q(args) + " > /dev/full")
            self.assertEqual(status, 1, args[1] + ": " + err)
            # the errno the kernel gave, not "an earlier write failed" (stdio forgets why a write failed)
            self.assertIn("plainllama: error: stdout: write failed: No space left on device\n", err)
            self.assertEqual(err.count("\n"), 1, err)

    def test_a_closed_pipe_ends_quietly(self):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the first write
        try:
            p = subprocess.run(GEN + ["-p", "Once"], stdout=w, stderr=subprocess.PIPE, timeout=60)
        finally:
            os.close(w)
        self.assertEqual(p.returncode, -signal.SIGPIPE)
        self.assertEqual(p.stderr, b"")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

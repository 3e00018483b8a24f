#!/usr/bin/python3
"""`plainllama generate` on a pseudo-terminal: Ctrl-C stops generation cleanly, printing what was generated
and the timings, with exit status 130; the loading percentage is shown and then erased.

stories260K generates its whole context in well under a second, too fast to interrupt by timing, so the
terminal's output is stopped first (Ctrl-S; the child execs only once it is): generate blocks writing its first
piece; the Ctrl-C, sent once its SIGINT handler is installed (/proc/PID/status), interrupts that write and the line
discipline restarts output. No fixed sleeps (pty_ready.py); the same technique as test_chat_pty.py.
Last line: "N passed, N failed".
"""
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
import unittest

import pty_ready
import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")


def start(args, stopped=False):
    """plainllama with its stdio on a pseudo-terminal: (pid, fd). stopped: started once the terminal's output is
    stopped (the parent sends Ctrl-S)."""
    pid, fd = pty.fork()
    if pid == 0:
        if stopped:
            pty_ready.wait_until_output_stopped()
        os.environ["OMP_WAIT_POLICY"] = "passive"
        os.execv(BINARY, [BINARY, *args])
    return pid, fd


def finish(pid, fd, timeout=20):
    """Everything the process prints until it exits (killed after `timeout` s): (exit status or None, text)."""
    out, status, deadline = b"", None, time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            out += data
            if not data and status is not None:
                break
        if status is None:
            p, st = os.waitpid(pid, os.WNOHANG)
            if p:
                status = os.waitstatus_to_exitcode(st)
        elif not r:
            break
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    os.close(fd)
    return status, out.decode(errors="replace")


def run_interrupted(args):
    pid, fd = start(args, stopped=True)
    os.write(fd, b"\x13")  # Ctrl-S: the child execs once output is stopped
    pty_ready.wait_sigint_handler(pid, BINARY)  # installed before generate's first write, which then blocks
    os.write(fd, b"\x03")  # Ctrl-C
    return finish(pid, fd)


def run_on_pty(args):
    """Runs plainllama on a pseudo-terminal; returns everything it printed (exit status 0)."""
    status, text = finish(*start(args))
    assert status == 0, text
    return text


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class GeneratePty(unittest.TestCase):
    def test_ctrl_c_stops_generation_and_prints_timings(self):
        status, out = run_interrupted(["generate", "-m", MODEL, "-p", "Once upon a time", "-n", "-1", "--temp", "0",
                                       "-t", "1"])
        self.assertEqual(status, 130, out)
        self.assertIn("[interrupted]", out)
        self.assertIn("Once upon a time", out)
        m = re.search(r"eval time =\s+[\d.]+ ms /\s+(\d+) tokens", out)
        self.assertIsNotNone(m, out)
        self.assertLess(int(m.group(1)), 100, "generation was not stopped early: " + out)

    def test_loading_progress_on_a_terminal_is_erased(self):
        # Shown for models of 64 MiB of matrices or more: a random one of 90 MiB (one layer, vocab 32000).
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "m")
            subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "make_synthetic_model.py"),
                            "--hidden-size", "1024", "--intermediate-size", "2816", "--num-hidden-layers", "1",
                            "--num-attention-heads", "8", "--num-key-value-heads", "8", "--untie-word-embeddings",
                            "--dtype", "bf16", "--tokenizer", os.path.join(SHARED_DIR, "tokenizers", "llama2",
                                                                           "tokenizer.model"), model],
                           check=True, capture_output=True)
            text = run_on_pty(["generate", "-m", model, "-p", "Once", "-n", "2", "--temp", "0", "-c", "64"])
            small = run_on_pty(["generate", "-m", MODEL, "-p", "Once", "-n", "2", "--temp", "0"])
        self.assertIn("\rloading m: ", text)  # the folder's name
        shown = [int(p) for p in re.findall(r"\rloading [^\r]*: (\d+)%", text)]
        self.assertGreaterEqual(len(shown), 2, text)
        self.assertEqual(shown, sorted(set(shown)), "percentages go up: " + text)
        # The percentage line is erased before anything else is printed.
        erase = text.index("\r\x1b[K")
        self.assertLess(text.index("\rloading "), erase)
        self.assertNotIn("loading", text[erase:])
        self.assertIn("eval time", text[erase:])
        self.assertNotIn("loading", small)  # stories260K: 1 MB, no progress

if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

#!/usr/bin/python3
"""`plainllama chat` on a pseudo-terminal: the "> " prompt, Ctrl-C during a reply returning to the prompt,
Ctrl-C at the prompt exiting, Ctrl-D exiting cleanly.

stories260K writes a whole 512-token reply in about 0.1 s, too fast to hit with a Ctrl-C by timing. So the test
stops the terminal's output first (Ctrl-S, IXON): the chat blocks in its first write of the reply; the Ctrl-C
then interrupts that write, and the line discipline restarts output (n_tty restarts a stopped tty on a signal
character).

Run by ctest with PLAINLLAMA_BINARY and PLAINLLAMA_SHARED_DIR. Last line: "N passed, N failed".
"""
import os
import pty
import re
import select
import subprocess
import sys
import time
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")
CTRL_C, CTRL_D, CTRL_S = b"\x03", b"\x04", b"\x13"


class Chat:
    """The chat subcommand on a pty; everything it writes (stdout and stderr) accumulates in self.out."""

    def __init__(self, *extra, threads="1"):
        args = [BINARY, "chat", "-m", MODEL, "--temp", "0", *(["-t", threads] if threads else []), *extra]
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["OMP_WAIT_POLICY"] = "passive"
            os.execv(BINARY, args)
        self.pid, self.fd, self.out, self.status = pid, fd, b"", None

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child is gone
            return False
        self.out += data
        return bool(data)

    def expect(self, pattern, start=0, timeout=15.0):
        """Reads until `pattern` (bytes) appears at or after `start`; returns the offset just past it."""
        deadline = time.monotonic() + timeout
        while True:
            i = self.out.find(pattern, start)
            if i >= 0:
                return i + len(pattern)
            left = deadline - time.monotonic()
            if left <= 0 or (not self._read(min(left, 0.2)) and self.poll() is not None):
                raise AssertionError(f"{pattern!r} not seen after offset {start}; output so far:\n"
                                     + self.out.decode(errors="replace"))

    def send(self, data):
        os.write(self.fd, data)

    def poll(self):
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status

    def wait(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        if self.status is None:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            raise AssertionError("chat did not exit; output:\n" + self.out.decode(errors="replace"))
        while self._read(0.05):
            pass
        os.close(self.fd)
        return self.status


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class ChatPty(unittest.TestCase):
    def test_ctrl_c_stops_the_reply_and_returns_to_the_prompt(self):
        c = Chat("-n", "-1")  # without the Ctrl-C the reply fills the 512-token context
        pos = c.expect(b"> ")
        c.send(CTRL_S)
        c.send(b"Once upon a time\n")
        time.sleep(1.0)  # the chat reads the line and blocks writing the reply's first piece
        self.assertIsNone(c.poll())
        c.send(CTRL_C)
        pos = c.expect(b"[interrupted]", pos)
        pos = c.expect(b"> ", pos)
        self.assertIsNone(c.poll(), "Ctrl-C during a reply must not exit")
        c.send(b"/stats\n")
        end = c.expect(b"tokens used", pos)
        used = re.search(rb"context: (\d+) / 512 tokens used", c.out[pos:end])
        self.assertIsNotNone(used, c.out[pos:end])
        self.assertLess(int(used.group(1)), 64, "the reply was not stopped early")
        # The session goes on: another turn, then Ctrl-D at the prompt exits with status 0.
        pos = c.expect(b"> ", end)
        c.send(b"The dog\n")
        pos = c.expect(b"> ", pos)
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))

    def test_ctrl_c_at_the_prompt_exits(self):
        c = Chat("-n", "8")
        pos = c.expect(b"> ")
        c.send(b"Once upon a time\n")
        pos = c.expect(b"> ", pos)
        c.send(CTRL_C)
        self.assertEqual(c.wait(), 130, c.out.decode(errors="replace"))

    def test_huge_and_binary_lines(self):
        # A 1 MB line (the terminal's line discipline keeps the first 4095 bytes of a canonical line) and a
        # line of binary bytes (no signal or EOF characters): each answered or refused, and the session goes on.
        c = Chat("-n", "8")
        pos = c.expect(b"> ")
        chunk = b"Once upon a time " * 64
        for _ in range((1 << 20) // len(chunk)):
            c.send(chunk)
            c._read(0)  # keep draining whatever the chat prints
        c.send(b"\n")
        pos = c.expect(b"> ", pos, timeout=30)
        c.send(b"\x01\x02\x05\x7f\xff\xfe\x80zz\n")
        pos = c.expect(b"> ", pos)
        c.send(b"The dog\n")
        pos = c.expect(b"> ", pos)
        self.assertIsNone(c.poll())
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out[-2000:].decode(errors="replace"))

    @unittest.skipIf((os.cpu_count() or 1) < 2, "needs 2 cores")
    def test_threads_follow_other_work_between_turns(self):
        # Without -t each turn first looks at the cores: a busy loop started between turns is left its core,
        # with a note (or the note came with the banner, when other work already ran at start).
        c = Chat("-n", "4", threads=None)
        pos = c.expect(b"> ")
        c.send(b"Once upon a time\n")
        pos = c.expect(b"> ", pos)
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.3)
            c.send(b"The dog\n")
            pos = c.expect(b"> ", pos)
        finally:
            spin.kill()
            spin.wait()
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
        self.assertIn(b"cores busy with other work; -t N to override)", c.out)

    def test_prompt_only_on_a_terminal(self):
        c = Chat("-n", "4", "--quiet")
        pos = c.expect(b"> ")
        c.send(b"/exit\n")
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
        self.assertEqual(c.out.count(b"> "), 1, c.out)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

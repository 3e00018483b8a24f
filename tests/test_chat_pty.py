#!/usr/bin/python3
"""`plainllama chat` on a pseudo-terminal: the "> " prompt, Ctrl-C during a reply returning to the prompt,
Ctrl-C at the prompt exiting, Ctrl-D exiting cleanly.

stories260K writes a whole 512-token reply in about 0.1 s, too fast to hit with a Ctrl-C by timing. So the test
stops the terminal's output (Ctrl-S, IXON) before the Enter that sends the line: the chat blocks in its next write
(the line editor's newline, or the reply's first piece), which the test waits for (/proc/PID/syscall, pty_ready.py:
no fixed sleeps); the Ctrl-C interrupts that write, the line discipline restarts output (n_tty restarts a stopped
tty on a signal character), and the reply stops at once.

Line editing (libedit): arrow keys move in the line, up-arrow recalls earlier lines, within the session and across
sessions through the history file (mode 0600; --no-history: none). Each chat gets its own empty HOME.

Run by ctest with PLAINLLAMA_BINARY and PLAINLLAMA_SHARED_DIR. Last line: "N passed, N failed".
"""
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import termios
import time
import unittest

import pty_ready
import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")
CTRL_C, CTRL_D, CTRL_S = b"\x03", b"\x04", b"\x13"


def physical_cores():
    """The binary's own count (inspect --json), on which its default thread count is based."""
    if not os.path.exists(BINARY):
        return 0
    r = subprocess.run([BINARY, "inspect", "-m", MODEL, "--json"], capture_output=True, check=True)
    return json.loads(r.stdout)["physical_cores"]


PHYSICAL_CORES = physical_cores()
LEFT, UP = b"\x1b[D", b"\x1b[A"  # the keys as an ANSI terminal sends them


class Chat:
    """The chat subcommand on a pty; everything it writes (stdout and stderr) accumulates in self.out."""

    def __init__(self, *extra, threads="1", home=None, state=None):
        """home: the HOME the chat sees (its history file is under it); None: a new empty folder. state: the
        XDG_STATE_HOME it sees (None: unset)."""
        args = [BINARY, "chat", "-m", MODEL, "--temp", "0", *(["-t", threads] if threads else []), *extra]
        if home is None:
            self._home = tempfile.TemporaryDirectory()
            home = self._home.name
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["OMP_WAIT_POLICY"] = "passive"
            os.environ["HOME"] = home
            if state is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = state
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

    def prompt(self, start=0, timeout=15.0):
        """Waits for a new "> " prompt at the start of a line after `start` (the line editor redraws a line being
        edited after a carriage return, prompt included: that is not a new one); returns the offset past it."""
        pos = self.expect(b"\n> ", start, timeout) if start else self.expect(b"> ", start, timeout)
        # The line editor may print the prompt before it takes the terminal out of canonical mode; a key sent in
        # between is read by the line discipline (a Ctrl-D there becomes a NUL byte). So wait for the raw mode
        # too (on a pty master, tcgetattr reads the terminal's settings).
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.fd)[3] & termios.ICANON:
            if time.monotonic() > deadline or self.poll() is not None:
                raise AssertionError("the chat printed a prompt but does not read a line; output so far:\n"
                                     + self.out.decode(errors="replace"))
            self._read(0.01)
        return pos

    def send(self, data):
        """Writes all of `data`, reading what the chat prints meanwhile: the line editor echoes each byte, and a
        blocking write here while its echo fills the terminal's buffer would leave both sides waiting."""
        os.set_blocking(self.fd, False)
        try:
            while data:
                r, w, _ = select.select([self.fd], [self.fd], [], 15.0)
                if not r and not w:
                    raise AssertionError("the chat neither reads nor writes; output so far:\n"
                                         + self.out[-2000:].decode(errors="replace"))
                if r:
                    self._read(0)
                if w:
                    try:
                        data = data[os.write(self.fd, data[:4096]):]
                    except BlockingIOError:
                        pass
        finally:
            os.set_blocking(self.fd, True)

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
        if hasattr(self, "_home"):
            self._home.cleanup()
        return self.status


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class ChatPty(unittest.TestCase):
    def test_ctrl_c_stops_the_reply_and_returns_to_the_prompt(self):
        c = Chat("-n", "-1")  # without the Ctrl-C the reply fills the 512-token context
        pos = c.prompt()
        c.send(b"Once upon a time")
        pos = c.expect(b"time", pos)  # the line editor echoes what is typed: output stops after it
        c.send(CTRL_S + b"\n")  # the line discipline stops output before the newline reaches the chat
        pty_ready.wait_blocked_in_write(c.pid)  # it read the line, and blocks writing (its echo or the reply)
        self.assertIsNone(c.poll())
        c.send(CTRL_C)
        pos = c.expect(b"[interrupted]", pos)
        pos = c.prompt(pos)
        self.assertIsNone(c.poll(), "Ctrl-C during a reply must not exit")
        c.send(b"/stats\n")
        end = c.expect(b"tokens used", pos)
        used = re.search(rb"context: (\d+) / 512 tokens used", c.out[pos:end])
        self.assertIsNotNone(used, c.out[pos:end])
        self.assertLess(int(used.group(1)), 64, "the reply was not stopped early")
        # The session goes on: another turn, then Ctrl-D at the prompt exits with status 0.
        pos = c.prompt(end)
        c.send(b"The dog\n")
        pos = c.prompt(pos)
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))

    def test_ctrl_c_at_the_prompt_exits(self):
        c = Chat("-n", "8")
        pos = c.prompt()
        c.send(b"Once upon a time\n")
        pos = c.prompt(pos)
        c.send(CTRL_C)
        self.assertEqual(c.wait(), 130, c.out.decode(errors="replace"))

    def test_huge_and_binary_lines(self):
        # A 1 MB line (the terminal's line discipline keeps the first 4095 bytes of a canonical line) and a
        # line of binary bytes (no signal or EOF characters): each answered or refused, and the session goes on.
        c = Chat("-n", "8")
        pos = c.prompt()
        chunk = b"Once upon a time " * 64
        c.send(chunk * ((1 << 20) // len(chunk)) + b"\n")
        pos = c.prompt(pos, timeout=30)
        c.send(b"\x01\x02\x05\x7f\xff\xfe\x80zz\n")
        pos = c.prompt(pos)
        c.send(b"The dog\n")
        pos = c.prompt(pos)
        self.assertIsNone(c.poll())
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out[-2000:].decode(errors="replace"))

    @unittest.skipIf(PHYSICAL_CORES < 2, "machine: 1 physical core (as the binary counts them): no core to leave to "
                     "other work")
    def test_threads_follow_other_work_between_turns(self):
        # Without -t each turn first looks at the cores: a busy loop started between turns is left its core,
        # with a note (or the note came with the banner, when other work already ran at start).
        c = Chat("-n", "4", threads=None)
        pos = c.prompt()
        c.send(b"Once upon a time\n")
        pos = c.prompt(pos)
        spin = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                                stdout=subprocess.PIPE)
        try:
            spin.stdout.readline()  # it runs its loop now
            c.send(b"The dog\n")
            pos = c.prompt(pos)
        finally:
            spin.kill()
            spin.wait()
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
        self.assertIn(b"cores busy with other work; -t N to override)", c.out)

    def test_prompt_only_on_a_terminal(self):
        c = Chat("-n", "4", "--quiet")
        pos = c.prompt()
        c.send(b"/exit\n")
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
        self.assertEqual(c.out.count(b"> "), 1, c.out)

    def user_lines(self, c, pos, path):
        """The user messages of the conversation, through /save (what is sent is what is saved)."""
        c.send(f"/save {path}\n".encode())
        pos = c.prompt(pos)
        with open(path, encoding="utf-8") as f:
            return pos, [m["content"] for m in json.load(f)["messages"] if m["role"] == "user"]

    def test_arrow_keys_edit_the_line_and_up_arrow_recalls(self):
        with tempfile.TemporaryDirectory() as tmp:
            c = Chat("-n", "4")
            pos = c.prompt()
            c.send(b"The dg" + LEFT + b"o\n")  # left-arrow moves back over the g; the o goes before it
            pos = c.prompt(pos)
            c.send("café".encode() + LEFT + b"x\n")  # one left-arrow steps over the whole \u00e9 (2 bytes)
            pos = c.prompt(pos)
            c.send(UP + UP + b"\n")  # the line before the last one
            pos = c.prompt(pos)
            pos, lines = self.user_lines(c, pos, os.path.join(tmp, "t.json"))
            self.assertEqual(lines, ["The dog", "cafx\u00e9", "The dog"], c.out.decode(errors="replace"))
            c.send(CTRL_D)
            self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))

    def test_history_file_across_sessions(self):
        with tempfile.TemporaryDirectory() as home:
            hist = os.path.join(home, ".local", "state", "plainllama", "history")
            c = Chat("-n", "4", home=home)
            pos = c.prompt()
            c.send(b"Once upon a time\n")
            pos = c.prompt(pos)
            c.send(b"/exit\n")
            self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
            self.assertEqual(os.stat(hist).st_mode & 0o777, 0o600)
            self.assertEqual(os.stat(os.path.dirname(hist)).st_mode & 0o777, 0o700)
            saved = open(hist, "rb").read()

            # A new session recalls the last one's lines: up-arrow gives /exit, up again the message.
            c = Chat("-n", "4", home=home)
            pos = c.prompt()
            c.send(UP + UP + b"\n")
            pos = c.prompt(pos)
            pos, lines = self.user_lines(c, pos, os.path.join(home, "t.json"))
            self.assertEqual(lines, ["Once upon a time"])
            c.send(CTRL_D)
            self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
            saved = open(hist, "rb").read()
            self.assertIn(b"/save", saved)

            # --no-history: nothing recalled from the file (an empty line sends nothing), the file left as it is.
            c = Chat("-n", "4", "--no-history", home=home)
            pos = c.prompt()
            c.send(UP + b"\n")
            pos = c.prompt(pos)
            c.send(b"The dog\n")
            pos = c.prompt(pos)
            pos, lines = self.user_lines(c, pos, os.path.join(home, "t2.json"))
            self.assertEqual(lines, ["The dog"])
            c.send(CTRL_D)
            self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
            self.assertEqual(open(hist, "rb").read(), saved)

    def test_history_file_that_cannot_be_written_is_a_warning(self):
        with tempfile.TemporaryDirectory() as home:
            open(os.path.join(home, ".local"), "w").close()  # a file where the folder would go
            c = Chat("-n", "4", home=home)
            pos = c.prompt()
            c.send(b"Once upon a time\n")
            pos = c.prompt(pos)
            c.send(CTRL_D)
            self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
            self.assertIn(b"history not saved (--no-history turns it off)", c.out)

    def one_turn(self, **kw):
        """A chat that sends one line and exits: its output."""
        c = Chat("-n", "4", **kw)
        pos = c.prompt()
        c.send(b"Once upon a time\n")
        c.prompt(pos)
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))
        return c.out.decode(errors="replace")

    def test_history_symlink_is_never_followed(self):
        with tempfile.TemporaryDirectory() as home:
            folder = os.path.join(home, ".local", "state", "plainllama")
            os.makedirs(folder)
            hist = os.path.join(folder, "history")
            victim = os.path.join(home, "victim.txt")
            with open(victim, "w") as f:
                f.write("precious\n")
            os.symlink(victim, hist)
            out = self.one_turn(home=home)
            self.assertEqual(open(victim).read(), "precious\n")
            self.assertTrue(os.path.islink(hist))
            self.assertEqual(out.count("history: a symbolic link; left as it is"), 1, out)  # warned once
            # a link to nothing: its target is not created either
            os.remove(hist)
            os.symlink(os.path.join(home, "made.txt"), hist)
            out = self.one_turn(home=home)
            self.assertFalse(os.path.exists(os.path.join(home, "made.txt")))
            self.assertTrue(os.path.islink(hist))
            self.assertEqual(out.count("a symbolic link"), 1, out)

    def test_history_file_that_is_not_ours_is_left_alone(self):
        with tempfile.TemporaryDirectory() as home:
            folder = os.path.join(home, ".local", "state", "plainllama")
            os.makedirs(folder)
            hist = os.path.join(folder, "history")
            with open(hist, "w") as f:
                f.write("my own notes\n")
            out = self.one_turn(home=home)
            self.assertEqual(open(hist).read(), "my own notes\n")
            self.assertEqual(out.count("not a libedit history file; left as it is"), 1, out)
            self.assertEqual(sorted(os.listdir(folder)), ["history"])  # nothing beside it either

    def test_no_home_folder_is_created(self):
        with tempfile.TemporaryDirectory() as tmp:
            home = os.path.join(tmp, "nonexistent", "x")
            out = self.one_turn(home=home)
            self.assertEqual(os.listdir(tmp), [], "created under a HOME that does not exist")
            self.assertIn("x: no such folder; history not saved", out)
            # nor a state folder that is not there
            state = os.path.join(tmp, "state")
            out = self.one_turn(home=tmp, state=state)
            self.assertEqual(os.listdir(tmp), [], out)

    def test_xdg_state_home(self):
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as state:
            self.one_turn(home=home, state=state)
            hist = os.path.join(state, "plainllama", "history")
            self.assertEqual(os.stat(hist).st_mode & 0o777, 0o600)
            self.assertEqual(os.stat(os.path.dirname(hist)).st_mode & 0o777, 0o700)
            with open(hist, "rb") as f:
                self.assertEqual(f.readline(), b"_HiStOrY_V2_\n")
            self.assertEqual(os.listdir(home), [])  # not under HOME

    def test_history_keeps_the_last_1000_lines(self):
        with tempfile.TemporaryDirectory() as home:
            folder = os.path.join(home, ".local", "state", "plainllama")
            os.makedirs(folder)
            hist = os.path.join(folder, "history")
            with open(hist, "w") as f:
                f.write("_HiStOrY_V2_\n" + "".join(f"line{i:04d}\n" for i in range(1, 1006)))
            self.one_turn(home=home)
            with open(hist, "rb") as f:
                lines = f.read().decode().split("\n")[1:-1]  # libedit's encoding: a space is \040
            self.assertEqual(len(lines), 1000)
            self.assertEqual(lines[0], "line0007")  # 1005 + 1 new, the oldest 6 dropped
            self.assertEqual(lines[-2:], ["line1005", "Once\\040upon\\040a\\040time"])

    def test_context_note_on_its_own_line(self):
        # The reply fills the context; the note that it was cut starts a line of its own on the terminal, where
        # stdout and stderr meet.
        c = Chat("-n", "-1", "-c", "32")
        pos = c.prompt()
        c.send(b"Once upon a time\n")
        end = c.expect(b"tokens is full: the reply was cut", pos)
        note = c.out.rfind(b"[the context of 32", pos, end)
        self.assertGreater(note, pos, c.out[pos:end])
        self.assertEqual(c.out[note - 1:note], b"\n", c.out[pos:end])
        c.prompt(end)
        c.send(CTRL_D)
        self.assertEqual(c.wait(), 0, c.out.decode(errors="replace"))


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

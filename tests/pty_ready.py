"""Readiness signals for the pseudo-terminal tests, instead of fixed sleeps: a Ctrl-C must reach plainllama while it
is where the test wants it (its handler installed, blocked writing to a terminal whose output is stopped), on a busy
machine as on an idle one.
"""
import os
import platform
import select
import time

# write(2)'s number, as /proc/PID/syscall shows the call a blocked thread is in
WRITE_SYSCALL = {"x86_64": 1, "aarch64": 64}.get(platform.machine())


def wait_until_output_stopped():
    """In the child of pty.fork(), before exec: returns once the terminal's output is stopped (the parent's Ctrl-S
    has been seen): a stopped pseudo-terminal is not writable."""
    while select.select([], [1], [], 0)[1]:
        time.sleep(0.005)


def _wait(pid, ready, what, timeout):
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid}: {what} not seen in {timeout} s")
        if os.waitpid(pid, os.WNOHANG)[0]:
            raise AssertionError(f"process {pid} ended before {what}")
        time.sleep(0.005)


def wait_sigint_handler(pid, binary, timeout=30.0):
    """Waits until process `pid` runs `binary` (after the exec: a handler of the parent's does not count) and has a
    handler of its own for SIGINT (SigCgt in /proc/PID/status)."""
    def ready():
        try:
            if os.readlink(f"/proc/{pid}/exe") != os.path.realpath(binary):
                return False
            with open(f"/proc/{pid}/status") as f:
                caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return False
        return bool(caught & (1 << 1))  # bit SIGINT - 1
    _wait(pid, ready, "a SIGINT handler", timeout)


def wait_blocked_in_write(pid, timeout=30.0):
    """Waits until the main thread of process `pid` is blocked in write(2) (/proc/PID/syscall: the call a sleeping
    thread is in)."""
    if WRITE_SYSCALL is None:
        raise AssertionError(f"write(2)'s number on {platform.machine()} is not known to this test")

    def ready():
        try:
            with open(f"/proc/{pid}/syscall") as f:
                fields = f.read().split()
        except OSError:
            return False
        return bool(fields) and fields[0] == str(WRITE_SYSCALL)
    _wait(pid, ready, "a blocked write", timeout)

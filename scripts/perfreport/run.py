"""Running commands: their output, or their output as JSON, with a one-line Fail when they fail; and the progress
line on stderr.
"""
import json
import os
import subprocess
import sys
import time

from .common import TTY, Fail


def run(cmd, timeout=3600, env=None):
    """stdout of cmd; Fail naming the command and its last stderr line when it fails."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise Fail(f"{cmd[0]}: not found")
    except subprocess.TimeoutExpired:
        raise Fail(f"{os.path.basename(cmd[0])} took more than {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        raise Fail(f"{os.path.basename(cmd[0])} failed (exit {p.returncode}): {lines[-1] if lines else ''}"
                   f" [{' '.join(cmd)}]")
    return p.stdout


def run_json(cmd, timeout=3600):
    out = run(cmd, timeout)
    try:
        return json.loads(out)
    except ValueError:
        raise Fail(f"{os.path.basename(cmd[0])}: output is not JSON [{' '.join(cmd)}]")


class Progress:
    """Steps done and time left on stderr, when it is a terminal."""

    def __init__(self, steps):
        self.steps, self.done, self.t0 = steps, 0, time.time()  # steps: [(name, estimated seconds)]
        self.total = sum(s for _, s in steps) or 1
        self.times, self.name, self.t_step = [], None, self.t0  # [(name, seconds)] of the steps done

    def start(self, name):
        self.name, self.t_step = name, time.time()
        if not TTY:
            return
        spent = time.time() - self.t0
        est_done = sum(s for _, s in self.steps[:self.done])
        left = max(0.0, (self.total - est_done) * (spent / est_done if est_done > 0 else 1))
        print(f"\r\033[K[{self.done + 1}/{len(self.steps)}] {name}  ({fmt_time(spent)} elapsed, about "
              f"{fmt_time(left)} left)", end="", file=sys.stderr, flush=True)

    def step(self):
        self.done += 1
        self.times.append((self.name, round(time.time() - self.t_step, 1)))

    def end(self):
        if TTY:
            print(f"\r\033[Kdone in {fmt_time(time.time() - self.t0)}", file=sys.stderr)


def fmt_time(s):
    return f"{int(s) // 60}:{int(s) % 60:02d}"

#!/usr/bin/python3
"""The test command's report of skipped tests: reads the lines the tests appended to the skip log (gtest's listener in
test_util.cpp, unittest_summary.py: "gtest Suite.Name: reason", "python test_x.Class.test_y: reason"), prints each,
and exits 1 when a reason matches none of the allowed ones (tests/allowed_skips.txt: what the machine lacks), so that
CI fails on a test it could run but skipped (a missing dependency the test command installs, a missing binary).

Usage: skip_report.py LOG ALLOWED
"""
import os
import re
import sys


def main(log, allowed_file):
    with open(allowed_file, encoding="utf-8") as f:
        allowed = [re.compile(line.rstrip("\n")) for line in f if line.strip() and not line.startswith("#")]
    lines = []
    if os.path.exists(log):
        with open(log, encoding="utf-8") as f:
            lines = sorted(set(line.rstrip("\n") for line in f if line.strip()))
    refused = []
    for line in lines:
        name, _, reason = line.partition(": ")
        ok = any(a.search(reason) for a in allowed)
        print(f"skipped: {name}: {reason}" + ("" if ok else "   <- not a reason about the machine"))
        if not ok:
            refused.append(name)
    print(f"skipped tests: {len(lines)}" + (f", {len(refused)} that this machine should run" if refused else ""))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

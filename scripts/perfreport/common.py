"""What every part of scripts/report.py shares: the project's paths, the formats and concurrency levels measured,
the one-line failure (Fail, die) and how the report prints a path.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/perfreport/..
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
FOLDER_FORMATS = ("f16", "bf16")
QUANT_FORMATS = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0")
ALL_FORMATS = FOLDER_FORMATS + QUANT_FORMATS
CONCURRENCY = (1, 2, 4, 8)
TTY = sys.stderr.isatty()


class Fail(Exception):
    """A reason to stop, in one line."""


def die(msg):
    print(f"report.py: {msg}", file=sys.stderr)
    sys.exit(1)


def show(path):
    """A path as the report prints it: relative to the project root when beside it (../shared/...)."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return rel if not rel.startswith("../..") else path

#!/usr/bin/python3
"""`quantize` writing its folder (or a GGUF file) when the disk fills or a file-size limit (ulimit -f) is hit: the
error names the file and the errno as the kernel gave it ("No space left on device", "File too large"), and nothing of
the run is left (not its partial files, not the folder it made); a limit that ends the process by its signal
(SIGXFSZ) removes them too, as SIGINT and SIGTERM do.
Last line: "N passed, N failed".
"""
import os
import resource
import signal
import subprocess
import sys
import tempfile
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODEL = os.path.join(SHARED_DIR, "models", "tinystories3M")  # 3.4 MB as q8_0
# The outputs: a folder (the file named in errors is its model.safetensors) and a GGUF file.
OUTPUTS = [("q", "q/model.safetensors"), ("q.gguf", "q.gguf")]


def quantize(out):
    return [BINARY, "quantize", "-m", MODEL, "-o", out, "--quant", "q8_0", "--quiet"]


def can_mount_tmpfs():
    """Whether this process may mount a tmpfs in a mount namespace of its own (root with unshare)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k none '{tmp}'"],
                           capture_output=True)
        return r.returncode == 0


def file_limit(limit, ignore_signal):
    """A preexec_fn: a file-size limit of `limit` bytes, SIGXFSZ ignored (writes past it fail with EFBIG) or not."""
    def set_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        if ignore_signal:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return set_limit


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class OutputFiles(unittest.TestCase):
    def test_a_full_disk_is_named_and_leaves_nothing(self):
        if not can_mount_tmpfs():
            self.skipTest("machine: cannot mount a tmpfs in a private mount namespace (needs root and unshare)")
        for name, named in OUTPUTS:
            with self.subTest(out=name), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, name)
                # a 1 MiB disk of its own: the weights do not fit; what is left on it is listed before it goes
                script = (f"mount -t tmpfs -o size=1m none '{tmp}' && "
                          + " ".join(f"'{a}'" for a in quantize(out)) + f"; echo status=$?; ls -A '{tmp}'")
                r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual(r.stderr, f"plainllama: error: {os.path.join(tmp, named)}: cannot be written: "
                                           "No space left on device\n")
                self.assertEqual(r.stdout, "status=1\n")  # and an empty listing

    def test_a_file_size_limit_is_named_and_leaves_nothing(self):
        for name, named in OUTPUTS:
            with self.subTest(out=name), tempfile.TemporaryDirectory() as tmp:
                r = subprocess.run(quantize(os.path.join(tmp, name)), capture_output=True, text=True, timeout=120,
                                   preexec_fn=file_limit(1 << 20, ignore_signal=True))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, f"plainllama: error: {os.path.join(tmp, named)}: cannot be written: "
                                           "File too large\n")
                self.assertEqual(os.listdir(tmp), [])

    def test_the_limits_signal_removes_the_partial_files(self):
        # SIGXFSZ ends the process mid-file (its default action), as SIGINT or SIGTERM would
        for name, _ in OUTPUTS:
            with self.subTest(out=name), tempfile.TemporaryDirectory() as tmp:
                r = subprocess.run(quantize(os.path.join(tmp, name)), capture_output=True, text=True, timeout=120,
                                   preexec_fn=file_limit(1 << 20, ignore_signal=False))
                self.assertEqual(r.returncode, -signal.SIGXFSZ, r.stderr)
                self.assertEqual(os.listdir(tmp), [])


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

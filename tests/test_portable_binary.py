#!/usr/bin/python3
"""The one binary on older CPUs, emulated by qemu-user: on an x86-64 without AVX (qemu64, Nehalem) it picks the scalar
kernels, on a Haswell the AVX2 ones, and on each it generates llama2.c's greedy ids for stories260K (no SIGILL from
code compiled for a newer CPU); PLAINLLAMA_KERNELS naming a variant the emulated CPU lacks is a clear error.

Run by ctest with PLAINLLAMA_BINARY and PLAINLLAMA_SHARED_DIR. Last line: "N passed, N failed".
"""
import json
import os
import shutil
import subprocess
import sys
import unittest

import unittest_summary

BINARY = os.environ["PLAINLLAMA_BINARY"]
SHARED_DIR = os.environ["PLAINLLAMA_SHARED_DIR"]
MODEL = os.path.join(SHARED_DIR, "models", "stories260K")
QEMU = shutil.which("qemu-x86_64")


def run(cpu, args, env=None):
    e = dict(os.environ, OMP_WAIT_POLICY="passive")
    e.update(env or {})
    return subprocess.run([QEMU, "-cpu", cpu, BINARY] + args, capture_output=True, text=True, env=e, timeout=600)


@unittest.skipIf(sys.platform != "linux", "linux only")
class PortableBinary(unittest.TestCase):
    def test_qemu_present(self):
        self.assertIsNotNone(QEMU, "qemu-x86_64 (Debian qemu-user) is needed; scripts/setup.sh installs it")

    def test_kernels_chosen_for_the_cpu(self):
        for cpu, want in [("qemu64", "scalar"), ("Nehalem", "scalar"), ("Haswell", "avx2")]:
            with self.subTest(cpu=cpu):
                r = run(cpu, ["inspect", "-m", MODEL, "--json"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["kernels"], want)

    def test_greedy_ids_on_each_cpu(self):
        with open(os.path.join(SHARED_DIR, "reference", "stories260K", "greedy.json")) as f:
            case = json.load(f)["cases"][1]
        n, p = 60, len(case["prompt_ids"])
        for cpu in ["Nehalem", "Haswell"]:
            with self.subTest(cpu=cpu):
                r = run(cpu, ["generate", "-m", MODEL, "-p", case["prompt"], "--temp", "0", "-n", str(n), "-t", "1",
                              "--json", "--quiet"])
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(json.loads(r.stdout)["tokens"], case["sequence"][p:p + n])

    def test_a_variant_the_cpu_lacks_is_refused(self):
        r = run("Haswell", ["inspect", "-m", MODEL], {"PLAINLLAMA_KERNELS": "avx512"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("plainllama: error: PLAINLLAMA_KERNELS=avx512: this CPU does not support the avx512 kernels "
                      "(it runs avx2, scalar)", r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

#!/usr/bin/python3
"""Every C++ file under src/, include/ and tests/ is as clang-format (the root's .clang-format) writes it:
`clang-format --dry-run -Werror` on each, the files it would change named with its first complaint.

Run by ctest (PLAINLLAMA_SOURCE_DIR: the project root; else this file's parent folder). Last line: "N passed, N failed".
"""
import os
import pathlib
import shutil
import subprocess
import sys
import unittest

import unittest_summary

ROOT = pathlib.Path(os.environ.get("PLAINLLAMA_SOURCE_DIR") or pathlib.Path(__file__).resolve().parent.parent)
FOLDERS = ("src", "include", "tests")
SOURCES = (".cpp", ".h", ".inc")
# scripts/setup.sh installs Debian's clang-format; its version decides a few layouts, so the check names it
CLANG_FORMAT = shutil.which("clang-format")


def sources():
    for folder in FOLDERS:
        for p in sorted((ROOT / folder).rglob("*")):
            if p.suffix in SOURCES and "node_modules" not in p.parts:
                yield p


class Format(unittest.TestCase):
    def test_every_source_is_formatted(self):
        self.assertTrue(CLANG_FORMAT, "clang-format is missing: scripts/setup.sh installs it")
        files = list(sources())
        self.assertGreater(len(files), 100, f"too few sources found under {ROOT}")
        bad = []
        for i in range(0, len(files), 64):
            batch = files[i:i + 64]
            r = subprocess.run([CLANG_FORMAT, "--dry-run", "-Werror", *map(str, batch)], cwd=ROOT,
                               capture_output=True, text=True)
            if r.returncode != 0:
                seen = set()
                for line in r.stderr.splitlines():
                    if "-Wclang-format-violations" in line:
                        name = line.split(":", 1)[0]
                        if name not in seen:
                            seen.add(name)
                            bad.append(line)
                if not seen:
                    self.fail(f"clang-format failed: {r.stderr[:2000]}")
        self.assertEqual(bad, [], f"{len(bad)} files are not as clang-format writes them (clang-format -i FILE):\n" +
                         "\n".join(bad[:40]))


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

#!/usr/bin/python3
"""Comments under src/ and include/ say what and why, without measurements or history: no date (2026-12-04), no
commit hash, no rate (tok/s, GB/s, GFLOP/s) and no "sitting". Figures go to docs/performance.md, where they carry
their machine and date once; history stays in git log. README.md, for users, carries no commit hash, date or
"sitting" either.

Run by ctest (PLAINLLAMA_SOURCE_DIR: the project root; else this file's parent folder). Last line: "N passed, N failed".
"""
import os
import pathlib
import re
import sys
import unittest

import unittest_summary

ROOT = pathlib.Path(os.environ.get("PLAINLLAMA_SOURCE_DIR") or pathlib.Path(__file__).resolve().parent.parent)
SOURCES = (".cpp", ".h", ".inc")

DATE = r"\b(19|20)\d\d-[01]\d-[0-3]\d\b"
# A commit hash as written in a note or a subject: 7 to 40 hex digits, both digits and letters, a word of its own.
HASH = r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
RATE = r"\btok(ens)?/s\b|\b[KMGT]i?B/s\b|\bG?FLOP/?s\b"
SITTING = r"\bsittings?\b"
COMMENT_RULES = [("date", re.compile(DATE)), ("commit hash", re.compile(HASH)),
                 ("rate", re.compile(RATE, re.IGNORECASE)), ("'sitting'", re.compile(SITTING, re.IGNORECASE))]
README_RULES = [("date", re.compile(DATE)), ("commit hash", re.compile(HASH)),
                ("'sitting'", re.compile(SITTING, re.IGNORECASE))]


def comments(text):
    """(line number, text) of every comment line in C++ source: // to the line's end, /* */ line by line; string and
    character literals (raw strings too) are code, not comments."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line, i = line + 1, i + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif c == '"' and i > 0 and text[i - 1] == "R" and re.match(r'"[^()\\\s]{0,16}\(', text[i:]):  # R"d(...)d"
            delim = ")" + text[i + 1:text.index("(", i)] + '"'
            end = text.find(delim, i)
            end = n if end < 0 else end + len(delim)
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # a literal; 1'000 is a number
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def violations(lines, rules):
    """"line: rule: text" for every (line, text) that a rule matches."""
    found = []
    for number, text in lines:
        for name, rule in rules:
            m = rule.search(text)
            if m:
                found.append(f"{number}: {name} '{m.group(0)}': {text.strip()[:100]}")
    return found


class Comments(unittest.TestCase):
    def test_sources_found(self):
        files = [p for d in ("src", "include") for p in (ROOT / d).rglob("*") if p.suffix in SOURCES]
        self.assertGreater(len(files), 50, ROOT)

    def test_comments_carry_no_dates_hashes_rates_or_sittings(self):
        bad = []
        for d in ("src", "include"):
            for p in sorted((ROOT / d).rglob("*")):
                if p.suffix in SOURCES:
                    text = p.read_text(encoding="utf-8")
                    bad += [f"{p.relative_to(ROOT)}:{v}" for v in violations(comments(text), COMMENT_RULES)]
        self.assertEqual(bad, [], "figures go to docs/performance.md, history to git log:\n" + "\n".join(bad))

    def test_the_scan_finds_each_kind_in_comments_alone(self):
        source = "\n".join([
            'const char* s = "GB/s on 2026-12-04";  // fine: code',
            "int n = 1'000'000;  // a number, then a comment",
            "// measured 2026-12-04",
            "/* at d6d59c3",
            "   58.4 GB/s */",
            "x = 1;  // 70 tok/s",
            "// 5 sittings of 300 pairs",
            "// 12 GFLOP/s",
            'auto r = R"(// not a comment 2026-12-04)";',
            "char q = '\"';  // the quote, then a Sitting",
            "// the 0x1a2b3c4d mask, deadbeef, fp16: not hashes",
        ])
        found = violations(comments(source), COMMENT_RULES)
        self.assertEqual([f.split(":")[0] + ":" + f.split(":")[1] for f in found],
                         ["3: date '2026-12-04'", "4: commit hash 'd6d59c3'", "5: rate 'GB/s'", "6: rate 'tok/s'",
                          "7: 'sitting' 'sittings'", "8: rate 'GFLOP/s'", "10: 'sitting' 'Sitting'"])


class Readme(unittest.TestCase):
    # README.md is for users: what it is, how to set it up and run it, one current performance table. Measurement
    # history (dates, the commits measured, sittings) belongs in git log and docs/performance.md.
    def test_readme_has_no_dates_hashes_or_sittings(self):
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        bad = violations(enumerate(text.split("\n"), 1), README_RULES)
        self.assertEqual(bad, [], "README.md:\n" + "\n".join(bad[:40]) + f"\n({len(bad)} in all)")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

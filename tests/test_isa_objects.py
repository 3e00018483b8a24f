#!/usr/bin/python3
"""The per-ISA kernel objects (src/kernels/isa/{scalar,avx2,avx512,avx512_quant,avx512_quant_k}.cpp) define nothing the
linker could share with the rest of the program: no weak or unique symbol (an inline function or template left out of
line there is compiled for that file's instruction set, and the linker may keep that copy for every caller, which
would then crash on a CPU without it), and no global symbol but their table getter (avx512.cpp) or the entry points
its tables point at (avx512_quant.cpp and avx512_quant_k.cpp: avx512_quant.h), plain functions defined once.

Run by ctest with PLAINLLAMA_ISA_OBJECTS (the object files, ':'-separated). Last line: "N passed, N failed".
"""
import os
import re
import subprocess
import sys
import unittest

import unittest_summary

OBJECTS = [p for p in os.environ.get("PLAINLLAMA_ISA_OBJECTS", "").split(":") if p]
SANITIZED = os.environ.get("PLAINLLAMA_SANITIZE") == "ON"
# The objects by file name.
NAMES = ["scalar.cpp.o", "avx2.cpp.o", "avx512.cpp.o", "avx512_quant.cpp.o", "avx512_quant_k.cpp.o"]
# The objects holding avx512_quant.h's entry points (the 32-weight block formats, the k formats).
QUANT = ("avx512_quant.cpp.o", "avx512_quant_k.cpp.o")
# Global symbols allowed: the table getters, avx512_quant.cpp's entry points (strong: type T), what the sanitizers add
# to every object, and the C++ runtime's exception-personality pointer (data, the same in every object).
ALLOWED = re.compile(r"^(plainllama::isa::\w+_kernels\(\)|_*asan\w*|__odr_asan\w*|__ubsan\w*"
                     r"|DW\.ref\.__gxx_personality_v0)$")
ENTRY_POINT = re.compile(r"^plainllama::isa::avx512::\w+\(.*\)$")


def defined_symbols(obj):
    """(type letter, demangled name) of every symbol obj defines."""
    out = subprocess.run(["nm", "--defined-only", "-C", obj], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            syms.append((parts[1], parts[2]))
    return syms


class IsaObjects(unittest.TestCase):
    def test_objects_given(self):
        self.assertEqual(sorted(os.path.basename(o) for o in OBJECTS), sorted(NAMES), OBJECTS)

    def test_only_local_symbols_and_the_getters(self):
        for obj in OBJECTS:
            with self.subTest(obj=os.path.basename(obj)):
                quant = os.path.basename(obj) in QUANT
                bad = [f"{t} {name}" for t, name in defined_symbols(obj)
                       if (t in "VWuvw" or t.isupper()) and not ALLOWED.match(name)
                       and not (quant and t == "T" and ENTRY_POINT.match(name))]
                self.assertEqual(bad, [], obj)

    def test_no_start_up_code(self):
        # A constructor in .init_array would run at start-up on any CPU (a table built at run time, say); in the
        # sanitizer build, the sanitizers' own (.init_array.00099, their reserved priority) is the one allowed.
        for obj in OBJECTS:
            with self.subTest(obj=os.path.basename(obj)):
                out = subprocess.run(["objdump", "-h", obj], capture_output=True, text=True, check=True).stdout
                sections = [line.split()[1] for line in out.splitlines() if line.strip()[:1].isdigit()]
                init = [s for s in sections if s.startswith((".init_array", ".ctors"))]
                allowed = [".init_array.00099"] if SANITIZED else []
                self.assertEqual([s for s in init if s not in allowed], [], obj)

    def test_each_object_exports_its_getter(self):
        for obj in OBJECTS:
            names = {name for t, name in defined_symbols(obj) if t == "T"}
            if os.path.basename(obj) in QUANT:
                self.assertTrue(any(ENTRY_POINT.match(n) for n in names), obj)
            else:
                self.assertTrue(any(n.startswith("plainllama::isa::") and n.endswith("_kernels()") for n in names), obj)

    def test_decode_kernels_prefetch(self):
        # Decode streams the weights with software prefetches (see avx512.cpp): a prefetch that GCC may drop (a
        # helper it judged free of side effects and removed, once) costs half the decode speed and no test else
        # notices. Every decode kernel of the vector tables, for each weight format, contains prefetch instructions
        # (but the out-of-line cold parts a sanitizer build splits off, and avx512_quant.cpp's entry points, which jump
        # to the kernels; in the zen5 policy some prefetch only each 4 KiB page's first line, in zen4's none, and the
        # function holding those bodies holds the default policy's too). The AVX-512 kernels are in three objects.
        for isa in ("avx2", "avx512"):
            functions = {}
            for obj in OBJECTS:
                if os.path.basename(obj) not in (f"{isa}.cpp.o", f"{isa}_quant.cpp.o", f"{isa}_quant_k.cpp.o"):
                    continue
                out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", obj], capture_output=True,
                                     text=True, check=True).stdout
                name = None
                for line in out.splitlines():
                    m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
                    if m:
                        name = m.group(1)
                        functions.setdefault(name, 0)
                    elif name and re.search(r"\sprefetch(t[012]|nta|w)\s", line):
                        functions[name] += 1
            # On AVX-512 q5_0's and q5_k's tile kernels are the q4_0 and q4_k templates' kQ5 instantiations (their
            # names hold matvec_q4_0_x16 and matvec_q4_k_x16); AVX2 runs those three formats on quant_dot.inc's
            # portable kernels, which do not prefetch.
            extra = ("::matvec_q4_0_x16",) if isa == "avx512" else ()
            for kernel in ("::matvec<", "::matvec_q8_0_x16", "::matvec_q4_k_x16", "::matvec_q6_k_x16") + extra:
                with self.subTest(isa=isa, kernel=kernel):
                    found = {n: c for n, c in functions.items()
                             if kernel in n and "[clone .cold]" not in n and not ENTRY_POINT.match(n)}
                    self.assertTrue(found, kernel)
                    self.assertEqual([n for n, c in found.items() if c == 0], [])


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))

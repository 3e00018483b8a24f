"""Runs a test module's unittest cases and ends with the line "N passed, N failed[, N skipped]" that CI reads; each
skipped test is named with its reason just before it, and appended to $PLAINLLAMA_SKIP_LOG for the test command's
report (tests/skip_report.py: CI fails on a skip whose reason is not about the machine).

    if __name__ == "__main__":
        sys.exit(unittest_summary.run(__name__))
"""
import os
import sys
import unittest


def run(module_name):
    """Exit status: 0 when nothing failed and at least one test passed."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    script = os.path.splitext(os.path.basename(sys.modules[module_name].__file__ or module_name))[0]
    lines = [f"python {script}.{test.id().split('.', 1)[-1]}: {' '.join(reason.split())}"
             for test, reason in result.skipped]
    for line in lines:
        print("skipped: " + line)
    log = os.environ.get("PLAINLLAMA_SKIP_LOG")
    if log and lines:
        with open(log, "a", encoding="utf-8") as f:  # one write: lines of parallel tests do not mix
            f.write("".join(line + "\n" for line in lines))
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and passed > 0 else 1

"""Runs a test module's unittest cases and ends with the line "N passed, N failed[, N skipped]" that CI reads.

    if __name__ == "__main__":
        sys.exit(unittest_summary.run(__name__))
"""
import sys
import unittest


def run(module_name):
    """Exit status: 0 when nothing failed and at least one test passed."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and passed > 0 else 1

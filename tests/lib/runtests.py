"""Run integration test files (unittest) and count results exactly.

usage: runtests.py [--json OUT] [--phase NAME] [-k PATTERN] FILE.py [FILE.py ...]

Each FILE is imported and its unittest tests run in this process, one line
per test.  The last line is "integration FILE: P passed, F failed, S skipped"
(--phase names another phase, e.g. e2e); with --json the counts are also
written to OUT (for scripts/test).  A file with no test is a failure, unless
-k selected none of its tests.  Exit status 0 only when nothing failed and
at least one test ran.

A failure or error prints its traceback and pntest.dump_diagnostics() (the
PostgreSQL server log, FastCGI worker logs).
"""

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pntest  # noqa: E402


class CountingResult(unittest.TestResult):
    def __init__(self, stream):
        super().__init__()
        self.stream = stream
        self.passed = 0
        self.failed = 0
        self.skipped_n = 0
        self.failed_names = []
        self._t0 = 0.0

    def _line(self, word, test, extra=""):
        if self._current is not None and (
                test is self._current or getattr(test, "test_case", None) is self._current):
            took = " (%.2fs)" % (time.monotonic() - self._t0)
        else:                   # a class or module fixture
            took = ""
        self.stream.write("  %-5s %s%s%s\n" % (word, test.id(), took, extra))
        self.stream.flush()

    _current = None

    def startTest(self, test):
        super().startTest(test)
        self._current = test
        self._t0 = time.monotonic()

    def stopTest(self, test):
        super().stopTest(test)
        self._current = None

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        self._line("ok", test)

    def _fail(self, word, test, err):
        self.failed += 1
        self.failed_names.append(test.id())
        self._line(word, test)
        self.stream.write("".join(traceback.format_exception(*err)))
        pntest.dump_diagnostics(self.stream)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail("FAIL", test, err)

    def addError(self, test, err):
        super().addError(test, err)
        # errors in setUpClass/setUpModule arrive with a placeholder "test":
        # count each as one failure
        self._fail("ERROR", test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skipped_n += 1
        self._line("skip", test, " " + reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.passed += 1
        self._line("ok", test, " (expected failure)")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.failed += 1
        self.failed_names.append(test.id())
        self._line("FAIL", test, " (unexpected success)")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.failed += 1
            self.failed_names.append(subtest.id())
            self._line("FAIL", subtest)
            self.stream.write("".join(traceback.format_exception(*err)))
            pntest.dump_diagnostics(self.stream)


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return unittest.defaultTestLoader.loadTestsFromModule(mod)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--phase", default="integration")
    ap.add_argument("-k", dest="pattern", action="append",
                    help="only tests whose id contains PATTERN")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    out = sys.stdout
    total_p = total_f = total_s = 0
    for path in args.files:
        label = os.path.basename(path)
        out.write("%s %s\n" % (args.phase, label))
        out.flush()
        result = CountingResult(out)
        selected = None
        try:
            suite = load(path)
            if args.pattern:
                suite = _filter(suite, args.pattern)
            selected = suite.countTestCases()
            if selected:
                suite.run(result)
        except Exception:
            result.failed += 1
            out.write("  ERROR could not load %s\n%s" % (path, traceback.format_exc()))
        if result.passed + result.failed + result.skipped_n == 0:
            if args.pattern and selected == 0:
                out.write("  (no test matches %s)\n" % " or ".join(args.pattern))
            else:
                result.failed += 1
                out.write("  ERROR %s: no test ran\n" % label)
        out.write("%s %s: %d passed, %d failed, %d skipped\n" % (
            args.phase, label, result.passed, result.failed, result.skipped_n))
        out.flush()
        total_p += result.passed
        total_f += result.failed
        total_s += result.skipped_n
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passed": total_p, "failed": total_f, "skipped": total_s}, f)
    return 0 if total_f == 0 and total_p > 0 else 1


def _filter(suite, patterns):
    out = unittest.TestSuite()
    for t in _flatten(suite):
        if any(p in t.id() for p in patterns):
            out.addTest(t)
    return out


def _flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _flatten(t)
        else:
            yield t


if __name__ == "__main__":
    sys.exit(main())

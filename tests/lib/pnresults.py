"""Count pytest results once per test (scripts/test, tests/valgrind.sh,
tests/sanitize.sh).

usage: pnresults.py [--prefix DIR] [--expect-files F.py,...] [--failed-ids] RESULTS.jsonl ...

Each RESULTS file holds the JSON lines tests/conftest.py writes with
--pn-results ({"id": nodeid, "outcome": passed|failed|skipped}).  A test id
that appears more than once (the same test in the valgrind or ASan leg, or
in a re-run) is one test: failed if it failed anywhere, else passed if it
passed anywhere, else skipped.  Prints "P F S" (passed, failed, skipped);
--failed-ids prints the failed ids instead, one a line; --prefix DIR
counts only the tests of tests/DIR (node ids "DIR/test_x.py::...").  --expect-files:
each of these test files (paths ending in tests/<dir>/test_x.py) must have
at least one result, else it counts as one failure ("no test ran"); a file
whose tests a -k filter deselected entirely has no result either, so
scripts/test passes it only for unfiltered runs.
"""

import json
import os
import sys


def merge(paths):
    out = {}
    for p in paths:
        try:
            f = open(p)
        except OSError:
            continue
        with f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                tid, o = r.get("id"), r.get("outcome")
                prev = out.get(tid)
                if prev == "failed" or o == "failed":
                    out[tid] = "failed"
                elif prev == "passed" or o == "passed":
                    out[tid] = "passed"
                else:
                    out[tid] = "skipped"
    return out


def main(argv):
    expect = []
    failed_ids = False
    prefix = ""
    paths = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--expect-files":
            expect = [x for x in argv[i + 1].split(",") if x]
            i += 2
            continue
        if a == "--prefix":
            prefix = argv[i + 1]
            i += 2
            continue
        if a == "--failed-ids":
            failed_ids = True
        else:
            paths.append(a)
        i += 1
    res = merge(paths)
    for f in expect:
        # node ids are relative to tests/ (tests/pytest.ini): "integration/test_x.py::..."
        rel = "/".join(os.path.abspath(f).split(os.sep)[-2:])
        if not any(t == rel or t.startswith(rel + "::") for t in res):
            res[rel + "::(no test ran)"] = "failed"
    if prefix:      # only the tests of tests/PREFIX (and that leg's own failure lines)
        res = {t: o for t, o in res.items() if t.startswith(prefix.rstrip("/") + "/")}
    if failed_ids:
        for t, o in sorted(res.items()):
            if o == "failed":
                print(t)
        return 0
    vals = list(res.values())
    print(vals.count("passed"), vals.count("failed"), vals.count("skipped"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

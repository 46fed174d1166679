"""pytest hooks for the paynotify integration, fault and e2e tests.

The test files are plain unittest.TestCase modules (they also run with
`python3 -m unittest`); pytest runs them as they are.  What this adds:

  - tests/lib on sys.path (pntest, pnkit, pne2e, psp_standins)
  - pg_cluster: the session-wide PostgreSQL (pntest.shared_cluster(): one
    throwaway cluster per pytest process, each test module its own database
    in it, pntest.module_database()); tests that stop, kill or reconfigure
    PostgreSQL make their own pntest.PgCluster
  - on a failure, pntest.dump_diagnostics() (PostgreSQL server log, FastCGI
    worker and receiver logs) as a section of the report
  - --pn-results FILE: one JSON line per test as it finishes, {"id": nodeid,
    "outcome": "passed" | "failed" | "skipped"} (a test that failed in setup,
    call or teardown is one failed test), plus collection errors;
    tests/lib/pnresults.py counts them for scripts/test, each id once
  - SIGTERM/SIGHUP (scripts/test's per-phase timeout) stop the session like
    ^C, so teardown and pntest's exit cleanups still remove every cluster,
    worker and temp dir
"""

import io
import json
import os
import signal
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import pntest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--pn-results", metavar="FILE", default=os.environ.get("PN_TEST_RESULTS"),
                     help="append one JSON line per test result to FILE (scripts/test)")


def _interrupt(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def pytest_configure(config):
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _interrupt)
        except (ValueError, OSError):   # not the main thread (an xdist worker may run in one)
            pass
    config._pn_results = None
    path = config.getoption("--pn-results")
    # under xdist the controller gets every worker's reports: only it writes
    if path and not hasattr(config, "workerinput"):
        config._pn_results = open(path, "a", buffering=1)


def pytest_unconfigure(config):
    f = getattr(config, "_pn_results", None)
    if f is not None:
        f.close()
        config._pn_results = None


def _record(config, nodeid, outcome):
    f = getattr(config, "_pn_results", None)
    if f is not None:
        f.write(json.dumps({"id": nodeid, "outcome": outcome}) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        buf = io.StringIO()
        pntest.dump_diagnostics(buf)
        if buf.getvalue():
            report.sections.append(("paynotify diagnostics", buf.getvalue()))


# the outcome of each test, over its setup, call and teardown reports
_outcomes = {}


def pytest_runtest_logreport(report):
    cfg = _config
    if cfg is None or getattr(cfg, "_pn_results", None) is None:
        return
    o = _outcomes.setdefault(report.nodeid, "passed")
    if report.failed:
        o = "failed"
    elif report.skipped and o != "failed":
        o = "skipped"
    _outcomes[report.nodeid] = o
    if report.when == "teardown":
        _record(cfg, report.nodeid, _outcomes.pop(report.nodeid))


def pytest_collectreport(report):
    cfg = _config
    if cfg is None:
        return
    if report.failed:       # a file that does not import: one failure
        _record(cfg, (report.nodeid or "collection") + "::(collection error)", "failed")


_config = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    global _config
    _config = session.config


@pytest.fixture(scope="session")
def pg_cluster():
    """The session-wide PostgreSQL cluster (pntest.shared_cluster())."""
    return pntest.shared_cluster()

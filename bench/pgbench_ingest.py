#!/usr/bin/python3
"""bench/pgbench_ingest.py: pgbench on paynotify.ingest() against the minimal
statement, alone (no receivers, no nginx): the inner loop of work on the SQL.

The same throwaway PostgreSQL, states, statements and checks as bench/run's
pgbench part (bench/bench.py: pgbench_script, pgbench_case), interleaved and
rotated per run, medians and ratios at the end.  Several schemas can be
measured in one run, each from its own directory of sql files (applied with
psql in order, then functions.sql), so that a change is compared with what
it replaces on the same cluster at the same time:

    bench/pgbench_ingest.py --runs 3 --duration 6 --states fresh,history \\
        --schema before=/tmp/sql-before --schema after=sql

The default is the worktree's sql/ alone.  Ratios are ingest tps over the
minimal statement's tps measured right before it; "pg us/tx" is the CPU of
every PostgreSQL process per transaction.  See docs/PERFORMANCE.md.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402


class PgbenchOnly(bench.Bench):
    def __init__(self, args):
        super().__init__(args)
        self.sql_dir = None

    def setup(self):
        a = self.a
        self.base = bench.pntest.scratch_dir("pnpgbench.")
        os.chmod(self.base, 0o755)
        if not a.keep:
            bench._cleanup_dirs.append(self.base)
        for d in ("pg", "cfg"):
            os.makedirs(os.path.join(self.base, d))
            os.chmod(os.path.join(self.base, d), 0o755)
        self.pg = bench.Pg(os.path.join(self.base, "pg"))
        self.pg.start()
        self.conf = bench.write_config(os.path.join(self.base, "cfg"), self.pg)
        self.pg.psql("CREATE SEQUENCE public.bench_seq")
        self.state = None
        self.minimal = None
        self.first = {"alipay": bench.MAKERS["alipay"](0, "D", int(time.time()))}

    def migrate(self):
        files = sorted(f for f in os.listdir(self.sql_dir) if f[:3].isdigit())
        for f in files + ["functions.sql"]:
            subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                            "SET client_min_messages = warning", "-f",
                            os.path.join(self.sql_dir, f)],
                           env=self.pg.env, check=True, stdout=subprocess.DEVNULL)

    def use(self, sql_dir):
        if sql_dir != self.sql_dir:
            self.sql_dir = sql_dir
            self.state = None       # make the schema again from these files


def parse_schemas(ap, specs):
    """--schema NAME=DIR options (default: this tree's sql/) as [(name, dir)];
    a DIR without functions.sql is a usage error."""
    schemas = []
    for spec in specs or ["this=" + os.path.join(bench.REPO, "sql")]:
        name, _, d = spec.partition("=")
        if not d or not os.path.isfile(os.path.join(d, "functions.sql")):
            ap.error("--schema %s: expected NAME=DIR with DIR/functions.sql" % spec)
        schemas.append((name, os.path.abspath(d)))
    return schemas

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=6, help="seconds per pgbench run")
    ap.add_argument("--clients", type=int, default=8, help="pgbench clients")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--states", default="fresh,history")
    ap.add_argument("--history", type=int, default=50000)
    ap.add_argument("--max-rate", type=int, default=bench.RATE_CEILING,
                    help="the rate ceiling a run is sized for: 3 x this many orders per "
                    "second of a run (as bench/run); default %d" % bench.RATE_CEILING)
    ap.add_argument("--schema", action="append", default=[],
                    help="NAME=DIR: measure ingest() as these sql files define it "
                         "(repeatable; default: this tree's sql/)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.states = [s for s in a.states.split(",") if s]
    a.pgbench_clients = a.clients
    a.providers = ["alipay"]
    schemas = parse_schemas(ap, a.schema)
    b = PgbenchOnly(a)
    ratios = {}
    cpu = {}
    tps = {}
    try:
        b.setup()
        for run in range(1, a.runs + 1):
            k = (run - 1) % len(a.states)
            for state in a.states[k:] + a.states[:k]:
                j = (run - 1) % len(schemas)
                for name, d in schemas[j:] + schemas[:j]:
                    b.use(d)
                    m = b.pgbench_case(run, state, "minimal")
                    i = b.pgbench_case(run, state, "ingest")
                    key = (name, state)
                    ratios.setdefault(key, []).append(i["rps"] / m["rps"])
                    cpu.setdefault(key, []).append((i["cpu_us_per"]["postgres"],
                                                    m["cpu_us_per"]["postgres"]))
                    tps.setdefault(key, []).append((i["rps"], m["rps"]))
    finally:
        bench.cleanup()
    print("| schema | state | ingest tps / minimal tps (median) | per run | pg us/tx ingest "
          "(median) | pg us/tx minimal (median) | cpu ratio (median) |")
    print("|---|---|---:|---|---:|---:|---:|")
    for (name, state), r in ratios.items():
        c = cpu[(name, state)]
        print("| %s | %s | %.2f | %s | %.0f | %.0f | %.2f |" % (
            name, state, statistics.median(r),
            ", ".join("%.2f (%.0f/%.0f)" % (x, t[0], t[1]) for x, t in zip(r, tps[(name, state)])),
            statistics.median(x[0] for x in c), statistics.median(x[1] for x in c),
            statistics.median(x[0] / x[1] for x in c)))
    if b.failures:
        print("FAILED checks: %s" % b.failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

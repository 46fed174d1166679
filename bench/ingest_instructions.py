#!/usr/bin/python3
"""bench/ingest_instructions.py: PostgreSQL instructions per transaction of
paynotify.ingest() and of the minimal statement, counted by callgrind.

On a shared machine pgbench's tps and CPU figures move by 2x between runs;
instruction counts do not (the same schema gives the same count to 0.1 %).
A throwaway cluster is made, the schema is applied from each --schema
directory (as bench/pgbench_ingest.py), pending orders are made (and, with
--history N, N old notifications, analysed), the server is stopped, and
`postgres --single` runs under valgrind: PREPARE of bench/bench.py's
pgbench statement, then EXECUTE it 50 times and, on a second copy of the
same database state, 250 times; the difference over 200 is the cost of one
transaction (its statement, PL/pgSQL, the commit), the session start-up
cancelled out.  The single-user backend writes WAL and commits as a server
backend does; what it leaves out is the client protocol and waiting.

    bench/ingest_instructions.py --schema before=/tmp/sql-before --schema after=sql \\
        [--history 50000] [--dup] [--set paynotify.notify=off]

--dup also counts the duplicate path: the same statements on 10 keys, so
that after the first 10 every execution is a re-delivery of a committed
notification (ingest-dup, minimal-dup).

Needs valgrind.  See docs/PERFORMANCE.md.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import pgbench_ingest  # noqa: E402

SHORT, LONG = 50, 250


def count(pg, script, n, settings=()):
    body = open(script).read().strip().rstrip(";")
    inp = "PREPARE p AS %s;\n\n" % body + "EXECUTE p;\n\n" * n
    out = os.path.join(pg.base, "callgrind.out")
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run(bench.as_owner(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                                       os.path.join(pg.bindir, "postgres"), "--single", "-j"]
                                      + ["-c%s" % x for x in settings]
                                      + ["-D", pg.data, "paynotify"]),
                       input=inp, text=True, capture_output=True, cwd=pg.base)
    if r.returncode != 0 or "ERROR" in r.stdout or "ERROR" in r.stderr:
        raise RuntimeError("single-user run failed:\n%s\n%s" % (r.stdout[-2000:], r.stderr[-2000:]))
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m:
        raise RuntimeError("no callgrind total in:\n%s" % r.stderr[-2000:])
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schema", action="append", default=[],
                    help="NAME=DIR (repeatable; default: this tree's sql/)")
    ap.add_argument("--history", type=int, default=0,
                    help="old notifications (analysed) before the run; 0: fresh schema")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a server setting for the counted sessions (repeatable), "
                    "e.g. paynotify.notify=off")
    ap.add_argument("--dup", action="store_true",
                    help="also count re-deliveries (the statements on 10 keys)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not installed (apt-get install valgrind)")
    schemas = pgbench_ingest.parse_schemas(ap, a.schema)
    a.max_rate, a.duration, a.pgbench_clients, a.threads = 100, 1, 1, 1
    a.states, a.providers = ["history" if a.history else "fresh"], ["alipay"]
    b = pgbench_ingest.PgbenchOnly(a)
    state = "history" if a.history else "fresh"
    rows = []
    try:
        b.setup()
        scripts = {}
        variants = ["minimal", "ingest"] + (["minimal-dup", "ingest-dup"] if a.dup else [])
        for v in variants:
            scripts[v] = os.path.join(b.base, "%s.sql" % v)
            text = b.pgbench_script(v.split("-")[0])
            if v.endswith("-dup"):
                # 10 notifications, each delivered again and again
                text = text.replace("nextval('public.bench_seq') - 1", "nextval('public.bench_seq') % 10")
                if "bench_seq') % 10" not in text:
                    raise RuntimeError("cannot make the duplicate variant of %s" % v)
            with open(scripts[v], "w") as f:
                f.write(text)
            os.chmod(scripts[v], 0o644)
        for name, d in schemas:
            got = {}
            for v in variants:
                n = []
                for reps in (SHORT, LONG):
                    b.use(d)
                    b.reset("pgb", 100000, state)    # as many orders as a bench run
                    b.pg._pg("pg_ctl", "-D", b.pg.data, "-m", "fast", "-w", "stop")
                    try:
                        n.append(count(b.pg, scripts[v], reps, a.set))
                    finally:
                        b.pg._pg("pg_ctl", "-D", b.pg.data, "-l", b.pg.logfile, "-w", "-t", "60",
                                 "start")
                got[v] = (n[1] - n[0]) / float(LONG - SHORT)
                bench.log("bench: %-8s %-7s %-7s %9.0f instructions per transaction"
                          % (name, state, v, got[v]))
            rows.append((name, got))
    finally:
        bench.cleanup()
    print("| schema | state | ingest() instructions/tx | minimal statement instructions/tx | "
          "ratio |" + (" ingest() re-delivery | minimal re-delivery |" if a.dup else ""))
    print("|---|---|---:|---:|---:|" + ("---:|---:|" if a.dup else ""))
    for name, got in rows:
        print("| %s | %s | %.0f | %.0f | %.2f |" % (name, state, got["ingest"], got["minimal"],
                                                  got["ingest"] / got["minimal"])
              + (" %.0f | %.0f |" % (got["ingest-dup"], got["minimal-dup"]) if a.dup else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

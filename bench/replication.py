#!/usr/bin/python3
"""bench/replication.py: what a standby costs ingest (docs/SCALING.md).

A primary with default durability (fsync on, synchronous_commit on) and a
streaming standby made with pg_basebackup, both on this machine (unix
sockets: no network round trip, so a real standby costs more by its RTT).
pgbench runs paynotify.ingest() (one new event per transaction, a 1 KB raw
body, an order it pays) with N clients for D seconds in each case, in turn:

  alone        the standby disconnected (primary_conninfo emptied)
  alone+nonotify the same with paynotify.notify = off (sql/003)
  async        the standby streaming, synchronous_standby_names empty
  sync         synchronous_standby_names = 'FIRST 1 (standby1)'
  sync+nonotify the same with paynotify.notify = off (sql/003)

and prints tps, the ratio to `alone` measured in the same run, and WAL
flushes per transaction.  Repeat with --runs; the cases rotate.

    /usr/bin/python3 bench/replication.py [--clients 8] [--seconds 5] [--runs 2]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "faults"))
import pntest  # noqa: E402
import test_ha  # noqa: E402  (Standby, wait_streaming)

SCRIPT = (
    "SELECT i.* FROM (SELECT nextval('public.rb_seq') AS n) s, LATERAL "
    "paynotify.ingest('bench', 'stripe', 'evt_rb_' || s.n, 'paid', 'checkout.session.completed', "
    "'rb-' || s.n, 'pi_rb_' || s.n, 'evt_rb_' || s.n, 1999, 'USD', NULL, false, NULL, "
    "'stripe-whsec:1', NULL, NULL, '{}'::jsonb, convert_to(repeat('x', 1000), 'UTF8')) i;\n")


def pgbench(primary, clients, seconds, script, notify=True):
    env = pntest.clean_env(primary.libpq_env())
    if not notify:
        env["PGOPTIONS"] = "-c paynotify.notify=off"
    s0 = int(primary.scalar("SELECT wal_sync FROM pg_stat_wal"))
    r = subprocess.run(["pgbench", "-n", "-c", str(clients), "-j", "2", "-T", str(seconds),
                        "-M", "prepared", "-f", script], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=seconds + 120)
    out = r.stdout.decode()
    m = re.search(r"tps = ([0-9.]+) \(without initial", out)
    tx = re.search(r"number of transactions actually processed: (\d+)", out)
    if r.returncode != 0 or not m or not tx:
        raise RuntimeError("pgbench failed:\n%s\n%s" % (out, r.stderr.decode()))
    syncs = int(primary.scalar("SELECT wal_sync FROM pg_stat_wal")) - s0
    return float(m.group(1)), syncs / max(1, int(tx.group(1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    durable = ["fsync = on", "synchronous_commit = on", "full_page_writes = on",
               "wal_level = replica", "max_wal_senders = 4"]
    primary = pntest.PgCluster(settings=durable).start()
    standby = test_ha.Standby(primary)
    standby.init()
    with open(os.path.join(standby.data, "postgresql.conf"), "a") as f:
        f.write("fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n")
    standby.start()
    test_ha.wait_streaming(primary, "async")
    primary.psql("CREATE SEQUENCE public.rb_seq")
    primary.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                 "SELECT 'bench', 'rb-' || g, 1999, 'USD' FROM generate_series(1, 400000) g")
    primary.psql("VACUUM ANALYZE paynotify.orders")
    script = os.path.join(primary.base, "ingest.sql")
    with open(script, "w") as f:
        f.write(SCRIPT)

    def set_sync(names):
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = %s" % pntest.q(names))
        primary.psql("SELECT pg_reload_conf()")
        time.sleep(0.3)

    def set_standby(on):
        standby.psql("ALTER SYSTEM SET primary_conninfo = %s" % pntest.q(
            "host=%s port=%d user=%s application_name=standby1"
            % (primary.base, primary.port, pntest.PG_USER) if on else ""), db="postgres")
        standby.psql("SELECT pg_reload_conf()", db="postgres")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            n = int(primary.scalar("SELECT count(*) FROM pg_stat_replication "
                                   "WHERE application_name = 'standby1'"))
            if (n == 1) == on:
                return
            time.sleep(0.1)
        raise RuntimeError("standby did not %s" % ("connect" if on else "disconnect"))

    cases = {
        "alone": lambda: (set_sync(""), set_standby(False)),
        "alone+nonotify": lambda: (set_sync(""), set_standby(False)),
        "async": lambda: (set_sync(""), set_standby(True)),
        "sync": lambda: (set_standby(True), set_sync("FIRST 1 (standby1)")),
        "sync+nonotify": lambda: (set_standby(True), set_sync("FIRST 1 (standby1)")),
    }
    order = list(cases)
    res = {c: [] for c in order}
    for run in range(a.runs):
        k = run % len(order)
        for c in order[k:] + order[:k]:
            cases[c]()
            tps, flushes = pgbench(primary, a.clients, a.seconds, script,
                                   notify=not c.endswith("+nonotify"))
            res[c].append((tps, flushes))
            print("run %d %-14s %8.0f tps  %.2f WAL flushes/tx" % (run + 1, c, tps, flushes),
                  flush=True)
    base = statistics.median(t for t, _ in res["alone"])
    print("\n| case | tps (median of %d) | vs alone | WAL flushes/tx |" % a.runs)
    print("|---|---:|---:|---:|")
    for c in order:
        t = statistics.median(x for x, _ in res[c])
        print("| %s | %.0f | %.2f× | %.2f |" % (c, t, t / base,
                                              statistics.median(f for _, f in res[c])))
    print("\n%d pgbench clients, %d s per case, fsync on, standby on the same machine; "
          "load average %s" % (a.clients, a.seconds, open("/proc/loadavg").read().split()[0]))
    standby.destroy()
    primary.destroy()


if __name__ == "__main__":
    main()

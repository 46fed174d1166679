# test_purge.py: paynotify purge (issue 17; docs/OPERATIONS.md "Retention").
# Real notifications stored by the real receiver, aged with UPDATE; purge
# archives and deletes only resolved rows beyond the redelivery horizon, the
# archive restores byte for byte with the documented psql recipe, options are
# validated with the documented exit codes, and ingest keeps going (no
# failure, latency measured) while a large purge runs.

import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

PG = None
CFG = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
STRIPE = pnkit.path("stripe")

# the recipe of docs/OPERATIONS.md "Retention", with the archive path filled in
RESTORE = """BEGIN;
CREATE TEMP TABLE restore (LIKE paynotify.notifications) ON COMMIT DROP;
\\copy restore FROM '%s' WITH (FORMAT csv, HEADER MATCH)
INSERT INTO paynotify.notifications OVERRIDING SYSTEM VALUE
    SELECT * FROM restore ON CONFLICT DO NOTHING;
COMMIT;
"""


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def purge(*args, config=None):
    p = subprocess.run(pntest.valgrind_argv([ADMIN, "-c", config or CFG.path, "purge"] + list(args)),
                       env=pntest.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def restore(cluster, path):
    p = subprocess.run(cluster._psql_argv(cluster.dbname), input=(RESTORE % path).encode(),
                       env=pntest.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("restore failed: " + p.stderr.decode())


def snapshot(cluster, where="true"):
    return cluster.psql("SELECT id, site, provider, dedup_key, outcome, deliveries, "
                        "raw_headers::text, encode(raw_body, 'hex'), received_at, "
                        "last_delivery_at FROM paynotify.notifications WHERE %s ORDER BY id"
                        % where)


class Purge(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rcv = pnkit.Receiver("stripe", CFG, workers=2).start()

    @classmethod
    def tearDownClass(cls):
        cls.rcv.stop()

    def setUp(self):
        PG.reset()
        self.dir = pntest.temp_dir("pntest-purge.")

    def deliver(self, oid, eid, amount=1999, copies=1):
        h, b = pnkit.stripe_paid(oid, amount, event_id=eid)
        for _ in range(copies):
            r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
            self.assertTrue(pnkit.is_success("stripe", r), r)

    def age(self, eid, received_days, last_days=None):
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '%d days', "
                "last_delivery_at = now() - interval '%d days' WHERE dedup_key = %s"
                % (received_days, received_days if last_days is None else last_days,
                   pntest.q(eid)))

    def test_only_resolved_rows_beyond_the_horizon(self):
        for i in range(1, 6):
            PG.add_order(pnkit.SITE, "P%d" % i, 1999, "USD")
        self.deliver("P1", "evt_old_applied", copies=2)        # applied, 2 deliveries
        self.deliver("P1", "evt_old_dup_event")               # already_applied (same order)
        self.deliver("P2", "evt_redelivered")                 # old, redelivered 10 days ago
        self.deliver("NOPE", "evt_unknown_order")             # unknown_order: unresolved
        self.deliver("P3", "evt_40_days")
        self.deliver("P4", "evt_fresh")
        self.deliver("P5", "evt_mismatch", amount=1)          # amount_mismatch: unresolved
        outcomes = dict(PG.psql("SELECT dedup_key, outcome FROM paynotify.notifications"))
        self.assertEqual(outcomes["evt_old_dup_event"], "already_applied")
        self.assertEqual(outcomes["evt_unknown_order"], "unknown_order")
        self.assertEqual(outcomes["evt_mismatch"], "amount_mismatch")
        for eid in ("evt_old_applied", "evt_old_dup_event", "evt_unknown_order", "evt_mismatch"):
            self.age(eid, 200)
        self.age("evt_redelivered", 200, 10)
        self.age("evt_40_days", 40)
        before = snapshot(PG)

        # dry run: counts, changes nothing, no archive
        rc, out, err = purge("--dry-run")
        self.assertEqual(rc, 1, out + err)     # unresolved old ones need a human
        self.assertIn("2 resolved notifications to purge (dry run)", out)
        self.assertIn("kept: 2 unresolved notifications older than the cutoff", out)
        self.assertEqual(snapshot(PG), before)

        archive = os.path.join(self.dir, "a1.csv")
        rc, out, err = purge("--archive", archive, "--batch", "1")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("purged 2 notifications", out)
        left = {r[0] for r in PG.psql("SELECT dedup_key FROM paynotify.notifications")}
        self.assertEqual(left, {"evt_redelivered", "evt_unknown_order", "evt_40_days",
                                "evt_fresh", "evt_mismatch"})
        self.assertEqual(os.stat(archive).st_mode & 0o777, 0o600)
        with open(archive, "rb") as f:
            self.assertTrue(f.readline().startswith(b"id,site,provider,dedup_key,"))
        # a second purge with the same archive name never overwrites the first:
        # it writes a1.1.csv (nothing is left to purge here: header-less, empty)
        with open(archive, "rb") as f:
            first = f.read()
        rc, out, err = purge("--archive", archive)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("purged 0 notifications; archive %s " % os.path.join(self.dir, "a1.1.csv"),
                      out)
        with open(archive, "rb") as f:
            self.assertEqual(f.read(), first)
        self.assertEqual(os.path.getsize(os.path.join(self.dir, "a1.1.csv")), 0)

        # a shorter horizon, at least 30 days
        archive2 = os.path.join(self.dir, "a2.csv")
        rc, out, err = purge("--archive", archive2, "--keep-days", "30")
        self.assertIn("purged 1 notification;", out)
        self.assertNotIn("evt_40_days", {r[0] for r in PG.psql(
            "SELECT dedup_key FROM paynotify.notifications")})

        # restore both archives with the documented recipe: byte for byte
        restore(PG, archive)
        restore(PG, archive2)
        self.assertEqual(snapshot(PG), before)
        # restoring again changes nothing (ON CONFLICT DO NOTHING)
        restore(PG, archive)
        self.assertEqual(snapshot(PG), before)
        # a restored event still deduplicates: the provider's resend is a duplicate
        self.deliver("P1", "evt_old_applied")
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE dedup_key = 'evt_old_applied'"), "3")

    def test_options_validated(self):
        archive = os.path.join(self.dir, "x.csv")
        cases = [
            (("--keep-days", "29", "--archive", archive), 64, "refusing --keep-days 29"),
            (("--keep-days", "ninety", "--archive", archive), 64, "invalid --keep-days"),
            (("--batch", "0", "--archive", archive), 64, "invalid --batch"),
            (("--batch", "10001", "--archive", archive), 64, "invalid --batch"),
            (("--pause-ms", "-1", "--archive", archive), 64, "invalid --pause-ms"),
            (("--before", "2026-02-30", "--archive", archive), 64, "invalid --before"),
            (("--before", "yesterday", "--archive", archive), 64, "invalid --before"),
            (("--before", "2999-01-01", "--archive", archive), 64, "inside the 90-day"),
            ((), 64, "--archive FILE is required"),
            (("--archive", archive, "extra"), 64, "unexpected argument"),
            (("--bogus",), 64, "usage: paynotify purge"),
        ]
        for args, want, text in cases:
            rc, out, err = purge(*args)
            self.assertEqual(rc, want, (args, out, err))
            self.assertIn(text, out + err, args)
        self.assertFalse(os.path.exists(archive))
        bad = os.path.join(self.dir, "bad.ini")
        with open(bad, "w") as f:
            f.write("[database]\nconninfo = x\nno_such_key = 1\n")
        rc, out, err = purge("--dry-run", config=bad)
        self.assertEqual(rc, 78, out + err)
        down = pnkit.write_all_config(None, conninfo="host=/nonexistent dbname=paynotify")
        rc, out, err = purge("--dry-run", config=down.path)
        self.assertEqual(rc, 3, out + err)
        self.assertIn("could not connect", err)
        rc, out, err = purge("--dry-run", "--before", "2020-01-01")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("0 resolved notifications", out)

    def test_ingest_keeps_going_while_a_large_purge_runs(self):
        old = 20000
        body = "x" * 2500
        PG.psql("INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, "
                "outcome, raw_body, received_at, last_delivery_at) "
                "SELECT 'shop-x', 'stripe', 'evt_hist_' || g, 'paid', 'applied', "
                "convert_to(%s || g, 'UTF8'), now() - interval '120 days', "
                "now() - interval '120 days' FROM generate_series(1, %d) g"
                % (pntest.q(body), old))
        PG.psql("VACUUM ANALYZE paynotify.notifications")
        n = 300
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                "SELECT 'shop-x', 'I' || g, 1999, 'USD' FROM generate_series(1, %d) g" % (2 * n))
        reqs = [pnkit.stripe_paid("I%d" % (i + 1), 1999, event_id="evt_live_%d" % i)
                for i in range(2 * n)]

        def stream(part):
            lat, bad = [], 0
            for h, b in part:
                t0 = time.monotonic()
                r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
                lat.append(time.monotonic() - t0)
                if not pnkit.is_success("stripe", r):
                    bad += 1
            lat.sort()
            return lat, bad
        base, bad0 = stream(reqs[:n])               # baseline, no purge
        box = {}
        archive = os.path.join(self.dir, "big.csv")

        def run_purge():
            t0 = time.monotonic()
            box["r"] = purge("--archive", archive, "--batch", "500", "--pause-ms", "0")
            box["s"] = time.monotonic() - t0
        t = threading.Thread(target=run_purge)
        t.start()
        time.sleep(0.2)
        during, bad1 = [], 0
        rest = reqs[n:]
        while t.is_alive() and rest:
            lat, bad = stream(rest[:20])
            during += lat
            bad1 += bad
            rest = rest[20:]
        t.join(300)
        rc, out, err = box["r"]
        self.assertEqual(rc, 0, out + err)
        self.assertIn("purged %d notifications" % old, out)
        self.assertEqual(bad0 + bad1, 0, "every notification acknowledged during the purge")
        self.assertGreater(len(during), 20, "the purge ended before ingest could be measured")
        during.sort()

        def pct(v, p):
            return v[min(len(v) - 1, int(len(v) * p))] * 1000
        self.assertLess(during[-1], 1.0, "an ingest waited %.0f ms during the purge"
                        % (during[-1] * 1000))
        sys.stdout.write("    measured: purge rows=%d seconds=%.1f rows_per_s=%.0f "
                         "ingest_p50_ms base=%.1f during=%.1f ingest_p99_ms base=%.1f "
                         "during=%.1f max_ms during=%.1f requests_during=%d\n" % (
                             old, box["s"], old / box["s"], pct(base, 0.5), pct(during, 0.5),
                             pct(base, 0.99), pct(during, 0.99), during[-1] * 1000,
                             len(during)))
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE dedup_key LIKE 'evt_live_%'"), str(n + len(during)))


if __name__ == "__main__":
    unittest.main()

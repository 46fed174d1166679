# test_plans.py: the ingest path never settles on a sequential scan.
#
# A receiver's session calls paynotify.ingest() for hours.  PL/pgSQL caches
# its statements' plans per session; on a fresh installation the tables are
# empty when that session starts, and a generic plan made then would be a
# sequential scan kept for the life of the session: every ingest would read
# every stored notification (sql/004_index_plans.sql).  This test plays that
# session: ANALYZE empty tables, warm the plan cache with ingest calls, store
# 20,000 notifications, then count the sequential scans one more ingest (a
# new event and a duplicate) makes on the two tables: there must be none.

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

PG = None

INGEST = ("SELECT * FROM paynotify.ingest('shop-a', 'stripe', '%s', 'paid', 'payment_intent.succeeded', "
          "'O-%s', 'pi_%s', 'evt_%s', 100, 'USD', NULL, false, NULL, 'k:1', NULL, NULL, '{}', "
          "'\\x7b7d'::bytea);")


def setUpModule():
    global PG
    PG = pntest.PgCluster()
    PG.start()


def tearDownModule():
    if PG:
        PG.destroy()


class IngestPlans(unittest.TestCase):
    def session(self, script):
        """Run script in ONE psql session (statements in their own
        transactions); return the last line of output."""
        argv = PG._psql_argv(pntest.PG_DB) + ["-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"]
        p = subprocess.run(argv, env=pntest.clean_env(), input=script.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return p.stdout.decode().strip().splitlines()[-1]

    def test_no_sequential_scan_after_growth(self):
        PG.psql("TRUNCATE paynotify.notifications, paynotify.orders")
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                "VALUES ('shop-a', 'O-new', 100, 'USD')")
        script = ["ANALYZE paynotify.notifications;", "ANALYZE paynotify.orders;"]
        # warm the session's plan cache on (almost) empty tables: past the
        # five custom plans after which PL/pgSQL may keep a generic one
        for i in range(12):
            script.append(INGEST % ("warm%d" % i, "w%d" % i, i, i))
        script.append(
            "INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, outcome, "
            "order_id, raw_body) SELECT 'shop-a', 'stripe', 'bulk' || g, 'paid', 'applied', "
            "'B-' || g, '\\x00'::bytea FROM generate_series(1, 20000) g;")
        script.append(
            "INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
            "SELECT 'shop-a', 'B-' || g, 100, 'USD' FROM generate_series(1, 20000) g;")
        script.append("BEGIN;")
        script.append(INGEST % ("new-event", "new", "n", "n"))
        script.append(INGEST % ("bulk77", "B-77", "b", "b"))     # a duplicate
        script.append("SELECT coalesce(sum(seq_scan), -1) FROM pg_stat_xact_user_tables "
                      "WHERE schemaname = 'paynotify' AND relname IN ('notifications', 'orders');")
        script.append("ROLLBACK;")
        seq_scans = self.session("\n".join(script) + "\n")
        self.assertEqual(seq_scans, "0", "ingest used a sequential scan after the tables grew")


if __name__ == "__main__":
    unittest.main()

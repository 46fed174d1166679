# test_migration.py: a database made with the schema as installed at version
# 4 (tests/fixtures/schema-v4: sql/001-004 and their functions, exactly as
# released), filled the way that release's receivers filled it, upgraded by
# the current `paynotify migrate`:
#
#   - Alipay rows are re-keyed on trade_no ("<trade_no>:<status>",
#     "<trade_no>:<status>:refund:<x>"), rows without a trade_no keep their
#     key; a retry of a notification stored before the upgrade (keyed the new
#     way by the new receiver) is still a duplicate, not applied twice
#   - flagged rows (merchant_mismatch; amount_mismatch with the adapter's
#     detail) leave the site's key space; the genuine notification they used
#     to swallow is now applied; apply_event's own amount_mismatch stays
#   - every row gets source 'notification'; the new outcomes are accepted
#   - one definition per function (the old signatures are gone), the feed
#     exists with its 'default' group; migrate again changes nothing

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import q  # noqa: E402

PG = None
OLD = os.path.join(pntest.REPO, "tests", "fixtures", "schema-v4")
DB = "upgraded"


def setUpModule():
    global PG
    PG = pntest.PgCluster(load_schema=False).start()


def tearDownModule():
    if PG:
        PG.destroy()


def old_ingest(site, provider, key, kind, etype, order, txn, amount, currency="CNY",
               refund=None, cumulative=False, flag=None, detail=None, body=b"old"):
    """paynotify.ingest() of schema version 4 (18 arguments), as its receivers called it."""
    return PG.psql(
        "SELECT notification_id, outcome FROM paynotify.ingest(%s, %s, %s, %s, %s, %s, %s, NULL, "
        "%s, %s, %s, %s, NULL, 'k:1', %s, %s, '{}', '\\x%s'::bytea)" % (
            q(site), q(provider), q(key), q(kind), q(etype), q(order), q(txn),
            "NULL" if amount is None else amount, q(currency),
            "NULL" if refund is None else refund, "true" if cumulative else "false", q(flag),
            q(detail), body.hex()), db=DB)[0]


def new_ingest(site, provider, key, kind, etype, order, txn, amount, currency="CNY",
               refund=None, cumulative=False, flag=None):
    r = PG.psql(
        "SELECT notification_id, outcome, duplicate, deliveries FROM paynotify.ingest(%s, %s, "
        "%s, %s, %s, %s, %s, NULL, %s, %s, %s, %s, NULL, 'k:1', %s, NULL, '{}', '\\x6e6577', "
        "false, NULL)" % (
            q(site), q(provider), q(key), q(kind), q(etype), q(order), q(txn),
            "NULL" if amount is None else amount, q(currency),
            "NULL" if refund is None else refund, "true" if cumulative else "false",
            q(flag)), db=DB)[0]
    return {"id": r[0], "outcome": r[1], "duplicate": r[2] == "t", "deliveries": int(r[3])}


class Upgrade(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        PG.psql("CREATE DATABASE %s" % DB, db="postgres")
        for f in sorted(os.listdir(OLD)):
            if f.endswith(".sql"):
                PG.psql_file(os.path.join(OLD, f), db=DB)
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) VALUES "
                "('shop', 'A1', 6600, 'CNY'), ('shop', 'A2', 6600, 'CNY'), "
                "('shop', 'A3', 6600, 'CNY'), ('shop', 'S1', 1999, 'USD'), "
                "('shop', 'A4', 6600, 'CNY')", db=DB)
        ids = cls.ids = {}
        # Alipay, keyed the old way on out_trade_no
        ids["paid"] = old_ingest("shop", "alipay", "A1:TRADE_SUCCESS", "paid", "TRADE_SUCCESS",
                                 "A1", "2088T1", 6600)
        ids["refund"] = old_ingest("shop", "alipay", "A1:TRADE_SUCCESS:refund:RF1", "refund",
                                   "TRADE_SUCCESS", "A1", "2088T1", None, refund=1000,
                                   cumulative=True)
        # the other seller's genuine notification for shop's A2 (same app):
        # stored flagged under shop's own key, swallowing shop's payment
        ids["foreign"] = old_ingest("shop", "alipay", "A2:TRADE_SUCCESS", "paid",
                                    "TRADE_SUCCESS", "A2", "2088FOREIGN", 6600,
                                    flag="merchant_mismatch",
                                    detail='seller_id "2088999" is not site shop\'s "2088001"')
        # an adapter's amount flag (with its detail) and apply_event's finding
        ids["badfee"] = old_ingest("shop", "alipay", "A3:TRADE_SUCCESS:refund:RF9", "refund",
                                   "TRADE_SUCCESS", "A3", "2088T3", None,
                                   flag="amount_mismatch", detail='refund_fee "x": not a number')
        ids["amount"] = old_ingest("shop", "alipay", "A4:TRADE_SUCCESS", "paid", "TRADE_SUCCESS",
                                   "A4", "2088T4", 1)
        # no trade_no: keeps its key; not a trade notification at all
        ids["notxn"] = old_ingest("shop", "alipay", "A9:WAIT_BUYER_PAY", "pending",
                                  "WAIT_BUYER_PAY", "A9", None, None)
        ids["notify"] = old_ingest("shop", "alipay", "notify:abc", "ignored", None, None, None,
                                   None)
        ids["stripe"] = old_ingest("shop", "stripe", "evt_1", "paid", "checkout.session.completed",
                                   "S1", "pi_1", 1999, "USD")
        cls.cfg = pntest.write_config(conninfo=PG.conninfo().replace("dbname=paynotify",
                                                                     "dbname=" + DB))
        cls.first = cls.migrate()

    @classmethod
    def migrate(cls):
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": cls.cfg.path})
        return subprocess.run([os.path.join(pntest.REPO, "paynotify"), "migrate", "--sql-dir",
                               os.path.join(pntest.REPO, "sql")], env=env, capture_output=True,
                              text=True, timeout=120)

    def row(self, name):
        return PG.psql("SELECT dedup_key, outcome, deliveries, source FROM "
                       "paynotify.notifications WHERE id = %s" % self.ids[name][0], db=DB)[0]

    def test_1_migrate_output(self):
        p = self.first
        self.assertEqual(p.returncode, 0, p.stderr)
        files = sorted(f for f in os.listdir(os.path.join(pntest.REPO, "sql"))
                       if f[:3].isdigit() and int(f[:3]) >= 5)
        self.assertEqual(files[:2], ["005_site_binding_feed.sql", "006_query_runs.sql"])
        self.assertEqual(p.stdout, "".join("applied %s (schema version %d)\n" % (f, int(f[:3]))
                                           for f in files) + "applied functions.sql\n")
        p = self.migrate()
        self.assertEqual((p.returncode, p.stdout),
                         (0, "schema is at version %d: nothing to do\napplied functions.sql\n"
                          % int(files[-1][:3])), p.stderr)

    def test_an_argument_is_a_usage_error(self):
        # `paynotify migrate sql/` once ran against the installed files
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": self.cfg.path})
        p = subprocess.run([os.path.join(pntest.REPO, "paynotify"), "migrate",
                            os.path.join(pntest.REPO, "sql")], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (64, ""), p.stderr)
        self.assertIn('paynotify: migrate: unexpected argument "%s"'
                      % os.path.join(pntest.REPO, "sql"), p.stderr)

    def test_keys_rewritten(self):
        self.assertEqual(self.row("paid")[:2], ("2088T1:TRADE_SUCCESS", "applied"))
        self.assertEqual(self.row("refund")[0], "2088T1:TRADE_SUCCESS:refund:RF1")
        self.assertEqual(self.row("foreign")[:2],
                         ("!merchant_mismatch:2088FOREIGN:TRADE_SUCCESS", "merchant_mismatch"))
        self.assertEqual(self.row("badfee")[0], "!amount_mismatch:2088T3:TRADE_SUCCESS:refund:RF9")
        self.assertEqual(self.row("amount")[:2], ("2088T4:TRADE_SUCCESS", "amount_mismatch"))
        self.assertEqual(self.row("notxn")[0], "A9:WAIT_BUYER_PAY")
        self.assertEqual(self.row("notify")[0], "notify:abc")
        self.assertEqual(self.row("stripe")[0], "evt_1")
        self.assertEqual(PG.psql("SELECT DISTINCT source FROM paynotify.notifications", db=DB),
                         [("notification",)])

    def test_old_notifications_retried_are_duplicates(self):
        r = new_ingest("shop", "alipay", "2088T1:TRADE_SUCCESS", "paid", "TRADE_SUCCESS", "A1",
                       "2088T1", 6600)
        self.assertEqual((r["id"], r["duplicate"], r["deliveries"]),
                         (self.ids["paid"][0], True, 2))
        r = new_ingest("shop", "alipay", "2088T1:TRADE_SUCCESS:refund:RF1", "refund",
                       "TRADE_SUCCESS", "A1", "2088T1", None, refund=1000, cumulative=True)
        self.assertEqual((r["id"], r["duplicate"]), (self.ids["refund"][0], True))
        self.assertEqual(PG.psql("SELECT status, refunded_minor FROM paynotify.orders WHERE "
                                 "order_id = 'A1'", db=DB), [("partially_refunded", "1000")])
        r = new_ingest("shop", "stripe", "evt_1", "paid", "checkout.session.completed", "S1",
                       "pi_1", 1999, "USD")
        self.assertEqual((r["id"], r["duplicate"]), (self.ids["stripe"][0], True))
        # the foreign one's retry still finds its flagged row
        r = new_ingest("shop", "alipay", "2088FOREIGN:TRADE_SUCCESS", "paid", "TRADE_SUCCESS",
                       "A2", "2088FOREIGN", 6600, flag="merchant_mismatch")
        self.assertEqual((r["id"], r["duplicate"]), (self.ids["foreign"][0], True))

    def test_swallowed_payment_now_applied(self):
        # shop's own payment of A2 (under v4 it was acked as a duplicate of the foreign row)
        r = new_ingest("shop", "alipay", "2088A2:TRADE_SUCCESS", "paid", "TRADE_SUCCESS", "A2",
                       "2088A2", 6600)
        self.assertEqual((r["outcome"], r["duplicate"]), ("applied", False))
        self.assertEqual(PG.psql("SELECT status, psp_txn_id FROM paynotify.orders WHERE "
                                 "order_id = 'A2'", db=DB), [("paid", "2088A2")])

    def test_one_definition_per_function_and_feed(self):
        rows = PG.psql("SELECT proname, count(*) FROM pg_proc p JOIN pg_namespace n ON "
                       "n.oid = p.pronamespace WHERE nspname = 'paynotify' GROUP BY 1 "
                       "HAVING count(*) > 1", db=DB)
        self.assertEqual(rows, [])
        self.assertEqual(PG.psql("SELECT pronargs FROM pg_proc p JOIN pg_namespace n ON "
                                 "n.oid = p.pronamespace WHERE nspname = 'paynotify' AND "
                                 "proname = 'ingest'", db=DB), [("27",)])
        self.assertEqual(PG.psql("SELECT consumer FROM paynotify.feed_consumers", db=DB),
                         [("default",)])
        # the new outcomes are accepted by the upgraded table
        PG.psql("INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, "
                "outcome, raw_body) VALUES ('shop', 'stripe', 'x-new', 'paid', "
                "'duplicate_payment', '\\x00')", db=DB)
        # schema 10: disputes and complaints, their own kind and outcome
        PG.psql("INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, "
                "outcome, raw_body, case_id) VALUES ('shop', 'stripe', 'x-dp', 'dispute', "
                "'dispute', '\\x00', 'dp_1')", db=DB)
        with self.assertRaises(RuntimeError):
            PG.psql("INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, "
                    "outcome, raw_body) VALUES ('shop', 'stripe', 'x-bad', 'paid', 'maybe', "
                    "'\\x00')", db=DB)


if __name__ == "__main__":
    unittest.main()

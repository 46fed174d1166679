# test_rules.py: the site-binding and money rules of paynotify.ingest()
# (sql/functions.sql, README "Who may change an order") called directly, as
# the receivers call it, on a real PostgreSQL; and the new outcomes on
# `paynotify report` and `stats` (amounts in major units).
#
#   flagged events live outside the site's key space (a foreign event never
#   makes a genuine one a duplicate; its own retries count deliveries)
#   rule (c): refund/close/failed of another PSP transaction -> txn_mismatch
#   second payment of a paid order -> duplicate_payment; same txn -> already_applied
#   payment of a closed order -> paid, paid_after_close; of a failed one
#   (a failed attempt, retried) -> paid, applied
#   same key, different content -> conflicting_duplicate (raw bytes kept,
#   first authoritative, repeats counted)
#   weak identity (WeChat Pay v2 refunds) only refunds a verified payment
#   a refund before its payment still applies; source is recorded

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import q  # noqa: E402

PG = None
CFG = None


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pntest.write_config(PG)


def tearDownModule():
    if PG:
        PG.destroy()


COLS = ("notification_id", "outcome", "duplicate", "deliveries", "order_id",
        "order_status", "event_id", "wakeup")


def ingest_sql(site, key, kind, order, txn, amount, currency="CNY", refund=None,
               cumulative=False, flag=None, weak=False, source=None, provider="alipay",
               body=b"raw", detail=None):
    cols = COLS
    return ("SELECT %s FROM paynotify.ingest(%s, %s, %s, %s, 'T', %s, %s, NULL, %s, %s, %s, %s, "
           "NULL, 'k:1', %s, %s, '{}', '\\x%s'::bytea, %s, %s)" % (
               ", ".join(cols), q(site), q(provider), q(key), q(kind), q(order), q(txn),
               "NULL" if amount is None else int(amount), q(currency),
               "NULL" if refund is None else int(refund), "true" if cumulative else "false",
               q(flag), q(detail), body.hex(), "true" if weak else "false", q(source)))


def ingest(*args, **kw):
    row = PG.psql(ingest_sql(*args, **kw))[0]
    d = dict(zip(COLS, row))
    d["duplicate"] = d["duplicate"] == "t"
    d["deliveries"] = int(d["deliveries"])
    return d


def admin(*args):
    env = pntest.clean_env({"PAYNOTIFY_CONFIG": CFG.path})
    return subprocess.run([os.path.join(pntest.REPO, "paynotify")] + list(args), env=env,
                          capture_output=True, text=True, timeout=60)


class Rules(unittest.TestCase):
    def setUp(self):
        PG.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed")

    def order(self, oid, site="shop-a"):
        return PG.order(site, oid)

    def test_foreign_flagged_event_never_swallows_the_genuine_one(self):
        PG.add_order("shop-b", "O1", 6600, "CNY")
        # the other seller's genuine notification posted to shop-b, same event key
        f = ingest("shop-b", "T1:TRADE_SUCCESS", "paid", "O1", "T1", 6600,
                   flag="merchant_mismatch", detail="seller_id \"x\" is not site shop-b's")
        self.assertEqual((f["outcome"], f["duplicate"]), ("merchant_mismatch", False))
        self.assertEqual(self.order("O1", "shop-b")["status"], "pending")
        # its retries find it (deliveries counted) ...
        f2 = ingest("shop-b", "T1:TRADE_SUCCESS", "paid", "O1", "T1", 6600,
                    flag="merchant_mismatch")
        self.assertEqual((f2["duplicate"], f2["deliveries"], f2["notification_id"]),
                         (True, 2, f["notification_id"]))
        # ... and shop-b's own genuine notification with the same key is applied
        g = ingest("shop-b", "T1:TRADE_SUCCESS", "paid", "O1", "T1", 6600)
        self.assertEqual((g["outcome"], g["duplicate"], g["order_status"]),
                         ("applied", False, "paid"))
        self.assertEqual(self.order("O1", "shop-b")["status"], "paid")
        keys = sorted(r["dedup_key"] for r in PG.notifications())
        self.assertEqual(keys, ["!merchant_mismatch:T1:TRADE_SUCCESS", "T1:TRADE_SUCCESS"])

    def test_refund_of_another_transaction_is_txn_mismatch(self):
        PG.add_order("shop-a", "O2", 1000, "USD")
        self.assertEqual(ingest("shop-a", "e1", "paid", "O2", "pi_A", 1000, "USD")["outcome"],
                         "applied")
        r = ingest("shop-a", "e2", "refund", "O2", "pi_OTHER", None, "USD", refund=500,
                   cumulative=True)
        self.assertEqual((r["outcome"], r["order_status"]), ("txn_mismatch", "paid"))
        for kind in ("closed", "failed"):
            r = ingest("shop-a", "e-" + kind, kind, "O2", "pi_OTHER", None, "USD")
            self.assertEqual(r["outcome"], "txn_mismatch", kind)
        o = self.order("O2")
        self.assertEqual((o["status"], o["refunded_minor"], o["psp_txn_id"]),
                         ("paid", 0, "pi_A"))
        # the right transaction refunds
        r = ingest("shop-a", "e3", "refund", "O2", "pi_A", None, "USD", refund=500,
                   cumulative=True)
        self.assertEqual((r["outcome"], r["order_status"]), ("applied", "partially_refunded"))

    def test_second_payment_is_duplicate_payment(self):
        PG.add_order("shop-a", "O3", 6600, "CNY")
        ingest("shop-a", "T3:TRADE_SUCCESS", "paid", "O3", "T3", 6600)
        same = ingest("shop-a", "T3:TRADE_FINISHED", "paid", "O3", "T3", 6600)
        self.assertEqual(same["outcome"], "already_applied")
        other = ingest("shop-a", "T3b:TRADE_SUCCESS", "paid", "O3", "T3b", 6600)
        self.assertEqual((other["outcome"], other["order_status"]),
                         ("duplicate_payment", "paid"))
        self.assertEqual(self.order("O3")["psp_txn_id"], "T3")
        self.assertIsNone(other["event_id"])            # nothing for the shop's feed

    def test_paid_after_close_moves_to_paid_and_is_flagged(self):
        # closed: paid_after_close; failed (an attempt failed, the buyer may
        # retry on the same order): the payment is simply applied
        for st, want in (("closed", "paid_after_close"), ("failed", "applied")):
            oid = "O4-" + st
            PG.add_order("shop-a", oid, 6600, "CNY", status=st)
            r = ingest("shop-a", "T4%s:TRADE_SUCCESS" % st, "paid", oid, "T4" + st, 6600)
            self.assertEqual((r["outcome"], r["order_status"]), (want, "paid"))
            o = self.order(oid)
            self.assertEqual((o["status"], o["paid"], o["psp_txn_id"]), ("paid", True, "T4" + st))
            self.assertIsNotNone(r["event_id"])          # an applied transition: in the feed
            self.assertEqual(json.loads(r["wakeup"])["order_status"], "paid")

    def test_conflicting_duplicate_is_stored_apart(self):
        PG.add_order("shop-a", "O5", 6600, "CNY")
        first = ingest("shop-a", "K5", "paid", "O5", "T5", 6600, body=b"first")
        for field, kw in (("amount", {"amount": 1}), ("currency", {"currency": "USD"}),
                          ("txn", {"txn": "T5x"}), ("order", {"order": "O5x"}),
                          ("kind", {"kind": "refund", "refund": 6600})):
            args = dict(site="shop-a", key="K5", kind="paid", order="O5", txn="T5",
                        amount=6600, body=("conflict-" + field).encode())
            args.update(kw)
            c = ingest(**args)
            self.assertEqual((c["outcome"], c["duplicate"]), ("conflicting_duplicate", False),
                             field)
            self.assertNotEqual(c["notification_id"], first["notification_id"])
            again = ingest(**args)
            self.assertEqual((again["duplicate"], again["deliveries"], again["notification_id"]),
                             (True, 2, c["notification_id"]), field)
        # the first stays authoritative: applied once, one delivery, its bytes
        rows = {r["dedup_key"]: r for r in PG.notifications()}
        self.assertEqual((rows["K5"]["outcome"], rows["K5"]["deliveries"],
                          rows["K5"]["raw_body"]), ("applied", 1, b"first"))
        conflicts = [r for k, r in rows.items() if k.startswith("!conflicting_duplicate:K5:")]
        self.assertEqual(len(conflicts), 5)
        self.assertIn(b"conflict-amount", [r["raw_body"] for r in conflicts])
        o = self.order("O5")
        self.assertEqual((o["status"], o["refunded_minor"]), ("paid", 0))
        # an identical retry of the first is a plain duplicate
        d = ingest("shop-a", "K5", "paid", "O5", "T5", 6600)
        self.assertEqual((d["duplicate"], d["deliveries"], d["outcome"]), (True, 2, "applied"))

    def test_only_a_receivers_duplicate_commits_without_waiting_for_its_flush(self):
        """paynotify.async_duplicates (set by common/store.c on every session
        of ours): a re-delivery, and only a re-delivery, switches its own
        transaction to synchronous_commit = off; never when the caller did
        not ask, and never when the transaction wrote before ingest() (the
        +1 must not carry another change's commit)."""
        PG.add_order("shop-a", "L1", 6600, "CNY")
        args = ("shop-a", "KL1", "paid", "L1", "TL1", 6600)

        def commit_mode(setting, *prefix):
            sql = "; ".join(list(prefix) + [ingest_sql(*args),
                                            "SELECT current_setting('synchronous_commit')"])
            if setting is not None:
                sql = "SET LOCAL paynotify.async_duplicates = %s; %s" % (setting, sql)
            # (the test cluster runs with synchronous_commit = off)
            return PG.scalar("SET LOCAL synchronous_commit = on; " + sql)

        self.assertEqual(commit_mode("on"), "on")           # a new event: flushed
        self.assertEqual(self.order("L1")["status"], "paid")
        self.assertEqual(commit_mode("on"), "off")          # its re-delivery: not waited for
        self.assertEqual(commit_mode(None), "on")           # the caller did not ask
        self.assertEqual(commit_mode("off"), "on")
        self.assertEqual(commit_mode("on", "UPDATE paynotify.orders SET amount_minor = 6600 "
                                           "WHERE order_id = 'L1'"), "on")
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE dedup_key = 'KL1'"), "5")
        # with a synchronous standby configured, a duplicate's own commit is
        # what proves the event replicated (faults/test_ha.py UnknownOutcome):
        # left as the session has it ('local' here: no standby to wait for)
        PG.psql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        try:
            PG.reload_conf("synchronous_standby_names", "nobody")
            self.assertEqual(PG.scalar(
                "SET LOCAL synchronous_commit = local; "
                "SET LOCAL paynotify.async_duplicates = on; %s; "
                "SELECT current_setting('synchronous_commit')" % ingest_sql(*args)), "local")
        finally:
            PG.psql("ALTER SYSTEM RESET synchronous_standby_names")
            PG.reload_conf("synchronous_standby_names", "")
        # a conflicting copy is a new row (flushed); its own repeat is a duplicate
        conflict = ingest_sql("shop-a", "KL1", "paid", "L1", "TL1", 1)
        for want in ("on", "off"):
            self.assertEqual(PG.scalar("SET LOCAL synchronous_commit = on; "
                                       "SET LOCAL paynotify.async_duplicates = on; %s; "
                                       "SELECT current_setting('synchronous_commit')"
                                       % conflict), want)

    def test_weak_identity_refunds_only_a_verified_payment(self):
        PG.add_order("shop-a", "W1", 1000, "CNY")          # never paid
        r = ingest("shop-a", "refund:R1:SUCCESS", "refund", "W1", "4200A", None, refund=1000,
                   weak=True, provider="wechatpay")
        self.assertEqual(r["outcome"], "txn_mismatch")
        o = self.order("W1")
        self.assertEqual((o["status"], o["paid"]), ("pending", False))   # no "proof of payment"
        # paid by 4200A: a weak refund of another transaction, or above what was paid
        ingest("shop-a", "4200A:SUCCESS", "paid", "W1", "4200A", 1000, provider="wechatpay")
        self.assertEqual(ingest("shop-a", "refund:R2:SUCCESS", "refund", "W1", "4200B", None,
                                refund=100, weak=True, provider="wechatpay")["outcome"],
                         "txn_mismatch")
        self.assertEqual(ingest("shop-a", "refund:R3:SUCCESS", "refund", "W1", "4200A", None,
                                refund=1001, weak=True, provider="wechatpay")["outcome"],
                         "txn_mismatch")
        self.assertEqual(ingest("shop-a", "refund:R4:SUCCESS", "refund", "W9", "4200A", None,
                                refund=100, weak=True, provider="wechatpay")["outcome"],
                         "txn_mismatch")                  # no such order
        self.assertEqual(self.order("W1")["refunded_minor"], 0)
        # the same transaction, within the amount: applied
        r = ingest("shop-a", "refund:R5:SUCCESS", "refund", "W1", "4200A", None, refund=400,
                   weak=True, provider="wechatpay")
        self.assertEqual((r["outcome"], r["order_status"]), ("applied", "partially_refunded"))
        self.assertEqual(self.order("W1")["refunded_minor"], 400)

    def test_refund_before_payment_still_applies(self):
        PG.add_order("shop-a", "O6", 1000, "USD")
        r = ingest("shop-a", "e-ref", "refund", "O6", "pi_6", None, "USD", refund=1000,
                   cumulative=True, provider="stripe")
        self.assertEqual((r["outcome"], r["order_status"]), ("applied", "refunded"))
        o = self.order("O6")
        self.assertEqual((o["paid"], o["psp_txn_id"]), (True, "pi_6"))
        late = ingest("shop-a", "e-paid", "paid", "O6", "pi_6", 1000, "USD", provider="stripe")
        self.assertEqual(late["outcome"], "already_applied")

    def test_source_recorded_and_same_identity(self):
        PG.add_order("shop-a", "O7", 100, "CNY")
        a = ingest("shop-a", "T7:TRADE_SUCCESS", "paid", "O7", "T7", 100, source="query")
        b = ingest("shop-a", "T7:TRADE_SUCCESS", "paid", "O7", "T7", 100)   # the notification
        self.assertEqual((a["outcome"], b["duplicate"]), ("applied", True))
        self.assertEqual(PG.scalar("SELECT source FROM paynotify.notifications WHERE id = %s"
                                   % a["notification_id"]), "query")
        with self.assertRaises(RuntimeError):
            ingest("shop-a", "T7x", "paid", "O7", "T7", 100, source="guess")

    def test_order_pay_decides_as_the_general_path(self):
        """apply_event's one-statement payment (order_pay) writes exactly what
        order_lock + rules + order_update write, and declines everything
        else: the same events, once with the stock order_pay and once with
        one that always declines, leave the same orders, notifications and
        feed."""
        sig = "text, text, bigint, text, text, text"
        named = ("p_site text, p_order_id text, p_amount_minor bigint, p_currency text, "
                 "p_psp text, p_psp_txn_id text")
        orders = [("P1", 6600, "CNY", "pending", None), ("P2", 6600, "CNY", "pending", "TP2"),
                  ("P3", 6600, "CNY", "closed", None), ("P4", 6600, "CNY", "paid", "TP4"),
                  ("P5", 6600, "USD", "pending", None), ("P6", 6600, "CNY", "pending", None),
                  ("P7", 6600, "CNY", "pending", None)]
        events = [("k1", "paid", "P1", "TP1", 6600, "CNY"), ("k2", "paid", "P2", None, 6600, "CNY"),
                  ("k3", "paid", "P3", "TP3", 6600, "CNY"), ("k4", "paid", "P4", "TP4x", 6600, "CNY"),
                  ("k5", "paid", "P5", "TP5", 6600, "CNY"), ("k6", "paid", "P6", "TP6", 6601, "CNY"),
                  ("k7", "paid", "P7", "TP7", None, "CNY"), ("k8", "paid", "P8", "TP8", 6600, "CNY")]

        def play():
            PG.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed")
            for oid, amount, cur, status, txn in orders:
                PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency, "
                        "status, psp_txn_id, paid_at) VALUES ('shop-a', %s, %d, %s, %s, %s, %s)"
                        % (q(oid), amount, q(cur), q(status), q(txn),
                           "now()" if status == "paid" else "NULL"))
            got = [ingest("shop-a", k, kind, oid, txn, amount, cur)
                   for k, kind, oid, txn, amount, cur in events]
            got = [(g["outcome"], g["order_id"], g["order_status"], g["event_id"] is not None)
                   for g in got]
            o = PG.psql("SELECT order_id, status, psp, psp_txn_id, refunded_minor, "
                        "paid_at IS NOT NULL FROM paynotify.orders ORDER BY order_id")
            n = PG.psql("SELECT dedup_key, outcome, order_id, outcome_detail "
                        "FROM paynotify.notifications ORDER BY dedup_key")
            f = PG.psql("SELECT order_id, event_kind, outcome, order_status "
                        "FROM paynotify.feed ORDER BY event_id")
            return got, o, n, f

        fast = play()
        src = PG.scalar("SELECT pg_get_functiondef('paynotify.order_pay(%s)'::regprocedure)" % sig)
        try:
            PG.psql("CREATE OR REPLACE FUNCTION paynotify.order_pay(%s) RETURNS boolean "
                    "LANGUAGE sql AS 'SELECT false'" % named)
            general = play()
        finally:
            PG.psql(src)
        self.assertEqual(fast, general)
        self.assertEqual([g[0] for g in fast[0]],
                         ["applied", "applied", "paid_after_close", "duplicate_payment",
                          "amount_mismatch", "amount_mismatch", "amount_mismatch",
                          "unknown_order"])
        self.assertIn(("P2", "paid", "alipay", "TP2", "0", "t"), fast[1])

    def test_report_and_stats_list_the_new_outcomes(self):
        PG.add_order("shop-a", "R1", 6600, "CNY")
        ingest("shop-a", "TR1:TRADE_SUCCESS", "paid", "R1", "TR1", 6600)
        ingest("shop-a", "TR1b:TRADE_SUCCESS", "paid", "R1", "TR1b", 6600)         # duplicate_payment
        PG.add_order("shop-a", "R2", 1999, "USD", status="closed")
        ingest("shop-a", "e-r2", "paid", "R2", "pi_r2", 1999, "USD", provider="stripe")
        ingest("shop-a", "e-r3", "refund", "R1", "TRX", None, refund=500)          # txn_mismatch
        ingest("shop-a", "TR1:TRADE_SUCCESS", "paid", "R1", "TR1", 100)          # conflicting
        ingest("shop-a", "e-r4", "paid", "R4", "pi_r4", 500, "JPY", provider="stripe",
               flag="mode_mismatch", detail="test-mode event for a live site")
        p = admin("report", "--format", "json")
        self.assertEqual(p.returncode, 1, p.stderr)
        rows = json.loads(p.stdout)
        got = {r["kind"]: (r["order_id"], r["amount"]) for r in rows}
        self.assertEqual(got, {
            "duplicate_payment": ("R1", "66.00 CNY"),
            "paid_after_close": ("R2", "19.99 USD"),
            "txn_mismatch": ("R1", "5.00 CNY"),
            "conflicting_duplicate": ("R1", "1.00 CNY"),
            "mode_mismatch": ("R4", "500 JPY"),
        })
        detail = {r["kind"]: r["detail"] for r in rows}
        self.assertEqual(detail["duplicate_payment"],
                         "paid 66.00 CNY: order already paid by transaction TR1")
        self.assertEqual(detail["mode_mismatch"], "paid 500 JPY: test-mode event for a live site")
        self.assertRegex(detail["conflicting_duplicate"],
                         r"^paid 1\.00 CNY: same event key as notification \d+ \(paid, applied\), "
                         r"different content$")
        self.assertIn("5 items need a human", p.stderr)
        p = admin("stats", "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        counts = {r["outcome"]: int(r["notifications"]) for r in json.loads(p.stdout)}
        for k in ("duplicate_payment", "paid_after_close", "txn_mismatch",
                  "conflicting_duplicate", "mode_mismatch"):
            self.assertEqual(counts.get(k), 1, (k, counts))
        p = admin("stats", "--format", "prometheus")
        self.assertIn('outcome="duplicate_payment"} 1', p.stdout)


class MoneyText(unittest.TestCase):
    """paynotify.money_text() (the amounts in outcome details) uses the same
    ISO 4217 exponents as common/money.c, read here from its source."""

    def test_every_currency_as_common_money_c(self):
        import re
        with open(os.path.join(pntest.REPO, "common", "money.c")) as f:
            table = re.findall(r'\{"([A-Z]{3})", "\d{3}", (\d)\}', f.read())
        self.assertGreater(len(table), 150)
        cases = [(c, int(e), v) for c, e in table for v in (123456, 7, -1205)]
        got = PG.psql("SELECT paynotify.money_text(v, c) FROM (VALUES %s) t(v, c, i) ORDER BY i"
                      % ", ".join("(%d, %s, %d)" % (v, q(c), i)
                                  for i, (c, e, v) in enumerate(cases)))
        want = []
        for c, e, v in cases:
            if e == 0:
                want.append("%d %s" % (v, c))
            else:
                a = abs(v)
                want.append("%s%d.%0*d %s" % ("-" if v < 0 else "", a // 10 ** e, e,
                                              a % 10 ** e, c))
        self.assertEqual([r[0] for r in got], want)

    def test_unknown_currency_and_no_amount(self):
        self.assertEqual(PG.psql("SELECT paynotify.money_text(6600, 'XXX'), "
                                 "paynotify.money_text(6600, NULL), "
                                 "paynotify.money_text(NULL, 'CNY')"),
                         [("6600 minor units XXX", "6600 minor units", "no amount")])


if __name__ == "__main__":
    unittest.main()

# test_shop_orders.py: the worked example of docs/SHOP-ORDERS.md (orders in
# the shop's own shop.orders table, five replaced storage functions), read
# from that page and loaded as a shop would, then genuinely signed Stripe
# notifications through the real receiver (CGI): paid, duplicate, refunds
# (one without an order id, found by its PaymentIntent), report, replay,
# the feed.  paynotify.orders stays empty; `migrate` keeps the replacements;
# a site that replaced only the four of schema 7 gets an order_pay() that declines.

import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

PG = None
CFG = None
DOC = os.path.join(pntest.REPO, "docs", "SHOP-ORDERS.md")


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pntest.write_config(PG)


def tearDownModule():
    if PG:
        PG.destroy()


def example_sql():
    with open(DOC) as f:
        text = f.read()
    m = re.search(r"<!-- shop-orders.sql begin -->\n```sql\n(.*?)```\n<!-- shop-orders.sql end -->",
                  text, re.S)
    assert m, "the example block is missing from docs/SHOP-ORDERS.md"
    return m.group(1)


def admin(*args):
    env = pntest.clean_env({"PAYNOTIFY_CONFIG": CFG.path})
    return subprocess.run([os.path.join(pntest.REPO, "paynotify")] + list(args), env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def send(body):
    return pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/shop-a",
                          pntest.stripe_headers(pntest.SITE_A, body), body, config=CFG)


def shop_order(no):
    rows = PG.psql("SELECT state, refunded_cents, gateway, gateway_ref, paid_at IS NOT NULL "
                   "FROM shop.orders WHERE order_no = '%s'" % no)
    return rows[0] if rows else None


def load_example():
    """docs/SHOP-ORDERS.md's example (the shop's table and its five storage
    functions), then `paynotify migrate`, which must keep them."""
    path = os.path.join(pntest.temp_dir("pntest-shop."), "shop-orders.sql")
    with open(path, "w") as f:
        f.write(example_sql())
    os.chmod(os.path.dirname(path), 0o755)
    os.chmod(path, 0o644)
    PG.psql_file(path)
    p = admin("migrate", "--sql-dir", os.path.join(pntest.REPO, "sql"))
    assert p.returncode == 0, p.stderr


class ShopOrders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        load_example()

    def test_end_to_end(self):
        # migrate re-applied functions.sql: the shop's five functions are still there
        self.assertEqual(PG.psql(
            "SELECT p.proname, obj_description(p.oid, 'pg_proc') FROM pg_proc p JOIN "
            "pg_namespace n ON n.oid = p.pronamespace WHERE nspname = 'paynotify' AND proname "
            "LIKE 'order_%' ORDER BY 1"),
            [("order_by_txn", "site: shop.orders"), ("order_lock", "site: shop.orders"),
             ("order_pay", "site: shop.orders"), ("order_rows", "site: shop.orders"),
             ("order_update", "site: shop.orders")])
        self.assertIn("shop.orders", PG.scalar(
            "SELECT prosrc FROM pg_proc WHERE proname = 'order_lock'"))
        PG.psql("INSERT INTO shop.orders (order_no, total_cents, currency) VALUES "
                "('S-1', 1999, 'USD')")
        PG.psql("INSERT INTO shop.orders (order_no, total_cents, currency, created_at) VALUES "
                "('S-2', 500, 'USD', now() - interval '2 hours')")
        PG.psql("INSERT INTO shop.orders (order_no, total_cents, currency, state) VALUES "
                "('S-3', 700, 'USD', 'paid')")
        # paid
        paid = pntest.stripe_checkout_completed("S-1", 1999, payment_intent="pi_S1")
        r = send(paid)
        self.assertEqual(r.status, 200, r)
        self.assertIn("outcome=applied", r.stderr)
        self.assertEqual(shop_order("S-1"), ("paid", "0", "stripe", "pi_S1", "t"))
        # the duplicate: counted, nothing changes
        r = send(paid)
        self.assertEqual(r.status, 200, r)
        self.assertIn("outcome=duplicate", r.stderr)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE order_id = 'S-1' AND event_kind = 'paid'"), "2")
        # a partial refund, then the rest with no order id in the charge's metadata
        r = send(pntest.stripe_charge_refunded("S-1", 1999, 500, payment_intent="pi_S1"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(shop_order("S-1")[:2], ("part_refunded", "500"))
        r = send(pntest.stripe_charge_refunded(None, 1999, 1999, payment_intent="pi_S1"))
        self.assertEqual(r.status, 200, r)
        self.assertIn("outcome=applied", r.stderr)
        self.assertEqual(shop_order("S-1")[:2], ("refunded", "1999"))
        # a payment for an order the shop does not have; a second real charge
        send(pntest.stripe_checkout_completed("S-404", 100, payment_intent="pi_404"))
        r = send(pntest.stripe_checkout_completed("S-1", 1999, payment_intent="pi_S1b"))
        self.assertIn("outcome=duplicate_payment", r.stderr)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.orders"), "0")
        # report: through order_rows(), in the shop's terms translated
        p = admin("report", "--format", "json")
        self.assertEqual(p.returncode, 1, p.stderr)
        rows = json.loads(p.stdout)
        got = sorted((x["kind"], x["order_id"]) for x in rows)
        self.assertEqual(got, [("duplicate_payment", "S-1"),
                               ("paid_without_notification", "S-3"),
                               ("pending_without_notification", "S-2"),
                               ("unknown_order", "S-404")])
        detail = {x["order_id"]: x["detail"] for x in rows}
        self.assertEqual(detail["S-404"], "paid 1.00 USD, no such order")
        self.assertEqual(detail["S-1"],
                         "paid 19.99 USD: order already paid by transaction pi_S1")
        # replay sees the shop's order status
        p = admin("replay", "--format", "json", "--order", "S-1")
        self.assertEqual(p.returncode, 1, p.stderr)       # the duplicate payment needs a human
        self.assertEqual({x["order_status"] for x in json.loads(p.stdout)}, {"refunded"})
        # the shop's application learns of the three transitions from the feed
        ev = PG.psql("SELECT order_id, event_kind, order_status, event_id, lease_token FROM "
                     "paynotify.claim_events('default', 10)")
        self.assertEqual([e[:3] for e in ev], [("S-1", "paid", "paid")])
        self.assertEqual(PG.scalar("SELECT paynotify.ack_events('default', ARRAY[%s]::bigint[], "
                                   "'%s')" % (ev[0][3], ev[0][4])), "1")
        ev = PG.psql("SELECT order_id, event_kind, order_status FROM "
                     "paynotify.claim_events('default', 10)")
        self.assertEqual(ev, [("S-1", "refund", "partially_refunded")])

    def test_four_replaced_without_order_pay(self):
        """A site that replaced the four storage functions of schema 7 and not
        order_pay() (schema 8): after migrate, order_pay() declines, so a
        payment goes through the site's order_lock()/order_update() even
        when paynotify.orders holds a pending row with the same key."""
        try:
            PG.psql("DROP FUNCTION paynotify.order_pay(text, text, bigint, text, text, text)")
            p = admin("migrate", "--sql-dir", os.path.join(pntest.REPO, "sql"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(PG.psql(
                "SELECT prosrc, obj_description(oid, 'pg_proc') FROM pg_proc "
                "WHERE proname = 'order_pay'"),
                [("SELECT false", "declines: this site replaced order_lock/order_update but "
                  "not order_pay")])
            PG.psql("INSERT INTO shop.orders (order_no, total_cents, currency) VALUES "
                    "('S-9', 1999, 'USD')")
            PG.add_order("shop-a", "S-9", 1999, "USD")     # the decoy: must stay pending
            r = send(pntest.stripe_checkout_completed("S-9", 1999, payment_intent="pi_S9"))
            self.assertEqual(r.status, 200, r)
            self.assertIn("outcome=applied", r.stderr)
            self.assertEqual(shop_order("S-9"), ("paid", "0", "stripe", "pi_S9", "t"))
            self.assertEqual(PG.order("shop-a", "S-9")["status"], "pending")
        finally:
            PG.psql("DELETE FROM paynotify.orders; DELETE FROM paynotify.feed WHERE order_id = "
                    "'S-9'; DELETE FROM paynotify.notifications WHERE order_id = 'S-9'; "
                    "DELETE FROM shop.orders WHERE order_no = 'S-9'")
            load_example()


if __name__ == "__main__":
    unittest.main()

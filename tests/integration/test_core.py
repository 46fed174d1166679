# test_core.py: the core contract of the receivers, end to end against a real
# (throwaway) PostgreSQL, for Stripe and Alipay, each scenario run both as CGI
# (env + stdin) and over FastCGI (worker processes on a listening unix socket):
#   - a payment is applied once; the raw body, key id and event are stored
#   - the same event redelivered: success ack, deliveries=2, order unchanged
#   - a later, different event for the same order is a new row, not swallowed
#     (Alipay TRADE_FINISHED after TRADE_SUCCESS; refunds: Alipay TRADE_SUCCESS
#     with out_biz_no/refund_fee/gmt_refund, Stripe charge.refunded)
#   - forged, tampered, wrong-key, unsigned and stale (Stripe, t older than
#     300 s) notifications: provider failure form, nothing stored
#   - the order moves forward only: close of an unpaid order applies; a late
#     close or pending never overwrites paid; an unhandled (Stripe) event type
#     is acked and kept as unhandled with its type; a Stripe refund whose charge carries no
#     metadata finds its order through the PaymentIntent
#   - unknown order, amount/currency mismatch, other merchant identity:
#     stored with that outcome, success ack, order untouched
#   - database stopped: 503 + provider failure form, nothing stored; the SAME
#     request succeeds once the database is back (and every worker recovers)
#   - (concurrent deliveries of one event: test_concurrency.py, every provider)
#   - two sites with different keys on one database: A's notification sent
#     to B's path is rejected; B's notifications never touch A's orders
#   - key rotation: several Alipay keys (SPKI PEM, X.509 cert) and Stripe
#     secrets active at once; either verifies; key_id records which one
#   - unknown site 404, PUT/DELETE/PATCH 405, body over the limit 413
#   - GET/HEAD are the health check: 200 ok while the database answers
#     (exactly the limit is fine), malformed body 400
#   - a bad configuration (group-readable secret, missing file): CGI answers
#     5xx with the failure form, a FastCGI worker refuses to start
# FastCGI workers must survive every test (a crash fails the test).

import base64
import json
import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import SITE_A, SITE_B, SITE_R  # noqa: E402

PG = None
CFG = None
MAX_BODY = 1048576
FCGI_WORKERS = 4
# The status for a notification whose signature/MAC is invalid or stale:
# PN_UNVERIFIED_STATUS in common/provider.h, the README's outcomes table.
UNVERIFIED_STATUS = 400


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pntest.write_config(PG, max_body_bytes=MAX_BODY)


def tearDownModule():
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# What differs between providers


class AlipayKit:
    provider = "alipay"
    amount_minor, amount_text, currency = 8888, "88.88", "CNY"

    def add_order(self, site, oid, amount_minor=None):
        PG.add_order(site.name, oid, amount_minor or self.amount_minor, self.currency)

    def paid(self, site, oid, amount=None, key=None, **extra):
        body = pntest.alipay_notification(site, oid, amount or self.amount_text, key=key, **extra)
        return pntest.alipay_headers(), body

    def resend(self, site, headers, body):
        return headers, body            # Alipay resends the same bytes

    def later_event(self, site, oid):
        """A different event for the same order that must not be swallowed."""
        return self.paid(site, oid, trade_status="TRADE_FINISHED")

    def refund(self, site, oid, refunded_text, refund_no):
        return self.paid(site, oid, out_biz_no=refund_no, refund_fee=refunded_text,
                         gmt_refund="2024-05-21 09:00:00.123")

    def forged(self, site, oid):
        h, body = self.paid(site, oid)
        fake = base64.b64encode(os.urandom(256)).decode()
        pairs = [(k, fake if k == "sign" else v) for k, v in pntest.form_decode(body)]
        return h, urllib.parse.urlencode(pairs).encode()

    def tampered(self, site, oid):
        h, body = self.paid(site, oid)
        t = body.replace(b"total_amount=88.88", b"total_amount=0.01")
        assert t != body
        return h, t

    def wrong_key(self, site, oid):
        other = SITE_B if site is SITE_A else SITE_A
        return self.paid(site, oid, key=other.alipay_private_key)

    def unsigned(self, site, oid):
        h, body = self.paid(site, oid)
        pairs = [(k, v) for k, v in pntest.form_decode(body) if k != "sign"]
        return h, urllib.parse.urlencode(pairs).encode()

    def mismatched_amount(self, site, oid):
        return self.paid(site, oid, amount="1.00")

    def closed(self, site, oid):
        """The unpaid trade was closed."""
        return self.paid(site, oid, trade_status="TRADE_CLOSED", gmt_payment=None,
                         gmt_close="2024-05-20 12:00:00")

    def pending(self, site, oid):
        """Informational: created, not paid yet."""
        return self.paid(site, oid, trade_status="WAIT_BUYER_PAY", gmt_payment=None)

    def signed_with(self, site, oid, idx):
        """Signed with the idx-th of the site's rotating keys."""
        return self.paid(site, oid, key=(SITE_A, SITE_B)[idx].alipay_private_key)

    def malformed(self, site):
        return pntest.alipay_headers(), b"out_trade_no=%zz&sign=%%%"

    def check_success(self, t, r):
        t.assertEqual(r.status, 200, "expected Alipay success ack, got %r" % (r,))
        t.assertEqual(r.body, b"success", "Alipay ack must be exactly 'success': %r" % (r,))
        t.assertTrue(r.headers.get("content-type", "").startswith("text/plain"), r)

    def check_failure(self, t, r, status):
        if isinstance(status, int):
            status = (status,)
        t.assertIn(r.status, status, "expected %s, got %r" % (status, r))
        t.assertEqual(r.body, b"fail", "Alipay failure form must be 'fail': %r" % (r,))

    def check_rejected(self, t, r, status):
        t.assertIn(r.status, status if isinstance(status, tuple) else (status,), r)
        t.assertNotEqual(r.body, b"success", r)

    def event_id(self, body):
        return dict(pntest.form_decode(body))["notify_id"]


class StripeKit:
    provider = "stripe"
    amount_minor, currency = 1999, "USD"

    def add_order(self, site, oid, amount_minor=None):
        PG.add_order(site.name, oid, amount_minor or self.amount_minor, self.currency)

    def _signed(self, site, body, t=None, secret=None):
        return pntest.stripe_headers(site, body, t=t, secret=secret), body

    def paid(self, site, oid, amount=None, currency="usd", t=None, secret=None):
        # one PaymentIntent per order: its refunds name the same one (rule (c))
        body = pntest.stripe_checkout_completed(oid, amount or self.amount_minor, currency,
                                                payment_intent="pi_" + oid)
        return self._signed(site, body, t, secret)

    def resend(self, site, headers, body):
        # a Stripe retry carries the same event, freshly signed
        return self._signed(site, body, t=int(time.time()) + 1)

    def later_event(self, site, oid):
        return self.refund(site, oid, 500, None)

    def refund(self, site, oid, refunded_minor, refund_no):
        body = pntest.stripe_charge_refunded(oid, self.amount_minor, refunded_minor,
                                             payment_intent="pi_" + oid)
        return self._signed(site, body)

    def forged(self, site, oid):
        h, body = self.paid(site, oid)
        h["Stripe-Signature"] = "t=%d,v1=%s" % (time.time(), os.urandom(32).hex())
        return h, body

    def tampered(self, site, oid):
        h, body = self.paid(site, oid)
        t = body.replace(b'"amount_total":1999', b'"amount_total":1')
        assert t != body
        return h, t

    def wrong_key(self, site, oid):
        other = SITE_B if site is SITE_A else SITE_A
        return self.paid(site, oid, secret=other.stripe_secrets[0])

    def unsigned(self, site, oid):
        h, body = self.paid(site, oid)
        del h["Stripe-Signature"]
        return h, body

    def stale(self, site, oid):
        return self.paid(site, oid, t=int(time.time()) - 400)

    def mismatched_amount(self, site, oid):
        return self.paid(site, oid, amount=1000)

    def signed_with(self, site, oid, idx):
        return self.paid(site, oid, secret=site.stripe_secrets[idx])

    def closed(self, site, oid):
        body = pntest.stripe_checkout_completed(oid, self.amount_minor, payment_status="unpaid",
                                                etype="checkout.session.expired")
        return self._signed(site, body)

    def pending(self, site, oid):
        # completed, but a delayed payment method: not paid yet
        body = pntest.stripe_checkout_completed(oid, self.amount_minor, payment_status="unpaid")
        return self._signed(site, body)

    def mismatched_currency(self, site, oid):
        return self.paid(site, oid, currency="eur")

    def malformed(self, site):
        # correctly signed, but not JSON
        return self._signed(site, b"} I am not valid JSON; 123][")

    def check_success(self, t, r):
        t.assertTrue(r.status is not None and 200 <= r.status < 300,
                     "expected Stripe 2xx, got %r" % (r,))

    def check_failure(self, t, r, status):
        if isinstance(status, int):
            status = (status,)
        t.assertIn(r.status, status, "expected %s, got %r" % (status, r))

    check_rejected = check_failure

    def event_id(self, body):
        return json.loads(body)["id"]


# ---------------------------------------------------------------------------
# The scenarios, written once


class CoreScenarios(pntest.ReceiverScenarios):
    kit = None
    workers = FCGI_WORKERS

    @staticmethod
    def env():
        return PG, CFG

    # -- helpers ----------------------------------------------------------
    def path(self, site):
        return "/notify/%s/%s" % (self.kit.provider, site.name)

    def send(self, site, headers, body, method="POST", path=None):
        path = path or self.path(site)
        if self.transport == "cgi":
            return pntest.run_cgi(self.binary, method, path, headers, body, CFG)
        return self.server.request(method, path, headers, body)

    def rows(self, site=None):
        where = "provider = %s" % pntest.q(self.kit.provider)
        if site is not None:
            where += " AND site = %s" % pntest.q(site.name)
        return PG.notifications(where)

    def assert_nothing_stored(self):
        self.assertEqual(self.rows(), [], "a rejected notification must not be stored")

    def oid(self, tag):
        return "ORD-%s-%s-%s" % (self.kit.provider, self.transport, tag)

    # -- a payment, once ---------------------------------------------------
    def test_payment_applied_once(self):
        k, oid = self.kit, self.oid("pay")
        k.add_order(SITE_A, oid)
        h, body = k.paid(SITE_A, oid)
        r = self.send(SITE_A, h, body)
        k.check_success(self, r)
        o = PG.order(SITE_A.name, oid)
        self.assertEqual(o["status"], "paid")
        self.assertEqual(o["psp"], k.provider)
        self.assertTrue(o["paid"])
        rows = self.rows()
        self.assertEqual(len(rows), 1, rows)
        n = rows[0]
        self.assertEqual((n["site"], n["provider"], n["order_id"], n["event_kind"], n["outcome"],
                          n["deliveries"], n["amount_minor"], n["currency"]),
                         (SITE_A.name, k.provider, oid, "paid", "applied", 1,
                          k.amount_minor, k.currency))
        self.assertEqual(n["raw_body"], body, "the raw body must be stored byte for byte")
        self.assertTrue(n["key_id"], "the key that verified it must be recorded")
        self.assertEqual(n["psp_event_id"], k.event_id(body))
        if k.provider == "stripe":
            self.assertEqual(n["dedup_key"], k.event_id(body))
        elif k.provider == "alipay":
            # keyed by Alipay's own trade_no (unique across sellers), not out_trade_no
            self.assertEqual(n["dedup_key"], n["psp_txn_id"] + ":TRADE_SUCCESS")
        else:
            self.assertIn(oid, n["dedup_key"])
        if self.transport == "cgi":
            lines = [l for l in r.stderr.splitlines() if "outcome=" in l]
            self.assertEqual(len(lines), 1, "one log line per request: %r" % r.stderr)
            self.assertRegex(lines[0], r"\bstatus=200\b")
            self.assertRegex(lines[0], r"\bprovider=%s\b" % k.provider)
            self.assertRegex(lines[0], r"\bsite=%s\b" % SITE_A.name)

    def test_redelivery_counted_not_reapplied(self):
        k, oid = self.kit, self.oid("dup")
        k.add_order(SITE_A, oid)
        h, body = k.paid(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, h, body))
        before = PG.psql("SELECT status, paid_at, updated_at, psp_txn_id FROM paynotify.orders "
                         "WHERE order_id = %s" % pntest.q(oid))
        time.sleep(0.05)
        h2, body2 = k.resend(SITE_A, h, body)
        k.check_success(self, self.send(SITE_A, h2, body2))
        rows = self.rows()
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["deliveries"], 2)
        self.assertEqual(rows[0]["outcome"], "applied")
        after = PG.psql("SELECT status, paid_at, updated_at, psp_txn_id FROM paynotify.orders "
                        "WHERE order_id = %s" % pntest.q(oid))
        self.assertEqual(before, after, "a duplicate must not touch the order")

    def test_later_event_is_not_swallowed(self):
        k, oid = self.kit, self.oid("later")
        k.add_order(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid)))
        h, body = k.later_event(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, h, body))
        rows = self.rows()
        self.assertEqual(len(rows), 2, "a different event for the same order must be a new row")
        self.assertNotEqual(rows[0]["dedup_key"], rows[1]["dedup_key"])
        self.assertEqual(rows[1]["raw_body"], body)
        self.assertEqual(rows[1]["deliveries"], 1)
        o = PG.order(SITE_A.name, oid)
        if k.provider == "alipay":     # TRADE_FINISHED after TRADE_SUCCESS
            self.assertEqual(rows[1]["event_kind"], "paid")
            self.assertEqual(rows[1]["outcome"], "already_applied")
            self.assertEqual(o["status"], "paid")
        else:                          # charge.refunded, 500 of 1999
            self.assertEqual(rows[1]["event_kind"], "refund")
            self.assertEqual(rows[1]["outcome"], "applied")
            self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 500))

    def test_refunds_are_new_events(self):
        k, oid = self.kit, self.oid("refund")
        k.add_order(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid)))
        if k.provider == "alipay":
            first, full = ("20.00", 2000), ("88.88", 8888)
        else:
            first, full = (500, 500), (1999, 1999)
        h, body = k.refund(SITE_A, oid, first[0], "RF-1")
        k.check_success(self, self.send(SITE_A, h, body))
        o = PG.order(SITE_A.name, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", first[1]))
        rows = self.rows()
        self.assertEqual(len(rows), 2, rows)
        self.assertEqual((rows[1]["event_kind"], rows[1]["outcome"]), ("refund", "applied"))
        if k.provider == "alipay":
            self.assertIn("RF-1", rows[1]["dedup_key"])
        # the refund redelivered: counted, not re-applied
        k.check_success(self, self.send(SITE_A, *k.resend(SITE_A, h, body)))
        rows = self.rows()
        self.assertEqual(len(rows), 2, rows)
        self.assertEqual(rows[1]["deliveries"], 2)
        self.assertEqual(PG.order(SITE_A.name, oid)["refunded_minor"], first[1])
        # a second refund (cumulative total = everything): a third row
        k.check_success(self, self.send(SITE_A, *k.refund(SITE_A, oid, full[0], "RF-2")))
        rows = self.rows()
        self.assertEqual(len(rows), 3, rows)
        o = PG.order(SITE_A.name, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("refunded", full[1]))

    # -- the order state machine: forward only -------------------------------
    def test_close_of_unpaid_order_applied(self):
        k, oid = self.kit, self.oid("close")
        k.add_order(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, *k.closed(SITE_A, oid)))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "closed")
        self.assertEqual([(r["event_kind"], r["outcome"]) for r in self.rows()],
                         [("closed", "applied")])

    def test_late_close_never_overwrites_paid(self):
        k, oid = self.kit, self.oid("lateclose")
        k.add_order(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid)))
        k.check_success(self, self.send(SITE_A, *k.closed(SITE_A, oid)))
        k.check_success(self, self.send(SITE_A, *k.pending(SITE_A, oid)))
        o = PG.order(SITE_A.name, oid)
        self.assertEqual(o["status"], "paid")
        rows = self.rows()
        self.assertEqual([r["event_kind"] for r in rows], ["paid", "closed", "pending"])
        self.assertEqual(rows[0]["outcome"], "applied")
        self.assertNotIn(rows[1]["outcome"], ("applied",))
        self.assertNotIn(rows[2]["outcome"], ("applied",))

    def test_pending_event_recorded_then_paid(self):
        k, oid = self.kit, self.oid("pending")
        k.add_order(SITE_A, oid)
        k.check_success(self, self.send(SITE_A, *k.pending(SITE_A, oid)))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid)))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "paid")
        self.assertEqual([(r["event_kind"], r["outcome"]) for r in self.rows()],
                         [("pending", "ignored"), ("paid", "applied")])

    # -- rejected -----------------------------------------------------------
    def _rejected(self, make, status=UNVERIFIED_STATUS):
        k, oid = self.kit, self.oid("bad")
        k.add_order(SITE_A, oid)
        h, body = make(SITE_A, oid)
        r = self.send(SITE_A, h, body)
        k.check_failure(self, r, status)
        self.assert_nothing_stored()
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")

    def test_forged_signature_rejected(self):
        self._rejected(self.kit.forged)

    def test_tampered_body_rejected(self):
        self._rejected(self.kit.tampered)

    def test_wrong_key_rejected(self):
        self._rejected(self.kit.wrong_key)

    def test_unsigned_rejected(self):
        self._rejected(self.kit.unsigned, status=(400, UNVERIFIED_STATUS))

    # -- verified but not applicable ------------------------------------------
    def test_unknown_order_stored_and_acked(self):
        k, oid = self.kit, self.oid("unknown")
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid)))
        rows = self.rows()
        self.assertEqual([(r["order_id"], r["outcome"]) for r in rows], [(oid, "unknown_order")])
        self.assertIsNone(PG.order(SITE_A.name, oid))

    def request_log_line(self, r, oid):
        """The receiver's one log line for the request about order oid."""
        text = r.stderr if self.transport == "cgi" else self.server.log_text()
        lines = [l for l in text.splitlines() if "outcome=" in l and " order=%s " % oid in l]
        self.assertEqual(len(lines), 1, "one log line for %s: %r" % (oid, text[-3000:]))
        return lines[0]

    def test_amount_mismatch_stored_and_acked(self):
        k, oid = self.kit, self.oid("amount")
        k.add_order(SITE_A, oid)
        r = self.send(SITE_A, *k.mismatched_amount(SITE_A, oid))
        k.check_success(self, r)
        rows = self.rows()
        self.assertEqual([r["outcome"] for r in rows], ["amount_mismatch"])
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        # the log line says why, amounts in major units (as the row's detail)
        paid, order = {"alipay": ("1.00 CNY", "88.88 CNY"),
                       "stripe": ("10.00 USD", "19.99 USD")}[k.provider]
        why = "paid %s, order %s pending" % (paid, order)
        line = self.request_log_line(r, oid)
        self.assertIn(' reason="%s; order status pending"' % why, line)
        self.assertEqual(PG.psql("SELECT outcome_detail FROM paynotify.notifications "
                                 "WHERE id = %d" % rows[0]["id"]), [(why,)])

    # -- the database goes away ---------------------------------------------
    def test_database_down_then_back(self):
        k, oid = self.kit, self.oid("dbdown")
        k.add_order(SITE_A, oid)
        h, body = k.paid(SITE_A, oid)
        if self.transport == "fcgi":
            # make every worker hold a live connection first
            warm = self.oid("warm")
            k.add_order(SITE_A, warm)
            wh, wb = k.paid(SITE_A, warm)
            for _ in range(FCGI_WORKERS * 2):
                k.check_success(self, self.send(SITE_A, wh, wb))
        PG.stop()
        try:
            t0 = time.monotonic()
            r = self.send(SITE_A, h, body)
            k.check_failure(self, r, 503)
            self.assertLess(time.monotonic() - t0, 10, "the failure answer took too long")
        finally:
            PG.start()
        self.assertEqual([x for x in self.rows() if x["order_id"] == oid], [],
                         "nothing may be stored while the database is down")
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        # the provider retries the same notification: now it must succeed
        h2, body2 = k.resend(SITE_A, h, body)
        k.check_success(self, self.send(SITE_A, h2, body2))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "paid")
        rows = [x for x in self.rows() if x["order_id"] == oid]
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in rows], [("applied", 1)])
        if self.transport == "fcgi":
            # every worker must have reconnected: no 503 after the restart
            extra = FCGI_WORKERS * 2
            for i in range(extra):
                r = self.send(SITE_A, *k.resend(SITE_A, h, body))
                k.check_success(self, r)
            rows = [x for x in self.rows() if x["order_id"] == oid]
            self.assertEqual(rows[0]["deliveries"], 1 + extra)

    # -- several sites on one database ----------------------------------------
    def test_sites_are_isolated(self):
        k, oid = self.kit, self.oid("shared")
        k.add_order(SITE_A, oid)
        k.add_order(SITE_B, oid)
        # A's genuine notification sent to B's path: B's key does not verify it
        h, body = k.paid(SITE_A, oid)
        r = self.send(SITE_B, h, body)
        k.check_failure(self, r, UNVERIFIED_STATUS)
        self.assert_nothing_stored()
        # B's own notification applies to B's order only
        k.check_success(self, self.send(SITE_B, *k.paid(SITE_B, oid)))
        self.assertEqual(PG.order(SITE_B.name, oid)["status"], "paid")
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        self.assertEqual([r["site"] for r in self.rows()], [SITE_B.name])
        # B's notification sent to A's path is rejected too
        k.check_failure(self, self.send(SITE_A, *k.paid(SITE_B, oid)), UNVERIFIED_STATUS)
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        # and A's own still works
        k.check_success(self, self.send(SITE_A, h, body) if k.provider == "alipay"
                        else self.send(SITE_A, *k.resend(SITE_A, h, body)))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "paid")
        self.assertEqual(sorted(r["site"] for r in self.rows()), [SITE_A.name, SITE_B.name])

    # -- key rotation: several keys active at once ------------------------------
    def test_key_rotation_either_key_accepted(self):
        k = self.kit
        ids = []
        for idx in (0, 1):
            oid = self.oid("rot-%d" % idx)
            k.add_order(SITE_R, oid)
            k.check_success(self, self.send(SITE_R, *k.signed_with(SITE_R, oid, idx)))
            self.assertEqual(PG.order(SITE_R.name, oid)["status"], "paid")
            ids.append(oid)
        rows = self.rows(SITE_R)
        self.assertEqual([r["order_id"] for r in rows], ids)
        self.assertTrue(rows[0]["key_id"] and rows[1]["key_id"])
        self.assertNotEqual(rows[0]["key_id"], rows[1]["key_id"],
                            "the key that verified each notification must be recorded")
        if k.provider == "stripe":
            # during a roll Stripe sends one v1 per active secret
            oid = self.oid("rot-both")
            k.add_order(SITE_R, oid)
            body = pntest.stripe_checkout_completed(oid, k.amount_minor)
            t = int(time.time())
            h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
                 "Stripe-Signature": "t=%d,v1=%s,v1=%s,v0=%s" % (
                     t, pntest.stripe_signature("whsec_someone_else", t, body),
                     pntest.stripe_signature(SITE_R.stripe_secrets[1], t, body),
                     os.urandom(32).hex())}
            k.check_success(self, self.send(SITE_R, h, body))
            self.assertEqual(PG.order(SITE_R.name, oid)["status"], "paid")

    # -- HTTP-level refusals ----------------------------------------------------
    def test_unknown_site_404(self):
        k, oid = self.kit, self.oid("nosite")
        h, body = k.paid(SITE_A, oid)
        r = self.send(SITE_A, h, body, path="/notify/%s/no-such-site" % k.provider)
        k.check_rejected(self, r, 404)
        self.assert_nothing_stored()

    def test_get_is_health(self):
        # GET/HEAD on a receiver path: health for load balancers, never orders
        for method in ("GET", "HEAD"):
            r = self.send(SITE_A, {}, b"", method=method)
            self.assertEqual(r.status, 200, r)
        r = self.send(SITE_A, {}, b"", method="GET")
        self.assertEqual(r.body, b"ok\n", r)
        self.assert_nothing_stored()

    def test_other_methods_405(self):
        k, oid = self.kit, self.oid("method")
        k.add_order(SITE_A, oid)
        h, body = k.paid(SITE_A, oid)
        for method in ("PUT", "DELETE", "PATCH"):
            r = self.send(SITE_A, h, body, method=method)
            k.check_rejected(self, r, 405)
        self.assert_nothing_stored()
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")

    def test_body_over_limit_413(self):
        k, oid = self.kit, self.oid("big")
        h, _ = k.paid(SITE_A, oid)
        body = b"x" * (MAX_BODY + 1)
        r = self.send(SITE_A, h, body)
        k.check_rejected(self, r, 413)
        self.assert_nothing_stored()

    def test_body_at_limit_is_read(self):
        # exactly max_body_bytes is allowed: a signed notification padded
        # to the limit is verified and stored, not refused as too large
        k, oid = self.kit, self.oid("limit")
        k.add_order(SITE_A, oid)
        if k.provider == "alipay":
            # the urlencoded sign varies in length: pad to a little short of
            # the limit, then fill the rest with an empty parameter (empty
            # values are not signed)
            h, body = k.paid(SITE_A, oid, attach="p" * (MAX_BODY - 2000))
            h, body = k.paid(SITE_A, oid, attach="p" * (MAX_BODY - 2000 + MAX_BODY - len(body) - 100))
            gap = MAX_BODY - len(body)
            self.assertGreater(gap, 3)
            body += b"&" + b"z" * (gap - 2) + b"="
        else:
            base = pntest.stripe_checkout_completed(oid, k.amount_minor)
            body = base[:-1] + b"," + b'"pad":"' + b"p" * (MAX_BODY - len(base) - 9) + b'"}'
            h = pntest.stripe_headers(SITE_A, body)
        self.assertEqual(len(body), MAX_BODY)
        k.check_success(self, self.send(SITE_A, h, body))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "paid")

    def test_malformed_400(self):
        h, body = self.kit.malformed(SITE_A)
        r = self.send(SITE_A, h, body)
        self.kit.check_rejected(self, r, 400)
        self.assert_nothing_stored()


class StripeOnly:
    """Scenarios that exist for Stripe only."""

    def test_stale_timestamp_rejected(self):
        self._rejected(self.kit.stale)

    def test_currency_mismatch_stored_and_acked(self):
        k, oid = self.kit, self.oid("currency")
        k.add_order(SITE_A, oid)
        r = self.send(SITE_A, *k.mismatched_currency(SITE_A, oid))
        k.check_success(self, r)
        self.assertEqual([r["outcome"] for r in self.rows()], ["amount_mismatch"])
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        self.assertIn(' reason="paid 19.99 EUR, order 19.99 USD pending; order status pending"',
                      self.request_log_line(r, oid))

    def test_refund_without_metadata_found_by_payment_intent(self):
        k, oid = self.kit, self.oid("pi-refund")
        k.add_order(SITE_A, oid)
        pi = "pi_test_%s" % os.urandom(6).hex()
        body = pntest.stripe_checkout_completed(oid, k.amount_minor, payment_intent=pi)
        k.check_success(self, self.send(SITE_A, pntest.stripe_headers(SITE_A, body), body))
        self.assertEqual(PG.order(SITE_A.name, oid)["psp_txn_id"], pi)
        # the charge's metadata is empty: the order is found by its PaymentIntent
        body = pntest.stripe_charge_refunded(None, k.amount_minor, 700, payment_intent=pi)
        k.check_success(self, self.send(SITE_A, pntest.stripe_headers(SITE_A, body), body))
        o = PG.order(SITE_A.name, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 700))
        rows = self.rows()
        self.assertEqual([(r["event_kind"], r["outcome"], r["order_id"]) for r in rows],
                         [("paid", "applied", oid), ("refund", "applied", oid)])

    def test_unhandled_event_type_acked(self):
        k, oid = self.kit, self.oid("ignored")
        k.add_order(SITE_A, oid)
        body = pntest.stripe_customer_created()
        k.check_success(self, self.send(SITE_A, pntest.stripe_headers(SITE_A, body), body))
        self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
        # a type paynotify has no handling for: unhandled (issue 22), listed
        # by report --unhandled, with its type
        self.assertEqual([(r["outcome"], r["event_type"]) for r in self.rows()],
                         [("unhandled", "customer.created")])


class AlipayOnly:
    """Scenarios that exist for Alipay only."""

    def test_other_merchant_stored_flagged_and_acked(self):
        k = self.kit
        for field, value in (("app_id", "2021009999999999"), ("seller_id", "2088009999999999")):
            PG.reset()
            oid = self.oid("merchant-" + field)
            k.add_order(SITE_A, oid)
            k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid, **{field: value})))
            rows = self.rows()
            self.assertEqual([r["outcome"] for r in rows], ["merchant_mismatch"], field)
            self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending", field)

    # -- currencies (issue 26): total_amount is in the signed trans_currency
    def test_cross_border_currency_pays_its_own_order_only(self):
        """A genuine 88.88 USD notification pays an 88.88 USD order and never
        an 88.88 CNY one; HKD and JPY (exponent 0) the same."""
        k = self.kit
        for cur, text, minor in (("USD", "88.88", 8888), ("HKD", "88.88", 8888),
                                 ("JPY", "8888", 8888)):
            PG.reset()
            good, cny = self.oid("cur-" + cur), self.oid("cur-cny-" + cur)
            PG.add_order(SITE_A.name, good, minor, cur)
            PG.add_order(SITE_A.name, cny, minor, "CNY")
            extra = dict(trans_currency=cur, settle_currency="USD",
                         settle_amount="11.43" if cur == "HKD" else "88.88" if cur == "USD"
                         else "57.32")
            k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, good, amount=text, **extra)))
            r = self.send(SITE_A, *k.paid(SITE_A, cny, amount=text, **extra))
            k.check_success(self, r)
            self.assertEqual(PG.order(SITE_A.name, good)["status"], "paid", cur)
            self.assertEqual(PG.order(SITE_A.name, cny)["status"], "pending", cur)
            out = {row["order_id"]: (row["outcome"], row["currency"], row["amount_minor"])
                   for row in self.rows()}
            self.assertEqual(out, {good: ("applied", cur, minor),
                                   cny: ("amount_mismatch", cur, minor)}, cur)
            shown = "88.88 %s" % cur if cur != "JPY" else "8888 JPY"
            why = "paid %s, order 88.88 CNY pending" % shown
            self.assertEqual(PG.psql("SELECT outcome_detail FROM paynotify.notifications "
                                     "WHERE order_id = %s" % pntest.q(cny)), [(why,)], cur)
            self.assertIn(' reason="%s; order status pending"' % why,
                          self.request_log_line(r, cny))

    def test_no_trans_currency_is_cny(self):
        """A domestic notification (no trans_currency) is CNY: it pays a CNY
        order and not a USD order of the same number."""
        k = self.kit
        cny, usd = self.oid("dom-cny"), self.oid("dom-usd")
        PG.add_order(SITE_A.name, cny, 8888, "CNY")
        PG.add_order(SITE_A.name, usd, 8888, "USD")
        for oid in (cny, usd):
            h, body = k.paid(SITE_A, oid)
            self.assertNotIn(b"trans_currency", body)
            k.check_success(self, self.send(SITE_A, h, body))
        self.assertEqual(PG.order(SITE_A.name, cny)["status"], "paid")
        self.assertEqual(PG.order(SITE_A.name, usd)["status"], "pending")
        out = {row["order_id"]: (row["outcome"], row["currency"]) for row in self.rows()}
        self.assertEqual(out, {cny: ("applied", "CNY"), usd: ("amount_mismatch", "CNY")})

    def test_malformed_trans_currency_flagged_never_guessed(self):
        k = self.kit
        for bad in ("usd", "US", "USDX", "XQQ", "8 4"):
            PG.reset()
            oid = self.oid("badcur")
            PG.add_order(SITE_A.name, oid, 8888, "USD")
            k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid, trans_currency=bad)))
            rows = self.rows()
            self.assertEqual([(r["outcome"], r["currency"], r["amount_minor"]) for r in rows],
                             [("amount_mismatch", None, None)], bad)
            self.assertEqual(PG.psql("SELECT outcome_detail FROM paynotify.notifications "
                                     "WHERE id = %d" % rows[0]["id"]),
                             [('trans_currency "%s": not an ISO 4217 currency code as '
                               'Alipay writes them' % bad,)], bad)
            self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending", bad)

    def test_cross_border_refund_in_trans_currency(self):
        """refund_fee is in trans_currency too: a USD refund of a USD order."""
        k = self.kit
        oid = self.oid("usd-refund")
        PG.add_order(SITE_A.name, oid, 8888, "USD")
        k.check_success(self, self.send(SITE_A, *k.paid(SITE_A, oid, trans_currency="USD")))
        k.check_success(self, self.send(SITE_A, *k.paid(
            SITE_A, oid, trans_currency="USD", out_biz_no="RF-USD-1", refund_fee="10.00",
            gmt_refund="2024-05-21 09:00:00.123")))
        o = PG.order(SITE_A.name, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 1000))


class StartupRefusals(unittest.TestCase):
    """A bad configuration is refused: a CGI request gets the provider's
    failure form (5xx, so the provider retries) and a FastCGI worker exits at
    start-up instead of serving; a site whose key file is unusable (not a
    loose secret: that is always fatal) is disabled alone."""

    def setUp(self):
        PG.reset()

    def bad_configs(self):
        # a secret file readable by group
        cfg = pntest.write_config(PG)
        secret = os.path.join(cfg.dir, "secrets", "shop-a-stripe-whsec")
        os.chmod(secret, 0o640)
        yield "group-readable secret", cfg.path, "shop-a-stripe-whsec"
        # a config file that does not exist
        yield "missing config", os.path.join(cfg.dir, "nonexistent.ini"), "nonexistent.ini"

    def test_cgi_answers_failure_form(self):
        for what, path, needle in self.bad_configs():
            for kit in (AlipayKit(), StripeKit()):
                with self.subTest(what=what, provider=kit.provider):
                    oid = "ORD-startup-%s" % kit.provider
                    PG.reset()
                    kit.add_order(SITE_A, oid)
                    h, body = kit.paid(SITE_A, oid)
                    r = pntest.run_cgi(pntest.binary(kit.provider), "POST",
                                       "/notify/%s/%s" % (kit.provider, SITE_A.name),
                                       h, body, path)
                    self.assertTrue(r.status is not None and r.status >= 500, r)
                    if kit.provider == "alipay":
                        self.assertEqual(r.body, b"fail", r)
                    self.assertIn(needle, r.stderr, "the error must name the file")
                    self.assertEqual(PG.notifications(), [])
                    self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")

    def test_fastcgi_worker_refuses_to_start(self):
        for what, path, needle in self.bad_configs():
            with self.subTest(what=what):
                srv = pntest.FcgiServer(pntest.binary("stripe"), path, workers=1)
                try:
                    srv.start()
                except RuntimeError:
                    pass
                try:
                    srv.procs[0].wait(10)
                except Exception:
                    pass
                code = srv.procs[0].poll()
                srv.stop()
                self.assertIsNotNone(code, "a worker with a bad config must exit")
                self.assertNotEqual(code, 0)
                self.assertIn(needle, srv.log_text())

    def test_fastcgi_unusable_key_disables_only_its_site(self):
        """shop-a's Alipay key file is not a key (issue 11: one site's key must
        not make every site answer 503): shop-a gets 503 + the failure form
        and the log names the file; shop-b is served by the same worker."""
        cfg = pntest.write_config(PG)
        for name in os.listdir(os.path.join(cfg.dir, "keys")):
            if name.startswith("shop-a-alipay"):
                with open(os.path.join(cfg.dir, "keys", name), "w") as f:
                    f.write("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n")
        kit = AlipayKit()
        srv = pntest.FcgiServer(pntest.binary("alipay"), cfg.path, workers=1).start()
        try:
            for site, status in ((SITE_A, 503), (SITE_B, 200)):
                oid = "ORD-isolated-%s" % site.name
                kit.add_order(site, oid)
                h, body = kit.paid(site, oid)
                r = srv.request("POST", "/notify/alipay/%s" % site.name, h, body)
                self.assertEqual(r.status, status, r)
                self.assertEqual(r.body, b"fail" if status == 503 else b"success", r)
                self.assertEqual(PG.order(site.name, oid)["status"],
                                 "pending" if status == 503 else "paid")
            self.assertIn("site shop-a is disabled", srv.log_text())
            self.assertIn("shop-a-alipay", srv.log_text())
        finally:
            srv.stop()


class AlipayCgi(AlipayOnly, CoreScenarios, unittest.TestCase):
    kit = AlipayKit()
    transport = "cgi"


class AlipayFastCgi(AlipayOnly, CoreScenarios, unittest.TestCase):
    kit = AlipayKit()
    transport = "fcgi"


class StripeCgi(StripeOnly, CoreScenarios, unittest.TestCase):
    kit = StripeKit()
    transport = "cgi"


class StripeFastCgi(StripeOnly, CoreScenarios, unittest.TestCase):
    kit = StripeKit()
    transport = "fcgi"


if __name__ == "__main__":
    unittest.main()

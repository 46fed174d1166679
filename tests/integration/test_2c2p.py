# test_2c2p.py: paynotify-2c2p end to end against a real (throwaway)
# PostgreSQL, every scenario run as CGI (env + stdin) and over FastCGI
# (worker processes on a listening unix socket):
#   PGW v4 ({"payload":"<JWT>"}, HS256 with the secret's ASCII bytes):
#   - pending (0001) then paid (0000): two rows, pending -> paid
#   - paid delivered twice: one transition, deliveries = 2, 200 both times
#   - paid then a late pending: the order stays paid
#   - declined (4051) -> failed; a later 0000 still pays it
#   - amount as a JSON number (19.99) stored exactly as 1999
#   - another merchantID: stored merchant_mismatch, 200, order untouched
#   - amount mismatch / unknown order: stored with that outcome, 200
#   - alg none, tampered payload, wrong key: 400 JSON error, nothing stored
#   - malformed body / no payload member: 400, nothing stored
#   - (concurrent duplicates: test_concurrency.py, every provider)
#   - database stopped: 503, nothing stored; the same request then succeeds
#   Legacy Redirect API site (2c2p.api = redirect, form + hash_value):
#   - a card form (transaction_ref + approval_code + eci splits several
#     ways): stored pending_confirmation, no transaction, order unchanged,
#     its retry counted (the confirmation by paymentInquiry:
#     test_query.TestTwoC2PLegacyConfirmation); a form with one split:
#     applied with its transaction; changed amount rejected with 400
# The ack is 200 {"status":"received"} (2C2P's own sample handler).
# FastCGI workers must survive every test (a crash fails the test).

import json
import os
import shutil
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

PG = None
CFG = None
FCGI_WORKERS = 3
SITE = "shop-2c2p"
LEGACY_SITE = "shop-2c2p-legacy"
MERCHANT = "JT01"
# the public JT01 sandbox secret 2C2P publishes (agent-skills POWER.md)
KEY = "ECC4E54DBA738857B84A7EBC6B5DC7187B8DA68750E88AB53AAA41F548D6F2D9"
OTHER_KEY = "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
LEGACY_KEY = "TESTSECRET"
JSON_TYPE = "application/json; charset=utf-8"
FORM_TYPE = "application/x-www-form-urlencoded"


def write_config(cluster):
    """A config with two 2C2P sites; the v4 secret file holds a decoy key
    first (rotation)."""
    return pntest.write_site_config(cluster, [
        "[site %s]" % SITE,
        "2c2p.merchant_id = %s" % MERCHANT,
        "2c2p.secret_key_file = 2c2p.key",
        "",
        "[site %s]" % LEGACY_SITE,
        "2c2p.merchant_id = %s" % MERCHANT,
        "2c2p.secret_key_file = 2c2p-legacy.key",
        "2c2p.api = redirect",
    ], secrets=[("2c2p.key", OTHER_KEY + "\n" + KEY + "\n"),
                ("2c2p-legacy.key", LEGACY_KEY + "\n")], prefix="pntest-2c2p-cfg.")


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = write_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# Signers


b64u = pnsign.b64u


def jwt_sign(payload, key=KEY, header=pnsign.HS256_HEADER):
    return pnsign.jwt_hs256(key, payload, header)


_seq = [0]


def notification(oid, resp_code="0000", amount='"19.99"', merchant=MERCHANT, tran_ref=None,
                 key=KEY, header=None):
    """A v4 backend notification body; amount is the JSON text to embed."""
    _seq[0] += 1
    fields = [("merchantID", merchant), ("invoiceNo", oid), ("accountNo", "411111XXXXXX1111"),
              ("amount", "@AMOUNT@"), ("currencyCode", "SGD"),
              ("tranRef", tran_ref or "T%d%04d" % (os.getpid(), _seq[0])),
              ("referenceNo", "R1"), ("transactionDateTime", "20240101120000"),
              ("agentCode", "OCBC"), ("channelCode", "VI"), ("respCode", resp_code),
              ("respDesc", "x")]
    text = json.dumps(dict(fields), separators=(",", ":")).replace('"@AMOUNT@"', amount)
    token = jwt_sign(text.encode(), key, header or pnsign.HS256_HEADER)
    return pnsign.jwt_body(token, compact=False)


def legacy_notification(oid, amount="000000001999", status="000", sign_amount=None,
                        tref=None, approval="123456", eci="05"):
    tref = tref if tref is not None else "L" + "".join(c for c in oid if c.isalnum())[-20:]
    p = [("version", "7.0"), ("request_timestamp", "2024-01-01 12:00:00"),
         ("merchant_id", MERCHANT), ("order_id", oid), ("invoice_no", ""), ("currency", "702"),
         ("amount", sign_amount or amount), ("transaction_ref", tref),
         ("approval_code", approval), ("eci", eci),
         ("transaction_datetime", "2024-01-01 12:00:05"), ("payment_channel", "001"),
         ("payment_status", status), ("channel_response_code", "00"),
         ("channel_response_desc", "success"), ("masked_pan", "411111XXXXXX1111")]
    hv = pnsign.legacy_hash(p, LEGACY_KEY)
    p = [(k, amount if k == "amount" else v) for k, v in p]
    return pnsign.legacy_body(p, LEGACY_KEY, hash_value=hv)


# ---------------------------------------------------------------------------


class Scenarios(pntest.ReceiverScenarios):
    receiver = "2c2p"
    workers = FCGI_WORKERS

    @staticmethod
    def env():
        return PG, CFG

    # -- helpers ----------------------------------------------------------
    def send(self, body, site=SITE, ctype=JSON_TYPE, method="POST"):
        path = "/notify/2c2p/%s" % site
        headers = {"Content-Type": ctype}
        if self.transport == "cgi":
            return pntest.run_cgi(self.binary, method, path, headers, body, CFG)
        return self.server.request(method, path, headers, body)

    def oid(self, tag):
        return "INV-%s-%s" % (self.transport, tag)

    def add_order(self, oid, amount_minor=1999, site=SITE):
        PG.add_order(site, oid, amount_minor, "SGD")

    def rows(self):
        return PG.notifications("provider = '2c2p'")

    def status(self, oid, site=SITE):
        return PG.order(site, oid)["status"]

    def ok(self, r):
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b'{"status":"received"}', r)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r)

    def rejected(self, r, status=400):
        self.assertEqual(r.status, status, r)
        self.assertIn("error", json.loads(r.body.decode()), r)
        self.assertEqual(self.rows(), [], "a rejected notification must not be stored")

    # -- PGW v4 -----------------------------------------------------------
    def test_pending_then_paid(self):
        oid = self.oid("pend")
        self.add_order(oid)
        self.ok(self.send(notification(oid, "0001", tran_ref="TR1")))
        self.assertEqual(self.status(oid), "pending")
        body = notification(oid, "0000", tran_ref="TR1")
        self.ok(self.send(body))
        o = PG.order(SITE, oid)
        self.assertEqual((o["status"], o["psp"], o["psp_txn_id"]), ("paid", "2c2p", "TR1"))
        rows = self.rows()
        self.assertEqual([(r["dedup_key"], r["event_kind"], r["outcome"]) for r in rows],
                         [(oid + ":0001:TR1", "pending", "ignored"),
                          (oid + ":0000:TR1", "paid", "applied")])
        self.assertEqual(rows[1]["raw_body"], body)
        self.assertEqual((rows[1]["amount_minor"], rows[1]["currency"]), (1999, "SGD"))
        # the secret file holds two keys: the second one verified
        self.assertEqual(rows[1]["key_id"], pntest.key_id("2c2p.key", KEY))

    def test_paid_twice_one_transition(self):
        oid = self.oid("twice")
        self.add_order(oid)
        body = notification(oid)
        self.ok(self.send(body))
        before = PG.psql("SELECT status, paid_at, updated_at FROM paynotify.orders "
                         "WHERE order_id = %s" % pntest.q(oid))
        time.sleep(0.05)
        self.ok(self.send(body))
        after = PG.psql("SELECT status, paid_at, updated_at FROM paynotify.orders "
                        "WHERE order_id = %s" % pntest.q(oid))
        self.assertEqual(before, after)
        rows = self.rows()
        self.assertEqual([(r["outcome"], r["deliveries"]) for r in rows], [("applied", 2)])

    def test_paid_then_late_pending_stays_paid(self):
        oid = self.oid("late")
        self.add_order(oid)
        self.ok(self.send(notification(oid, "0000", tran_ref="TR2")))
        self.ok(self.send(notification(oid, "0001", tran_ref="TR2")))
        self.ok(self.send(notification(oid, "4051", tran_ref="TR3")))
        self.ok(self.send(notification(oid, "0003", tran_ref="TR4")))
        self.assertEqual(self.status(oid), "paid")
        self.assertEqual(len(self.rows()), 4)

    def test_declined_then_paid(self):
        oid = self.oid("decl")
        self.add_order(oid)
        self.ok(self.send(notification(oid, "4051", tran_ref="TR5")))
        self.assertEqual(self.status(oid), "failed")
        self.assertEqual([(r["event_kind"], r["outcome"]) for r in self.rows()],
                         [("failed", "applied")])
        # the buyer retries with another card on the same invoice
        self.ok(self.send(notification(oid, "0000", tran_ref="TR6")))
        self.assertEqual(self.status(oid), "paid")

    def test_cancelled_closes(self):
        oid = self.oid("cancel")
        self.add_order(oid)
        self.ok(self.send(notification(oid, "0003")))
        self.assertEqual(self.status(oid), "closed")

    def test_amount_number_exact(self):
        oid = self.oid("num")
        self.add_order(oid)
        self.ok(self.send(notification(oid, amount="19.99")))
        self.assertEqual(self.status(oid), "paid")
        self.assertEqual(self.rows()[0]["amount_minor"], 1999)

    def test_amount_mismatch_flagged(self):
        oid = self.oid("amt")
        self.add_order(oid)
        self.ok(self.send(notification(oid, amount="19.98")))
        self.assertEqual([r["outcome"] for r in self.rows()], ["amount_mismatch"])
        self.assertEqual(self.status(oid), "pending")
        # an amount that cannot be SGD is flagged before the order is looked at
        PG.reset()
        self.add_order(oid)
        self.ok(self.send(notification(oid, amount="19.995")))
        self.assertEqual([r["outcome"] for r in self.rows()], ["amount_mismatch"])
        self.assertEqual(self.status(oid), "pending")

    def test_unknown_order(self):
        oid = self.oid("unknown")
        self.ok(self.send(notification(oid)))
        self.assertEqual([(r["order_id"], r["outcome"]) for r in self.rows()],
                         [(oid, "unknown_order")])

    def test_wrong_merchant_flagged(self):
        oid = self.oid("merchant")
        self.add_order(oid)
        self.ok(self.send(notification(oid, merchant="JT02")))
        self.assertEqual([r["outcome"] for r in self.rows()], ["merchant_mismatch"])
        self.assertEqual(self.status(oid), "pending")

    def test_alg_none_rejected(self):
        oid = self.oid("none")
        self.add_order(oid)
        body = json.loads(notification(oid))
        h, p, _ = body["payload"].split(".")
        for token in (b64u(b'{"alg":"none","typ":"JWT"}') + "." + p + ".",
                      jwt_sign(pnsign.b64u_decode(p),
                               header=b'{"alg":"none"}')):
            self.rejected(self.send(json.dumps({"payload": token}).encode()))
        self.assertEqual(self.status(oid), "pending")

    def test_tampered_payload_rejected(self):
        oid = self.oid("tamper")
        self.add_order(oid, 1)
        body = json.loads(notification(oid))
        h, p, s = body["payload"].split(".")
        claims = pnsign.b64u_decode(p).replace(b'"19.99"', b'"0.01"')
        forged = h + "." + b64u(claims) + "." + s
        self.rejected(self.send(json.dumps({"payload": forged}).encode()))
        self.assertEqual(self.status(oid), "pending")

    def test_wrong_key_rejected(self):
        oid = self.oid("key")
        self.add_order(oid)
        self.rejected(self.send(notification(oid, key="not-the-merchant-key")))
        # the hex-decoded form of the right key is wrong too
        self.rejected(self.send(notification(oid, key=bytes.fromhex(KEY).decode("latin-1"))))

    def test_malformed_400(self):
        self.rejected(self.send(b"payload=eyJ"))
        self.rejected(self.send(b'{"jwt":"a.b.c"}'))
        self.rejected(self.send(b'{"payload":"a.b"}'))

    def test_put_405_unknown_site_404(self):
        r = self.send(b"", method="PUT")
        self.assertEqual(r.status, 405, r)
        r = self.send(notification(self.oid("nosite")), site="no-such-site")
        self.assertEqual(r.status, 404, r)
        self.assertEqual(self.rows(), [])

    def test_database_down_then_back(self):
        oid = self.oid("dbdown")
        self.add_order(oid)
        body = notification(oid)
        PG.stop()
        try:
            r = self.send(body)
            self.assertEqual(r.status, 503, r)
            self.assertIn("error", json.loads(r.body.decode()))
        finally:
            PG.start()
        self.assertEqual(self.rows(), [])
        self.assertEqual(self.status(oid), "pending")
        if self.transport == "fcgi":
            # a worker whose connection broke reconnects: retry until each
            # worker has answered once (the first answer may still be 503)
            for _ in range(FCGI_WORKERS * 2):
                r = self.send(body)
                if r.status == 200:
                    break
        self.ok(self.send(body))
        self.assertEqual(self.status(oid), "paid")

    # -- legacy Redirect API ---------------------------------------------
    def test_legacy_paid_card_form_waits_for_confirmation(self):
        oid = self.oid("legacy")
        self.add_order(oid, site=LEGACY_SITE)
        body = legacy_notification(oid)
        self.ok(self.send(body, site=LEGACY_SITE, ctype=FORM_TYPE))
        self.assertEqual(self.status(oid, LEGACY_SITE), "pending")
        rows = self.rows()
        self.assertEqual([(r["dedup_key"], r["outcome"], r["amount_minor"], r["currency"],
                           r["psp_txn_id"]) for r in rows],
                         [("!pending_confirmation:" + oid + ":000:"
                           + urllib.parse.parse_qs(body.decode())["hash_value"][0],
                           "pending_confirmation", 1999, "SGD", None)])
        self.ok(self.send(body, site=LEGACY_SITE, ctype=FORM_TYPE))
        self.assertEqual(self.rows()[0]["deliveries"], 2)
        self.assertEqual(self.status(oid, LEGACY_SITE), "pending")

    def test_legacy_paid_one_split_applied(self):
        oid = self.oid("legacy1")
        self.add_order(oid, site=LEGACY_SITE)
        body = legacy_notification(oid, tref="A1B2C", approval="", eci="")
        self.ok(self.send(body, site=LEGACY_SITE, ctype=FORM_TYPE))
        self.assertEqual(self.status(oid, LEGACY_SITE), "paid")
        self.assertEqual([(r["outcome"], r["psp_txn_id"]) for r in self.rows()],
                         [("applied", "A1B2C")])
        self.ok(self.send(body, site=LEGACY_SITE, ctype=FORM_TYPE))
        self.assertEqual(self.rows()[0]["deliveries"], 2)

    def test_legacy_changed_amount_rejected(self):
        oid = self.oid("legacy-bad")
        self.add_order(oid, 1, site=LEGACY_SITE)
        body = legacy_notification(oid, amount="000000000001", sign_amount="000000001999")
        self.rejected(self.send(body, site=LEGACY_SITE, ctype=FORM_TYPE))
        self.assertEqual(self.status(oid, LEGACY_SITE), "pending")

    def test_legacy_body_on_jwt_site_rejected(self):
        oid = self.oid("legacy-on-v4")
        self.add_order(oid)
        self.rejected(self.send(legacy_notification(oid), ctype=FORM_TYPE))


class TwoC2PCgi(Scenarios, unittest.TestCase):
    transport = "cgi"


class TwoC2PFastCgi(Scenarios, unittest.TestCase):
    transport = "fcgi"


if __name__ == "__main__":
    unittest.main()

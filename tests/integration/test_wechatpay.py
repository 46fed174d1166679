# test_wechatpay.py: paynotify-wechatpay end to end against a real (throwaway)
# PostgreSQL, every scenario run as CGI (env + stdin) and over FastCGI
# (worker processes on a listening unix socket).  One site serves both API
# generations:
#   API v3 (JSON, SHA256withRSA headers, AES-256-GCM resource):
#   - paid applied once; the same delivery again: deliveries = 2, one
#     transition; the ack is 204 without a body
#   - WeChat Pay public key (PUB_KEY_ID_...) and a platform certificate
#     (by Wechatpay-Serial) both verify
#   - two partial refunds (deltas) and a duplicate: refunded_minor adds up
#     once per refund, never swallowed by the payment's key
#   - another mchid: stored merchant_mismatch, 204, order untouched
#   - forged signature, probe signature, stale timestamp, unknown serial,
#     tampered resource: 400 {"code":"FAIL",...}, nothing stored
#   - (concurrent duplicates, v3 and v2: test_concurrency.py, every provider)
#   API v2 (XML, MD5 / HMAC-SHA256 sign, AES-256-ECB refund req_info):
#   - paid (MD5) applied once, duplicate counted; HMAC-SHA256 with sign_type
#   - refund result (req_info) refunds the order; its duplicate is counted
#   - bad sign, DOCTYPE/XXE: 400 with the v2 FAIL XML, nothing stored
#   Both: database stopped -> 503 in the generation's failure form, nothing
#   stored; the same request then succeeds.
# FastCGI workers must survive every test (a crash fails the test).
# AES-GCM needs Python's `cryptography` (python3-cryptography); without it
# the tests are skipped.

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

AESGCM = pnsign.AESGCM

PG = None
CFG = None
FCGI_WORKERS = 3
SITE = "shop-wx"
MCHID = "1900000109"
APPID = "wxd678efh567hg6787"
APIV3 = "TestAPIv3Key0123456789abcdefABCD"
APIV2 = "TestAPIv2Key0123456789abcdefABCD"
PUBID = "PUB_KEY_ID_0000000000000024101100397200000006"
SERIAL_B = "0A6C1B2D4E5F60718293A4B5C6D7E8F901234567"
UNIT_KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
KEY_A = os.path.join(UNIT_KEYS, "test-a.key.pem")      # plays WeChat Pay's public-key key
KEY_B = os.path.join(UNIT_KEYS, "test-b.key.pem")      # plays the platform certificate's key
JSON_TYPE = "application/json"
XML_TYPE = "text/xml"
V2_OK = (b"<xml><return_code><![CDATA[SUCCESS]]></return_code>"
         b"<return_msg><![CDATA[OK]]></return_msg></xml>")


def write_config(cluster):
    """A config with one WeChat Pay site doing v3 (public key and a platform
    certificate) and v2."""
    return pntest.write_site_config(cluster, [
        "[site %s]" % SITE,
        "wechatpay.mchid = %s" % MCHID,
        "wechatpay.appid = %s" % APPID,
        "wechatpay.apiv3_key_file = apiv3.key",
        "wechatpay.apiv2_key_file = apiv2.key",
        "wechatpay.public_key_id = %s" % PUBID,
        "wechatpay.public_key_file = keys/wxp-pub.pem",
        "wechatpay.platform_cert_files = keys/wxp-cert.pem",
    ], secrets=[("apiv3.key", APIV3 + "\n"), ("apiv2.key", APIV2 + "\n")],
        files=[(os.path.join(UNIT_KEYS, "test-a.pub.pem"), "keys/wxp-pub.pem"),
               (os.path.join(UNIT_KEYS, "wxp-cert-b.pem"), "keys/wxp-cert.pem")],
        prefix="pntest-wx-cfg.")


def setUpModule():
    global PG, CFG
    if AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = write_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# Builders

_seq = [0]


def seq():
    _seq[0] += 1
    return "%d%05d" % (os.getpid(), _seq[0])


def v3_request(resource, event="TRANSACTION.SUCCESS", aad="transaction", key=KEY_A, serial=PUBID,
               ts=None, sig=None, apiv3=APIV3, tamper=False):
    """A signed v3 notification: (headers, body)."""
    nonce12 = ("n%011d" % _seq[0])[-12:]
    ct = pnsign.wechat_v3_encrypt(apiv3, nonce12, json.dumps(
        resource, ensure_ascii=False, separators=(",", ":")), aad, raw=True)
    if tamper:
        ct = ct[:5] + bytes([ct[5] ^ 1]) + ct[6:]
    body = pnsign.wechat_v3_envelope(pnsign.b64(ct), nonce12, event, "EV-" + seq(), aad)
    return pnsign.wechat_v3_headers(body, key, serial, ts, "N" + seq(), sig, JSON_TYPE), body


def transaction(oid, total, txn, mchid=MCHID, state="SUCCESS"):
    return {"mchid": mchid, "appid": APPID, "out_trade_no": oid, "transaction_id": txn,
            "trade_type": "JSAPI", "trade_state": state, "trade_state_desc": "支付成功",
            "bank_type": "OTHERS", "attach": "", "success_time": "2024-05-20T10:00:05+08:00",
            "payer": {"openid": "o1"},
            "amount": {"total": total, "payer_total": total, "currency": "CNY",
                       "payer_currency": "CNY"}}


def refund(oid, total, amount, txn, refund_id):
    return {"mchid": MCHID, "transaction_id": txn, "out_trade_no": oid, "refund_id": refund_id,
            "out_refund_no": "R-" + refund_id, "refund_status": "SUCCESS",
            "success_time": "2024-05-21T10:00:00+08:00", "user_received_account": "支付用户零钱",
            "amount": {"total": total, "refund": amount, "payer_total": total,
                       "payer_refund": amount}}


v2_xml = pnsign.wechat_v2_xml


def v2_payment(oid, total_fee, txn, alg=None, result="SUCCESS", key=APIV2):
    f = [("appid", APPID), ("bank_type", "CFT"), ("fee_type", "CNY"), ("mch_id", MCHID),
         ("nonce_str", "nonce" + seq()), ("openid", "o1"), ("out_trade_no", oid),
         ("result_code", result), ("return_code", "SUCCESS"), ("time_end", "20240520100005"),
         ("total_fee", str(total_fee)), ("trade_type", "JSAPI"), ("transaction_id", txn)]
    if alg is not None:
        f.append(("sign_type", alg))
    f.append(("sign", pnsign.wechat_v2_sign(f, key, alg or "MD5")))
    return v2_xml(f)


def v2_refund(oid, total_fee, refund_fee, txn, refund_id, key=APIV2):
    inner = v2_xml([("out_refund_no", "R-" + refund_id), ("out_trade_no", oid),
                    ("refund_fee", str(refund_fee)), ("refund_id", refund_id),
                    ("refund_status", "SUCCESS"), ("success_time", "2024-05-21 10:00:00"),
                    ("total_fee", str(total_fee)), ("transaction_id", txn)], root="root")
    req_info = pnsign.wechat_v2_seal(inner, key)
    return v2_xml([("return_code", "SUCCESS"), ("appid", APPID), ("mch_id", MCHID),
                   ("nonce_str", "nonce" + seq()), ("req_info", req_info)])


# ---------------------------------------------------------------------------


class Scenarios(pntest.ReceiverScenarios):
    receiver = "wechatpay"
    workers = FCGI_WORKERS

    @staticmethod
    def env():
        return PG, CFG

    # -- helpers ----------------------------------------------------------
    def send(self, headers, body, site=SITE, method="POST"):
        path = "/notify/wechatpay/%s" % site
        if self.transport == "cgi":
            return pntest.run_cgi(self.binary, method, path, headers, body, CFG)
        return self.server.request(method, path, headers, body)

    def send_v2(self, body):
        return self.send({"Content-Type": XML_TYPE}, body)

    def oid(self, tag):
        return "WX-%s-%s" % (self.transport, tag)

    def txn(self, tag):
        return "4200%s%s" % ("1" if self.transport == "cgi" else "2",
                             hashlib.sha1(tag.encode()).hexdigest()[:20])

    def add_order(self, oid, amount_minor=8888):
        PG.add_order(SITE, oid, amount_minor, "CNY")

    def rows(self):
        return PG.notifications("provider = 'wechatpay'")

    def order(self, oid):
        return PG.order(SITE, oid)

    def ok_v3(self, r):
        self.assertIn(r.status, (200, 204), r)
        self.assertEqual(r.body, b"", r)

    def ok_v2(self, r):
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, V2_OK, r)
        self.assertTrue(r.headers.get("content-type", "").startswith("text/xml"), r)

    def fail_v3(self, r, status=400):
        self.assertEqual(r.status, status, r)
        self.assertEqual(json.loads(r.body.decode())["code"], "FAIL", r)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r)

    def fail_v2(self, r, status=400):
        self.assertEqual(r.status, status, r)
        self.assertTrue(r.body.startswith(b"<xml><return_code><![CDATA[FAIL]]></return_code>"), r)

    # -- API v3 -----------------------------------------------------------
    def test_v3_paid_once_then_duplicate(self):
        oid, txn = self.oid("paid"), self.txn("paid")
        self.add_order(oid)
        headers, body = v3_request(transaction(oid, 8888, txn))
        r = self.send(headers, body)
        self.ok_v3(r)
        self.assertEqual(r.status, 204, r)
        o = self.order(oid)
        self.assertEqual((o["status"], o["psp"], o["psp_txn_id"]), ("paid", "wechatpay", txn))
        before = PG.psql("SELECT paid_at, updated_at FROM paynotify.orders WHERE order_id = %s"
                         % pntest.q(oid))
        self.ok_v3(self.send(headers, body))
        after = PG.psql("SELECT paid_at, updated_at FROM paynotify.orders WHERE order_id = %s"
                        % pntest.q(oid))
        self.assertEqual(before, after)
        rows = self.rows()
        self.assertEqual([(r["dedup_key"], r["event_kind"], r["outcome"], r["deliveries"])
                          for r in rows], [(txn + ":TRANSACTION.SUCCESS", "paid", "applied", 2)])
        self.assertEqual(rows[0]["raw_body"], body)
        self.assertEqual((rows[0]["amount_minor"], rows[0]["currency"]), (8888, "CNY"))
        self.assertEqual(rows[0]["key_id"], PUBID + "/" + pntest.key_id("apiv3.key", APIV3))
        hdrs = PG.scalar("SELECT raw_headers->>'Wechatpay-Serial' FROM paynotify.notifications")
        self.assertEqual(hdrs, PUBID)

    def test_v3_platform_certificate(self):
        oid, txn = self.oid("cert"), self.txn("cert")
        self.add_order(oid)
        self.ok_v3(self.send(*v3_request(transaction(oid, 8888, txn), key=KEY_B,
                                         serial=SERIAL_B.lower())))
        self.assertEqual(self.order(oid)["status"], "paid")
        self.assertEqual(self.rows()[0]["key_id"], SERIAL_B + "/" + pntest.key_id("apiv3.key", APIV3))

    def test_v3_refunds_not_swallowed(self):
        oid, txn = self.oid("refund"), self.txn("refund")
        self.add_order(oid)
        self.ok_v3(self.send(*v3_request(transaction(oid, 8888, txn))))
        h1, b1 = v3_request(refund(oid, 8888, 1000, txn, "5030" + seq()), "REFUND.SUCCESS", "refund")
        self.ok_v3(self.send(h1, b1))
        o = self.order(oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 1000))
        h2, b2 = v3_request(refund(oid, 8888, 500, txn, "5030" + seq()), "REFUND.SUCCESS", "refund")
        self.ok_v3(self.send(h2, b2))
        self.ok_v3(self.send(h2, b2))     # a duplicate of the second refund
        o = self.order(oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 1500))
        rows = self.rows()
        self.assertEqual([(r["event_kind"], r["outcome"], r["refund_minor"], r["deliveries"])
                          for r in rows],
                         [("paid", "applied", None, 1), ("refund", "applied", 1000, 1),
                          ("refund", "applied", 500, 2)])

    def test_v3_merchant_mismatch(self):
        oid = self.oid("mch")
        self.add_order(oid)
        self.ok_v3(self.send(*v3_request(transaction(oid, 8888, self.txn("mch"),
                                                     mchid="1900000999"))))
        self.assertEqual([r["outcome"] for r in self.rows()], ["merchant_mismatch"])
        self.assertEqual(self.order(oid)["status"], "pending")

    def test_v3_rejects_leave_no_row(self):
        oid, txn = self.oid("reject"), self.txn("reject")
        self.add_order(oid)
        res = transaction(oid, 8888, txn)
        for req in (v3_request(res, key=KEY_B),                     # forged
                    v3_request(res, sig="WECHATPAY/SIGNTEST/" + "A" * 340),  # probe
                    v3_request(res, ts=int(time.time()) - 400),      # stale
                    v3_request(res, ts=int(time.time()) + 400),      # from the future
                    v3_request(res, serial=PUBID[:-1] + "7"),        # unknown serial
                    v3_request(res, tamper=True),                    # GCM tag fails
                    v3_request(res, apiv3="OtherAPIv3Key0123456789abcdefXYZ")):
            self.fail_v3(self.send(*req))
        headers, body = v3_request(res)
        self.fail_v3(self.send(headers, body + b" "))                # body changed
        del headers["Wechatpay-Nonce"]
        self.fail_v3(self.send(headers, body))
        self.assertEqual(self.rows(), [])
        self.assertEqual(self.order(oid)["status"], "pending")

    # -- API v2 -----------------------------------------------------------
    def test_v2_paid_once_then_duplicate(self):
        oid, txn = self.oid("v2paid"), self.txn("v2paid")
        self.add_order(oid, 1)
        body = v2_payment(oid, 1, txn)
        self.ok_v2(self.send_v2(body))
        self.ok_v2(self.send_v2(body))
        self.assertEqual(self.order(oid)["status"], "paid")
        rows = self.rows()
        self.assertEqual([(r["dedup_key"], r["outcome"], r["deliveries"], r["key_id"])
                          for r in rows], [(txn + ":SUCCESS", "applied", 2, pntest.key_id("apiv2.key", APIV2))])
        self.assertEqual(rows[0]["raw_body"], body)

    def confirm(self, oid):
        """paynotify.confirm_refund(..., 'confirmed') for the order's pending refunds."""
        for r in self.rows():
            if r["outcome"] == "pending_confirmation" and r["order_id"] == oid:
                PG.psql("SELECT outcome FROM paynotify.confirm_refund(%d, %s, %s, %s, %d, %d, "
                        "'confirmed', 'confirmed in the test')"
                        % (r["id"], pntest.q(r["dedup_key"]), pntest.q(r["order_id"]),
                           pntest.q(r["psp_txn_id"]), r["amount_minor"], r["refund_minor"]))

    def test_v2_hmac_and_refund(self):
        oid, txn = self.oid("v2refund"), self.txn("v2refund")
        self.add_order(oid, 600)
        self.ok_v2(self.send_v2(v2_payment(oid, 600, txn, alg="HMAC-SHA256")))
        rid = "5000" + seq()
        body = v2_refund(oid, 600, 200, txn, rid)
        self.ok_v2(self.send_v2(body))
        self.ok_v2(self.send_v2(body))
        # req_info has no MAC: stored, acknowledged, the order waits for WeChat Pay's
        # signed refundquery answer (tests/integration/test_v2_refund_confirm.py asks
        # the stand-in through `paynotify query`; here the store's half, as query calls it)
        o = self.order(oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("paid", 0))
        self.assertEqual([r["outcome"] for r in self.rows()
                          if r["event_kind"] == "refund" and r["order_id"] == oid],
                         ["pending_confirmation"])
        self.confirm(oid)
        o = self.order(oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 200))
        self.ok_v2(self.send_v2(v2_refund(oid, 600, 400, txn, "5000" + seq())))
        self.confirm(oid)
        o = self.order(oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("refunded", 600))
        self.assertEqual([(r["dedup_key"].split(":")[0], r["event_kind"], r["deliveries"])
                          for r in self.rows()],
                         [(txn, "paid", 1), ("refund", "refund", 2), ("refund", "refund", 1)])

    def test_v2_rejects_leave_no_row(self):
        oid, txn = self.oid("v2reject"), self.txn("v2reject")
        self.add_order(oid, 1)
        self.fail_v2(self.send_v2(v2_payment(oid, 1, txn, key="wrong-key")))
        self.fail_v2(self.send_v2(v2_payment(oid, 100, txn).replace(b"<total_fee>100<",
                                                                     b"<total_fee>1<")))
        self.fail_v2(self.send_v2(b'<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY x SYSTEM '
                                  b'"file:///etc/passwd">]><xml><return_code>SUCCESS'
                                  b'</return_code><a>&x;</a></xml>'))
        self.fail_v2(self.send_v2(v2_refund(oid, 1, 1, txn, "r1", key="wrong-key")))
        self.assertEqual(self.rows(), [])
        self.assertEqual(self.order(oid)["status"], "pending")

    # -- both ---------------------------------------------------------------
    def test_put_405_unknown_site_404(self):
        r = self.send({}, b"", method="PUT")
        self.assertEqual(r.status, 405, r)
        r = self.send(*v3_request(transaction("x", 1, "t")), site="no-such-site")
        self.fail_v3(r, 404)
        self.assertEqual(self.rows(), [])

    def test_database_down_then_back(self):
        oid, txn = self.oid("dbdown"), self.txn("dbdown")
        self.add_order(oid)
        v3 = v3_request(transaction(oid, 8888, txn))
        oid2, txn2 = self.oid("dbdown2"), self.txn("dbdown2")
        self.add_order(oid2, 1)
        v2 = v2_payment(oid2, 1, txn2)
        PG.stop()
        try:
            self.fail_v3(self.send(*v3), 503)
            self.fail_v2(self.send_v2(v2), 503)
        finally:
            PG.start()
        self.assertEqual(self.rows(), [])
        if self.transport == "fcgi":
            # a worker whose connection broke reconnects: retry until each
            # worker has answered once (the first answer may still be 503)
            for _ in range(FCGI_WORKERS * 2):
                if self.send(*v3).status in (200, 204):
                    break
        self.ok_v3(self.send(*v3))
        self.ok_v2(self.send_v2(v2))
        self.assertEqual((self.order(oid)["status"], self.order(oid2)["status"]), ("paid", "paid"))


class WechatPayCgi(Scenarios, unittest.TestCase):
    transport = "cgi"


class WechatPayFastCgi(Scenarios, unittest.TestCase):
    transport = "fcgi"


if __name__ == "__main__":
    unittest.main()

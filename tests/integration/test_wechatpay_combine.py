# test_wechatpay_combine.py: WeChat Pay combine payments (合单支付) and
# events without provider ids, through paynotify-wechatpay as CGI and over
# FastCGI against a real (throwaway) PostgreSQL, every notification
# genuinely signed (and v3 encrypted) with the test keys.  Three sites of
# one installation: shop-wa and shop-wb share their WeChat Pay keys (one
# service provider, two merchant ids), shop-wc has keys of its own.
#   API v3 (resource with combine_* and sub_orders[]):
#   - 3 sub-orders across shop-wa and shop-wb, sent to shop-wa: every
#     sub-order applied to its own site's order, the envelope stored once
#     with the raw bytes (outcome combined), every sub-order row linked to
#     it (parent_id), all of it in ONE transaction (one xmin); the retry is
#     a duplicate per sub-order, nothing moves twice
#   - a sub-order for a merchant id no site has: flagged merchant_mismatch
#     (on `paynotify report`), the others still applied
#   - a sub-order of shop-wc, whose keys did not verify the notification:
#     never applied to shop-wc, flagged under the receiving site
#   - `paynotify sign --combine` makes one the receiver applies
#   API v2 (sub_order_list, HMAC-SHA256 and MD5 sign): the same three cases
#   No placeholder identities: two different genuine v2 payments without
#   transaction_id (once both "-:SUCCESS" or "otn:...") and two v3 ones:
#   both stored, flagged missing_id, listed by `paynotify report`.
# FastCGI workers must survive every test (a crash fails the test).
# AES-GCM needs Python's `cryptography` (python3-cryptography); without it
# the tests are skipped.

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

AESGCM = pnsign.AESGCM

PG = None
CFG = None
FCGI_WORKERS = 2
APPID = "wxd678efh567hg6787"
MCH_A, MCH_B, MCH_C, MCH_UNKNOWN = "1900000201", "1900000202", "1900000203", "1900000299"
APIV3 = "TestAPIv3Key0123456789abcdefABCD"
APIV2 = "TestAPIv2Key0123456789abcdefABCD"
APIV3_C = "OtherAPIv3Key123456789abcdefABCD"
APIV2_C = "OtherAPIv2Key123456789abcdefABCD"
PUBID = "PUB_KEY_ID_0000000000000024101100397200000006"
PUBID_C = "PUB_KEY_ID_0000000000000024101100397200000777"
UNIT_KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
KEY_A = os.path.join(UNIT_KEYS, "test-a.key.pem")      # plays WeChat Pay's key for a and b
KEY_B = os.path.join(UNIT_KEYS, "test-b.key.pem")      # plays it for c
ADMIN = os.path.join(pntest.REPO, "paynotify")
JSON_TYPE = "application/json"
XML_TYPE = "text/xml"


def site_lines(name, mchid, apiv3, apiv2, pubid, pub):
    return ["[site %s]" % name, "wechatpay.mchid = %s" % mchid, "wechatpay.appid = %s" % APPID,
            "wechatpay.apiv3_key_file = %s" % apiv3, "wechatpay.apiv2_key_file = %s" % apiv2,
            "wechatpay.public_key_id = %s" % pubid, "wechatpay.public_key_file = %s" % pub,
            "wechatpay.test_private_key_file = %s" % ("keys/test-a.key.pem" if pub.endswith("a.pem")
                                                       else "keys/test-b.key.pem"), ""]


def write_config(cluster):
    return pntest.write_site_config(
        cluster,
        site_lines("shop-wa", MCH_A, "apiv3.key", "apiv2.key", PUBID, "keys/pub-a.pem")
        + site_lines("shop-wb", MCH_B, "apiv3.key", "apiv2.key", PUBID, "keys/pub-a.pem")
        + site_lines("shop-wc", MCH_C, "apiv3-c.key", "apiv2-c.key", PUBID_C, "keys/pub-b.pem"),
        secrets=[("apiv3.key", APIV3 + "\n"), ("apiv2.key", APIV2 + "\n"),
                 ("apiv3-c.key", APIV3_C + "\n"), ("apiv2-c.key", APIV2_C + "\n")],
        files=[(os.path.join(UNIT_KEYS, "test-a.pub.pem"), "keys/pub-a.pem"),
               (os.path.join(UNIT_KEYS, "test-b.pub.pem"), "keys/pub-b.pem"),
               (KEY_A, "keys/test-a.key.pem"), (KEY_B, "keys/test-b.key.pem")],
        prefix="pntest-wxc-cfg.")


def setUpModule():
    global PG, CFG
    if AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = write_config(PG)
    for f in ("keys/test-a.key.pem", "keys/test-b.key.pem"):
        os.chmod(os.path.join(os.path.dirname(CFG), f), 0o600)


def tearDownModule():
    if PG is not None:
        PG.destroy()


_seq = [0]


def seq():
    _seq[0] += 1
    return "%d%05d" % (os.getpid(), _seq[0])


def v3_request(resource, key=KEY_A, serial=PUBID, apiv3=APIV3, eid=None):
    """A signed v3 TRANSACTION.SUCCESS notification: (headers, body)."""
    nonce12 = ("c%011d" % int(seq()))[-12:]
    ct = pnsign.wechat_v3_encrypt(apiv3, nonce12, json.dumps(
        resource, ensure_ascii=False, separators=(",", ":")), "transaction")
    body = pnsign.wechat_v3_envelope(ct, nonce12, "TRANSACTION.SUCCESS",
                                     eid or "EV-" + seq(), "transaction")
    return pnsign.wechat_v3_headers(body, key, serial, None, "N" + seq(), None, JSON_TYPE), body


def v3_sub(mchid, oid, txn, total, state="SUCCESS"):
    """One sub_orders[] entry as WeChat Pay's combine notification has it."""
    return {"mchid": mchid, "trade_type": "JSAPI", "trade_state": state, "bank_type": "OTHERS",
            "attach": "", "success_time": "2024-05-20T10:00:05+08:00", "transaction_id": txn,
            "out_trade_no": oid, "amount": {"total_amount": total, "payer_amount": total,
                                            "currency": "CNY", "payer_currency": "CNY"}}


def v3_combine(cotn, subs, mchid=MCH_A):
    return {"combine_appid": APPID, "combine_mchid": mchid, "combine_out_trade_no": cotn,
            "combine_payer_info": {"openid": "o-1"}, "scene_info": {"device_id": "POS1"},
            "sub_orders": subs}


def v2_combine(cotn, subs, key=APIV2, alg="HMAC-SHA256"):
    """A signed v2 combine payment result; subs: (mch_id, oid, txn, total_fee)."""
    lst = json.dumps({"order_num": len(subs), "order_list": [
        {"appid": APPID, "mch_id": m, "openid": "o-1", "total_fee": fee, "cash_fee": fee,
         "transaction_id": txn, "out_trade_no": oid, "attach": "", "time_end": "20240520100005"}
        for m, oid, txn, fee in subs]}, separators=(",", ":"))
    f = [("return_code", "SUCCESS"), ("combine_appid", APPID), ("combine_mch_id", MCH_A),
         ("nonce_str", "nonce" + seq()), ("combine_out_trade_no", cotn), ("trade_type", "JSAPI"),
         ("result_code", "SUCCESS"), ("sign_type", alg), ("sub_order_list", lst)]
    return pnsign.wechat_v2_xml(f + [("sign", pnsign.wechat_v2_sign(f, key, alg))])


def v2_payment_without_ids(total_fee, otn=None):
    f = [("appid", APPID), ("bank_type", "CFT"), ("fee_type", "CNY"), ("mch_id", MCH_A),
         ("nonce_str", "nonce" + seq()), ("openid", "o1"), ("result_code", "SUCCESS"),
         ("return_code", "SUCCESS"), ("time_end", "20240520100005"),
         ("total_fee", str(total_fee)), ("trade_type", "JSAPI")]
    if otn:
        f.append(("out_trade_no", otn))
    return pnsign.wechat_v2_signed_xml(f, APIV2)


def admin(*args):
    return subprocess.run([ADMIN] + list(args), env=pntest.clean_env({"PAYNOTIFY_CONFIG": CFG}),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                          universal_newlines=True)


class Scenarios(pntest.ReceiverScenarios):
    receiver = "wechatpay"
    workers = FCGI_WORKERS

    @staticmethod
    def env():
        return PG, CFG

    def send(self, headers, body, site="shop-wa"):
        path = "/notify/wechatpay/%s" % site
        if self.transport == "cgi":
            return pntest.run_cgi(self.binary, "POST", path, headers, body, CFG)
        return self.server.request("POST", path, headers, body)

    def send_v2(self, body, site="shop-wa"):
        return self.send({"Content-Type": XML_TYPE}, body, site)

    def ok_v3(self, r):
        self.assertIn(r.status, (200, 204), r)

    def ok_v2(self, r):
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"<return_code><![CDATA[SUCCESS]]></return_code>", r.body, r)

    def tag(self, t):
        return "%s-%s-%s" % (t, self.transport, seq())

    def txn(self):
        return "4200%s" % seq().rjust(24, "7")

    def rows(self, where="true"):
        return PG.psql("SELECT id, site, dedup_key, event_kind, order_id, outcome, deliveries, "
                       "parent_id, length(raw_body), xmin::text FROM paynotify.notifications "
                       "WHERE %s ORDER BY id" % where)

    def status(self, site, oid):
        return PG.order(site, oid)["status"]

    def check_combined(self, body, expect):
        """The envelope row holds body; each sub-order row (site, order, outcome)
        in expect links to it; all written by one transaction."""
        env = PG.psql("SELECT id, site, outcome, xmin::text, event_kind FROM "
                      "paynotify.notifications WHERE raw_body = '\\x%s'::bytea" % body.hex())
        self.assertEqual(len(env), 1, env)
        pid, site, outcome, xmin, kind = env[0]
        self.assertEqual((site, outcome, kind), ("shop-wa", "combined", "ignored"))
        subs = PG.psql("SELECT site, order_id, outcome, length(raw_body), xmin::text "
                       "FROM paynotify.notifications WHERE parent_id = %s ORDER BY id" % pid)
        self.assertEqual([(s, o, out) for s, o, out, _, _ in subs], expect)
        self.assertTrue(all(n == "0" for _, _, _, n, _ in subs), subs)   # bytes stored once
        return pid, xmin, {x for _, _, _, _, x in subs}

    # -- API v3 -----------------------------------------------------------
    def test_v3_three_sub_orders_two_sites_one_commit_then_duplicate(self):
        a1, a2, b1 = self.tag("WA1"), self.tag("WA2"), self.tag("WB1")
        PG.add_order("shop-wa", a1, 1000, "CNY")
        PG.add_order("shop-wa", a2, 2000, "CNY")
        PG.add_order("shop-wb", b1, 3000, "CNY")
        t1, t2, t3 = self.txn(), self.txn(), self.txn()
        headers, body = v3_request(v3_combine(self.tag("C"), [
            v3_sub(MCH_A, a1, t1, 1000), v3_sub(MCH_B, b1, t3, 3000), v3_sub(MCH_A, a2, t2, 2000)]))
        self.ok_v3(self.send(headers, body))
        self.assertEqual([self.status("shop-wa", a1), self.status("shop-wb", b1),
                          self.status("shop-wa", a2)], ["paid"] * 3)
        self.assertEqual(PG.order("shop-wb", b1)["psp_txn_id"], t3)
        pid, xmin, sub_xmins = self.check_combined(body, [
            ("shop-wa", a1, "applied"), ("shop-wb", b1, "applied"), ("shop-wa", a2, "applied")])
        # one transaction: the envelope, every sub-order row and every order
        orders = PG.psql("SELECT xmin::text FROM paynotify.orders WHERE order_id IN (%s, %s, %s)"
                         % (pntest.q(a1), pntest.q(a2), pntest.q(b1)))
        self.assertEqual(sub_xmins | {x for (x,) in orders}, {xmin})
        keys = PG.psql("SELECT dedup_key FROM paynotify.notifications WHERE parent_id = %s "
                       "ORDER BY id" % pid)
        self.assertEqual([k for (k,) in keys], [t + ":TRANSACTION.SUCCESS" for t in (t1, t3, t2)])
        # the retry (same bytes): a duplicate per sub-order, nothing moves again
        before = PG.psql("SELECT order_id, updated_at FROM paynotify.orders ORDER BY order_id")
        self.ok_v3(self.send(headers, body))
        self.assertEqual(PG.psql("SELECT order_id, updated_at FROM paynotify.orders "
                                 "ORDER BY order_id"), before)
        self.assertEqual(PG.psql("SELECT outcome, deliveries FROM paynotify.notifications "
                                 "ORDER BY id"),
                         [("combined", "2")] + [("applied", "2")] * 3)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "3")
        self.assertEqual(admin("report", "--site", "shop-wb").returncode, 0)

    def test_v3_unknown_merchant_flagged_others_applied(self):
        a1, b1, x1 = self.tag("WA1"), self.tag("WB1"), self.tag("X1")
        PG.add_order("shop-wa", a1, 1000, "CNY")
        PG.add_order("shop-wb", b1, 3000, "CNY")
        headers, body = v3_request(v3_combine(self.tag("C"), [
            v3_sub(MCH_A, a1, self.txn(), 1000), v3_sub(MCH_UNKNOWN, x1, self.txn(), 500),
            v3_sub(MCH_B, b1, self.txn(), 3000)]))
        self.ok_v3(self.send(headers, body))
        self.assertEqual((self.status("shop-wa", a1), self.status("shop-wb", b1)),
                         ("paid", "paid"))
        self.check_combined(body, [("shop-wa", a1, "applied"),
                                   ("shop-wa", x1, "merchant_mismatch"),
                                   ("shop-wb", b1, "applied")])
        p = admin("report", "--site", "shop-wa", "--format", "csv")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("merchant_mismatch", p.stdout)
        self.assertIn(x1, p.stdout)
        self.assertIn(MCH_UNKNOWN, p.stdout)
        self.assertNotIn("combined", p.stdout)
        self.ok_v3(self.send(headers, body))    # the retry: the flagged one counted too
        self.assertEqual(PG.psql("SELECT outcome, deliveries FROM paynotify.notifications "
                                 "ORDER BY id"),
                         [("combined", "2"), ("applied", "2"), ("merchant_mismatch", "2"),
                          ("applied", "2")])

    def test_v3_site_whose_keys_did_not_verify_gets_nothing(self):
        a1, c1 = self.tag("WA1"), self.tag("WC1")
        PG.add_order("shop-wa", a1, 1000, "CNY")
        PG.add_order("shop-wc", c1, 700, "CNY")
        headers, body = v3_request(v3_combine(self.tag("C"), [
            v3_sub(MCH_A, a1, self.txn(), 1000), v3_sub(MCH_C, c1, self.txn(), 700)]))
        self.ok_v3(self.send(headers, body))
        self.assertEqual((self.status("shop-wa", a1), self.status("shop-wc", c1)),
                         ("paid", "pending"))
        self.check_combined(body, [("shop-wa", a1, "applied"),
                                   ("shop-wa", c1, "merchant_mismatch")])
        detail = PG.scalar("SELECT outcome_detail FROM paynotify.notifications "
                           "WHERE order_id = %s" % pntest.q(c1))
        self.assertIn("site shop-wc has this merchant id", detail)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE site = 'shop-wc'"), "0")

    def test_v3_signed_by_paynotify_sign_combine(self):
        a1, b1 = self.tag("SA"), self.tag("SB")
        PG.add_order("shop-wa", a1, 1234, "CNY")
        PG.add_order("shop-wb", b1, 500, "CNY")
        for v2 in (False, True):
            if v2:
                a1, b1 = a1 + "v2", b1 + "v2"
                PG.add_order("shop-wa", a1, 1234, "CNY")
                PG.add_order("shop-wb", b1, 500, "CNY")
            p = subprocess.run([ADMIN, "sign", "wechatpay", "--site", "shop-wa", "--order", a1,
                                "--amount", "12.34", "--combine", "shop-wb:%s:5.00" % b1]
                               + (["--v2"] if v2 else []),
                               env=pntest.clean_env({"PAYNOTIFY_CONFIG": CFG}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            head, sbody = p.stdout.split(b"\n\n", 1)
            lines = head.decode().split("\n")
            hdrs = dict(line.split(": ", 1) for line in lines[1:])
            r = self.send(hdrs, sbody[:-1])
            (self.ok_v2 if v2 else self.ok_v3)(r)
            self.assertEqual((self.status("shop-wa", a1), self.status("shop-wb", b1)),
                             ("paid", "paid"), v2)
        self.assertEqual(admin("sign", "stripe", "--site", "shop-wa", "--order", "x",
                               "--amount", "1", "--combine", "shop-wb:y:1").returncode, 64)

    def test_replay_reverifies_every_part_from_the_envelope(self):
        a1, b1, x1 = self.tag("RA1"), self.tag("RB1"), self.tag("RX1")
        PG.add_order("shop-wa", a1, 1000, "CNY")
        PG.add_order("shop-wb", b1, 3000, "CNY")
        headers, body = v3_request(v3_combine(self.tag("C"), [
            v3_sub(MCH_A, a1, self.txn(), 1000), v3_sub(MCH_B, b1, self.txn(), 3000),
            v3_sub(MCH_UNKNOWN, x1, self.txn(), 5)]))
        self.ok_v3(self.send(headers, body))
        self.ok_v2(self.send_v2(v2_combine(self.tag("C"), [(MCH_B, self.tag("RB2"), self.txn(),
                                                             7)])))
        p = admin("replay", "--dry-run", "--format", "json")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        rows = json.loads(p.stdout)
        self.assertEqual(len(rows), 6, rows)
        self.assertEqual([r["verified"] for r in rows], ["yes"] * 6, rows)
        self.assertEqual([(r["site"], r["recorded"], r["now"]) for r in rows],
                         [("shop-wa", "combined", "combined"), ("shop-wa", "applied", "applied"),
                          ("shop-wb", "applied", "applied"),
                          ("shop-wa", "merchant_mismatch", "merchant_mismatch"),
                          ("shop-wa", "combined", "combined"),
                          ("shop-wb", "unknown_order", "unknown_order")])
        # a site added since for the unknown merchant: replay never applies the
        # sub-order stored under shop-wa to it (nor to shop-wa), a human moves it
        PG.add_order("shop-wa", x1, 5, "CNY")
        cfg2 = os.path.join(os.path.dirname(CFG), "with-wd.ini")
        with open(CFG) as f, open(cfg2, "w") as g:
            g.write(f.read() + "\n" + "\n".join(site_lines(
                "shop-wd", MCH_UNKNOWN, "apiv3.key", "apiv2.key", PUBID, "keys/pub-a.pem")))
        p = subprocess.run([ADMIN, "-c", cfg2, "replay", "--apply", "--outcome",
                            "merchant_mismatch", "--format", "json"], env=pntest.clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                           universal_newlines=True)
        rows = json.loads(p.stdout)
        self.assertEqual([(r["verified"], r["now"]) for r in rows],
                         [("yes", "merchant_mismatch")], rows)
        self.assertIn("now belongs to site shop-wd", rows[0]["note"])
        self.assertEqual(self.status("shop-wa", x1), "pending")

    # -- API v2 -----------------------------------------------------------
    def test_v2_combine_two_sites_unknown_flagged_then_duplicate(self):
        a1, b1, x1 = self.tag("VA1"), self.tag("VB1"), self.tag("VX1")
        PG.add_order("shop-wa", a1, 1000, "CNY")
        PG.add_order("shop-wb", b1, 3000, "CNY")
        t1, t2 = self.txn(), self.txn()
        body = v2_combine(self.tag("C"), [(MCH_A, a1, t1, 1000), (MCH_B, b1, t2, 3000),
                                          (MCH_UNKNOWN, x1, self.txn(), 1)])
        self.ok_v2(self.send_v2(body))
        self.assertEqual((self.status("shop-wa", a1), self.status("shop-wb", b1)),
                         ("paid", "paid"))
        _, xmin, sub_xmins = self.check_combined(body, [
            ("shop-wa", a1, "applied"), ("shop-wb", b1, "applied"),
            ("shop-wa", x1, "merchant_mismatch")])
        self.assertEqual(sub_xmins, {xmin})
        self.assertEqual(PG.scalar("SELECT dedup_key FROM paynotify.notifications WHERE "
                                   "order_id = %s" % pntest.q(b1)), t2 + ":SUCCESS")
        self.ok_v2(self.send_v2(body))
        self.assertEqual(PG.psql("SELECT outcome, deliveries FROM paynotify.notifications "
                                 "ORDER BY id"),
                         [("combined", "2"), ("applied", "2"), ("applied", "2"),
                          ("merchant_mismatch", "2")])
        # a second, different combine payment is never taken for a retry of the first
        a2 = self.tag("VA2")
        PG.add_order("shop-wa", a2, 10, "CNY")
        self.ok_v2(self.send_v2(v2_combine(self.tag("C"), [(MCH_A, a2, self.txn(), 10)],
                                           alg="MD5")))
        self.assertEqual(self.status("shop-wa", a2), "paid")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE outcome = 'combined'"), "2")

    def test_v2_combine_forged_sign_rejected(self):
        body = v2_combine(self.tag("C"), [(MCH_A, self.tag("F"), self.txn(), 1)], key=APIV2_C)
        r = self.send_v2(body)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(self.rows(), [])

    # -- no placeholder identities -----------------------------------------
    def test_two_id_less_notifications_both_stored_and_reported(self):
        oid = self.tag("NOID")
        PG.add_order("shop-wa", oid, 1, "CNY")
        b1, b2 = v2_payment_without_ids(1, oid), v2_payment_without_ids(2)
        for b in (b1, b2, b1):
            self.ok_v2(self.send_v2(b))
        res1 = {"mchid": MCH_A, "appid": APPID, "out_trade_no": oid, "trade_state": "SUCCESS",
                "trade_type": "JSAPI", "amount": {"total": 1, "currency": "CNY"}}
        res2 = dict(res1, amount={"total": 3, "currency": "CNY"})
        for res in (res1, res2):
            self.ok_v3(self.send(*v3_request(res)))
        rows = PG.psql("SELECT dedup_key, outcome, deliveries, length(raw_body) > 0 "
                       "FROM paynotify.notifications ORDER BY id")
        self.assertEqual(len(rows), 4, rows)
        self.assertEqual(len({k for k, _, _, _ in rows}), 4, rows)
        self.assertTrue(all(k.startswith("!missing_id:noid:") for k, _, _, _ in rows), rows)
        self.assertEqual([(o, d, b) for _, o, d, b in rows],
                         [("missing_id", "2", "t")] + [("missing_id", "1", "t")] * 3)
        self.assertEqual(self.status("shop-wa", oid), "pending")
        p = admin("report", "--site", "shop-wa", "--format", "csv")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stdout.count("missing_id"), 4, p.stdout)


class WechatPayCombineCgi(Scenarios, unittest.TestCase):
    transport = "cgi"


class WechatPayCombineFastCgi(Scenarios, unittest.TestCase):
    transport = "fcgi"


if __name__ == "__main__":
    unittest.main()


# Two sites on ONE WeChat Pay identity (one mchid, one appid, one set of
# keys), told apart by wechatpay.site_attach (issue 23): a combine payment
# posted to one of them whose sub-orders carry either site's attach pays
# each sub-order at the site its attach names (the sibling holds the key
# that verified it); a sub-order without attach is for a person.
MCH_M = "1900000210"


class MarkedSiblings(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cfg = pntest.write_site_config(
            PG,
            site_lines("shop-ma", MCH_M, "apiv3.key", "apiv2.key", PUBID, "keys/pub-a.pem")[:-1]
            + ["wechatpay.site_attach = ma", ""]
            + site_lines("shop-mb", MCH_M, "apiv3.key", "apiv2.key", PUBID, "keys/pub-a.pem")[:-1]
            + ["wechatpay.site_attach = mb", ""],
            secrets=[("apiv3.key", APIV3 + "\n"), ("apiv2.key", APIV2 + "\n")],
            files=[(os.path.join(UNIT_KEYS, "test-a.pub.pem"), "keys/pub-a.pem"),
                   (KEY_A, "keys/test-a.key.pem")],
            prefix="pntest-wxm-cfg.")
        os.chmod(os.path.join(os.path.dirname(cls.cfg), "keys/test-a.key.pem"), 0o600)

    def test_sub_orders_go_to_the_site_their_attach_names(self):
        a, b, n = "MA-" + seq(), "MB-" + seq(), "MN-" + seq()
        PG.add_order("shop-ma", a, 1000, "CNY")
        PG.add_order("shop-mb", b, 2000, "CNY")
        PG.add_order("shop-ma", n, 3000, "CNY")
        subs = [dict(v3_sub(MCH_M, a, "4200" + seq().rjust(24, "1"), 1000), attach="ma"),
                dict(v3_sub(MCH_M, b, "4200" + seq().rjust(24, "2"), 2000), attach="mb"),
                dict(v3_sub(MCH_M, n, "4200" + seq().rjust(24, "3"), 3000), attach="")]
        headers, body = v3_request(v3_combine("CM-" + seq(), subs, mchid=MCH_M))
        r = pntest.run_cgi(pntest.binary("wechatpay"), "POST", "/notify/wechatpay/shop-ma",
                           headers, body, self.cfg)
        self.assertIn(r.status, (200, 204), r)
        self.assertEqual(PG.order("shop-ma", a)["status"], "paid")
        self.assertEqual(PG.order("shop-mb", b)["status"], "paid")      # at its own site
        self.assertEqual(PG.order("shop-ma", n)["status"], "pending")
        got = PG.psql("SELECT site, order_id, outcome FROM paynotify.notifications "
                      "WHERE order_id IN (%s, %s, %s) ORDER BY order_id"
                      % (pntest.q(a), pntest.q(b), pntest.q(n)))
        self.assertEqual(sorted(got), sorted([("shop-ma", a, "applied"), ("shop-mb", b, "applied"),
                                              ("shop-ma", n, "merchant_mismatch")]))

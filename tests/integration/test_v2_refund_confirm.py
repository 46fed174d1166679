# test_v2_refund_confirm.py: WeChat Pay API v2 refund results wait for a
# signed confirmation (issue 23, item 2; docs/WECHATPAY.md "Refund
# confirmation").
#
# A v2 refund result's req_info is AES-256-ECB with no MAC: 16-byte blocks
# of two genuine results under one APIv2 key can be swapped.  Two shops on
# one merchant (the same mch_id and APIv2 key, two sites) each get a
# genuine refund, encrypted here with the test key exactly as WeChat Pay
# does (pnsign.wechat_v2_seal), posted through the real receiver (CGI):
#   - the splice (shop B's order and transaction, shop A's refund id and
#     amount) is stored pending_confirmation, never applied; the genuine
#     ones are applied once the stand-in's signed refundquery
#     (tests/lib/psp_standins.py) confirms them, and the splice is
#     txn_mismatch with the answer's words;
#   - an answer with another amount (amount_mismatch) or status
#     (REFUNDCLOSE: refund_failed) is not applied and is on the report;
#     PROCESSING and REFUNDNOTEXIST stay pending; a tampered or wrongly
#     signed answer is refused and changes nothing;
#   - report lists an unconfirmed one only after an hour (received_at moved
#     back in the test database, no sleeping);
#   - duplicates of a pending refund stay one row (deliveries counted),
#     before and after it is applied;
#   - replay --apply never applies a pending one; a genuine refund posted
#     to the other shop is confirmed and still not applied there
#     (the weak-identity rules at confirmation time).

import base64
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

try:
    import pnkit  # noqa: E402
    import psp_standins  # noqa: E402
except ImportError:     # pragma: no cover (python3-cryptography missing)
    psp_standins = None

ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
WRONG_PRIV = os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem")

PG = None
SI = None
CFG = None
SITE_A, SITE_B = "wx-a", "wx-b"


def setUpModule():
    global PG, SI, CFG
    if psp_standins is None:
        raise unittest.SkipTest("python3-cryptography is needed for the stand-ins")
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=os.path.join(KEYS, "test-a.key.pem"), wrong_key=WRONG_PRIV,
        merchant_pub=os.path.join(KEYS, "test-b.pub.pem"), app_id=pnkit.ALIPAY_APP_ID,
        mchid=pnkit.WX_MCHID, merchant_serial="00", wx_pubid=pnkit.WX_PUBID,
        stripe_key="rk_test_x", twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY, wx_apiv2=pnkit.WX_APIV2)
    cfg = pnkit.write_all_config(PG)
    with open(cfg.path) as f:
        text = f.read()
    text = text.replace("[site %s]\n" % pnkit.SITE,
                        "[query]\nca_file = %s\nconnect_timeout_ms = 1000\ntimeout_ms = 5000\n\n"
                        "[site %s]\nwechatpay.site_attach = %s\n"
                        % (SI.ca_file, pnkit.SITE, pnkit.SITE))
    # two shops on one merchant: one mch_id, one APIv2 key; the configuration
    # refuses that without site markers (issue 23), which their payments
    # carry in attach (refund results carry none: their binding is the
    # confirmation and the paid transaction, as tested here)
    for site in (SITE_A, SITE_B):
        text += "\n".join(["", "[site %s]" % site,
                           "wechatpay.site_attach = %s" % site,
                           "wechatpay.mchid = %s" % pnkit.WX_MCHID,
                           "wechatpay.appid = %s" % pnkit.WX_APPID,
                           "wechatpay.apiv2_key_file = apiv2.key",
                           "wechatpay.query_url = %s" % SI.url, ""])
    with open(cfg.path, "w") as f:
        f.write(text)
    CFG = cfg.path


def tearDownModule():
    if PG is not None:
        PG.destroy()


def admin(*args):
    p = subprocess.run([ADMIN, "-c", CFG] + list(args), env=pntest.clean_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=pntest.patience(60))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def query(*args):
    import json
    rc, out, err = admin("query", *(list(args) + ["--format", "json"]))
    return rc, json.loads(out) if out.strip().startswith("[") else [], err


def report():
    import json
    rc, out, err = admin("report", "--format", "json")
    return rc, json.loads(out) if out.strip().startswith("[") else []


def inner(refund_id, refund_fee, out_trade_no, txn, total_fee, pad=""):
    """req_info's plaintext: the refund's own fields first, the order's last
    (any order parses; this one puts the two groups in separate blocks)."""
    return pnsign.wechat_v2_xml([
        ("refund_id", refund_id), ("out_refund_no", "R" + refund_id[-12:]),
        ("refund_fee", str(refund_fee)), ("refund_status", "SUCCESS"),
        ("success_time", "2024-05-21 10:00:00"), ("refund_recv_accout", "balance" + pad),
        ("refund_request_source", "API"), ("out_trade_no", out_trade_no),
        ("transaction_id", txn), ("total_fee", str(total_fee))], root="root")


def outer(req_info):
    """The refund notification around req_info: the outer ids are unsigned."""
    return pnsign.wechat_v2_xml([
        ("return_code", "SUCCESS"), ("appid", pnkit.WX_APPID), ("mch_id", pnkit.WX_MCHID),
        ("nonce_str", "n" + pnkit.seq()), ("req_info", req_info)])


def ecb_blocks(req_info):
    raw = base64.b64decode(req_info)
    return [raw[i:i + 16] for i in range(0, len(raw), 16)]


def splice(plain_a, plain_b, req_a, req_b):
    """B's blocks from the first one holding B's order fields on, A's before:
    shop A's refund id and amount, shop B's order and transaction."""
    cut = plain_b.index(b"<out_trade_no>") // 16
    self_check = plain_a.index(b"</refund_request_source>")
    assert cut * 16 > self_check - 16, "the groups share a block: choose another pad"
    blocks = ecb_blocks(req_a)[:cut] + ecb_blocks(req_b)[cut:]
    return base64.b64encode(b"".join(blocks)).decode()


def post(site, body):
    r = pntest.run_cgi(pntest.binary("wechatpay"), "POST", pnkit.path("wechatpay", site),
                       {"Content-Type": "text/xml"}, body, config=CFG)
    return r


class RefundConfirmation(unittest.TestCase):
    def setUp(self):
        PG.reset()
        SI.reset()
        n = pnkit.seq()
        self.oa, self.ob = "A-%s" % n, "B-%s" % n
        self.ta, self.tb = "4200000001%018d" % int(n), "4200000002%018d" % int(n)
        self.ra, self.rb = "5030000001%019d" % int(n), "5030000002%019d" % int(n)
        for site, oid, txn in ((SITE_A, self.oa, self.ta), (SITE_B, self.ob, self.tb)):
            PG.add_order(site, oid, 10000, "CNY")
            fields = [(k, {"out_trade_no": oid, "transaction_id": txn}.get(k, v))
                      for k, v in pnkit.wechat_v2_fields(oid, 10000)] + [("attach", site)]
            h, b = pnkit.sign_wechat_v2(fields)
            self.ok(post(site, b))
            self.assertEqual(PG.order(site, oid)["status"], "paid")

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def ok(self, r):
        self.assertEqual(r.status, 200, (r.status, r.body, r.stderr))
        self.assertIn(b"SUCCESS", r.body)

    def refunds(self, where="true"):
        return PG.notifications("event_kind = 'refund' AND (%s)" % where)

    def genuine(self):
        """WeChat Pay's two genuine results: A 60.00, B 10.00 (of 100.00 each)."""
        pa = inner(self.ra, 6000, self.oa, self.ta, 10000)
        pb = inner(self.rb, 1000, self.ob, self.tb, 10000)
        ra, rb = pnsign.wechat_v2_seal(pa, pnkit.WX_APIV2), pnsign.wechat_v2_seal(pb, pnkit.WX_APIV2)
        if isinstance(ra, bytes):
            ra, rb = ra.decode(), rb.decode()
        SI.set_v2_refund(self.ra, "R" + self.ra[-12:], self.oa, self.ta, 10000, 6000)
        SI.set_v2_refund(self.rb, "R" + self.rb[-12:], self.ob, self.tb, 10000, 1000)
        return pa, pb, ra, rb

    def test_spliced_never_applied_genuine_applied_after_confirmation(self):
        pa, pb, ra, rb = self.genuine()
        spliced = splice(pa, pb, ra, rb)
        opened = pnsign.wechat_v2_open(spliced, pnkit.WX_APIV2)
        # the splice decrypts to well-formed XML: A's refund id and 60.00, B's order
        self.assertIn(("<refund_id>%s</refund_id>" % self.ra).encode(), opened)
        self.assertIn(b"<refund_fee>6000</refund_fee>", opened)
        self.assertIn(("<out_trade_no><![CDATA[%s]]></out_trade_no>" % self.ob).encode()
                      if b"CDATA[%s" % self.ob.encode() in opened
                      else ("<out_trade_no>%s</out_trade_no>" % self.ob).encode(), opened)
        self.assertIn(self.tb.encode(), opened)
        # through the real receiver: acknowledged, stored, the order unchanged
        self.ok(post(SITE_B, outer(spliced)))
        self.ok(post(SITE_B, outer(rb)))
        self.ok(post(SITE_A, outer(ra)))
        for site, oid in ((SITE_A, self.oa), (SITE_B, self.ob)):
            o = PG.order(site, oid)
            self.assertEqual((o["status"], o["refunded_minor"]), ("paid", 0), site)
        rows = self.refunds()
        self.assertEqual(sorted(r["outcome"] for r in rows), ["pending_confirmation"] * 3)
        # the splice took A's refund id key at B first; B's genuine one has its own key
        # (another refund id); no row of the three is a conflicting_duplicate
        rc, res, err = query("--pending-older-than", "0s", "--apply")
        self.assertEqual(rc, 1, (res, err))     # the splice needs a human
        got = {(r["site"], r["result"]) for r in res}
        self.assertEqual(got, {(SITE_A, "applied"), (SITE_B, "applied"),
                               (SITE_B, "txn_mismatch")}, res)
        a, b = PG.order(SITE_A, self.oa), PG.order(SITE_B, self.ob)
        self.assertEqual((a["status"], a["refunded_minor"]), ("partially_refunded", 6000))
        self.assertEqual((b["status"], b["refunded_minor"]), ("partially_refunded", 1000))
        bad = PG.psql("SELECT outcome_detail FROM paynotify.notifications WHERE site = %s "
                      "AND outcome = 'txn_mismatch'" % pntest.q(SITE_B))
        self.assertEqual(len(bad), 1)
        self.assertIn("WeChat Pay says refund %s" % self.ra, bad[0][0])
        self.assertIn(self.ta, bad[0][0])
        # it is on the report with the answer's words; the applied ones are not
        rc, rep = report()
        self.assertEqual([(x["kind"], x["site"]) for x in rep], [("txn_mismatch", SITE_B)], rep)
        # a second run has nothing left to confirm
        rc, res, err = query("--pending-older-than", "0s", "--apply")
        self.assertEqual((rc, res), (0, []), err)
        # the feed got the two applied refunds, once each
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications WHERE "
                                   "event_kind = 'refund' AND outcome = 'applied'"), "2")

    def test_genuine_refund_at_the_other_shop_is_confirmed_and_not_applied(self):
        pa, pb, ra, rb = self.genuine()
        self.ok(post(SITE_B, outer(ra)))        # A's genuine refund, posted to shop B
        rc, res, err = query("--site", SITE_B, "--pending-older-than", "0s", "--apply")
        self.assertEqual([r["result"] for r in res], ["txn_mismatch"], (res, err))
        self.assertEqual(PG.order(SITE_B, self.ob)["refunded_minor"], 0)
        self.assertEqual(PG.order(SITE_A, self.oa)["refunded_minor"], 0)

    def test_answer_that_differs_is_not_applied_and_reported(self):
        pa, pb, ra, rb = self.genuine()
        SI.set_v2_refund(self.ra, "R" + self.ra[-12:], self.oa, self.ta, 10000, 500)
        SI.set_v2_refund(self.rb, "R" + self.rb[-12:], self.ob, self.tb, 10000, 1000,
                         refund_status="REFUNDCLOSE")
        self.ok(post(SITE_A, outer(ra)))
        self.ok(post(SITE_B, outer(rb)))
        rc, res, err = query("--pending-older-than", "0s", "--dry-run")
        self.assertEqual(sorted(r["result"] for r in res),
                         ["would_flag_amount_mismatch", "would_flag_refund_failed"], res)
        self.assertEqual(sorted(r["outcome"] for r in self.refunds()),
                         ["pending_confirmation"] * 2, "a dry run changes nothing")
        rc, res, err = query("--pending-older-than", "0s", "--apply")
        self.assertEqual(rc, 1, (res, err))
        self.assertEqual(sorted((r["site"], r["result"], r["answer"]) for r in res),
                         [(SITE_A, "amount_mismatch", "SUCCESS"),
                          (SITE_B, "refund_failed", "REFUNDCLOSE")], res)
        for site, oid in ((SITE_A, self.oa), (SITE_B, self.ob)):
            self.assertEqual(PG.order(site, oid)["refunded_minor"], 0, site)
        rc, rep = report()
        self.assertEqual(rc, 1)
        kinds = sorted((x["kind"], x["site"]) for x in rep)
        self.assertEqual(kinds, [("amount_mismatch", SITE_A), ("refund_failed", SITE_B)], rep)
        detail = [x["detail"] for x in rep if x["kind"] == "amount_mismatch"][0]
        self.assertIn("5.00 CNY", detail)
        self.assertIn("60.00 CNY", detail)

    def test_not_final_or_unverified_answers_leave_it_pending(self):
        pa, pb, ra, rb = self.genuine()
        SI.set_v2_refund(self.ra, "R" + self.ra[-12:], self.oa, self.ta, 10000, 6000,
                         refund_status="PROCESSING")
        self.ok(post(SITE_A, outer(ra)))
        rc, res, err = query("--site", SITE_A, "--pending-older-than", "0s", "--apply")
        self.assertEqual(([r["result"] for r in res], rc), (["waiting"], 0), (res, err))
        with SI.lock:
            del SI.state[("wechatpay-v2-refund", self.ra)]
        rc, res, err = query("--site", SITE_A, "--pending-older-than", "0s", "--apply")
        self.assertEqual([(r["result"], r["answer"]) for r in res],
                         [("waiting", "REFUNDNOTEXIST")], (res, err))
        SI.set_v2_refund(self.ra, "R" + self.ra[-12:], self.oa, self.ta, 10000, 6000)
        for mode in ("tamper", "wrong_key"):
            SI.mode = mode
            rc, res, err = query("--site", SITE_A, "--pending-older-than", "0s", "--apply")
            self.assertEqual(([r["result"] for r in res], rc), (["refused"], 1), (mode, res, err))
        SI.mode = None
        self.assertEqual([r["outcome"] for r in self.refunds()], ["pending_confirmation"])
        self.assertEqual(PG.order(SITE_A, self.oa)["refunded_minor"], 0)
        # replay --apply never applies it (it waits for the signed answer)
        rc, out, err = admin("replay", "--site", SITE_A, "--apply", "--format", "csv")
        self.assertEqual(PG.order(SITE_A, self.oa)["refunded_minor"], 0, out + err)
        self.assertEqual([r["outcome"] for r in self.refunds()], ["pending_confirmation"])
        # the confirmation, at last (--order also asks about the order's payment: not
        # known to this stand-in, not_found)
        rc, res, err = query("--site", SITE_A, "--order", self.oa, "--apply")
        self.assertEqual([(r["amount"], r["result"]) for r in res],
                         [("100.00 CNY", "not_found"), ("60.00 CNY", "applied")], (res, err))
        self.assertEqual(PG.order(SITE_A, self.oa)["refunded_minor"], 6000)

    def test_report_shows_an_unconfirmed_one_only_after_an_hour(self):
        pa, pb, ra, rb = self.genuine()
        self.ok(post(SITE_A, outer(ra)))
        rc, rep = report()
        self.assertEqual((rc, rep), (0, []))
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '59 minutes' "
                "WHERE outcome = 'pending_confirmation'")
        self.assertEqual(report(), (0, []))
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '61 minutes' "
                "WHERE outcome = 'pending_confirmation'")
        rc, rep = report()
        self.assertEqual(rc, 1)
        self.assertEqual([(x["kind"], x["site"], x["order_id"], x["amount"]) for x in rep],
                         [("pending_confirmation", SITE_A, self.oa, "60.00 CNY")], rep)
        # the 5-minute timer's window (received 60 s to 26 min ago) has left it; the
        # nightly sweep (26 min to 3 days) confirms it
        rc, res, err = query("--pending-older-than", "60s", "--pending-younger-than", "26m",
                             "--apply")
        self.assertEqual(res, [], err)
        rc, res, err = query("--pending-older-than", "26m", "--pending-younger-than", "3d",
                             "--apply")
        self.assertEqual([r["result"] for r in res], ["applied"], (res, err))
        self.assertEqual(report(), (0, []))

    def test_duplicates_of_a_pending_refund_stay_one_row(self):
        pa, pb, ra, rb = self.genuine()
        body = outer(ra)
        for _ in range(3):
            self.ok(post(SITE_A, body))
        self.ok(post(SITE_A, outer(ra)))        # another envelope (nonce), same req_info
        rows = self.refunds()
        self.assertEqual([(r["outcome"], r["deliveries"]) for r in rows],
                         [("pending_confirmation", 4)])
        rc, res, err = query("--site", SITE_A, "--pending-older-than", "0s", "--apply")
        self.assertEqual([r["result"] for r in res], ["applied"], (res, err))
        self.ok(post(SITE_A, body))             # after it was applied: still a duplicate
        rows = self.refunds()
        self.assertEqual([(r["outcome"], r["deliveries"]) for r in rows], [("applied", 5)])
        self.assertEqual(PG.order(SITE_A, self.oa)["refunded_minor"], 6000)


if __name__ == "__main__":
    unittest.main()

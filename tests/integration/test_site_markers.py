# test_site_markers.py: issue 23 item 1, "two sites on one identity pay each
# other's orders", with genuinely signed notifications through the real
# receivers (CGI, and the FastCGI supervisor for start and reload) against a
# real (throwaway) PostgreSQL:
#   - two sites that a genuine notification cannot tell apart (one 2C2P
#     merchant_id and key; one Alipay app_id, seller_id and key; one WeChat
#     Pay mchid, appid and key; two Stripe sites with one marker, or one
#     secret and no markers) are refused by check-config (exit 78, both
#     sites named), a receiver refuses to start (exit 78), and a reload is
#     refused while the old configuration keeps serving;
#   - the same sites with distinct site markers from signed data
#     (2c2p.site_marker in the JWT payload and the legacy form,
#     wechatpay.site_attach, alipay.site_passback) are each paid only by
#     their own results: a result marked for A posted to B's URL is stored
#     foreign_site, never applied, not on report; one without a marker, or
#     with one that names no site, is merchant_mismatch, on report;
#   - the legacy form's re-split: moving a sibling's marker (carried in the
#     buyer's browser_info) into user_defined_N never pays that sibling;
#   - `paynotify sign` sets the site's marker (and --marker another);
#   - an unmarked site on its own merchant keeps working unchanged.
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pne2e  # noqa: E402
import pnsign  # noqa: E402
import pntest  # noqa: E402

PG = None
CFG = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "keys")
ALI_PRIV = os.path.join(KEYS, "site-a-private.pem")
ALI_PUB = os.path.join(KEYS, "site-a-public.pem")
APP_ID, SELLER = "2021000000000001", "2088000000000001"
KEY = "A7D3C0FFEE0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF012345"
LEGACY_KEY = "LEGACYSECRET"
WX_MCHID, WX_APPID = "1900000109", "wxd678efh567hg6787"
APIV2 = "MarkerAPIv2Key0123456789abcdefAB"
WHSEC = "whsec_marker_test_secret"
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"

SECRETS = [("2c2p.key", KEY + "\n"), ("legacy.key", LEGACY_KEY + "\n"),
           ("apiv2", APIV2 + "\n"), ("whsec", WHSEC + "\n"), ("whsec2", WHSEC + "-2\n"),
           ("other.key", "B" * 64 + "\n")]

# The marked installation: pairs of sites on one identity, each its marker.
MARKED = [
    "[site tc-a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key",
    "2c2p.site_marker = userDefined1=shop-a", "2c2p.test_signing = on", "",
    "[site tc-b]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key",
    "2c2p.site_marker = userDefined1=shop-b", "2c2p.test_signing = on", "",
    "[site lg-a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = legacy.key",
    "2c2p.api = redirect", "2c2p.site_marker = userDefined2=alpha", "",
    "[site lg-b]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = legacy.key",
    "2c2p.api = redirect", "2c2p.site_marker = userDefined2=beta", "",
    "[site ali-a]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER,
    "alipay.public_key_file = ali.pem", "alipay.site_passback = shop-a", "",
    "[site ali-b]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER,
    "alipay.public_key_file = ali.pem", "alipay.site_passback = shop-b", "",
    "[site wx-a]", "wechatpay.mchid = %s" % WX_MCHID, "wechatpay.appid = %s" % WX_APPID,
    "wechatpay.apiv2_key_file = apiv2", "wechatpay.site_attach = shop-a", "",
    "[site wx-b]", "wechatpay.mchid = %s" % WX_MCHID, "wechatpay.appid = %s" % WX_APPID,
    "wechatpay.apiv2_key_file = apiv2", "wechatpay.site_attach = shop-b", "",
    "[site st-a]", "stripe.secret_files = whsec", "stripe.site_metadata = site=st-a", "",
    "[site st-b]", "stripe.secret_files = whsec", "stripe.site_metadata = site=st-b", "",
    # on its own merchant, no marker: works as before
    "[site solo]", "2c2p.merchant_id = JT02", "2c2p.secret_key_file = other.key", "",
]


def write(lines):
    return pntest.write_site_config(PG, lines, secrets=SECRETS, files=[(ALI_PUB, "ali.pem")],
                                    prefix="pntest-markers-cfg.")


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = write(MARKED)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def post(provider, site, body, ctype, config=None):
    return pntest.run_cgi(pntest.binary(provider), "POST", "/notify/%s/%s" % (provider, site),
                          {"Content-Type": ctype}, body, config or CFG)


def admin(*args):
    return subprocess.run([ADMIN] + list(args), env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


_seq = [0]


def seq():
    _seq[0] += 1
    return "%d%04d" % (os.getpid(), _seq[0])


# ---- genuinely signed results ------------------------------------------------

def jwt_result(oid, marker=None, field="userDefined1", merchant="JT01", key=KEY):
    """A PGW v4 backend notification (2C2P's payment response fields)."""
    p = {"merchantID": merchant, "invoiceNo": oid, "accountNo": "411111XXXXXX1111",
         "amount": "19.99", "currencyCode": "SGD", "tranRef": "T" + seq(),
         "referenceNo": "R1", "transactionDateTime": "20240101120000", "agentCode": "OCBC",
         "channelCode": "VI", "respCode": "0000", "respDesc": "Success"}
    if marker is not None:
        p[field] = marker
    token = pnsign.jwt_hs256(KEY if key is None else key, json.dumps(p).encode())
    return pnsign.jwt_body(token)


def legacy_fields(oid, ud=(), browser_info=None):
    f = [("version", "7.0"), ("request_timestamp", "2024-01-01 12:00:00"),
         ("merchant_id", "JT01"), ("order_id", oid), ("invoice_no", ""), ("currency", "702"),
         ("amount", "000000001999"), ("transaction_ref", "7" + seq()), ("approval_code", "123456"),
         ("eci", "05"), ("transaction_datetime", "2024-01-01 12:00:05"),
         ("payment_channel", "001"), ("payment_status", "000"),
         ("channel_response_code", "00"), ("channel_response_desc", "approved"),
         ("masked_pan", "411111XXXXXX1111")]
    f += list(ud)
    if browser_info is not None:
        f.append(("browser_info", browser_info))
    return f


def alipay_result(oid, passback=None):
    site = pntest.Site("x", APP_ID, SELLER, ALI_PRIV, None, ())
    extra = {"passback_params": passback} if passback is not None else {}
    return pntest.alipay_notification(site, oid, "19.99", trade_no="2024" + seq(), key=ALI_PRIV,
                                      **extra)


def wx_result(oid, attach=None):
    f = [("appid", WX_APPID), ("bank_type", "CFT"), ("fee_type", "CNY"), ("mch_id", WX_MCHID),
         ("nonce_str", "n" + seq()), ("openid", "o1"), ("out_trade_no", oid),
         ("result_code", "SUCCESS"), ("return_code", "SUCCESS"), ("time_end", "20240520100005"),
         ("total_fee", "1999"), ("trade_type", "JSAPI"), ("transaction_id", "42" + seq())]
    if attach is not None:
        f.append(("attach", attach))
    f.sort()
    return pnsign.wechat_v2_signed_xml(f, APIV2)


def outcomes(site, oid):
    return [r["outcome"] for r in PG.notifications(
        "site = '%s' AND order_id = '%s'" % (site, oid))]


class Ambiguous(unittest.TestCase):
    """Two sites a genuine notification cannot tell apart: refused at load."""

    def refused(self, lines, a, b, needle):
        path = write(lines)
        p = admin("check-config", "-c", path)
        self.assertEqual(p.returncode, 78, p.stdout + p.stderr)
        out = p.stdout + p.stderr
        self.assertIn('sites "%s" and "%s" share one %s' % (a, b, needle), out)
        return path

    def test_2c2p_one_merchant_refused(self):
        two = ["[site a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key", "",
               "[site b]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key", ""]
        self.refused(two, "a", "b", "2C2P identity (merchant_id JT01 and a secret key)")
        # one marked is not enough; the same value, or different fields, neither
        for extra_a, extra_b, why in [
                ("2c2p.site_marker = userDefined1=x", None, '"b" sets no 2c2p.site_marker'),
                ("2c2p.site_marker = userDefined1=x", "2c2p.site_marker = userDefined1=x",
                 "both set 2c2p.site_marker to the same value"),
                ("2c2p.site_marker = userDefined1=x", "2c2p.site_marker = userDefined2=y",
                 "name different fields")]:
            lines = list(two)
            lines.insert(3, extra_a)
            if extra_b:
                lines.insert(len(lines) - 1, extra_b)
            p = admin("check-config", "-c", write(lines))
            self.assertEqual(p.returncode, 78, p.stdout)
            self.assertIn(why, p.stdout + p.stderr)
        # legacy: one marker inside the other cannot be told apart
        legacy = ["[site a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = legacy.key",
                  "2c2p.api = redirect", "2c2p.site_marker = userDefined1=shop", "",
                  "[site b]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = legacy.key",
                  "2c2p.api = redirect", "2c2p.site_marker = userDefined1=shop-b", ""]
        p = admin("check-config", "-c", write(legacy))
        self.assertEqual(p.returncode, 78, p.stdout)
        self.assertIn("one contains the other", p.stdout)
        # another key, or another merchant: two identities, fine
        ok = ["[site a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key", "",
              "[site b]", "2c2p.merchant_id = JT02", "2c2p.secret_key_file = 2c2p.key", "",
              "[site c]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = other.key", ""]
        p = admin("check-config", "-c", write(ok))
        self.assertNotIn("share one", p.stdout + p.stderr)
        self.assertNotEqual(p.returncode, 78, p.stdout)

    def test_alipay_wechat_stripe_refused(self):
        self.refused(["[site a]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER,
                      "alipay.public_key_file = ali.pem", "",
                      "[site b]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER,
                      "alipay.public_key_file = ali.pem", ""],
                     "a", "b", "Alipay identity (app_id %s, seller_id %s" % (APP_ID, SELLER))
        self.refused(["[site a]", "wechatpay.mchid = %s" % WX_MCHID,
                      "wechatpay.appid = %s" % WX_APPID, "wechatpay.apiv2_key_file = apiv2", "",
                      "[site b]", "wechatpay.mchid = %s" % WX_MCHID,
                      "wechatpay.appid = %s" % WX_APPID, "wechatpay.apiv2_key_file = apiv2", ""],
                     "a", "b", "WeChat Pay identity (mchid %s, appid %s" % (WX_MCHID, WX_APPID))
        # two Stripe endpoints with one marker value: one account sends both every event
        self.refused(["[site a]", "stripe.secret_files = whsec", "stripe.site_metadata = site=x",
                      "", "[site b]", "stripe.secret_files = whsec2",
                      "stripe.site_metadata = site=x", ""],
                     "a", "b", "Stripe identity (stripe.site_metadata site=x")
        self.refused(["[site a]", "stripe.secret_files = whsec", "",
                      "[site b]", "stripe.secret_files = whsec", ""],
                     "a", "b", "Stripe identity (an endpoint signing secret)")

    def test_receiver_refuses_to_start(self):
        path = write(["[site a]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key",
                      "", "[site b]", "2c2p.merchant_id = JT01",
                      "2c2p.secret_key_file = 2c2p.key", ""])
        sockdir = tempfile.mkdtemp(prefix="pntest-markers-sock.")
        p = subprocess.run([pntest.binary("2c2p"), "-c", path, "--listen",
                            "unix:" + os.path.join(sockdir, "r.sock"), "--workers", "1"],
                           env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=pntest.patience(60))
        self.assertEqual(p.returncode, 78, p.stderr)
        self.assertIn('sites "a" and "b" share one 2C2P identity', p.stderr + p.stdout)
        # a CGI request is refused too (nothing stored, nothing applied)
        PG.add_order("b", "AMB-1", 1999, "SGD")
        r = post("2c2p", "b", jwt_result("AMB-1", None), JSON, config=path)
        self.assertGreaterEqual(r.status, 500, r)
        self.assertEqual(PG.order("b", "AMB-1")["status"], "pending")
        self.assertEqual(outcomes("b", "AMB-1"), [])

    def test_reload_refused_while_the_old_config_serves(self):
        d = tempfile.mkdtemp(prefix="pntest-markers-rl.")
        path = write(MARKED)
        rcv = pne2e.Receiver("2c2p", path, d, workers=1).start(timeout=pntest.patience(60))
        try:
            pids = rcv.worker_pids()
            text = open(path).read()
            with open(path, "w") as f:     # tc-b loses its marker: ambiguous with tc-a
                f.write(text.replace("2c2p.site_marker = userDefined1=shop-b\n", ""))
            mark = len(rcv.log_text())
            rcv.send_signal(signal.SIGHUP)
            m = rcv.wait_log(r"configuration reload refused, the old one keeps serving: [^\n]*"
                             r'sites "tc-a" and "tc-b" share one 2C2P identity',
                             pntest.patience(20), start=mark)
            self.assertIsNotNone(m)
            self.assertEqual(rcv.worker_pids(), pids, "the old workers keep serving")
            # the old configuration, markers and all, still decides
            PG.add_order("tc-a", "RL-1", 1999, "SGD")
            PG.add_order("tc-b", "RL-1", 1999, "SGD")
            for site, marker, want in (("tc-b", "shop-a", "foreign_site"),
                                       ("tc-a", "shop-a", "applied")):
                r = rcv.request("POST", "/notify/2c2p/" + site, {"Content-Type": JSON},
                                jwt_result("RL-1", marker))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(outcomes(site, "RL-1")[-1], want)
            self.assertEqual(PG.order("tc-b", "RL-1")["status"], "pending")
            self.assertEqual(PG.order("tc-a", "RL-1")["status"], "paid")
        finally:
            rcv.stop()


class Marked(unittest.TestCase):
    """The same sites with markers: each paid only by its own results."""

    def pair(self, sa, sb, oid, amount=1999, cur="SGD"):
        PG.add_order(sa, oid, amount, cur)
        PG.add_order(sb, oid, amount, cur)

    def check(self, provider, site, oid, body, ctype, want, status="pending"):
        r = post(provider, site, body, ctype)
        self.assertLess(r.status, 300, r)
        self.assertEqual(outcomes(site, oid)[-1], want, r)
        self.assertEqual(PG.order(site, oid)["status"], status)

    def test_2c2p_jwt(self):
        self.pair("tc-a", "tc-b", "INV-1")
        a_result = jwt_result("INV-1", "shop-a")
        # shop A's genuine result posted to B's URL never pays B
        self.check("2c2p", "tc-b", "INV-1", a_result, JSON, "foreign_site")
        self.check("2c2p", "tc-a", "INV-1", a_result, JSON, "applied", "paid")
        self.check("2c2p", "tc-b", "INV-1", jwt_result("INV-1", "shop-b"), JSON, "applied",
                   "paid")
        # no marker, a marker that names no site, another field: for a person
        self.pair("tc-a", "tc-b", "INV-2")
        self.check("2c2p", "tc-a", "INV-2", jwt_result("INV-2"), JSON, "merchant_mismatch")
        self.check("2c2p", "tc-a", "INV-2", jwt_result("INV-2", "shop-z"), JSON,
                   "merchant_mismatch")
        self.check("2c2p", "tc-a", "INV-2", jwt_result("INV-2", "shop-a", field="userDefined2"),
                   JSON, "merchant_mismatch")
        p = admin("-c", CFG, "report", "--site", "tc-a", "--format", "csv")
        self.assertIn("merchant_mismatch", p.stdout)
        p = admin("-c", CFG, "report", "--site", "tc-b", "--format", "csv")
        self.assertNotIn("foreign_site", p.stdout)
        self.assertNotIn("INV-1", p.stdout)

    def test_2c2p_legacy_and_resplit(self):
        self.pair("lg-a", "lg-b", "LG-1")
        a_form = legacy_fields("LG-1", [("user_defined_2", "alpha")])
        body = pnsign.legacy_body(a_form, LEGACY_KEY)
        self.check("2c2p", "lg-b", "LG-1", body, FORM, "foreign_site")
        # at its own site, the usual card form waits for 2C2P's paymentInquiry
        # (its transaction_ref/approval_code/eci split more than one way)
        self.check("2c2p", "lg-a", "LG-1", body, FORM, "pending_confirmation", "pending")
        # A's genuine result whose browser_info (the buyer's) carries "beta",
        # re-split so that user_defined_2 reads "beta": the hash still matches,
        # B is never paid (the signed content carries A's marker too)
        self.pair("lg-a", "lg-b", "LG-2")
        genuine = legacy_fields("LG-2", [("user_defined_2", "alpha")], browser_info="xbetax")
        hv = pnsign.legacy_hash(genuine, LEGACY_KEY)
        moved = legacy_fields("LG-2", [("user_defined_1", "alphax"), ("user_defined_2", "beta")],
                              browser_info="x")
        moved = [(k, dict(genuine).get(k) if k == "transaction_ref" else v) for k, v in moved]
        self.assertEqual(pnsign.legacy_content(moved), pnsign.legacy_content(genuine))
        r = post("2c2p", "lg-b", pnsign.legacy_body(moved, LEGACY_KEY, hash_value=hv), FORM)
        self.assertLess(r.status, 300, r)
        self.assertEqual(outcomes("lg-b", "LG-2"), ["merchant_mismatch"])
        self.assertEqual(PG.order("lg-b", "LG-2")["status"], "pending")
        # B's own result is B's: it waits for the inquiry, as every card form
        self.check("2c2p", "lg-b", "LG-2",
                   pnsign.legacy_body(legacy_fields("LG-2", [("user_defined_2", "beta")]),
                                      LEGACY_KEY), FORM, "pending_confirmation", "pending")

    def test_alipay_passback(self):
        self.pair("ali-a", "ali-b", "ALI-1", cur="CNY")
        body = alipay_result("ALI-1", "shop-a")
        self.check("alipay", "ali-b", "ALI-1", body, FORM, "foreign_site")
        self.check("alipay", "ali-a", "ALI-1", body, FORM, "applied", "paid")
        self.pair("ali-a", "ali-b", "ALI-2", cur="CNY")
        self.check("alipay", "ali-b", "ALI-2", alipay_result("ALI-2"), FORM, "merchant_mismatch")
        self.check("alipay", "ali-b", "ALI-2", alipay_result("ALI-2", "shop-b"), FORM, "applied",
                   "paid")

    def test_wechatpay_v2_attach(self):
        self.pair("wx-a", "wx-b", "WX-1", cur="CNY")
        body = wx_result("WX-1", "shop-a")
        self.check("wechatpay", "wx-b", "WX-1", body, "text/xml", "foreign_site")
        self.check("wechatpay", "wx-a", "WX-1", body, "text/xml", "applied", "paid")
        self.pair("wx-a", "wx-b", "WX-2", cur="CNY")
        self.check("wechatpay", "wx-b", "WX-2", wx_result("WX-2"), "text/xml",
                   "merchant_mismatch")
        self.check("wechatpay", "wx-b", "WX-2", wx_result("WX-2", "shop-b"), "text/xml",
                   "applied", "paid")

    def test_sign_sets_the_marker(self):
        self.pair("tc-a", "tc-b", "SG-1")
        for args, site, want, status in ((("--site", "tc-b", "--marker", "shop-a"), "tc-b",
                                           "foreign_site", "pending"),
                                          (("--site", "tc-a"), "tc-a", "applied", "paid")):
            p = admin("-c", CFG, "sign", "2c2p", "--order", "SG-1", "--amount", "19.99",
                      "--currency", "SGD", *args)
            self.assertEqual(p.returncode, 0, p.stderr)
            body = p.stdout.split("\n\n", 1)[1].strip().encode() if "\n\n" in p.stdout \
                else p.stdout.strip().splitlines()[-1].encode()
            self.check("2c2p", site, "SG-1", body, JSON, want, status)
        p = admin("-c", CFG, "sign", "2c2p", "--site", "tc-a", "--order", "SG-1",
                  "--amount", "19.99", "--currency", "SGD", "--marker", "bad\x01")
        self.assertEqual(p.returncode, 64, p.stderr)

    def test_unmarked_single_site_unchanged(self):
        PG.add_order("solo", "SOLO-1", 1999, "SGD")
        self.check("2c2p", "solo", "SOLO-1", jwt_result("SOLO-1", merchant="JT02",
                                                        key="B" * 64),
                   JSON, "applied", "paid")


if __name__ == "__main__":
    unittest.main()

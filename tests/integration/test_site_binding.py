# test_site_binding.py: issue 11, "a genuine notification may only change the
# order it was signed for", with several sites in one configuration and
# genuinely signed notifications, every receiver run as CGI against a real
# (throwaway) PostgreSQL:
#   - shared Alipay app (one key, one app_id, two seller_ids): the other
#     seller's genuine notification posted to shop B is stored
#     merchant_mismatch under its own trade_no key, and shop B's own genuine
#     payment for the same out_trade_no is still applied and acked;
#   - two Stripe sites on one account (one secret) with stripe.site_metadata:
#     site A's payment for order 42 pays A's order 42 and is stored
#     foreign_site at B (a sibling's, counted, not on report; B's order 42
#     unchanged, 2xx); a marker naming no site: merchant_mismatch; a test-mode event
#     is stored mode_mismatch, acked, never applied;
#   - shared WeChat Pay v2 key in service-provider mode: a genuine refund of
#     site A re-posted to site B with the unsigned outer sub_mch_id edited
#     leaves B's never-paid order pending (txn_mismatch, needs the store's
#     weak_identity rule), and still refunds A's paid order;
#   - legacy 2C2P: a genuinely signed decline re-split into payment_status
#     000 is refused with 400 before the MAC, nothing stored, the order
#     stays failed; the genuine decline and a later genuine payment apply;
#   - the money rules (issue 11 items 5-7), driven for Alipay, Stripe,
#     WeChat Pay v2 and legacy 2C2P by genuinely signed notifications:
#     a second real payment of a paid order is duplicate_payment (acked,
#     order unchanged); a payment of a closed order is applied and flagged
#     paid_after_close, of a failed one (a failed attempt) just applied
#     (issue 22); the same event key with other content is
#     conflicting_duplicate (the first stays authoritative);
#   - a site whose key file is unusable answers 503 (retry later) while the
#     other sites of the file keep working; check-config stays strict;
#   - Alipay sign_type RSA with a 1024-bit key loads and verifies
#     (check-config warns); RSA2 with the same key is refused naming the
#     site; check-config warns about Stripe sites without a marker.
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

Cipher = pnsign.AESGCM      # None without python3-cryptography

PG = None
CFG = None
CFGDIR = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "keys")
ALI_PRIV = os.path.join(KEYS, "site-a-private.pem")
ALI_PUB = os.path.join(KEYS, "site-a-public.pem")
APP_ID = "2021000000000001"
SELLER_A, SELLER_B = "2088000000000001", "2088000000000002"
WHSEC = "whsec_shared_account_secret"
SP_MCHID, SUB_A, SUB_B = "1900000100", "1900000201", "1900000202"
WX_APPID = "wxd678efh567hg6787"
APIV2 = "SharedSPAPIv2Key0123456789abcdef"
LEGACY_KEY = "TESTSECRET"
FORM = "application/x-www-form-urlencoded"


def write_config():
    return pntest.write_site_config(PG, [
        "[site ali-a]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_A,
        "alipay.public_key_file = ali.pem", "",
        "[site ali-b]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_B,
        "alipay.public_key_file = ali.pem", "",
        "[site st-a]", "stripe.secret_files = whsec", "stripe.site_metadata = site=st-a", "",
        "[site st-b]", "stripe.secret_files = whsec", "stripe.site_metadata = site=st-b", "",
        "[site wx-a]", "wechatpay.mchid = %s" % SUB_A, "wechatpay.appid = %s" % WX_APPID,
        "wechatpay.apiv2_key_file = apiv2", "",
        "[site wx-b]", "wechatpay.mchid = %s" % SUB_B, "wechatpay.appid = %s" % WX_APPID,
        "wechatpay.apiv2_key_file = apiv2", "",
        "[site legacy]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = 2c2p.key",
        "2c2p.api = redirect",
    ], secrets=[("whsec", WHSEC + "\n"), ("apiv2", APIV2 + "\n"), ("2c2p.key", LEGACY_KEY + "\n")],
        files=[(ALI_PUB, "ali.pem")], prefix="pntest-binding-cfg.")


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = write_config()


def tearDownModule():
    if PG is not None:
        PG.destroy()


def post(provider, site, body, headers, config=None):
    return pntest.run_cgi(pntest.binary(provider), "POST", "/notify/%s/%s" % (provider, site),
                          headers, body, config or CFG)


def admin(*args):
    return subprocess.run([ADMIN] + list(args), env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def rows(where):
    return PG.notifications(where)


# ---- signers ---------------------------------------------------------------

def alipay(seller, oid, amount, trade_no, md="RSA2", key=ALI_PRIV):
    site = pntest.Site("x", APP_ID, seller, key, None, ())
    return pntest.alipay_notification(site, oid, amount, trade_no=trade_no, key=key, sign_type=md)


v2_xml = pnsign.wechat_v2_xml


def wx_payment(sub, oid, fee, txn):
    f = [("appid", WX_APPID), ("bank_type", "CFT"), ("fee_type", "CNY"), ("mch_id", SP_MCHID),
         ("nonce_str", "n" + txn), ("openid", "o1"), ("out_trade_no", oid), ("result_code", "SUCCESS"),
         ("return_code", "SUCCESS"), ("sub_mch_id", sub), ("time_end", "20240520100005"),
         ("total_fee", str(fee)), ("trade_type", "JSAPI"), ("transaction_id", txn)]
    return pnsign.wechat_v2_signed_xml(f, APIV2)


def wx_refund(sub, oid, total, fee, txn, refund_id):
    inner = v2_xml([("out_refund_no", "R-" + refund_id), ("out_trade_no", oid),
                    ("refund_fee", str(fee)), ("refund_id", refund_id),
                    ("refund_status", "SUCCESS"), ("success_time", "2024-05-21 10:00:00"),
                    ("total_fee", str(total)), ("transaction_id", txn)], root="root")
    req_info = pnsign.wechat_v2_seal(inner, APIV2)
    # the outer ids are not covered by anything: a sender may write any
    return v2_xml([("return_code", "SUCCESS"), ("appid", WX_APPID), ("mch_id", SP_MCHID),
                   ("sub_mch_id", sub), ("nonce_str", "r" + refund_id), ("req_info", req_info)])


def legacy_fields(oid, status, channel_code):
    return [("version", "7.0"), ("request_timestamp", "2024-01-01 12:00:00"),
            ("merchant_id", "JT01"), ("order_id", oid), ("invoice_no", ""), ("currency", "702"),
            ("amount", "000000001999"), ("transaction_ref", "7654321"), ("approval_code", "123456"),
            ("eci", "05"), ("transaction_datetime", "2024-01-01 12:00:05"),
            ("payment_channel", "001"), ("payment_status", status),
            ("channel_response_code", channel_code), ("channel_response_desc", "declined"),
            ("masked_pan", "411111XXXXXX1111")]


def legacy_hash(fields):
    return pnsign.legacy_hash(fields, LEGACY_KEY)


def legacy_body(fields, hv):
    return pnsign.legacy_body(fields, LEGACY_KEY, hash_value=hv)


def confirm(site):
    """The store's half of a confirmation, as `paynotify query` calls it when
    WeChat Pay's signed refundquery answer has the stored refund (the answer
    side: tests/integration/test_v2_refund_confirm.py)."""
    out = []
    for r in rows("site = %s AND outcome = 'pending_confirmation'" % pntest.q(site)):
        out += [x[0] for x in PG.psql(
            "SELECT outcome FROM paynotify.confirm_refund(%s, %s, %s, %s, %s, %s, 'confirmed', "
            "'confirmed in the test')" % (r["id"], pntest.q(r["dedup_key"]), pntest.q(r["order_id"]),
                                          pntest.q(r["psp_txn_id"]), r["amount_minor"],
                                          r["refund_minor"]))]
    return out


def store_knows_weak_identity():
    """The store's weak_identity rule (issue 11, SQL half) is installed."""
    return PG.scalar("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                     "WHERE n.nspname = 'paynotify' AND p.prosrc LIKE '%txn_mismatch%'") != "0"


# ---------------------------------------------------------------------------

class SiteBinding(unittest.TestCase):
    def setUp(self):
        if not PG.running:
            PG.start()
        PG.reset()

    def test_alipay_shared_app_foreign_seller_does_not_swallow(self):
        PG.add_order("ali-b", "ORD-7", 8888, "CNY")
        PG.add_order("ali-a", "ORD-7", 8888, "CNY")
        # seller A's genuine payment for ITS order ORD-7 arrives at shop B
        r = post("alipay", "ali-b", alipay(SELLER_A, "ORD-7", "88.88", "2024052022001400000000000A01"),
                 pntest.alipay_headers())
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        got = rows("site = 'ali-b'")
        # keyed by A's trade_no, and stored outside B's key space (the store
        # prefixes flagged keys), so it can never make B's payment a duplicate
        self.assertEqual([x["outcome"] for x in got], ["merchant_mismatch"])
        self.assertTrue(got[0]["dedup_key"].endswith("2024052022001400000000000A01:TRADE_SUCCESS"),
                        got[0]["dedup_key"])
        self.assertEqual(PG.order("ali-b", "ORD-7")["status"], "pending")
        # shop B's own genuine payment for the same out_trade_no is applied
        r = post("alipay", "ali-b", alipay(SELLER_B, "ORD-7", "88.88", "2024052022001400000000000B01"),
                 pntest.alipay_headers())
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        self.assertEqual(PG.order("ali-b", "ORD-7")["status"], "paid")
        self.assertEqual(PG.order("ali-b", "ORD-7")["psp_txn_id"], "2024052022001400000000000B01")
        self.assertEqual(sorted(x["outcome"] for x in rows("site = 'ali-b'")),
                         ["applied", "merchant_mismatch"])
        # the other site's order never moved
        self.assertEqual(PG.order("ali-a", "ORD-7")["status"], "pending")

    def stripe_send(self, site, body):
        return post("stripe", site, body, pntest.stripe_headers(None, body, secret=WHSEC))

    def test_stripe_shared_account(self):
        PG.add_order("st-a", "42", 1999, "USD")
        PG.add_order("st-b", "42", 1999, "USD")
        body = pntest.stripe_checkout_completed("42", 1999, metadata={"site": "st-a"})
        for site in ("st-b", "st-a"):       # Stripe sends it to every endpoint
            r = self.stripe_send(site, body)
            self.assertEqual(r.status // 100, 2, r)
        self.assertEqual(PG.order("st-a", "42")["status"], "paid")
        self.assertEqual(PG.order("st-b", "42")["status"], "pending")
        # st-a's marker at st-b: a sibling's event, foreign_site (counted, not
        # on report; issue 22), under its own key
        self.assertEqual([(x["outcome"], x["dedup_key"][:14]) for x in rows("site = 'st-b'")],
                         [("foreign_site", "!foreign_site:")])
        self.assertEqual([x["outcome"] for x in rows("site = 'st-a'")], ["applied"])
        # no marker at all: refused for both (merchant_mismatch), stored, acked
        PG.add_order("st-b", "43", 1999, "USD")
        r = self.stripe_send("st-b", pntest.stripe_checkout_completed("43", 1999))
        self.assertEqual(r.status // 100, 2, r)
        self.assertEqual(PG.order("st-b", "43")["status"], "pending")

    def test_stripe_refund_without_marker_needs_the_verified_payment(self):
        if not store_knows_weak_identity():
            self.skipTest("the store has no weak_identity rule yet (issue 11, SQL half)")
        PG.add_order("st-a", "R-1", 1999, "USD")
        PG.add_order("st-b", "R-1", 1999, "USD")
        r = self.stripe_send("st-a", pntest.stripe_checkout_completed(
            "R-1", 1999, payment_intent="pi_shared_r1", metadata={"site": "st-a"}))
        self.assertEqual(r.status // 100, 2, r)
        # the charge carries no marker (Checkout metadata is not copied to it)
        body = pntest.stripe_charge_refunded(None, 1999, 500, payment_intent="pi_shared_r1")
        for site in ("st-b", "st-a"):
            r = self.stripe_send(site, body)
            self.assertEqual(r.status // 100, 2, r)
        a, b = PG.order("st-a", "R-1"), PG.order("st-b", "R-1")
        self.assertEqual((a["status"], a["refunded_minor"]), ("partially_refunded", 500))
        self.assertEqual((b["status"], b["refunded_minor"], b["paid"]), ("pending", 0, False))
        self.assertEqual([x["outcome"] for x in rows("site = 'st-b'")], ["txn_mismatch"])
        # another site's marker on a refund: foreign_site, whatever the PaymentIntent
        body = pntest.stripe_charge_refunded("R-1", 1999, 800, payment_intent="pi_shared_r1",
                                             metadata={"site": "st-b"})
        r = self.stripe_send("st-a", body)
        self.assertEqual(r.status // 100, 2, r)
        self.assertEqual(PG.order("st-a", "R-1")["refunded_minor"], 500)

    def test_stripe_test_mode_event(self):
        # a test-mode event with the right marker: mode_mismatch, acked, never applied
        PG.add_order("st-b", "44", 1999, "USD")
        r = self.stripe_send("st-b", pntest.stripe_checkout_completed(
            "44", 1999, metadata={"site": "st-b"}, livemode=False))
        self.assertEqual(r.status // 100, 2, r)
        self.assertEqual(PG.order("st-b", "44")["status"], "pending")
        self.assertEqual([x["outcome"] for x in rows("site = 'st-b' AND order_id = '44'")],
                         ["mode_mismatch"])
        # and B's own live event with its marker is applied
        r = self.stripe_send("st-b", pntest.stripe_checkout_completed(
            "44", 1999, metadata={"site": "st-b"}))
        self.assertEqual(r.status // 100, 2, r)
        self.assertEqual(PG.order("st-b", "44")["status"], "paid")

    @unittest.skipIf(Cipher is None, "python3-cryptography is not installed")
    def test_wechat_v2_refund_outer_id_decides_nothing(self):
        if not store_knows_weak_identity():
            self.skipTest("the store has no weak_identity rule yet (issue 11, SQL half)")
        PG.add_order("wx-a", "WX-9", 1000, "CNY")
        PG.add_order("wx-b", "WX-9", 1000, "CNY")
        txn = "4200000000202405201234567890"
        r = post("wechatpay", "wx-a", wx_payment(SUB_A, "WX-9", 1000, txn), {"Content-Type": "text/xml"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order("wx-a", "WX-9")["status"], "paid")
        # site A's genuine refund, outer sub_mch_id edited to B, posted to B
        r = post("wechatpay", "wx-b", wx_refund(SUB_B, "WX-9", 1000, 300, txn, "5030000000001"),
                 {"Content-Type": "text/xml"})
        self.assertEqual(r.status, 200, r)
        b = PG.order("wx-b", "WX-9")
        self.assertEqual((b["status"], b["paid"], b["refunded_minor"]), ("pending", False, 0))
        # a v2 refund waits for WeChat Pay's signed refundquery answer (issue 23);
        # confirmed (the refund is genuine), the weak-identity rules still refuse it at B
        self.assertEqual([x["outcome"] for x in rows("site = 'wx-b'")], ["pending_confirmation"])
        self.assertEqual(confirm("wx-b"), ["txn_mismatch"])
        b = PG.order("wx-b", "WX-9")
        self.assertEqual((b["status"], b["paid"], b["refunded_minor"]), ("pending", False, 0))
        # the same genuine refund where it belongs (outer ids as sent) refunds A, once
        # confirmed (`paynotify query` against the stand-in: test_v2_refund_confirm.py)
        r = post("wechatpay", "wx-a", wx_refund(SUB_A, "WX-9", 1000, 300, txn, "5030000000001"),
                 {"Content-Type": "text/xml"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order("wx-a", "WX-9")["refunded_minor"], 0)
        self.assertEqual(confirm("wx-a"), ["applied"])
        a = PG.order("wx-a", "WX-9")
        self.assertEqual((a["status"], a["refunded_minor"]), ("partially_refunded", 300))

    def test_2c2p_legacy_resplit_refused(self):
        PG.add_order("legacy", "L-1", 1999, "SGD")
        declined = legacy_fields("L-1", "002", "000")
        hv = legacy_hash(declined)
        # the buyer's browser gets this signed decline; re-split: 001002 | 000
        forged = [(k, {"payment_channel": "001002", "payment_status": "000",
                       "channel_response_code": ""}.get(k, v)) for k, v in declined]
        self.assertEqual(legacy_hash(forged), hv, "the re-split must carry the genuine MAC")
        r = post("2c2p", "legacy", legacy_body(forged, hv), {"Content-Type": FORM})
        self.assertEqual(r.status, 400, r)
        self.assertIn("payment_channel", r.stderr)
        self.assertEqual(rows("site = 'legacy'"), [])
        self.assertEqual(PG.order("legacy", "L-1")["status"], "pending")
        # the genuine decline applies (failed), and the forgery still cannot pay it
        r = post("2c2p", "legacy", legacy_body(declined, hv), {"Content-Type": FORM})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order("legacy", "L-1")["status"], "failed")
        r = post("2c2p", "legacy", legacy_body(forged, hv), {"Content-Type": FORM})
        self.assertEqual(r.status, 400, r)
        self.assertEqual(PG.order("legacy", "L-1")["status"], "failed")
        # a later genuine payment pays it (a form with one split: its
        # transaction_ref is the transaction; test_query confirms the rest)
        paid = [(k, {"transaction_ref": "P9A", "approval_code": "", "eci": ""}.get(k, v))
                for k, v in legacy_fields("L-1", "000", "00")]
        r = post("2c2p", "legacy", legacy_body(paid, legacy_hash(paid)), {"Content-Type": FORM})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order("legacy", "L-1")["status"], "paid")

    def test_alipay_rsa1024_for_sign_type_rsa(self):
        d = pntest.temp_dir("pntest-rsa1024.")
        priv, pub = os.path.join(d, "k.pem"), os.path.join(d, "k.pub.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024",
                        "-out", priv], check=True, capture_output=True)
        subprocess.run(["openssl", "pkey", "-in", priv, "-pubout", "-out", pub], check=True,
                       capture_output=True)

        def cfg(sign_type):
            return pntest.write_site_config(PG, [
                "[site old]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_A,
                "alipay.public_key_file = old.pem", "alipay.sign_type = %s" % sign_type, "",
                "[site new]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_B,
                "alipay.public_key_file = new.pem"],
                files=[(pub, "old.pem"), (ALI_PUB, "new.pem")], prefix="pntest-rsa1024-cfg.")
        rsa = cfg("RSA")
        PG.add_order("old", "OLD-1", 100, "CNY")
        r = post("alipay", "old", alipay(SELLER_A, "OLD-1", "1.00", "2024052022001400000000000C01",
                                         md="RSA", key=priv), pntest.alipay_headers(), rsa)
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        self.assertEqual(PG.order("old", "OLD-1")["status"], "paid")
        p = admin("check-config", "-c", rsa)
        self.assertRegex(p.stdout, r"WARNING: site old: Alipay key old\.pem:[0-9a-f]{8} has 1024 bits")
        p = admin("check-config", "-c", cfg("RSA2"))
        self.assertEqual(p.returncode, 78, p)   # a configuration error
        self.assertRegex(p.stderr + p.stdout, r'site "old": Alipay key old\.pem:[0-9a-f]{8} has 1024 bits')

    def test_bad_key_disables_only_its_own_site(self):
        d = pntest.temp_dir("pntest-badkey.")
        with open(os.path.join(d, "bad.pem"), "w") as f:
            f.write("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n")
        cfg = pntest.write_site_config(PG, [
            "[site good]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_A,
            "alipay.public_key_file = ali.pem", "",
            "[site broken]", "alipay.app_id = %s" % APP_ID, "alipay.seller_id = %s" % SELLER_B,
            "alipay.public_key_file = %s" % os.path.join(d, "bad.pem")],
            files=[(ALI_PUB, "ali.pem")], prefix="pntest-badkey-cfg.")
        PG.add_order("good", "G-1", 100, "CNY")
        PG.add_order("broken", "G-1", 100, "CNY")
        r = post("alipay", "good", alipay(SELLER_A, "G-1", "1.00", "2024052022001400000000000D01"),
                 pntest.alipay_headers(), cfg)
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        self.assertEqual(PG.order("good", "G-1")["status"], "paid")
        r = post("alipay", "broken", alipay(SELLER_B, "G-1", "1.00", "2024052022001400000000000D02"),
                 pntest.alipay_headers(), cfg)
        self.assertEqual((r.status, r.body), (503, b"fail"), r)    # Alipay retries
        self.assertIn("site broken is disabled", r.stderr)
        self.assertEqual(PG.order("broken", "G-1")["status"], "pending")
        # the operator's check stays strict
        p = admin("check-config", "-c", cfg)
        self.assertEqual(p.returncode, 78, p)   # a configuration error
        self.assertIn("bad.pem", p.stdout + p.stderr)

    def test_check_config_warns_unmarked_stripe_sites(self):
        # two endpoints (their own secrets) that may be on one account
        two = pntest.write_site_config(PG, [
            "[site s1]", "stripe.secret_files = whsec", "",
            "[site s2]", "stripe.secret_files = whsec2", "stripe.site_metadata = site=s2"],
            secrets=[("whsec", WHSEC + "\n"), ("whsec2", WHSEC + "-other\n")],
            prefix="pntest-binding-cfg.")
        p = admin("check-config", "-c", two)
        self.assertIn("2 sites configure Stripe and 1 of them set no stripe.site_metadata", p.stdout)
        p = admin("check-config", "-c", CFG)
        self.assertNotIn("stripe.site_metadata", p.stdout)
        bad = pntest.write_site_config(PG, [
            "[site s1]", "stripe.secret_files = whsec", "stripe.site_metadata = no-equals-sign"],
            secrets=[("whsec", WHSEC + "\n")], prefix="pntest-binding-cfg.")
        p = admin("check-config", "-c", bad)
        self.assertEqual(p.returncode, 78, p)   # a configuration error
        self.assertIn("invalid stripe.site_metadata", p.stderr + p.stdout)
        bad = pntest.write_site_config(PG, [
            "[site s1]", "stripe.secret_files = whsec", "stripe.mode = sandbox"],
            secrets=[("whsec", WHSEC + "\n")], prefix="pntest-binding-cfg.")
        p = admin("check-config", "-c", bad)
        self.assertEqual(p.returncode, 78, p)   # a configuration error
        self.assertIn('invalid value "sandbox" for "stripe.mode"', p.stderr + p.stdout)


# ---- the money rules with genuinely signed notifications (items 5-7) -------

class Provider:
    """One provider's genuinely signed payments for one site of this config."""
    def __init__(self, name, site, currency, amount_minor, pay, ok):
        self.name, self.site, self.currency, self.amount_minor = name, site, currency, amount_minor
        self.pay, self.ok = pay, ok


def _alipay_pay(oid, txn, amount_minor):
    return (alipay(SELLER_B, oid, "%d.%02d" % divmod(amount_minor, 100), "20240520220014" + txn),
            pntest.alipay_headers())


def _stripe_pay(oid, txn, amount_minor, event_id=None):
    body = pntest.stripe_checkout_completed(oid, amount_minor, payment_intent="pi_" + txn,
                                            event_id=event_id, metadata={"site": "st-a"})
    return body, pntest.stripe_headers(None, body, secret=WHSEC)


def _wx_pay(oid, txn, amount_minor):
    return wx_payment(SUB_A, oid, amount_minor, "4200" + txn), {"Content-Type": "text/xml"}


def _legacy_pay(oid, txn, amount_minor, status="000"):
    # a 28-character transaction_ref with a 6-character approval_code and a
    # 2-digit eci: the one way to split that segment, so the form names its
    # transaction and applies at once (docs/2C2P.md "Which transaction")
    f = [(k, {"order_id": oid, "amount": "%012d" % amount_minor,
              "transaction_ref": txn.rjust(28, "0"),
              "payment_status": status, "channel_response_code": "00"}.get(k, v))
         for k, v in legacy_fields(oid, status, "00")]
    return legacy_body(f, legacy_hash(f)), {"Content-Type": FORM}


def _ok_alipay(t, r):
    t.assertEqual((r.status, r.body), (200, b"success"), r)


def _ok_2xx(t, r):
    t.assertEqual(r.status // 100, 2, r)


PROVIDERS = [
    Provider("alipay", "ali-b", "CNY", 8888, _alipay_pay, _ok_alipay),
    Provider("stripe", "st-a", "USD", 1999, _stripe_pay, _ok_2xx),
    Provider("wechatpay", "wx-a", "CNY", 1000, _wx_pay, _ok_2xx),
    Provider("2c2p", "legacy", "SGD", 1999, _legacy_pay, _ok_2xx),
]


class MoneyRules(unittest.TestCase):
    def setUp(self):
        if not PG.running:
            PG.start()
        PG.reset()

    def outcomes(self, p, oid):
        return [x["outcome"] for x in rows("site = %s AND order_id = %s" % (pntest.q(p.site),
                                                                            pntest.q(oid)))]

    def send(self, p, body_headers):
        body, headers = body_headers
        r = post(p.name, p.site, body, headers)
        p.ok(self, r)
        return r

    def test_second_real_payment_is_duplicate_payment(self):
        for p in PROVIDERS:
            with self.subTest(provider=p.name):
                oid = "DUP-" + p.name
                PG.add_order(p.site, oid, p.amount_minor, p.currency)
                first = p.pay(oid, "000000000011", p.amount_minor)
                self.send(p, first)
                self.send(p, first)                                         # a retry
                self.send(p, p.pay(oid, "000000000022", p.amount_minor))   # another charge
                o = PG.order(p.site, oid)
                self.assertEqual(o["status"], "paid")
                self.assertTrue(o["psp_txn_id"].endswith("000000000011"), o)
                self.assertEqual(self.outcomes(p, oid), ["applied", "duplicate_payment"])
                self.assertEqual(rows("site = %s AND order_id = %s AND outcome = 'applied'"
                                      % (pntest.q(p.site), pntest.q(oid)))[0]["deliveries"], 2)

    def test_payment_of_closed_or_failed_order_is_paid_after_close(self):
        """A closed order paid: paid_after_close.  A failed one (the last
        attempt failed; the buyer may try again on the same order): applied."""
        for p in PROVIDERS:
            for status in ("closed", "failed"):
                with self.subTest(provider=p.name, status=status):
                    oid = "PAC-%s-%s" % (p.name, status)
                    PG.add_order(p.site, oid, p.amount_minor, p.currency, status=status)
                    self.send(p, p.pay(oid, "00000000003" + status[0].replace("c", "1")
                                       .replace("f", "2"), p.amount_minor))
                    self.assertEqual(PG.order(p.site, oid)["status"], "paid")
                    self.assertEqual(self.outcomes(p, oid),
                                     ["paid_after_close" if status == "closed" else "applied"])

    def test_legacy_2c2p_decline_then_payment_is_applied(self):
        p = PROVIDERS[3]
        PG.add_order(p.site, "PAC-2", 1999, "SGD")
        self.send(p, _legacy_pay("PAC-2", "81", 1999, status="002"))
        self.assertEqual(PG.order(p.site, "PAC-2")["status"], "failed")
        self.send(p, _legacy_pay("PAC-2", "82", 1999))
        self.assertEqual(PG.order(p.site, "PAC-2")["status"], "paid")
        self.assertEqual(self.outcomes(p, "PAC-2"), ["applied", "applied"])

    def test_same_key_other_content_is_conflicting_duplicate(self):
        cases = {
            # same trade_no and status, another amount
            "alipay": lambda oid: (_alipay_pay(oid, "000000000044", 8888),
                                   _alipay_pay(oid, "000000000044", 8800)),
            # the same event id carrying another amount
            "stripe": lambda oid: (_stripe_pay(oid, "000000000044", 1999, event_id="evt_conf_1"),
                                   _stripe_pay(oid, "000000000044", 1900, event_id="evt_conf_1")),
            # same transaction_id and result, another total_fee
            "wechatpay": lambda oid: (_wx_pay(oid, "000000000044", 1000),
                                      _wx_pay(oid, "000000000044", 999)),
        }
        for p in PROVIDERS[:3]:
            with self.subTest(provider=p.name):
                oid = "CONF-" + p.name
                PG.add_order(p.site, oid, p.amount_minor, p.currency)
                first, second = cases[p.name](oid)
                self.send(p, first)
                self.send(p, second)
                self.send(p, second)        # its retries count there
                self.assertEqual(PG.order(p.site, oid)["status"], "paid")
                got = rows("site = %s AND order_id = %s" % (pntest.q(p.site), pntest.q(oid)))
                self.assertEqual([(x["outcome"], x["amount_minor"], x["deliveries"]) for x in got],
                                 [("applied", p.amount_minor, 1),
                                  ("conflicting_duplicate", got[1]["amount_minor"], 2)])
                self.assertNotEqual(got[1]["amount_minor"], p.amount_minor)

    def test_legacy_2c2p_resplit_is_the_same_pending_event(self):
        """The transaction_ref/approval_code/eci split that formats cannot pin:
        the same signed form under the same key, one row, and neither split
        taken as the transaction (issue 23: before, the first split was
        recorded and 2C2P's own copy became a conflicting_duplicate)."""
        PG.add_order("legacy", "CONF-L", 1999, "SGD")
        f = [(k, {"order_id": "CONF-L", "channel_response_code": "00", "payment_status": "000"}
              .get(k, v)) for k, v in legacy_fields("CONF-L", "000", "00")]
        hv = legacy_hash(f)
        moved = [(k, {"transaction_ref": "765432112", "approval_code": "345605", "eci": ""}
                  .get(k, v)) for k, v in f]
        self.assertEqual(legacy_hash(moved), hv)
        for body in (legacy_body(moved, hv), legacy_body(f, hv)):
            r = post("2c2p", "legacy", body, {"Content-Type": FORM})
            self.assertEqual(r.status, 200, r)
        o = PG.order("legacy", "CONF-L")
        self.assertEqual((o["status"], o["psp_txn_id"]), ("pending", None))
        self.assertEqual([(x["outcome"], x["psp_txn_id"], x["deliveries"])
                          for x in rows("site = 'legacy'")],
                         [("pending_confirmation", None, 2)])

    def test_report_shows_the_money_outcomes(self):
        p = PROVIDERS[0]
        PG.add_order(p.site, "REP-1", 8888, "CNY")
        self.send(p, p.pay("REP-1", "000000000055", 8888))
        self.send(p, p.pay("REP-1", "000000000066", 8888))
        r = admin("-c", CFG, "report")
        self.assertIn("duplicate_payment", r.stdout, r.stdout + r.stderr)
        self.assertIn("88.88 CNY", r.stdout)


if __name__ == "__main__":
    unittest.main()

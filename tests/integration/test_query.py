# test_query.py: `paynotify query` against loopback stand-ins of the four
# providers' order-query APIs (tests/lib/psp_standins.py: HTTPS with a test
# CA made by the test and passed as [query] ca_file, every request's
# signature checked with the merchant's test key, every answer signed with
# the provider's test key) and a real (throwaway) PostgreSQL; late
# notifications go through the real receivers as CGI.  Per provider (Alipay,
# WeChat Pay v3, WeChat Pay v2 orderquery for a v2-only site, Stripe, 2C2P):
#   - a missed payment: query --apply applies it once; the late notification
#     is then a duplicate / already_applied, never a second application
#   - notification first, query second: no second application
#   - --dry-run asks and changes nothing
#   - a tampered answer and one signed with the wrong key are refused
#     (exit 1), nothing changes (Stripe: a server whose certificate the CA
#     file does not vouch for is refused, exit 3)
#   - not found and unpaid answers change nothing (exit 0); a closed answer
#     closes the order where the provider says so
#   - 5xx, timeout and connection refused: order unchanged, exit 3
#   - a paid answer for a closed order: paid_after_close (when the schema
#     has that outcome)
# 2C2P legacy Redirect API site (issue 23): a paid form whose transaction_ref
# + approval_code + eci splits several ways is stored pending_confirmation
# with no transaction; a re-split of it posted first is the same row (no
# conflicting_duplicate) and never recorded as the transaction; query
# --apply applies 2C2P's signed paymentInquiry answer (its tranRef) and
# confirms the form; an answer naming another transaction confirms nothing;
# a form that comes after the order was paid is confirmed by the timer's
# next run; report lists a form unconfirmed after an hour.
# And: usage errors (64), a Stripe sk_ key refused, a query key file with a
# bad mode refused by query but never read by the receiver, check-config
# shows the query credentials, a run recorded in paynotify.query_runs and
# exported by stats.

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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
MERCHANT_PRIV = os.path.join(KEYS, "test-b.key.pem")   # the app's / merchant's API key
MERCHANT_PUB = os.path.join(KEYS, "test-b.pub.pem")
PROVIDER_PRIV = os.path.join(KEYS, "test-a.key.pem")   # Alipay's / WeChat Pay's key (configured
WRONG_PRIV = os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem")
MERCHANT_SERIAL = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
STRIPE_RK = "rk_test_51QueryRestrictedKey0123456789"
SITE = "shop-x"
SITE_V2 = "shop-w2"
SITE_LEGACY = "shop-l"      # 2C2P legacy Redirect API, the same merchant and key
# its own appid: with SITE's mchid, appid and APIv2 key it would be a second
# site on one WeChat Pay identity, which the configuration refuses (issue 23)
WX_APPID_V2 = "wxd678efh567hg6799"

PG = None
SI = None
CFG = None


def write_config(url, ca_file, timeout_ms=1500, stripe_key=STRIPE_RK, key_mode=0o600,
                 alipay_certs=None):
    """pnkit's all-provider site plus the query keys, pointing at url."""
    cfg = pnkit.write_all_config(PG)
    d = cfg.dir
    shutil.copyfile(MERCHANT_PRIV, os.path.join(d, "merchant-api.key"))
    os.chmod(os.path.join(d, "merchant-api.key"), key_mode)
    pntest.write_secret(os.path.join(d, "stripe-rk"), stripe_key + "\n")
    with open(cfg.path) as f:
        text = f.read()
    text = text.replace("[site %s]\n" % SITE, "\n".join([
        "[query]",
        "ca_file = %s" % ca_file,
        "connect_timeout_ms = 1000",
        "timeout_ms = %d" % timeout_ms,
        "",
        "[site %s]" % SITE,
        "alipay.query_private_key_file = merchant-api.key",
        "alipay.query_url = %s/gateway.do" % url,
    ] + ([
        "alipay.query_app_cert_file = %s" % alipay_certs[0],
        "alipay.query_root_cert_file = %s" % alipay_certs[1],
    ] if alipay_certs else []) + [
        "wechatpay.query_private_key_file = merchant-api.key",
        "wechatpay.query_cert_serial = %s" % MERCHANT_SERIAL,
        "wechatpay.query_url = %s" % url,
        "stripe.query_key_file = stripe-rk",
        "stripe.query_url = %s" % url,
        "stripe.mode = test",       # rk_test_ key, test-mode PaymentIntents and events
        "2c2p.query_url = %s" % url,
        ""]))
    text += "\n".join(["", "[site %s]" % SITE_V2,      # WeChat Pay API v2 keys only
                       "wechatpay.mchid = %s" % pnkit.WX_MCHID,
                       "wechatpay.appid = %s" % WX_APPID_V2,
                       "wechatpay.apiv2_key_file = apiv2.key",
                       "wechatpay.query_url = %s" % url, ""])
    text += "\n".join(["", "[site %s]" % SITE_LEGACY,
                       "2c2p.merchant_id = %s" % pnkit.TWOC2P_MERCHANT,
                       "2c2p.secret_key_file = 2c2p.key",
                       "2c2p.api = redirect",
                       "2c2p.query_url = %s" % url, ""])
    with open(cfg.path, "w") as f:
        f.write(text)
    return cfg.path


def setUpModule():
    global PG, SI, CFG
    if psp_standins is None:
        raise unittest.SkipTest("python3-cryptography is needed for the stand-ins")
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=PROVIDER_PRIV, wrong_key=WRONG_PRIV, merchant_pub=MERCHANT_PUB,
        app_id=pnkit.ALIPAY_APP_ID, mchid=pnkit.WX_MCHID, merchant_serial=MERCHANT_SERIAL,
        wx_pubid=pnkit.WX_PUBID, stripe_key=STRIPE_RK, twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY, wx_apiv2=pnkit.WX_APIV2)
    CFG = write_config(SI.url, SI.ca_file)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def query(*args, config=None):
    p = subprocess.run([ADMIN, "-c", config or CFG, "query"] + list(args) + ["--format", "json"],
                       env=pntest.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    out = p.stdout.decode()
    rows = json.loads(out) if out.strip().startswith("[") else []
    return p.returncode, rows, p.stderr.decode()


class Base:
    """Cases every provider runs; subclasses say how the provider says things."""
    provider = None
    site = SITE
    v2 = False
    same_key = True     # the query's dedup key is the notification's (False: Stripe's evt_
                        # ids; Alipay until the adapters key on trade_no)
    currency = "CNY"
    amount_minor = 8888

    def setUp(self):
        PG.reset()
        SI.reset()
        self.oid = "Q%s-%s" % (self.provider, pnkit.seq())
        PG.add_order(self.site, self.oid, self.amount_minor, self.currency)

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    # ---- per provider: the stand-in's state and the late notification -------
    def set_paid(self):
        raise NotImplementedError

    def set_unpaid(self):
        raise NotImplementedError

    def notify(self):
        """The provider's notification of the same payment, through the receiver."""
        raise NotImplementedError

    # ---- helpers --------------------------------------------------------------
    def raw_text(self, raw):
        return raw

    def run_query(self, *extra, config=None):
        return query("--site", self.site, "--provider", self.provider, "--order", self.oid, *extra,
                     config=config)

    def applied_rows(self):
        return [n for n in PG.notifications("order_id = %s" % pntest.q(self.oid))
                if n["outcome"] == "applied"]

    def deliver(self):
        headers, body = self.notify()
        r = pntest.run_cgi(pntest.binary(self.provider), "POST",
                           pnkit.path(self.provider, self.site),
                           headers, body, config=CFG)
        self.assertTrue(pnkit.is_success(self.provider, r, v2=self.v2), (r.status, r.body,
                                                                          r.stderr))
        return r

    def assert_unchanged(self):
        self.assertEqual(PG.order(self.site, self.oid)["status"], "pending")
        self.assertEqual(PG.notifications("order_id = %s" % pntest.q(self.oid)), [])

    # ---- the cases --------------------------------------------------------------
    def test_missed_payment_applied_once_then_notification_is_duplicate(self):
        self.set_paid()
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([r["result"] for r in rows], ["applied"], rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "paid")
        stored = PG.notifications("order_id = %s" % pntest.q(self.oid))
        self.assertEqual(len(stored), 1)
        self.assertIn(self.oid.encode(), self.raw_text(stored[0]["raw_body"]),
                      "the verified answer is kept byte for byte")
        self.assertEqual(PG.scalar("SELECT source FROM paynotify.notifications WHERE id = %d"
                                   % stored[0]["id"]), "query")
        self.deliver()
        self.assertEqual(PG.order(self.site, self.oid)["status"], "paid")
        self.assertEqual(len(self.applied_rows()), 1, "a second application")
        rows = PG.notifications("order_id = %s" % pntest.q(self.oid))
        # same key: the query's row counts a second delivery; Stripe (evt_ key)
        # and an adapter keyed differently: a second row, already_applied
        if self.same_key:
            self.assertEqual((len(rows), rows[0]["deliveries"]), (1, 2), rows)
        else:
            self.assertTrue(rows[0]["deliveries"] == 2 or
                            (len(rows) == 2 and rows[1]["outcome"] == "already_applied"), rows)
        # asking again changes nothing either
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertIn(rows[0]["result"], ("duplicate", "already_applied"), rows)
        self.assertEqual(len(self.applied_rows()), 1)

    def test_notification_first_then_query_no_second_application(self):
        self.set_paid()
        self.deliver()
        self.assertEqual(PG.order(self.site, self.oid)["status"], "paid")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertIn(rows[0]["result"], ("duplicate", "already_applied"), rows)
        self.assertEqual(len(self.applied_rows()), 1)

    def test_dry_run_changes_nothing(self):
        self.set_paid()
        rc, rows, err = self.run_query("--dry-run")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "would_ingest_paid", rows)
        self.assert_unchanged()
        rc, rows, err = self.run_query()        # the default is a dry run
        self.assertEqual(rows[0]["result"], "would_ingest_paid", rows)
        self.assert_unchanged()

    def test_tampered_answer_refused(self):
        self.set_paid()
        SI.mode = "tamper"
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(rows[0]["result"], "refused", rows)
        self.assert_unchanged()

    def test_wrongly_signed_answer_refused(self):
        self.set_paid()
        SI.mode = "wrong_key"
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(rows[0]["result"], "refused", rows)
        self.assert_unchanged()

    def test_not_found_changes_nothing(self):
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "not_found", rows)
        self.assert_unchanged()

    def test_unpaid_changes_nothing(self):
        self.set_unpaid()
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "waiting", rows)
        self.assert_unchanged()

    def test_5xx_exit_3(self):
        self.set_paid()
        SI.mode = "500"
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 3, (rows, err))
        self.assertEqual(rows[0]["result"], "error", rows)
        self.assertIn("HTTP 502", rows[0]["detail"])
        self.assert_unchanged()

    def test_timeout_exit_3(self):
        self.set_paid()
        SI.mode = "sleep"
        SI.sleep_s = 3          # timeout_ms is 1500
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("timed out", rows[0]["detail"].lower() + err.lower())
        self.assert_unchanged()

    def test_connection_refused_exit_3(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()               # nothing listens there now
        cfg = write_config("https://127.0.0.1:%d" % port, SI.ca_file)
        self.set_paid()
        rc, rows, err = self.run_query("--apply", config=cfg)
        self.assertEqual(rc, 3, (rows, err))
        self.assertEqual(rows[0]["result"], "error", rows)
        self.assert_unchanged()
        self.assertEqual(SI.requests, [])

    def test_paid_for_closed_order_is_paid_after_close(self):
        PG.psql("UPDATE paynotify.orders SET status = 'closed' WHERE order_id = %s"
                % pntest.q(self.oid))
        self.set_paid()
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(rows[0]["result"], "paid_after_close", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "paid")   # the money is real
        # the human finds it on the report, marked as the query's
        p = subprocess.run([ADMIN, "-c", CFG, "report", "--site", self.site, "--format",
                            "json"], env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        found = [r for r in json.loads(p.stdout) if r["order_id"] == self.oid]
        self.assertEqual([r["kind"] for r in found], ["paid_after_close"], found)
        self.assertIn("(from query)", found[0]["detail"])


class TestAlipay(Base, unittest.TestCase):
    provider = "alipay"
    same_key = False    # duplicate once the adapters branch keys on trade_no

    def set_paid(self, status="TRADE_SUCCESS"):
        self.trade_no = "2024052022001" + pnkit.seq()
        SI.state[("alipay", self.oid)] = {"trade_no": self.trade_no, "trade_status": status,
                                          "total_amount": "88.88"}

    def set_unpaid(self):
        self.set_paid("WAIT_BUYER_PAY")

    def notify(self):
        return pnkit.sign_alipay_pairs(pnkit.alipay_params(self.oid, "88.88",
                                                           trade_no=self.trade_no))

    def test_closed_closes_the_order(self):
        self.set_paid("TRADE_CLOSED")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "closed")

    def test_answer_signature_covers_exact_member_bytes(self):
        """The stand-in signs the member's text; the query command must not
        re-serialise it (a re-serialised member would differ: ensure_ascii)."""
        self.set_paid()
        SI.state[("alipay", self.oid)]["layout"] = "odd"
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        raw = PG.notifications("order_id = %s" % pntest.q(self.oid))[0]["raw_body"]
        self.assertIn(b'\\u4f1a\\u5458', raw)       # stored as sent, escapes and all


class TestAlipayCurrency(unittest.TestCase):
    """total_amount is in the answer's signed trans_currency (CNY when the
    answer has none): an 88.88 USD trade pays an 88.88 USD order and never
    an 88.88 CNY one (issue 26); HKD and JPY (exponent 0) the same."""

    def setUp(self):
        PG.reset()
        SI.reset()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def ask(self, oid, order_currency, order_minor, total, **answer):
        PG.add_order(SITE, oid, order_minor, order_currency)
        st = {"trade_no": "2024120122001" + pnkit.seq(), "trade_status": "TRADE_SUCCESS",
              "total_amount": total}
        st.update(answer)
        SI.state[("alipay", oid)] = st
        return query("--site", SITE, "--provider", "alipay", "--order", oid, "--apply")

    def row(self, oid):
        n = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertEqual(len(n), 1, n)
        return n[0]["outcome"], n[0]["currency"], n[0]["amount_minor"]

    def test_foreign_currency_pays_its_own_order_only(self):
        for cur, total, minor, shown in (("USD", "88.88", 8888, "88.88 USD"),
                                         ("HKD", "88.88", 8888, "88.88 HKD"),
                                         ("JPY", "8888", 8888, "8888 JPY")):
            good, cny = "QC-%s-%s" % (cur, pnkit.seq()), "QC-CNY-%s-%s" % (cur, pnkit.seq())
            extra = dict(trans_currency=cur, settle_currency="USD", settle_amount="11.40")
            rc, rows, err = self.ask(good, cur, minor, total, **extra)
            self.assertEqual(rc, 0, (rows, err))
            self.assertEqual(rows[0]["result"], "applied", rows)
            self.assertEqual(PG.order(SITE, good)["status"], "paid", cur)
            self.assertEqual(self.row(good), ("applied", cur, minor))
            raw = PG.notifications("order_id = %s" % pntest.q(good))[0]["raw_body"]
            self.assertIn(b'"settle_currency":"USD","settle_amount":"11.40"', raw)

            rc, rows, err = self.ask(cny, "CNY", minor, total, **extra)
            self.assertNotEqual(rc, 0, (rows, err))
            self.assertEqual(rows[0]["result"], "amount_mismatch", rows)
            self.assertIn("paid %s, order 88.88 CNY pending" % shown, rows[0]["detail"], rows)
            self.assertEqual(PG.order(SITE, cny)["status"], "pending", cur)
            self.assertEqual(self.row(cny), ("amount_mismatch", cur, minor))

    def test_answer_without_trans_currency_is_cny(self):
        rc, rows, err = self.ask("QD-CNY-" + pnkit.seq(), "CNY", 8888, "88.88")
        self.assertEqual((rc, rows[0]["result"]), (0, "applied"), (rows, err))
        oid = "QD-USD-" + pnkit.seq()
        rc, rows, err = self.ask(oid, "USD", 8888, "88.88")
        self.assertEqual(rows[0]["result"], "amount_mismatch", (rows, err))
        self.assertEqual(self.row(oid), ("amount_mismatch", "CNY", 8888))
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_malformed_trans_currency_flagged(self):
        for bad in ("usd", "US$", "XQQ", 840):
            oid = "QM-" + pnkit.seq()
            rc, rows, err = self.ask(oid, "USD", 8888, "88.88", trans_currency=bad)
            self.assertNotEqual(rc, 0, (rows, err))
            self.assertEqual(rows[0]["result"], "amount_mismatch", (bad, rows))
            self.assertIn('trans_currency "%s"' % (bad if isinstance(bad, str)
                                                   else "(not a string)"),
                          rows[0]["detail"], rows)
            self.assertEqual(self.row(oid), ("amount_mismatch", None, None))
            self.assertEqual(PG.order(SITE, oid)["status"], "pending", bad)


class TestAlipayCertificateMode(unittest.TestCase):
    """Public-key certificate mode: app_cert_sn and alipay_root_cert_sn as the
    SDKs compute them go with the request (the stand-in refuses anything
    else); the answer carries alipay_cert_sn after the member."""

    def test_paid_with_certificate_serials(self):
        PG.reset()
        SI.reset()
        d = pntest.temp_dir("pnquery-alipay-certs.")
        app, root, app_sn, root_sn = psp_standins.alipay_cert_files(d, MERCHANT_PUB)
        cfg = write_config(SI.url, SI.ca_file, alipay_certs=(app, root))
        SI.alipay_cert_sns = (app_sn, root_sn)
        PG.add_order(SITE, "AC-1", 8888, "CNY")
        SI.state[("alipay", "AC-1")] = {"trade_no": "2024120122001400077",
                                        "trade_status": "TRADE_SUCCESS", "total_amount": "88.88"}
        rc, rows, err = query("--site", SITE, "--provider", "alipay", "--order", "AC-1",
                              "--apply", config=cfg)
        self.assertEqual(SI.bad_requests, [], "app_cert_sn / alipay_root_cert_sn wrong")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertIn(b'"alipay_cert_sn"', PG.notifications("order_id = 'AC-1'")[0]["raw_body"])
        # without the certificates the stand-in (expecting them) refuses the request
        SI.bad_requests.clear()
        rc, rows, err = query("--site", SITE, "--provider", "alipay", "--order", "AC-1")
        self.assertEqual(len(SI.bad_requests), 1)
        SI.bad_requests.clear()


class TestWechatPay(Base, unittest.TestCase):
    provider = "wechatpay"

    def set_paid(self, state="SUCCESS", mchid=None):
        self.txn = "4200000" + pnkit.seq()
        SI.state[("wechatpay", self.oid)] = {"trade_state": state, "total": 8888,
                                             "transaction_id": self.txn,
                                             "appid": pnkit.WX_APPID,
                                             "mchid": mchid or pnkit.WX_MCHID}

    def set_unpaid(self):
        self.set_paid("NOTPAY")

    def notify(self):
        return pnkit.wechat_paid(self.oid, 8888, txn=self.txn)

    def test_closed_closes_the_order(self):
        self.set_paid("CLOSED")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "closed")

    def test_other_merchant_stored_flagged(self):
        self.set_paid(mchid="1900000999")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(rows[0]["result"], "merchant_mismatch", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "pending")


class TestWechatPayCombine(unittest.TestCase):
    """paynotify query --combine: a combine order (合单支付) of the site asked
    with GET /v3/combine-transactions/out-trade-no/{no}; each final
    sub-order of the site ingested as its notification's sub-order (the
    same key: the late combine notification is a duplicate per sub-order),
    another merchant's sub-order never ingested here."""

    def setUp(self):
        PG.reset()
        SI.reset()
        self.cotn = "CQ" + pnkit.seq()
        self.o1, self.o2, self.o3 = ("QC%s-%s" % (i, pnkit.seq()) for i in (1, 2, 3))
        for o in (self.o1, self.o2):
            PG.add_order(SITE, o, 1000, "CNY")
        self.t1, self.t2, self.t3 = ("4200009" + pnkit.seq() for _ in range(3))
        SI.state[("wechatpay-combine", self.cotn)] = {"appid": pnkit.WX_APPID, "sub_orders": [
            {"mchid": pnkit.WX_MCHID, "out_trade_no": self.o1, "trade_state": "SUCCESS",
             "transaction_id": self.t1, "total": 1000},
            {"mchid": "1900000777", "out_trade_no": self.o3, "trade_state": "SUCCESS",
             "transaction_id": self.t3, "total": 5},
            {"mchid": pnkit.WX_MCHID, "out_trade_no": self.o2, "trade_state": "NOTPAY",
             "transaction_id": self.t2, "total": 1000}]}

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def run_query(self, *extra):
        return query("--site", SITE, "--combine", self.cotn, *extra)

    def test_combine_order_applied_then_notification_duplicate(self):
        rc, rows, err = self.run_query("--dry-run")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["order_id"], r["answer"], r["result"]) for r in rows],
                         [(self.o1, "SUCCESS", "would_ingest_paid"),
                          (self.o3, "SUCCESS", "other_merchant"),
                          (self.o2, "NOTPAY", "waiting")])
        self.assertEqual(PG.notifications(), [])
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([r["result"] for r in rows], ["applied", "other_merchant", "waiting"])
        self.assertEqual(PG.order(SITE, self.o1)["status"], "paid")
        self.assertEqual(PG.order(SITE, self.o2)["status"], "pending")
        self.assertEqual(SI.requests, [("wechatpay", "/v3/combine-transactions/out-trade-no/"
                                        + self.cotn)] * 2)
        stored = PG.psql("SELECT dedup_key, outcome, source, parent_id IS NOT NULL, "
                         "length(raw_body) FROM paynotify.notifications ORDER BY id")
        self.assertEqual([(o, src, linked) for _, o, src, linked, _ in stored],
                         [("combined", "query", "f"), ("applied", "query", "t")])
        self.assertEqual(stored[1][0], self.t1 + ":TRANSACTION.SUCCESS")
        self.assertIn(self.cotn.encode(), PG.notifications()[0]["raw_body"])
        # the late combine notification: a duplicate for the queried sub-order
        res = {"combine_appid": pnkit.WX_APPID, "combine_mchid": pnkit.WX_MCHID,
               "combine_out_trade_no": self.cotn, "sub_orders": [
                   {"mchid": pnkit.WX_MCHID, "trade_state": "SUCCESS", "trade_type": "JSAPI",
                    "transaction_id": self.t1, "out_trade_no": self.o1,
                    "success_time": "2024-05-20T10:00:05+08:00",
                    "amount": {"total_amount": 1000, "payer_amount": 1000, "currency": "CNY"}}]}
        headers, body = pnkit.sign_wechat_v3(json.dumps(res, separators=(",", ":")))
        r = pntest.run_cgi(pntest.binary("wechatpay"), "POST", pnkit.path("wechatpay", SITE),
                           headers, body, config=CFG)
        self.assertIn(r.status, (200, 204), r)
        self.assertEqual(PG.psql("SELECT outcome, deliveries FROM paynotify.notifications "
                                 "WHERE dedup_key = %s" % pntest.q(self.t1 + ":TRANSACTION.SUCCESS")),
                         [("applied", "2")])
        # asking again: a duplicate, nothing applied twice
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "duplicate", rows)

    def test_tampered_and_wrongly_signed_answers_refused(self):
        for mode in ("tamper", "wrong_key"):
            SI.mode = mode
            rc, rows, err = self.run_query("--apply")
            self.assertEqual(rc, 1, (mode, rows, err))
            self.assertEqual([r["result"] for r in rows], ["refused"], rows)
        self.assertEqual(PG.notifications(), [])
        self.assertEqual(PG.order(SITE, self.o1)["status"], "pending")

    def test_not_found_and_usage(self):
        rc, rows, err = query("--site", SITE, "--combine", "NO-SUCH")
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["not_found"]), err)
        self.assertEqual(query("--combine", self.cotn)[0], 64)
        self.assertEqual(query("--site", SITE, "--combine", self.cotn, "--order", "x")[0], 64)
        self.assertEqual(query("--site", SITE, "--combine", self.cotn, "--provider",
                               "alipay")[0], 64)


class TestWechatPayV2(Base, unittest.TestCase):
    """A site with API v2 keys only: orderquery, signed with the APIv2 key."""
    provider = "wechatpay"
    site = SITE_V2
    v2 = True

    def set_paid(self, state="SUCCESS"):
        self.txn = "4200000" + pnkit.seq()
        SI.state[("wechatpay-v2", self.oid)] = {"trade_state": state, "total": 8888,
                                                "transaction_id": self.txn}

    def set_unpaid(self):
        self.set_paid("NOTPAY")

    def notify(self):
        fields = [(k, self.txn if k == "transaction_id" else WX_APPID_V2 if k == "appid" else v)
                  for k, v in pnkit.wechat_v2_fields(self.oid, 8888)]
        return pnkit.sign_wechat_v2(fields)

    def test_closed_closes_the_order(self):
        self.set_paid("CLOSED")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "closed")


class TestStripe(Base, unittest.TestCase):
    provider = "stripe"
    same_key = False
    currency = "USD"
    amount_minor = 1999

    def set_paid(self, status="succeeded"):
        self.pi = "pi_test_" + pnkit.seq()
        SI.state[("stripe", self.pi)] = {"id": self.pi, "order_id": self.oid, "amount": 1999,
                                         "currency": "usd", "status": status}

    def set_unpaid(self):
        self.set_paid("requires_payment_method")

    def notify(self):
        return pnkit.sign_stripe(pntest.stripe_checkout_completed(self.oid, 1999, "usd",
                                                                  payment_intent=self.pi,
                                                                  livemode=False))

    # Stripe answers carry no signature: authenticity is TLS to the host.
    def test_tampered_answer_refused(self):
        self.skipTest("Stripe does not sign API answers (see test_untrusted_certificate)")

    def test_wrongly_signed_answer_refused(self):
        self.skipTest("Stripe does not sign API answers (see test_untrusted_certificate)")

    def test_untrusted_certificate_refused(self):
        other = pntest.temp_dir("pnquery-ca.")
        other_ca = psp_standins.make_ca(other)[0]
        cfg = write_config(SI.url, other_ca)
        self.set_paid()
        rc, rows, err = self.run_query("--apply", config=cfg)
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("certificate", rows[0]["detail"].lower())
        self.assert_unchanged()

    def test_canceled_changes_nothing(self):
        self.set_paid("canceled")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "waiting", rows)
        self.assert_unchanged()

    def test_by_stored_payment_intent_id(self):
        self.set_paid()
        PG.psql("UPDATE paynotify.orders SET psp = 'stripe', psp_txn_id = %s WHERE order_id = %s"
                % (pntest.q(self.pi), pntest.q(self.oid)))
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertTrue(any(p.startswith("/v1/payment_intents/pi_") for _, p in SI.requests))

    def test_order_id_with_quote_and_backslash_searched_exactly(self):
        oid = "O'Brien\\-" + pnkit.seq()
        PG.add_order(SITE, oid, 1999, "USD")
        SI.state[("stripe", "pi_q")] = {"id": "pi_q", "order_id": oid, "amount": 1999,
                                        "currency": "usd", "status": "succeeded"}
        rc, rows, err = query("--site", SITE, "--provider", "stripe", "--order", oid, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)

    def test_secret_key_refused(self):
        cfg = write_config(SI.url, SI.ca_file, stripe_key="sk_test_51NotARestrictedKey000")
        self.set_paid()
        rc, rows, err = self.run_query("--apply", config=cfg)
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("secret key", rows[0]["detail"])
        self.assertEqual(SI.requests, [])


class TestTwoC2P(Base, unittest.TestCase):
    provider = "2c2p"
    currency = "SGD"
    amount_minor = 1999

    def set_paid(self, code="0000"):
        self.ref = "T" + pnkit.seq()
        SI.state[("2c2p", self.oid)] = {"amount": '"19.99"', "currency": "SGD",
                                        "tranRef": self.ref, "respCode": code}

    def set_unpaid(self):
        self.set_paid("0001")

    def notify(self):
        payload = json.loads(pnkit.twoc2p_payload(self.oid))
        payload["tranRef"] = self.ref
        return pnkit.sign_2c2p(json.dumps(payload, separators=(",", ":")))

    def raw_text(self, raw):
        return pnsign.b64u_decode(json.loads(raw)["payload"].split(".")[1])

    def test_not_found_changes_nothing(self):
        # 2C2P's not-found answer is unsigned ({"respCode":"2002",...}); it
        # changes nothing either way
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "not_found", rows)
        self.assertIn("2002", rows[0]["detail"])
        self.assert_unchanged()

    def test_signed_system_error_is_an_error(self):
        self.set_paid("0999")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 3, (rows, err))
        self.assertEqual(rows[0]["result"], "error", rows)
        self.assert_unchanged()

    def test_failed_fails_the_order(self):
        self.set_paid("4005")
        rc, rows, err = self.run_query("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "applied", rows)
        self.assertEqual(PG.order(self.site, self.oid)["status"], "failed")


legacy_form = pnkit.twoc2p_legacy_form if psp_standins else None


class TestTwoC2PLegacyConfirmation(unittest.TestCase):
    """Issue 23 item 3: the stored transaction is one 2C2P issued."""

    def setUp(self):
        PG.reset()
        SI.reset()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def post(self, body):
        r = pntest.run_cgi(pntest.binary("2c2p"), "POST", pnkit.path("2c2p", SITE_LEGACY),
                           {"Content-Type": "application/x-www-form-urlencoded"}, body,
                           config=CFG)
        self.assertTrue(pnkit.is_success("2c2p", r), (r.status, r.body, r.stderr))
        return r

    def rows(self, oid):
        return PG.notifications("site = %s AND order_id = %s" % (pntest.q(SITE_LEGACY),
                                                                 pntest.q(oid)))

    def detail(self, nid):
        return PG.scalar("SELECT outcome_detail FROM paynotify.notifications WHERE id = %d" % nid)

    def report(self):
        p = subprocess.run([ADMIN, "-c", CFG, "report", "--site", SITE_LEGACY, "--format", "json"],
                           env=pntest.clean_env(), capture_output=True, text=True, timeout=60)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return [(x["kind"], x["order_id"]) for x in json.loads(p.stdout or "[]")]

    def test_resplit_first_never_recorded_genuine_applies_after_inquiry(self):
        oid = "LQ-" + pnkit.seq()
        PG.add_order(SITE_LEGACY, oid, 1999, "SGD")
        genuine = ("7654321", "123456", "05")
        resplit = ("765432112", "345605", "")         # the same signed characters
        forged = legacy_form(oid, *resplit, signed=genuine)
        real = legacy_form(oid, *genuine)
        self.assertEqual(pnsign.legacy_hash(
            [(k, v[0]) for k, v in urllib_parse(forged).items() if k != "hash_value"],
            pnkit.TWOC2P_KEY), urllib_parse(real)["hash_value"][0],
            "the re-split must carry 2C2P's genuine MAC")
        # the buyer posts the re-split copy of their own paid form first
        r = self.post(forged)
        self.assertIn("outcome=pending_confirmation", r.stderr)
        got = self.rows(oid)
        self.assertEqual([(x["outcome"], x["psp_txn_id"]) for x in got],
                         [("pending_confirmation", None)])
        self.assertEqual(PG.order(SITE_LEGACY, oid)["status"], "pending")
        # 2C2P's own copy: the same event (no conflicting_duplicate), still
        # no transaction taken from either split
        self.post(real)
        got = self.rows(oid)
        self.assertEqual([(x["outcome"], x["psp_txn_id"], x["deliveries"]) for x in got],
                         [("pending_confirmation", None, 2)])
        self.assertEqual(PG.order(SITE_LEGACY, oid)["status"], "pending")
        # not on report within the hour; on it after
        self.assertNotIn(("pending_confirmation", oid), self.report())
        PG.psql("UPDATE paynotify.notifications SET received_at = received_at - interval '2 hours'"
                " WHERE order_id = %s" % pntest.q(oid))
        self.assertIn(("pending_confirmation", oid), self.report())
        # 2C2P's paymentInquiry (signed) says which transaction it was
        SI.state[("2c2p", oid)] = {"amount": '"19.99"', "currency": "SGD", "tranRef": genuine[0],
                                   "approvalCode": genuine[1], "eci": genuine[2],
                                   "respCode": "0000"}
        rc, out, err = query("--site", SITE_LEGACY, "--order", oid)       # dry run
        self.assertEqual(rc, 0, (out, err))
        self.assertIn("would confirm 1 stored notification", out[0]["detail"])
        self.assertEqual(PG.order(SITE_LEGACY, oid)["status"], "pending")
        rc, out, err = query("--site", SITE_LEGACY, "--order", oid, "--apply")
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual(out[0]["result"], "applied", out)
        self.assertIn("confirmed 1 stored notification", out[0]["detail"])
        o = PG.order(SITE_LEGACY, oid)
        self.assertEqual((o["status"], o["psp_txn_id"]), ("paid", genuine[0]))
        got = self.rows(oid)
        self.assertEqual(sorted((x["outcome"], x["psp_txn_id"]) for x in got),
                         [("already_applied", None), ("applied", genuine[0])])
        form_row = [x for x in got if x["outcome"] == "already_applied"][0]
        self.assertEqual(self.detail(form_row["id"]),
                         'confirmed by 2C2P paymentInquiry (tranRef 7654321, approvalCode '
                         '123456, eci 05); the form was posted with transaction_ref '
                         '"765432112" (re-split)')
        self.assertNotIn(("pending_confirmation", oid), self.report())
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE psp_txn_id = '765432112'"), "0")
        # a late copy of either split changes nothing; a second query neither
        r = self.post(forged)
        self.assertIn("outcome=duplicate", r.stderr)
        self.assertEqual(PG.scalar("SELECT outcome FROM paynotify.notifications WHERE id = %d"
                                   % form_row["id"]), "already_applied")
        rc, out, err = query("--site", SITE_LEGACY, "--order", oid, "--apply")
        self.assertEqual((rc, out[0]["result"]), (0, "duplicate"), (out, err))
        self.assertEqual(len(self.rows(oid)), 2)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed WHERE order_id = %s"
                                   % pntest.q(oid)), "1")

    def test_answer_of_another_transaction_confirms_nothing(self):
        oid = "LQ-" + pnkit.seq()
        PG.add_order(SITE_LEGACY, oid, 1999, "SGD")
        self.post(legacy_form(oid, "1111111", "222222", "05"))
        SI.state[("2c2p", oid)] = {"amount": '"19.99"', "currency": "SGD", "tranRef": "1111111",
                                   "approvalCode": "222223", "eci": "05", "respCode": "0000"}
        rc, out, err = query("--site", SITE_LEGACY, "--order", oid, "--apply")
        self.assertEqual(rc, 0, (out, err))
        self.assertNotIn("confirmed", out[0]["detail"])
        # 2C2P's signed answer is the payment; the form that names something
        # else stays for a person
        self.assertEqual(PG.order(SITE_LEGACY, oid)["status"], "paid")
        self.assertEqual(sorted(x["outcome"] for x in self.rows(oid)),
                         ["applied", "pending_confirmation"])

    def test_form_after_the_query_paid_is_confirmed_by_the_timer_run(self):
        """2C2P's form comes late, after query had already paid the order: the
        timer's run (--pending-older-than) asks about the paid order again
        because of its pending_confirmation form, and confirms it."""
        oid = "LQ-" + pnkit.seq()
        PG.add_order(SITE_LEGACY, oid, 1999, "SGD")
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '10 minutes' "
                "WHERE order_id = %s" % pntest.q(oid))
        SI.state[("2c2p", oid)] = {"amount": '"19.99"', "currency": "SGD", "tranRef": "3141592",
                                   "approvalCode": "653589", "eci": "07", "respCode": "0000"}
        rc, out, err = query("--site", SITE_LEGACY, "--pending-older-than", "60s", "--apply")
        self.assertEqual((rc, [(x["order_id"], x["result"]) for x in out]),
                         (0, [(oid, "applied")]), err)
        self.post(legacy_form(oid, "3141592", "653589", "07"))
        self.assertEqual(sorted(x["outcome"] for x in self.rows(oid)),
                         ["applied", "pending_confirmation"])
        # not yet older than the threshold: not asked
        rc, out, err = query("--site", SITE_LEGACY, "--pending-older-than", "60s", "--apply")
        self.assertEqual((rc, out), (0, []), err)
        PG.psql("UPDATE paynotify.notifications SET received_at = received_at - interval "
                "'2 minutes' WHERE outcome = 'pending_confirmation' AND order_id = %s"
                % pntest.q(oid))
        rc, out, err = query("--site", SITE_LEGACY, "--pending-older-than", "60s", "--apply")
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual([(x["order_id"], x["result"]) for x in out], [(oid, "duplicate")])
        self.assertIn("confirmed 1 stored notification", out[0]["detail"])
        self.assertEqual(sorted(x["outcome"] for x in self.rows(oid)),
                         ["already_applied", "applied"])
        self.assertEqual(PG.order(SITE_LEGACY, oid)["psp_txn_id"], "3141592")

    def test_unique_split_applies_at_once(self):
        oid = "LQ-" + pnkit.seq()
        PG.add_order(SITE_LEGACY, oid, 1999, "SGD")
        r = self.post(legacy_form(oid, "88A", "", ""))        # one way to read it
        self.assertIn("outcome=applied", r.stderr)
        o = PG.order(SITE_LEGACY, oid)
        self.assertEqual((o["status"], o["psp_txn_id"]), ("paid", "88A"))


def urllib_parse(body):
    import urllib.parse
    return urllib.parse.parse_qs(body.decode(), keep_blank_values=True)


def report_items(*extra):
    p = subprocess.run([ADMIN, "-c", CFG, "report", "--site", SITE, "--format", "json"]
                       + list(extra), env=pntest.clean_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    rows = json.loads(p.stdout.decode()) if p.stdout.strip() else []
    return p.returncode, [r for r in rows if r["kind"].startswith("complaint")]


def complaint_case(cid):
    rows = PG.psql("SELECT status, closed_at IS NOT NULL, order_id, psp_txn_id, amount_minor, "
                   "currency FROM paynotify.cases WHERE case_kind = 'complaint' AND case_id = %s"
                   % pntest.q(cid))
    return list(rows[0]) if rows else None


class ComplaintBase:
    """Complaints (issue 22): the notification names only the complaint; the
    verified answer of the provider's complaint query links it to the order
    (--complaints), and says whether it is still open.  Subclasses: how the
    provider notifies and what its stand-in answers."""
    provider = None

    def setUp(self):
        PG.reset()
        SI.reset()
        self.oid = "C%s-%s" % (self.provider, pnkit.seq())
        self.cid = "2002018" + pnkit.seq()
        PG.add_order(SITE, self.oid, 8888, "CNY")
        self.pay()
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid")

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def deliver(self, signed):
        headers, body = signed
        r = pntest.run_cgi(pntest.binary(self.provider), "POST", pnkit.path(self.provider, SITE),
                           headers, body, config=CFG)
        self.assertTrue(pnkit.is_success(self.provider, r), (r.status, r.body, r.stderr))
        return r

    def complaint_rows(self):
        return PG.notifications("event_kind = 'complaint'")

    def ask(self, *extra):
        return query("--complaints", "--site", SITE, "--provider", self.provider, *extra)

    def test_stored_linked_by_query_listed_while_open(self):
        self.deliver(self.notification())
        rows = self.complaint_rows()
        self.assertEqual([(r["outcome"], r["order_id"]) for r in rows], [("complaint", None)])
        self.assertEqual(complaint_case(self.cid)[1:3], ["f", None])
        rc, items = report_items()
        self.assertEqual((rc, [i["kind"] for i in items]), (1, ["complaint_open"]), items)
        self.assertIn("not linked to an order yet", items[0]["detail"])
        # its retry: a duplicate delivery of the same complaint and action
        self.deliver(self.notification())
        self.assertEqual([r["deliveries"] for r in self.complaint_rows()], [2])
        # the follow-up API, answer verified: linked to the order, still open
        self.set_answer(open_=True)
        rc, out, err = self.ask("--dry-run")
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual([r["result"] for r in out], ["would_ingest_complaint"], out)
        self.assertEqual(complaint_case(self.cid)[2], None, "a dry run changed the case")
        rc, out, err = self.ask("--apply")
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual([r["result"] for r in out], ["complaint"], out)
        st = complaint_case(self.cid)
        self.assertEqual(st, [self.open_state, "f", self.oid, self.txn, "8888", "CNY"])
        rows = self.complaint_rows()
        self.assertEqual(PG.scalar("SELECT source FROM paynotify.notifications WHERE id = %d"
                                   % rows[-1]["id"]), "query")
        self.assertEqual(rows[-1]["order_id"], self.oid)
        rc, items = report_items()
        self.assertEqual([(i["kind"], i["order_id"], i["amount"]) for i in items],
                         [("complaint_open", self.oid, "88.88 CNY")], items)
        self.assertIn("order paid", items[0]["detail"])
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid", "a complaint moved the order")
        # asked again, unchanged: a duplicate, not a second event
        rc, out, err = self.ask("--apply")
        self.assertEqual([r["result"] for r in out], ["duplicate"], out)
        # the provider closes it: off the report (once --closed-within passed)
        self.set_answer(open_=False)
        rc, out, err = self.ask("--apply")
        self.assertEqual((rc, [r["result"] for r in out]), (0, ["complaint"]), (out, err))
        self.assertEqual(complaint_case(self.cid)[:2], [self.closed_state, "t"])
        rc, items = report_items()
        self.assertEqual([i["kind"] for i in items], ["complaint_closed"], items)
        self.assertEqual(report_items("--closed-within", "0"), (0, []))
        # a closed complaint is not asked about again
        rc, out, err = self.ask("--apply")
        self.assertEqual((rc, out), (0, []), err)
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid")

    def test_phone_number_never_stored_decrypted(self):
        self.deliver(self.notification())
        self.set_answer(open_=True)
        rc, out, err = self.ask("--apply")
        self.assertEqual(rc, 0, (out, err))
        row = PG.notifications("source = 'query' AND event_kind = 'complaint'")[-1]
        # the answer is kept byte for byte (its signature covers it): the
        # phone field as the provider sent it, never decrypted, in no column
        self.assertIn(self.phone_field.encode(), row["raw_body"])
        text = " ".join(str(v) for k, v in row.items() if k != "raw_body")
        self.assertNotIn("1380000", text)
        self.assertEqual(PG.psql("SELECT count(*) FROM paynotify.cases WHERE "
                                 "concat_ws(' ', reason, status, order_id) LIKE '%1380000%'"),
                         [("0",)])

    def test_tampered_and_wrongly_signed_answers_refused(self):
        self.deliver(self.notification())
        self.set_answer(open_=True)
        for mode in ("tamper", "wrong_key"):
            SI.mode = mode
            rc, out, err = self.ask("--apply")
            self.assertEqual(rc, 1, (mode, out, err))
            self.assertEqual([r["result"] for r in out], ["refused"], (mode, out))
            self.assertEqual(complaint_case(self.cid)[1:3], ["f", None], mode)
        SI.mode = None
        self.assertEqual(len(self.complaint_rows()), 1)

    def test_unknown_complaint_changes_nothing(self):
        self.deliver(self.notification())
        rc, out, err = self.ask("--apply")
        # WeChat Pay: 404 RESOURCE_NOT_EXISTS is "not found" (exit 0: nothing to do but
        # the report, where it stays open); Alipay names no such sub_code: an error (3)
        want = ("not_found", 0) if self.provider == "wechatpay" else ("error", 3)
        self.assertEqual((out[0]["result"], rc), want, (out, err))
        self.assertEqual(complaint_case(self.cid)[1:3], ["f", None])


class TestWechatPayComplaints(ComplaintBase, unittest.TestCase):
    provider = "wechatpay"
    open_state = "PENDING"
    closed_state = "PROCESSED"
    phone_field = '"payer_phone":"Uy5Hdwwb5Tj2gHm0Qm0aEhQbNmmTdf6KJq3Q2a/Bb9Q="'

    def pay(self):
        self.txn = "4200000" + pnkit.seq()
        self.deliver(pnkit.wechat_paid(self.oid, 8888, txn=self.txn))

    def notification(self, action="CREATE_COMPLAINT"):
        plain = json.dumps({"complaint_id": self.cid, "action_type": action},
                           separators=(",", ":"))
        return pnkit.sign_wechat_v3(plain, event="COMPLAINT.CREATE", aad="complaint")

    def set_answer(self, open_, mchid=None):
        SI.state[("wechatpay-complaint", self.cid)] = {
            "state": self.open_state if open_ else self.closed_state, "txn": self.txn,
            "otn": self.oid, "amount": 8888, "mchid": mchid or pnkit.WX_MCHID}

    def test_other_merchants_complaint_refused(self):
        self.deliver(self.notification())
        self.set_answer(open_=True, mchid="1900000999")
        rc, out, err = self.ask("--apply")
        self.assertEqual(rc, 1, (out, err))
        self.assertEqual([r["result"] for r in out], ["refused"], out)
        self.assertIn("1900000999", out[0]["detail"])
        self.assertEqual(complaint_case(self.cid)[2], None)

    def test_continued_complaint_reopens(self):
        self.deliver(self.notification())
        self.set_answer(open_=False)
        self.assertEqual(self.ask("--apply")[0], 0)
        self.assertEqual(complaint_case(self.cid)[1], "t")
        self.deliver(self.notification("USER_RESPONSE"))
        self.assertEqual(complaint_case(self.cid)[1], "t", "a message does not reopen it")
        self.deliver(self.notification("CONTINUE_COMPLAINT"))
        self.assertEqual(complaint_case(self.cid)[:2], ["CONTINUE_COMPLAINT", "f"])
        self.assertEqual([i["kind"] for i in report_items()[1]], ["complaint_open"])


class TestAlipayComplaints(ComplaintBase, unittest.TestCase):
    provider = "alipay"
    open_state = "MERCHANT_PROCESSING"
    closed_state = "FINISHED"
    phone_field = '"phone_no":"ENC(1380000xxxx)"'

    def pay(self):
        self.txn = "2024052022001" + pnkit.seq()
        self.deliver(pnkit.sign_alipay_pairs(pnkit.alipay_params(self.oid, "88.88",
                                                                 trade_no=self.txn)))

    def notification(self, app_id=pnkit.ALIPAY_APP_ID, notify_id=None):
        # Alipay's message service: a form like a notification, to the app's gateway
        return pnkit.sign_alipay_pairs([
            ("charset", "utf-8"),
            ("biz_content", json.dumps({"complain_event_id": self.cid})),
            ("msg_method", "alipay.merchant.tradecomplain.changed"),
            ("utc_timestamp", "1716170405000"), ("version", "1.1"), ("sign_type", "RSA2"),
            ("notify_id", notify_id or "nid" + self.cid), ("app_id", app_id)])

    def set_answer(self, open_):
        SI.state[("alipay-complaint", self.cid)] = {
            "status": self.open_state if open_ else self.closed_state, "txn": self.txn,
            "otn": self.oid, "amount": "88.88"}

    def test_another_apps_message_is_merchant_mismatch(self):
        self.deliver(self.notification(app_id="2021000000000777"))
        self.assertEqual([r["outcome"] for r in self.complaint_rows()], ["merchant_mismatch"])
        self.assertIsNone(complaint_case(self.cid))

    def test_each_message_of_a_complaint_stored(self):
        self.deliver(self.notification())
        self.deliver(self.notification(notify_id="nid2" + self.cid))
        self.assertEqual(len(self.complaint_rows()), 2)
        self.assertEqual(PG.psql("SELECT events FROM paynotify.cases WHERE case_id = %s"
                                 % pntest.q(self.cid)), [("2",)])


class TestCommand(unittest.TestCase):
    def setUp(self):
        PG.reset()
        SI.reset()

    def test_usage_errors(self):
        for args in ([], ["--order", "x", "--pending-older-than", "5m"],
                     ["--order", "x", "--dry-run", "--apply"],
                     ["--pending-older-than", "5 weeks"], ["--order", "x", "--provider", "paypal"],
                     ["--pending-older-than", "5m", "--pending-younger-than", "1m"],
                     ["--order", "x", "--pending-younger-than", "1h"],
                     ["--order", "x", "--site", "no-such-site"], ["--order", ""],
                     ["--complaints", "--order", "x"],
                     ["--complaints", "--pending-older-than", "5m"]):
            rc, rows, err = query(*args)
            self.assertEqual(rc, 64, (args, err))
            self.assertTrue(err.startswith("paynotify"), err)

    def test_pending_older_than_selects_old_pending_orders(self):
        PG.add_order(SITE, "old-1", 8888, "CNY")
        PG.add_order(SITE, "new-1", 8888, "CNY")
        PG.add_order(SITE, "paid-1", 8888, "CNY", status="paid")
        PG.add_order(SITE, "ancient-1", 8888, "CNY")
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '10 minutes' "
                "WHERE order_id IN ('old-1', 'paid-1')")
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '2 days' "
                "WHERE order_id = 'ancient-1'")
        SI.state[("alipay", "old-1")] = {"trade_no": "T1", "trade_status": "TRADE_SUCCESS",
                                         "total_amount": "88.88"}
        rc, rows, err = query("--pending-older-than", "5m", "--pending-younger-than", "1d",
                              "--provider", "alipay", "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["order_id"], r["result"]) for r in rows], [("old-1", "applied")])
        self.assertEqual(PG.order(SITE, "new-1")["status"], "pending")
        # the run is recorded, and stats exports it
        run = PG.psql("SELECT orders, asked, final, applied, exit_code, dry_run "
                      "FROM paynotify.query_runs ORDER BY id DESC LIMIT 1")
        self.assertEqual([tuple(x) for x in run], [("1", "1", "1", "1", "0", "f")])
        p = subprocess.run([ADMIN, "-c", CFG, "stats", "--format", "prometheus"],
                           env=pntest.clean_env(), stdout=subprocess.PIPE, timeout=30)
        text = p.stdout.decode()
        self.assertIn("paynotify_query_last_run_timestamp_seconds ", text)
        self.assertIn('paynotify_query_last_run_orders{result="applied"} 1', text)
        self.assertIn('paynotify_events_by_source_total{site="shop-x",provider="alipay",'
                      'source="query"} 1', text)
        # replay re-verifies notifications only: the query's row is not "unverified"
        p = subprocess.run([ADMIN, "-c", CFG, "replay", "--site", SITE, "--format", "json"],
                           env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(json.loads(p.stdout or b"[]"), [])

    def test_every_provider_asked_when_the_order_names_none(self):
        PG.add_order(SITE, "any-1", 8888, "CNY")
        rc, rows, err = query("--site", SITE, "--order", "any-1")
        self.assertEqual(sorted(r["provider"] for r in rows),
                         ["2c2p", "alipay", "stripe", "wechatpay"], rows)

    def test_bad_key_mode_refused_by_query_never_read_by_receiver(self):
        cfg = write_config(SI.url, SI.ca_file, key_mode=0o644)
        PG.add_order(SITE, "mode-1", 8888, "CNY")
        rc, rows, err = query("--site", SITE, "--order", "mode-1", "--provider", "alipay",
                              config=cfg)
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("must not be accessible", rows[0]["detail"])
        headers, body = pnkit.alipay_paid("mode-1", "88.88")
        r = pntest.run_cgi(pntest.binary("alipay"), "POST", pnkit.path("alipay"), headers, body,
                           config=cfg)
        self.assertTrue(pnkit.is_success("alipay", r), (r.status, r.body, r.stderr))

    def test_check_config_checks_query_credentials(self):
        p = subprocess.run([ADMIN, "-c", CFG, "check-config"], env=pntest.clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, out + p.stderr.decode())
        self.assertIn("query alipay: ok", out)
        self.assertIn("query stripe: ok (rk_test_ key)", out)
        cfg = write_config(SI.url, SI.ca_file, stripe_key="sk_live_51NotRestricted0000")
        p = subprocess.run([ADMIN, "-c", cfg, "check-config"], env=pntest.clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 78)     # a configuration error (docs/OPERATIONS.md)
        self.assertIn("secret key", p.stdout.decode() + p.stderr.decode())

    def test_no_query_secret_in_output_or_database(self):
        PG.add_order(SITE, "sec-1", 1999, "USD")
        SI.state[("stripe", "pi_sec")] = {"id": "pi_sec", "order_id": "sec-1", "amount": 1999,
                                          "currency": "usd", "status": "succeeded"}
        SI.state[("alipay", "sec-1")] = {"trade_no": "T9", "trade_status": "WAIT_BUYER_PAY",
                                         "total_amount": "19.99"}
        bad = write_config(SI.url, SI.ca_file, stripe_key="rk_test_51WrongKeyForThisTest000")
        with open(MERCHANT_PRIV) as f:
            pem_lines = [l.strip() for l in f if l.strip() and not l.startswith("-----")]
        outputs = []
        for cfg in (CFG, bad):
            rc, rows, err = query("--site", SITE, "--order", "sec-1", "--apply", config=cfg)
            outputs.append(json.dumps(rows) + err)
            p = subprocess.run([ADMIN, "-c", cfg, "check-config"], env=pntest.clean_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            outputs.append((p.stdout + p.stderr).decode())
        SI.bad_requests.clear()     # the wrong key was refused, as it should be
        stored = PG.psql("SELECT raw_headers::text || encode(raw_body, 'escape') "
                         "FROM paynotify.notifications")
        outputs += [r[0] for r in stored]
        self.assertTrue(stored, "the Stripe answer was stored")
        for text in outputs:
            for secret in [STRIPE_RK, "rk_test_51WrongKeyForThisTest000"] + pem_lines:
                self.assertNotIn(secret, text)

    def test_http_url_refused_by_config(self):
        cfg = write_config("http://127.0.0.1:1", SI.ca_file)
        rc, rows, err = query("--order", "x", config=cfg)
        self.assertEqual(rc, 78, err)          # a configuration error
        self.assertIn("expected an https:// URL", err)


if __name__ == "__main__":
    unittest.main()

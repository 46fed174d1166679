# test_confirm.py: `paynotify confirm`, the shop's "is this order paid?"
# endpoint (issue 26, item 6; docs/SHOP-ORDERS.md "The buyer returns:
# confirm"), the real program over FastCGI (--listen unix:, 2 workers), a
# real (throwaway) PostgreSQL, and the loopback stand-ins of the providers'
# query APIs (tests/lib/psp_standins.py: signed Alipay and Stripe answers,
# every request's signature checked; requests counted there):
#   - a final order is answered as stored without a provider call;
#   - a pending order paid at the provider is confirmed through the stand-in
#     (the same verified query and ingest as `query --order ID --apply`):
#     "paid", the order paid once, the late notification a duplicate;
#   - a pending order still unpaid: asked, answered pending;
#   - a provider slower than confirm.timeout_ms: answered pending within
#     the bound (+1 s), the order unchanged;
#   - the rate limit: a second request within confirm.min_interval_s does
#     not reach the provider (200, "rate_limited"), also from another
#     worker, and two concurrent requests ask once;
#   - authentication: no ts/token 401; a wrong token, another site's key,
#     a token for another order, a stale or future ts, a site without a key
#     403; an unknown order 404; bad input 400; a method 405;
#   - the database down: 503, and the next request after it is back works.

import concurrent.futures
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

try:
    import pnkit  # noqa: E402
    import psp_standins  # noqa: E402
except ImportError:     # pragma: no cover (python3-cryptography missing)
    psp_standins = None

# the build under test (tests/sanitize.sh points PN_BIN_DIR at its ASan build)
ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
MERCHANT_SERIAL = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
STRIPE_RK = "rk_test_51ConfirmRestrictedKey0123456789"
SITE = "shop-x"
SITE_B = "shop-b"           # a second site with its own key
SITE_NOKEY = "shop-n"       # a site without confirm.secret_file
KEY_A = "a3f1c2d4e5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4e5f60718"
KEY_B = "0b1c2d3e4f5a69788796a5b4c3d2e1f0f1e2d3c4b5a6978899aabbccddeeff00"
# confirm's bound on an ask; valgrind and ASan stretch it (an RSA signature
# and a TLS handshake under valgrind take more than a second)
TIMEOUT_MS = 1000 * pntest.SLOWDOWN
INTERVAL_S = 30

PG = None
SI = None
CFG = None
SRV = None


class Confirm:
    """paynotify -c CFG confirm --listen unix:SOCK --workers N, its log in a file."""

    def __init__(self, config, workers=2):
        self.config = config
        self.workers = workers
        self.proc = None

    def start(self, timeout=30):
        self.dir = pntest.scratch_dir("pnconfirm.")
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "confirm.sock")
        self.log = os.path.join(self.dir, "confirm.log")
        pntest.add_cleanup(self.stop)
        with open(self.log, "wb") as lf:
            self.proc = subprocess.Popen(
                pntest.valgrind_argv([ADMIN, "-c", self.config, "confirm", "--listen",
                                      "unix:" + self.sock, "--workers", str(self.workers)]),
                stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, cwd="/",
                env=pntest.clean_env(), start_new_session=True)
        deadline = time.monotonic() + pntest.patience(timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("confirm exited at start-up:\n" + self.log_text())
            if os.path.exists(self.sock) and len(self.children()) >= self.workers:
                return self
            time.sleep(0.05)
        raise RuntimeError("confirm did not start:\n" + self.log_text())

    def children(self):
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def log_text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        pntest.wait_sigterm_ready([self.proc])
        self.proc.terminate()
        try:
            self.proc.wait(timeout=pntest.patience(20))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def write_config():
    cfg = pnkit.write_all_config(PG)
    d = cfg.dir
    shutil.copyfile(os.path.join(KEYS, "test-b.key.pem"), os.path.join(d, "merchant-api.key"))
    os.chmod(os.path.join(d, "merchant-api.key"), 0o600)
    pntest.write_secret(os.path.join(d, "stripe-rk"), STRIPE_RK + "\n")
    pntest.write_secret(os.path.join(d, "confirm-a.key"), KEY_A + "\n")
    pntest.write_secret(os.path.join(d, "confirm-b.key"), KEY_B + "\n")
    # the other sites' own Stripe endpoints (one shared secret would be refused)
    pntest.write_secret(os.path.join(d, "whsec-b"), "whsec_confirm_site_b\n")
    pntest.write_secret(os.path.join(d, "whsec-n"), "whsec_confirm_site_n\n")
    with open(cfg.path) as f:
        text = f.read()
    text = text.replace("[site %s]\n" % SITE, "\n".join([
        "[query]",
        "ca_file = %s" % SI.ca_file,
        "connect_timeout_ms = %d" % TIMEOUT_MS,
        "timeout_ms = %d" % (5 * TIMEOUT_MS),   # longer than confirm.timeout_ms: its bound decides
        "",
        "[site %s]" % SITE,
        "alipay.query_private_key_file = merchant-api.key",
        "alipay.query_url = %s/gateway.do" % SI.url,
        "stripe.query_key_file = stripe-rk",
        "stripe.query_url = %s" % SI.url,
        "stripe.mode = test",
        "confirm.secret_file = confirm-a.key",
        "confirm.timeout_ms = %d" % TIMEOUT_MS,
        "confirm.min_interval_s = %d" % INTERVAL_S,
        ""]))
    text += "\n".join(["", "[site %s]" % SITE_B,
                       "stripe.secret_files = whsec-b",
                       "confirm.secret_file = confirm-b.key", "",
                       "[site %s]" % SITE_NOKEY,
                       "stripe.secret_files = whsec-n", ""])
    with open(cfg.path, "w") as f:
        f.write(text)
    return cfg.path


def setUpModule():
    global PG, SI, CFG, SRV
    if psp_standins is None:
        raise unittest.SkipTest("python3-cryptography is needed for the stand-ins")
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=os.path.join(KEYS, "test-a.key.pem"),
        wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem"),
        merchant_pub=os.path.join(KEYS, "test-b.pub.pem"), app_id=pnkit.ALIPAY_APP_ID,
        mchid=pnkit.WX_MCHID, merchant_serial=MERCHANT_SERIAL, wx_pubid=pnkit.WX_PUBID,
        stripe_key=STRIPE_RK, twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY, wx_apiv2=pnkit.WX_APIV2)
    CFG = write_config()
    SRV = Confirm(CFG).start()


def tearDownModule():
    if SRV is not None:
        SRV.stop()
    if PG is not None:
        PG.destroy()


def token(key, site, oid, ts):
    msg = "paynotify-confirm\n%s\n%s\n%s" % (site, oid, ts)
    return hmac.new(key.encode(), msg.encode(), hashlib.sha256).hexdigest()


def ask(site, oid, key=KEY_A, ts=None, tok=None, method="POST", fields=None, sock=None):
    """One request; (HTTP status, the JSON answer, seconds taken)."""
    ts = str(int(time.time())) if ts is None else ts
    form = {"site": site, "order_id": oid, "ts": ts,
            "token": tok if tok is not None else token(key, site, oid, ts)}
    if fields is not None:
        form = fields
    body = urllib.parse.urlencode(form)
    params = {"REQUEST_METHOD": method, "SCRIPT_NAME": "/paynotify-confirm",
              "REQUEST_URI": "/paynotify-confirm", "SERVER_PROTOCOL": "HTTP/1.1",
              "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "localhost", "SERVER_PORT": "8081"}
    if method == "POST":
        params.update({"CONTENT_TYPE": "application/x-www-form-urlencoded",
                       "CONTENT_LENGTH": str(len(body)), "QUERY_STRING": ""})
        data = body
    else:
        params.update({"QUERY_STRING": body, "CONTENT_LENGTH": "0"})
        data = b""
    t0 = time.monotonic()
    r = pntest.fcgi_request(sock or SRV.sock, params, data, timeout=30)
    took = time.monotonic() - t0
    try:
        answer = json.loads(r.body)
    except ValueError:
        raise AssertionError("not JSON: %r (%s)" % (r.body, r.status))
    return r.status, answer, took


def provider_requests(prov):
    return [p for pv, p in SI.requests if pv == prov]


class Base(unittest.TestCase):
    def setUp(self):
        PG.reset()
        SI.reset()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def order(self, psp="alipay", status="pending", minor=8888, currency="CNY", site=SITE):
        oid = "C-%s" % pnkit.seq()
        PG.add_order(site, oid, minor, currency, status=status)
        PG.psql("UPDATE paynotify.orders SET psp = %s WHERE site = %s AND order_id = %s"
                % (pntest.q(psp), pntest.q(site), pntest.q(oid)))
        return oid

    def alipay_paid(self, oid, status="TRADE_SUCCESS", amount="88.88"):
        trade_no = "2024052022001" + pnkit.seq()
        SI.state[("alipay", oid)] = {"trade_no": trade_no, "trade_status": status,
                                     "total_amount": amount}
        return trade_no


class TestAnswers(Base):
    def test_final_order_answered_as_stored_without_a_provider_call(self):
        oid = self.order(status="paid")
        self.alipay_paid(oid, "WAIT_BUYER_PAY")   # the provider would say otherwise
        code, a, _ = ask(SITE, oid)
        self.assertEqual(code, 200, a)
        self.assertEqual((a["status"], a["source"], a["asked"], a["amount"]),
                         ("paid", "stored", False, "88.88 CNY"))
        self.assertNotIn("rate_limited", a)
        self.assertEqual(SI.requests, [])
        self.assertEqual(PG.psql("SELECT count(*) FROM paynotify.confirm_asks WHERE order_id = %s"
                                 % pntest.q(oid)), [("0",)])

    def test_pending_alipay_order_confirmed_through_the_provider(self):
        oid = self.order()
        trade_no = self.alipay_paid(oid)
        code, a, _ = ask(SITE, oid)
        self.assertEqual(code, 200, a)
        self.assertEqual((a["status"], a["source"], a["asked"], a["result"]),
                         ("paid", "provider", True, "applied"), a)
        self.assertEqual(len(provider_requests("alipay")), 1)
        o = PG.order(SITE, oid)
        self.assertEqual((o["status"], o["psp_txn_id"]), ("paid", trade_no))
        applied = [n for n in PG.notifications("order_id = %s" % pntest.q(oid))
                   if n["outcome"] == "applied"]
        self.assertEqual(len(applied), 1)
        # now final: the next request (even within the interval) is stored
        code, a, _ = ask(SITE, oid)
        self.assertEqual((code, a["status"], a["source"], a["asked"]),
                         (200, "paid", "stored", False))
        self.assertEqual(len(provider_requests("alipay")), 1)

    def test_pending_stripe_order_confirmed_through_the_provider(self):
        oid = self.order(psp="stripe", minor=1999, currency="USD")
        pi = "pi_confirm_" + pnkit.seq()
        SI.state[("stripe", pi)] = {"id": pi, "order_id": oid, "amount": 1999,
                                    "currency": "usd", "status": "succeeded"}
        code, a, _ = ask(SITE, oid)
        self.assertEqual(code, 200, a)
        self.assertEqual((a["status"], a["source"], a["asked"], a["amount"]),
                         ("paid", "provider", True, "19.99 USD"), a)
        self.assertEqual(PG.order(SITE, oid)["psp_txn_id"], pi)
        self.assertTrue(provider_requests("stripe"))

    def test_unpaid_at_the_provider_answered_pending(self):
        oid = self.order()
        self.alipay_paid(oid, "WAIT_BUYER_PAY")
        code, a, _ = ask(SITE, oid)
        self.assertEqual(code, 200, a)
        self.assertEqual((a["status"], a["source"], a["asked"], a["result"]),
                         ("pending", "provider", True, "waiting"), a)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_unknown_at_the_provider_answered_pending(self):
        oid = self.order()
        code, a, _ = ask(SITE, oid)
        self.assertEqual((code, a["status"], a["asked"], a["result"]),
                         (200, "pending", True, "not_found"), a)

    def test_slow_provider_answered_pending_within_the_bound(self):
        oid = self.order()
        self.alipay_paid(oid)
        SI.mode = "sleep"
        SI.sleep_s = TIMEOUT_MS / 1000.0 + 3
        code, a, took = ask(SITE, oid)
        self.assertEqual(code, 200, a)
        self.assertEqual((a["status"], a["result"]), ("pending", "error"), a)
        # the bound plus the answer (valgrind and ASan slow the answer down)
        self.assertLess(took, TIMEOUT_MS / 1000.0 + (1.0 if pntest.SLOWDOWN == 1 else 5.0),
                        "confirm.timeout_ms not kept")
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        # the timed-out ask used up the interval: the next one is not asked
        SI.mode = None
        code, a, _ = ask(SITE, oid)
        self.assertEqual((a["status"], a["asked"], a.get("rate_limited")),
                         ("pending", False, True), a)
        self.assertEqual(len(provider_requests("alipay")), 1)

    def test_late_notification_after_confirm_is_a_duplicate(self):
        oid = self.order()
        trade_no = self.alipay_paid(oid)
        code, a, _ = ask(SITE, oid)
        self.assertEqual(a["status"], "paid", a)
        r = pntest.run_cgi(pntest.binary("alipay"), "POST", pnkit.path("alipay", SITE),
                           *pnkit.sign_alipay_pairs(pnkit.alipay_params(oid, "88.88",
                                                                        trade_no=trade_no)),
                           config=CFG)
        self.assertTrue(pnkit.is_success("alipay", r), (r.status, r.body, r.stderr))
        outcomes = sorted(n["outcome"] for n in
                          PG.notifications("order_id = %s" % pntest.q(oid)))
        self.assertEqual(outcomes.count("applied"), 1, outcomes)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")


class TestRateLimit(Base):
    def test_second_request_within_the_interval_is_not_asked(self):
        oid = self.order()
        self.alipay_paid(oid, "WAIT_BUYER_PAY")
        code, a, _ = ask(SITE, oid)
        self.assertEqual((code, a["asked"]), (200, True), a)
        for _ in range(4):      # whichever worker takes it
            code, a, _ = ask(SITE, oid)
            self.assertEqual((code, a["status"], a["source"], a["asked"], a["rate_limited"]),
                             (200, "pending", "stored", False, True), a)
        self.assertEqual(len(provider_requests("alipay")), 1)
        # the interval over (time moved by SQL): asked again
        PG.psql("UPDATE paynotify.confirm_asks SET asked_at = asked_at - interval '%d seconds'"
                % (INTERVAL_S + 1))
        code, a, _ = ask(SITE, oid)
        self.assertEqual((a["asked"], len(provider_requests("alipay"))), (True, 2), a)
        self.assertEqual(PG.psql("SELECT asks FROM paynotify.confirm_asks WHERE order_id = %s"
                                 % pntest.q(oid)), [("2",)])

    def test_concurrent_requests_ask_once(self):
        oid = self.order()
        self.alipay_paid(oid, "WAIT_BUYER_PAY")
        SI.mode = "sleep"
        SI.sleep_s = 0.5        # the first ask is still running when the others come
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            answers = list(ex.map(lambda _: ask(SITE, oid), range(4)))
        self.assertTrue(all(code == 200 for code, _, _ in answers), answers)
        self.assertEqual(sum(1 for _, a, _ in answers if a["asked"]), 1, answers)
        self.assertEqual(len(provider_requests("alipay")), 1)


class TestRefused(Base):
    def assert_refused(self, code, a, want):
        self.assertEqual(code, want, a)
        self.assertIn("error", a)
        self.assertNotIn("status", a)
        self.assertEqual(SI.requests, [])

    def test_missing_credentials_401(self):
        oid = self.order()
        code, a, _ = ask(SITE, oid, fields={"site": SITE, "order_id": oid})
        self.assert_refused(code, a, 401)
        code, a, _ = ask(SITE, oid, fields={"site": SITE, "order_id": oid, "ts": "1"})
        self.assert_refused(code, a, 401)

    def test_bad_tokens_403(self):
        oid = self.order(status="paid")
        other = self.order(status="paid")
        now = str(int(time.time()))
        cases = [
            ("a token of another key", dict(tok=token(KEY_B, SITE, oid, now), ts=now)),
            ("a token for another order", dict(tok=token(KEY_A, SITE, other, now), ts=now)),
            ("a stale ts", dict(ts=str(int(time.time()) - 301))),
            ("a future ts", dict(ts=str(int(time.time()) + 301))),
            ("not hex", dict(tok="zz" * 32)),
            ("short", dict(tok=token(KEY_A, SITE, oid, now)[:40], ts=now)),
            ("ts not a number", dict(ts="12x")),
        ]
        for why, kw in cases:
            code, a, _ = ask(SITE, oid, **kw)
            self.assertEqual(code, 403, (why, a))
            self.assertNotIn("status", a, why)
        # another site's key for its own site name is refused for ours
        code, a, _ = ask(SITE_B, oid, key=KEY_B)
        self.assertEqual(code, 404, a)      # authenticated for shop-b: shop-b has no such order
        code, a, _ = ask(SITE, oid, key=KEY_B)
        self.assert_refused(code, a, 403)
        # a site without a key
        code, a, _ = ask(SITE_NOKEY, oid, key=KEY_A)
        self.assert_refused(code, a, 403)
        self.assertIn("refused a request for site %s" % SITE_NOKEY, SRV.log_text())
        self.assertNotIn(KEY_A, SRV.log_text())

    def test_unknown_order_404(self):
        code, a, _ = ask(SITE, "no-such-order")
        self.assert_refused(code, a, 404)

    def test_bad_input_400_and_method_405(self):
        code, a, _ = ask(SITE, "x", fields={"order_id": "x", "ts": "1", "token": "0"})
        self.assertEqual(code, 400, a)
        code, a, _ = ask(SITE, "a b", fields={"site": SITE, "order_id": "a b", "ts": "1",
                                              "token": "0"})
        self.assertEqual(code, 400, a)
        code, a, _ = ask(SITE, "x", method="PUT")
        self.assertEqual(code, 405, a)

    def test_get_works_as_post(self):
        oid = self.order(status="closed")
        code, a, _ = ask(SITE, oid, method="GET")
        self.assertEqual((code, a["status"], a["asked"]), (200, "closed", False), a)


class TestDatabase(Base):
    def test_database_down_503_then_back(self):
        oid = self.order(status="paid")
        PG.stop()
        try:
            code, a, _ = ask(SITE, oid)
            self.assertEqual(code, 503, a)
            self.assertNotIn("status", a)
        finally:
            PG.start()
        deadline = time.monotonic() + 20
        while True:
            code, a, _ = ask(SITE, oid)
            if code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual((code, a.get("status")), (200, "paid"), a)


if __name__ == "__main__":
    unittest.main()

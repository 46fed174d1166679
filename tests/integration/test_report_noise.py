# Integration: `paynotify report` lists only what needs a person (issue 22),
# with genuinely signed notifications of every provider, run as CGI:
#   - a day of normal traffic of a multi-site installation (two Stripe
#     sites on one account, each event delivered to both endpoints, each
#     site's marker in the metadata; a declined card retried on the same
#     PaymentIntent; ordinary payments, duplicates and refunds through
#     Alipay, WeChat Pay v3 and v2 and 2C2P) leaves `report --site X` at
#     exit 0 and empty for every site; the sibling's events are stored
#     foreign_site and counted by `stats`;
#   - the genuine problems of the same installation still appear: a
#     marker naming no configured site and a missing one (merchant_mismatch),
#     a payment after the order was closed (failed, then expired, then paid:
#     paid_after_close), a WeChat Pay v2 refund CHANGE and a v3
#     REFUND.ABNORMAL (refund_failed, with a detail that says the refund did
#     not happen, never "order paid by transaction X");
#   - an event type paynotify has no handling for (Stripe, WeChat Pay v3,
#     Alipay gateway message, 2C2P) is stored with its type, acknowledged,
#     counted per type by `stats` (table and Prometheus), listed by
#     `report --unhandled [--days N]` (exit 1) and not by `report`;
#     --days is validated.
# The live counter paynotify_events_total{type,handled} is tested over
# FastCGI in tests/e2e/test_metrics.py.
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnkit  # noqa: E402
import pnsign  # noqa: E402
import pntest  # noqa: E402

PG = None
CFG = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
X, Y = "shop-x", "shop-y"          # two shops, one Stripe account
SECRET = pnkit.STRIPE_SECRET


def write_config():
    d = pntest.temp_dir("pntest-noise-cfg.")
    os.chmod(d, 0o755)
    shutil.copyfile(pnkit.KEY_PUB, os.path.join(d, "public.pem"))
    pntest.write_secret(os.path.join(d, "stripe-whsec"), SECRET + "\n")
    pntest.write_secret(os.path.join(d, "2c2p.key"), pnkit.TWOC2P_KEY + "\n")
    pntest.write_secret(os.path.join(d, "apiv3.key"), pnkit.WX_APIV3 + "\n")
    pntest.write_secret(os.path.join(d, "apiv2.key"), pnkit.WX_APIV2 + "\n")
    lines = ["[database]", "conninfo = %s" % PG.conninfo(), "statement_timeout_ms = 3000", "",
             "[site %s]" % X,
             "alipay.app_id = %s" % pnkit.ALIPAY_APP_ID,
             "alipay.seller_id = %s" % pnkit.ALIPAY_SELLER_ID,
             "alipay.public_key_file = public.pem",
             "stripe.secret_files = stripe-whsec",
             "stripe.site_metadata = site=%s" % X,
             "2c2p.merchant_id = %s" % pnkit.TWOC2P_MERCHANT,
             "2c2p.secret_key_file = 2c2p.key",
             "wechatpay.mchid = %s" % pnkit.WX_MCHID,
             "wechatpay.appid = %s" % pnkit.WX_APPID,
             "wechatpay.apiv3_key_file = apiv3.key",
             "wechatpay.apiv2_key_file = apiv2.key",
             "wechatpay.public_key_id = %s" % pnkit.WX_PUBID,
             "wechatpay.public_key_file = public.pem", "",
             "[site %s]" % Y,
             "stripe.secret_files = stripe-whsec",
             "stripe.site_metadata = site=%s" % Y, ""]
    path = os.path.join(d, "paynotify.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = write_config()


def tearDownModule():
    if PG is not None:
        PG.destroy()


def admin(*args):
    return subprocess.run([ADMIN, "-c", CFG] + list(args), env=pntest.clean_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def post(provider, site, signed):
    headers, body = signed
    return pntest.run_cgi(pntest.binary(provider), "POST", "/notify/%s/%s" % (provider, site),
                          headers, body, CFG)


# ---- Stripe: one account, every event to both endpoints --------------------

_n = [0]


def evt():
    _n[0] += 1
    return "evt_noise_%d_%d" % (os.getpid(), _n[0])


def stripe_pi(etype, oid, pi, amount, marker, received=None, currency="usd"):
    """A payment_intent.* event; marker: the metadata.site value (None: absent)."""
    obj = {"id": pi, "object": "payment_intent", "amount": amount,
           "amount_received": amount if received is None else received, "currency": currency,
           "metadata": {"order_id": oid}, "status": "succeeded"}
    if etype == "payment_intent.payment_failed":
        obj.update(status="requires_payment_method", amount_received=0,
                   last_payment_error={"code": "card_declined", "decline_code": "insufficient_funds"})
    if marker is not None:
        obj["metadata"]["site"] = marker
    return pnkit.sign_stripe(pntest._stripe_event(evt(), etype, obj))


def stripe_charge(etype, oid, pi, amount, marker, refunded=0):
    """charge.* of a PaymentIntent: Stripe copies the PaymentIntent's metadata."""
    obj = {"id": "ch_" + pi[3:], "object": "charge", "amount": amount,
           "amount_refunded": refunded, "currency": "usd", "payment_intent": pi,
           "metadata": {"order_id": oid, "site": marker},
           "status": "failed" if etype == "charge.failed" else "succeeded",
           "refunded": refunded >= amount}
    return pnkit.sign_stripe(pntest._stripe_event(evt(), etype, obj))


def stripe_checkout(etype, oid, pi, amount, marker, payment_status="paid"):
    return pnkit.sign_stripe(pntest.stripe_checkout_completed(
        oid, amount, "usd", event_id=evt(), etype=etype, payment_intent=pi,
        payment_status=payment_status, metadata={"site": marker}))


def both(signed):
    """Stripe sends every event of the account to every endpoint."""
    return [post("stripe", s, signed) for s in (X, Y)]


# ---- WeChat Pay refunds ----------------------------------------------------

def wx_v3_refund(oid, txn, total, refund, status="SUCCESS", refund_id=None):
    event = {"SUCCESS": "REFUND.SUCCESS", "ABNORMAL": "REFUND.ABNORMAL",
             "CLOSED": "REFUND.CLOSED"}[status]
    rid = refund_id or "503" + pnkit.seq()
    res = {"mchid": pnkit.WX_MCHID, "out_trade_no": oid, "transaction_id": txn,
           "out_refund_no": "R-" + rid, "refund_id": rid, "refund_status": status,
           "success_time": "2024-05-21T10:00:00+08:00", "user_received_account": "x",
           "amount": {"total": total, "refund": refund, "payer_total": total,
                      "payer_refund": refund}}
    return pnkit.sign_wechat_v3(json.dumps(res, separators=(",", ":")), event=event,
                                aad="refund")


def wx_v2_refund(oid, txn, total, fee, status="SUCCESS", refund_id=None):
    rid = refund_id or "504" + pnkit.seq()
    inner = pnsign.wechat_v2_xml([("out_refund_no", "R-" + rid), ("out_trade_no", oid),
                                  ("refund_fee", str(fee)), ("refund_id", rid),
                                  ("refund_status", status),
                                  ("success_time", "2024-05-21 10:00:00"),
                                  ("total_fee", str(total)), ("transaction_id", txn)],
                                 root="root")
    body = pnsign.wechat_v2_xml([("return_code", "SUCCESS"), ("appid", pnkit.WX_APPID),
                                 ("mch_id", pnkit.WX_MCHID), ("nonce_str", "r" + rid),
                                 ("req_info", pnsign.wechat_v2_seal(inner, pnkit.WX_APIV2))])
    return {"Content-Type": "text/xml"}, body


def wx_v2_paid(oid, fee, txn):
    fields = [(k, txn if k == "transaction_id" else v)
              for k, v in pnkit.wechat_v2_fields(oid, fee)]
    return pnkit.sign_wechat_v2(fields)


class Base(unittest.TestCase):
    def setUp(self):
        PG.reset()

    def ok(self, r):
        self.assertIn(r.status, (200, 204), (r.status, r.body, r.stderr))
        return r

    def report(self, *args):
        p = admin("report", "--format", "json", *args)
        return p.returncode, json.loads(p.stdout or "[]"), p.stderr

    def outcomes(self, site, oid=None):
        where = "site = %s" % pntest.q(site)
        if oid is not None:
            where += " AND order_id = %s" % pntest.q(oid)
        return [r["outcome"] for r in PG.notifications(where)]


class NormalDay(Base):
    def test_a_normal_day_of_a_multi_site_installation_reports_nothing(self):
        # the same order id at both shops, each paid by its own PaymentIntent
        for site in (X, Y):
            PG.add_order(site, "42", 1999, "USD")
        for site, pi in ((X, "pi_x42"), (Y, "pi_y42")):
            for etype in ("payment_intent.created", "payment_intent.succeeded"):
                for r in both(stripe_pi(etype, "42", pi, 1999, site)):
                    self.ok(r)
            for r in both(stripe_charge("charge.succeeded", "42", pi, 1999, site)):
                self.ok(r)
        # a declined card, then the same card again on the same PaymentIntent
        PG.add_order(X, "S-DECLINED", 5000, "USD")
        for etype in ("payment_intent.payment_failed", "charge.failed"):
            for r in both(stripe_pi(etype, "S-DECLINED", "pi_dec", 5000, X)
                          if etype.startswith("payment_intent")
                          else stripe_charge(etype, "S-DECLINED", "pi_dec", 5000, X)):
                self.ok(r)
        self.assertEqual(PG.order(X, "S-DECLINED")["status"], "failed")
        retry = stripe_pi("payment_intent.succeeded", "S-DECLINED", "pi_dec", 5000, X)
        for r in both(retry) + both(retry):                  # and Stripe's own retry
            self.ok(r)
        # Checkout at shop-y, then a partial refund
        PG.add_order(Y, "C-7", 2500, "USD")
        for r in both(stripe_checkout("checkout.session.completed", "C-7", "pi_c7", 2500, Y)):
            self.ok(r)
        for r in both(stripe_charge("charge.refunded", "C-7", "pi_c7", 2500, Y, refunded=500)):
            self.ok(r)
        # the other providers at shop-x: payments, a retry, refunds
        PG.add_order(X, "A-1", 8888, "CNY")
        paid = pnkit.alipay_paid("A-1", "88.88")
        self.ok(post("alipay", X, paid))
        self.ok(post("alipay", X, paid))
        self.ok(post("alipay", X, pnkit.alipay_paid(
            "A-1", "88.88", out_biz_no="RF-1", refund_fee="8.88",
            gmt_refund="2024-05-21 10:00:00")))
        PG.add_order(X, "W-3", 8888, "CNY")
        self.ok(post("wechatpay", X, pnkit.wechat_paid("W-3", 8888, txn="4200000000000003")))
        self.ok(post("wechatpay", X, wx_v3_refund("W-3", "4200000000000003", 8888, 888)))
        PG.add_order(X, "V-2", 8888, "CNY")
        self.ok(post("wechatpay", X, wx_v2_paid("V-2", 8888, "4200000000000002")))
        self.ok(post("wechatpay", X, wx_v2_refund("V-2", "4200000000000002", 8888, 1000)))
        PG.add_order(X, "T-1", 1999, "SGD")
        PG.add_order(X, "T-2", 1999, "SGD")
        self.ok(post("2c2p", X, pnkit.twoc2p_paid("T-1")))
        self.ok(post("2c2p", X, pnkit.twoc2p_paid("T-2", resp_code="4051")))   # declined
        self.ok(post("2c2p", X, pnkit.twoc2p_paid("T-2")))                     # paid

        want = {(X, "42"): "paid", (Y, "42"): "paid", (X, "S-DECLINED"): "paid",
                (Y, "C-7"): "partially_refunded", (X, "A-1"): "partially_refunded",
                (X, "W-3"): "partially_refunded",
                # a WeChat Pay v2 refund result waits for the signed refundquery
                # answer (schema 13, test_v2_refund_confirm.py): not applied yet, and
                # not on report within its first hour
                (X, "V-2"): "paid",
                (X, "T-1"): "paid", (X, "T-2"): "paid"}
        for (site, oid), status in want.items():
            self.assertEqual(PG.order(site, oid)["status"], status, (site, oid))
        self.assertEqual(self.outcomes(X, "V-2"), ["applied", "pending_confirmation"])
        # the declined-then-paid order: applied, never paid_after_close
        self.assertEqual(self.outcomes(X, "S-DECLINED"),
                         ["applied", "ignored", "applied"])
        self.assertEqual(self.outcomes(X, "T-2"), ["applied", "applied"])
        # every sibling event is foreign at the other endpoint, and says whose it is
        foreign = PG.notifications("outcome = 'foreign_site'")
        self.assertEqual(sorted((r["site"], r["order_id"], r["event_type"]) for r in foreign),
                         sorted([(X, "42", "payment_intent.succeeded"),
                                 (X, "C-7", "checkout.session.completed"),
                                 (X, "C-7", "charge.refunded"),
                                 (Y, "42", "payment_intent.succeeded"),
                                 (Y, "S-DECLINED", "payment_intent.payment_failed"),
                                 (Y, "S-DECLINED", "payment_intent.succeeded")]))
        # informational types (created, charge.*) are ignored at both endpoints
        self.assertEqual({r["outcome"] for r in PG.notifications(
            "event_type IN ('payment_intent.created', 'charge.succeeded', 'charge.failed')")},
            {"ignored"})
        self.assertTrue(all(r["dedup_key"].startswith("!foreign_site:evt_") for r in foreign))
        detail = PG.scalar("SELECT outcome_detail FROM paynotify.notifications WHERE "
                           "outcome = 'foreign_site' AND site = 'shop-x' AND order_id = 'C-7' "
                           "AND event_type = 'charge.refunded'")
        self.assertIn("site shop-y's event", detail)

        for site in (X, Y, None):
            rc, rows, err = self.report(*(["--site", site] if site else []))
            self.assertEqual((rc, rows), (0, []), (site, err))
            self.assertIn("0 items need a human", err)
        # counted: foreign_site per site in stats (table and Prometheus)
        p = admin("stats", "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        counts = {}
        for r in json.loads(p.stdout):
            counts[(r["site"], r["outcome"])] = (counts.get((r["site"], r["outcome"]), 0)
                                                 + int(r["notifications"]))
        self.assertEqual(counts[(Y, "foreign_site")], 3)
        self.assertEqual(counts[(X, "foreign_site")], 3)
        p = admin("stats", "--format", "prometheus")
        self.assertIn('paynotify_notifications_total{site="shop-y",provider="stripe",'
                      'event_kind="paid",outcome="foreign_site"} 2', p.stdout)


class GenuineProblems(Base):
    def test_the_genuine_problems_still_appear(self):
        # a marker that names no configured site, and none at all
        PG.add_order(X, "M-1", 1999, "USD")
        PG.add_order(X, "M-2", 1999, "USD")
        self.ok(post("stripe", X, stripe_pi("payment_intent.succeeded", "M-1", "pi_m1", 1999,
                                            "shop-q")))
        self.ok(post("stripe", X, stripe_pi("payment_intent.succeeded", "M-2", "pi_m2", 1999,
                                            None)))
        # failed, then expired (closed), then paid: a payment after the close
        PG.add_order(X, "P-1", 1999, "USD")
        self.ok(post("stripe", X, stripe_pi("payment_intent.payment_failed", "P-1", "pi_p1",
                                            1999, X)))
        self.ok(post("stripe", X, stripe_checkout("checkout.session.expired", "P-1", "pi_p1",
                                                  1999, X, payment_status="unpaid")))
        self.assertEqual(PG.order(X, "P-1")["status"], "closed")
        self.ok(post("stripe", X, stripe_pi("payment_intent.succeeded", "P-1", "pi_p1", 1999,
                                            X)))
        # refunds that did not happen (v2 CHANGE, REFUNDCLOSE; v3 ABNORMAL)
        PG.add_order(X, "V-9", 8888, "CNY")
        self.ok(post("wechatpay", X, wx_v2_paid("V-9", 8888, "4200000000000009")))
        self.ok(post("wechatpay", X, wx_v2_refund("V-9", "4200000000000009", 8888, 1000,
                                                  status="CHANGE", refund_id="50400009")))
        self.ok(post("wechatpay", X, wx_v2_refund("V-9", "4200000000000009", 8888, 2000,
                                                  status="REFUNDCLOSE", refund_id="50400010")))
        PG.add_order(X, "W-9", 8888, "CNY")
        self.ok(post("wechatpay", X, pnkit.wechat_paid("W-9", 8888, txn="4200000000000019")))
        self.ok(post("wechatpay", X, wx_v3_refund("W-9", "4200000000000019", 8888, 888,
                                                  status="ABNORMAL", refund_id="50300019")))
        self.assertEqual(PG.order(X, "V-9")["status"], "paid")
        self.assertEqual(PG.order(X, "W-9")["status"], "paid")

        rc, rows, err = self.report("--site", X)
        self.assertEqual(rc, 1, err)
        got = sorted((r["kind"], r["order_id"]) for r in rows)
        self.assertEqual(got, [("merchant_mismatch", "M-1"), ("merchant_mismatch", "M-2"),
                               ("paid_after_close", "P-1"), ("refund_failed", "V-9"),
                               ("refund_failed", "V-9"), ("refund_failed", "W-9")], rows)
        detail = {(r["kind"], r["order_id"], r["amount"]): r["detail"] for r in rows}
        self.assertEqual(sorted(k[2] for k in detail if k[0] == "refund_failed"),
                         ["10.00 CNY", "20.00 CNY", "8.88 CNY"])
        self.assertIn('metadata.site is "shop-q", not site shop-x\'s "shop-x" '
                      "(stripe.site_metadata), nor any configured site's",
                      detail[("merchant_mismatch", "M-1", "19.99 USD")])
        self.assertIn("metadata.site is absent", detail[("merchant_mismatch", "M-2", "19.99 USD")])
        self.assertIn("order was closed when the payment arrived",
                      detail[("paid_after_close", "P-1", "19.99 USD")])
        v2 = [r["detail"] for r in rows if r["kind"] == "refund_failed" and r["order_id"] == "V-9"]
        for d in v2:
            self.assertIn("of transaction 4200000000000009 did not happen: refund_status ", d)
            self.assertNotIn("order paid by transaction", d)
        self.assertTrue(any("refund 50400009 (out_refund_no R-50400009, 10.00 CNY)" in d
                            and "CHANGE" in d and "re-issue it" in d for d in v2), v2)
        self.assertTrue(any("REFUNDCLOSE" in d and "closed without money returned" in d
                            for d in v2), v2)
        w = [r["detail"] for r in rows if r["kind"] == "refund_failed" and r["order_id"] == "W-9"]
        self.assertIn("REFUND.ABNORMAL (refund_status ABNORMAL)", w[0])
        self.assertIn("8.88 CNY", w[0])
        # the failed refund is stored under its own key and its retry is a delivery
        self.ok(post("wechatpay", X, wx_v3_refund("W-9", "4200000000000019", 8888, 888,
                                                  status="ABNORMAL", refund_id="50300019")))
        self.assertEqual([r["deliveries"] for r in PG.notifications(
            "outcome = 'refund_failed' AND order_id = 'W-9'")], [2])


class Unhandled(Base):
    def test_unknown_types_are_stored_counted_and_listed(self):
        def customer():
            return pnkit.sign_stripe(pntest._stripe_event(
                evt(), "customer.created", {"id": "cus_" + pnkit.seq(), "object": "customer",
                                            "email": "test@stripe.com", "metadata": {}}))
        self.ok(post("stripe", X, customer()))
        again = customer()
        self.ok(post("stripe", X, again))
        self.ok(post("stripe", X, again))                   # a retry: one row, 2 deliveries
        self.ok(post("stripe", X, pnkit.sign_stripe(pntest._stripe_event(
            evt(), "refund.failed", {"id": "re_1", "object": "refund", "amount": 100,
                                     "currency": "usd", "payment_intent": "pi_1",
                                     "status": "failed"}))))
        self.ok(post("wechatpay", X, pnkit.sign_wechat_v3(
            json.dumps({"mchid": pnkit.WX_MCHID, "appid": pnkit.WX_APPID,
                        "out_order_no": "PS-1", "service_id": "500001"}),
            event="PAYSCORE.USER_PAID", aad="payscore")))
        gateway = [("app_id", pnkit.ALIPAY_APP_ID), ("charset", "utf-8"),
                   ("msg_method", "alipay.fund.trans.order.changed"),
                   ("notify_id", "gw" + pnkit.seq()), ("utc_timestamp", "1716170406000"),
                   ("version", "1.1"), ("sign_type", "RSA2"),
                   ("biz_content", '{"order_id":"20240520110070000006210012345678"}')]
        self.ok(post("alipay", X, pnkit.sign_alipay_pairs(gateway)))
        self.ok(post("2c2p", X, pnkit.twoc2p_paid("T-9", resp_code="5xyz")))
        # known and deliberately ignored: not unhandled
        self.ok(post("stripe", X, stripe_pi("payment_intent.created", "I-1", "pi_i1", 100, X)))

        rows = PG.notifications("outcome = 'unhandled'")
        self.assertEqual(sorted((r["provider"], r["event_type"], r["deliveries"]) for r in rows),
                         [("2c2p", "5xyz", 1),
                          ("alipay", "alipay.fund.trans.order.changed", 1),
                          ("stripe", "customer.created", 1), ("stripe", "customer.created", 2),
                          ("stripe", "refund.failed", 1),
                          ("wechatpay", "PAYSCORE.USER_PAID", 1)])
        self.assertEqual(self.outcomes(X, "I-1"), ["ignored"])
        # not what the report is for
        rc, found, err = self.report("--site", X)
        self.assertEqual((rc, found), (0, []), err)
        # report --unhandled: the types, exit 1
        p = admin("report", "--unhandled", "--format", "json")
        self.assertEqual(p.returncode, 1, p.stderr)
        got = {(r["provider"], r["event_type"]): (r["notifications"], r["deliveries"])
               for r in json.loads(p.stdout)}
        self.assertEqual(got, {("2c2p", "5xyz"): ("1", "1"),
                               ("alipay", "alipay.fund.trans.order.changed"): ("1", "1"),
                               ("stripe", "customer.created"): ("2", "3"),
                               ("stripe", "refund.failed"): ("1", "1"),
                               ("wechatpay", "PAYSCORE.USER_PAID"): ("1", "1")})
        self.assertIn("5 event types with no handling in the last 7 days", p.stderr)
        p = admin("report", "--unhandled", "--days", "1", "--site", Y, "--format", "table")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("0 event types with no handling in the last 1 day\n", p.stdout)
        # older than the window: not listed
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '3 days', "
                "last_delivery_at = now() - interval '3 days' WHERE event_type = 'refund.failed'")
        p = admin("report", "--unhandled", "--days", "2", "--format", "json")
        self.assertNotIn("refund.failed", p.stdout)
        self.assertIn("customer.created", p.stdout)
        # counted per type by stats
        p = admin("stats", "--format", "json", "--site", X)
        typed = {(r["provider"], r["event_type"]): int(r["notifications"])
                 for r in json.loads(p.stdout) if r["outcome"] == "unhandled"}
        self.assertEqual(typed[("stripe", "customer.created")], 2)
        self.assertEqual(typed[("wechatpay", "PAYSCORE.USER_PAID")], 1)
        p = admin("stats", "--format", "prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('paynotify_unhandled_notifications_total{site="shop-x",provider="stripe",'
                      'type="customer.created"} 2', p.stdout.split("\n"))
        self.assertIn('paynotify_notifications_total{site="shop-x",provider="stripe",'
                      'event_kind="ignored",outcome="unhandled"} 3', p.stdout.split("\n"))
        for ln in p.stdout.split("\n"):
            if ln and not ln.startswith("#"):
                self.assertRegex(ln, r'^[a-z_]+\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\} [0-9]+$')

    def test_days_is_validated(self):
        for args in (["--unhandled", "--days", "0"], ["--unhandled", "--days", "x"],
                     ["--unhandled", "--days", "3651"], ["--unhandled", "--days", "-1"],
                     ["--days", "3"], ["--unhandled", "--pending-older-than", "1h"]):
            p = admin("report", *args)
            self.assertEqual(p.returncode, 64, (args, p.stdout, p.stderr))
            self.assertIn("paynotify: report: ", p.stderr)


if __name__ == "__main__":
    unittest.main()

# test_reconcile_2c2p.py: `paynotify reconcile --provider 2c2p --by-query`
# (docs/RECONCILE.md "2C2P: by inquiry") against the loopback 2C2P
# paymentInquiry stand-in of tests/lib/psp_standins.py (HTTPS with a test CA,
# every request's HS256 JWT checked with the merchant secret, every answer an
# HS256 JWT signed with it), a real (throwaway) PostgreSQL and the real 2C2P
# receiver (CGI) for the notifications:
#   - a day with every class planted: matched, missing_payment (a lost
#     notification), amount_mismatch, currency_mismatch, status_mismatch (paid
#     here, 2C2P says failed), not_in_statement (paid here, 2C2P does not know
#     the invoice), duplicate_payment (2C2P names another tranRef),
#     unknown_order (a notification of the day for an order this site does not
#     have, paid at 2C2P); a pending order 2C2P does not know agrees; an order
#     of another day is not asked
#   - dry run: exit 1, nothing changed; --apply: the lost payment applied once
#     (source query, the signed answer stored), everything else unchanged, the
#     late notification afterwards a duplicate; the next run: the lost payment
#     matched
#   - all matched: exit 0; a 5xx answer: exit 3; a tampered answer: refused,
#     exit 1, nothing changed
#   - bounds: more candidates than --max-inquiries: nothing asked, exit 3;
#     --inquiries-per-second paces the requests; option values checked (64);
#     the statement file format still refused with the reason

import datetime
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402
import psp_standins  # noqa: E402

ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
SITE = pnkit.SITE
OFFSET_H = 7        # the --by-query day is UTC+7 (2C2P's reports' zone)
PG = None
SI = None
CFG = None


def setUpModule():
    global PG, SI, CFG
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=os.path.join(KEYS, "test-a.key.pem"),
        wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem"),
        merchant_pub=os.path.join(KEYS, "test-b.pub.pem"),
        app_id=pnkit.ALIPAY_APP_ID, mchid=pnkit.WX_MCHID,
        merchant_serial="5157F09EFDC096DE15EBE81A47057A7232F1B8E1", wx_pubid=pnkit.WX_PUBID,
        stripe_key="rk_test_unused", twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY)
    cfg = pnkit.write_all_config(PG)
    with open(cfg.path) as f:
        text = f.read()
    text = text.replace("[site %s]\n" % SITE, "\n".join([
        "[query]", "ca_file = %s" % SI.ca_file, "connect_timeout_ms = 1000",
        "timeout_ms = 1500", "", "[site %s]" % SITE, "2c2p.query_url = %s" % SI.url, ""]))
    with open(cfg.path, "w") as f:
        f.write(text)
    CFG = cfg.path


def tearDownModule():
    if PG is not None:
        PG.destroy()


def reconcile(*args, day=None):
    argv = [ADMIN, "-c", CFG, "reconcile", "--provider", "2c2p", "--site", SITE, "--by-query",
            "--format", "json"] + (["--date", day] if day else []) + list(args)
    p = subprocess.run(argv, env=pntest.clean_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode()
    rows = json.loads(out) if out.strip().startswith("[") else []
    return p.returncode, rows, p.stderr.decode()


def run_admin(*args):
    return subprocess.run([ADMIN, "-c", CFG] + list(args), env=pntest.clean_env(),
                          capture_output=True, text=True, timeout=60)


def today():
    """Today in UTC+7, waiting first if its midnight is less than 3 minutes away."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=OFFSET_H)
    left = 86400 - (t.hour * 3600 + t.minute * 60 + t.second)
    if left < 180:
        time.sleep(left + 1)
        t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=OFFSET_H)
    return t.date().isoformat()


class ByQuery(unittest.TestCase):
    def setUp(self):
        PG.reset()
        SI.reset()
        self.day = today()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    # ---- helpers ------------------------------------------------------------
    def order(self, status="pending", amount=1999):
        oid = "B2-" + pnkit.seq()
        PG.add_order(SITE, oid, amount, "SGD", status)
        return oid

    def at_2c2p(self, oid, code="0000", amount='"19.99"', currency="SGD", ref=None):
        ref = ref or "T" + pnkit.seq()
        SI.state[("2c2p", oid)] = {"amount": amount, "currency": currency, "tranRef": ref,
                                   "respCode": code}
        return ref

    def notify(self, oid, ref):
        """The backend notification of 2C2P paying oid with tranRef ref, through the receiver."""
        payload = json.loads(pnkit.twoc2p_payload(oid))
        payload["tranRef"] = ref
        headers, body = pnkit.sign_2c2p(json.dumps(payload, separators=(",", ":")))
        r = pntest.run_cgi(pntest.binary("2c2p"), "POST", pnkit.path("2c2p"), headers, body,
                           config=CFG)
        self.assertTrue(pnkit.is_success("2c2p", r), (r.status, r.body, r.stderr))

    def paid_here(self, oid):
        ref = "T" + pnkit.seq()
        self.notify(oid, ref)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        return ref

    def by_order(self, rows):
        return {r["order_id"]: r for r in rows}

    def asked(self):
        return [p for prov, p in SI.requests if prov == "2c2p"]

    # ---- cases --------------------------------------------------------------
    def test_every_class_dry_run_then_apply(self):
        matched = self.order()
        self.at_2c2p(matched, ref=self.paid_here(matched))
        missing = self.order()
        missing_ref = self.at_2c2p(missing)
        amount = self.order()
        self.at_2c2p(amount, amount='"29.99"')
        currency = self.order()
        self.at_2c2p(currency, currency="THB")
        status = self.order()
        self.paid_here(status)
        self.at_2c2p(status, code="4005")        # 2C2P: failed (response-code-payment)
        unknown_there = self.order()
        self.paid_here(unknown_there)           # no state: 2C2P answers 2002 not found
        duplicate = self.order()
        self.paid_here(duplicate)
        self.at_2c2p(duplicate)                 # another tranRef, paid
        abandoned = self.order()                # pending here, 2C2P does not know it
        unknown_here = "B2-nosuch-" + pnkit.seq()
        ref = self.at_2c2p(unknown_here)
        self.notify(unknown_here, ref)          # stored unknown_order
        old = self.order()                      # another day's order: not asked
        self.at_2c2p(old)
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '3 days',"
                " updated_at = now() - interval '3 days' WHERE order_id = %s" % pntest.q(old))
        before = PG.notifications()

        rc, rows, err = reconcile(day=self.day)
        self.assertEqual(rc, 1, (rows, err))
        got = {k: v["class"] for k, v in self.by_order(rows).items()}
        self.assertEqual(got, {
            matched: "matched", missing: "missing_payment", amount: "amount_mismatch",
            currency: "currency_mismatch", status: "status_mismatch",
            unknown_there: "not_in_statement", duplicate: "duplicate_payment",
            abandoned: "matched", unknown_here: "unknown_order"}, rows)
        self.assertNotIn(old, "".join(self.asked()))
        self.assertEqual(len(self.asked()), 9)
        self.assertIn("not applied", self.by_order(rows)[missing]["result"])
        self.assertIn("4005", self.by_order(rows)[status]["detail"])
        self.assertIn("2002", self.by_order(rows)[unknown_there]["detail"])
        self.assertIn("29.99 SGD", self.by_order(rows)[amount]["detail"])
        self.assertIn("missing_payment 1", err)
        self.assertIn("9 orders asked by paymentInquiry", err)
        self.assertEqual(PG.notifications(), before, "a dry run changed nothing")
        self.assertEqual(PG.order(SITE, missing)["status"], "pending")

        rc, rows, err = reconcile("--apply", day=self.day)
        self.assertEqual(rc, 1, (rows, err))
        row = self.by_order(rows)[missing]
        self.assertEqual((row["class"], row["result"]), ("missing_payment", "applied"), rows)
        o = PG.order(SITE, missing)
        self.assertEqual((o["status"], o["psp_txn_id"]), ("paid", missing_ref))
        new = [n for n in PG.notifications() if n["id"] not in {b["id"] for b in before}]
        # the lost payment and the second transaction (the store records it
        # duplicate_payment, on `paynotify report`); nothing else
        self.assertEqual(sorted((n["order_id"], n["outcome"]) for n in new),
                         sorted([(missing, "applied"), (duplicate, "duplicate_payment")]), new)
        n = [n for n in new if n["order_id"] == missing][0]
        self.assertEqual(PG.scalar("SELECT source FROM paynotify.notifications WHERE id = %d"
                                   % n["id"]), "query")
        self.assertEqual(n["dedup_key"], "%s:0000:%s" % (missing, missing_ref))
        self.assertIn(b'"payload"', n["raw_body"])      # the signed answer as received
        for oid in (amount, currency, abandoned):
            self.assertEqual(PG.order(SITE, oid)["status"], "pending", oid)
        self.assertEqual(PG.order(SITE, status)["status"], "paid")

        # the late notification of the same payment applies nothing
        self.notify(missing, missing_ref)
        self.assertEqual([n["outcome"] for n in PG.notifications(
            "order_id = %s" % pntest.q(missing))], ["applied"])
        rc, rows, err = reconcile(day=self.day)
        self.assertEqual(self.by_order(rows)[missing]["class"], "matched", rows)

    def test_all_matched_exit_0(self):
        paid = self.order()
        self.at_2c2p(paid, ref=self.paid_here(paid))
        self.order()
        rc, rows, err = reconcile(day=self.day)
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(sorted(r["class"] for r in rows), ["matched", "matched"])
        self.assertIn("SGD: payments 1 19.99 SGD", err)

    def test_lost_payment_applied_exit_0(self):
        oid = self.order()
        self.at_2c2p(oid)
        rc, rows, err = reconcile("--apply", day=self.day)
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        rc, rows, err = reconcile("--apply", day=self.day)
        self.assertEqual((rc, rows[0]["class"]), (0, "matched"), (rows, err))
        self.assertEqual(len(PG.notifications()), 1)

    def test_provider_error_exit_3(self):
        oid = self.order()
        self.at_2c2p(oid)
        SI.mode = "500"
        rc, rows, err = reconcile("--apply", day=self.day)
        self.assertEqual(rc, 3, (rows, err))
        self.assertEqual(rows[0]["result"], "error", rows)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_tampered_answer_refused(self):
        oid = self.order()
        self.at_2c2p(oid)
        SI.mode = "tamper"
        rc, rows, err = reconcile("--apply", day=self.day)
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual((rows[0]["class"], rows[0]["result"]), ("other", "refused"), rows)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        self.assertEqual(PG.notifications(), [])

    def test_max_inquiries_nothing_asked(self):
        for _ in range(3):
            self.at_2c2p(self.order())
        rc, rows, err = reconcile("--apply", "--max-inquiries", "2", day=self.day)
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("more than --max-inquiries 2", err)
        self.assertEqual(self.asked(), [])
        rc, rows, err = reconcile("--max-inquiries", "3", day=self.day)
        self.assertEqual((rc, len(self.asked())), (1, 3), (rows, err))

    def test_inquiries_paced(self):
        for _ in range(4):
            self.order()
        t0 = time.monotonic()
        rc, rows, err = reconcile("--inquiries-per-second", "2", day=self.day)
        elapsed = time.monotonic() - t0
        self.assertEqual((rc, len(self.asked())), (0, 4), (rows, err))
        self.assertGreaterEqual(elapsed, 1.5)   # 4 requests at 2 per second: at 0, .5, 1, 1.5 s

    def test_usage(self):
        for args, word in [
                (["--max-inquiries", "0"], "--max-inquiries"),
                (["--max-inquiries", "100001"], "--max-inquiries"),
                (["--inquiries-per-second", "51"], "--inquiries-per-second"),
                (["--inquiries-per-second", "x"], "--inquiries-per-second"),
                (["--statement", "/dev/null"], "no --statement"),
                (["--date", "2024-13-01"], "--date")]:
            rc, rows, err = reconcile(*args)
            self.assertEqual(rc, 64, (args, err))
            self.assertIn(word, err)
        p = run_admin("reconcile", "--provider", "alipay", "--site", SITE, "--by-query")
        self.assertEqual(p.returncode, 64, p.stderr)
        self.assertIn("--by-query asks 2C2P", p.stderr)
        p = run_admin("reconcile", "--provider", "alipay", "--site", SITE, "--statement",
                      "/dev/null", "--max-inquiries", "5")
        self.assertEqual(p.returncode, 64, p.stderr)
        # the report file format stays refused, with the reason and the substitute
        p = run_admin("reconcile", "--provider", "2c2p", "--site", SITE, "--statement",
                      "/dev/null")
        self.assertEqual(p.returncode, 64, p.stderr)
        self.assertIn("67 and 79 fields, not the 85", p.stderr)
        self.assertIn("--by-query", p.stderr)
        self.assertEqual(self.asked(), [])


if __name__ == "__main__":
    unittest.main()

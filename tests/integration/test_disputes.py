# test_disputes.py: Stripe disputes as their own kind (issue 22; README
# "Outcomes", docs/PROVIDERS.md "Disputes and complaints").  Genuinely
# signed charge.dispute.* events through the real receiver (CGI) against a
# throwaway PostgreSQL:
#   - the five events in order (created, funds_withdrawn, updated, closed,
#     funds_reinstated): each stored once (outcome dispute), one case; the
#     order's status never changes; report lists the open dispute with its
#     amount, reason and evidence due date (exit 1), then how it ended
#     (dispute_won), and nothing once --closed-within has passed (exit 0)
#   - out of order (closed first): the case is closed (lost) and stays
#     closed; report never shows it open
#   - deduplicated per dispute, event type and status: a retry and a second
#     event saying the same are duplicate deliveries
#   - linked through the stored PaymentIntent (order_by_txn); a dispute of a
#     PaymentIntent no order has is listed unlinked, and linked on the report
#     once that payment's notification has recorded it
#   - a feed event for the shop per dispute event, live metrics counted
#   - purge keeps every row of an open dispute, archives them once closed
#   - a test-mode dispute on a live site is mode_mismatch, never a case
#   - replay re-verifies dispute rows and changes nothing (exit 0)

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

PG = None
CFG = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
SITE = pnkit.SITE

FIVE = ("charge.dispute.created", "charge.dispute.funds_withdrawn", "charge.dispute.updated",
        "charge.dispute.closed", "charge.dispute.funds_reinstated")
STATUS = {"charge.dispute.created": "needs_response",
          "charge.dispute.funds_withdrawn": "needs_response",
          "charge.dispute.updated": "under_review"}


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def admin(*args):
    p = subprocess.run([ADMIN, "-c", CFG.path] + list(args), env=pntest.clean_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def report(*extra):
    rc, out, err = admin("report", "--site", SITE, "--format", "json", *extra)
    return rc, json.loads(out) if out.strip() else []


def send(body):
    headers, body = pnkit.sign_stripe(body)
    r = pntest.run_cgi(pntest.binary("stripe"), "POST", pnkit.path("stripe"), headers, body,
                       config=CFG.path)
    if r.status != 200:
        raise AssertionError("not acknowledged: %s %r %s" % (r.status, r.body, r.stderr))
    return r


class Disputes(unittest.TestCase):
    def setUp(self):
        PG.reset()
        self.oid = "D" + pnkit.seq()
        self.pi = "pi_" + self.oid
        self.dp = "dp_" + self.oid
        self.due = int(time.time()) + 7 * 86400
        PG.add_order(SITE, self.oid, 2500, "USD")
        send(pnkit.stripe_paid(self.oid, 2500, payment_intent=self.pi)[1])
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid")

    def event(self, etype, status=None, t=None, **kw):
        status = status or STATUS.get(etype, "won")
        return pntest.stripe_dispute(etype, self.dp, status, self.pi, amount_minor=2500,
                                     due_by=self.due if status.endswith("needs_response")
                                     else None, created=t, **kw)

    def case(self):
        rows = PG.psql("SELECT status, closed_at IS NOT NULL, order_id, amount_minor, currency, "
                       "reason, due_by IS NOT NULL, events FROM paynotify.cases "
                       "WHERE case_id = %s" % pntest.q(self.dp))
        self.assertEqual(len(rows), 1, rows)
        return list(rows[0])

    def dispute_rows(self):
        return PG.notifications("event_kind = 'dispute'")

    def items(self, *extra):
        rc, rows = report(*extra)
        return rc, [r for r in rows if r["kind"].startswith("dispute")]

    def test_five_events_in_order(self):
        t0 = int(time.time()) - 100
        send(self.event(FIVE[0], t=t0))
        # open: on the report with amount, reason and due date; order untouched
        rc, items = self.items()
        self.assertEqual(rc, 1)
        self.assertEqual([(i["kind"], i["order_id"], i["amount"]) for i in items],
                         [("dispute_open", self.oid, "25.00 USD")], items)
        due = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.due))
        self.assertIn("due " + due, items[0]["detail"])
        self.assertIn("reason fraudulent", items[0]["detail"])
        self.assertIn(self.dp + " needs_response", items[0]["detail"])
        self.assertIn("order paid", items[0]["detail"])
        for i, etype in enumerate(FIVE[1:], 1):
            send(self.event(etype, t=t0 + i))
            self.assertEqual(PG.order(SITE, self.oid)["status"], "paid", etype)
            rc, items = self.items()
            self.assertEqual(len(items), 1, items)
            want = "dispute_open" if etype in STATUS else "dispute_won"
            self.assertEqual(items[0]["kind"], want, (etype, items))
        rows = self.dispute_rows()
        self.assertEqual([r["event_type"] for r in rows], list(FIVE))
        self.assertEqual({r["outcome"] for r in rows}, {"dispute"})
        self.assertEqual({r["order_id"] for r in rows}, {self.oid})
        self.assertEqual({r["psp_txn_id"] for r in rows}, {self.pi})
        st = self.case()
        self.assertEqual(st[:6], ["won", "t", self.oid, "2500", "USD", "fraudulent"])
        self.assertEqual(st[7], "5")
        o = PG.order(SITE, self.oid)
        self.assertEqual((o["status"], o["refunded_minor"], o["psp_txn_id"]),
                         ("paid", 0, self.pi))
        self.assertIn("won", self.items()[1][0]["detail"])
        # closed cases drop off once --closed-within has passed: a quiet report
        rc, items = self.items("--closed-within", "0")
        self.assertEqual((rc, items), (0, []))
        # a feed event for the shop per dispute event (one more for the payment)
        feed = PG.psql("SELECT event_kind, outcome, order_id FROM paynotify.feed "
                       "WHERE consumer = 'default' AND event_kind = 'dispute' ORDER BY event_id")
        self.assertEqual(feed, [("dispute", "dispute", self.oid)] * 5)

    def test_out_of_order_closed_first_stays_closed(self):
        t0 = int(time.time()) - 100
        send(self.event("charge.dispute.closed", status="lost", t=t0 + 4))
        rc, items = self.items()
        self.assertEqual([i["kind"] for i in items], ["dispute_lost"], items)
        for i, etype in enumerate(("charge.dispute.funds_withdrawn", "charge.dispute.created",
                                   "charge.dispute.updated")):
            send(self.event(etype, t=t0 + i))
            rc, items = self.items()
            self.assertEqual([x["kind"] for x in items], ["dispute_lost"], (etype, items))
        self.assertEqual(self.case()[:3], ["lost", "t", self.oid])
        self.assertEqual(len(self.dispute_rows()), 4)
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid")

    def test_out_of_order_updates_keep_the_latest_status(self):
        t0 = int(time.time()) - 100
        send(self.event("charge.dispute.updated", t=t0 + 2))
        send(self.event("charge.dispute.created", t=t0))
        self.assertEqual(self.case()[:2], ["under_review", "f"])
        self.assertEqual(self.items()[1][0]["kind"], "dispute_open")

    def test_deduplicated_per_dispute_and_status(self):
        body = self.event(FIVE[0])
        send(body)
        send(body)                      # Stripe's retry of the same event
        send(self.event(FIVE[0]))       # another event saying the same of the same dispute
        rows = self.dispute_rows()
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["deliveries"], 3)
        self.assertEqual(rows[0]["dedup_key"],
                         "dispute:%s:charge.dispute.created:needs_response" % self.dp)
        self.assertEqual(self.case()[7], "1")

    def test_replay_reverifies_and_changes_nothing(self):
        send(self.event(FIVE[0]))
        send(self.event("charge.dispute.closed", status="won"))
        before = PG.psql("SELECT status, closed_at, events FROM paynotify.cases")
        rc, out, err = admin("replay", "--outcome", "dispute", "--apply", "--format", "json")
        self.assertEqual(rc, 0, (out, err))
        rows = json.loads(out)
        self.assertEqual([(r["verified"], r["now"]) for r in rows],
                         [("yes", "dispute"), ("yes", "dispute")], rows)
        self.assertEqual(PG.psql("SELECT status, closed_at, events FROM paynotify.cases"),
                         before)
        self.assertEqual(PG.order(SITE, self.oid)["status"], "paid")

    def test_unlinked_dispute_is_listed(self):
        other = pntest.stripe_dispute("charge.dispute.created", "dp_x" + self.oid,
                                      "needs_response", "pi_unknown" + self.oid,
                                      due_by=self.due)
        send(other)
        rc, items = self.items()
        self.assertEqual(rc, 1)
        self.assertEqual([(i["kind"], i["order_id"]) for i in items], [("dispute_open", None)])
        self.assertIn("no order of this site has transaction pi_unknown", items[0]["detail"])

    def test_dispute_before_the_payment_is_linked_once_it_is_paid(self):
        oid = "E" + pnkit.seq()
        PG.add_order(SITE, oid, 700, "USD")
        send(pntest.stripe_dispute("charge.dispute.created", "dp_" + oid, "needs_response",
                                   "pi_" + oid, amount_minor=700, due_by=self.due))
        items = [i for i in self.items()[1] if i["notification_id"] and "dp_" + oid in i["detail"]]
        self.assertEqual([i["order_id"] for i in items], [None])
        send(pnkit.stripe_paid(oid, 700, payment_intent="pi_" + oid)[1])
        items = [i for i in self.items()[1] if "dp_" + oid in i["detail"]]
        self.assertEqual([(i["order_id"], i["kind"]) for i in items], [(oid, "dispute_open")])
        self.assertIn("order paid", items[0]["detail"])

    def test_legacy_charge_without_payment_intent(self):
        send(pntest.stripe_dispute("charge.dispute.created", self.dp, "warning_needs_response",
                                   None, charge="ch_legacy" + self.oid, due_by=self.due))
        rows = self.dispute_rows()
        self.assertEqual([r["psp_txn_id"] for r in rows], ["ch_legacy" + self.oid])

    def test_test_mode_dispute_on_a_live_site_is_not_a_case(self):
        send(self.event(FIVE[0], livemode=False))
        self.assertEqual([r["outcome"] for r in self.dispute_rows()], ["mode_mismatch"])
        self.assertEqual(PG.psql("SELECT count(*) FROM paynotify.cases"), [("0",)])

    def test_purge_keeps_an_open_dispute(self):
        send(self.event(FIVE[0]))
        send(self.event(FIVE[1]))
        old = "now() - interval '200 days'"
        PG.psql("UPDATE paynotify.notifications SET received_at = %s, last_delivery_at = %s"
                % (old, old))
        d = tempfile.mkdtemp(prefix="pn-disputes.")
        rc, out, err = admin("purge", "--archive", os.path.join(d, "a1.csv"))
        self.assertEqual(rc, 1, (out, err))     # old rows wait for a human: the open dispute
        self.assertEqual(len(self.dispute_rows()), 2, "an open dispute's rows were purged")
        self.assertEqual(PG.notifications("event_kind = 'paid'"), [])   # resolved: archived
        send(self.event("charge.dispute.closed", status="lost"))
        PG.psql("UPDATE paynotify.notifications SET received_at = %s, last_delivery_at = %s"
                % (old, old))
        rc, out, err = admin("purge", "--archive", os.path.join(d, "a2.csv"))
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual(self.dispute_rows(), [])
        with open(os.path.join(d, "a2.csv"), "rb") as f:
            self.assertEqual(f.read().count(self.dp.encode()) >= 3, True)

    def test_live_metrics_count_disputes(self):
        with open(CFG.path) as f:
            text = f.read()
        conf = os.path.join(CFG.dir, "metrics.ini")
        with open(conf, "w") as f:
            f.write(text + "\n[metrics]\nstatus_path = /paynotify-status\n")
        rcv = pnkit.Receiver("stripe", conf, workers=1)
        rcv.start()
        try:
            headers, body = pnkit.sign_stripe(self.event(FIVE[0]))
            r = rcv.request("POST", pnkit.path("stripe"), headers, body)
            self.assertEqual(r.status, 200, r.body)
            r = rcv.request("POST", pnkit.path("stripe"), headers, body)     # its retry
            self.assertEqual(r.status, 200, r.body)
            m = rcv.request("GET", "/paynotify-status/stripe")
            self.assertEqual(m.status, 200, m.body)
            text = m.body.decode()
        finally:
            rcv.stop()
        line = [ln for ln in text.splitlines() if ln.startswith("paynotify_requests_total{")
                and 'outcome="dispute"' in ln and 'site="%s"' % SITE in ln]
        self.assertEqual(len(line), 1, text)
        self.assertTrue(line[0].endswith(" 1"), line)
        dup = [ln for ln in text.splitlines() if ln.startswith("paynotify_requests_total{")
               and 'outcome="duplicate"' in ln and 'site="%s"' % SITE in ln]
        self.assertTrue(dup and dup[0].endswith(" 1"), text)

if __name__ == "__main__":
    unittest.main()

# test_feed.py: the durable event feed (README "Event feed",
# sql/functions.sql claim_events / ack_events) and the LISTEN wake-up sent
# after the answer.
#
#   consumer down for 1,000 applied events, then back: every event once, in
#   order per order
#   two consumers of one group at once: no event to both; never a later
#   event of an order while an earlier one is claimed and unacknowledged
#   an unacknowledged claim comes back after its lease
#   fenced acks (schema 12): a consumer whose lease ran out and whose events
#   were claimed again cannot acknowledge them (refused, counted in
#   feed_consumers.stale_acks and `paynotify stats`), the new claimer can;
#   an ack without the lease token is an error; the same through pgbouncer
#   consumer groups are independent; replay's applications are in the feed
#   a real receiver (CGI, FastCGI): the feed event is committed with the
#   payment; the wake-up reaches a LISTEN session after the answer, and
#   paynotify.notify = off turns it off

import json
import os
import random
import select
import shutil
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import q  # noqa: E402

PG = None
CFG = None


def setUpModule():
    global PG, CFG
    PG = pntest.PgCluster().start()
    CFG = pntest.write_config(PG)


def tearDownModule():
    if PG:
        PG.destroy()


def ingest_sql(order, key, kind, txn, amount=None, refund=None):
    return ("SELECT outcome FROM paynotify.ingest('shop-a', 'stripe', %s, %s, 'T', %s, %s, NULL, "
            "%s, 'USD', %s, false, NULL, 'k:1', NULL, NULL, '{}', '\\x00'::bytea, false, NULL);"
            % (q(key), q(kind), q(order), q(txn), "NULL" if amount is None else amount,
               "NULL" if refund is None else refund))


def claim(consumer, n, lease=60):
    """(event_id, order_id, notification_id, event_kind, claims, lease_token)"""
    rows = PG.psql("SELECT event_id, order_id, notification_id, event_kind, claims, lease_token "
                   "FROM paynotify.claim_events(%s, %d, %d)" % (q(consumer), n, lease))
    return [(int(r[0]), r[1], int(r[2]), r[3], int(r[4]), r[5]) for r in rows]


def ack(consumer, batch):
    """Acknowledge claimed events (rows of claim()) with their own lease token."""
    n = 0
    for token in sorted({b[5] for b in batch}):
        n += ack_with(consumer, [b[0] for b in batch if b[5] == token], token)
    return n


def ack_with(consumer, ids, token):
    return int(PG.scalar("SELECT paynotify.ack_events(%s, ARRAY[%s]::bigint[], %s)"
                         % (q(consumer), ",".join(str(i) for i in ids) or "NULL", q(token))))


def stale_acks(consumer):
    return int(PG.scalar("SELECT stale_acks FROM paynotify.feed_consumers WHERE consumer = %s"
                         % q(consumer)))


class Feed(unittest.TestCase):
    def setUp(self):
        PG.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed")
        PG.psql("DELETE FROM paynotify.feed_consumers WHERE consumer <> 'default'")
        PG.psql("UPDATE paynotify.feed_consumers SET stale_acks = 0, last_stale_ack_at = NULL")

    def make_events(self, orders, refunds_each, prefix):
        """orders x (1 payment + refunds_each refunds): that many applied events."""
        script = []
        for o in range(orders):
            oid = "%s-%d" % (prefix, o)
            script.append("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                          "VALUES ('shop-a', %s, 100000, 'USD');" % q(oid))
            script.append(ingest_sql(oid, oid + "-paid", "paid", "pi_" + oid, amount=100000))
        for r in range(refunds_each):     # interleaved across orders, as live traffic is
            for o in range(orders):
                oid = "%s-%d" % (prefix, o)
                script.append(ingest_sql(oid, "%s-r%d" % (oid, r), "refund", "pi_" + oid,
                                         refund=1))
        argv = PG._psql_argv(pntest.PG_DB) + ["-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"]
        p = subprocess.run(argv, env=pntest.clean_env(), input="\n".join(script).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(p.stdout.decode().split().count("applied"), orders * (1 + refunds_each))

    def expected_order(self):
        """Per order, its applied notifications in commit order."""
        per = {}
        for nid, oid in PG.psql("SELECT id, order_id FROM paynotify.notifications "
                                "WHERE outcome = 'applied' ORDER BY id"):
            per.setdefault(oid, []).append(int(nid))
        return per

    def test_consumer_down_for_1000_events_then_back(self):
        self.make_events(100, 9, "D")                     # 1,000 events, 10 per order
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed "
                                   "WHERE consumer = 'default'"), "1000")
        seen, per = [], {}
        while True:
            batch = claim("default", 64)
            if not batch:
                break
            self.assertEqual(len({b[1] for b in batch}), len(batch),
                             "two events of one order in one batch")
            self.assertEqual(len({b[5] for b in batch}), 1, "one lease token per claim")
            for eid, oid, nid, kind, claims, _ in batch:
                seen.append(eid)
                per.setdefault(oid, []).append(nid)
                self.assertEqual(claims, 1)
            self.assertEqual(ack("default", batch), len(batch))
        self.assertEqual(len(seen), 1000)
        self.assertEqual(len(set(seen)), 1000, "an event delivered twice")
        self.assertEqual(per, self.expected_order(), "not in order per order")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "0")

    def test_two_consumers_of_one_group(self):
        self.make_events(40, 9, "C")                      # 400 events
        got = {"c1": [], "c2": []}
        claimed_at, acked_at = {}, {}
        errors = []

        def consumer(name):
            try:
                idle = 0
                while idle < 5:
                    t0 = time.monotonic()
                    batch = claim("default", random.randint(1, 16))
                    t1 = time.monotonic()
                    if not batch:
                        idle += 1
                        time.sleep(0.05)
                        continue
                    idle = 0
                    for b in batch:
                        got[name].append(b)
                        claimed_at[b[0]] = t1
                    time.sleep(random.random() * 0.02)
                    for b in batch:
                        acked_at[b[0]] = time.monotonic()
                    ack("default", batch)
                    del t0
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=consumer, args=(n,)) for n in got]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        ids1 = {b[0] for b in got["c1"]}
        ids2 = {b[0] for b in got["c2"]}
        self.assertEqual(ids1 & ids2, set(), "an event handed to both consumers")
        self.assertEqual(len(ids1 | ids2), 400)
        self.assertTrue(ids1 and ids2, "one consumer got nothing: no concurrency tested")
        # per order: event k+1 was handed out only after event k was acknowledged
        by_order = {}
        for b in got["c1"] + got["c2"]:
            by_order.setdefault(b[1], []).append((b[2], b[0]))
        for oid, evs in by_order.items():
            evs.sort()
            for (n0, e0), (n1, e1) in zip(evs, evs[1:]):
                self.assertGreaterEqual(claimed_at[e1], acked_at[e0],
                                        "order %s: event %d claimed before %d was acknowledged"
                                        % (oid, e1, e0))

    def test_unacked_claim_comes_back_after_its_lease(self):
        self.make_events(2, 1, "L")                        # L-0, L-1: paid + 1 refund each
        # a lease long enough for the next claims to come inside it on a
        # loaded machine, and a wait from the first claim's answer (its
        # lease started before) until it is over
        lease = 3
        first = claim("default", 10, lease=lease)
        leased_until = time.monotonic() + lease
        self.assertEqual(sorted(b[1] for b in first), ["L-0", "L-1"])   # the two payments
        self.assertEqual(claim("default", 10), [], "claimed events or their successors handed out")
        # acknowledging one order lets its next event through; the other stays leased
        e0 = [b for b in first if b[1] == "L-0"][0]
        self.assertEqual(ack("default", [e0]), 1)
        nxt = claim("default", 10, lease=60)
        self.assertEqual([(b[1], b[3]) for b in nxt], [("L-0", "refund")])
        time.sleep(max(0.0, leased_until + 0.3 - time.monotonic()))
        back = claim("default", 10)
        self.assertEqual([(b[1], b[3], b[4]) for b in back], [("L-1", "paid", 2)])
        self.assertEqual(ack("default", [back[0], nxt[0]]), 2)
        # an id acknowledged twice is not counted, and is no stale ack
        self.assertEqual(ack("default", [back[0]]), 0)
        self.assertEqual(stale_acks("default"), 0)
        rest = claim("default", 10)
        self.assertEqual([(b[1], b[3]) for b in rest], [("L-1", "refund")])

    def test_stale_ack_refused_new_claimers_ack_works(self):
        """Issue 23 item 4: consumer A's lease runs out, B claims the same
        events; A's late ack must not free the order's next event while B
        handles the first."""
        self.make_events(2, 1, "F")                        # F-0, F-1: paid + 1 refund each
        lease = 2
        a = claim("default", 10, lease=lease)
        a_until = time.monotonic() + lease
        self.assertEqual(sorted((b[1], b[3]) for b in a), [("F-0", "paid"), ("F-1", "paid")])
        # while A's lease runs: nothing for B
        self.assertEqual(claim("default", 10), [])
        time.sleep(max(0.0, a_until + 0.3 - time.monotonic()))
        b = claim("default", 10, lease=60)
        self.assertEqual(sorted((x[1], x[3], x[4]) for x in b),
                         [("F-0", "paid", 2), ("F-1", "paid", 2)])
        self.assertNotEqual(a[0][5], b[0][5], "the second claim reused the first lease token")
        # A wakes up and acknowledges with its own (stale) token: refused,
        # counted, and the orders' next events stay in the feed, not out
        self.assertEqual(ack("default", a), 0)
        self.assertEqual(stale_acks("default"), 2)
        self.assertEqual(PG.scalar("SELECT last_stale_ack_at IS NOT NULL FROM "
                                   "paynotify.feed_consumers WHERE consumer = 'default'"), "t")
        self.assertEqual(claim("default", 10), [], "a refund went out while its payment is held")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "4")
        # the WARNING tells the caller why
        argv = PG._psql_argv(pntest.PG_DB) + ["-At", "-v", "ON_ERROR_STOP=1", "-c",
                                              "SELECT paynotify.ack_events('default', ARRAY[%d]"
                                              "::bigint[], %s)" % (a[0][0], q(a[0][5]))]
        p = subprocess.run(argv, env=pntest.clean_env(), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, "0\n"), p.stderr)
        self.assertIn("WARNING:  ack_events: 1 event(s) of consumer \"default\" refused", p.stderr)
        self.assertEqual(stale_acks("default"), 3)
        # B's ack, with B's token, works; then the refunds come out, in order
        self.assertEqual(ack("default", b), 2)
        rest = claim("default", 10)
        self.assertEqual(sorted((x[1], x[3], x[4]) for x in rest),
                         [("F-0", "refund", 1), ("F-1", "refund", 1)])
        # a token acknowledges only the events claimed with it
        self.assertEqual(ack_with("default", [x[0] for x in rest], b[0][5]), 0)
        self.assertEqual(stale_acks("default"), 5)
        self.assertEqual(ack("default", rest), 2)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "0")
        # the counter, where an operator looks
        p = subprocess.run([os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO,
                                         "paynotify"), "-c", CFG.path, "stats",
                            "--format", "prometheus"],
                           env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('paynotify_feed_stale_acks_total{consumer="default"} 5\n', p.stdout)
        self.assertIn('paynotify_feed_events{consumer="default"} 0\n', p.stdout)

    def test_expired_lease_not_claimed_again_still_acks(self):
        self.make_events(1, 0, "E")
        a = claim("default", 10, lease=1)
        time.sleep(1.3)
        self.assertEqual(ack("default", a), 1)            # nobody else was handed it
        self.assertEqual(stale_acks("default"), 0)

    def test_ack_without_token_is_an_error(self):
        self.make_events(1, 0, "N")
        a = claim("default", 10)
        with self.assertRaisesRegex(RuntimeError, "the lease_token that claim_events returned "
                                    "is required"):
            PG.scalar("SELECT paynotify.ack_events('default', ARRAY[%d]::bigint[])" % a[0][0])
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "1")
        self.assertEqual(ack("default", a), 1)

    def test_groups_are_independent_and_validated(self):
        self.assertEqual(PG.scalar("SELECT paynotify.feed_subscribe('crm')"), "t")
        self.assertEqual(PG.scalar("SELECT paynotify.feed_subscribe('crm')"), "f")
        self.make_events(3, 0, "G")
        a = claim("default", 10)
        self.assertEqual(ack("default", a), 3)
        b = claim("crm", 10)
        self.assertEqual(sorted(x[0] for x in a), sorted(x[0] for x in b))
        with self.assertRaisesRegex(RuntimeError, 'unknown feed consumer "nobody"'):
            claim("nobody", 1)
        with self.assertRaisesRegex(RuntimeError, "max must be 1 to 10000"):
            claim("crm", 0)
        with self.assertRaisesRegex(RuntimeError, "new row .* violates check constraint"):
            PG.scalar("SELECT paynotify.feed_subscribe('bad name')")
        self.assertEqual(PG.scalar("SELECT paynotify.feed_unsubscribe('crm')"), "3")
        self.make_events(1, 0, "H")
        self.assertEqual(PG.scalar("SELECT count(DISTINCT consumer) FROM paynotify.feed"), "1")

    def test_replayed_application_is_in_the_feed(self):
        r = PG.psql(ingest_sql("R-1", "evt_r1", "paid", "pi_r1", amount=500))
        self.assertEqual(r, [("unknown_order",)])
        self.assertEqual(claim("default", 10), [])
        PG.add_order("shop-a", "R-1", 500, "USD")
        nid = PG.scalar("SELECT id FROM paynotify.notifications WHERE dedup_key = 'evt_r1'")
        row = PG.psql("SELECT outcome_now, event_id IS NOT NULL, wakeup::json->>'replayed' FROM "
                      "paynotify.reapply(%s, 'paid', 'R-1', 'pi_r1', 500, 'USD', NULL, false, "
                      "NULL, false)" % nid)
        self.assertEqual(row, [("applied", "t", "true")])
        ev = PG.psql("SELECT order_id, outcome, replayed FROM paynotify.feed")
        self.assertEqual(ev, [("R-1", "applied", "t")])


class ThroughPooler(unittest.TestCase):
    """claim_events/ack_events keep no session state: two consumers through
    pgbouncer in transaction mode, sharing ONE server connection."""

    def setUp(self):
        pntest.need("pgbouncer", "pgbouncer")
        PG.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed")
        d = pntest.scratch_dir("pntest-pgb.")
        os.chmod(d, 0o777)
        pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
        self.dir, self.port = d, 6432
        with open(os.path.join(d, "pgbouncer.ini"), "w") as f:
            f.write("[databases]\npaynotify = host=%s port=%d dbname=paynotify user=paynotify\n"
                    "[pgbouncer]\nlisten_addr =\nunix_socket_dir = %s\nlisten_port = %d\n"
                    "auth_type = any\npool_mode = transaction\ndefault_pool_size = 1\n"
                    "max_client_conn = 50\nlogfile = %s/pgbouncer.log\n"
                    "pidfile = %s/pgbouncer.pid\n" % (PG.base, PG.port, d, self.port, d, d))
        argv = ["pgbouncer", os.path.join(d, "pgbouncer.ini")]
        if pntest.IS_ROOT:
            argv = ["runuser", "-u", "nobody", "--"] + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=pntest.clean_env())
        self.addCleanup(self.stop)
        sock = os.path.join(d, ".s.PGSQL.%d" % self.port)
        # a deadline, not a number of polls: runuser and pgbouncer can take
        # seconds to start on a loaded machine
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and self.proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(sock), "pgbouncer did not start (exit %s)"
                        % self.proc.poll())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def pooled(self, sql):
        argv = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.dir,
                "-p", str(self.port), "-U", "paynotify", "-d", "paynotify", "-c", sql]
        p = subprocess.run(argv, env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [l.split("|") for l in p.stdout.splitlines() if l]

    def test_two_consumers_through_transaction_pooling(self):
        Feed.make_events(self, 20, 4, "P")                 # 100 events
        got, errors = {"a": [], "b": []}, []

        def consumer(name):
            try:
                idle = 0
                while idle < 3:
                    rows = self.pooled("SELECT event_id, lease_token FROM "
                                       "paynotify.claim_events('default', 7)")
                    if not rows:
                        idle += 1
                        continue
                    idle = 0
                    ids = [r[0] for r in rows]
                    got[name] += ids
                    n = self.pooled("SELECT paynotify.ack_events('default', ARRAY[%s]::bigint[], "
                                    "'%s')" % (",".join(ids), rows[0][1]))
                    if n != [[str(len(ids))]]:
                        raise AssertionError("acked %r of %d" % (n, len(ids)))
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=consumer, args=(n,)) for n in got]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(set(got["a"]) & set(got["b"]), set())
        self.assertEqual(len(set(got["a"]) | set(got["b"])), 100)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "0")
        # one server connection served both consumers
        self.assertEqual(PG.scalar("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "backend_type = 'client backend' AND datname = 'paynotify' "
                                   "AND pid <> pg_backend_pid()"), "1")

    def test_stale_ack_refused_through_transaction_pooling(self):
        """The fence is in the rows, not in a session: through one shared
        server connection, A's late ack is refused and B's works."""
        PG.psql("UPDATE paynotify.feed_consumers SET stale_acks = 0, last_stale_ack_at = NULL")
        Feed.make_events(self, 1, 1, "Q")                  # paid + refund
        a = self.pooled("SELECT event_id, lease_token FROM paynotify.claim_events('default', 5, 1)")
        self.assertEqual(len(a), 1)
        time.sleep(1.3)
        b = self.pooled("SELECT event_id, lease_token FROM paynotify.claim_events('default', 5)")
        self.assertEqual([r[0] for r in b], [a[0][0]])
        self.assertEqual(self.pooled("SELECT paynotify.ack_events('default', ARRAY[%s]::bigint[], "
                                     "'%s')" % (a[0][0], a[0][1])), [["0"]])
        self.assertEqual(self.pooled("SELECT event_kind FROM "
                                     "paynotify.claim_events('default', 5)"), [])
        self.assertEqual(self.pooled("SELECT paynotify.ack_events('default', ARRAY[%s]::bigint[], "
                                     "'%s')" % (b[0][0], b[0][1])), [["1"]])
        self.assertEqual(self.pooled("SELECT event_kind FROM "
                                     "paynotify.claim_events('default', 5)"), [["refund"]])
        self.assertEqual(PG.scalar("SELECT stale_acks FROM paynotify.feed_consumers "
                                   "WHERE consumer = 'default'"), "1")


class ReceiverFeed(unittest.TestCase):
    """Genuinely signed Stripe notifications through the real receiver."""

    def setUp(self):
        PG.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed")

    def deliver(self, oid, fcgi=None):
        site = pntest.SITE_A
        body = pntest.stripe_checkout_completed(oid, 1999, payment_intent="pi_" + oid)
        h = pntest.stripe_headers(site, body)
        if fcgi is not None:
            return fcgi.request("POST", "/notify/stripe/shop-a", h, body)
        return pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/shop-a", h, body,
                              config=CFG)

    def listen_while(self, action):
        """A psql session LISTENs while action() runs; its output.  action()
        starts once psql has said that its LISTEN is done (a fixed pause
        was not enough for a psql starting on a loaded machine); then one
        more query, after which psql prints what arrived meanwhile."""
        p = subprocess.Popen(PG._psql_argv(pntest.PG_DB) + ["-At"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=pntest.clean_env())
        try:
            p.stdin.write(b"LISTEN paynotify;\n\\echo listening\n")
            p.stdin.flush()
            ready, _, _ = select.select([p.stdout], [], [], 60)
            line = p.stdout.readline() if ready else b""
            self.assertEqual(line, b"listening\n", "psql did not LISTEN: %r" % (line,))
            action()
            out, err = p.communicate(b"SELECT 1;\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)
        return out.decode()

    def test_cgi_payment_feed_and_wakeup(self):
        PG.add_order("shop-a", "RF-1", 1999, "USD")
        res = []
        out = self.listen_while(lambda: res.append(self.deliver("RF-1")))
        self.assertEqual(res[0].status, 200, res[0])
        self.assertIn('Asynchronous notification "paynotify" with payload', out)
        payload = json.loads(out.split('with payload "', 1)[1].rsplit('" received', 1)[0]
                             .replace('\\"', '"'))
        self.assertEqual((payload["order_id"], payload["order_status"], payload["event_kind"]),
                         ("RF-1", "paid", "paid"))
        ev = claim("default", 10)
        self.assertEqual([(e[0], e[1]) for e in ev], [(payload["event_id"], "RF-1")])
        ack("default", ev)

    def test_fastcgi_notify_off(self):
        PG.psql("ALTER DATABASE paynotify SET paynotify.notify = off")
        try:
            srv = pntest.FcgiServer(pntest.binary("stripe"), CFG, workers=1).start()
            try:
                PG.add_order("shop-a", "RF-2", 1999, "USD")
                res = []
                out = self.listen_while(lambda: res.append(self.deliver("RF-2", srv)))
                self.assertEqual(res[0].status, 200)
                self.assertNotIn("Asynchronous notification", out)
                # the feed does not depend on the wake-up
                self.assertEqual([e[1] for e in claim("default", 10)], ["RF-2"])
            finally:
                srv.stop()
        finally:
            PG.psql("ALTER DATABASE paynotify RESET paynotify.notify")


if __name__ == "__main__":
    unittest.main()

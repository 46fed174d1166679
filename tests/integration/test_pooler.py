# test_pooler.py: the receivers through Debian's pgbouncer (issue 17;
# docs/DEPLOYMENT.md "Poolers").  A real pgbouncer (1.18 on Debian 12) in
# front of a throwaway PostgreSQL, on unix sockets in temp dirs:
#   session mode, prepared_statements = on (the default)
#   transaction mode, prepared_statements = off (unnamed statement, the
#     statement_timeout local to each transaction)
# each with signed Stripe and Alipay notifications, duplicates, concurrent
# deliveries of the same events across workers, and the statement_timeout
# still enforced (a locked order row -> failure form within the timeout)
# without leaving a session setting on the pooled server connections.
# And transaction mode with prepared_statements = on (a misconfiguration):
# never a success that is not stored, and a log line naming the option.

import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

PG = None
STRIPE = pnkit.path("stripe")
ALIPAY = pnkit.path("alipay")


def setUpModule():
    global PG
    if not os.path.exists(pntest.PgBouncer.binary()):
        raise unittest.SkipTest("pgbouncer is not installed (apt-get install pgbouncer)")
    PG = pntest.PgCluster().start()


def tearDownModule():
    if PG is not None:
        PG.destroy()


def add_orders(prefix, count, amount=1999, currency="USD"):
    PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
            "SELECT %s, %s || g, %d, %s FROM generate_series(1, %d) g"
            % (pntest.q(pnkit.SITE), pntest.q(prefix), amount, pntest.q(currency), count))


def with_prepared(cfg, on):
    """Set [database] prepared_statements in a pnkit config file."""
    with open(cfg.path) as f:
        text = f.read()
    text = text.replace("[database]\n", "[database]\nprepared_statements = %s\n"
                        % ("on" if on else "off"), 1)
    with open(cfg.path, "w") as f:
        f.write(text)
    return cfg


class PoolerScenarios:
    pool_mode = None
    prepared = None

    @classmethod
    def setUpClass(cls):
        # session mode: every worker keeps a server connection for its whole
        # life, so the pool must hold them all (6 here; fewer and the extra
        # workers wait in pgbouncer's queue); transaction mode shares 3
        cls.bouncer = pntest.PgBouncer(PG, cls.pool_mode,
                                       pool_size=8 if cls.pool_mode == "session" else 3).start()
        cls.cfg = with_prepared(pnkit.write_all_config(None, statement_timeout_ms=1000,
                                                       conninfo=cls.bouncer.conninfo()),
                                cls.prepared)
        cls.stripe = pnkit.Receiver("stripe", cls.cfg, workers=4).start()
        cls.alipay = pnkit.Receiver("alipay", cls.cfg, workers=2).start()

    @classmethod
    def tearDownClass(cls):
        cls.stripe.stop()
        cls.alipay.stop()
        cls.bouncer.stop()

    def setUp(self):
        PG.reset()
        self.tag = "%s%s" % (self.pool_mode[0].upper(), "p" if self.prepared else "u")

    def test_signed_notifications_and_duplicates(self):
        add_orders(self.tag + "s", 3)
        add_orders(self.tag + "a", 3, currency="CNY")
        for i in range(1, 4):
            h, b = pnkit.stripe_paid("%ss%d" % (self.tag, i), 1999,
                                     event_id="evt_%s_%d" % (self.tag, i))
            for copy in range(2):
                r = pnkit.oneshot(self.stripe.sock, "POST", STRIPE, h, b)
                self.assertTrue(pnkit.is_success("stripe", r), r)
            h, b = pnkit.alipay_paid("%sa%d" % (self.tag, i), "19.99")
            for copy in range(2):
                r = pnkit.oneshot(self.alipay.sock, "POST", ALIPAY, h, b)
                self.assertTrue(pnkit.is_success("alipay", r), r)
        rows = PG.notifications()
        self.assertEqual(len(rows), 6)
        self.assertEqual({(n["outcome"], n["deliveries"]) for n in rows}, {("applied", 2)})
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.orders WHERE status = 'paid'"),
                         "6")
        # a forged one through the pooler: refused, nothing stored
        h, b = pnkit.stripe_paid("%ss1" % self.tag, 1999)
        h["Stripe-Signature"] = h["Stripe-Signature"][:-4] + "0000"
        r = pnkit.oneshot(self.stripe.sock, "POST", STRIPE, h, b)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(len(PG.notifications()), 6)

    def test_concurrent_deliveries(self):
        events, copies = 40, 8
        add_orders(self.tag + "c", events)
        reqs = [pnkit.stripe_paid("%sc%d" % (self.tag, i + 1), 1999,
                                  event_id="evt_%sc_%d" % (self.tag, i)) for i in range(events)]
        results, took = pnkit.duplicate_lanes(
            reqs, copies, lambda req: pnkit.oneshot(self.stripe.sock, "POST", STRIPE, *req))
        acks = sum(1 for row in results for r in row if pnkit.is_success("stripe", r))
        self.assertEqual(acks, events * copies)
        rows = PG.psql("SELECT count(*), count(*) FILTER (WHERE outcome = 'applied'), "
                       "sum(deliveries) FROM paynotify.notifications")
        self.assertEqual(tuple(int(x) for x in rows[0]), (events, events, events * copies))
        sys.stdout.write("    measured: pooler_%s_%s deliveries=%d seconds=%.3f\n" % (
            self.pool_mode, "prepared" if self.prepared else "unnamed", events * copies, took))

    def test_statement_timeout_enforced_and_not_left_behind(self):
        add_orders(self.tag + "L", 1)
        locker = subprocess.Popen(
            PG._psql_argv(pntest.PG_DB) + ["-A", "-t"], env=pntest.clean_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            locker.stdin.write(b"BEGIN;\nSELECT 'locked' FROM paynotify.orders WHERE site = '%s' "
                               b"AND order_id = '%sL1' FOR UPDATE;\n"
                               % (pnkit.SITE.encode(), self.tag.encode()))
            locker.stdin.flush()
            self.assertIn(b"locked", locker.stdout.readline())
            h, b = pnkit.stripe_paid("%sL1" % self.tag, 1999)
            t0 = time.monotonic()
            r = pnkit.oneshot(self.stripe.sock, "POST", STRIPE, h, b)
            took = time.monotonic() - t0
            self.assertEqual(r.status, 503, r)
            self.assertIsNone(pnkit.failure_form("stripe", r), r)
            self.assertGreaterEqual(took, 0.9)
            self.assertLess(took, 2.5, "statement_timeout (1000 ms) must hold through the pooler")
        finally:
            locker.stdin.write(b"ROLLBACK;\n")
            locker.stdin.close()
            locker.wait(10)
        self.assertEqual(PG.notifications(), [])
        r = pnkit.oneshot(self.stripe.sock, "POST", STRIPE, h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)
        if self.pool_mode == "transaction":
            # the server connections the receivers used carry no session
            # setting: another client of the pool sees the server default
            for _ in range(4):
                self.assertEqual(self.bouncer.psql("SHOW statement_timeout").strip(), "0")


class SessionPooler(PoolerScenarios, unittest.TestCase):
    pool_mode = "session"
    prepared = True


class TransactionPooler(PoolerScenarios, unittest.TestCase):
    pool_mode = "transaction"
    prepared = False


class PreparedStatementsOption(unittest.TestCase):
    def test_value_validated(self):
        cfg = pnkit.write_all_config(PG)
        with open(cfg.path) as f:
            text = f.read()
        with open(cfg.path, "w") as f:
            f.write(text.replace("[database]\n", "[database]\nprepared_statements = sometimes\n", 1))
        p = subprocess.run([pntest.binary("stripe"), "-c", cfg.path, "--listen",
                            "unix:" + os.path.join(cfg.dir, "s.sock"), "--workers", "1"],
                           env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        self.assertEqual(p.returncode, 78, p.stdout)
        self.assertIn(b'invalid value "sometimes" for "prepared_statements": expected on or off',
                      p.stdout)


class TransactionPoolerPrepared(unittest.TestCase):
    """prepared_statements = on behind a transaction pooler: the named
    statement lives on one server connection and the next transaction may
    get another one.  Misconfigured, but it must fail closed."""

    def test_misconfigured_fails_closed(self):
        PG.reset()
        bouncer = pntest.PgBouncer(PG, "transaction", pool_size=4).start()
        self.addCleanup(bouncer.stop)
        cfg = with_prepared(pnkit.write_all_config(None, conninfo=bouncer.conninfo()), True)
        rcv = pnkit.Receiver("stripe", cfg, workers=4).start()
        self.addCleanup(rcv.stop)
        events = 60
        add_orders("M", events)
        acked, failed = set(), 0
        lock = threading.Lock()

        def go(i):
            nonlocal failed
            eid = "evt_mis_%d" % i
            h, b = pnkit.stripe_paid("M%d" % (i + 1), 1999, event_id=eid)
            r = pnkit.oneshot(rcv.sock, "POST", STRIPE, h, b)
            with lock:
                if pnkit.is_success("stripe", r):
                    acked.add(eid)
                else:
                    self.assertEqual(r.status, 503, r)
                    failed += 1
        for start in range(0, events, 6):
            ts = [threading.Thread(target=go, args=(i,)) for i in range(start, start + 6)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
        stored = {n["psp_event_id"] for n in PG.notifications()}
        self.assertEqual(acked - stored, set(), "a success ack for an event not stored")
        log = rcv.log_text()
        if os.environ.get("PN_POOLER_DEBUG"):
            sys.stdout.write(log)
        if failed:
            self.assertIn("set [database] prepared_statements = off", log,
                          "the log must name the option")
        sys.stdout.write("    measured: pooler_transaction_prepared acked=%d failed=%d "
                         "missing_statement=%d statement_already_exists=%d\n"
                         % (len(acked), failed, log.count("is missing on this server session"),
                            log.count("this server session already has one")))


if __name__ == "__main__":
    unittest.main()

# test_concurrency.py: the concurrent-delivery scenario, written once and run
# for every provider (Alipay, Stripe, 2C2P, WeChat Pay v3 and v2), each as CGI
# (one process per delivery) and over FastCGI (several workers on one socket).
# N deliveries of the same signed notification start together (a barrier);
# the receivers must produce:
#   - exactly one application: one stored notification, outcome applied,
#     deliveries = N, the order paid once;
#   - every delivery answered with the provider's success ack, and no ack
#     before the application can commit: another session holds the order row
#     FOR UPDATE while the deliveries arrive (HOLD_S, inside the receivers'
#     statement_timeout), so the applying transaction cannot commit; every
#     answer must come after that session lets go;
#   - exactly one event in the durable feed, naming that notification.
# One site (shop-x) has all four providers (pnkit.write_all_config); what
# differs between providers is pnkit.KITS (every signature from pnsign).

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
CFG = None
DELIVERIES = 32
FCGI_WORKERS = 4
HOLD_S = 0.5            # inside statement_timeout_ms 3000 (pnkit.write_all_config)


def setUpModule():
    global PG, CFG
    if pnkit.AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG).path


def tearDownModule():
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# The scenario, once


class ConcurrentDuplicates(pntest.ReceiverScenarios):
    kit = None              # a pnkit.Kit
    workers = FCGI_WORKERS

    @staticmethod
    def env():
        return PG, CFG

    def send(self, headers, body):
        path = pnkit.path(self.kit.provider)
        if self.transport == "cgi":
            return pntest.run_cgi(self.binary, "POST", path, headers, body, CFG)
        return self.server.request("POST", path, headers, body)

    def lock_order(self, oid):
        """Another session holding the order row FOR UPDATE; returns release()."""
        locker = subprocess.Popen(
            PG._psql_argv() + ["-A", "-t"], env=pntest.clean_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: locker.poll() is None and locker.kill())
        locker.stdin.write(("BEGIN;\nSELECT 'locked' FROM paynotify.orders WHERE site = %s "
                            "AND order_id = %s FOR UPDATE;\n"
                            % (pntest.q(pnkit.SITE), pntest.q(oid))).encode())
        locker.stdin.flush()
        line = locker.stdout.readline()
        self.assertIn(b"locked", line, "the locking session did not get the row")

        def release():
            """Commit; returns the moment before the COMMIT was sent (no
            application can have committed before it)."""
            t = time.monotonic()
            locker.stdin.write(b"COMMIT;\n")
            locker.stdin.close()
            locker.wait(10)
            return t
        return release

    def test_concurrent_duplicates_applied_once(self):
        k, n = self.kit, DELIVERIES
        oid = "RACE-%s-%s" % (k.name, self.transport)
        PG.add_order(pnkit.SITE, oid, k.amount_minor, k.currency)
        headers, body = k.paid(oid)
        results = [None] * n
        answered = [None] * n
        barrier = threading.Barrier(n + 1)

        def deliver(i):
            try:
                barrier.wait(10)
                results[i] = self.send(headers, body)
                answered[i] = time.monotonic()
            except Exception as e:  # reported below
                results[i] = e

        release = self.lock_order(oid)
        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        barrier.wait(10)
        time.sleep(HOLD_S)
        released = release()
        for t in threads:
            t.join(120)
        self.assertFalse(any(t.is_alive() for t in threads), "deliveries still running")
        for i, r in enumerate(results):
            self.assertIsInstance(r, pntest.Response, "delivery %d: %r" % (i, r))
            self.assertTrue(pnkit.is_success(k.provider, r, k.v2),
                            "delivery %d: expected the %s success ack, got %r" % (i, k.provider, r))
            self.assertGreaterEqual(answered[i], released,
                                    "delivery %d answered before the application could commit" % i)
        rows = PG.notifications()
        self.assertEqual([(x["order_id"], x["outcome"], x["deliveries"]) for x in rows],
                         [(oid, "applied", n)], "exactly one application")
        o = PG.order(pnkit.SITE, oid)
        self.assertEqual(o["status"], "paid")
        self.assertEqual(o["psp"], k.provider)
        feed = [tuple(x) for x in PG.psql(
            "SELECT notification_id, provider, order_id, outcome FROM paynotify.feed "
            "WHERE consumer = 'default'")]
        self.assertEqual(feed, [(str(rows[0]["id"]), k.provider, oid, "applied")],
                         "exactly one feed event, for the applied notification")

    def test_redeliveries_do_not_wait_for_a_flush_each(self):
        """A re-delivery changes only its counter, so the receivers let its
        commit skip the WAL flush (ingest() under the session setting
        paynotify.async_duplicates of common/store.c); a new notification
        is flushed before it is acked.  With synchronous_commit on and the
        WAL writer slowed to 10 s, the WAL flush position moves on during
        every new one's request, and not during the re-deliveries'."""
        k, n = self.kit, 8
        PG.psql("ALTER SYSTEM SET synchronous_commit = on; ")
        PG.psql("ALTER SYSTEM SET wal_writer_delay = '10s'")

        def restore():
            PG.psql("ALTER SYSTEM RESET synchronous_commit")
            PG.psql("ALTER SYSTEM RESET wal_writer_delay")
            PG.reload_conf("synchronous_commit", "off")
        self.addCleanup(restore)
        PG.reload_conf("synchronous_commit", "on")
        conn = PG.connect()
        self.addCleanup(conn.close)

        def flush_lsn():
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_wal_flush_lsn() - '0/0'::pg_lsn")
                return int(cur.fetchone()[0])

        def flushed(headers, body):
            """Did the WAL flush move on while this delivery was answered?"""
            before = flush_lsn()
            r = self.send(headers, body)
            self.assertTrue(pnkit.is_success(k.provider, r, k.v2), r)
            return flush_lsn() > before

        oids = ["LAZY-%s-%s-%d" % (k.name, self.transport, i) for i in range(n)]
        for oid in oids:
            PG.add_order(pnkit.SITE, oid, k.amount_minor, k.currency)
        sent = [k.paid(oid) for oid in oids]
        new = [flushed(headers, body) for headers, body in sent]
        again = [flushed(*sent[0]) for _ in range(n)]
        self.assertEqual(sum(new), n, "a new notification acked before its flush: %r" % new)
        self.assertLessEqual(sum(again), 1, "re-deliveries flushed one by one: %r" % again)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE order_id = %s" % pntest.q(oids[0])), str(n + 1))
        self.assertEqual(PG.order(pnkit.SITE, oids[0])["status"], "paid")


# One TestCase class per kit and transport (AlipayCgi, AlipayFastCgi, ...,
# Twoc2pCgi, ..., WechatpayV2FastCgi): plain module-level unittest classes, which unittest and
# pytest both collect; a provider added to pnkit.KITS is covered here.
for _kit in pnkit.KITS:
    for _transport, _suffix in (("cgi", "Cgi"), ("fcgi", "FastCgi")):
        _name = "".join(w.capitalize() for w in _kit.name.replace("2c2p", "twoc2p").split("-")) \
            + _suffix
        globals()[_name] = type(_name, (ConcurrentDuplicates, unittest.TestCase),
                                {"kit": _kit, "transport": _transport, "__module__": __name__})
del _kit, _transport, _suffix, _name


if __name__ == "__main__":
    unittest.main()

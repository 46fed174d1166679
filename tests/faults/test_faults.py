# test_faults.py: fault and concurrency suite (issue 7; docs/RELIABILITY.md).
# Real receivers with their own supervisor (--listen unix:... --workers N)
# against a throwaway PostgreSQL, loopback only, every wait bounded:
#   1. concurrent duplicates: 200 events x 32 concurrent deliveries, the events
#      dealt in turn to every provider (Alipay, Stripe, 2C2P, WeChat Pay v3 and
#      v2; pnkit.KITS), each receiver with 4 workers -> exactly 200 transitions
#      (the feed; 200 LISTEN wake-ups), 6,400 success acks, sum(deliveries) = 6,400
#   2. worker crashes: 5,000 notifications while a chaos loop SIGKILLs random
#      workers; the client retries every request without a success ack, as a
#      provider does -> every event applied exactly once, none lost
#   3. database outage: PostgreSQL stopped for 10 s mid-stream -> only 503 +
#      failure form while it is down, workers reconnect by themselves within
#      2 s of its return, every event applied exactly once after retries
#   4. slow database: the order row locked FOR UPDATE by another session ->
#      failure form within statement_timeout (1000 ms), success on retry
#   5. crash between commit and answer (test-only crash point, see
#      docs/RELIABILITY.md) -> the retry is acked as a duplicate, applied once
# Sizes: PN_FAULTS_SCALE (default 1.0) multiplies the event counts.
# Every test prints its measured numbers on a "measured:" line.

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

SCALE = float(os.environ.get("PN_FAULTS_SCALE", "1"))
PG = None
CFG = None
CRASHPOINT = os.path.join(pntest.REPO, "tests", "faults", "paynotify-stripe-crashpoint")
STRIPE = pnkit.path("stripe")


def n(x):
    return max(10, int(x * SCALE))


def setUpModule():
    global PG, CFG
    PG = pntest.PgCluster().start()
    CFG = pnkit.write_all_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def measured(test, **kv):
    sys.stdout.write("    measured: %s %s\n" % (test, " ".join(
        "%s=%s" % (k, ("%.3f" % v) if isinstance(v, float) else v) for k, v in kv.items())))
    sys.stdout.flush()


def add_orders(prefix, count, amount=1999, currency="USD"):
    PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
            "SELECT %s, %s || g, %d, %s FROM generate_series(1, %d) g"
            % (pntest.q(pnkit.SITE), pntest.q(prefix), amount, pntest.q(currency), count))


def deliver_until_acked(sock, headers, body, deadline, pause=0.02, log=None):
    """Send like a provider: again and again until the success ack.
    Returns the number of attempts; log(t0, t1, outcome) records each."""
    attempts = 0
    while time.monotonic() < deadline:
        attempts += 1
        t0 = time.monotonic()
        try:
            r = pnkit.oneshot(sock, "POST", STRIPE, headers, body, timeout=10)
        except (OSError, ConnectionError):
            r = None
        t1 = time.monotonic()
        if log is not None:
            log(t0, t1, r)
        if r is not None and pnkit.is_success("stripe", r):
            return attempts
        time.sleep(pause)
    raise AssertionError("no success ack before the deadline")


def run_pool(nthreads, work, items, timeout):
    """Run work(item) for every item on nthreads threads; re-raise the first
    error; bounded by timeout."""
    q = queue.Queue()
    for it in items:
        q.put(it)
    errors = []

    def loop():
        while not errors:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            try:
                work(it)
            except BaseException as e:     # noqa: B902 - reported below
                errors.append(e)
    ts = [threading.Thread(target=loop, daemon=True) for _ in range(nthreads)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + timeout
    for t in ts:
        t.join(max(0.1, deadline - time.monotonic()))
    if any(t.is_alive() for t in ts):
        errors.append(AssertionError("worker threads still running after %ss" % timeout))
    if errors:
        raise errors[0]


class Faults(unittest.TestCase):
    def setUp(self):
        if not PG.running:
            PG.start()
        PG.reset()
        self.rcv = None
        self.receivers = {}

    def tearDown(self):
        if self.rcv is not None:
            self.rcv.stop()
        for rcv in self.receivers.values():
            rcv.stop()

    def exactly_once(self, prefix, count):
        """count orders prefix1..count all paid, one applied notification
        each, nothing else stored."""
        rows = PG.psql("SELECT count(*), count(*) FILTER (WHERE outcome = 'applied'), "
                       "count(DISTINCT order_id), coalesce(sum(deliveries), 0) "
                       "FROM paynotify.notifications")
        total, applied, orders, deliveries = (int(x) for x in rows[0])
        self.assertEqual((total, applied, orders), (count, count, count),
                         "expected %d stored events, each applied once" % count)
        paid = int(PG.scalar("SELECT count(*) FROM paynotify.orders WHERE status = 'paid' "
                             "AND order_id LIKE %s" % pntest.q(prefix + "%")))
        self.assertEqual(paid, count)
        return deliveries

    def feed_transitions(self):
        """The notification ids of the transitions in the durable feed (the
        record: a LISTEN wake-up is a hint sent after the answer, and a
        worker killed between its commit and its answer never sends it)."""
        return [int(r[0]) for r in PG.psql("SELECT notification_id FROM paynotify.feed "
                                           "WHERE consumer = 'default' ORDER BY event_id")]

    # -- 1 ------------------------------------------------------------------
    def test_1_concurrent_duplicates(self):
        events, copies = n(200), 32
        kits = pnkit.KITS
        for k in kits:
            # event i goes to kits[i % len(kits)]: orders D1, D6, ... for the first
            PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                    "SELECT %s, 'D' || g, %d, %s FROM generate_series(%d, %d, %d) g"
                    % (pntest.q(pnkit.SITE), k.amount_minor, pntest.q(k.currency),
                       kits.index(k) + 1, events, len(kits)))
        for p in sorted({k.provider for k in kits}):
            self.receivers[p] = pnkit.Receiver(p, CFG, workers=4).start()
        listener = pnkit.PgListener(PG)
        reqs = [(kits[i % len(kits)],) + kits[i % len(kits)].paid("D%d" % (i + 1))
                for i in range(events)]
        results, took = pnkit.duplicate_lanes(
            reqs, copies, lambda req: pnkit.oneshot(self.receivers[req[0].provider].sock, "POST",
                                                    pnkit.path(req[0].provider), req[1], req[2]))
        acks = sum(1 for (k, _, _), row in zip(reqs, results) for r in row
                   if pnkit.is_success(k.provider, r, k.v2))
        self.assertEqual(acks, events * copies, "every delivery must get the success ack")
        payloads = listener.drain(expect=events)
        listener.close()
        ids = {json.loads(p)["notification_id"] for p in payloads}
        self.assertEqual(len(payloads), events, "exactly one wake-up per transition")
        self.assertEqual(len(ids), events)
        feed = self.feed_transitions()
        self.assertEqual(sorted(feed), sorted(ids), "exactly one transition per event")
        deliveries = self.exactly_once("D", events)
        self.assertEqual(deliveries, events * copies)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE deliveries <> %d" % copies), "0")
        for p, rcv in self.receivers.items():
            self.assertEqual(len(rcv.worker_pids()), 4, "no %s worker may die" % p)
        self.assertEqual([tuple(r) for r in PG.psql(
            "SELECT provider, count(*) FROM paynotify.feed "
            "WHERE consumer = 'default' GROUP BY 1 ORDER BY 1")],
                         [(p, str(sum(1 for i in range(events)
                                      if kits[i % len(kits)].provider == p)))
                          for p in sorted(self.receivers)], "feed events per provider")
        measured("concurrent_duplicates", events=events, copies=copies,
                 deliveries=deliveries, transitions=len(feed), seconds=took,
                 req_per_s=events * copies / took)

    # -- 2 ------------------------------------------------------------------
    def test_2_worker_crashes(self):
        events = n(5000)
        add_orders("K", events)
        self.rcv = pnkit.Receiver("stripe", CFG, workers=4).start()
        listener = pnkit.PgListener(PG)
        reqs = [("K%d" % (i + 1), pnkit.stripe_paid("K%d" % (i + 1), 1999,
                                                    event_id="evt_crash_%d" % i))
                for i in range(events)]
        stop = threading.Event()
        kills = []

        def chaos():
            rnd = random.Random(7)
            while not stop.wait(rnd.uniform(0.01, 0.06)):
                pids = self.rcv.worker_pids()
                if len(pids) >= 2:          # keep the service up: kill one of several
                    pid = rnd.choice(pids)
                    try:
                        os.kill(pid, signal.SIGKILL)
                        kills.append(pid)
                    except ProcessLookupError:
                        pass
        attempts = []
        failures = [0]
        lock = threading.Lock()
        deadline = time.monotonic() + 240

        def work(item):
            _oid, (h, b) = item

            def log(t0, t1, r):
                if r is None or not pnkit.is_success("stripe", r):
                    with lock:
                        failures[0] += 1
            attempts.append(deliver_until_acked(self.rcv.sock, h, b, deadline, log=log))
        ct = threading.Thread(target=chaos, daemon=True)
        t0 = time.monotonic()
        ct.start()
        try:
            run_pool(16, work, reqs, 250)
        finally:
            stop.set()
            ct.join(5)
        took = time.monotonic() - t0
        payloads = listener.drain()
        listener.close()
        self.assertEqual(len(attempts), events)
        feed = self.feed_transitions()
        self.assertEqual(len(feed), events, "exactly one transition per event")
        self.assertEqual(len(set(feed)), events)
        # wake-ups: never two for one transition; a killed worker's may be missing
        woken = [json.loads(p)["notification_id"] for p in payloads]
        self.assertEqual(len(woken), len(set(woken)))
        self.assertLessEqual(set(woken), set(feed))
        deliveries = self.exactly_once("K", events)
        self.assertGreater(len(kills), 10, "the chaos loop must have killed workers")
        restarts = self.rcv.log_text().count("was killed by signal 9")
        measured("worker_crashes", events=events, kills=len(kills), restarts_logged=restarts,
                 attempts=sum(attempts), failed_attempts=failures[0],
                 committed_deliveries=deliveries, wakeups=len(woken),
                 committed_but_unacked=deliveries - events, seconds=took)

    # -- 3 ------------------------------------------------------------------
    def test_3_database_outage(self):
        events = n(1000)
        outage_s = 10.0
        add_orders("O", events)
        self.rcv = pnkit.Receiver("stripe", CFG, workers=4).start()
        # paced over ~15 s so that the stream runs before, during and after
        interval = 15.0 / events
        reqs = [(i, pnkit.stripe_paid("O%d" % (i + 1), 1999, event_id="evt_out_%d" % i))
                for i in range(events)]
        log = []
        lock = threading.Lock()
        deadline = time.monotonic() + 240
        marks = {}

        def work(item):
            i, (h, b) = item
            delay = t0 + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)

            def rec(t0, t1, r):
                with lock:
                    log.append((t0, t1, r))
            deliver_until_acked(self.rcv.sock, h, b, deadline, pause=0.1, log=rec)

        def outage():
            time.sleep(2.0)
            marks["stop_begin"] = time.monotonic()
            PG.stop()
            marks["stop_done"] = time.monotonic()
            time.sleep(outage_s)
            marks["start_begin"] = time.monotonic()
            PG.start()
            marks["up"] = time.monotonic()
        ot = threading.Thread(target=outage, daemon=True)
        t0 = time.monotonic()
        ot.start()
        run_pool(16, work, reqs, 250)
        ot.join(60)
        took = time.monotonic() - t0
        self.assertIn("up", marks, "the outage thread did not finish")
        # During the outage: only 503 + the failure form, never a success.
        during = [(a, b, r) for a, b, r in log
                  if a >= marks["stop_done"] and b <= marks["start_begin"]]
        self.assertGreater(len(during), 50, "the stream must have run during the outage")
        for a, b, r in during:
            self.assertIsNotNone(r, "a worker died during the outage")
            self.assertEqual(r.status, 503, r)
            self.assertIsNone(pnkit.failure_form("stripe", r), r)
        # After the return: the first success, and the last failure.
        after = [(a, b, r) for a, b, r in log if a >= marks["up"]]
        first_ok = min(b for a, b, r in after if r is not None and r.status == 200)
        fails_after = [b for a, b, r in after if r is None or r.status != 200]
        last_fail = max(fails_after) if fails_after else marks["up"]
        reconnect_s = last_fail - marks["up"]
        self.assertLess(reconnect_s, 2.0, "every worker must be back within 2 s")
        self.exactly_once("O", events)
        self.assertEqual(len(self.rcv.worker_pids()), 4)
        # Per worker: after its last 503, each of the 4 workers (same pids,
        # none restarted) answered successes again: it reconnected by itself.
        last_503, ok_after = {}, {}
        for i, line in enumerate(self.rcv.log_text().splitlines()):
            m = re.search(r"paynotify-stripe\[(\d+)\]: request .* status=(\d+)", line)
            if m:
                pid, st = int(m.group(1)), int(m.group(2))
                if st == 503:
                    last_503[pid] = i
                elif st == 200 and i > last_503.get(pid, -1):
                    ok_after[pid] = ok_after.get(pid, 0) + 1
        self.assertEqual(set(last_503), set(self.rcv.worker_pids()),
                         "every worker must have seen the outage")
        self.assertTrue(all(ok_after.get(pid, 0) > 0 for pid in last_503),
                        "every worker must succeed again after the outage: %r" % ok_after)
        measured("database_outage", events=events, outage_s=marks["start_begin"] - marks["stop_done"],
                 answers_during_outage=len(during),
                 first_success_after_up_s=first_ok - marks["up"],
                 last_failure_after_up_s=reconnect_s,
                 pg_start_s=marks["up"] - marks["start_begin"],
                 workers_recovered=len(ok_after), seconds=took)

    # -- 4 ------------------------------------------------------------------
    def test_4_slow_database(self):
        cfg = pnkit.write_all_config(PG, statement_timeout_ms=1000)
        self.rcv = pnkit.Receiver("stripe", cfg, workers=2).start()
        PG.add_order(pnkit.SITE, "L1", 1999, "USD")
        locker = subprocess.Popen(
            PG._psql_argv(pntest.PG_DB) + ["-A", "-t"], env=pntest.clean_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            locker.stdin.write(b"BEGIN;\nSELECT 'locked' FROM paynotify.orders WHERE site = '%s' "
                               b"AND order_id = 'L1' FOR UPDATE;\n" % pnkit.SITE.encode())
            locker.stdin.flush()
            line = b""
            t_wait = time.monotonic() + 10
            while b"locked" not in line and time.monotonic() < t_wait:
                line = locker.stdout.readline()
            self.assertIn(b"locked", line, "the locking session did not get the row")
            h, b = pnkit.stripe_paid("L1", 1999, event_id="evt_slow_1")
            t0 = time.monotonic()
            r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b, timeout=10)
            took = time.monotonic() - t0
            self.assertEqual(r.status, 503, r)
            self.assertIsNone(pnkit.failure_form("stripe", r), r)
            self.assertGreaterEqual(took, 0.9)
            self.assertLess(took, 2.0, "the answer must come within statement_timeout")
            self.assertLess(took, 5.0, "inside WeChat Pay's 5 s")
            self.assertEqual(PG.notifications(), [], "nothing may be stored")
            self.assertIn("statement timeout", self.rcv.log_text())
        finally:
            try:
                locker.stdin.write(b"COMMIT;\n")
                locker.stdin.close()
                locker.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                locker.kill()
                locker.wait()
        t1 = time.monotonic()
        r2 = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b, timeout=10)
        retry_s = time.monotonic() - t1
        self.assertTrue(pnkit.is_success("stripe", r2), r2)
        self.assertEqual(PG.order(pnkit.SITE, "L1")["status"], "paid")
        rows = PG.notifications()
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in rows], [("applied", 1)])
        measured("slow_database", statement_timeout_ms=1000, failure_answer_s=took,
                 retry_s=retry_s)

    # -- 5 ------------------------------------------------------------------
    def test_5_crash_between_commit_and_answer(self):
        self.assertTrue(os.access(CRASHPOINT, os.X_OK), "%s is not built (make)" % CRASHPOINT)
        # 8 crashes over 4 worker slots: the supervisor's restart back-off
        # (100 ms, doubling per slot) stays short
        events = 8
        add_orders("C", events)
        self.rcv = pnkit.Receiver("stripe", CFG, workers=4, binary=CRASHPOINT,
                                  env={"PN_TEST_CRASH_AFTER_COMMIT": "evt_cac_"}).start()
        listener = pnkit.PgListener(PG)
        lost = 0
        for i in range(events):
            h, b = pnkit.stripe_paid("C%d" % (i + 1), 1999, event_id="evt_cac_%d" % i)
            try:
                r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b, timeout=10)
            except (OSError, ConnectionError):
                r = None
            self.assertIsNone(r, "the crash point must kill the worker before the answer")
            lost += 1
            # committed, though the provider saw no answer
            row = PG.notifications("dedup_key = 'evt_cac_%d'" % i)
            self.assertEqual([(x["outcome"], x["deliveries"]) for x in row], [("applied", 1)])
            # the provider's retry: a duplicate, acked
            deadline = time.monotonic() + 15
            deliver_until_acked(self.rcv.sock, h, b, deadline, pause=0.05)
        payloads = listener.drain()
        listener.close()
        feed = self.feed_transitions()
        self.assertEqual(len(feed), events, "one transition per event, never two")
        self.assertEqual(len(set(feed)), events)
        # the wake-up goes after the answer: a worker killed before answering sends none
        self.assertEqual(payloads, [])
        deliveries = self.exactly_once("C", events)
        self.assertEqual(deliveries, 2 * events)
        self.assertGreaterEqual(self.rcv.log_text().count("was killed by signal 9"), events)
        measured("crash_after_commit", events=events, unanswered_commits=lost,
                 transitions=len(feed), deliveries=deliveries)

    def test_6_production_binaries_have_no_crash_point(self):
        for p in ("alipay", "stripe", "wechatpay", "2c2p"):
            with open(pntest.binary(p), "rb") as f:
                self.assertNotIn(b"PN_TEST_CRASH_AFTER_COMMIT", f.read(), p)


if __name__ == "__main__":
    unittest.main()

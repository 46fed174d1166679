"""The process model of a receiver started with --listen (common/server.c),
driven directly over its unix socket with the FastCGI client.

  - a worker killed with SIGKILL is replaced (a new pid within seconds) and
    the service goes on
  - SIGHUP during a stream of 1,000 notifications, the configuration being
    reloaded adding a rotated Stripe secret, later notifications signed with
    the new secret: every one acked, every one applied exactly once
  - a broken configuration on SIGHUP is refused (logged), the same workers
    keep serving with the old one
  - SIGTERM with requests in flight (a body sent slowly; a request waiting
    on a PostgreSQL lock) finishes them with their success ack, then exits
  - health (GET) is 503 while PostgreSQL is down, 200 once it is back
"""

import json
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402
from pne2e import wait_for  # noqa: E402

PG = None
SITE = "demo"
PATH = "/notify/stripe/demo"
OLD_SECRET = "whsec_before_rotation"
NEW_SECRET = "whsec_after_rotation"


def setUpModule():
    global PG
    PG = pntest.module_database()


_seq = [0]


def stripe_paid(prefix, secret=OLD_SECRET, add_order=True):
    """(order id, headers, body) of a signed checkout.session.completed."""
    _seq[0] += 1
    oid = "%s-%d-%d" % (prefix, int(time.time()), _seq[0])
    if add_order:
        PG.add_order(SITE, oid, 1234, "USD")
    body = pntest.stripe_checkout_completed(oid, 1234, "usd")
    h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
         "Stripe-Signature": pntest.stripe_header(secret, int(time.time()), body)}
    return oid, h, body


def acked(r):
    return r.status == 200 and json.loads(r.body) == {"received": True}


def fcgi_slow_begin(sock_path, headers, body, first):
    """Open a FastCGI request and send its params and the first `first`
    bytes of the body; returns (socket, rest) for fcgi_slow_finish."""
    params = pntest.cgi_params("POST", PATH, headers, body)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sock_path)
    data = pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1,
                               struct.pack("!HB5x", pntest.FCGI_RESPONDER, 0))
    data += b"".join(pntest._fcgi_stream(pntest.FCGI_PARAMS, 1, b"".join(
        pntest._fcgi_nv(k, v) for k, v in params.items())))
    data += pntest._fcgi_record(pntest.FCGI_STDIN, 1, body[:first])
    s.sendall(data)
    return s, body[first:]


def fcgi_slow_finish(s, rest, timeout=20):
    """Send the rest of the body; read the response."""
    s.sendall(b"".join(pntest._fcgi_stream(pntest.FCGI_STDIN, 1, rest)))
    buf, out, deadline = b"", [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 8:
                _v, rtype, _rid, clen, plen = struct.unpack("!BBHHBx", buf[:8])
                if len(buf) < 8 + clen + plen:
                    break
                content, buf = buf[8:8 + clen], buf[8 + clen + plen:]
                if rtype == pntest.FCGI_STDOUT:
                    out.append(content)
                elif rtype == pntest.FCGI_END_REQUEST:
                    return pntest.parse_cgi_response(b"".join(out))
    finally:
        s.close()
    raise AssertionError("no FCGI_END_REQUEST (stdout so far %r)" % (b"".join(out),))


class ProcessModel(unittest.TestCase):

    def start(self, workers=2, secrets=(OLD_SECRET,), statement_timeout_ms=3000):
        self.cfgdir = pne2e.run_dir("pne2e-cfg.")
        self.config = pne2e.demo_config(PG, directory=self.cfgdir, stripe_secrets=secrets,
                                        statement_timeout_ms=statement_timeout_ms)
        self.rcv = pne2e.Receiver("stripe", self.config, pne2e.run_dir("pne2e-sock."),
                                  workers=workers).start()
        self.addCleanup(self.rcv.stop)
        return self.rcv

    def rewrite_config(self, fn):
        """Atomically replace the config with fn(old text); returns the old."""
        with open(self.config) as f:
            old = f.read()
        tmp = self.config + ".new"
        with open(tmp, "w") as f:
            f.write(fn(old))
        os.replace(tmp, self.config)
        return old

    def send_paid(self, prefix, secret=OLD_SECRET):
        oid, h, body = stripe_paid(prefix, secret)
        r = self.rcv.request("POST", PATH, h, body)
        self.assertTrue(acked(r), r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        return oid

    # ------------------------------------------------------------------
    def test_killed_worker_is_replaced(self):
        rcv = self.start(workers=2)
        self.send_paid("kill-before")
        for round_ in range(2):
            before = rcv.worker_pids()
            self.assertEqual(len(before), 2, before)
            victim = before[0]
            os.kill(victim, signal.SIGKILL)
            after = wait_for(lambda: (lambda p: len(p) == 2 and victim not in p and p)(
                rcv.worker_pids()), 5, "a replacement for worker %d" % victim)
            self.assertEqual(len(set(after) - set(before)), 1, (before, after))
            rcv.wait_log(r"worker %d was killed by signal 9" % victim, 5)
            for i in range(5):
                self.send_paid("kill-after-%d" % round_)
        self.assertIsNone(rcv.proc.poll(), "the supervisor must survive")

    # ------------------------------------------------------------------
    def test_reload_during_stream_with_rotated_key(self):
        N, HUP_AT, GATE = 1000, 200, 900
        rcv = self.start(workers=2)
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                "SELECT 'demo', 'hup-' || g, 1234, 'USD' FROM generate_series(0, %d) g"
                % (N - 1))
        old_pids = rcv.worker_pids()
        switched = threading.Event()
        todo = queue.Queue()
        for i in range(N):
            todo.put(i)
        results = {}            # i -> (secret used, event id, status, body, error)
        started = [0]
        lock = threading.Lock()

        def sender():
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                if i >= GATE:   # leave some for the new secret, whatever happens
                    switched.wait(20)
                secret = NEW_SECRET if switched.is_set() else OLD_SECRET
                body = pntest.stripe_checkout_completed("hup-%d" % i, 1234, "usd")
                h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
                     "Stripe-Signature": pntest.stripe_header(secret, int(time.time()), body)}
                with lock:
                    started[0] += 1
                try:
                    r = rcv.request("POST", PATH, h, body, timeout=20)
                    results[i] = (secret, json.loads(body)["id"], r.status, r.body, None)
                except Exception as e:  # counted as a failure below
                    results[i] = (secret, json.loads(body)["id"], None, b"", repr(e))

        # 8 senders for 2 workers: the backlog is never empty, so a worker
        # told to go must not wait for a quiet moment
        threads = [threading.Thread(target=sender, daemon=True) for _ in range(8)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        try:
            wait_for(lambda: started[0] >= HUP_AT, 30, "%d notifications sent" % HUP_AT)
            # the rotation: a second secret file, then SIGHUP
            pntest.write_secret(os.path.join(self.cfgdir, "stripe-whsec-new"), NEW_SECRET + "\n")
            self.rewrite_config(lambda t: t.replace(
                "stripe.secret_files = stripe-whsec\n",
                "stripe.secret_files = stripe-whsec stripe-whsec-new\n"))
            hup_at = started[0]
            t_hup = time.monotonic()
            rcv.send_signal(signal.SIGHUP)
            rcv.wait_log(r"configuration reloaded from .*workers replaced", 10)
            reloaded_at = started[0]
            t_reloaded = time.monotonic()
            # "later" = once the old generation is gone: nothing left that
            # could only know the old secret
            wait_for(lambda: not any(pne2e.pid_alive(p) for p in old_pids), 5,
                     "the old workers %s to exit" % old_pids)
            switch_at = started[0]
            t_switch = time.monotonic()
            switched.set()
        finally:
            switched.set()
            for t in threads:
                t.join(60)
        took = time.monotonic() - t0
        self.assertFalse(any(t.is_alive() for t in threads), "senders stuck")

        failed = {i: r for i, r in results.items() if r[2] != 200 or
                  json.loads(r[3] or b"null") != {"received": True}}
        self.assertEqual(len(results), N)
        self.assertEqual(failed, {}, "notifications not acked during the reload")
        new_ids = {r[1] for r in results.values() if r[0] == NEW_SECRET}
        old_ids = {r[1] for r in results.values() if r[0] == OLD_SECRET}
        self.assertLess(switch_at, GATE, "the old workers outlived the reload while the "
                        "stream went on (SIGHUP after %d, gone after %d)" % (hup_at, switch_at))
        self.assertGreaterEqual(len(new_ids), N - GATE)
        self.assertGreaterEqual(len(old_ids), HUP_AT)
        new_pids = rcv.worker_pids()
        self.assertEqual(len(new_pids), 2)
        self.assertFalse(set(new_pids) & set(old_pids), (old_pids, new_pids))

        rows = PG.psql("SELECT dedup_key, key_id, outcome, deliveries FROM paynotify.notifications "
                       "WHERE order_id LIKE 'hup-%'")
        self.assertEqual(len(rows), N, "one stored notification per event")
        self.assertEqual({(r[2], r[3]) for r in rows}, {("applied", "1")},
                         "every event applied exactly once")
        key_of = {r[0]: r[1] for r in rows}
        old_keys = {key_of[e] for e in old_ids}
        new_keys = {key_of[e] for e in new_ids}
        self.assertEqual(len(old_keys), 1, old_keys)
        self.assertEqual(len(new_keys), 1, new_keys)
        self.assertNotEqual(old_keys, new_keys, "the new secret verified the later ones")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.orders "
                                   "WHERE order_id LIKE 'hup-%' AND status = 'paid'"), str(N))
        sys.stdout.write("    (%d notifications in %.1fs; SIGHUP after %d, reloaded after %d "
                         "(%.0f ms), old workers gone after %d (%.0f ms))\n" % (
                             N, took, hup_at, reloaded_at, (t_reloaded - t_hup) * 1000,
                             switch_at, (t_switch - t_hup) * 1000))

    # ------------------------------------------------------------------
    def test_broken_config_refused_on_reload(self):
        rcv = self.start(workers=2)
        pids = rcv.worker_pids()
        breakages = [
            ("unknown key", lambda t: t + "stripe.secret_file = stripe-whsec\n",
             r"unknown key"),
            ("secret readable by others", None, r"must not be accessible by others"),
        ]
        for what, fn, pattern in breakages:
            with self.subTest(what):
                mark = len(rcv.log_text())
                if fn is not None:
                    good = self.rewrite_config(fn)
                else:
                    good = None
                    os.chmod(os.path.join(self.cfgdir, "stripe-whsec"), 0o644)
                try:
                    rcv.send_signal(signal.SIGHUP)
                    m = rcv.wait_log(r"configuration reload refused, the old one keeps "
                                     r"serving: [^\n]*" + pattern, 10, start=mark)
                    self.assertIn("paynotify.conf" if fn else "stripe-whsec", m.group(0))
                    time.sleep(0.3)
                    self.assertEqual(rcv.worker_pids(), pids, "the old workers keep serving")
                    self.assertNotIn("reloaded", rcv.log_text()[mark:])
                    self.send_paid("broken-" + what.split()[0])
                finally:
                    if good is not None:
                        self.rewrite_config(lambda _t: good)
                    else:
                        os.chmod(os.path.join(self.cfgdir, "stripe-whsec"), 0o600)
        # and once fixed, a reload goes through
        mark = len(rcv.log_text())
        rcv.send_signal(signal.SIGHUP)
        rcv.wait_log(r"configuration reloaded", 10, start=mark)
        wait_for(lambda: (lambda p: len(p) == 2 and not set(p) & set(pids))(rcv.worker_pids()),
                 10, "a new generation of workers")
        self.send_paid("broken-fixed")

    # ------------------------------------------------------------------
    def _stops_after(self, rcv, check_alive_for=0.5):
        time.sleep(check_alive_for)
        self.assertIsNone(rcv.proc.poll(), "exited with a request in flight")

    def test_sigterm_finishes_a_slow_body(self):
        rcv = self.start(workers=2)
        oid, h, body = stripe_paid("term-slow")
        s, rest = fcgi_slow_begin(rcv.sock, h, body, len(body) // 2)
        pne2e.wait_accepted(rcv.sock, 1)    # a worker has it (reading the body)
        rcv.send_signal(signal.SIGTERM)
        rcv.wait_log(r"stopping: workers finish their requests", 5)
        self._stops_after(rcv)
        r = fcgi_slow_finish(s, rest)
        self.assertTrue(acked(r), r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        rcv.proc.wait(10)
        self.assertEqual(rcv.proc.returncode, 0)
        self.assertRegex(rcv.log_text(), r"info: stopped")

    def test_sigterm_finishes_a_request_waiting_on_the_database(self):
        rcv = self.start(workers=2, statement_timeout_ms=10000)
        oid, h, body = stripe_paid("term-lock")
        # hold a lock that ingest() needs, for 2 s, in another session
        locker = subprocess.Popen(
            PG._psql_argv(PG.dbname) + ["-c", "BEGIN; LOCK TABLE paynotify.notifications "
                                           "IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2); COMMIT;"],
            env=pntest.clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        self.addCleanup(lambda: locker.poll() is None and locker.kill())
        wait_for(lambda: PG.scalar("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                                   "c.oid = l.relation WHERE c.relname = 'notifications' "
                                   "AND l.mode = 'AccessExclusiveLock' AND l.granted") == "1",
                 10, "the lock")
        result = {}

        def send():
            try:
                result["r"] = rcv.request("POST", PATH, h, body, timeout=20)
            except Exception as e:
                result["e"] = e
        t = threading.Thread(target=send, daemon=True)
        t.start()
        wait_for(lambda: PG.scalar("SELECT count(*) FROM pg_stat_activity "
                                   "WHERE wait_event_type = 'Lock'") == "1",
                 10, "the request to wait on the lock")
        rcv.send_signal(signal.SIGTERM)
        rcv.wait_log(r"stopping: workers finish their requests", 5)
        self._stops_after(rcv, 0.3)
        t.join(20)
        self.assertNotIn("e", result, result)
        self.assertTrue(acked(result["r"]), result)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        rcv.proc.wait(10)
        self.assertEqual(rcv.proc.returncode, 0)
        locker.wait(10)

    def test_sigterm_under_a_steady_stream(self):
        # 8 clients keep 2 workers busy; SIGTERM must stop them after their
        # current request (not after the 30 s grace, with SIGKILL), and
        # every notification applied must have been acked: nothing killed
        # between commit and answer
        rcv = self.start(workers=2)
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                "SELECT 'demo', 'steady-' || g, 1234, 'USD' FROM generate_series(0, 19999) g")
        nxt, lock, stop, term = [0], threading.Lock(), threading.Event(), threading.Event()
        acked_ids, other, unanswered = set(), [], []

        def sender():
            while not stop.is_set():
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= 20000:
                    return
                oid = "steady-%d" % i
                body = pntest.stripe_checkout_completed(oid, 1234, "usd")
                h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
                     "Stripe-Signature": pntest.stripe_header(OLD_SECRET, int(time.time()),
                                                              body)}
                try:
                    r = rcv.request("POST", PATH, h, body, timeout=10)
                except (OSError, AssertionError) as e:     # refused, or closed unanswered
                    if term.is_set():   # left in the backlog: the provider retries
                        unanswered.append(oid)
                        if rcv.proc.poll() is not None:
                            return
                        time.sleep(0.005)
                        continue
                    other.append((oid, repr(e)))
                    time.sleep(0.01)
                    continue
                if acked(r):
                    acked_ids.add(oid)
                else:
                    other.append((oid, r))

        threads = [threading.Thread(target=sender, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(acked_ids) >= 200, 30, "200 notifications acked")
            t0 = time.monotonic()
            term.set()
            rcv.send_signal(signal.SIGTERM)
            rcv.proc.wait(5)
            took = time.monotonic() - t0
        finally:
            stop.set()
            for t in threads:
                t.join(20)
        self.assertEqual(rcv.proc.returncode, 0)
        self.assertNotIn("did not stop", rcv.log_text())
        applied = {r[0] for r in PG.psql("SELECT order_id FROM paynotify.notifications "
                                         "WHERE order_id LIKE 'steady-%'")}
        self.assertEqual(applied - acked_ids, set(), "applied but never acked")
        self.assertEqual(acked_ids - applied, set(), "acked but not stored")
        self.assertEqual(other, [], "answers other than the success ack while running")
        sys.stdout.write("    (stopped %.0f ms after SIGTERM; %d acked, %d unanswered)\n" % (
            took * 1000, len(acked_ids), len(unanswered)))

    # ------------------------------------------------------------------
    def test_health_503_while_database_down(self):
        rcv = self.start(workers=2)
        r = rcv.request("GET", PATH)
        self.assertEqual((r.status, r.body), (200, b"ok\n"))
        PG.stop()
        try:
            for _ in range(3):      # every worker, whichever answers
                r = rcv.request("GET", PATH)
                self.assertEqual(r.status, 503, r)
            oid, h, body = stripe_paid("down", add_order=False)
            r = rcv.request("POST", PATH, h, body)
            self.assertEqual(r.status, 503, "a notification must be retried later: %r" % (r,))
        finally:
            PG.start()
        wait_for(lambda: all(rcv.request("GET", PATH).status == 200 for _ in range(3)), 15,
                 "health 200 again")
        self.send_paid("back-up")


if __name__ == "__main__":
    unittest.main()

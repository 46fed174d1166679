# test_replay_concurrency.py: `paynotify replay --apply` and `--dry-run`
# loops side by side with live retries of the same notifications and new
# events for the same orders, for 30 s (PN_REPLAY_SECONDS), through real
# FastCGI receivers: no deadlock in the server log, no failure answer, no
# replay error.  Under schema version 4 ingest took the advisory lock then
# the row, reapply the row then the advisory lock: 27 deadlocks in 20 s.
# Now every path locks the notification row, then the order row, then
# writes the feed (sql/functions.sql "Lock order").

import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

PG = None
CFG = None
SECONDS = float(os.environ.get("PN_REPLAY_SECONDS", "30"))
ORDERS = 8


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pntest.write_config(PG)


def tearDownModule():
    if PG:
        PG.destroy()


def signed(body, t=None):
    return pntest.stripe_headers(pntest.SITE_A, body, t=t), body


class ReplayBesideLiveTraffic(unittest.TestCase):
    def test_no_deadlock_no_failure(self):
        srv = pntest.FcgiServer(pntest.binary("stripe"), CFG, workers=3).start()
        self.addCleanup(srv.stop)
        path = "/notify/stripe/shop-a"
        bodies = []
        for i in range(ORDERS):
            oid = "DL-%d" % i
            PG.add_order("shop-a", oid, 1999, "USD")
            PG.add_order("shop-a", "DM-%d" % i, 999, "USD")
            pay = pntest.stripe_checkout_completed(oid, 1999, payment_intent="pi_" + oid)
            # a payment whose amount does not match its order: every reapply
            # runs the rules again and locks that order row
            bad = pntest.stripe_checkout_completed("DM-%d" % i, 1000,
                                                   payment_intent="pi_DM%d" % i)
            ref = pntest.stripe_charge_refunded(oid, 1999, 10, payment_intent="pi_" + oid)
            # a refund in another currency: amount_mismatch on the paid order
            odd = pntest.stripe_charge_refunded(oid, 1999, 5, currency="eur",
                                                payment_intent="pi_" + oid)
            for b in (pay, bad, ref, odd):
                r = srv.request("POST", path, *signed(b))
                self.assertEqual(r.status, 200, r)
                bodies.append(b)
        outcomes = PG.psql("SELECT outcome, count(*) FROM paynotify.notifications GROUP BY 1 "
                           "ORDER BY 1")
        self.assertEqual(outcomes, [("amount_mismatch", str(2 * ORDERS)),
                                    ("applied", str(2 * ORDERS))])

        # replay the notifications above (the new events of the run keep coming)
        until = PG.scalar("SELECT (max(received_at) + interval '1 ms')::text "
                          "FROM paynotify.notifications")
        stop = time.monotonic() + SECONDS
        failures, counts, errors = [], {"live": 0, "new": 0, "apply": 0, "dry": 0}, []
        lock = threading.Lock()

        def live(k):
            n = 0
            try:
                while time.monotonic() < stop:
                    b = bodies[(n + k) % len(bodies)]
                    r = srv.request("POST", path, *signed(b, t=int(time.time())))
                    with lock:
                        counts["live"] += 1
                        if r.status != 200:
                            failures.append(("retry", r.status, r.body[:200]))
                    if n % 3 == 0:      # a new event for one of the same orders
                        oid = "DL-%d" % ((n + k) % ORDERS)
                        total = 10 + (n // 3) * 2 + k % 2 + 1
                        nb = pntest.stripe_charge_refunded(oid, 1999, min(total, 1999),
                                                           payment_intent="pi_" + oid)
                        r = srv.request("POST", path, *signed(nb))
                        with lock:
                            counts["new"] += 1
                            if r.status != 200:
                                failures.append(("new", r.status, r.body[:200]))
                    n += 1
            except Exception as e:  # reported below
                errors.append(e)

        def replay(mode):
            env = pntest.clean_env({"PAYNOTIFY_CONFIG": CFG.path})
            try:
                while time.monotonic() < stop:
                    p = subprocess.run([os.path.join(pntest.REPO, "paynotify"), "replay", mode,
                                        "--site", "shop-a", "--until", until,
                                        "--format", "csv"], env=env,
                                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                       timeout=120)
                    with lock:
                        counts["apply" if mode == "--apply" else "dry"] += 1
                        # 1: amount mismatches need a human; 3 would be a database error
                        if p.returncode not in (0, 1):
                            failures.append(("replay " + mode, p.returncode, p.stderr[-300:]))
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=live, args=(k,)) for k in range(4)]
        threads += [threading.Thread(target=replay, args=(m,)) for m in ("--apply", "--dry-run")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(SECONDS + 180)
        self.assertEqual(errors, [])
        with open(PG.logfile, "rb") as f:
            log = f.read().decode("utf-8", "replace")
        sys.stderr.write("replay beside live traffic, %.0f s: %s\n" % (SECONDS, counts))
        self.assertEqual(log.count("deadlock detected"), 0, log[-3000:])
        self.assertEqual(failures, [])
        self.assertGreater(counts["apply"], 2)
        self.assertGreater(counts["dry"], 2)
        self.assertGreater(counts["live"], 100)
        self.assertEqual(srv.dead_workers(), [])
        # nothing was applied twice: each paid order's refunds equal its latest total
        dup = PG.psql("SELECT count(*) FROM paynotify.notifications WHERE deliveries > 1")
        self.assertGreater(int(dup[0][0]), 0)
        self.assertEqual(PG.psql("SELECT count(*) FROM paynotify.orders WHERE order_id LIKE "
                                 "'DL-%' AND status NOT IN ('partially_refunded', 'refunded')"),
                         [("0",)])


if __name__ == "__main__":
    unittest.main()

# test_ha.py: failover and unknown commit outcomes (issue 17; docs/RELIABILITY.md,
# docs/DEPLOYMENT.md "High availability").  Real PostgreSQL 15 streaming
# replication made with initdb + pg_basebackup in temp dirs (unix sockets
# only), the real receivers with their own supervisor, connected with a libpq
# multi-host conninfo (host=A,B ... target_session_attrs=read-write).
#
#   1. synchronous standby: steady load from 8 provider-like senders (a
#      failure answer or a timeout -> retry later); the standby's walsender
#      is stalled 0.6 s (replication lag), then the primary is SIGKILLed
#      (every process at once), 1 s later the standby is promoted ->
#      every acknowledged notification is on the new primary, none applied
#      twice, only failure answers while no primary was writable; measured:
#      time from promotion to the first success
#   2. asynchronous standby, the same choreography -> the notifications
#      acknowledged during the lag are lost for good (counted, must be > 0:
#      this is what asynchronous replication costs, shown not claimed)
#   3. a session on a server that turned read-only (25006) reconnects and
#      lands on the writable server in the same request; never a success
#      that the writable server does not hold
#   4. COMMIT in flight when the connection is lost (the backend terminated
#      while it waits for the synchronous standby: committed locally, never
#      answered): the in-request retry proves the commit (duplicate) ->
#      success; if the retry is lost as well -> failure form, and the
#      provider's retry resolves to a duplicate, applied once
#      4c: the wait for the standby cancelled (PostgreSQL then reports the
#      commit with a WARNING, standby not guaranteed) -> never success
#   5. connection lost before the commit (backend terminated while it waits
#      for a row lock, twice) -> failure form; the provider's retry is the
#      first application
# Sizes: PN_HA_RATE (default 100 notifications/s offered) and PN_HA_SECONDS
# (default 6 s of offered load) for a longer run.

import heapq
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

STRIPE = pnkit.path("stripe")
RATE = float(os.environ.get("PN_HA_RATE", "100"))
SECONDS = float(os.environ.get("PN_HA_SECONDS", "6"))


def measured(test, **kv):
    sys.stdout.write("    measured: %s %s\n" % (test, " ".join(
        "%s=%s" % (k, ("%.3f" % v) if isinstance(v, float) else v) for k, v in kv.items())))
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Streaming replication in temp dirs


def _append_conf(cluster, lines):
    with open(os.path.join(cluster.data, "postgresql.conf"), "a") as f:
        f.write("\n# test_ha\n" + "\n".join(lines) + "\n")


def make_primary():
    return pntest.PgCluster(settings=[
        "synchronous_commit = on",
        "wal_level = replica",
        "max_wal_senders = 4",
    ]).start()


class Standby(pntest.PgCluster):
    """A streaming standby of primary, made with pg_basebackup -R."""

    def __init__(self, primary):
        super().__init__(load_schema=False)
        self.primary = primary

    def init(self):
        self.base = pntest.scratch_dir("pntest-pg.")
        pntest.add_cleanup(self.destroy)
        pntest._diagnostics.append(self)
        self.data = os.path.join(self.base, "data")
        self.logfile = os.path.join(self.base, "server.log")
        os.chmod(self.base, 0o755)
        if pntest.IS_ROOT:
            import pwd
            pw = pwd.getpwnam("nobody")
            self._owner_ids = (pw.pw_uid, pw.pw_gid)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self._pg("pg_basebackup", "-D", self.data, "-h", self.primary.base,
                 "-p", str(self.primary.port), "-U", pntest.PG_USER, "-X", "stream", "-R",
                 "-c", "fast", "--no-sync")
        _append_conf(self, [
            "unix_socket_directories = '%s'" % self.base,
            "cluster_name = 'standby1'",          # its application_name upstream
            # promoted, it runs alone (an operator or Patroni adds a standby)
            "synchronous_standby_names = ''",
            "hot_standby = on",
        ])
        return self

    def start(self):
        if self.base is None:
            self.init()
        return super().start()

    def promote(self):
        self._pg("pg_ctl", "-D", self.data, "-w", "-t", "60", "promote")


def wait_streaming(primary, state, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if primary.scalar("SELECT sync_state FROM pg_stat_replication "
                          "WHERE application_name = 'standby1' AND state = 'streaming'") == state:
            return
        time.sleep(0.1)
    raise AssertionError("standby1 is not streaming as %s" % state)


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def crash(cluster):
    """kill -9 every process of the cluster at once (stopped first, so that
    no backend outlives its postmaster by a commit)."""
    with open(os.path.join(cluster.data, "postmaster.pid")) as f:
        pm = int(f.readline())
    pids = [pm] + _children(pm)
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    pids = sorted(set(pids + _children(pm)))
    for p in pids:
        os.kill(p, signal.SIGKILL)
    cluster.running = False
    return len(pids)


def multihost_conninfo(*clusters):
    return ("host=%s port=%s dbname=%s user=%s target_session_attrs=read-write"
            % (",".join(c.base for c in clusters), ",".join(str(c.port) for c in clusters),
               pntest.PG_DB, pntest.PG_USER))


def add_orders(cluster, prefix, count, amount=1999, currency="USD"):
    cluster.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                 "SELECT %s, %s || g, %d, %s FROM generate_series(1, %d) g"
                 % (pntest.q(pnkit.SITE), pntest.q(prefix), amount, pntest.q(currency), count))


# ---------------------------------------------------------------------------
# Providers: deliver, and on a failure answer or a timeout retry later


class Providers:
    def __init__(self, sock, events, rate, threads=8, retry_s=0.15, timeout=3.0):
        self.sock = sock
        self.events = events            # [(event_id, headers, body)]
        self.threads = threads
        self.retry_s = retry_s
        self.timeout = timeout
        self.t_start = time.monotonic()
        self.heap = [(self.t_start + i / rate, i) for i in range(len(events))]
        heapq.heapify(self.heap)
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.log = []                   # (t0, t1, index, success, status or None)
        self.acked = {}                 # index -> time of the success ack
        self.bad_failures = []          # failure answers not in the failure form
        self.stop = threading.Event()
        self.ts = []

    def _next(self):
        with self.cv:
            while not self.stop.is_set():
                if not self.heap:
                    if len(self.acked) == len(self.events):
                        return None
                    self.cv.wait(0.05)
                    continue
                at, i = self.heap[0]
                now = time.monotonic()
                if at <= now:
                    heapq.heappop(self.heap)
                    return i
                self.cv.wait(min(0.05, at - now))
            return None

    def _loop(self):
        while True:
            i = self._next()
            if i is None:
                return
            _eid, h, b = self.events[i]
            t0 = time.monotonic()
            try:
                r = pnkit.oneshot(self.sock, "POST", STRIPE, h, b, timeout=self.timeout)
            except (OSError, ConnectionError):
                r = None
            t1 = time.monotonic()
            ok = r is not None and pnkit.is_success("stripe", r)
            with self.cv:
                self.log.append((t0, t1, i, ok, r.status if r is not None else None))
                if ok:
                    self.acked.setdefault(i, t1)
                else:
                    if r is not None and (r.status != 503 or pnkit.failure_form("stripe", r)):
                        self.bad_failures.append((i, r.status, r.body[:200]))
                    heapq.heappush(self.heap, (t1 + self.retry_s, i))
                self.cv.notify_all()

    def start(self):
        self.ts = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.threads)]
        for t in self.ts:
            t.start()
        return self

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self.ts:
            t.join(max(0.1, deadline - time.monotonic()))
        self.stop.set()
        with self.cv:
            self.cv.notify_all()
        for t in self.ts:
            t.join(5)
        return len(self.acked) == len(self.events)


# ---------------------------------------------------------------------------


class FailoverUnderLoad:
    """Tests 1 and 2, and test_ha_pooler: the choreography above, for any
    way to the database.  route(primary, standby) gives the receivers'
    config (default: the multi-host conninfo, direct); kill(primary) takes
    the primary's node down (default: crash(primary))."""

    def setUp(self):
        self.rcv = None
        self.clusters = []

    def tearDown(self):
        if self.rcv is not None:
            self.rcv.stop()
        for c in self.clusters:
            c.destroy()

    def failover_under_load(self, sync, tag, route=None, kill=crash, first_success_s=10.0):
        primary = make_primary()
        self.clusters.append(primary)
        standby = Standby(primary).start()
        self.clusters.append(standby)
        if sync:
            primary.psql("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby1)'")
            primary.psql("SELECT pg_reload_conf()")
        wait_streaming(primary, "sync" if sync else "async")
        count = int(RATE * SECONDS)
        add_orders(primary, tag, count)
        if route is None:
            cfg = pnkit.write_all_config(None, statement_timeout_ms=1000,
                                         conninfo=multihost_conninfo(primary, standby))
        else:
            cfg = route(primary, standby)
        self.rcv = pnkit.Receiver("stripe", cfg, workers=4).start()
        events = []
        for i in range(count):
            eid = "evt_%s_%d" % (tag, i)
            h, b = pnkit.stripe_paid("%s%d" % (tag, i + 1), 1999, event_id=eid)
            events.append((eid, h, b))
        walsender = int(primary.scalar("SELECT pid FROM pg_stat_replication "
                                       "WHERE application_name = 'standby1'"))
        prov = Providers(self.rcv.sock, events, RATE).start()
        t0 = prov.t_start
        # steady load, then replication lag (the walsender stalls), then the crash
        time.sleep(max(0.0, t0 + SECONDS / 3 - time.monotonic()))
        t_lag = time.monotonic()
        os.kill(walsender, signal.SIGSTOP)
        time.sleep(0.6)
        t_kill = time.monotonic()
        killed = kill(primary)
        time.sleep(1.0)
        t_promote0 = time.monotonic()
        standby.promote()
        t_promoted = time.monotonic()
        done = prov.wait(90)
        self.assertEqual(prov.bad_failures, [], "every failure must be 503 + the failure form")
        self.assertTrue(done, "%d of %d notifications acknowledged before the deadline"
                        % (len(prov.acked), count))

        # what the new primary holds
        rows = standby.psql("SELECT n.psp_event_id, n.outcome, n.deliveries, o.status "
                            "FROM paynotify.notifications n JOIN paynotify.orders o "
                            "ON o.site = n.site AND o.order_id = n.order_id")
        stored = {r[0]: r for r in rows}
        acked_ids = {events[i][0]: t for i, t in prov.acked.items()}
        lost = sorted(e for e in acked_ids if e not in stored)
        lost_in_lag = [e for e in lost if t_lag <= acked_ids[e] <= t_kill + 0.05]
        # none applied twice: one row per event (the unique key), each applied,
        # each order paid by exactly that row
        self.assertEqual(len(stored), len(rows))
        not_applied = [r for r in rows if r[1] != "applied" or r[3] != "paid"]
        self.assertEqual(not_applied, [], "every stored event applied once, its order paid")
        paid = int(standby.scalar("SELECT count(*) FROM paynotify.orders WHERE status = 'paid'"))
        self.assertEqual(paid, len(rows))
        # while no primary was writable: only failure answers
        dark = [e for e in prov.log if e[0] >= t_kill and e[1] <= t_promote0]
        dark_ok = [e for e in dark if e[3]]
        self.assertGreater(len(dark), 0, "no request was made while no primary was writable")
        self.assertEqual(dark_ok, [], "a success ack while no primary was writable")
        # measured from the start of `pg_ctl promote` (docs/DEPLOYMENT.md and
        # docs/RELIABILITY.md give the same); promote_s says how long it took
        after = [e for e in prov.log if e[3] and e[1] >= t_promote0]
        first_ok = (min(e[1] for e in after) - t_promote0) if after else float("inf")
        first_ok_new = [e[1] for e in prov.log if e[3] and e[0] >= t_promoted]
        first_ok_new = (min(first_ok_new) - t_promote0) if first_ok_new else float("inf")
        self.assertLess(first_ok, first_success_s, "no success within %s s of the start of the "
                        "promotion" % first_success_s)
        acked_in_lag = sum(1 for t in acked_ids.values() if t_lag <= t <= t_kill + 0.05)
        measured("failover_%s_%s" % ("sync" if sync else "async", tag), notifications=count,
                 attempts=len(prov.log), acked=len(acked_ids), acked_during_lag=acked_in_lag,
                 acked_but_lost=len(lost), lost_acked_during_lag=len(lost_in_lag),
                 answers_while_dark=len(dark), successes_while_dark=len(dark_ok),
                 killed_processes=killed, promote_s=t_promoted - t_promote0,
                 first_success_after_promote_began_s=first_ok,
                 first_success_of_new_request_s=first_ok_new,
                 reconnected_workers=len(self.rcv.worker_pids()))
        return lost, count, stored


class Failover(FailoverUnderLoad, unittest.TestCase):
    def test_1_sync_failover_loses_nothing_acknowledged(self):
        lost, count, stored = self.failover_under_load(True, "S")
        self.assertEqual(lost, [], "acknowledged notifications lost in the failover")
        self.assertEqual(len(stored), count, "every notification stored once on the new primary")

    def test_2_async_failover_loses_acknowledged(self):
        lost, count, stored = self.failover_under_load(False, "A")
        # The point of the test: an asynchronous standby loses what was acked
        # during the lag.  Those are acked, so no provider will ever resend them.
        self.assertGreater(len(lost), 0, "asynchronous failover after 0.6 s of lag lost "
                           "nothing: the choreography did not create lag")
        self.assertEqual(len(stored) + len(lost), count)

    def test_3_read_only_session_fails_over(self):
        old = pntest.PgCluster().start()
        new = pntest.PgCluster().start()
        self.clusters += [old, new]
        for c in (old, new):
            add_orders(c, "R", 20)
        cfg = pnkit.write_all_config(None, conninfo=multihost_conninfo(old, new))
        self.rcv = pnkit.Receiver("stripe", cfg, workers=2).start()
        for i in range(4):          # every worker's session is on `old`
            h, b = pnkit.stripe_paid("R%d" % (i + 1), 1999, event_id="evt_ro_%d" % i)
            r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
            self.assertTrue(pnkit.is_success("stripe", r), r)
        self.assertEqual(len(old.notifications()), 4)
        # `old` turns read-only under the open sessions (as a demoted primary
        # or a standby does): their next ingest fails with 25006
        old.psql("ALTER SYSTEM SET default_transaction_read_only = on")
        old.reload_conf("default_transaction_read_only", "on")
        for i in range(4, 12):
            h, b = pnkit.stripe_paid("R%d" % (i + 1), 1999, event_id="evt_ro_%d" % i)
            r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
            self.assertTrue(pnkit.is_success("stripe", r),
                            "a read-only session must reconnect to the writable server: %r" % (r,))
        self.assertEqual(len(old.notifications()), 4, "nothing more on the read-only server")
        on_new = {n["psp_event_id"] for n in new.notifications()}
        self.assertEqual(on_new, {"evt_ro_%d" % i for i in range(4, 12)})
        self.assertIn("read-only transaction; retrying once on a new connection",
                      self.rcv.log_text())
        # with no writable server at all: failure form, never success
        new.psql("ALTER SYSTEM SET default_transaction_read_only = on")
        new.reload_conf("default_transaction_read_only", "on")
        h, b = pnkit.stripe_paid("R13", 1999, event_id="evt_ro_13")
        r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
        self.assertEqual(r.status, 503, r)
        self.assertIsNone(pnkit.failure_form("stripe", r), r)
        self.assertEqual(new.scalar("SELECT count(*) FROM paynotify.notifications "
                                    "WHERE psp_event_id = 'evt_ro_13'"), "0")


def check_config(conninfo):
    """paynotify check-config with conninfo: (exit status, output)."""
    cfg = pnkit.write_all_config(None, conninfo=conninfo)
    # --user: the files are checked as this user (as root without it,
    # check-config warns that it could not tell what the receivers can read)
    p = subprocess.run([os.path.join(pntest.REPO, "paynotify"), "check-config", "-c", cfg.path,
                        "--user", pwd.getpwuid(os.getuid()).pw_name],
                       env=pntest.clean_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode()


class CheckConfig(unittest.TestCase):
    """paynotify check-config on a replicated database (docs/DEPLOYMENT.md)."""

    def check(self, conninfo):
        return check_config(conninfo)

    def test_6_check_config_replication_warnings(self):
        primary = make_primary()
        standby = Standby(primary).start()
        self.addCleanup(standby.destroy)
        self.addCleanup(primary.destroy)
        wait_streaming(primary, "async")
        both = multihost_conninfo(primary, standby)
        rc, out = self.check(both)
        self.assertEqual(rc, 0, out)
        self.assertIn("replication: WARNING: 1 standby(s) connected but "
                      "synchronous_standby_names is empty", out)
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby1)'")
        primary.psql("SELECT pg_reload_conf()")
        wait_streaming(primary, "sync")
        rc, out = self.check(both)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("WARNING", out)
        self.assertIn("replication: 1 standby(s), synchronous_standby_names = "
                      "'FIRST 1 (standby1)', 1 synchronous now", out)
        # a role that opts out of waiting for the standby
        primary.psql("ALTER ROLE %s SET synchronous_commit = local" % pntest.PG_USER)
        rc, out = self.check(both)
        self.assertIn("replication: WARNING: synchronous_commit is local", out)
        primary.psql("ALTER ROLE %s RESET synchronous_commit" % pntest.PG_USER)
        # several hosts, but nothing insists on the writable one
        rc, out = self.check(both.replace(" target_session_attrs=read-write", ""))
        self.assertIn("target_session_attrs is not set", out)
        # ... or insists on the wrong one
        rc, out = self.check(both.replace("=read-write", "=prefer-standby"))
        self.assertIn("target_session_attrs is prefer-standby", out)
        # explicitly any: the recipe for one pooler per node, said, not warned
        rc, out = self.check(both.replace("=read-write", "=any"))
        self.assertEqual(rc, 0, out)
        self.assertNotIn("WARNING", out)
        self.assertIn("several hosts with target_session_attrs=any", out)
        # the standby alone: a problem, exit 3
        rc, out = self.check(standby.conninfo())
        self.assertEqual(rc, 3, out)
        self.assertIn("replication: ERROR: the database is a standby", out)


class UnknownOutcome(unittest.TestCase):
    """The ingest statement's commit is in flight when its connection dies."""

    @classmethod
    def setUpClass(cls):
        cls.pg = pntest.PgCluster().start()
        cls.pg.psql("ALTER SYSTEM SET synchronous_commit = on")
        cls.pg.reload_conf("synchronous_commit", "on")
        cls.cfg = pnkit.write_all_config(cls.pg, statement_timeout_ms=2000)

    @classmethod
    def tearDownClass(cls):
        cls.pg.destroy()

    def setUp(self):
        self.pg.reset()
        self.set_sync("")
        self.rcv = pnkit.Receiver("stripe", self.cfg, workers=1).start()

    def tearDown(self):
        self.set_sync("")
        self.rcv.stop()

    def set_sync(self, names):
        # a synchronous standby that never comes: every commit waits in SyncRep
        self.pg.psql("ALTER SYSTEM SET synchronous_standby_names = %s" % pntest.q(names))
        self.pg.reload_conf("synchronous_standby_names", names)
        if names:
            self.wait_commits_wait()

    def wait_commits_wait(self, timeout=30):
        """Wait until a commit waits for the standby.  A backend waits only
        once the checkpointer, too, has applied synchronous_standby_names
        (WalSndCtl->sync_standbys_defined), on its own time after the
        reload: probe with a commit of our own until one waits, then cancel
        that wait (the probe commits locally, with a WARNING)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            conn = self.pg.connect()
            try:
                pid = conn.get_backend_pid()
                # a transaction that writes WAL (catalog rows), as the receiver's does
                t = threading.Thread(target=lambda: conn.cursor().execute(
                    "CREATE TEMP TABLE pntest_sync_probe (x int) ON COMMIT DROP"), daemon=True)
                t.start()
                while t.is_alive():
                    if self.pg.scalar("SELECT wait_event FROM pg_stat_activity WHERE pid = %d"
                                      % pid) == "SyncRep":
                        self.pg.scalar("SELECT pg_cancel_backend(%d)" % pid)
                        t.join(30)
                        return
                    t.join(0.02)
            finally:
                conn.close()
            time.sleep(0.05)    # committed without waiting: not applied yet
        raise AssertionError("commits do not wait for the synchronous standby after %ss"
                             % timeout)

    def waiting_backend(self, event, exclude=(), timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pg.scalar("SELECT pid FROM pg_stat_activity WHERE application_name = "
                                 "'paynotify-stripe' AND wait_event = %s AND pid NOT IN (%s)"
                                 % (pntest.q(event), ",".join(str(p) for p in (0,) + exclude)))
            if pid:
                return int(pid)
            time.sleep(0.02)
        raise AssertionError("no receiver backend waiting on %s" % event)

    def terminate(self, pid):
        self.assertEqual(self.pg.scalar("SELECT pg_terminate_backend(%d)" % pid), "t")

    def send_async(self, h, b):
        box = {}

        def go():
            try:
                box["r"] = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b, timeout=30)
            except (OSError, ConnectionError) as e:
                box["e"] = e
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t, box

    def stored(self, eid):
        return self.pg.notifications("psp_event_id = %s" % pntest.q(eid))

    def test_4a_commit_in_flight_retry_proves_the_commit(self):
        add_orders(self.pg, "U", 1)
        h, b = pnkit.stripe_paid("U1", 1999, event_id="evt_unk_1")
        self.set_sync("ghost")
        t, box = self.send_async(h, b)
        pid1 = self.waiting_backend("SyncRep")
        self.terminate(pid1)            # committed locally, the answer never leaves
        pid2 = self.waiting_backend("SyncRep", (pid1,))   # the in-request retry's commit
        n = self.stored("evt_unk_1")
        self.assertEqual([x["deliveries"] for x in n], [1], "the first attempt is committed")
        self.set_sync("")
        t.join(15)
        r = box.get("r")
        self.assertTrue(r is not None and pnkit.is_success("stripe", r),
                        "the retry found the committed event: success: %r" % (box,))
        n = self.stored("evt_unk_1")
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in n], [("applied", 2)])
        self.assertEqual(self.pg.order(pnkit.SITE, "U1")["status"], "paid")
        self.assertNotEqual(pid1, pid2, "the retry runs on a new connection")

    def test_4b_commit_outcome_unknown_answers_failure(self):
        add_orders(self.pg, "V", 1)
        h, b = pnkit.stripe_paid("V1", 1999, event_id="evt_unk_2")
        self.set_sync("ghost")
        t, box = self.send_async(h, b)
        pid1 = self.waiting_backend("SyncRep")
        self.terminate(pid1)
        pid2 = self.waiting_backend("SyncRep", (pid1,))
        self.terminate(pid2)            # the retry's commit is lost the same way
        t.join(15)
        r = box.get("r")
        self.assertIsNotNone(r, box)
        self.assertEqual(r.status, 503, "outcome unknown: never success: %r" % (r,))
        self.assertIsNone(pnkit.failure_form("stripe", r), r)
        self.set_sync("")
        # the provider's retry resolves it: a duplicate of the committed event
        r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)
        n = self.stored("evt_unk_2")
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in n], [("applied", 3)])
        self.assertEqual(self.pg.order(pnkit.SITE, "V1")["status"], "paid")

    def test_4c_cancelled_standby_wait_is_not_acknowledged(self):
        # pg_cancel_backend() on a backend waiting for the synchronous standby
        # makes PostgreSQL report the commit as done, with a WARNING: the
        # standby may not have it.  That must not become a success ack.
        add_orders(self.pg, "C", 1)
        h, b = pnkit.stripe_paid("C1", 1999, event_id="evt_unk_4")
        self.set_sync("ghost")
        t, box = self.send_async(h, b)
        pid1 = self.waiting_backend("SyncRep")
        xid1 = self.pg.scalar("SELECT backend_xid FROM pg_stat_activity WHERE pid = %d" % pid1)
        self.assertEqual(self.pg.scalar("SELECT pg_cancel_backend(%d)" % pid1), "t")
        # the in-request retry (same connection: the session is fine) is a new
        # transaction that waits for the standby too
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = self.pg.psql("SELECT backend_xid, wait_event FROM pg_stat_activity "
                               "WHERE pid = %d" % pid1)
            if row and row[0][0] not in (None, xid1) and row[0][1] == "SyncRep":
                break
            time.sleep(0.02)
        else:
            self.fail("the retry never waited for the standby")
        self.assertEqual(self.pg.scalar("SELECT pg_cancel_backend(%d)" % pid1), "t")
        t.join(15)
        r = box.get("r")
        self.assertIsNotNone(r, box)
        self.assertEqual(r.status, 503, "a commit PostgreSQL warned about is not a success: %r"
                         % (r,))
        self.assertIsNone(pnkit.failure_form("stripe", r), r)
        log = self.rcv.log_text()
        self.assertIn("canceling wait for synchronous replication", log)
        self.assertIn("the database warned during the commit", log)
        self.set_sync("")
        r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)
        n = self.stored("evt_unk_4")
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in n], [("applied", 3)])

    def test_5_lost_before_commit_then_first_application(self):
        add_orders(self.pg, "W", 1)
        locker = subprocess.Popen(
            self.pg._psql_argv(pntest.PG_DB) + ["-A", "-t"], env=pntest.clean_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            locker.stdin.write(b"BEGIN;\nSELECT 'locked' FROM paynotify.orders WHERE site = '%s' "
                               b"AND order_id = 'W1' FOR UPDATE;\n" % pnkit.SITE.encode())
            locker.stdin.flush()
            self.assertIn(b"locked", locker.stdout.readline())
            h, b = pnkit.stripe_paid("W1", 1999, event_id="evt_unk_3")
            t, box = self.send_async(h, b)
            pid1 = self.lock_waiter()
            self.terminate(pid1)
            pid2 = self.lock_waiter((pid1,))
            self.terminate(pid2)
            t.join(15)
            r = box.get("r")
            self.assertIsNotNone(r, box)
            self.assertEqual(r.status, 503, r)
            self.assertIsNone(pnkit.failure_form("stripe", r), r)
            self.assertEqual(self.stored("evt_unk_3"), [], "nothing committed")
            locker.stdin.write(b"COMMIT;\n")
            locker.stdin.flush()
        finally:
            locker.stdin.close()
            locker.wait(10)
        r = pnkit.oneshot(self.rcv.sock, "POST", STRIPE, h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)
        n = self.stored("evt_unk_3")
        self.assertEqual([(x["outcome"], x["deliveries"]) for x in n], [("applied", 1)],
                         "the provider's retry is the first application")

    def lock_waiter(self, exclude=(), timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pg.scalar("SELECT pid FROM pg_stat_activity WHERE application_name = "
                                 "'paynotify-stripe' AND wait_event_type = 'Lock' "
                                 "AND pid NOT IN (%s)"
                                 % ",".join(str(p) for p in (0,) + exclude))
            if pid:
                return int(pid)
            time.sleep(0.02)
        raise AssertionError("no receiver backend waiting for the row lock")


if __name__ == "__main__":
    unittest.main()

# test_ha_pooler.py: failover through one pgbouncer per node (issue 24 item
# 9; docs/DEPLOYMENT.md "Failover through poolers").  The streaming
# replication, the load and the choreography of test_ha.py 1 (synchronous
# standby, 8 provider-like senders at 100 notifications/s, 0.6 s of
# replication lag, the primary killed, the standby promoted 1 s later),
# with a real pgbouncer 1.18 (Debian 12) in front of each node, in
# transaction mode with exactly the settings the docs give
# (server_login_retry = 1, query_wait_timeout = 3), and the receivers
# (prepared_statements = off) on the documented multi-host conninfo of the
# two poolers (target_session_attrs=any):
#
#   a. the primary's PostgreSQL dies, its pgbouncer stays up (and answers
#      "server login has been failing" for it)
#   b. the whole primary node dies: its PostgreSQL and its pgbouncer
#   c. (after a and b) why target_session_attrs=read-write does not work
#      through a pooler: pgbouncer answers the startup with the server
#      parameters it cached from its first server connection
#      (in_hot_standby = on for a standby) and never refreshes them after
#      the promotion, so libpq rejects the promoted node's pooler for good
#
# a and b assert: every acknowledged notification is on the new primary,
# each applied once, only failure answers (503 + failure form) while no
# primary was writable, the first success within FIRST_SUCCESS_S of the
# start of `pg_ctl promote` (the point docs/DEPLOYMENT.md measures from),
# and `paynotify check-config` on the same conninfo reaching the new
# primary (admin/db.c skips the pooler whose server is gone).  About 20 s
# each on two cores.


import os
import signal
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import pntest  # noqa: E402
import pnkit  # noqa: E402
import test_ha  # noqa: E402

# pgbouncer.ini [pgbouncer] settings of the recipe (docs/DEPLOYMENT.md)
RECIPE = ["server_login_retry = 1", "query_wait_timeout = 3"]
FIRST_SUCCESS_S = 3.0


def setUpModule():
    if not os.path.exists(pntest.PgBouncer.binary()):
        raise unittest.SkipTest("pgbouncer is not installed (apt-get install pgbouncer)")


def poolers_conninfo(*bouncers, tsa="any"):
    return ("host=%s port=%s dbname=%s user=%s target_session_attrs=%s"
            % (",".join(b.base for b in bouncers), ",".join(str(b.port) for b in bouncers),
               pntest.PG_DB, pntest.PG_USER, tsa))


def bouncer_pid(bouncer):
    with open(os.path.join(bouncer.base, "pgbouncer.pid")) as f:
        return int(f.read().split()[0])


class PoolerFailover(test_ha.FailoverUnderLoad, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.bouncers = []

    def tearDown(self):
        super().tearDown()
        for b in self.bouncers:
            b.stop()

    def route(self, primary, standby):
        self.bouncers = [pntest.PgBouncer(c, "transaction", pool_size=8, settings=RECIPE).start()
                         for c in (primary, standby)]
        return pnkit.write_all_config(None, statement_timeout_ms=1000,
                                      conninfo=poolers_conninfo(*self.bouncers),
                                      prepared_statements=False)

    def check(self, tag, kill):
        lost, count, stored = self.failover_under_load(True, tag, route=self.route, kill=kill,
                                                       first_success_s=FIRST_SUCCESS_S)
        self.assertEqual(lost, [], "acknowledged notifications lost in the failover")
        self.assertEqual(len(stored), count, "every notification stored once on the new primary")
        # the receivers moved to the promoted node's pooler by themselves
        line = ("retrying once on a new connection, from database host %s"
                % self.bouncers[1].base)
        self.assertTrue(line in self.rcv.log_text(), "no receiver log line %r" % line)
        # the admin commands, on the same conninfo, reach the new primary too
        rc, out = test_ha.check_config(poolers_conninfo(*self.bouncers))
        self.assertEqual(rc, 0, out)
        self.assertIn("replication: no standby connected", out)
        self.stale_startup(self.bouncers[1])

    def stale_startup(self, bouncer):
        """c: the promoted node's pooler, which the receivers reached while
        its server was a standby, writes now; yet libpq's read-write check
        through it still sees the in_hot_standby = on that pgbouncer cached
        then (why the recipe says target_session_attrs=any)."""
        def psql(tsa, sql):
            return subprocess.run(["psql", "-X", "-A", "-t", "-d", poolers_conninfo(bouncer, tsa=tsa),
                                   "-c", sql], env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=pntest.patience(30))
        p = psql("any", "SELECT pg_is_in_recovery()")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, b"f"), p)
        p = psql("read-write", "SELECT 1")
        self.assertNotEqual(p.returncode, 0, "pgbouncer now reports the promotion at startup: "
                            "docs/DEPLOYMENT.md 'Failover through poolers' can use "
                            "target_session_attrs=read-write again")
        self.assertIn(b"session is read-only", p.stderr)

    def test_a_primary_postgresql_dies_its_pooler_stays(self):
        self.check("PA", test_ha.crash)
        with open(self.bouncers[0].logfile) as f:
            self.assertIn("server login has been failing", f.read(),
                          "the dead server's pooler was not asked (the test did not test it)")

    def test_b_whole_node_dies(self):
        def kill_node(primary):
            pid = bouncer_pid(self.bouncers[0])
            os.kill(pid, signal.SIGSTOP)        # the node stops at once: pooler and server
            n = test_ha.crash(primary)
            os.kill(pid, signal.SIGKILL)
            return n + 1
        self.check("PB", kill_node)


if __name__ == "__main__":
    unittest.main()

# test_pgbouncer.py: what docs/DATABASE.md says about pgbouncer (1.18,
# Debian 12), with a real pgbouncer in front of a throwaway PostgreSQL:
#   - pool_mode = session: FastCGI workers connected through it ingest
#     (applied once, the duplicate counted), and so does `paynotify report`
#   - ... and CGI runs, one connection each (DISCARD ALL between clients)
#   - pool_mode = transaction with the default prepared_statements = on
#     (a misconfiguration; with off it works: test_pooler.py): the
#     receivers do NOT work (their named
#     prepared statement is left on the server connection for the next
#     client, whose PREPARE then fails): the answer is a 503 "retry later",
#     never a success ack, and nothing is applied
# pgbouncer listens on a unix socket in its own temp dir only (the port
# numbers name the socket files; no TCP).
# Skips when pgbouncer is not installed (.ci/run installs it).

import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import SITE_A  # noqa: E402

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")
PG = None


def setUpModule():
    global PG
    if not os.access(PGBOUNCER, os.X_OK):
        raise unittest.SkipTest("pgbouncer is not installed (apt-get install pgbouncer)")
    PG = pntest.PgCluster().start()


class Bouncer:
    """pgbouncer on a unix socket in its own temp dir, in front of PG."""

    def __init__(self, mode, port, pool_size=1):
        self.dir = pntest.scratch_dir("pntest-pgb.")
        os.chmod(self.dir, 0o777)
        self.port = port
        ini = os.path.join(self.dir, "pgbouncer.ini")
        with open(os.path.join(self.dir, "users.txt"), "w") as f:
            f.write('"%s" ""\n' % pntest.PG_USER)
        with open(ini, "w") as f:
            f.write("""[databases]
%(db)s = host=%(pghost)s port=%(pgport)d dbname=%(db)s
[pgbouncer]
listen_addr =
listen_port = %(port)d
unix_socket_dir = %(dir)s
auth_type = trust
auth_file = %(dir)s/users.txt
pool_mode = %(mode)s
default_pool_size = %(pool)d
max_client_conn = 50
logfile = %(dir)s/pgbouncer.log
pidfile = %(dir)s/pgbouncer.pid
""" % {"db": pntest.PG_DB, "pghost": PG.host, "pgport": PG.port, "port": port,
                "dir": self.dir, "mode": mode, "pool": pool_size})
        argv = [PGBOUNCER, ini]
        if pntest.IS_ROOT:      # pgbouncer refuses to run as root
            for name in os.listdir(self.dir):
                shutil.chown(os.path.join(self.dir, name), "nobody")
            argv = ["runuser", "-u", "nobody", "--"] + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        pntest.add_cleanup(self.stop)
        sock = os.path.join(self.dir, ".s.PGSQL.%d" % port)
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("pgbouncer did not start:\n" + self.log())
            time.sleep(0.05)

    def conninfo(self):
        return "host=%s port=%d dbname=%s user=%s" % (self.dir, self.port, pntest.PG_DB,
                                                      pntest.PG_USER)

    def log(self):
        try:
            with open(os.path.join(self.dir, "pgbouncer.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def deliver(server, order_id, amount_minor, body=None):
    body = body or pntest.stripe_checkout_completed(order_id, amount_minor)
    r = server.request("POST", "/notify/stripe/" + SITE_A.name,
                       pntest.stripe_headers(SITE_A, body), body)
    return r, body


class TestPgbouncer(unittest.TestCase):
    def test_session_mode_works(self):
        # a session pool holds a server connection per worker: size it so
        b = Bouncer("session", 6432, pool_size=2)
        cfg = pntest.write_config(conninfo=b.conninfo())
        server = pntest.FcgiServer(pntest.binary("stripe"), cfg, workers=2).start()
        try:
            for i in range(6):      # several requests per worker: the prepared statement is reused
                PG.add_order(SITE_A.name, "B-%d" % i, 100 + i, "USD")
                r, body = deliver(server, "B-%d" % i, 100 + i)
                self.assertEqual(r.status, 200, server.diagnostics() + b.log())
                self.assertEqual(PG.order(SITE_A.name, "B-%d" % i)["status"], "paid")
            r, _ = deliver(server, "B-5", 105, body)
            self.assertEqual(r.status, 200)
            self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                       "WHERE order_id = 'B-5'"), "2")
        finally:
            server.stop()
        p = subprocess.run([ADMIN, "-c", cfg.path, "report", "--format", "csv"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60, env=pntest.clean_env())
        self.assertIn(p.returncode, (0, 1), p.stderr)

    def test_session_mode_cgi(self):
        # a CGI run per notification: pgbouncer's DISCARD ALL between clients
        # removes the previous run's prepared statement
        b = Bouncer("session", 6434)
        cfg = pntest.write_config(conninfo=b.conninfo())
        for i in range(3):
            PG.add_order(SITE_A.name, "C-%d" % i, 300 + i, "USD")
            body = pntest.stripe_checkout_completed("C-%d" % i, 300 + i)
            r = pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/" + SITE_A.name,
                               pntest.stripe_headers(SITE_A, body), body, config=cfg)
            self.assertEqual(r.status, 200, r.stderr + b.log())
            self.assertEqual(PG.order(SITE_A.name, "C-%d" % i)["status"], "paid")

    def test_transaction_mode_is_retry_later_never_success(self):
        # one server connection: the first CGI run prepares pn_ingest on it;
        # transaction pooling never resets it, so the next run's prepare fails
        b = Bouncer("transaction", 6433)
        cfg = pntest.write_config(conninfo=b.conninfo())
        results = []
        for i in range(2):
            PG.add_order(SITE_A.name, "T-%d" % i, 200 + i, "USD")
            body = pntest.stripe_checkout_completed("T-%d" % i, 200 + i)
            r = pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/" + SITE_A.name,
                               pntest.stripe_headers(SITE_A, body), body, config=cfg)
            results.append(r)
        self.assertEqual(results[0].status, 200, results[0].stderr)
        r = results[1]
        self.assertEqual(r.status, 503, r.stderr)
        self.assertIn('prepared statement \\"pn_ingest\\" already exists', r.stderr)
        self.assertEqual(PG.order(SITE_A.name, "T-1")["status"], "pending")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id = 'T-1'"), "0")


if __name__ == "__main__":
    unittest.main()

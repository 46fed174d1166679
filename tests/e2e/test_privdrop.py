"""--user/--group: a receiver started as root without systemd (common/main.c,
common/server.c pn_server_drop_privileges, docs/DEPLOYMENT.md "Without
systemd", issue 24 item 5):

  - started as root with --user nobody --group nogroup: the socket is bound
    and chowned as asked (--socket-owner), the pid file written, then the
    supervisor and every worker run as nobody:nogroup (real, effective,
    saved and filesystem ids in /proc/PID/status, no supplementary group but
    nogroup), a signed notification is applied through the socket, a reload
    (SIGHUP) reads the configuration as nobody and its new workers are
    nobody's, and a clean stop removes socket and pid file (their directory
    is nobody's)
  - key files nobody cannot read: the site is isolated (503, as any site
    whose keys are unusable) with a log line saying root could read them;
    a configuration file nobody cannot read: refused (78, saying it was
    read as nobody); check-config -t --user nobody says so (78), and OK
    once the files are nobody's
  - started as root without --user: a warning that the workers run as root
  - --user as a user that is not root: refused (64), saying to start as root
  - unknown user or group: refused (64) naming it; --group without --user 64
  - --socket-owner as a user that is not root: refused with the remedy
"""

import os
import grp
import signal
import subprocess
import sys
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
SECRET = "whsec_demo_secret"
EXIT_USAGE = 64
EXIT_OSERR = 71
EXIT_CONFIG = 78


def setUpModule():
    global PG
    PG = pntest.module_database()


class Started(pne2e._Proc):
    def __init__(self, argv, logdir, name="receiver"):
        super().__init__()
        self.argv = argv
        self.logfile = os.path.join(logdir, name + ".log")

    def start(self, workers=2, timeout=60):
        self._popen(self.argv, self.logfile)
        wait_for(lambda: self._ready(workers), timeout, "%d workers" % workers)
        return self

    def _ready(self, workers):
        if self.proc.poll() is not None:
            raise AssertionError("exited (%s):\n%s" % (self.proc.returncode, self.log_text()))
        return "supervising" in self.log_text() and len(pne2e.children(self.pid)) == workers

    def run_to_exit(self, timeout=60):
        self._popen(self.argv, self.logfile)
        return self.proc.wait(timeout)


def ids(pid):
    """(uids, gids, groups) of /proc/PID/status: real, effective, saved, fs."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return ([int(x) for x in out["Uid"]], [int(x) for x in out["Gid"]],
            [int(x) for x in out["Groups"]])


def paid(addr, prefix):
    oid = "%s-%d" % (prefix, os.getpid())
    PG.add_order(SITE, oid, 1234, "USD")
    body = pntest.stripe_checkout_completed(oid, 1234, "usd")
    h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
         "Stripe-Signature": pntest.stripe_header(SECRET, int(time.time()), body)}
    r = pntest.fcgi_request(addr, pntest.cgi_params("POST", PATH, h, body), body, timeout=15)
    return oid, r


def nobody_dir(prefix):
    d = pne2e.run_dir(prefix)
    os.chown(d, *pne2e.nobody_ids())
    return d


@unittest.skipUnless(pntest.IS_ROOT, "started as root")
class DropToUser(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.bindir = pne2e.public_bindir()   # nobody must reach the binary after the drop
        cls.binary = os.path.join(cls.bindir, "paynotify-stripe")

    def argv(self, cfg, sock, *extra):
        return [self.binary, "-c", cfg, "--listen", "unix:" + sock, "--workers", "2",
                "--socket-mode", "0660"] + list(extra)

    def test_serves_as_nobody_after_binding(self):
        uid, gid = pne2e.nobody_ids()
        nogroup = grp.getgrnam("nogroup").gr_gid
        daemon = grp.getgrnam("daemon").gr_gid
        d = nobody_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"), owner=(uid, gid))
        sock = os.path.join(d, "stripe.sock")
        pidfile = os.path.join(d, "stripe.pid")
        rcv = Started(self.argv(cfg, sock, "--socket-owner", "root:daemon", "--pidfile", pidfile,
                                "--user", "nobody", "--group", "nogroup"), d).start()
        self.addCleanup(rcv.stop)
        log = rcv.log_text()
        self.assertIn("serving as user nobody (uid %d), group nogroup (gid %d)" % (uid, nogroup),
                      log)
        self.assertNotIn("running as root", log)
        # the socket as asked, bound and chowned before the drop
        st = os.stat(sock)
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o777), (0, daemon, 0o660))
        with open(pidfile) as f:
            self.assertEqual(int(f.read()), rcv.pid)
        # supervisor and workers: every id is nobody's, root's cannot come back
        # (the saved ids are nobody's too), no supplementary group of root's
        for pid in [rcv.pid] + pne2e.children(rcv.pid):
            uids, gids, groups = ids(pid)
            self.assertEqual(uids, [uid] * 4, pid)
            self.assertEqual(gids, [nogroup] * 4, pid)
            self.assertEqual(groups, [nogroup], pid)
        # a signed notification through the socket changes the order
        oid, r = paid(sock, "privdrop")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        # a reload reads the configuration as nobody; the new workers are nobody's
        old = set(pne2e.children(rcv.pid))
        rcv.send_signal(signal.SIGHUP)
        rcv.wait_log(r"configuration reloaded from .*; workers replaced", 30)
        wait_for(lambda: len(set(pne2e.children(rcv.pid)) - old) == 2
                 and not (set(pne2e.children(rcv.pid)) & old), 30, "new workers")
        for pid in pne2e.children(rcv.pid):
            self.assertEqual(ids(pid)[0], [uid] * 4, pid)
        oid, r = paid(sock, "privdrop-reloaded")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        # a reload nobody cannot read is refused (as nobody), the old one serves
        os.chown(cfg, 0, 0)
        os.chmod(cfg, 0o600)
        n = len(rcv.log_text())
        rcv.send_signal(signal.SIGHUP)
        rcv.wait_log(r"configuration reload refused, the old one keeps serving: .*Permission "
                     r"denied", 30, start=n)
        oid, r = paid(sock, "privdrop-refused")
        self.assertEqual(r.status, 200, r)
        # a clean stop: the directory is nobody's, so both files go
        self.assertEqual(rcv.stop(), 0, rcv.log_text())
        self.assertFalse(os.path.exists(sock))
        self.assertFalse(os.path.exists(pidfile))

    def test_unreadable_config_refused_and_check_config_says_so(self):
        d = nobody_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"))   # root's, 0600 secrets
        sock = os.path.join(d, "stripe.sock")
        rcv = Started(self.argv(cfg, sock, "--user", "nobody"), d).start()
        self.addCleanup(rcv.stop)
        # as for any site whose keys are unusable, the site is isolated
        # (503: the provider retries), and the log says root could read them
        self.assertIn("site demo is disabled (answers 503 until fixed): ", rcv.log_text())
        self.assertIn("Permission denied (root could read its keys: the --user cannot)",
                      rcv.log_text())
        oid, r = paid(sock, "privdrop-unreadable")
        self.assertEqual(r.status, 503, r)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        self.assertEqual(rcv.stop(), 0)
        # check-config as the user the workers run as
        p = subprocess.run([self.binary, "-c", cfg, "-t", "--user", "nobody"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, EXIT_CONFIG, p)
        self.assertIn("Permission denied", p.stderr)
        self.assertIn("read as user nobody, as the workers and every reload read it: make "
                      "the files readable by nobody", p.stderr)
        p = subprocess.run([self.binary, "-c", cfg, "-t"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p)          # root can: the check without --user
        for name in os.listdir(os.path.dirname(cfg)):
            os.chown(os.path.join(os.path.dirname(cfg), name), *pne2e.nobody_ids())
        p = subprocess.run([self.binary, "-c", cfg, "-t", "--user", "nobody"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn("configuration OK (1 sites) as user nobody", p.stdout)

    def test_config_file_itself_unreadable(self):
        d = nobody_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"), owner=pne2e.nobody_ids())
        os.chown(cfg, 0, 0)
        os.chmod(cfg, 0o600)
        rcv = Started(self.argv(cfg, os.path.join(d, "stripe.sock"), "--user", "nobody"), d)
        self.addCleanup(rcv.stop)
        self.assertEqual(rcv.run_to_exit(), EXIT_CONFIG, rcv.log_text())
        self.assertRegex(rcv.log_text(), r"could not load configuration as user nobody \(the "
                         r"workers and every reload read it as that user; make it readable by "
                         r"nobody\): .*Permission denied")

    def test_warning_when_workers_would_run_as_root(self):
        d = pne2e.run_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"))
        sock = os.path.join(d, "stripe.sock")
        rcv = Started(self.argv(cfg, sock), d).start()
        self.addCleanup(rcv.stop)
        self.assertRegex(rcv.log_text(), r"warning: running as root: the workers will serve "
                         r"requests as root; start with --user")
        for pid in pne2e.children(rcv.pid):
            self.assertEqual(ids(pid)[0][1], 0)       # they do: the warning is true

    def test_user_as_non_root_refused(self):
        d = nobody_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"), owner=pne2e.nobody_ids())
        sock = os.path.join(d, "stripe.sock")
        rcv = Started(["runuser", "-u", "nobody", "--"]
                      + self.argv(cfg, sock, "--user", "daemon"), d)
        self.addCleanup(rcv.stop)
        self.assertEqual(rcv.run_to_exit(), EXIT_USAGE, rcv.log_text())
        self.assertIn("--user daemon: only root can change user (this process runs as uid %d); "
                      "start it as root" % pne2e.nobody_ids()[0], rcv.log_text())
        self.assertFalse(os.path.exists(sock))

    def test_unknown_user_or_group_refused(self):
        d = pne2e.run_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"))
        sock = os.path.join(d, "stripe.sock")
        for extra, msg in ((["--user", "pn-no-such-user"],
                            'unknown user "pn-no-such-user" in --user'),
                           (["--user", "nobody", "--group", "pn-no-such-group"],
                            'unknown group "pn-no-such-group" in --group'),
                           (["--group", "nogroup"], "--group needs --user")):
            with self.subTest(extra):
                p = subprocess.run(self.argv(cfg, sock, *extra), capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(p.returncode, EXIT_USAGE, p)
                self.assertIn(msg, p.stderr)
                self.assertFalse(os.path.exists(sock))

    def test_socket_owner_as_non_root_says_how(self):
        d = nobody_dir("pne2e-priv.")
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"), owner=pne2e.nobody_ids())
        sock = os.path.join(d, "stripe.sock")
        rcv = Started(["runuser", "-u", "nobody", "--"]
                      + self.argv(cfg, sock, "--socket-owner", "nobody:daemon"), d)
        self.addCleanup(rcv.stop)
        self.assertEqual(rcv.run_to_exit(), EXIT_OSERR, rcv.log_text())
        self.assertIn('could not chown socket "%s" to "nobody:daemon": Operation not permitted: '
                      "only root may give a socket to another owner; start the receiver as "
                      "root with --socket-owner and --user" % sock, rcv.log_text())
        self.assertIn("or let systemd create the socket", rcv.log_text())
        self.assertFalse(os.path.exists(sock))


if __name__ == "__main__":
    unittest.main()

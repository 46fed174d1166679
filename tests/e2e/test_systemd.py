"""The shipped systemd units (conf/systemd).

  - `systemd-analyze verify` on the units instantiated for every receiver
    (paynotify@<provider>.socket + .service, generated from the shipped
    templates with only ExecStart's directory replaced): no error, no
    warning about our units
  - the receiver as the unit starts it: the listening socket on fd 0
    (StandardInput=socket), the unit's own ExecStart arguments and
    Environment=, pre-forked workers; it serves, reloads on SIGHUP
    (ExecReload), stops on SIGTERM, and can be started again on the same
    socket (Restart=on-failure); a broken configuration exits 78
    (RestartPreventExitStatus=78)
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402
from pne2e import wait_for  # noqa: E402

PG = CFG = None
UNITS = None            # dir of the generated instance units


def setUpModule():
    global PG, CFG, UNITS
    PG = pntest.module_database()
    CFG = pne2e.demo_config(PG)
    UNITS = pne2e.run_dir("pne2e-units.")
    for p in pne2e.PROVIDERS:
        svc = pne2e.substitute(pne2e.shipped("systemd", "paynotify@.service"),
                               {"ExecStart=" + pne2e.SHIPPED_BIN_DIR:
                                "ExecStart=" + pntest.REPO + "/",
                                "ExecReload=" + pne2e.SHIPPED_BIN_DIR:
                                "ExecReload=" + pntest.REPO + "/"})
        with open(os.path.join(UNITS, "paynotify@%s.service" % p), "w") as f:
            f.write(svc)
        shutil.copyfile(os.path.join(pne2e.CONF, "systemd", "paynotify@.socket"),
                        os.path.join(UNITS, "paynotify@%s.socket" % p))


def unit_settings(provider, key):
    """Every value of key= in the generated paynotify@provider.service, in
    order, %i expanded."""
    with open(os.path.join(UNITS, "paynotify@%s.service" % provider)) as f:
        return [line.split("=", 1)[1].strip().replace("%i", provider) for line in f
                if line.startswith(key + "=")]


def unit_setting(provider, key):
    """The value of key= in the generated paynotify@provider.service, %i
    expanded."""
    values = unit_settings(provider, key)
    if len(values) != 1:
        raise AssertionError("%s= %d times in the unit" % (key, len(values)))
    return values[0]


class SystemdAnalyze(unittest.TestCase):

    def test_verify_units(self):
        exe = pntest.need("systemd-analyze", "systemd")
        files = sorted(os.path.join(UNITS, f) for f in os.listdir(UNITS))
        self.assertEqual(len(files), 8)
        p = subprocess.run([exe, "verify", "--man=no"] + files, cwd=UNITS,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60, env=pntest.clean_env())
        out = p.stdout.decode("utf-8", "replace")
        ours = [line for line in out.splitlines()
                if "paynotify" in line or UNITS in line]
        self.assertEqual((p.returncode, ours), (0, []), out)

    def test_verify_timers(self):
        """The shipped timers and their services, and the confirm endpoint's
        socket and service (conf/systemd/paynotify-*), with only
        /usr/local/bin/ replaced by this tree: no error, no warning; each
        timer has its service; none is a template."""
        exe = pntest.need("systemd-analyze", "systemd")
        d = pne2e.run_dir("pne2e-timers.")
        names = sorted(f for f in os.listdir(os.path.join(pne2e.CONF, "systemd"))
                       if f.startswith("paynotify-"))
        timers = [f[:-len(".timer")] for f in names if f.endswith(".timer")]
        self.assertEqual(sorted(timers), ["paynotify-purge", "paynotify-query",
                                          "paynotify-query-sweep", "paynotify-stats"])
        self.assertEqual(names, sorted([t + ".timer" for t in timers] +
                                       [t + ".service" for t in timers] +
                                       ["paynotify-confirm.service",
                                        "paynotify-confirm.socket"]))
        for f in names:
            text = pne2e.shipped("systemd", f)
            if f.endswith(".service"):
                self.assertIn("/usr/local/bin/paynotify ", text, f)
                self.assertRegex(text, r"(?m)^User=paynotify$", f)
            with open(os.path.join(d, f), "w") as out:
                out.write(text.replace("/usr/local/bin/paynotify ", pntest.REPO + "/paynotify "))
        p = subprocess.run([exe, "verify", "--man=no"] + [os.path.join(d, f) for f in names],
                           cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60, env=pntest.clean_env())
        out = p.stdout.decode("utf-8", "replace")
        ours = [line for line in out.splitlines() if "paynotify" in line or d in line]
        self.assertEqual((p.returncode, ours), (0, []), out)

    def test_unit_and_socket_agree(self):
        # what the tests below rely on, and what the web server snippets name
        self.assertEqual(unit_setting("alipay", "StandardInput"), "socket")
        with open(os.path.join(UNITS, "paynotify@alipay.socket")) as f:
            sock = f.read()
        self.assertRegex(sock, r"(?m)^ListenStream=/run/paynotify/%i\.sock$")
        self.assertRegex(sock, r"(?m)^Accept=no$")
        for snippet in (("nginx", "paynotify.conf"), ("apache", "paynotify.conf")):
            text = pne2e.shipped(*snippet)
            for p in pne2e.PROVIDERS:
                self.assertIn("/run/paynotify/%s.sock" % p, text, snippet)


class SocketOnStdin(unittest.TestCase):
    """The receiver started the way the unit starts it."""

    def setUp(self):
        d = pne2e.run_dir("pne2e-fd0.")
        self.sock_path = os.path.join(d, "stripe.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(128)
        self.addCleanup(self.listener.close)
        self.logdir = d
        self.procs = []

    def spawn(self, argv, config=None):
        """Start argv with the listening socket as stdin (StandardInput=
        socket) and the unit's Environment= with the config replaced."""
        env = pntest.clean_env()
        k, v = unit_setting("stripe", "Environment").split("=", 1)
        self.assertEqual((k, v), ("PAYNOTIFY_CONFIG", pne2e.SHIPPED_CONFIG))
        env[k] = config or CFG
        log = os.path.join(self.logdir, "stripe-%d.log" % len(self.procs))
        proc = pne2e._Proc()
        proc._popen(argv, log, env=env, stdin=self.listener.fileno())
        self.procs.append(proc)
        self.addCleanup(proc.stop)
        return proc

    def unit_argv(self):
        argv = shlex.split(unit_setting("stripe", "ExecStart"))
        self.assertEqual(argv[0], pntest.binary("stripe"))
        return argv

    def request_paid(self, secret="whsec_demo_secret"):
        oid = "fd0-%d-%d" % (int(time.time() * 1000), len(self.procs))
        PG.add_order("demo", oid, 1234, "USD")
        body = pntest.stripe_checkout_completed(oid, 1234, "usd")
        h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
             "Stripe-Signature": pntest.stripe_header(secret, int(time.time()), body)}
        r = pntest.fcgi_request(self.sock_path, pntest.cgi_params(
            "POST", "/notify/stripe/demo", h, body), body, timeout=15)
        self.assertEqual((r.status, json.loads(r.body)), (200, {"received": True}), r)
        self.assertEqual(PG.order("demo", oid)["status"], "paid")

    def serves(self, proc, workers):
        wait_for(lambda: len(pne2e.children(proc.pid)) == workers, 10,
                 "%d workers" % workers)
        self.assertIsNone(proc.proc.poll())
        r = pntest.fcgi_request(self.sock_path, pntest.cgi_params(
            "GET", "/notify/stripe/demo"), timeout=15)
        self.assertEqual((r.status, r.body), (200, b"ok\n"))
        for _ in range(4):
            self.request_paid()

    def test_unit_execstart(self):
        argv = self.unit_argv()
        m = re.search(r"--workers (\d+)", " ".join(argv))
        workers = int(m.group(1)) if m else 0
        proc = self.spawn(argv)
        self.serves(proc, workers)
        # ExecReload= (kill -HUP $MAINPID): a new generation, same socket
        old = pne2e.children(proc.pid)
        proc.send_signal(signal.SIGHUP)
        proc.wait_log(r"configuration reloaded", 10)
        wait_for(lambda: (lambda c: len(c) == workers and not set(c) & set(old))(
            pne2e.children(proc.pid)), 10, "a new generation")
        self.request_paid()
        # SIGTERM (systemctl stop): exit 0, the socket stays systemd's
        self.assertEqual(proc.stop(timeout=10), 0)
        self.assertTrue(os.path.exists(self.sock_path), "the receiver must not unlink "
                        "a socket it was handed")
        # started again on the same socket (Restart=on-failure)
        again = self.spawn(argv)
        self.serves(again, workers)
        self.assertEqual(again.stop(timeout=10), 0)

    def test_two_workers(self):
        proc = self.spawn([pntest.binary("stripe"), "--workers", "2"])
        self.serves(proc, 2)
        self.assertEqual(proc.stop(timeout=10), 0)

    def test_reload_checks_the_configuration_first(self):
        """systemctl reload runs the ExecReload= lines in order and stops at
        the first that fails: the check exits 78 on a configuration that
        does not load, so the reload fails visibly instead of the receiver
        silently keeping the old one."""
        check, hup = unit_settings("stripe", "ExecReload")
        self.assertEqual(hup, "/bin/kill -HUP $MAINPID")
        argv = shlex.split(check)
        self.assertEqual(argv, [pntest.binary("stripe"), "--check-config"])
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": CFG})
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        bad = os.path.join(self.logdir, "reload-broken.conf")
        with open(bad, "w") as f:
            f.write(open(CFG).read().replace("[site demo]", "[site demo]\nno_such_key = 1"))
        env["PAYNOTIFY_CONFIG"] = bad
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 78, p.stdout)
        self.assertIn("reload-broken.conf:", p.stderr)
        self.assertIn("no_such_key", p.stderr)

    def test_broken_config_exits_78(self):
        bad = os.path.join(self.logdir, "broken.conf")
        with open(bad, "w") as f:
            f.write("[database]\nconninfo = host=/nonexistent\nno_such_key = 1\n")
        proc = self.spawn(self.unit_argv(), config=bad)
        proc.proc.wait(10)
        self.assertEqual(proc.proc.returncode, 78, proc.log_text())
        self.assertRegex(proc.log_text(), r"could not load configuration: .*broken\.conf:3: "
                         r".*no_such_key")
        with open(os.path.join(UNITS, "paynotify@stripe.service")) as f:
            self.assertRegex(f.read(), r"(?m)^RestartPreventExitStatus=78$")


if __name__ == "__main__":
    unittest.main()

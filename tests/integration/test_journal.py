# test_journal.py: the receivers' stderr when it is the journal (common/log.c).
#
# systemd.exec(5) "JOURNAL_STREAM": systemd sets it to "<device>:<inode>" of
# the stream it connects to stdout/stderr; a program's stderr is the journal
# only while fd 2 is still that file (sd_journal_stream_fd(3)).  Then every
# line starts with the syslog priority "<N>" that journald's stream protocol
# takes off (SyslogLevelPrefix=, default yes) and carries no timestamp or
# program of its own; otherwise the ordinary "TIME program[pid]: " form.
#
# Here fd 2 is a file (FastCGI, supervisor and workers) or a pipe (CGI,
# check-config) the test gives the receiver, JOURNAL_STREAM its real dev:inode:
#   - request lines: 200 <6>, 400 (bad signature) <4>, 404 <4>, 503 with the
#     database down <3>; start/stop lines <6>; a configuration error <3>
#   - no line carries a timestamp or "paynotify-stripe[pid]:"
#   - JOURNAL_STREAM naming another file (an inherited variable, stderr
#     redirected): the ordinary form, no "<N>".

import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import SITE_A  # noqa: E402

PG = None
CFG = None
DOWN = None     # the same sites, a database nothing answers on

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
JOURNAL_LINE = re.compile(r"^<([3467])>\[(\d+)\] (error: |warning: |info: |debug: |request )")
ORDINARY_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z paynotify-stripe\[\d+\]: "
                           r"(error: |warning: |info: |debug: |request )")


def setUpModule():
    global PG, CFG, DOWN
    PG = pntest.module_database()
    CFG = pntest.write_config(PG)
    DOWN = pntest.write_config(conninfo="host=/nonexistent dbname=paynotify connect_timeout=2")


def tearDownModule():
    if PG is not None:
        PG.destroy()


def stream_of(fd):
    st = os.fstat(fd)
    return "%d:%d" % (st.st_dev, st.st_ino)


def listening_socket():
    """A FastCGI listening socket for fd 0 (a receiver's usual start)."""
    d = pntest.temp_dir("pntest-journal.")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(os.path.join(d, "fcgi.sock"))
    ls.listen(4)
    return ls


def path(site):
    return "/notify/stripe/%s" % site.name


def paid(oid):
    body = pntest.stripe_checkout_completed(oid, 1999, "usd", payment_intent="pi_" + oid)
    return pntest.stripe_headers(SITE_A, body), body


class Receiver:
    """paynotify-stripe over FastCGI (a supervisor and 2 workers) on a unix
    socket on fd 0, stdout and stderr a file; journal says what
    JOURNAL_STREAM names: "self" that file, "other" another file."""

    def __init__(self, config, journal):
        self.dir = pntest.temp_dir("pntest-journal.")
        os.chmod(self.dir, 0o755)
        self.log = os.path.join(self.dir, "stderr.log")
        self.sock_path = os.path.join(self.dir, "fcgi.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(64)
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": config.path})
        with open(self.log, "wb") as lf:
            if journal == "self":
                env["JOURNAL_STREAM"] = stream_of(lf.fileno())
            else:
                with open(os.path.join(self.dir, "other.log"), "wb") as other:
                    env["JOURNAL_STREAM"] = stream_of(other.fileno())
            self.proc = subprocess.Popen(
                pntest.valgrind_argv([pntest.binary("stripe"), "--workers", "2"]),
                stdin=self.listener.fileno(), stdout=lf, stderr=lf, env=env, cwd="/",
                close_fds=True)
        pntest.add_cleanup(self.stop)
        deadline = time.monotonic() + pntest.patience(30)
        # the workers' requests wait in the socket's backlog until they accept
        while "supervising 2 workers" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("receiver did not start:\n" + self.text())
            time.sleep(0.1)

    def request(self, method, p, headers=None, body=b""):
        return pntest.fcgi_request(self.sock_path, pntest.cgi_params(method, p, headers, body),
                                   body)

    def text(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(pntest.patience(40))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.listener.close()
        return self.text()


def request_lines(text):
    return [l for l in text.splitlines() if re.search(r"(\] |: )request ", l)]


class JournalForm(unittest.TestCase):
    """JOURNAL_STREAM is fd 2: "<N>" prefixes, no timestamps."""

    def assert_journal_form(self, text):
        self.assertTrue(text.strip(), "nothing logged")
        for line in text.splitlines():
            self.assertRegex(line, JOURNAL_LINE, "every line starts <N>[pid]:\n" + text)
            self.assertIsNone(TIMESTAMP.search(line), "no own timestamp: " + line)
            self.assertNotIn("paynotify-stripe[", line, "no own program: " + line)

    def test_requests_and_lifecycle(self):
        oid = "J%d" % time.monotonic_ns()
        PG.add_order(SITE_A.name, oid, 1999, "USD")
        rcv = Receiver(CFG, "self")
        h, body = paid(oid)
        self.assertEqual(rcv.request("POST", path(SITE_A), h, body).status, 200)
        h["Stripe-Signature"] = "t=%d,v1=%s" % (time.time(), os.urandom(32).hex())
        self.assertEqual(rcv.request("POST", path(SITE_A), h, body).status, 400)
        self.assertEqual(rcv.request("POST", "/notify/stripe/no-such-site", h, body).status, 404)
        text = rcv.stop()
        self.assertEqual(rcv.proc.returncode, 0, text)
        self.assert_journal_form(text)
        req = request_lines(text)
        self.assertEqual(len(req), 3, text)
        self.assertRegex(req[0], r"^<6>\[\d+\] request .*outcome=applied .*status=200 ")
        self.assertRegex(req[1], r"^<4>\[\d+\] request .*status=400 ")
        self.assertRegex(req[2], r"^<4>\[\d+\] request .*status=404 ")
        self.assertRegex(text, r"(?m)^<6>\[%d\] info: supervising 2 workers" % rcv.proc.pid)
        self.assertRegex(text, r"(?m)^<6>\[%d\] info: stopped$" % rcv.proc.pid)

    def test_database_down_is_an_error(self):
        rcv = Receiver(DOWN, "self")
        h, body = paid("JD%d" % time.monotonic_ns())
        self.assertEqual(rcv.request("POST", path(SITE_A), h, body).status, 503)
        text = rcv.stop()
        self.assert_journal_form(text)
        req = request_lines(text)
        self.assertEqual(len(req), 1, text)
        self.assertRegex(req[0], r"^<3>\[\d+\] request .*status=503 ")
        # journalctl -p err finds it: everything about it is <3> or <4>
        self.assertNotRegex(text, r"(?m)^<[67]>.*(database|connect)", text)

    def test_configuration_error(self):
        """A missing configuration: CGI and --check-config (ExecReload=) say
        why at <3>, on a pipe."""
        r, w = os.pipe()
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": "/nonexistent/paynotify.conf",
                                "JOURNAL_STREAM": stream_of(w)})
        for argv in ([], ["--check-config"]):
            with listening_socket() as ls:
                p = subprocess.Popen([pntest.binary("stripe")] + argv, env=env,
                                     stdin=ls.fileno(), stdout=subprocess.DEVNULL, stderr=w,
                                     cwd="/")
                rc = p.wait(pntest.patience(30))
            self.assertEqual(rc, 78, argv)
        os.close(w)
        with os.fdopen(r, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        self.assertEqual(len(lines), 2, text)
        self.assertRegex(lines[0], r"^<3>\[\d+\] error: could not load configuration: ")
        self.assertRegex(lines[1], r"^<3>.*/nonexistent/paynotify\.conf")
        self.assertIsNone(TIMESTAMP.search(text), text)


class OrdinaryForm(unittest.TestCase):
    """JOURNAL_STREAM set but naming another file: today's format exactly."""

    def test_mismatch_keeps_timestamps(self):
        oid = "JO%d" % time.monotonic_ns()
        PG.add_order(SITE_A.name, oid, 1999, "USD")
        rcv = Receiver(CFG, "other")
        h, body = paid(oid)
        self.assertEqual(rcv.request("POST", path(SITE_A), h, body).status, 200)
        h["Stripe-Signature"] = "t=%d,v1=%s" % (time.time(), os.urandom(32).hex())
        self.assertEqual(rcv.request("POST", path(SITE_A), h, body).status, 400)
        text = rcv.stop()
        self.assertTrue(text.strip())
        for line in text.splitlines():
            self.assertRegex(line, ORDINARY_LINE, text)
            self.assertFalse(line.startswith("<"), line)
        req = request_lines(text)
        self.assertEqual(len(req), 2, text)
        self.assertRegex(req[0], r"Z paynotify-stripe\[\d+\]: request .*status=200 ")
        self.assertRegex(req[1], r"Z paynotify-stripe\[\d+\]: request .*status=400 ")
        self.assertRegex(text, r"(?m)Z paynotify-stripe\[%d\]: info: stopped$" % rcv.proc.pid)

    def test_configuration_error_on_a_pipe(self):
        r, w = os.pipe()
        r2, w2 = os.pipe()
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": "/nonexistent/paynotify.conf",
                                "JOURNAL_STREAM": stream_of(w2)})
        with listening_socket() as ls:
            p = subprocess.Popen([pntest.binary("stripe")], env=env, stdin=ls.fileno(),
                                 stdout=subprocess.DEVNULL, stderr=w, cwd="/")
            self.assertEqual(p.wait(pntest.patience(30)), 78)
        for fd in (w, w2, r2):
            os.close(fd)
        with os.fdopen(r, encoding="utf-8") as f:
            text = f.read()
        self.assertRegex(text, r"^\d{4}-\d\d-\d\dT[\d:.]+Z paynotify-stripe\[\d+\]: error: "
                         r"could not load configuration: ")


if __name__ == "__main__":
    unittest.main()

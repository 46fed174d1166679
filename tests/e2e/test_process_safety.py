"""Safe process handling of a receiver started with --listen (common/server.c,
common/main.c, docs/DEPLOYMENT.md "Running the receivers by hand"):

  - a second receiver on a unix socket that answers is refused (exit 73,
    a message naming the path) and removes nothing; the first keeps
    serving; a clean stop removes the socket file; a stale socket file
    (nothing answers) is replaced; a non-socket file is left alone; a TCP
    address in use is refused the same way; libfcgi's FCGI_WEB_SERVER_ADDRS
    is still enforced (the worker accepts connections itself)
  - the read deadline ([limits] read_timeout_ms): FastCGI peers holding a
    connection with one byte each, clients dribbling a body at 600 B/s, and
    a CGI body that stalls are each dropped (408 where an answer can still
    be written) with a log line, while health keeps answering within the
    deadline and a bit; SIGTERM with a stalled read exits promptly
  - process titles (supervisor, worker N) in ps, and --pidfile: written by
    the supervisor, a second start on a live one refused, removed on a
    clean stop, a stale one replaced
"""

import os
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
SECRET = "whsec_demo_secret"
READ_TIMEOUT_MS = 1000
EXIT_IN_USE = 73


def setUpModule():
    global PG
    PG = pntest.module_database()


def demo_config(read_timeout_ms=READ_TIMEOUT_MS):
    d = pne2e.run_dir("pne2e-cfg.")
    path = pne2e.demo_config(PG, directory=d)
    with open(path, "a") as f:
        f.write("[limits]\nread_timeout_ms = %d\n" % read_timeout_ms)
    return path


class Started(pne2e._Proc):
    """A receiver started with any arguments (the socket is its own
    business: nothing is removed before it starts)."""

    def __init__(self, argv, logdir, name="receiver", env=None):
        super().__init__()
        self.argv = argv
        self.logfile = os.path.join(logdir, name + ".log")
        self.env = pntest.clean_env(env) if env else None

    def start(self, workers=2, timeout=30):
        self._popen(self.argv, self.logfile, env=self.env)
        wait_for(lambda: self._ready(workers), timeout, "%d workers" % workers)
        return self

    def _ready(self, workers):
        if self.proc.poll() is not None:
            raise AssertionError("exited (%s):\n%s" % (self.proc.returncode, self.log_text()))
        return "supervising" in self.log_text() and len(pne2e.children(self.pid)) == workers

    def run_to_exit(self, timeout=30):
        self._popen(self.argv, self.logfile, env=self.env)
        return self.proc.wait(timeout)


def receiver_argv(config, listen, *extra):
    return [pntest.binary("stripe"), "-c", config, "--listen", listen, "--workers", "2",
            "--socket-mode", "0666"] + list(extra)


_seq = [0]


def signed(prefix):
    _seq[0] += 1
    oid = "%s-%d-%d" % (prefix, int(time.time()), _seq[0])
    PG.add_order(SITE, oid, 1234, "USD")
    body = pntest.stripe_checkout_completed(oid, 1234, "usd")
    h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
         "Stripe-Signature": pntest.stripe_header(SECRET, int(time.time()), body)}
    return oid, h, body


def paid(addr, prefix="paid"):
    oid, h, body = signed(prefix)
    r = pntest.fcgi_request(addr, pntest.cgi_params("POST", PATH, h, body), body, timeout=10)
    return oid, r


def health(addr, timeout=10):
    return pntest.fcgi_request(addr, pntest.cgi_params("GET", PATH), b"", timeout=timeout)


def stale_socket(path):
    """A socket file nobody listens on (a receiver killed with SIGKILL)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()


# ---------------------------------------------------------------------------

class SocketTakeover(unittest.TestCase):

    def test_second_receiver_refused_on_a_live_socket(self):
        cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        sock = os.path.join(d, "stripe.sock")
        first = Started(receiver_argv(cfg, "unix:" + sock), d, "first").start()
        self.addCleanup(first.stop)
        ino = os.stat(sock).st_ino
        second = Started(receiver_argv(cfg, "unix:" + sock), d, "second")
        self.addCleanup(second.stop)
        rc = second.run_to_exit()
        self.assertEqual(rc, EXIT_IN_USE, second.log_text())
        self.assertRegex(second.log_text(), r"socket \"%s\" is in use: another process accepts "
                         r"connections on it" % sock)
        self.assertNotIn("supervising", second.log_text())
        # the refused one removed nothing; the first still has the traffic
        self.assertEqual(os.stat(sock).st_ino, ino)
        oid, r = paid(sock, "takeover")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        self.assertIsNone(first.proc.poll())
        # a clean stop removes the socket file
        self.assertEqual(first.stop(), 0)
        self.assertFalse(os.path.exists(sock), "socket file left after a clean stop")

    @unittest.skipUnless(pntest.IS_ROOT, "needs a second user")
    def test_socket_it_may_not_connect_to_is_left_alone(self):
        # as nobody, with write access to the directory but not to the
        # socket (0600, root's): connect() says EACCES, which is not "stale"
        d = pne2e.run_dir("pne2e-sock.")
        os.chmod(d, 0o777)
        cfg = pne2e.demo_config(PG, directory=os.path.join(d, "cfg"), owner=pne2e.nobody_ids())
        sock = os.path.join(d, "stripe.sock")
        first = Started([pntest.binary("stripe"), "-c", cfg, "--listen", "unix:" + sock,
                         "--workers", "2", "--socket-mode", "0600"], d, "first").start()
        self.addCleanup(first.stop)
        ino = os.stat(sock).st_ino
        # nobody runs a copy outside the checkout (which may sit in a 0700
        # /root): the refusal under test is the socket's, not the binary's
        argv = receiver_argv(cfg, "unix:" + sock)
        argv[0] = os.path.join(pne2e.public_bindir(), os.path.basename(argv[0]))
        second = Started(["runuser", "-u", "nobody", "--"] + argv, d, "second")
        self.addCleanup(second.stop)
        self.assertEqual(second.run_to_exit(), 71, second.log_text())   # could not listen
        self.assertIn('could not tell whether socket "%s" is in use (connect: Permission denied)'
                      % sock, second.log_text())
        self.assertEqual(os.stat(sock).st_ino, ino)
        self.assertEqual(health(sock).status, 200)

    def test_stale_socket_replaced(self):
        cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        sock = os.path.join(d, "stripe.sock")
        stale_socket(sock)
        rcv = Started(receiver_argv(cfg, "unix:" + sock), d).start()
        self.addCleanup(rcv.stop)
        self.assertRegex(rcv.log_text(), r"replacing stale socket \"%s\"" % sock)
        self.assertEqual(health(sock).status, 200)
        self.assertEqual(rcv.stop(), 0)
        self.assertFalse(os.path.exists(sock))

    def test_not_a_socket_left_alone(self):
        cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        path = os.path.join(d, "stripe.sock")
        with open(path, "w") as f:
            f.write("not a socket\n")
        rcv = Started(receiver_argv(cfg, "unix:" + path), d)
        self.addCleanup(rcv.stop)
        self.assertEqual(rcv.run_to_exit(), 71, rcv.log_text())   # could not listen
        self.assertIn("exists and is not a socket", rcv.log_text())
        with open(path) as f:
            self.assertEqual(f.read(), "not a socket\n")

    def test_tcp_address_in_use_refused(self):
        cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        port = pne2e.free_port()
        first = Started(receiver_argv(cfg, "127.0.0.1:%d" % port), d, "first").start()
        self.addCleanup(first.stop)
        second = Started(receiver_argv(cfg, "127.0.0.1:%d" % port), d, "second")
        self.addCleanup(second.stop)
        self.assertEqual(second.run_to_exit(), EXIT_IN_USE, second.log_text())
        self.assertIn("another process listens there", second.log_text())
        self.assertEqual(health(("127.0.0.1", port)).status, 200)

    def test_fcgi_web_server_addrs_still_enforced(self):
        # libfcgi's FCGI_WEB_SERVER_ADDRS (the worker accepts by itself now)
        cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        for allowed, ok in (("127.0.0.2", False), ("127.0.0.2,127.0.0.1", True)):
            with self.subTest(allowed):
                port = pne2e.free_port()
                rcv = Started(receiver_argv(cfg, "127.0.0.1:%d" % port), d, "addrs-" + allowed,
                              env={"FCGI_WEB_SERVER_ADDRS": allowed}).start()
                self.addCleanup(rcv.stop)
                if ok:
                    self.assertEqual(health(("127.0.0.1", port)).status, 200)
                else:
                    self.assertRaises((AssertionError, OSError), health, ("127.0.0.1", port))
                    rcv.wait_log(r"refused a FastCGI connection from 127\.0\.0\.1: not in "
                                 r"FCGI_WEB_SERVER_ADDRS", 5)
                rcv.stop()


# ---------------------------------------------------------------------------

def hold_one_byte(addr):
    """A FastCGI peer that connects, sends one byte of a record header and
    holds the connection."""
    fam = socket.AF_INET if isinstance(addr, tuple) else socket.AF_UNIX
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(addr)
    s.sendall(b"\x01")
    return s


def dribble_fcgi(addr, rate, nbytes, out):
    """A FastCGI request whose parameters arrive at once and whose body
    arrives at `rate` bytes a second; out gets ("answer", Response),
    ("closed", seconds) or ("error", text)."""
    oid, h, body = signed("dribble")
    body = body + b" " * max(0, nbytes - len(body))
    params = pntest.cgi_params("POST", PATH, h, body)
    fam = socket.AF_INET if isinstance(addr, tuple) else socket.AF_UNIX
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(30)
    t0 = time.monotonic()
    try:
        s.connect(addr)
        s.sendall(pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1,
                                      struct.pack("!HB5x", pntest.FCGI_RESPONDER, 0)))
        s.sendall(b"".join(pntest._fcgi_stream(pntest.FCGI_PARAMS, 1, b"".join(
            pntest._fcgi_nv(k, v) for k, v in params.items()))))
        step = max(1, rate // 10)
        for i in range(0, len(body), step):
            s.sendall(pntest._fcgi_record(pntest.FCGI_STDIN, 1, body[i:i + step]))
            time.sleep(0.1)
        s.sendall(pntest._fcgi_record(pntest.FCGI_STDIN, 1, b""))
        out.append(("sent all", time.monotonic() - t0))
    except OSError as e:
        out.append(("closed", time.monotonic() - t0, repr(e)))
    finally:
        s.close()


class ReadDeadline(unittest.TestCase):

    def start_tcp(self):
        self.cfg = demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        self.addr = ("127.0.0.1", pne2e.free_port())
        self.rcv = Started(receiver_argv(self.cfg, "%s:%d" % self.addr), d).start()
        self.addCleanup(self.rcv.stop)
        return self.rcv

    def timed_health(self):
        t0 = time.monotonic()
        r = health(self.addr, timeout=15)
        return r, time.monotonic() - t0

    def test_peers_holding_one_byte_do_not_stop_answers(self):
        rcv = self.start_tcp()
        holders = [hold_one_byte(self.addr) for _ in range(2)]     # one per worker
        for s in holders:
            self.addCleanup(s.close)
        pne2e.wait_accepted(self.addr, 2)   # both workers hold one
        r, took = self.timed_health()
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 1.5,
                        "health waited %.1f s behind two stalled peers" % took)
        rcv.wait_log(r"dropped a FastCGI connection \(127\.0\.0\.1 port \d+\): request "
                     r"parameters not received within \[limits\] read_timeout_ms "
                     r"\(%d ms\)" % READ_TIMEOUT_MS, 5)
        # the holders were closed by the receiver
        for s in holders:
            s.settimeout(5)
            self.assertEqual(s.recv(100), b"", "the stalled connection must be closed")
        oid, r = paid(self.addr, "after-holders")
        self.assertEqual(r.status, 200, r)
        sys.stdout.write("    (health answered in %.2f s behind 2 stalled peers)\n" % took)

    def test_sigterm_with_stalled_reads_exits_promptly(self):
        rcv = self.start_tcp()
        holders = [hold_one_byte(self.addr) for _ in range(2)]
        for s in holders:
            self.addCleanup(s.close)
        pne2e.wait_accepted(self.addr, 2)   # both workers are reading
        t0 = time.monotonic()
        rcv.send_signal(signal.SIGTERM)
        rcv.proc.wait(READ_TIMEOUT_MS / 1000 + 5)
        took = time.monotonic() - t0
        self.assertEqual(rcv.proc.returncode, 0)
        self.assertNotIn("did not stop", rcv.log_text())
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 2)
        sys.stdout.write("    (stopped %.2f s after SIGTERM with 2 stalled reads)\n" % took)

    def test_slow_bodies_are_dropped_with_408(self):
        rcv = self.start_tcp()
        outs = [[], []]
        threads = [threading.Thread(target=dribble_fcgi, args=(self.addr, 600, 3000, o),
                                    daemon=True) for o in outs]
        for t in threads:
            t.start()
        pne2e.wait_accepted(self.addr, 2)   # both workers have a slow body
        r, took = self.timed_health()
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 1.5, "health waited %.1f s" % took)
        for t in threads:
            t.join(20)
        m = rcv.wait_log(r"status=408[^\n]*|[^\n]*status=408", 5)
        self.assertRegex(rcv.log_text(), r"request body not received within \[limits\] "
                         r"read_timeout_ms: \d+ of \d+ bytes")
        self.assertEqual(len([ln for ln in rcv.log_text().splitlines() if "status=408" in ln]),
                         2, m.group(0))
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id LIKE 'dribble-%'"), "0")

    def test_slow_body_gets_a_408_answer(self):
        # the answer can still be written: the peer reads a 408
        self.start_tcp()
        oid, h, body = signed("dribble-answer")
        params = pntest.cgi_params("POST", PATH, h, body)
        s = socket.create_connection(self.addr, timeout=10)
        self.addCleanup(s.close)
        s.sendall(pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1,
                                      struct.pack("!HB5x", pntest.FCGI_RESPONDER, 0)))
        s.sendall(b"".join(pntest._fcgi_stream(pntest.FCGI_PARAMS, 1, b"".join(
            pntest._fcgi_nv(k, v) for k, v in params.items()))))
        s.sendall(pntest._fcgi_record(pntest.FCGI_STDIN, 1, body[:10]))
        t0 = time.monotonic()
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        took = time.monotonic() - t0
        out, rest = [], buf
        while len(rest) >= 8:
            _v, rtype, _rid, clen, plen = struct.unpack("!BBHHBx", rest[:8])
            if rtype == pntest.FCGI_STDOUT:
                out.append(rest[8:8 + clen])
            rest = rest[8 + clen + plen:]
        r = pntest.parse_cgi_response(b"".join(out))
        self.assertEqual(r.status, 408, r)
        self.assertGreater(took, READ_TIMEOUT_MS / 1000 - 0.3)
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 1.5)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_kept_connection_idle_is_not_a_slow_client(self):
        # FCGI_KEEP_CONN (nginx with an upstream keepalive): waiting for the
        # next request on a kept connection is not a read; longer than the
        # deadline idle, then reused; SIGTERM while it is idle exits at once
        # (before, the worker sat in a read with its signals blocked, and
        # the stop needed the SIGKILL after 30 s)
        rcv = self.start_tcp()
        s = socket.create_connection(self.addr, timeout=10)
        self.addCleanup(s.close)

        def ask(method="GET"):
            s.sendall(pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1, struct.pack(
                "!HB5x", pntest.FCGI_RESPONDER, 1)))        # flags: FCGI_KEEP_CONN
            s.sendall(b"".join(pntest._fcgi_stream(pntest.FCGI_PARAMS, 1, b"".join(
                pntest._fcgi_nv(k, v) for k, v in pntest.cgi_params(method, PATH).items()))))
            s.sendall(pntest._fcgi_record(pntest.FCGI_STDIN, 1, b""))
            buf, out = b"", []
            while True:
                chunk = s.recv(65536)
                self.assertTrue(chunk, "the kept connection was closed")
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

        self.assertEqual(ask().status, 200)
        time.sleep(READ_TIMEOUT_MS / 1000 + 0.5)
        self.assertEqual(ask().status, 200, "the idle kept connection is served again")
        self.assertNotIn("dropped a FastCGI connection", rcv.log_text())
        t0 = time.monotonic()
        rcv.send_signal(signal.SIGTERM)
        rcv.proc.wait(10)
        took = time.monotonic() - t0
        self.assertEqual(rcv.proc.returncode, 0)
        # at once, but for libfcgi's close: it waits for the peer to close
        # too (this one does not read), bounded by the deadline
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 1,
                        "a worker idle on a kept connection must stop at once")
        s.settimeout(5)
        self.assertEqual(s.recv(100), b"", "the kept connection is closed on the stop")

    def test_cgi_body_that_stalls(self):
        cfg = demo_config()
        oid, h, body = signed("cgi-stall")
        env = pntest.clean_env(pntest.cgi_params("POST", PATH, h, body))
        env["PAYNOTIFY_CONFIG"] = cfg
        p = subprocess.Popen([pntest.binary("stripe")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        p.stdin.write(body[:20])
        p.stdin.flush()             # and then nothing more, the pipe open
        t0 = time.monotonic()
        p.wait(READ_TIMEOUT_MS / 1000 + 5)
        took = time.monotonic() - t0
        out, err = p.stdout.read(), p.stderr.read().decode()
        p.stdin.close()
        r = pntest.parse_cgi_response(out)
        self.assertEqual(r.status, 408, (r, err))
        self.assertIn("request body not received within [limits] read_timeout_ms: 20 of", err)
        self.assertLess(took, READ_TIMEOUT_MS / 1000 + 1.5)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")


# ---------------------------------------------------------------------------

def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")[0].decode()


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def ps_args(pid):
    return subprocess.run(["ps", "-o", "args=", "-p", str(pid)], stdout=subprocess.PIPE,
                          timeout=10).stdout.decode().strip()


class TitlesAndPidfile(unittest.TestCase):

    def start(self, *extra, name="receiver", workers=2):
        self.cfg = getattr(self, "cfg", None) or demo_config()
        d = pne2e.run_dir("pne2e-sock.")
        sock = os.path.join(d, "stripe.sock")
        rcv = Started(receiver_argv(self.cfg, "unix:" + sock, *extra), d, name)
        self.addCleanup(rcv.stop)
        rcv.sock = sock
        return rcv

    def test_process_titles(self):
        rcv = self.start().start()
        self.assertEqual(cmdline(rcv.pid), "paynotify-stripe: supervisor")
        self.assertEqual(ps_args(rcv.pid), "paynotify-stripe: supervisor")
        workers = pne2e.children(rcv.pid)
        self.assertEqual(sorted(ps_args(w) for w in workers),
                         ["paynotify-stripe: worker 1", "paynotify-stripe: worker 2"])
        self.assertEqual(sorted(comm(w) for w in workers), ["pn-stripe.1", "pn-stripe.2"])
        # a replaced worker takes its slot's number again
        w1 = [w for w in workers if ps_args(w).endswith("worker 1")][0]
        os.kill(w1, signal.SIGKILL)
        wait_for(lambda: (lambda c: len(c) == 2 and w1 not in c)(pne2e.children(rcv.pid)), 5,
                 "a replacement worker")
        self.assertEqual(sorted(ps_args(w) for w in pne2e.children(rcv.pid)),
                         ["paynotify-stripe: worker 1", "paynotify-stripe: worker 2"])
        # the configuration path came through getopt intact (argv was moved
        # before it was overwritten): the workers serve
        self.assertEqual(health(rcv.sock).status, 200)
        h = subprocess.run([pntest.binary("stripe"), "--help"], stdout=subprocess.PIPE,
                           timeout=10).stdout.decode()
        self.assertIn("--pidfile FILE", h)
        self.assertIn("paynotify-stripe: worker N", h)

    def test_pidfile(self):
        d = pne2e.run_dir("pne2e-pid.")
        pidfile = os.path.join(d, "stripe.pid")
        first = self.start("--pidfile", pidfile, name="first").start()
        with open(pidfile) as f:
            self.assertEqual(f.read(), "%d\n" % first.pid)
        self.assertEqual(os.listdir(d), ["stripe.pid"], "no temporary file left")
        # a second receiver (on another socket) with the same pid file
        second = self.start("--pidfile", pidfile, name="second")
        self.assertEqual(second.run_to_exit(), EXIT_IN_USE, second.log_text())
        self.assertIn('pid file "%s" names process %d, which is running' % (pidfile, first.pid),
                      second.log_text())
        self.assertFalse(os.path.exists(second.sock), "the refused one made no socket")
        with open(pidfile) as f:
            self.assertEqual(f.read(), "%d\n" % first.pid)
        # SIGHUP through the pid file, as a script would
        mark = len(first.log_text())
        with open(pidfile) as f:
            os.kill(int(f.read()), signal.SIGHUP)
        first.wait_log(r"configuration reloaded", 10, start=mark)
        self.assertEqual(first.stop(), 0)
        self.assertFalse(os.path.exists(pidfile), "pid file left after a clean stop")
        self.assertFalse(os.path.exists(first.sock))

    def test_stale_pidfile_replaced(self):
        d = pne2e.run_dir("pne2e-pid.")
        pidfile = os.path.join(d, "stripe.pid")
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = [str(dead.pid), "not a pid", str(os.getpid())]     # gone, garbage, reused
        for content in stale:
            with self.subTest(content):
                with open(pidfile, "w") as f:
                    f.write(content + "\n")
                rcv = self.start("--pidfile", pidfile).start()
                with open(pidfile) as f:
                    self.assertEqual(f.read(), "%d\n" % rcv.pid)
                self.assertEqual(rcv.stop(), 0)
                self.assertFalse(os.path.exists(pidfile))


if __name__ == "__main__":
    unittest.main()

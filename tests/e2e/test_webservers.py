"""End to end through real web servers (Debian packages), on 127.0.0.1 only.

  nginx                 the shipped conf/nginx/paynotify.conf, fastcgi_pass to
                        the receivers' pre-forked workers (--listen unix:)
  Apache proxy_fcgi     the shipped conf/apache/paynotify.conf, SetHandler to
                        the same workers
  Apache CGI            the shipped conf/apache/paynotify-cgi.conf (mod_cgid,
                        ScriptAlias): one receiver process per notification

The server configurations are generated from the shipped files, replacing
only the socket directory, the binary directory and the config path.  For
every receiver (Alipay, WeChat Pay v3 and v2, Stripe, 2C2P) and every front
end: a valid notification (from `paynotify sign`) is applied and acked in
the provider's exact form; the same delivery again is acked and only
counted (deliveries = 2, one transition); a forged one (the same
notification signed with other keys) gets the failure form and stores
nothing; GET on the receiver's path is the health check (200 "ok").  The
body limits of the snippets match [limits] max_body_bytes: 1 MiB is
delivered, one byte more is 413.
"""

import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402
from pne2e import CURRENCY  # noqa: E402

PG = CFG = FORGER = NGINX = APACHE = None
RECEIVERS = {}
SITE = "demo"


def setUpModule():
    global PG, CFG, FORGER, NGINX, APACHE
    PG = pntest.module_database()
    # As root Apache runs its CGI programs as nobody, who must own the
    # secret files (the receivers refuse group/other-readable ones).
    owner = pne2e.nobody_ids() if pntest.IS_ROOT else None
    CFG = pne2e.demo_config(PG, owner=owner)
    FORGER = pne2e.demo_config(PG, forger=True)
    sockdir = pne2e.run_dir("pne2e-sock.")
    for p in pne2e.PROVIDERS:
        RECEIVERS[p] = pne2e.Receiver(p, CFG, sockdir, workers=2).start()
    NGINX = pne2e.Nginx(sockdir).start()
    # Apache execs the CGI binaries as nobody: a copy outside the checkout
    # (which may be in a 0700 directory such as /root)
    APACHE = pne2e.Apache(sockdir, pne2e.public_bindir(), CFG).start()


def tearDownModule():
    # stop the front ends first, then the receivers (SIGTERM: they drain)
    for srv in (NGINX, APACHE):
        if srv is not None:
            srv.stop()
    for r in RECEIVERS.values():
        rc = r.stop()
        if rc not in (0, None):
            raise AssertionError("paynotify-%s exited %s on SIGTERM" % (r.provider, rc))


_seq = [0]


def new_order(front, label, provider):
    _seq[0] += 1
    oid = "%s-%s-%d-%d" % (front, label, int(time.time()), _seq[0])
    PG.add_order(SITE, oid, 1234, CURRENCY[provider])
    return oid


# ---------------------------------------------------------------------------
# the providers' exact forms

def check_success(t, provider, v2, r):
    what = "%s%s success ack" % (provider, " v2" if v2 else "")
    if provider == "alipay":
        t.assertEqual(r.status, 200, "%s: %r" % (what, r))
        t.assertEqual(r.body, b"success", "%s: %r" % (what, r))
        t.assertTrue(r.headers.get("content-type", "").startswith("text/plain"), r)
    elif provider == "wechatpay" and not v2:
        t.assertEqual(r.status, 204, "%s: %r" % (what, r))
        t.assertEqual(r.body, b"", "%s: %r" % (what, r))
    elif provider == "wechatpay":
        t.assertEqual(r.status, 200, "%s: %r" % (what, r))
        t.assertEqual(r.body, b"<xml><return_code><![CDATA[SUCCESS]]></return_code>"
                      b"<return_msg><![CDATA[OK]]></return_msg></xml>", what)
        t.assertTrue(r.headers.get("content-type", "").startswith("text/xml"), r)
    elif provider == "stripe":
        t.assertTrue(200 <= r.status < 300, "%s: %r" % (what, r))
        t.assertEqual(json.loads(r.body), {"received": True}, what)
        t.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r)
    elif provider == "2c2p":
        t.assertEqual(r.status, 200, "%s: %r" % (what, r))
        t.assertEqual(json.loads(r.body), {"status": "received"}, what)
        t.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r)


def check_failure(t, provider, v2, r):
    what = "%s%s failure form" % (provider, " v2" if v2 else "")
    t.assertTrue(400 <= r.status < 500, "%s: expected 4xx, got %r" % (what, r))
    if provider == "alipay":
        t.assertEqual(r.body, b"fail", "%s: %r" % (what, r))
    elif provider == "wechatpay" and not v2:
        t.assertEqual(json.loads(r.body)["code"], "FAIL", "%s: %r" % (what, r))
    elif provider == "wechatpay":
        t.assertTrue(r.body.startswith(b"<xml><return_code><![CDATA[FAIL]]></return_code>"),
                     "%s: %r" % (what, r))
    else:
        t.assertIn("error", json.loads(r.body), "%s: %r" % (what, r))


# ---------------------------------------------------------------------------

class FrontEnd:
    front = None

    def port(self):
        raise NotImplementedError

    def post(self, n):
        return pne2e.http(self.port(), "POST", n.path, n.headers, n.body)

    def scenario(self, provider, v2=False):
        label = provider + ("-v2" if v2 else "")
        oid = new_order(self.front, label, provider)
        n = pne2e.sign(CFG, provider, oid, v2=v2)
        self.assertEqual(n.path, "/notify/%s/%s" % (provider, SITE))

        # valid: applied, acked
        check_success(self, provider, v2, self.post(n))
        o = PG.order(SITE, oid)
        self.assertEqual(o["status"], "paid", o)
        self.assertEqual(o["psp"], provider)
        rows = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertEqual([(r["outcome"], r["deliveries"]) for r in rows], [("applied", 1)])
        self.assertEqual(rows[0]["raw_body"], n.body, "the raw bytes are stored unchanged")
        before = PG.psql("SELECT status, paid_at, updated_at FROM paynotify.orders "
                         "WHERE site = %s AND order_id = %s" % (pntest.q(SITE), pntest.q(oid)))

        # the same delivery again: acked, counted, not re-applied
        check_success(self, provider, v2, self.post(n))
        rows = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertEqual([(r["outcome"], r["deliveries"]) for r in rows], [("applied", 2)])
        after = PG.psql("SELECT status, paid_at, updated_at FROM paynotify.orders "
                        "WHERE site = %s AND order_id = %s" % (pntest.q(SITE), pntest.q(oid)))
        self.assertEqual(before, after, "a duplicate must not touch the order")

        # forged: the same notification signed with other keys
        oid2 = new_order(self.front, label + "-forged", provider)
        f = pne2e.sign(FORGER, provider, oid2, v2=v2)
        check_failure(self, provider, v2, self.post(f))
        self.assertEqual(PG.notifications("order_id = %s" % pntest.q(oid2)), [])
        self.assertEqual(PG.order(SITE, oid2)["status"], "pending")

        # health on the receiver's own path
        for method in ("GET", "HEAD"):
            r = pne2e.http(self.port(), method, n.path)
            self.assertEqual(r.status, 200, "%s %s: %r" % (method, n.path, r))
            if method == "GET":
                self.assertEqual(r.body, b"ok\n")

    def test_alipay(self):
        self.scenario("alipay")

    def test_wechatpay_v3(self):
        self.scenario("wechatpay")

    def test_wechatpay_v2(self):
        self.scenario("wechatpay", v2=True)

    def test_stripe(self):
        self.scenario("stripe")

    def test_2c2p(self):
        self.scenario("2c2p")

    def test_unknown_site_404(self):
        oid = new_order(self.front, "unknown-site", "stripe")
        n = pne2e.sign(CFG, "stripe", oid)
        r = pne2e.http(self.port(), "POST", "/notify/stripe/no-such-site", n.headers, n.body)
        self.assertEqual(r.status, 404, r)
        self.assertEqual(PG.notifications("order_id = %s" % pntest.q(oid)), [])


    def test_body_over_limit_413(self):
        # the snippets' client_max_body_size / LimitRequestBody (1 MiB)
        n = pne2e.sign(CFG, "stripe", new_order(self.front, "big", "stripe"))
        body = n.body + b" " * (1048576 + 1 - len(n.body))
        r = pne2e.http(self.port(), "POST", n.path, n.headers, body)
        self.assertEqual(r.status, 413, r)

    def test_body_at_limit_is_delivered(self):
        # exactly max_body_bytes (1 MiB) passes the front end and is read
        oid = new_order(self.front, "at-limit", "stripe")
        body = pntest.stripe_checkout_completed(oid, 1234, "usd")
        body += b" " * (1048576 - len(body))
        h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
             "Stripe-Signature": pntest.stripe_header("whsec_demo_secret", int(time.time()),
                                                      body)}
        r = pne2e.http(self.port(), "POST", "/notify/stripe/" + SITE, h, body)
        check_success(self, "stripe", False, r)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")


class TestNginx(FrontEnd, unittest.TestCase):
    front = "nginx"

    def port(self):
        return NGINX.port

    def test_no_redirect_without_trailing_path(self):
        # providers treat a redirect as a failed delivery: never a 301
        r = pne2e.http(self.port(), "GET", "/notify/alipay")
        self.assertNotIn(r.status, (301, 302, 307, 308), r)


class TestApacheProxyFcgi(FrontEnd, unittest.TestCase):
    front = "apache-fcgi"

    def port(self):
        return APACHE.fcgi_port


class TestApacheCgi(FrontEnd, unittest.TestCase):
    front = "apache-cgi"

    def port(self):
        return APACHE.cgi_port


def dribble_http(port, rate, nbytes, stop, out):
    """POST a body of nbytes to Apache at `rate` bytes a second (a slow
    client); out gets what happened."""
    head = ("POST /notify/stripe/%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\n"
            "Content-Length: %d\r\n\r\n" % (SITE, nbytes)).encode()
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError as e:
        out.append(("connect", repr(e)))
        return
    try:
        s.sendall(head)
        sent, step = 0, max(1, rate // 10)
        while sent < nbytes and not stop.is_set():
            s.sendall(b" " * min(step, nbytes - sent))
            sent += step
            time.sleep(0.1)
        out.append(("sent", sent, time.monotonic() - t0))
    except OSError as e:
        out.append(("closed", repr(e), time.monotonic() - t0))
    finally:
        s.close()


class TestApacheSlowClients(unittest.TestCase):
    """Through the shipped Apache mod_proxy_fcgi snippet (which streams a
    request body to the receiver as it arrives), two clients sending a body
    at 600 B/s must not hold the stripe receiver's two workers: health
    answers within the read deadline ([limits] read_timeout_ms, default
    2000 ms) and a bit."""

    def test_slow_bodies_do_not_hold_the_workers(self):
        stop = threading.Event()
        outs = [[], []]
        threads = [threading.Thread(target=dribble_http, daemon=True,
                                    args=(APACHE.fcgi_port, 600, 6000, stop, o))
                   for o in outs]
        mark = len(RECEIVERS["stripe"].log_text())
        held = pne2e.accepted(RECEIVERS["stripe"].sock)
        for t in threads:
            t.start()
        try:
            # both bodies are on their way to the workers: Apache has
            # connected to the receiver for each and a worker accepted it
            pne2e.wait_accepted(RECEIVERS["stripe"].sock, held + 2)
            t0 = time.monotonic()
            r = pne2e.http(APACHE.fcgi_port, "GET", "/notify/stripe/" + SITE, timeout=20)
            took = time.monotonic() - t0
        finally:
            stop.set()
            for t in threads:
                t.join(20)
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, 2.0 + 2.0, "health waited %.1f s behind two slow clients" % took)
        RECEIVERS["stripe"].wait_log(r"request body not received within \[limits\] "
                                     r"read_timeout_ms", 10, start=mark)
        sys.stdout.write("    (health through Apache answered in %.2f s behind 2 clients "
                         "at 600 B/s)\n" % took)


if __name__ == "__main__":
    unittest.main()

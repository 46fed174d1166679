"""Live metrics and client addresses in the log (issue 13 items 13 and 14).

A Stripe receiver started with --listen and 2 workers ([metrics]
status_path = /paynotify-status, [log] trusted_proxies = 127.0.0.2):

  - counters shared by both workers: a mix of 200 (applied, duplicate),
    400, 404 (an unknown site, no site), 413, 503 (PostgreSQL stopped) and
    health checks, spread over both workers, read back from the status path
    with exact counts, identical whichever worker answers; attacker-chosen
    site names all land under site="(unknown)"; scrapes are not counted
  - paynotify_events_total{site,type,handled}: verified notifications by
    the provider's event type; a type paynotify has no handling for is
    handled="no" (issue 22), a label value with quotes is escaped
  - clock skew and rejections by reason (issue 24): a genuine Stripe
    notification signed 120 s ago sets paynotify_clock_skew_seconds to
    +120 (a sign error cannot pass), one signed 60 s ahead to -60; a stale
    one (beyond stripe.tolerance_s), a forged one and one for an unknown
    site are counted under their reason of paynotify_rejections_total and
    never move the gauges, whichever worker answers
  - connections dropped before their parameters arrived ([limits]
    read_timeout_ms) on their own counter, not as requests
  - gauges: database up (0 while PostgreSQL is stopped, the scrape still
    answers), last ingest time, workers configured and alive, a killed
    worker counted as restarted, refused and done SIGHUP reloads, config
    generation; counters survive a reload (new workers, same region)
  - the status path answers only [metrics] allow (403 otherwise), only GET,
    only status_path and status_path/<provider>; under CGI it is 404
  - every request line carries client=REMOTE_ADDR; forwarded_for= only from
    a trusted proxy, cut to 127 bytes of printable ASCII (a forged log line
    in the header stays inside one quoted value)
  - memory stays flat over PN_METRICS_MEMORY_REQUESTS (default 20,000)
    requests mixing scrapes, trusted-proxy headers and rejections
  - through real nginx with the shipped paynotify.conf and
    paynotify-status.conf: the status location answers 127.0.0.1 and denies
    127.0.0.2; no path through the public /notify/ location reaches it;
    X-Forwarded-For from nginx's client is logged only when trusted
  - `paynotify stats --output FILE` (the textfile-collector recipe of
    docs/OPERATIONS.md, run as written there): the file is replaced
    atomically, holds paynotify_stats_up 0 and no stale counters while the
    database is down, and no temporary file is left behind
"""

import http.client as httpclient
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402
import pnkit  # noqa: E402
from pne2e import wait_for  # noqa: E402

PG = None
SITE = "demo"
PATH = "/notify/stripe/demo"
STATUS = "/paynotify-status/stripe"
SECRET = "whsec_demo_secret"
METRICS_CONF = """
[log]
trusted_proxies = 127.0.0.2
[metrics]
status_path = /paynotify-status
"""


def setUpModule():
    global PG
    PG = pntest.module_database()


def tearDownModule():
    if PG is not None:
        PG.destroy()


def config(extra=METRICS_CONF):
    path = pne2e.demo_config(PG)
    with open(path, "a") as f:
        f.write(extra)
    return path


_seq = [0]


def paid(secret=SECRET, add_order=True):
    """(headers, body) of a signed Stripe checkout for a new order."""
    _seq[0] += 1
    oid = "M-%d-%d" % (int(time.time()), _seq[0])
    if add_order:
        PG.add_order(SITE, oid, 1234, "USD")
    body = pntest.stripe_checkout_completed(oid, 1234, "usd")
    return {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
            "Stripe-Signature": pntest.stripe_header(secret, int(time.time()), body)}, body


def request(rcv, method, path, headers=None, body=b"", remote_addr="127.0.0.1",
            content_length=None):
    """One FastCGI request on a new connection (any worker may take it)."""
    params = pntest.cgi_params(method, path, headers, body, content_length)
    if remote_addr is None:
        del params["REMOTE_ADDR"]
    else:
        params["REMOTE_ADDR"] = remote_addr
    return pntest.fcgi_request(rcv.sock, params, body, timeout=15)


SAMPLE = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (-?[0-9]+)$')


def parse(text):
    """Exposition text -> {(name, ((label, value), ...)): int}; every line
    must be a comment or a well-formed sample."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        if m is None:
            raise AssertionError("not an exposition line: %r" % line)
        labels = tuple(sorted(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or "")))
        out[(m.group(1), labels)] = int(m.group(3))
    return out


def scrape(rcv, path=STATUS):
    r = request(rcv, "GET", path)
    if r.status != 200 or not r.headers.get("content-type", "").startswith("text/plain"):
        raise AssertionError("status path: %r %r" % (r.status, r.body[:200]))
    return parse(r.body.decode())


def gauge(m, name, **labels):
    labels.setdefault("provider", "stripe")
    return m[(name, tuple(sorted(labels.items())))]


def requests_total(m):
    """{(site, outcome, status): n} of paynotify_requests_total."""
    out = {}
    for (name, labels), v in m.items():
        if name == "paynotify_requests_total":
            d = dict(labels)
            assert d.pop("provider") == "stripe", labels
            out[(d["site"], d["outcome"], d["status"])] = v
    return out


def request_lines(rcv, start=0):
    """(pid, line) of the per-request log lines, scrapes excluded."""
    out = []
    for line in rcv.log_text()[start:].splitlines():
        m = re.search(r"paynotify-stripe\[(\d+)\]: request ", line)
        if m and "outcome=status" not in line:
            out.append((int(m.group(1)), line))
    return out


class Counters(unittest.TestCase):
    def start(self, workers=2):
        d = pne2e.run_dir("pnmetrics-sock.")
        rcv = pne2e.Receiver("stripe", config(), d, workers=workers).start()
        self.addCleanup(rcv.stop)
        return rcv

    def stall_one_worker(self, rcv):
        """Open a request and send only part of its parameters: the worker
        that accepts it waits for the rest, so the next requests go to the
        other worker.  Returns a function that completes it (a health
        check) and returns its status."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect(rcv.sock)
        params = b"".join(pntest._fcgi_nv(k, v) for k, v in
                          pntest.cgi_params("GET", PATH).items())
        begin = pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1,
                                    struct.pack("!HB5x", pntest.FCGI_RESPONDER, 0))
        s.sendall(begin + struct.pack("!BBHHBx", 1, pntest.FCGI_PARAMS, 1, len(params), 0)
                  + params[:10])
        pne2e.wait_accepted(rcv.sock, 1)    # one worker has it and waits for the rest

        def finish():
            s.sendall(params[10:] + pntest._fcgi_record(pntest.FCGI_PARAMS, 1)
                      + pntest._fcgi_record(pntest.FCGI_STDIN, 1))
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            m = re.search(rb"Status: (\d+)", data)
            return int(m.group(1)) if m else None
        return finish

    def test_counts_across_two_workers(self):
        rcv = self.start()
        t0 = int(time.time())
        finish = self.stall_one_worker(rcv)
        got = []
        first = paid()
        for h, b in (first, paid(), paid()):
            got.append(("applied", request(rcv, "POST", PATH, h, b).status))
        got.append(("duplicate", request(rcv, "POST", PATH, *first).status))
        for _ in range(2):
            got.append(("forged", request(rcv, "POST", PATH, *paid("whsec_wrong")).status))
        self.assertEqual(finish(), 200)     # the stalled health check
        for name in ("nosuch", "x" * 60, "evil\" site"):
            got.append(("unknown", request(rcv, "POST", "/notify/stripe/" + name,
                                           *paid()).status))
        got.append(("nosite", request(rcv, "POST", "/", *paid()).status))
        for _ in range(2):
            got.append(("large", request(rcv, "POST", PATH, {"Content-Type": "text/plain"},
                                         b"", content_length=2000000).status))
        self.assertEqual(got, [("applied", 200)] * 3 + [("duplicate", 200)]
                         + [("forged", 400)] * 2 + [("unknown", 404)] * 3
                         + [("nosite", 404)] + [("large", 413)] * 2)
        m = scrape(rcv)
        self.assertEqual(gauge(m, "paynotify_database_up"), 1)

        down = [paid(), paid()]
        PG.stop()
        try:
            for h, b in down:
                self.assertEqual(request(rcv, "POST", PATH, h, b).status, 503)
            self.assertEqual(request(rcv, "GET", PATH).status, 503)
            m = scrape(rcv)         # answers with the database down
            self.assertEqual(gauge(m, "paynotify_database_up"), 0)
            self.assertEqual(gauge(m, "paynotify_up"), 1)
        finally:
            PG.start()

        expected = {
            ("demo", "applied", "200"): 3,
            ("demo", "duplicate", "200"): 1,
            ("demo", "rejected", "400"): 2,
            ("(unknown)", "rejected", "404"): 3,
            ("(none)", "rejected", "404"): 1,
            ("demo", "rejected", "413"): 2,
            ("demo", "unavailable", "503"): 2,
            ("(none)", "health", "200"): 1,
            ("(none)", "health", "503"): 1,
        }
        for _ in range(8):          # any worker answers, with the same numbers
            m = scrape(rcv)
            self.assertEqual(requests_total(m), expected)
            self.assertEqual(gauge(m, "paynotify_database_up"), 1)
        lines = request_lines(rcv)
        self.assertEqual(len(lines), sum(expected.values()), "\n".join(l for _, l in lines))
        pids = {p for p, _ in lines}
        self.assertEqual(pids, set(rcv.worker_pids()),
                         "the counted requests were served by both workers")
        for _, line in lines:
            self.assertIn(" client=127.0.0.1 ", line)
        last = gauge(m, "paynotify_last_ingest_timestamp_seconds")
        self.assertTrue(t0 <= last <= time.time() + 1, (t0, last))
        self.assertEqual(gauge(m, "paynotify_workers"), 2)
        self.assertEqual(gauge(m, "paynotify_workers_alive"), 2)
        self.assertEqual(gauge(m, "paynotify_config_generation"), 1)
        self.assertEqual(gauge(m, "paynotify_worker_restarts_total"), 0)
        # nothing about the unknown names leaks into the labels
        self.assertFalse([k for k in m if "nosuch" in repr(k) or "evil" in repr(k)])

    def test_events_by_type(self):
        """paynotify_events_total counts verified notifications by event type,
        shared by the workers; unhandled types are handled="no"."""
        rcv = self.start()

        def event(etype):
            body = pntest._stripe_event("evt_type_%s_%d" % (etype.replace(".", "_")[:20],
                                                            time.time_ns()),
                                        etype, {"id": "cus_1", "object": "customer"})
            return ({"Content-Type": pntest.STRIPE_CONTENT_TYPE,
                     "Stripe-Signature": pntest.stripe_header(SECRET, int(time.time()), body)},
                    body)
        unknown = event("customer.created")
        for h, b in (paid(), unknown, unknown, event('odd."type\\x'),
                     event("payment_intent.created")):
            self.assertEqual(request(rcv, "POST", PATH, h, b).status, 200)
        self.assertEqual(request(rcv, "POST", PATH, *paid("whsec_wrong")).status, 400)
        for _ in range(4):          # any worker answers, with the same numbers
            text = request(rcv, "GET", STATUS).body.decode()
            # the type with a quote and a backslash, escaped as Prometheus reads it
            self.assertIn(r'paynotify_events_total{provider="stripe",site="demo",'
                          r'type="odd.\"type\\x",handled="no"} 1', text.splitlines())
            m = parse("\n".join(ln for ln in text.splitlines() if "odd." not in ln))
            got = {(dict(k[1])["type"], dict(k[1])["handled"]): v for k, v in m.items()
                   if k[0] == "paynotify_events_total"}
            self.assertEqual(got, {("checkout.session.completed", "yes"): 1,
                                   ("customer.created", "no"): 2,
                                   ("payment_intent.created", "yes"): 1}, text)
            self.assertIn('paynotify_events_total{provider="stripe",site="demo",'
                          'type="customer.created",handled="no"} 2', text.splitlines())
            self.assertEqual(requests_total(m)[("demo", "unhandled", "200")], 2)
            self.assertEqual(requests_total(m)[("demo", "duplicate", "200")], 1)

    def test_clock_skew_and_rejections(self):
        """The skew gauge moves only on a verified, fresh signed timestamp;
        refusals are counted by reason (issue 24)."""
        rcv = self.start()

        def signed(secret, age):
            """A Stripe checkout signed `age` seconds in the past (negative:
            in the future), with its signing time."""
            _seq[0] += 1
            oid = "SK-%d-%d" % (int(time.time()), _seq[0])
            PG.add_order(SITE, oid, 1234, "USD")
            body = pntest.stripe_checkout_completed(oid, 1234, "usd")
            t = int(time.time()) - age
            return {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
                    "Stripe-Signature": pntest.stripe_header(secret, t, body)}, body

        def skew(m):
            return (gauge(m, "paynotify_clock_skew_seconds", site=SITE),
                    gauge(m, "paynotify_clock_skew_abs_max_seconds", site=SITE))

        def rejections(m):
            return {(dict(k[1])["site"], dict(k[1])["reason"]): v for k, v in m.items()
                    if k[0] == "paynotify_rejections_total" and v}

        m = scrape(rcv)
        self.assertNotIn(("paynotify_clock_skew_seconds",
                          (("provider", "stripe"), ("site", SITE))), m,
                         "no sample before a verified notification")
        # zeros for a configured site, so that an increase() sees the first one
        self.assertEqual(gauge(m, "paynotify_rejections_total", site=SITE, reason="stale"), 0)
        self.assertEqual(rejections(m), {})

        t_before = int(time.time())
        self.assertEqual(request(rcv, "POST", PATH, *signed(SECRET, 120)).status, 200)
        t_after = int(time.time())
        for _ in range(4):          # any worker answers, with the same numbers
            m = scrape(rcv)
            last, amax = skew(m)
            # receiver clock - t, t = now - 120: +120 plus the delivery time
            # (seconds on a loaded machine); -120 (a sign error) cannot pass
            self.assertTrue(120 <= last <= 120 + (t_after - t_before) + 5, last)
            self.assertEqual(amax, last)
            at = gauge(m, "paynotify_clock_skew_sample_timestamp_seconds", site=SITE)
            self.assertTrue(t_before <= at <= t_after + 1, (t_before, at, t_after))
        first = last

        # refused: stale (signature genuine, 400 s > tolerance 300), forged
        # (wrong secret, signed 250 s ago: within tolerance, never believed),
        # forged and very old, an unknown site, no signature at all
        self.assertEqual(request(rcv, "POST", PATH, *signed(SECRET, 400)).status, 400)
        self.assertEqual(request(rcv, "POST", PATH, *signed(SECRET, 100000)).status, 400)
        self.assertEqual(request(rcv, "POST", PATH, *signed("whsec_wrong", 250)).status, 400)
        self.assertEqual(request(rcv, "POST", PATH, *signed("whsec_wrong", -3000)).status, 400)
        self.assertEqual(request(rcv, "POST", "/notify/stripe/nosuch",
                                 *signed(SECRET, 30)).status, 404)
        h, b = signed(SECRET, 0)
        del h["Stripe-Signature"]
        self.assertEqual(request(rcv, "POST", PATH, h, b).status, 400)
        self.assertEqual(request(rcv, "POST", PATH, {"Content-Type": "text/plain"}, b"",
                                 content_length=2000000).status, 413)
        self.assertEqual(request(rcv, "PUT", PATH, *signed(SECRET, 0)).status, 405)
        expected = {(SITE, "stale"): 2, (SITE, "bad_signature"): 2,
                    ("(unknown)", "unknown_site"): 1, (SITE, "unsigned"): 1,
                    (SITE, "too_large"): 1, (SITE, "method"): 1}
        for _ in range(4):
            m = scrape(rcv)
            self.assertEqual(rejections(m), expected)
            self.assertEqual(skew(m), (first, first), "a refused request moved the gauge")
        self.assertFalse([k for k in m if "nosuch" in repr(k)])
        # the rejections agree with the requests counter
        self.assertEqual(requests_total(m)[(SITE, "rejected", "400")], 5)

        # signed 60 s ahead (Stripe accepts a future t): the receiver's clock
        # looks behind; the last value follows, |max| keeps the largest
        self.assertEqual(request(rcv, "POST", PATH, *signed(SECRET, -60)).status, 200)
        for _ in range(4):
            last, amax = skew(scrape(rcv))
            self.assertTrue(-60 <= last <= -60 + 10, last)
            self.assertEqual(amax, first)

    def test_dropped_connections_counted(self):
        # a peer that sends part of a request's parameters and stalls is
        # dropped at [limits] read_timeout_ms; there was no request, so it
        # is counted on its own counter, not under paynotify_requests_total
        d = pne2e.run_dir("pnmetrics-sock.")
        rcv = pne2e.Receiver("stripe", config(METRICS_CONF + "[limits]\nread_timeout_ms = 300\n"),
                             d, workers=1).start()
        self.addCleanup(rcv.stop)
        m = scrape(rcv)
        self.assertEqual(gauge(m, "paynotify_connections_dropped_total", reason="read_timeout"), 0)
        before = requests_total(m)
        stalled = []
        for _ in range(2):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(15)
            self.addCleanup(s.close)
            s.connect(rcv.sock)
            params = b"".join(pntest._fcgi_nv(k, v) for k, v in
                              pntest.cgi_params("GET", PATH).items())
            s.sendall(pntest._fcgi_record(pntest.FCGI_BEGIN_REQUEST, 1,
                                          struct.pack("!HB5x", pntest.FCGI_RESPONDER, 0))
                      + struct.pack("!BBHHBx", 1, pntest.FCGI_PARAMS, 1, len(params), 0)
                      + params[:10])
            self.assertEqual(s.recv(100), b"", "the stalled connection must be closed")
            stalled.append(s)
        m = scrape(rcv)
        self.assertEqual(gauge(m, "paynotify_connections_dropped_total", reason="read_timeout"), 2)
        after = requests_total(m)
        scrapes = {k: v for k, v in after.items() if k[1] == "status" or v != before.get(k, 0)}
        self.assertFalse({k for k in scrapes if k[1] != "status"},
                         "a dropped connection is not a request: %r" % scrapes)

    def test_reloads_restarts_and_generation(self):
        rcv = self.start()
        self.assertEqual(request(rcv, "POST", PATH, *paid()).status, 200)
        with open(rcv.config) as f:
            good = f.read()
        at = len(rcv.log_text())
        with open(rcv.config, "w") as f:
            f.write(good + "[metrics]\nstatus_path = /notify/stripe/status\n")
        rcv.send_signal(signal.SIGHUP)
        rcv.wait_log(r"configuration reload refused", 10, at)
        m = scrape(rcv)
        self.assertEqual(gauge(m, "paynotify_config_reloads_total", result="refused"), 1)
        self.assertEqual(gauge(m, "paynotify_config_reloads_total", result="ok"), 0)
        self.assertEqual(gauge(m, "paynotify_config_generation"), 1)
        self.assertGreater(gauge(m, "paynotify_config_last_refused_reload_timestamp_seconds"), 0)

        with open(rcv.config, "w") as f:
            f.write(good)
        old = set(rcv.worker_pids())
        at = len(rcv.log_text())
        rcv.send_signal(signal.SIGHUP)
        rcv.wait_log(r"configuration reloaded", 10, at)
        wait_for(lambda: not (set(rcv.worker_pids()) & old), 10, "the old workers gone")
        m = scrape(rcv)
        self.assertEqual(gauge(m, "paynotify_config_generation"), 2)
        self.assertEqual(gauge(m, "paynotify_config_reloads_total", result="ok"), 1)
        self.assertEqual(requests_total(m), {("demo", "applied", "200"): 1},
                         "the counters survive the new generation of workers")

        victim = rcv.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(rcv.worker_pids()) == 2 and victim not in rcv.worker_pids(),
                 10, "a replacement worker")

        def restarted():
            m = scrape(rcv)
            return gauge(m, "paynotify_worker_restarts_total") == 1 \
                and gauge(m, "paynotify_workers_alive") == 2
        wait_for(restarted, 10, "restarts_total 1 and 2 workers alive")

    def test_status_path_access(self):
        rcv = self.start(workers=1)
        r = request(rcv, "GET", STATUS, remote_addr="10.1.2.3")
        self.assertEqual(r.status, 403)
        self.assertNotIn(b"paynotify_", r.body)
        r = request(rcv, "GET", STATUS, remote_addr=None)
        self.assertEqual(r.status, 403)
        self.assertIn(b"paynotify_up", request(rcv, "GET", "/paynotify-status").body)
        self.assertIn(b"paynotify_up", request(rcv, "HEAD", STATUS).body)
        # not the status path: another provider's, a longer one, a POST
        for path in ("/paynotify-status/alipay", "/paynotify-status/stripe/x",
                     "/paynotify-status/stripex", "/notify/stripe/paynotify-status"):
            r = request(rcv, "GET", path)
            self.assertNotIn(b"paynotify_up", r.body, path)
        self.assertEqual(request(rcv, "POST", STATUS, {"Content-Type": "text/plain"},
                                 b"x").status, 404)
        # scrapes themselves are not counted
        a = requests_total(scrape(rcv))
        b = requests_total(scrape(rcv))
        self.assertEqual(a, b)
        self.assertEqual(a[("(none)", "health", "200")], 4)
        self.assertEqual(a[("(unknown)", "rejected", "404")], 1)

    def test_cgi_has_no_live_metrics(self):
        cfg = config()
        r = pntest.run_cgi(pntest.binary("stripe"), "GET", STATUS, config=cfg)
        self.assertEqual(r.status, 404)
        self.assertIn(b"paynotify stats", r.body)
        self.assertIn("client=127.0.0.1", r.stderr)
        r = pntest.run_cgi(pntest.binary("stripe"), "POST", PATH, *paid("whsec_wrong"),
                           config=cfg)
        self.assertEqual(r.status, 400)
        self.assertRegex(r.stderr, r"request site=demo provider=stripe client=127\.0\.0\.1 "
                         r"outcome=rejected status=400")

    def test_log_client_and_forwarded_for(self):
        rcv = self.start(workers=1)
        xff = {"X-Forwarded-For": "203.0.113.9, 10.0.0.1", "Content-Type": "text/plain"}
        at = len(rcv.log_text())
        request(rcv, "POST", "/notify/stripe/untrusted", xff, b"x")
        request(rcv, "POST", "/notify/stripe/trusted", xff, b"x", remote_addr="127.0.0.2")
        request(rcv, "POST", "/notify/stripe/mapped", xff, b"x",
                remote_addr="::ffff:127.0.0.2")
        forged = "1.2.3.4\n2026-12-01T00:00:00.000Z paynotify-stripe[1]: request site=demo " \
                 "outcome=applied status=200 \x1b[2J" + "A" * 1000
        request(rcv, "POST", "/notify/stripe/forged", {"X-Forwarded-For": forged}, b"x",
                remote_addr="127.0.0.2")
        request(rcv, "POST", "/notify/stripe/noaddr", xff, b"x", remote_addr=None)
        request(rcv, "POST", "/notify/stripe/toolarge", {"Content-Type": "text/plain"}, b"",
                remote_addr="192.0.2.44", content_length=2000000)
        lines = {}
        for _pid, line in request_lines(rcv, at):
            lines[re.search(r" site=(\S+)", line).group(1)] = line
        self.assertEqual(sorted(lines), ["forged", "mapped", "noaddr", "toolarge", "trusted",
                                         "untrusted"], "\n".join(lines.values()))
        self.assertIn(" client=127.0.0.1 ", lines["untrusted"])
        self.assertNotIn("forwarded_for", lines["untrusted"])
        self.assertIn(' client=127.0.0.2 forwarded_for="203.0.113.9, 10.0.0.1" ',
                      lines["trusted"])
        self.assertIn(' client=::ffff:127.0.0.2 forwarded_for="203.0.113.9, 10.0.0.1" ',
                      lines["mapped"])
        self.assertIn(" client=- ", lines["noaddr"])
        self.assertNotIn("forwarded_for", lines["noaddr"])
        self.assertIn(" client=192.0.2.44 ", lines["toolarge"])
        self.assertIn(" status=413 ", lines["toolarge"])
        m = re.search(r' forwarded_for="((?:[^"\\]|\\.)*)" ', lines["forged"])
        self.assertIsNotNone(m, lines["forged"])
        self.assertEqual(len(m.group(1)), 127)
        self.assertTrue(m.group(1).startswith("1.2.3.4?2026-12-01T00:00:00.000Z"), m.group(1))
        self.assertTrue(m.group(1).endswith("AAA..."), m.group(1))
        self.assertNotIn("\x1b", rcv.log_text())
        # the forged line did not become a line of its own
        self.assertEqual(len(re.findall(r"^2026-12-01T00:00:00.000Z", rcv.log_text(), re.M)), 0)

    def test_memory_flat(self):
        total = int(os.environ.get("PN_METRICS_MEMORY_REQUESTS", "20000"))
        warmup = max(1, total // 10)
        rcv = self.start(workers=1)
        pid = rcv.worker_pids()[0]

        def enc(method, path, headers=None, body=b"", addr="127.0.0.1", clen=None):
            params = pntest.cgi_params(method, path, headers, body, clen)
            params["REMOTE_ADDR"] = addr
            return pnkit.FcgiConn.encode(params, body)
        h, b = paid()
        xff = {"X-Forwarded-For": "203.0.113.9, " + "10.0.0.1, " * 40,
               "Content-Type": "text/plain"}
        mix = [
            (enc("GET", STATUS), 200),
            (enc("POST", PATH, h, b, "127.0.0.2"), 200),
            (enc("POST", "/notify/stripe/site-%d" % 7, xff, b"x", "127.0.0.2"), 404),
            (enc("POST", PATH, xff, b"x", "127.0.0.2"), 400),
            (enc("POST", PATH, xff, b"", "127.0.0.1", 2000000), 413),
            (enc("GET", STATUS, addr="10.9.9.9"), 403),
            (enc("GET", PATH), 200),
        ]
        conn = pnkit.FcgiConn(rcv.sock, timeout=30)
        rss = {}
        t0 = time.monotonic()
        for i in range(total):
            data, status = mix[i % len(mix)]
            r = conn.send_raw(data)
            if r.status != status:
                self.fail("request %d: expected %d, got %r" % (i, status, r[:3]))
            if i + 1 in (warmup, total):
                with open("/proc/%d/status" % pid) as f:
                    rss[i + 1] = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        conn.close()
        took = time.monotonic() - t0
        print("\n  measured: worker VmRSS %d kB after %d requests, %d kB after %d "
              "(%.0f requests/s)" % (rss[warmup], warmup, rss[total], total, total / took))
        self.assertLessEqual(rss[total] - rss[warmup], 1024, rss)
        self.assertEqual(pid, rcv.worker_pids()[0], "the same worker served them all")


class ThroughNginx(unittest.TestCase):
    """The shipped snippets, as an operator includes them."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
            raise unittest.SkipTest("nginx is not installed")
        d = pne2e.run_dir("pnmetrics-ngx.")
        cls.rcv = pne2e.Receiver("stripe", config(), d, workers=2).start()
        cls.nginx = pne2e.Nginx(d, snippets=("paynotify.conf",
                                             "paynotify-status.conf")).start()

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        cls.rcv.stop()

    def get(self, path, source="127.0.0.1", headers=None, method="GET", body=None):
        c = httpclient.HTTPConnection("127.0.0.1", self.nginx.port, timeout=15,
                                      source_address=(source, 0))
        try:
            h = dict(headers or {})
            if body is not None:
                h["Content-Length"] = str(len(body))
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def test_status_location_localhost_only(self):
        st, body = self.get(STATUS)
        self.assertEqual(st, 200, body)
        m = parse(body.decode())
        self.assertEqual(gauge(m, "paynotify_up"), 1)
        self.assertEqual(gauge(m, "paynotify_workers_alive"), 2)
        self.assertEqual(self.get(STATUS, source="127.0.0.2")[0], 403)
        self.assertEqual(self.get("/paynotify-status/nosuch")[0], 404)

    def test_public_location_never_reaches_it(self):
        paths = ["/notify/stripe/paynotify-status", "/notify/stripe/paynotify-status/stripe",
                 "/notify/stripe/../../paynotify-status/stripe",
                 "/notify/stripe/%2e%2e/%2e%2e/paynotify-status/stripe",
                 "/notify/stripe/%2F..%2F..%2Fpaynotify-status%2Fstripe",
                 "/notify/stripe//paynotify-status", "/notify/stripe/demo?/paynotify-status",
                 "/paynotify-status/stripe", "/paynotify-status/stripe/",
                 "/PAYNOTIFY-STATUS/stripe", "/paynotify-status//stripe",
                 "/paynotify-status/./stripe", "/x/../paynotify-status/stripe"]
        for path in paths:
            st, body = self.get(path, source="127.0.0.2")
            self.assertNotIn(b"paynotify_", body, "%s answered %d with metrics" % (path, st))
        # from localhost, only the status location itself (nginx merges
        # dot segments before choosing a location) answers with metrics
        for path in paths[:7]:
            st, body = self.get(path)
            if b"paynotify_up" in body:
                self.assertRegex(path, r"\.\.|%2e", path)

    def test_forwarded_for_through_nginx(self):
        at = len(self.rcv.log_text())
        h = {"X-Forwarded-For": "198.51.100.23", "Content-Type": "text/plain"}
        self.assertEqual(self.get("/notify/stripe/from-one", headers=h, method="POST",
                                  body=b"x")[0], 404)
        self.assertEqual(self.get("/notify/stripe/from-two", source="127.0.0.2", headers=h,
                                  method="POST", body=b"x")[0], 404)
        lines = dict((re.search(r" site=(\S+)", l).group(1), l)
                     for _p, l in request_lines(self.rcv, at))
        self.assertIn(" client=127.0.0.1 ", lines["from-one"])
        self.assertNotIn("forwarded_for", lines["from-one"])
        self.assertIn(" client=127.0.0.2 forwarded_for=198.51.100.23 ", lines["from-two"])


class Textfile(unittest.TestCase):
    """The cron recipe of docs/OPERATIONS.md, run as written there."""

    def recipe(self):
        with open(os.path.join(pntest.REPO, "docs", "OPERATIONS.md")) as f:
            doc = f.read()
        block = doc.split("# /etc/cron.d/paynotify-stats", 1)[1].split("```", 1)[0]
        m = re.search(r"^\* \* \* \* \*\s+paynotify\s+(.+)$", block, re.M)
        self.assertIsNotNone(m, block)
        return m.group(1)

    def run_recipe(self, cfg, d):
        cmd = self.recipe().replace("/var/lib/prometheus/node-exporter", d)
        self.assertNotEqual(cmd, self.recipe(), "the recipe writes under the textfile dir")
        # the installed command (the package's path), here this tree's build
        self.assertTrue(cmd.startswith("/usr/bin/paynotify "), cmd)
        cmd = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify") + \
            cmd[len("/usr/bin/paynotify"):]
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": cfg,
                                "PATH": pntest.REPO + ":" + os.environ.get("PATH", "")})
        return subprocess.run(["sh", "-c", cmd], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)

    def test_atomic_and_never_stale(self):
        cfg = config("")
        d = pne2e.run_dir("pnmetrics-textfile.")
        PG.add_order(SITE, "TF-1", 1234, "USD")
        body = pntest.stripe_checkout_completed("TF-1", 1234, "usd")
        h = {"Content-Type": pntest.STRIPE_CONTENT_TYPE,
             "Stripe-Signature": pntest.stripe_header(SECRET, int(time.time()), body)}
        r = pntest.run_cgi(pntest.binary("stripe"), "POST", PATH, h, body, config=cfg)
        self.assertEqual(r.status, 200, r)
        out = os.path.join(d, "paynotify.prom")

        p = self.run_recipe(cfg, d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(os.listdir(d), ["paynotify.prom"])
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o644)
        with open(out) as f:
            m = parse(f.read())
        self.assertEqual(m[("paynotify_stats_up", ())], 1)
        self.assertGreaterEqual(m[("paynotify_notifications_total", (
            ("event_kind", "paid"), ("outcome", "applied"), ("provider", "stripe"),
            ("site", "demo")))], 1)
        ino = os.stat(out).st_ino

        PG.stop()
        try:
            p = self.run_recipe(cfg, d)
        finally:
            PG.start()
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(os.listdir(d), ["paynotify.prom"], "no temporary file left")
        self.assertNotEqual(os.stat(out).st_ino, ino, "replaced by rename, not rewritten")
        with open(out) as f:
            text = f.read()
        self.assertEqual(parse(text), {("paynotify_stats_up", ()): 0}, text)

        p = self.run_recipe(cfg, d)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            self.assertEqual(parse(f.read())[("paynotify_stats_up", ())], 1)

    def test_output_errors(self):
        cfg = config("")
        d = pne2e.run_dir("pnmetrics-textfile.")
        argv = [os.path.join(pntest.REPO, "paynotify"), "-c", cfg, "stats"]
        p = subprocess.run(argv + ["--output", os.path.join(d, "x.prom")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                           env=pntest.clean_env())
        self.assertEqual(p.returncode, 64)
        self.assertIn(b"--output FILE needs --format prometheus", p.stderr)
        p = subprocess.run(argv + ["--format", "prometheus", "--output",
                                   os.path.join(d, "missing", "x.prom")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                           env=pntest.clean_env())
        self.assertEqual(p.returncode, 3)
        self.assertIn(b"could not create a temporary file", p.stderr)
        self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()

# test_memory.py: a FastCGI worker's memory stays flat (issue 7;
# docs/RELIABILITY.md).  One worker (fd-0 mode, so its pid is known) serves a
# mix of requests on a kept-alive FastCGI connection: verified duplicates (a
# database round trip each), forged signatures, malformed bodies, unknown
# sites, other methods and health checks.  VmRSS after the warm-up and at the
# end must be within 1 MiB.
#   Stripe:    PN_MEMORY_REQUESTS (default 100,000), warm-up 5,000
#   the other three providers: a tenth of that each (their parsers: form +
#   RSA, XML + JSON + AES-GCM + RSA, JWT)
# Each prints a "measured:" line with the RSS values and the rate.

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

TOTAL = int(os.environ.get("PN_MEMORY_REQUESTS", "100000"))
WARMUP = 5000
TOLERANCE_KB = 1024
PG = None
CFG = None


def setUpModule():
    global PG, CFG
    if pnkit.AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def vmrss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def encoded(method, p, headers, body):
    if isinstance(body, str):
        body = body.encode()
    return pnkit.FcgiConn.encode(pntest.cgi_params(method, p, headers, body), body)


def mix(provider):
    """(encoded request, expected status) for one provider: a paid order is
    redelivered (duplicate), plus rejects of every kind."""
    oid = "M-" + provider
    path = pnkit.path(provider)
    if provider == "stripe":
        PG.add_order(pnkit.SITE, oid, 1999, "USD")
        good = pnkit.stripe_paid(oid, 1999)
        forged = dict(good[0], **{"Stripe-Signature": "t=%d,v1=%s" % (time.time(), "0" * 64)})
        bad = pnkit.sign_stripe(b'{"id":"evt_x","id":"evt_y"}')
        ok = 200
    elif provider == "alipay":
        PG.add_order(pnkit.SITE, oid, 8888, "CNY")
        good = pnkit.alipay_paid(oid, "88.88")
        forged = good[0]
        bad = (good[0], b"out_trade_no=%zz")
        ok = 200
    elif provider == "wechatpay":
        PG.add_order(pnkit.SITE, oid, 1999, "CNY")
        good = pnkit.wechat_paid(oid, 1999)
        forged = dict(good[0], **{"Wechatpay-Signature": "A" * 344})
        bad = ({"Content-Type": "text/xml"},
               b'<!DOCTYPE xml [<!ENTITY a "b">]><xml><a>&a;</a></xml>')
        ok = 204
    else:
        PG.add_order(pnkit.SITE, oid, 1999, "SGD")
        good = pnkit.twoc2p_paid(oid)
        forged = good[0]
        bad = pnkit.sign_2c2p("{}", header=b'{"alg":"none"}', alg="none")
        ok = 200
    h, body = good
    if provider in ("alipay", "2c2p"):
        forged_body = body.replace(b"sign=", b"sign=A") if provider == "alipay" \
            else body[:-3] + b'AA"}'
    else:
        forged_body = body
    return [
        (encoded("POST", path, h, body), ok),
        (encoded("POST", path, h, body), ok),
        (encoded("POST", path, forged, forged_body), 400),
        (encoded("POST", path, bad[0], bad[1]), 400),
        (encoded("POST", pnkit.path(provider, "nosuch"), h, body), 404),
        (encoded("PUT", path, h, body), 405),
        (encoded("GET", path, {}, b""), 200),
        (encoded("POST", path, h, body), ok),
    ]


class FlatRss(unittest.TestCase):
    def run_worker(self, provider, total, warmup):
        PG.reset()
        reqs = mix(provider)
        srv = pntest.FcgiServer(pntest.binary(provider), CFG.path, workers=1).start()
        try:
            pid = srv.procs[0].pid
            conn = pnkit.FcgiConn(srv.sock_path, timeout=30)
            t0 = time.monotonic()
            rss = {}
            for i in range(total):
                data, status = reqs[i % len(reqs)]
                r = conn.send_raw(data)
                if r.status != status:
                    self.fail("request %d: expected %d, got %r" % (i, status, r[:3]))
                if i + 1 in (warmup, total):
                    rss[i + 1] = vmrss_kb(pid)
            took = time.monotonic() - t0
            conn.close()
            self.assertEqual(srv.dead_workers(), [])
            deliveries = int(PG.scalar("SELECT sum(deliveries) FROM paynotify.notifications"))
            # the verified duplicates are requests 0, 1 and 7 of each 8
            self.assertEqual(deliveries, (total // 8) * 3 + min(total % 8, 2))
            growth = rss[total] - rss[warmup]
            sys.stdout.write("    measured: flat_rss provider=%s requests=%d warmup=%d "
                             "rss_warm_kb=%d rss_end_kb=%d growth_kb=%d seconds=%.1f "
                             "req_per_s=%.0f\n" % (provider, total, warmup, rss[warmup],
                                                   rss[total], growth, took, total / took))
            self.assertLessEqual(growth, TOLERANCE_KB,
                                 "%s worker grew by %d kB between request %d and %d" % (
                                     provider, growth, warmup, total))
        finally:
            srv.stop()

    def test_stripe_100k(self):
        self.run_worker("stripe", TOTAL, WARMUP)

    def test_alipay(self):
        self.run_worker("alipay", max(TOTAL // 10, 2 * WARMUP), WARMUP)

    def test_wechatpay(self):
        self.run_worker("wechatpay", max(TOTAL // 10, 2 * WARMUP), WARMUP)

    def test_2c2p(self):
        self.run_worker("2c2p", max(TOTAL // 10, 2 * WARMUP), WARMUP)


if __name__ == "__main__":
    unittest.main()

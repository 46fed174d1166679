# test_encoding.py: a genuine notification whose ids are not UTF-8 is
# stored, not retried forever.
#
# Alipay signs the bytes of the charset it names (charset=gbk exists in the
# wild), and paynotify keeps values as bytes.  PostgreSQL refuses text that
# is not valid UTF-8, so such ids are escaped (\xNN) before they are stored:
# deterministically, so a redelivery is still a duplicate.  The raw body keeps
# every byte.  Without the escaping the receiver answered 503 on every
# delivery, and Alipay would have retried for 25 hours and given up.

import base64
import os
import subprocess
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

PG = CFG = None
SITE = pntest.SITE_A


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pntest.write_config(PG)


def tearDownModule():
    if PG:
        PG.destroy()


def gbk_notification(order_bytes, trade_no=b"2024GBK1"):
    """A signed Alipay notification whose out_trade_no is GBK bytes (trade_no
    None: without one, so the key falls back to out_trade_no)."""
    params = [(b"app_id", SITE.alipay_app_id.encode()), (b"seller_id", SITE.alipay_seller_id.encode()),
              (b"charset", b"gbk"), (b"out_trade_no", order_bytes)] + (
                  [(b"trade_no", trade_no)] if trade_no else []) + [
              (b"trade_status", b"TRADE_SUCCESS"), (b"total_amount", b"1.00"),
              (b"subject", "会员".encode("gbk")), (b"notify_id", b"gbk-1"),
              (b"notify_type", b"trade_status_sync"), (b"version", b"1.0")]
    content = b"&".join(k + b"=" + v for k, v in sorted(params))
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", SITE.alipay_private_key],
                         input=content, stdout=subprocess.PIPE, check=True).stdout
    params += [(b"sign_type", b"RSA2"), (b"sign", base64.b64encode(sig))]
    return b"&".join(urllib.parse.quote_from_bytes(k).encode() + b"="
                     + urllib.parse.quote_from_bytes(v).encode() for k, v in params)


class NonUtf8Ids(unittest.TestCase):
    def send(self, body):
        return pntest.run_cgi(pntest.binary("alipay"), "POST", "/notify/alipay/" + SITE.name,
                              {"Content-Type": "application/x-www-form-urlencoded"}, body, CFG)

    def test_gbk_order_id_is_stored_and_deduplicated(self):
        body = gbk_notification("订单".encode("gbk"))
        r = self.send(body)
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        rows = PG.psql("SELECT dedup_key, order_id, outcome, deliveries, raw_body = '\\x%s'::bytea "
                       "FROM paynotify.notifications" % body.hex())
        # keyed by Alipay's trade_no (issue 11); the order id is escaped
        self.assertEqual(rows, [("2024GBK1:TRADE_SUCCESS", "\\xb6\\xa9\\xb5\\xa5",
                                 "unknown_order", "1", "t")])
        r = self.send(body)                      # a redelivery: same key
        self.assertEqual((r.status, r.body), (200, b"success"), r)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications"), "2")
        # without trade_no the key falls back to out_trade_no: escaped, deterministic
        body = gbk_notification("订单".encode("gbk"), trade_no=None)
        for n in ("1", "2"):
            r = self.send(body)
            self.assertEqual((r.status, r.body), (200, b"success"), r)
            self.assertEqual(PG.psql("SELECT dedup_key, deliveries FROM paynotify.notifications "
                                     "WHERE dedup_key LIKE 'otn:%'"),
                             [("otn:\\xb6\\xa9\\xb5\\xa5:TRADE_SUCCESS", n)])


if __name__ == "__main__":
    unittest.main()

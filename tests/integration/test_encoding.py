# test_encoding.py: a genuine notification whose ids are not UTF-8 is
# stored, not retried forever.
#
# Alipay signs the bytes of the charset it names (charset=gbk exists in the
# wild), and paynotify keeps values as bytes.  PostgreSQL refuses text that
# is not valid UTF-8, so such ids are escaped (\xNN) before they are stored:
# deterministically, so a redelivery is still a duplicate.  The raw body keeps
# every byte.  Without the escaping the receiver answered 503 on every
# delivery, and Alipay would have retried for 25 hours and given up.
#
# The escaping is one canonicalisation step of the event (pn_event_canonicalise
# in common/event.c), applied to every event the store writes
# (pn_store_ingest) and by `paynotify replay` after verify: replay re-derives the event from the raw bytes and must
# find the same key that was stored.  Before, replay compared its raw bytes
# with the escaped stored key and called such a genuine notification "no
# longer verifies" (exit 2).

import json
import os
import subprocess
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
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
    sig = pnsign.alipay_sign(params, SITE.alipay_private_key)    # bytes in, GBK kept
    params += [(b"sign_type", b"RSA2"), (b"sign", sig.encode())]
    return b"&".join(urllib.parse.quote_from_bytes(k).encode() + b"="
                     + urllib.parse.quote_from_bytes(v).encode() for k, v in params)


ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")


def replay(*args):
    """`paynotify replay --format json ARGS` -> (exit code, rows, stderr)."""
    p = subprocess.run([ADMIN, "replay", "--format", "json"] + list(args),
                       env=pntest.clean_env({"PAYNOTIFY_CONFIG": CFG.path}), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    try:
        rows = json.loads(p.stdout.decode("utf-8"))
    except ValueError:
        raise AssertionError("replay %s: exit %d, not JSON: %r %s" % (args, p.returncode,
                                                                       p.stdout, err))
    return p.returncode, rows, err


class NonUtf8Ids(unittest.TestCase):
    def setUp(self):
        PG.reset()

    def send(self, body):
        return pntest.run_cgi(pntest.binary("alipay"), "POST", "/notify/alipay/" + SITE.name,
                              {"Content-Type": "application/x-www-form-urlencoded"}, body, CFG)

    def test_replay_reverifies_gbk_notification(self):
        # the order id as stored (escaped) is the id the shop's row carries
        PG.add_order(SITE.name, "\\xb6\\xa9\\xb5\\xa5", 100, "CNY")
        for trade_no in (b"2024GBK1", None):     # keyed by trade_no, and by out_trade_no
            r = self.send(gbk_notification("订单".encode("gbk"), trade_no=trade_no))
            self.assertEqual((r.status, r.body), (200, b"success"), r)
        self.assertEqual(PG.psql("SELECT outcome FROM paynotify.notifications ORDER BY id"),
                         [("applied",), ("already_applied",)])
        for mode in ("--dry-run", "--apply"):
            rc, rows, err = replay(mode)
            self.assertEqual(rc, 0, (mode, rows, err))
            self.assertEqual([(r["verified"], r["order"], r["event"], r["now"], r["note"])
                              for r in rows],
                             [("yes", "\\xb6\\xa9\\xb5\\xa5", "paid", now, "")
                              for now in ("applied", "already_applied")], mode)
        self.assertEqual(PG.order(SITE.name, "\\xb6\\xa9\\xb5\\xa5")["status"], "paid")
        # the table too (tests/sanitize.sh runs this under ASan: admin/table.c width())
        for wide in ([], ["--wide"]):
            p = subprocess.run([ADMIN, "replay", "--format", "table"] + wide,
                               env=pntest.clean_env({"PAYNOTIFY_CONFIG": CFG.path}),
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(b"\\xb6\\xa9\\xb5" if not wide else b"\\xb6\\xa9\\xb5\\xa5",
                          p.stdout)
            self.assertIn(b"2 notifications: 2 verified, 0 not verified", p.stdout)

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

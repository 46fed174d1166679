# test_harness.py: self-tests of the integration harness (tests/lib/pntest.py)
# that need no receiver binary: the Stripe and Alipay signers against the
# known-answer vectors of shared/psp (Stripe §A15 examples 1-3, Alipay §1.9.C),
# the test key fixtures, the CGI response parser and the FastCGI record
# encoding, and the throwaway PostgreSQL cluster (start, schema, psql,
# orders, stop/restart).  If these fail, the core tests cannot be trusted.

import base64
import hashlib
import os
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

FIX = pntest.FIXTURES


def read(name):
    with open(os.path.join(FIX, name), "rb") as f:
        return f.read()


class StripeSignerKAT(unittest.TestCase):
    def test_a15_example1_dotnet_fixture(self):
        body = read("stripe-dotnet-event_test_signature.json")
        self.assertEqual(len(body), 484)
        self.assertEqual(pntest.stripe_signature("webhook_secret", 1533204620, body),
                         "2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7")
        # without the trailing newline the MAC changes (raw bytes matter)
        self.assertEqual(pntest.stripe_signature("webhook_secret", 1533204620, body[:-1]),
                         "8c506d7d19ece69e9a38e398964787dda54eeb2583381ffc7f56070c28d7f119")

    def test_a15_example2_node_payload(self):
        body = b'{\n  "id": "evt_test_webhook",\n  "object": "event"\n}'
        self.assertEqual(len(body), 51)
        self.assertEqual(pntest.stripe_header("whsec_test_secret", 1234567890, body),
                         "t=1234567890,v1=45969f456b3331a0f76e237ed33423d5f758908f1f0432d30e7d45ba89bb9edd")

    def test_a15_example3_order_paid(self):
        body = (b'{"id":"evt_test_0001","object":"event","api_version":"2024-06-20",'
                b'"created":1700000000,"livemode":false,"type":"checkout.session.completed",'
                b'"data":{"object":{"id":"cs_test_0001","object":"checkout.session",'
                b'"amount_total":1999,"currency":"usd","client_reference_id":"ORDER-42",'
                b'"metadata":{"order_id":"ORDER-42"},"mode":"payment",'
                b'"payment_intent":"pi_test_0001","payment_status":"paid","status":"complete"}}}')
        self.assertEqual(len(body), 406)
        self.assertEqual(pntest.stripe_header("whsec_test_secret", 1700000000, body),
                         "t=1700000000,v1=fe373eb5d76628265e03b1b67a119d48b0e42a0ceb0059f0c3ec0d21b4e38c78")
        self.assertEqual(pntest.stripe_signature("whsec_test_secret_rolled_key", 1700000000, body),
                         "92782eff43850395de098b7069d30d454c0c57988131c30f7b3380ab4833ee92")

    def test_builders_make_valid_json(self):
        import json
        ev = json.loads(pntest.stripe_checkout_completed("O-1", 1999))
        self.assertEqual(ev["type"], "checkout.session.completed")
        self.assertEqual(ev["data"]["object"]["metadata"]["order_id"], "O-1")
        self.assertEqual(ev["data"]["object"]["amount_total"], 1999)
        ev = json.loads(pntest.stripe_charge_refunded("O-1", 1999, 500))
        self.assertEqual(ev["type"], "charge.refunded")
        self.assertEqual(ev["data"]["object"]["amount_refunded"], 500)


class AlipaySignerKAT(unittest.TestCase):
    def test_1_9_c_content_and_signature(self):
        body = read("alipay-1.9.C-body.txt")
        pairs = pntest.form_decode(body)
        content = pntest.alipay_content(pairs)
        self.assertEqual(content, read("alipay-1.9.C-content.txt"))
        self.assertEqual(hashlib.sha256(content).hexdigest(),
                         "eb933f0498ed926ffb2038ca87bff1123b42e15317fda0a4f9aede2ba21dda70")
        sign = dict(pairs)["sign"]
        # PKCS#1 v1.5 is deterministic: signing with the Appendix A key
        # reproduces Alipay's sign exactly
        self.assertEqual(pntest.alipay_sign(pairs, pntest.SITE_A.alipay_private_key), sign)

    def test_1_9_c_verifies_with_public_key_forms(self):
        pairs = pntest.form_decode(read("alipay-1.9.C-body.txt"))
        sig = base64.b64decode(dict(pairs)["sign"])
        content = pntest.alipay_content(pairs)
        for pub in ("site-a-public.pem",):
            self.assertTrue(_openssl_verify(os.path.join(pntest.KEYS, pub), content, sig))
        # keeping sign_type (V2 content) or SHA-1 must not verify
        v2 = "&".join("%s=%s" % kv for kv in sorted(
            (k, v) for k, v in pairs if k != "sign" and v != "")).encode()
        self.assertFalse(_openssl_verify(os.path.join(pntest.KEYS, "site-a-public.pem"), v2, sig))
        self.assertFalse(_openssl_verify(os.path.join(pntest.KEYS, "site-a-public.pem"),
                                         content, sig, md="sha1"))

    def test_body_round_trip(self):
        site = pntest.SITE_B
        body = pntest.alipay_notification(site, "T-1", "12.34", subject="a+b c&d=e")
        pairs = pntest.form_decode(body)
        d = dict(pairs)
        self.assertEqual(d["subject"], "a+b c&d=e")
        self.assertEqual(d["sign_type"], "RSA2")
        self.assertEqual(d["passback_params"], "order%3D42")
        self.assertNotIn("body=&", pntest.alipay_content(pairs).decode())
        sig = base64.b64decode(d["sign"])
        content = pntest.alipay_content(pairs)
        self.assertTrue(_openssl_verify(os.path.join(pntest.KEYS, "site-b-public.pem"), content, sig))
        self.assertFalse(_openssl_verify(os.path.join(pntest.KEYS, "site-a-public.pem"), content, sig))

    def test_rsa1_sign_type(self):
        body = pntest.alipay_notification(pntest.SITE_A, "T-2", "1.00", sign_type="RSA")
        pairs = pntest.form_decode(body)
        sig = base64.b64decode(dict(pairs)["sign"])
        self.assertTrue(_openssl_verify(os.path.join(pntest.KEYS, "site-a-public.pem"),
                                        pntest.alipay_content(pairs), sig, md="sha1"))


def _openssl_verify(pub, content, sig, md="sha256"):
    import tempfile
    with tempfile.NamedTemporaryFile() as s:
        s.write(sig)
        s.flush()
        p = subprocess.run(["openssl", "dgst", "-" + md, "-verify", pub, "-signature", s.name],
                           input=content, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode == 0 and b"Verified OK" in p.stdout


class KeyFixtures(unittest.TestCase):
    def test_forms_are_the_same_key(self):
        for site in ("a", "b"):
            pem = os.path.join(pntest.KEYS, "site-%s-public.pem" % site)
            with open(os.path.join(pntest.KEYS, "site-%s-public.b64" % site)) as f:
                b64 = f.read()
            self.assertNotIn("\n", b64)
            with open(pem) as f:
                self.assertEqual("".join(f.read().splitlines()[1:-1]), b64)
            derived = subprocess.run(
                ["openssl", "pkey", "-pubout", "-in",
                 os.path.join(pntest.KEYS, "site-%s-private.pem" % site)],
                stdout=subprocess.PIPE, check=True).stdout.decode()
            with open(pem) as f:
                self.assertEqual(derived, f.read())
        cert_pub = subprocess.run(["openssl", "x509", "-noout", "-pubkey", "-in",
                                   os.path.join(pntest.KEYS, "site-b-cert.pem")],
                                  stdout=subprocess.PIPE, check=True).stdout.decode()
        with open(os.path.join(pntest.KEYS, "site-b-public.pem")) as f:
            self.assertEqual(cert_pub, f.read())

    def test_sites_have_different_keys(self):
        with open(pntest.SITE_A.alipay_public_key) as f:
            a = f.read()
        with open(os.path.join(pntest.KEYS, "site-b-public.pem")) as f:
            b = f.read()
        self.assertNotEqual(a, b)
        self.assertNotEqual(pntest.SITE_A.stripe_secrets, pntest.SITE_B.stripe_secrets)


class Protocol(unittest.TestCase):
    def test_parse_cgi_response(self):
        r = pntest.parse_cgi_response(
            b"Status: 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\nsuccess")
        self.assertEqual((r.status, r.headers["content-type"], r.body), (200, "text/plain", b"success"))
        r = pntest.parse_cgi_response(b"Status: 503 Service Unavailable\nContent-Type: text/plain\n\nfail")
        self.assertEqual((r.status, r.body), (503, b"fail"))
        r = pntest.parse_cgi_response(b"Content-Type: text/plain\r\n\r\nx")
        self.assertEqual(r.status, 200)

    def test_fcgi_encoding(self):
        self.assertEqual(pntest._fcgi_nv("A", "b"), b"\x01\x01Ab")
        long_value = "x" * 200
        nv = pntest._fcgi_nv("K", long_value)
        self.assertEqual(nv[:5], b"\x01\x80\x00\x00\xc8")
        rec = pntest._fcgi_record(pntest.FCGI_STDIN, 1, b"abc")
        self.assertEqual(len(rec) % 8, 0)
        self.assertEqual(struct.unpack("!BBHHBx", rec[:8]), (1, 5, 1, 3, 5))
        recs = pntest._fcgi_stream(pntest.FCGI_STDIN, 1, b"y" * 70000)
        self.assertEqual(len(recs), 4)          # 32768 + 32768 + 4464 + empty

    def test_cgi_params(self):
        p = pntest.cgi_params("POST", "/notify/stripe/shop-a",
                              {"Content-Type": "application/json", "Stripe-Signature": "t=1"}, b"{}")
        self.assertEqual(p["CONTENT_TYPE"], "application/json")
        self.assertEqual(p["CONTENT_LENGTH"], "2")
        self.assertEqual(p["HTTP_STRIPE_SIGNATURE"], "t=1")
        self.assertEqual(p["PATH_INFO"], "/notify/stripe/shop-a")


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = pntest.PgCluster().start()

    @classmethod
    def tearDownClass(cls):
        cls.pg.destroy()

    def test_schema_loaded(self):
        import glob
        files = glob.glob(os.path.join(pntest.REPO, "sql", "[0-9]*.sql"))
        latest = max(int(os.path.basename(f).split("_")[0]) for f in files)
        self.assertEqual(self.pg.scalar("SELECT max(version) FROM paynotify.schema_version"),
                         str(latest))
        self.assertEqual(self.pg.scalar("SELECT count(*) FROM pg_proc p JOIN pg_namespace n "
                                        "ON n.oid = p.pronamespace WHERE nspname = 'paynotify' "
                                        "AND proname IN ('ingest', 'apply_event')"), "2")

    def _ingest_listening(self, setting):
        """LISTEN, then ingest one new paid event in a psql session (with
        paynotify.notify set to setting, unless None) and send its wake-up
        the way the receivers do, as a statement of its own; psql's output
        after each of the two steps."""
        oid = "NTF-%s" % (setting or "default")
        self.pg.add_order("shop-n", oid, 100, "CNY")
        sql = "LISTEN paynotify;\n"
        if setting is not None:
            sql += "SET paynotify.notify = %s;\n" % setting
        sql += ("SELECT outcome, wakeup IS NOT NULL AS has FROM paynotify.ingest('shop-n', 'alipay', "
                "'k-%s', 'paid', NULL, '%s', 'T1', NULL, 100, 'CNY', NULL, false, NULL, NULL, "
                "NULL, NULL, NULL, '\\x00'::bytea) \\gset w_\n"
                "\\echo ingested :w_outcome :w_has\n"
                "SELECT 1 AS step;\n" % (oid, oid))
        sql += ("SELECT pg_notify('paynotify', wakeup) FROM paynotify.notifications n, LATERAL "
                "(SELECT paynotify.wakeup_payload(0, n.id, n.site, n.provider, n.order_id, "
                "n.event_kind, 'paid', false) AS wakeup) w WHERE n.order_id = '%s' "
                "AND wakeup IS NOT NULL;\n" % oid)
        p = subprocess.run(self.pg._psql_argv("paynotify") + ["-At"], input=sql.encode(),
                           env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode()
        self.assertIn("ingested applied", out)
        before, after = out.split("\n1\n", 1)
        return before, after

    def test_notify_setting(self):
        # the payment transaction itself never notifies (no commit waits on
        # the NOTIFY queue lock); its wake-up payload is sent afterwards
        for setting in (None, "on"):
            before, after = self._ingest_listening(setting)
            self.assertIn("ingested applied t", before)
            self.assertNotIn("Asynchronous notification", before)
            self.assertIn('Asynchronous notification "paynotify"', after)
        # paynotify.notify = off: stored and applied, no wake-up
        before, after = self._ingest_listening("off")
        self.assertIn("ingested applied f", before)
        self.assertNotIn("Asynchronous notification", before + after)
        self.assertEqual(self.pg.scalar("SELECT status FROM paynotify.orders "
                                        "WHERE order_id = 'NTF-off'"), "paid")

    def test_socket_only(self):
        self.assertEqual(self.pg.scalar("SHOW listen_addresses"), "")
        self.assertEqual(self.pg.scalar("SHOW unix_socket_directories"), self.pg.base)
        self.assertEqual(self.pg.scalar("SHOW fsync"), "off")
        self.assertTrue(os.path.exists(os.path.join(self.pg.base, ".s.PGSQL.%d" % self.pg.port)))

    def test_psql_rows_and_nulls(self):
        rows = self.pg.psql("SELECT 'a|b', NULL::text, 3 UNION ALL SELECT 'x\ny', '', 4")
        self.assertEqual(rows, [("a|b", None, "3"), ("x\ny", "", "4")])
        self.assertEqual(self.pg.psql("SELECT 1 WHERE false"), [])

    def test_orders_and_ingest(self):
        self.pg.reset()
        self.pg.add_order("shop-a", "H-1", 1999, "USD")
        self.assertEqual(self.pg.order("shop-a", "H-1")["status"], "pending")
        # the schema's own ingest, as the receivers call it
        sql = ("SELECT outcome, duplicate, deliveries, order_status FROM paynotify.ingest("
               "'shop-a','stripe','evt_h1','paid','checkout.session.completed','H-1','pi_1',"
               "'evt_h1',1999,'USD',NULL,false,NULL,'k',NULL,NULL,'{}','\\x7b7d')")
        self.assertEqual(self.pg.psql(sql), [("applied", "f", "1", "paid")])
        # a duplicate: counted; the order is not read (order_status NULL)
        self.assertEqual(self.pg.psql(sql), [("applied", "t", "2", None)])
        n = self.pg.notifications()
        self.assertEqual(len(n), 1)
        self.assertEqual((n[0]["deliveries"], n[0]["raw_body"]), (2, b"{}"))
        self.pg.reset()
        self.assertEqual(self.pg.notifications(), [])

    def test_stop_and_restart(self):
        self.pg.add_order("shop-b", "H-2", 5, "JPY")
        self.pg.stop()
        self.assertFalse(os.path.exists(os.path.join(self.pg.base, ".s.PGSQL.%d" % self.pg.port)))
        with self.assertRaises(RuntimeError):
            self.pg.psql("SELECT 1")
        self.pg.start()
        self.assertEqual(self.pg.order("shop-b", "H-2")["amount_minor"], 5)

    def test_config_files(self):
        cfg = pntest.write_config(self.pg)
        with open(cfg.path) as f:
            text = f.read()
        self.assertIn("conninfo = host=%s " % self.pg.base, text)
        self.assertIn("[site shop-a]", text)
        self.assertIn("[site shop-b]", text)
        for name in os.listdir(os.path.join(cfg.dir, "secrets")):
            mode = os.stat(os.path.join(cfg.dir, "secrets", name)).st_mode & 0o777
            self.assertEqual(mode, 0o600)


if __name__ == "__main__":
    unittest.main()

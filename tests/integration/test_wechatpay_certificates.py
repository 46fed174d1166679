# test_wechatpay_certificates.py: `paynotify wechatpay-certificates --fetch`
# (docs/WECHATPAY.md "Platform certificates") against the loopback WeChat Pay
# stand-in's GET /v3/certificates (tests/lib/psp_standins.py: the request's
# WECHATPAY2-SHA256-RSA2048 Authorization checked with the merchant's test
# key, each certificate sealed with the APIv3 key, AEAD_AES_256_GCM with
# associated_data "certificate", the answer signed with a platform key):
#   - a site in certificate mode trusting certificate A: the answer (signed
#     with A) lists A and B: both written into wechatpay.platform_cert_dir as
#     wechatpay-platform-<serial>.pem, atomically, with the mode of the site's
#     other certificate file; a second run leaves them unchanged; --dry-run
#     writes nothing
#   - refused, nothing written (exit 1): a ciphertext whose GCM tag fails, an
#     answer altered after signing, an answer signed by the (untrusted, new)
#     certificate it delivers, a certificate whose serial is not its
#     serial_no
#   - an expired certificate is listed and not written; an expired
#     wechatpay-platform-*.pem of the directory is removed
#   - bootstrapping with the WeChat Pay public key (public key configured, the
#     directory empty); a site in public-key mode only: said, exit 0, nothing
#     asked; a site without the directory: 78
#   - the real receiver (FastCGI) refuses a notification signed with B until
#     the fetch and a reload (SIGHUP), then applies it

import datetime
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402
import pnkit  # noqa: E402
import psp_standins  # noqa: E402

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
MERCHANT_PRIV = os.path.join(KEYS, "test-b.key.pem")
MERCHANT_SERIAL = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
SITE = "shop-c"
PG = None
SI = None
NOW = datetime.datetime.now(datetime.timezone.utc)


def platform_cert(days_before=30, days_after=365):
    """A WeChat Pay platform certificate stand-in: (pem bytes, SERIAL, key, not_before,
    not_after)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tenpay.com sign"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tenpay.com")])
    nb = NOW - datetime.timedelta(days=days_before)
    na = NOW + datetime.timedelta(days=days_after)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(nb).not_valid_after(na).sign(key, hashes.SHA256()))
    serial = "%X" % cert.serial_number
    if len(serial) % 2:
        serial = "0" + serial       # as the serial's bytes in hex (cert_serial_hex)
    return (cert.public_bytes(serialization.Encoding.PEM), serial, key, nb, na)


def setUpModule():
    global PG, SI, A, B
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=pnkit.KEY_PRIV,
        wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem"),
        merchant_pub=os.path.join(KEYS, "test-b.pub.pem"), app_id=pnkit.ALIPAY_APP_ID,
        mchid=pnkit.WX_MCHID, merchant_serial=MERCHANT_SERIAL, wx_pubid=pnkit.WX_PUBID,
        stripe_key="rk_test_unused", twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY, wx_apiv3=pnkit.WX_APIV3)
    A = platform_cert()
    B = platform_cert(days_before=1)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def write_config(mode="certificate", with_dir=True):
    """A config with one WeChat Pay API v3 site: mode certificate (trusts A, in
    the platform directory as the operator's first file), migration (the public
    key, the directory empty) or public-key (the public key only)."""
    d = tempfile.mkdtemp(prefix="pntest-wxcerts.")
    pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    os.chmod(d, 0o755)
    plat = os.path.join(d, "platform")
    os.mkdir(plat, 0o755)
    shutil.copyfile(pnkit.KEY_PUB, os.path.join(d, "public.pem"))
    shutil.copyfile(MERCHANT_PRIV, os.path.join(d, "merchant-api.key"))
    os.chmod(os.path.join(d, "merchant-api.key"), 0o600)
    pntest.write_secret(os.path.join(d, "apiv3.key"), pnkit.WX_APIV3 + "\n")
    if mode == "certificate":
        with open(os.path.join(plat, "first.pem"), "wb") as f:
            f.write(A[0])
        os.chmod(os.path.join(plat, "first.pem"), 0o640)
    lines = ["[database]", "conninfo = %s" % PG.conninfo(), "statement_timeout_ms = 3000", "",
             "[query]", "ca_file = %s" % SI.ca_file, "connect_timeout_ms = 1000",
             "timeout_ms = 3000", "",
             "[site %s]" % SITE,
             "wechatpay.mchid = %s" % pnkit.WX_MCHID, "wechatpay.appid = %s" % pnkit.WX_APPID,
             "wechatpay.apiv3_key_file = apiv3.key",
             "wechatpay.query_private_key_file = merchant-api.key",
             "wechatpay.query_cert_serial = %s" % MERCHANT_SERIAL,
             "wechatpay.query_url = %s" % SI.url]
    if with_dir and mode != "public-key":
        lines.append("wechatpay.platform_cert_dir = platform")
    if mode != "certificate":
        lines += ["wechatpay.public_key_id = %s" % pnkit.WX_PUBID,
                  "wechatpay.public_key_file = public.pem"]
    if mode == "certificate" and not with_dir:
        lines.append("wechatpay.platform_cert_files = platform/first.pem")
    path = os.path.join(d, "paynotify.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, plat


def fetch(cfg, *args):
    p = subprocess.run([ADMIN, "-c", cfg, "wechatpay-certificates", "--fetch", "--format",
                        "json"] + list(args), env=pntest.clean_env(), capture_output=True,
                       text=True, timeout=60)
    rows = json.loads(p.stdout) if p.stdout.strip().startswith("[") else []
    return p.returncode, rows, p.stderr


def certs_of(cert):
    return [(cert[0], cert[1], cert[3], cert[4])]


class Fetch(unittest.TestCase):
    def setUp(self):
        SI.reset()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def listing(self, plat):
        return sorted(os.listdir(plat))

    def test_writes_verified_certificates(self):
        cfg, plat = write_config()
        SI.set_wx_platform(certs_of(A) + certs_of(B), sign_key=A[2], sign_serial=A[1])
        rc, rows, err = fetch(cfg, "--dry-run")
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["would_write"] * 2), (rows, err))
        self.assertEqual(self.listing(plat), ["first.pem"])
        rc, rows, err = fetch(cfg)
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["serial_no"], r["result"]) for r in rows],
                         [(A[1], "written"), (B[1], "written")], rows)
        self.assertIn("reload", err)
        for c in (A, B):
            path = os.path.join(plat, "wechatpay-platform-%s.pem" % c[1])
            with open(path, "rb") as f:
                self.assertEqual(f.read(), c[0])
            st = os.stat(path)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o640, "the mode of first.pem")
        self.assertEqual(len(self.listing(plat)), 3, "no temporary file left")
        self.assertEqual(SI.requests, [("wechatpay", "/v3/certificates")] * 2)
        rc, rows, err = fetch(cfg)
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["unchanged"] * 2), (rows, err))
        # the configuration loads them: check-config lists the new serial
        p = subprocess.run([ADMIN, "-c", cfg, "check-config"], env=pntest.clean_env(),
                           capture_output=True, text=True, timeout=60)
        self.assertIn(B[1].lower()[:8], (p.stdout + p.stderr).lower(), p.stdout + p.stderr)

    def refused(self, cfg, plat, word):
        before = self.listing(plat)
        rc, rows, err = fetch(cfg)
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(rows[-1]["result"], "refused", rows)
        self.assertIn(word, rows[-1]["detail"])
        self.assertIn("nothing written", rows[-1]["detail"])
        self.assertEqual(self.listing(plat), before)

    def test_tampered_ciphertext_refused(self):
        cfg, plat = write_config()
        SI.set_wx_platform(certs_of(B), sign_key=A[2], sign_serial=A[1])
        SI.mode = "bad_tag"
        self.refused(cfg, plat, "tag mismatch")

    def test_altered_answer_refused(self):
        cfg, plat = write_config()
        SI.set_wx_platform(certs_of(B), sign_key=A[2], sign_serial=A[1])
        SI.mode = "tamper"
        self.refused(cfg, plat, "refused")

    def test_answer_signed_by_the_new_certificate_itself_refused(self):
        # B is never trusted on its own word: only A (or the public key) may sign
        cfg, plat = write_config()
        SI.set_wx_platform(certs_of(B), sign_key=B[2], sign_serial=B[1])
        self.refused(cfg, plat, B[1])

    def test_serial_not_the_certificates_refused(self):
        cfg, plat = write_config()
        SI.set_wx_platform([(B[0], A[1], B[3], B[4])], sign_key=A[2], sign_serial=A[1])
        self.refused(cfg, plat, "is not the entry's serial_no")

    def test_expired_not_written_and_removed(self):
        old = platform_cert(days_before=400, days_after=-1)
        cfg, plat = write_config()
        stale = os.path.join(plat, "wechatpay-platform-%s.pem" % old[1])
        with open(stale, "wb") as f:
            f.write(old[0])
        other = platform_cert(days_before=400, days_after=-1)
        SI.set_wx_platform(certs_of(A) + certs_of(other), sign_key=A[2], sign_serial=A[1])
        rc, rows, err = fetch(cfg)
        self.assertEqual(rc, 0, (rows, err))
        got = {r["serial_no"]: r["result"] for r in rows}
        self.assertEqual(got, {A[1]: "written", other[1]: "expired", old[1]: "removed"}, rows)
        self.assertEqual(self.listing(plat), ["first.pem", "wechatpay-platform-%s.pem" % A[1]])

    def test_bootstrap_with_the_public_key(self):
        cfg, plat = write_config("migration")
        SI.set_wx_platform(certs_of(B))       # signed with the WeChat Pay public key's pair
        rc, rows, err = fetch(cfg)
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["written"]), (rows, err))
        self.assertEqual(self.listing(plat), ["wechatpay-platform-%s.pem" % B[1]])

    def test_public_key_mode_says_so(self):
        cfg, plat = write_config("public-key")
        rc, rows, err = fetch(cfg, "--site", SITE)
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[0]["result"], "skipped", rows)
        self.assertIn("public-key mode", rows[0]["detail"])
        self.assertEqual(SI.requests, [])

    def test_no_directory_is_a_configuration_error(self):
        cfg, plat = write_config(with_dir=False)
        rc, rows, err = fetch(cfg, "--site", SITE)
        self.assertEqual(rc, 78, (rows, err))
        self.assertIn("wechatpay.platform_cert_dir", rows[0]["detail"])
        rc, rows, err = fetch(cfg)           # every site: skipped, said
        self.assertEqual((rc, rows[0]["result"]), (0, "skipped"), (rows, err))
        self.assertEqual(SI.requests, [])

    def test_usage(self):
        cfg, plat = write_config()
        p = subprocess.run([ADMIN, "-c", cfg, "wechatpay-certificates"], env=pntest.clean_env(),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 64, p.stderr)
        self.assertIn("--fetch is required", p.stderr)
        rc, rows, err = fetch(cfg, "--site", "nosuch")
        self.assertEqual(rc, 64, err)


class ReceiverAfterReload(unittest.TestCase):
    def setUp(self):
        SI.reset()
        PG.reset()

    def notification(self, oid, key, serial):
        res = json.dumps(pnkit.wechat_transaction(oid, 6600), separators=(",", ":"))
        nonce = "n%011d" % (int(time.time() * 1000) % 10**11)
        ct = pnsign.wechat_v3_encrypt(pnkit.WX_APIV3, nonce, res, "transaction")
        body = pnsign.wechat_v3_envelope(ct, nonce, "TRANSACTION.SUCCESS", "EV-" + pnkit.seq(),
                                         "transaction", summary="ok")
        return pnsign.wechat_v3_headers(body, key, serial, None, "N" + pnkit.seq()), body

    def test_receiver_verifies_with_the_fetched_certificate_after_reload(self):
        cfg, plat = write_config()
        oid = "WC-" + pnkit.seq()
        PG.add_order(SITE, oid, 6600, "CNY")
        rcv = pnkit.Receiver("wechatpay", cfg, workers=1).start()
        try:
            path = pnkit.path("wechatpay", SITE)
            h, b = self.notification(oid, B[2], B[1])
            r = rcv.request("POST", path, h, b)
            self.assertFalse(pnkit.is_success("wechatpay", r), (r.status, r.body))
            self.assertEqual(PG.order(SITE, oid)["status"], "pending")
            SI.set_wx_platform(certs_of(A) + certs_of(B), sign_key=A[2], sign_serial=A[1])
            rc, rows, err = fetch(cfg)
            self.assertEqual(rc, 0, (rows, err))
            os.kill(rcv.proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + pntest.patience(30)
            while "reloaded" not in rcv.log_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertIn("reloaded", rcv.log_text())
            time.sleep(0.5)     # the workers replaced
            h, b = self.notification(oid, B[2], B[1])
            r = rcv.request("POST", path, h, b)
            self.assertTrue(pnkit.is_success("wechatpay", r), (r.status, r.body, rcv.log_text()))
            self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        finally:
            rcv.stop()


if __name__ == "__main__":
    unittest.main()

# test_receiver_symbols.py: a receiver cannot sign (issue 14, item 2).
#   - none of the four built receivers links an RSA signing or an
#     encryption function of OpenSSL (EVP_DigestSign*, EVP_PKEY_sign*,
#     EVP_SignFinal, EVP_Encrypt*, EVP_Seal*), our own (pn_rsa_sign,
#     pn_aes256*_encrypt) or a test signer (pn_sign_*, pn_signer_find, the
#     old per-adapter *_sign hooks and sign_v2/v3/v4/redirect): `nm` on the
#     binary lists every function it defines and every one it imports
#   - the same check finds them in `paynotify` (the admin command signs
#     test notifications and API requests), so it is able to fail
#   - each receiver does link what verifying needs (pn_rsa_verify or
#     pn_hmac, EVP_DecryptInit_ex for WeChat Pay), so an empty or stripped
#     symbol table cannot pass for a clean one
# The receivers do not load a site's test private key either (PN_CFG_RECEIVER:
# they check its file's mode only); they hold no code that could use one.

import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

PROVIDERS = ("alipay", "wechatpay", "stripe", "2c2p")
NM = shutil.which("nm") or "/usr/bin/nm"

FORBIDDEN = re.compile(
    r"^(EVP_DigestSign\w*|EVP_PKEY_sign\w*|EVP_SignFinal\w*|EVP_Encrypt\w+|EVP_Seal\w+"
    r"|pn_rsa_sign|pn_aes256\w*_encrypt|pn_sign_\w+|pn_signer_find"
    r"|(alipay|stripe|wechatpay|twoc2p)_sign|sign_(v2|v3|v4|redirect))$")

NEEDED = {
    "alipay": ("pn_rsa_verify",),
    "stripe": ("pn_hmac",),
    "2c2p": ("pn_hmac",),
    "wechatpay": ("pn_rsa_verify", "pn_hmac", "EVP_DecryptInit_ex"),
}


def symbols(path):
    """Names nm lists for path (defined and undefined), versions cut."""
    p = subprocess.run([NM, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode != 0:
        raise AssertionError("nm %s failed: %s" % (path, p.stderr.decode()))
    names = set()
    for line in p.stdout.decode().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            names.add(parts[-1].split("@")[0])
    return names


def admin_binary():
    return os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")


class ReceiverSymbols(unittest.TestCase):
    def test_receivers_cannot_sign_or_encrypt(self):
        for provider in PROVIDERS:
            with self.subTest(provider=provider):
                names = symbols(pntest.binary(provider))
                bad = sorted(n for n in names if FORBIDDEN.match(n))
                self.assertEqual(bad, [], "paynotify-%s links signing code" % provider)

    def test_receivers_link_what_verifying_needs(self):
        for provider in PROVIDERS:
            with self.subTest(provider=provider):
                names = symbols(pntest.binary(provider))
                for need in NEEDED[provider]:
                    self.assertIn(need, names, "paynotify-%s" % provider)

    def test_the_check_finds_signing_in_the_admin_command(self):
        names = symbols(admin_binary())
        found = {n for n in names if FORBIDDEN.match(n)}
        for want in ("pn_rsa_sign", "pn_aes256gcm_encrypt", "pn_aes256ecb_encrypt",
                     "pn_signer_find", "pn_sign_alipay", "pn_sign_stripe", "pn_sign_2c2p",
                     "pn_sign_wechatpay", "EVP_DigestSign", "EVP_EncryptInit_ex"):
            self.assertIn(want, found)


if __name__ == "__main__":
    unittest.main()

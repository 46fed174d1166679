"""pnsign: every provider's signing, written once, for the tests, the
fixture generator (tests/fixtures/gen-unit-fixtures.py), the loopback
stand-ins (psp_standins.py) and the benchmark (bench/).  Python 3 stdlib
plus python3-cryptography (RSA and AES); nothing here talks to anything.

  Stripe      stripe_signature(), stripe_header()      t=<t>,v1=<HMAC-SHA256 hex>
  Alipay      alipay_content(), alipay_sign(), alipay_body()
              RSA2 (SHA256withRSA) / RSA (SHA1withRSA) over the sorted k=v
  WeChat v3   wechat_v3_message(), wechat_v3_sign(), wechat_v3_headers(),
              wechat_v3_encrypt() (AEAD_AES_256_GCM resource), wechat_v3_envelope(),
              wechat_v3_request_message() (the merchant's Authorization text)
  WeChat v2   wechat_v2_sign() (MD5 / HMAC-SHA256, upper-case hex),
              wechat_v2_xml(), wechat_v2_seal()/wechat_v2_open() (refund
              req_info: AES-256-ECB under hex(md5(APIv2 key)), PKCS#7)
  2C2P        jwt_hs256() (PGW v4 JWT), jwt_body(), legacy_content() and
              legacy_hash() (Redirect API: HMAC over the 31 fields in order)
  RSA         rsa_sign(), rsa_sign_b64(), rsa_verify(), load_private(), load_public()

Keys are PEM file paths, PEM text or loaded key objects.  RSASSA-PKCS1-v1_5
is deterministic, so a signature made here is byte-identical to the openssl
CLI's (the fixtures depend on it).
"""

import base64
import hashlib
import hmac
import json
import os
import time
import urllib.parse

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives import padding as sympad
    from cryptography.hazmat.primitives.asymmetric import padding as asympad
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:     # pragma: no cover (tests that need it skip on AESGCM is None)
    AESGCM = None

HS256_HEADER = b'{"alg":"HS256","typ":"JWT"}'
WECHAT_V3_SIGN_TYPE = "WECHATPAY2-SHA256-RSA2048"
STRIPE_CONTENT_TYPE = "application/json; charset=utf-8"
ALIPAY_CONTENT_TYPE = "application/x-www-form-urlencoded; text/html; charset=utf-8"


def _bytes(x):
    return x.encode("utf-8") if isinstance(x, str) else x


def _pairs(params):
    return list(params.items()) if isinstance(params, dict) else list(params)


def b64(raw):
    return base64.b64encode(raw).decode("ascii")


def b64u(raw):
    """base64url without padding (JWT segments)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64u_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ---------------------------------------------------------------------------
# RSA (RSASSA-PKCS1-v1_5)

_keys = {}


def load_private(key):
    """A private key from a PEM path, PEM text/bytes or a key object (cached;
    a file by path, modification time and size, so a rewritten file is read
    again)."""
    if not isinstance(key, (str, bytes)):
        return key
    pem = _bytes(key)
    cache = key
    if b"-----BEGIN" not in pem:
        st = os.stat(key)
        cache = (key, st.st_mtime_ns, st.st_size)
        if cache not in _keys:
            with open(key, "rb") as f:
                pem = f.read()
    if cache not in _keys:
        _keys[cache] = serialization.load_pem_private_key(pem, password=None)
    return _keys[cache]


def load_public(key):
    if not isinstance(key, (str, bytes)):
        return key
    pem = _bytes(key)
    if b"-----BEGIN" not in pem:
        with open(key, "rb") as f:
            pem = f.read()
    return serialization.load_pem_public_key(pem)


_MD = {"sha256": lambda: hashes.SHA256(), "sha1": lambda: hashes.SHA1()}


def rsa_sign(content, private_key, md="sha256"):
    """RSASSA-PKCS1-v1_5 over content (raw signature bytes); md sha256 or sha1
    (a leading '-' as in openssl's -sha256 is accepted)."""
    return load_private(private_key).sign(_bytes(content), asympad.PKCS1v15(),
                                          _MD[md.lstrip("-")]())


def rsa_sign_b64(content, private_key, md="sha256"):
    return b64(rsa_sign(content, private_key, md))


def rsa_verify(public_key, sig_b64, content, md="sha256"):
    """True if sig_b64 (standard base64) is a valid signature over content."""
    try:
        load_public(public_key).verify(base64.b64decode(sig_b64, validate=True), _bytes(content),
                                       asympad.PKCS1v15(), _MD[md.lstrip("-")]())
        return True
    except Exception:       # noqa: BLE001 (any failure is "does not verify")
        return False


# ---------------------------------------------------------------------------
# Stripe

def stripe_signature(secret, t, body):
    """hex HMAC-SHA256(secret, "<t>.<body>")."""
    return hmac.new(_bytes(secret), str(t).encode("ascii") + b"." + _bytes(body),
                    hashlib.sha256).hexdigest()


def stripe_header(secret, t, body):
    """A Stripe-Signature header value: t=<t>,v1=<hex hmac-sha256>."""
    return "t=%s,v1=%s" % (t, stripe_signature(secret, t, body))


# ---------------------------------------------------------------------------
# Alipay

def alipay_content(params, keep_sign_type=False, keep_empty=False):
    """The signed content: sorted k=v of the decoded values joined by '&',
    without sign, sign_type (unless keep_sign_type: the open-platform rule
    V2, and alipay-sdk-nodejs) and empty values (unless keep_empty).  Pairs
    or a dict, str (UTF-8) or bytes (any charset); duplicate keys kept in
    the order given."""
    drop = ("sign",) if keep_sign_type else ("sign", "sign_type")
    items = [(_bytes(k), _bytes(v)) for k, v in _pairs(params)
             if _bytes(k).decode("latin-1") not in drop and v is not None
             and (keep_empty or v not in ("", b""))]
    items.sort(key=lambda kv: kv[0])
    return b"&".join(k + b"=" + v for k, v in items)


def alipay_sign(params, private_key, sign_type="RSA2", **content_opts):
    """base64 sign over alipay_content(params) (RSA2: SHA256withRSA, RSA: SHA1withRSA)."""
    md = {"RSA2": "sha256", "RSA": "sha1"}[sign_type]
    return rsa_sign_b64(alipay_content(params, **content_opts), private_key, md)


def alipay_body(params, private_key, sign_type="RSA2"):
    """A signed, form-urlencoded Alipay notification body (bytes): params
    without sign/sign_type, then sign_type (unless None), then sign."""
    p = [(k, v) for k, v in _pairs(params) if k not in ("sign", "sign_type")]
    if sign_type:
        p.append(("sign_type", sign_type))
    p.append(("sign", alipay_sign(p, private_key, sign_type or "RSA2")))
    return urllib.parse.urlencode(p, encoding="utf-8").encode("ascii")


# ---------------------------------------------------------------------------
# WeChat Pay API v3

def wechat_v3_message(ts, nonce, body):
    """What a v3 notification's (or answer's) Wechatpay-Signature covers."""
    return ("%s\n%s\n" % (ts, nonce)).encode() + _bytes(body) + b"\n"


def wechat_v3_request_message(method, url, ts, nonce, body):
    """What the merchant's WECHATPAY2-SHA256-RSA2048 Authorization covers."""
    return ("%s\n%s\n%s\n%s\n" % (method, url, ts, nonce)).encode() + _bytes(body) + b"\n"


def wechat_v3_sign(private_key, ts, nonce, body):
    """base64 SHA256withRSA over wechat_v3_message()."""
    return rsa_sign_b64(wechat_v3_message(ts, nonce, body), private_key)


def wechat_v3_headers(body, private_key, serial, ts=None, nonce="N", sig=None,
                      content_type="application/json"):
    """The Wechatpay-* headers of a notification with this exact body (ts
    defaults to now; sig given: sent as is instead of signing)."""
    ts = str(int(time.time())) if ts is None else str(ts)
    if sig is None:
        sig = wechat_v3_sign(private_key, ts, nonce, body)
    return {"Content-Type": content_type, "Wechatpay-Timestamp": ts, "Wechatpay-Nonce": nonce,
            "Wechatpay-Serial": serial, "Wechatpay-Signature": sig,
            "Wechatpay-Signature-Type": WECHAT_V3_SIGN_TYPE}


def wechat_v3_encrypt(apiv3_key, nonce, plaintext, aad="transaction", raw=False):
    """AEAD_AES_256_GCM of the resource: base64(ciphertext || tag), or the
    raw bytes with raw=True."""
    ct = AESGCM(_bytes(apiv3_key)).encrypt(_bytes(nonce), _bytes(plaintext), _bytes(aad))
    return ct if raw else b64(ct)


def wechat_v3_envelope(ciphertext, nonce, event="TRANSACTION.SUCCESS", eid="EV-1",
                       aad="transaction", summary="支付成功", original=None,
                       algorithm="AEAD_AES_256_GCM", create_time="2024-05-20T10:00:06+08:00",
                       ensure_ascii=False, resource_order=("original_type", "algorithm",
                                                           "ciphertext", "associated_data",
                                                           "nonce")):
    """The notification body (compact JSON bytes) around an encrypted resource;
    aad None leaves associated_data out; original_type defaults to aad."""
    if original is None:
        original = "transaction" if aad is None else aad
    values = {"original_type": original, "algorithm": algorithm,
              "ciphertext": ciphertext, "associated_data": aad, "nonce": nonce}
    res = {k: values[k] for k in resource_order if not (k == "associated_data" and aad is None)}
    env = {"id": eid, "create_time": create_time, "resource_type": "encrypt-resource",
           "event_type": event, "summary": summary, "resource": res}
    return json.dumps(env, ensure_ascii=ensure_ascii, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------
# WeChat Pay API v2

def wechat_v2_sign(fields, key, alg="MD5"):
    """WXPayUtil.generateSignature: sorted non-empty k=v (values trimmed),
    "&key=<APIv2 key>", MD5 or HMAC-SHA256 (any alg but MD5), upper-case hex."""
    s = "&".join("%s=%s" % (k, v.strip()) for k, v in sorted(_pairs(fields))
                 if k != "sign" and v.strip() != "") + "&key=" + key
    if alg == "MD5":
        return hashlib.md5(s.encode()).hexdigest().upper()
    return hmac.new(key.encode(), s.encode(), hashlib.sha256).hexdigest().upper()


def wechat_v2_xml(fields, root="xml", cdata_digits=False):
    """<xml><k>v</k>...</xml>: text in CDATA, digits bare (unless cdata_digits)."""
    return ("<%s>%s</%s>" % (root, "".join(
        "<%s>%s</%s>" % (k, v if v.isdigit() and not cdata_digits else "<![CDATA[%s]]>" % v, k)
        for k, v in _pairs(fields)), root)).encode()


def wechat_v2_signed_xml(fields, key, alg="MD5"):
    """fields (without sign) + sign, as v2 XML."""
    f = [(k, v) for k, v in _pairs(fields) if k != "sign"]
    return wechat_v2_xml(f + [("sign", wechat_v2_sign(f, key, alg))])


def wechat_v2_ecb_key(key):
    """The refund AES-256-ECB key: the 32 hex characters of md5(APIv2 key)."""
    return hashlib.md5(key.encode()).hexdigest().encode()


def _ecb(key):
    return Cipher(algorithms.AES(wechat_v2_ecb_key(key)), modes.ECB())


def wechat_v2_seal(plain, key):
    """A refund notification's req_info: base64(AES-256-ECB(plain, hex(md5(key))), PKCS#7)."""
    p = sympad.PKCS7(128).padder()
    e = _ecb(key).encryptor()
    return b64(e.update(p.update(_bytes(plain)) + p.finalize()) + e.finalize())


def wechat_v2_open(req_info, key):
    d = _ecb(key).decryptor()
    raw = d.update(base64.b64decode(req_info)) + d.finalize()
    u = sympad.PKCS7(128).unpadder()
    return u.update(raw) + u.finalize()


# ---------------------------------------------------------------------------
# 2C2P

def jwt_hs256(key, payload, header=HS256_HEADER, digest=hashlib.sha256):
    """header.payload.signature with HMAC (SHA-256 unless told) under key as
    text; digest None: an empty signature (alg none)."""
    signed = b64u(_bytes(header)) + "." + b64u(_bytes(payload))
    if digest is None:
        return signed + "."
    return signed + "." + b64u(hmac.new(_bytes(key), signed.encode(), digest).digest())


def jwt_check_hs256(key, token):
    """The payload bytes of a genuine HS256 token, or None."""
    try:
        head, pay, sig = token.split(".")
        good = hmac.compare_digest(b64u_decode(sig), hmac.new(
            _bytes(key), (head + "." + pay).encode(), hashlib.sha256).digest())
        if good and json.loads(b64u_decode(head)).get("alg") == "HS256":
            return b64u_decode(pay)
    except (ValueError, AttributeError):
        pass
    return None


def jwt_body(token, compact=True):
    """The notification body {"payload": token}."""
    return json.dumps({"payload": token}, separators=(",", ":") if compact else None).encode()


# The Redirect API's signed fields, in the order they are concatenated.
LEGACY_FIELDS = ["version", "request_timestamp", "merchant_id", "order_id", "invoice_no",
                 "currency", "amount", "transaction_ref", "approval_code", "eci",
                 "transaction_datetime", "payment_channel", "payment_status",
                 "channel_response_code", "channel_response_desc", "masked_pan",
                 "stored_card_unique_id", "backend_invoice", "paid_channel", "paid_agent",
                 "recurring_unique_id", "user_defined_1", "user_defined_2", "user_defined_3",
                 "user_defined_4", "user_defined_5", "browser_info", "ippPeriod",
                 "ippInterestType", "ippInterestRate", "ippMerchantAbsorbRate"]


def legacy_content(pairs):
    """The values of the present LEGACY_FIELDS, concatenated in that order."""
    d = dict(_pairs(pairs))
    return "".join(d[k] for k in LEGACY_FIELDS if k in d).encode()


def legacy_hash(pairs, key, digest=hashlib.sha1):
    """hash_value: hex HMAC (SHA-1 unless told) of legacy_content()."""
    return hmac.new(_bytes(key), legacy_content(pairs), digest).hexdigest()


def legacy_body(pairs, key, digest=hashlib.sha1, hash_value=None):
    """The form body: pairs + hash_value (given, or computed)."""
    hv = hash_value if hash_value is not None else legacy_hash(pairs, key, digest)
    return urllib.parse.urlencode(_pairs(pairs) + [("hash_value", hv)]).encode()

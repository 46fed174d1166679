"""pnkit: helpers for the reliability, hostile-input and memory tests (on top
of pntest; Python 3 stdlib, plus python3-cryptography through pnsign).

  write_all_config  one site (shop-x) with all four providers configured and
                    known test secrets (SECRETS lists every secret's text)
  sign_*            signed notifications for all four providers, as bytes
                    (the signing itself is pnsign's)
  KITS              one paid notification per provider and API (the order's
                    amount and currency, paid(oid)), for the scenarios run
                    for every provider; duplicate_lanes() delivers N copies
                    of each at once
  Receiver          a receiver with its own supervisor: --listen unix:... --workers N;
                    worker pids, log text, clean stop (SIGTERM, then SIGKILL)
  FcgiConn          a persistent FastCGI connection (FCGI_KEEP_CONN): many
                    requests, one socket; fast enough for 100,000 requests
  PgListener        pntest.Listener: LISTEN on a channel (psycopg2), the
                    payloads received
  Providers         per provider: path, success check, failure check
"""

import collections
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import pntest

import pnsign

AESGCM = pnsign.AESGCM      # None without python3-cryptography (tests skip)

SITE = "shop-x"
UNIT_KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
KEY_PRIV = os.path.join(UNIT_KEYS, "test-a.key.pem")
KEY_PUB = os.path.join(UNIT_KEYS, "test-a.pub.pem")
ALIPAY_APP_ID = "2021000000000009"
ALIPAY_SELLER_ID = "2088000000000009"
STRIPE_SECRET = "whsec_reliability_K9v2xQ7mR4tL8pW3"
TWOC2P_MERCHANT = "JT01"
TWOC2P_KEY = "5EC0B1A7D2E94F6A8B3C7D1E0F9A2B4C6D8E0F1A3B5C7D9E1F3A5B7C9D1E3F5A"
WX_MCHID = "1900000109"
WX_APPID = "wxd678efh567hg6787"
WX_APIV3 = "RelAPIv3Key0123456789abcdefWXYZ0"
WX_APIV2 = "RelAPIv2Key0123456789abcdefWXYZ0"
WX_PUBID = "PUB_KEY_ID_0000000000000024101100397200000006"
SECRETS = (STRIPE_SECRET, TWOC2P_KEY, WX_APIV3, WX_APIV2)

Config = collections.namedtuple("Config", ["path", "dir"])


def write_all_config(cluster, statement_timeout_ms=3000, max_body_bytes=65536, conninfo=None,
                     log_level=None, prepared_statements=None):
    """A config with site shop-x configured for every provider
    (prepared_statements: [database] prepared_statements, True/False, or
    the default when None)."""
    d = tempfile.mkdtemp(prefix="pnkit-cfg.")
    pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    os.chmod(d, 0o755)
    shutil.copyfile(KEY_PUB, os.path.join(d, "public.pem"))
    pntest.write_secret(os.path.join(d, "stripe-whsec"), STRIPE_SECRET + "\n")
    pntest.write_secret(os.path.join(d, "2c2p.key"), TWOC2P_KEY + "\n")
    pntest.write_secret(os.path.join(d, "apiv3.key"), WX_APIV3 + "\n")
    pntest.write_secret(os.path.join(d, "apiv2.key"), WX_APIV2 + "\n")
    lines = [
        "[database]",
        "conninfo = %s" % (conninfo or cluster.conninfo()),
        "statement_timeout_ms = %d" % statement_timeout_ms,
        "connect_timeout_s = 2",
    ]
    if prepared_statements is not None:
        lines += ["prepared_statements = %s" % ("on" if prepared_statements else "off")]
    lines += [
        "",
        "[limits]",
        "max_body_bytes = %d" % max_body_bytes,
        "",
    ]
    if log_level:
        lines += ["[log]", "level = %s" % log_level, ""]
    lines += [
        "[site %s]" % SITE,
        "alipay.app_id = %s" % ALIPAY_APP_ID,
        "alipay.seller_id = %s" % ALIPAY_SELLER_ID,
        "alipay.public_key_file = public.pem",
        "alipay.sign_type = RSA2",
        "stripe.secret_files = stripe-whsec",
        "2c2p.merchant_id = %s" % TWOC2P_MERCHANT,
        "2c2p.secret_key_file = 2c2p.key",
        "wechatpay.mchid = %s" % WX_MCHID,
        "wechatpay.appid = %s" % WX_APPID,
        "wechatpay.apiv3_key_file = apiv3.key",
        "wechatpay.apiv2_key_file = apiv2.key",
        "wechatpay.public_key_id = %s" % WX_PUBID,
        "wechatpay.public_key_file = public.pem",
        "",
    ]
    path = os.path.join(d, "paynotify.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return Config(path, d)


# ---------------------------------------------------------------------------
# Signers: each returns (headers dict, body bytes)

_seq = [0]


def seq():
    _seq[0] += 1
    return "%d%06d" % (os.getpid(), _seq[0])


def sign_stripe(body, t=None, secret=STRIPE_SECRET):
    if isinstance(body, str):
        body = body.encode("utf-8")
    t = int(time.time()) if t is None else t
    return ({"Content-Type": pnsign.STRIPE_CONTENT_TYPE,
             "Stripe-Signature": pnsign.stripe_header(secret, t, body)}, body)


def stripe_paid(oid, amount_minor, currency="usd", event_id=None, payment_intent=None):
    """A signed checkout.session.completed; one PaymentIntent per order unless
    told otherwise (a second PaymentIntent for a paid order is a
    duplicate_payment)."""
    return sign_stripe(pntest.stripe_checkout_completed(
        oid, amount_minor, currency, event_id=event_id,
        payment_intent=payment_intent or "pi_" + "".join(c for c in oid if c.isalnum())))


class _AlipaySite:
    name = SITE
    alipay_app_id = ALIPAY_APP_ID
    alipay_seller_id = ALIPAY_SELLER_ID
    alipay_private_key = KEY_PRIV


ALIPAY_SITE = _AlipaySite()


def sign_alipay_pairs(pairs, sign_type="RSA2"):
    """Sign a list of (k, v) pairs (duplicates kept as given) and urlencode."""
    body = pnsign.alipay_body(pairs, KEY_PRIV, sign_type)
    return pntest.alipay_headers(), body


def alipay_paid(oid, amount_text, **extra):
    return pntest.alipay_headers(), pntest.alipay_notification(ALIPAY_SITE, oid, amount_text,
                                                               **extra)


def alipay_params(oid, amount_text, **extra):
    return list(pntest.alipay_params(ALIPAY_SITE, oid, amount_text, **extra).items())


b64u = pnsign.b64u


def sign_2c2p(payload_text, header=pnsign.HS256_HEADER, key=TWOC2P_KEY, alg=None):
    """{"payload": JWT} with the given payload text (str or bytes); alg
    picks the MAC actually computed (None/HS256, HS512, "none": no MAC)."""
    digest = {None: hashlib.sha256, "HS256": hashlib.sha256, "HS512": hashlib.sha512,
              "none": None}[alg]
    token = pnsign.jwt_hs256(key, payload_text, header, digest)
    return {"Content-Type": "application/json"}, pnsign.jwt_body(token, compact=False)


def twoc2p_payload(oid, amount='"19.99"', merchant=TWOC2P_MERCHANT, resp_code="0000",
                   currency="SGD"):
    fields = [("merchantID", merchant), ("invoiceNo", oid), ("accountNo", "411111XXXXXX1111"),
              ("amount", "@AMOUNT@"), ("currencyCode", currency), ("tranRef", "T" + seq()),
              ("referenceNo", "R1"), ("transactionDateTime", "20240101120000"),
              ("agentCode", "OCBC"), ("channelCode", "VI"), ("respCode", resp_code),
              ("respDesc", "x")]
    return json.dumps(dict(fields), separators=(",", ":")).replace('"@AMOUNT@"', amount)


def twoc2p_paid(oid, amount='"19.99"', **kw):
    return sign_2c2p(twoc2p_payload(oid, amount, **kw))


def twoc2p_legacy_form(oid, tref, approval, eci, signed=None):
    """A legacy Redirect API paid form for oid (19.99 SGD), signed with the
    site's key; signed: the (transaction_ref, approval_code, eci) the MAC was
    computed over, when the posted split differs (a re-split)."""
    def fields(t, a, e):
        return [("version", "7.0"), ("request_timestamp", "2024-05-20 10:00:00"),
                ("merchant_id", TWOC2P_MERCHANT), ("order_id", oid), ("invoice_no", ""),
                ("currency", "702"), ("amount", "000000001999"), ("transaction_ref", t),
                ("approval_code", a), ("eci", e), ("transaction_datetime", "2024-05-20 10:00:05"),
                ("payment_channel", "001"), ("payment_status", "000"),
                ("channel_response_code", "00"), ("channel_response_desc", "success"),
                ("masked_pan", "411111XXXXXX1111")]
    hv = pnsign.legacy_hash(fields(*(signed or (tref, approval, eci))), TWOC2P_KEY)
    return pnsign.legacy_body(fields(tref, approval, eci), TWOC2P_KEY, hash_value=hv)


def sign_wechat_v3(resource_text, event="TRANSACTION.SUCCESS", aad="transaction", ts=None,
                   serial=WX_PUBID, envelope=None):
    """A v3 notification whose encrypted resource is resource_text (str/bytes)."""
    nonce12 = ("n%011d" % (_seq[0] % 10**11))[-12:]
    if envelope is None:
        ct = pnsign.wechat_v3_encrypt(WX_APIV3, nonce12, resource_text, aad)
        body = pnsign.wechat_v3_envelope(ct, nonce12, event, "EV-" + seq(), aad, summary="ok")
    elif isinstance(envelope, bytes):
        body = envelope
    else:
        body = json.dumps(envelope, separators=(",", ":")).encode()
    return sign_wechat_v3_raw(body, ts=ts, serial=serial)


def sign_wechat_v3_raw(body, ts=None, serial=WX_PUBID):
    if isinstance(body, str):
        body = body.encode("utf-8")
    return pnsign.wechat_v3_headers(body, KEY_PRIV, serial, ts, "N" + seq()), body


def wechat_transaction(oid, total, txn=None, mchid=WX_MCHID, state="SUCCESS"):
    return {"mchid": mchid, "appid": WX_APPID, "out_trade_no": oid,
            "transaction_id": txn or "42000" + seq(), "trade_type": "JSAPI",
            "trade_state": state, "trade_state_desc": "ok", "bank_type": "OTHERS",
            "attach": "", "success_time": "2024-05-20T10:00:05+08:00",
            "payer": {"openid": "o1"},
            "amount": {"total": total, "payer_total": total, "currency": "CNY",
                       "payer_currency": "CNY"}}


def wechat_paid(oid, total, **kw):
    return sign_wechat_v3(json.dumps(wechat_transaction(oid, total, **kw),
                                     separators=(",", ":")))


def wechat_v2_sign(fields, alg="MD5", key=WX_APIV2):
    return pnsign.wechat_v2_sign(fields, key, alg)


wechat_v2_xml = pnsign.wechat_v2_xml


def wechat_v2_fields(oid, total_fee, mch_id=WX_MCHID):
    return [("appid", WX_APPID), ("bank_type", "CFT"), ("fee_type", "CNY"), ("mch_id", mch_id),
            ("nonce_str", "nonce" + seq()), ("openid", "o1"), ("out_trade_no", oid),
            ("result_code", "SUCCESS"), ("return_code", "SUCCESS"),
            ("time_end", "20240520100005"), ("total_fee", str(total_fee)),
            ("trade_type", "JSAPI"), ("transaction_id", "42000" + seq())]


def sign_wechat_v2(fields):
    f = list(fields) + [("sign", wechat_v2_sign(fields))]
    return {"Content-Type": "text/xml"}, pnsign.wechat_v2_xml(f)


# One paid notification per provider and API, for the scenarios run for
# every provider (tests/integration/test_concurrency.py, tests/faults):
# the order to create (amount_minor, currency) and paid(oid) -> (headers, body).
Kit = collections.namedtuple("Kit", ["name", "provider", "v2", "amount_minor", "currency", "paid"])
KITS = (
    Kit("alipay", "alipay", False, 8888, "CNY", lambda oid: alipay_paid(oid, "88.88")),
    Kit("stripe", "stripe", False, 1999, "USD", lambda oid: stripe_paid(oid, 1999)),
    Kit("2c2p", "2c2p", False, 1999, "SGD", lambda oid: twoc2p_paid(oid, '"19.99"')),
    Kit("wechatpay-v3", "wechatpay", False, 8888, "CNY", lambda oid: wechat_paid(oid, 8888)),
    Kit("wechatpay-v2", "wechatpay", True, 8888, "CNY",
        lambda oid: sign_wechat_v2(wechat_v2_fields(oid, 8888))),
)
KIT = {k.name: k for k in KITS}


def duplicate_lanes(items, copies, send, timeout=240):
    """Deliver every item `copies` times at once: one thread per copy, all
    copies of item e released together by a barrier, then item e + 1.
    send(item) -> Response.  Returns (results[e][c], seconds); re-raises
    the first error of any lane."""
    barrier = threading.Barrier(copies, timeout=30)
    results = [[None] * copies for _ in items]
    errors = []

    def lane(c):
        try:
            for e, item in enumerate(items):
                barrier.wait()
                results[e][c] = send(item)
        except BaseException as ex:     # noqa: B902 - re-raised below
            errors.append(ex)
            barrier.abort()
    t0 = time.monotonic()
    ts = [threading.Thread(target=lane, args=(c,), daemon=True) for c in range(copies)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    took = time.monotonic() - t0
    if any(t.is_alive() for t in ts):
        raise AssertionError("delivery lanes still running after %ss" % timeout)
    if errors:
        raise errors[0]
    return results, took


# ---------------------------------------------------------------------------
# What each provider answers

V2_OK = (b"<xml><return_code><![CDATA[SUCCESS]]></return_code>"
         b"<return_msg><![CDATA[OK]]></return_msg></xml>")


def is_success(provider, r, v2=False):
    if provider == "alipay":
        return r.status == 200 and r.body == b"success"
    if provider == "stripe":
        return r.status == 200 and json.loads(r.body or b"{}").get("received") is True
    if provider == "2c2p":
        return r.status == 200 and r.body == b'{"status":"received"}'
    if provider == "wechatpay":
        if v2:
            return r.status == 200 and r.body == V2_OK
        return r.status in (200, 204) and r.body == b""
    raise ValueError(provider)


def failure_form(provider, r):
    """None if r is the provider's failure form, else a description."""
    if provider == "alipay":
        return None if r.body == b"fail" else "alipay failure must be 'fail'"
    if provider == "wechatpay":
        b = r.body.strip()
        if b.startswith(b"<xml>"):
            return None if b"<return_code><![CDATA[FAIL]]></return_code>" in b else \
                "v2 failure must carry return_code FAIL"
        try:
            d = json.loads(b)
        except ValueError:
            return "v3 failure must be JSON"
        return None if d.get("code") == "FAIL" and d.get("message") else \
            "v3 failure must be {code: FAIL, message}"
    try:
        d = json.loads(r.body)
    except ValueError:
        return "%s failure must be JSON" % provider
    if provider == "stripe":
        return None if "error" in d else "stripe failure must carry error"
    if provider == "2c2p":
        return None if "error" in d else "2c2p failure must carry error"
    raise ValueError(provider)


def path(provider, site=SITE):
    return "/notify/%s/%s" % (provider, site)


# ---------------------------------------------------------------------------
# A receiver with its own supervisor


class Receiver:
    """paynotify-<provider> -c CONF --listen unix:SOCK --workers N, its
    stderr in a log file.  Optional prefix argv (e.g. valgrind) and env."""

    def __init__(self, provider, config, workers=4, binary=None, env=None):
        self.provider = provider
        self.config = config.path if hasattr(config, "path") else config
        self.workers = workers
        self.binary = binary or pntest.binary(provider)
        self.env = env or {}
        self.proc = None
        self.dir = None
        self.sock = None
        self.log = None

    def start(self, timeout=30):
        timeout = pntest.patience(timeout)
        self.dir = pntest.scratch_dir("pnkit-rcv.")
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "s.sock")
        self.log = os.path.join(self.dir, "receiver.log")
        pntest.add_cleanup(self.stop)
        pntest._diagnostics.append(self)
        with open(self.log, "wb") as lf:
            self.proc = subprocess.Popen(
                pntest.valgrind_argv([self.binary, "-c", self.config, "--listen",
                                      "unix:" + self.sock, "--workers", str(self.workers)]),
                stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, cwd="/",
                env=pntest.clean_env(self.env), start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("receiver exited at start-up:\n" + self.log_text())
            if os.path.exists(self.sock) and len(self.worker_pids()) >= self.workers:
                return self
            time.sleep(0.05)
        raise RuntimeError("receiver did not start in %ss:\n%s" % (timeout, self.log_text()))

    def worker_pids(self):
        if self.proc is None or self.proc.poll() is not None:
            return []
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def stop(self):
        if self.proc is None:
            return
        pntest.wait_sigterm_ready([self.proc])
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            limit = 300 if pntest.UNDER_VALGRIND else pntest.patience(15)
            try:
                # the supervisor passes SIGTERM on once: again to its workers
                pntest.wait_resending_sigterm(self.proc, time.monotonic() + limit,
                                              "receiver %s" % self.provider,
                                              pids=self.worker_pids)
            except subprocess.TimeoutExpired:
                sys.stderr.write("pnkit: receiver %s (pid %d) still running %ss after "
                                 "SIGTERM: SIGKILL to its group\n"
                                 % (self.provider, self.proc.pid, limit))
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait(5)
        self.proc = None
        if self in pntest._diagnostics:
            pntest._diagnostics.remove(self)
        d = self.dir
        pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def diagnostics(self):
        return "---- receiver %s log (%s) ----\n%s" % (self.provider, self.log,
                                                      self.log_text()[-4000:])

    def request(self, method, p, headers=None, body=b"", timeout=30):
        return pntest.fcgi_request(self.sock, pntest.cgi_params(method, p, headers, body),
                                   body, timeout=timeout)


# FastCGI: the one client, in pntest
FcgiConn = pntest.FcgiConn
oneshot = pntest.oneshot

# LISTEN (psycopg2): pntest.Listener
PgListener = pntest.Listener

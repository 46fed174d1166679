#!/usr/bin/env python3
"""Write the seed files of tests/fuzz/corpus/<target>/ from tests/fixtures.

Seeds are named seed-<origin>; regression inputs (crash-*, leak-*, ...) and
files added by 'libFuzzer -merge=1' are left alone.  Run it from the source
tree after changing fixtures:  python3 tests/fuzz/seed-corpora.py
"""
import os
import re
import sys

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
fix = os.path.join(top, "tests", "fixtures")
out = os.path.join(top, "tests", "fuzz", "corpus")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def cases(provider):
    d = os.path.join(fix, provider)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".case"):
            continue
        c = {"name": name[:-5], "headers": {}}
        for line in read(os.path.join(d, name)).decode().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            k, _, v = line.partition("=")
            k, v = k.strip(), v.strip()
            if k.startswith("header "):
                c["headers"][k[7:].strip()] = v
            else:
                c[k] = v
        if "body" in c:
            c["body_bytes"] = read(os.path.join(d, c["body"]))
        yield c


def strip_sign(body):
    return b"&".join(f for f in body.split(b"&") if not f.startswith(b"sign="))


bodies = {}
for c in cases("alipay"):
    if "body_bytes" not in c:
        continue
    body = c["body_bytes"]
    bodies[c["body"]] = body
    write("form", c["body"][:-5], body)
    # verbatim: mode 0 (RSA2 site) or 2 (RSA site); only test-a sites verify
    if c["site"] in ("alipay-test", "alipay-test-rsa1"):
        mode = 2 if c["site"] == "alipay-test-rsa1" else 0
        write("alipay", c["name"], bytes([mode]) + body)
for name, body in sorted(bodies.items()):
    write("alipay", "signed-" + name[:-5], b"\x01" + strip_sign(body))

for c in cases("stripe"):
    sig = c["headers"].get("Stripe-Signature")
    if sig is not None:
        write("stripe_header", c["name"], sig.encode())
    if "body_bytes" not in c:
        continue
    body = c["body_bytes"]
    if c["site"] == "stripe-old" and sig is not None:
        write("stripe", c["name"], sig.encode() + b"\n" + body)
    write("stripe", "signed-" + c["body"][:-5], b"@\n" + body)
    write("json", c["body"][:-5], b"data.object.amount\n" + body)
    if c["name"] == "checkout-paid":
        env = [
            b"REQUEST_METHOD=POST",
            b"PATH_INFO=/notify/stripe/shop-a",
            b"CONTENT_TYPE=application/json",
            b"CONTENT_LENGTH=%d" % len(body),
            b"REMOTE_ADDR=127.0.0.1",
            b"HTTP_STRIPE_SIGNATURE=" + sig.encode(),
            b"HTTP_USER_AGENT=Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        ]
        write("http", "stripe-" + c["name"], b"\x0f" + b"\n".join(env) + b"\n\n" + body)

body = bodies["finished.body"]
env = [
    b"REQUEST_METHOD=POST",
    b"REQUEST_URI=/notify/alipay/shop-a/?x=1",
    b"CONTENT_TYPE=application/x-www-form-urlencoded; charset=utf-8",
    b"HTTP_CONTENT_TYPE=ignored",
    b"HTTP_X_FORWARDED_FOR=10.0.0.1",
    b"HTTP_X_FORWARDED_FOR=10.0.0.2",
]
write("http", "alipay-finished-no-length", b"\x2b" + b"\n".join(env) + b"\n\n" + body)
write("http", "get-health", b"\x00REQUEST_METHOD=GET\nPATH_INFO=/health\n\n")

for exp, amount in [(2, b"88.88"), (2, b"19.990"), (2, b"0.01"), (0, b"1000"),
                    (3, b"1.234"), (4, b"0.0001"), (2, b"1000000000000.00"),
                    (2, b"007.5"), (2, b"1.001")]:
    write("money", "%d-%s" % (exp, amount.decode()), bytes([exp + 1]) + amount)
for c in cases("alipay"):
    m = re.search(rb"(?:total_amount|refund_fee)=([^&]*)", c.get("body_bytes", b""))
    if m:
        write("money", "alipay-" + c["name"], b"\x03" + m.group(1))

import base64
import json


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


for c in cases("2c2p"):
    if "body_bytes" not in c:
        continue
    body = c["body_bytes"]
    site = c["site"]
    if site == "2c2p-jt01":
        write("2c2p", c["name"], b"\x00" + body)
        try:
            jwt = json.loads(body)["payload"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(jwt, str):
            continue
        write("jwt", c["name"], jwt.encode())
        segs = jwt.split(".")
        if len(segs) == 3:
            write("jwt", "signed-" + c["name"], ("@" + segs[0] + "." + segs[1]).encode())
            try:
                write("2c2p", "signed-" + c["name"], b"\x01" + b64url_decode(segs[1]))
            except ValueError:
                pass
    elif site in ("2c2p-legacy", "2c2p-legacy256"):
        mode = 4 if site == "2c2p-legacy256" else 2
        write("2c2p", c["name"], bytes([mode]) + body)
        unsigned = b"&".join(f for f in body.split(b"&") if not f.startswith(b"hash_value="))
        write("2c2p", "signed-" + c["name"], bytes([mode | 1]) + unsigned)

v3_sites = ("wx-pub", "wx-certs", "wx-combined", "wx-both", "wx-sp")
v2_sites = ("wx-v2", "wx-v2-md5", "wx-v2-hmac", "wx-v2-refund", "wx-both")
for c in cases("wechatpay"):
    if "body_bytes" not in c:
        continue
    body = c["body_bytes"]
    site = c["site"]
    head = b"".join(b"%s: %s\n" % (k.encode(), v.encode()) for k, v in c["headers"].items())
    if site in v3_sites or site in v2_sites:
        write("wechatpay", c["name"], b"\x00" + head + b"\n" + body)
    if body.lstrip().startswith(b"<"):
        write("xml", c["name"], b"\x00" + body)
        if b"<req_info>" not in body:
            unsigned = re.sub(rb"<sign>.*?</sign>", b"", body, flags=re.S)
            write("wechatpay", "v2-" + c["name"], b"\x03" + unsigned)
    elif site in v3_sites:
        write("wechatpay", "v3-" + c["name"], b"\x01" + body)

resources = {
    "transaction-success": (b"TRANSACTION.SUCCESS", {
        "mchid": "1900000109", "appid": "wxd678efh567hg6787",
        "out_trade_no": "ORDER-1", "transaction_id": "4200000000202405200000000001",
        "trade_type": "JSAPI", "trade_state": "SUCCESS", "success_time": "2024-05-20T10:00:05+08:00",
        "amount": {"total": 8888, "payer_total": 8888, "currency": "CNY", "payer_currency": "CNY"}}),
    "transaction-notpay": (b"TRANSACTION.SUCCESS", {
        "mchid": "1900000109", "appid": "wxd678efh567hg6787", "out_trade_no": "ORDER-2",
        "trade_state": "NOTPAY", "amount": {"total": 1, "currency": "CNY"}}),
    "service-provider": (b"TRANSACTION.SUCCESS", {
        "sp_mchid": "1900000100", "sub_mchid": "1900000109", "sp_appid": "wx8888888888888888",
        "sub_appid": "wxd678efh567hg6787", "out_trade_no": "ORDER-3",
        "transaction_id": "4200000000202405200000000003", "trade_state": "SUCCESS",
        "amount": {"total": 100, "currency": "USD"}}),
    "refund-success": (b"REFUND.SUCCESS", {
        "mchid": "1900000109", "out_trade_no": "ORDER-1", "transaction_id": "4200000000202405200000000001",
        "out_refund_no": "R-1", "refund_id": "50000000382019052709732678859", "refund_status": "SUCCESS",
        "success_time": "2024-05-21T10:00:05+08:00",
        "amount": {"total": 8888, "refund": 888, "payer_total": 8888, "payer_refund": 888}}),
}
for name, (etype, res) in resources.items():
    write("wechatpay", "v3-resource-" + name,
          b"\x02" + etype + b"\n" + json.dumps(res, separators=(",", ":")).encode())

refunds = {
    "success": b"<root><out_refund_no><![CDATA[R-1]]></out_refund_no><out_trade_no><![CDATA[ORDER-1]]>"
               b"</out_trade_no><refund_account><![CDATA[REFUND_SOURCE_RECHARGE_FUNDS]]></refund_account>"
               b"<refund_fee><![CDATA[3960]]></refund_fee><refund_id><![CDATA[50000408942018111907145868882]]>"
               b"</refund_id><refund_recv_accout><![CDATA[\xe6\x94\xaf\xe4\xbb\x98\xe7\x94\xa8\xe6\x88\xb7\xe9\x9b\xb6\xe9\x92\xb1]]>"
               b"</refund_recv_accout><refund_request_source><![CDATA[API]]></refund_request_source>"
               b"<refund_status><![CDATA[SUCCESS]]></refund_status><settlement_refund_fee><![CDATA[3960]]>"
               b"</settlement_refund_fee><settlement_total_fee><![CDATA[3960]]></settlement_total_fee>"
               b"<success_time><![CDATA[2018-11-19 16:24:13]]></success_time><total_fee><![CDATA[3960]]>"
               b"</total_fee><transaction_id><![CDATA[4200000215201811190261405420]]></transaction_id></root>",
    "change": b"<root><out_refund_no>R-2</out_refund_no><refund_status>CHANGE</refund_status>"
              b"<total_fee>1</total_fee></root>",
}
for name, inner in refunds.items():
    write("wechatpay", "v2-refund-" + name, b"\x04" + inner)
    write("xml", "refund-inner-" + name, b"\x01" + inner)

write("cfg", "unit.conf", read(os.path.join(fix, "unit", "unit.conf")))
write("cfg", "example", read(os.path.join(top, "conf", "paynotify.conf.example")))
write("cfg", "every-provider", b"""[database]
conninfo = dbname=shop
statement_timeout_ms = 3000 ; inline comment
connect_timeout_s = 2
[limits]
max_body_bytes = 1048576
[log]
level = 2
[site shop-a]
alipay.app_id = 2021000000000001
alipay.seller_id = 2088000000000001
alipay.public_key_file = keys/test-a.pub.pem keys/test-a.crt keys/test-a.b64
alipay.sign_type = RSA
alipay.test_private_key_file = secrets/test-a.key.pem
stripe.secret_files = secrets/stripe-both secrets/stripe-old
stripe.tolerance_s = 600
stripe.test_signing = on
2c2p.merchant_id = JT01
2c2p.secret_key_file = secrets/2c2p-rotated
2c2p.api = redirect
2c2p.redirect_hash = sha256
2c2p.test_signing = yes
[site shop-b]
wechatpay.mchid = 1900000001
wechatpay.appid = wx0000000000000001
wechatpay.apiv2_key_file = secrets/2c2p-sandbox
wechatpay.v2_sign_type = MD5, HMAC-SHA256
""")
sys.exit(0)

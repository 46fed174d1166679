"""psp_standins: loopback stand-ins for the providers' order-query APIs, for
tests/integration/test_query.py (never installed).

One HTTPS server (http.server + ssl, a test CA made here with
python3-cryptography, a server certificate for 127.0.0.1) serves the four
documented endpoints:

  POST /gateway.do                                     Alipay alipay.trade.query
  GET  /v3/pay/transactions/out-trade-no/{otn}?mchid=  WeChat Pay API v3
  GET  /v3/combine-transactions/out-trade-no/{combine_out_trade_no}
                                                       WeChat Pay combine order
  GET  /v1/payment_intents/{id}, /v1/payment_intents/search?query=
                                                       Stripe
  POST /payment/4.3/paymentInquiry                     2C2P PGW v4
  GET  /v3/merchant-service/complaints-v2/{complaint_id}
                                                       WeChat Pay 消费者投诉 2.0
  POST /gateway.do method=alipay.merchant.tradecomplain.query
                                                       Alipay trade complaints
  GET  /v3/certificates                                WeChat Pay platform certificates

Each CHECKS the request as the provider does (Alipay: RSA2 over the sorted
parameters with the merchant's public key; WeChat Pay: the
WECHATPAY2-SHA256-RSA2048 Authorization over "METHOD\\nURL\\nts\\nnonce\\nbody\\n"
with the merchant's public key and its serial; Stripe: the Bearer restricted
key; 2C2P: the HS256 JWT with the merchant secret) and answers in the
provider's format, SIGNED with the provider's test key (Alipay: RSA2 over
the exact bytes of alipay_trade_query_response; WeChat Pay: Wechatpay-*
headers; 2C2P: an HS256 JWT).  A request that does not verify gets the
provider's own error answer and is counted in .bad_requests.

Behaviour per order: .state[(provider, order_id)] = dict(...) (see
answer_*; Alipay: trade_no, trade_status, total_amount and, for a
cross-border trade, trans_currency / settle_currency / settle_amount); .mode = None | "tamper" (body changed after signing) |
"wrong_key" (signed with a key the site does not trust) | "500" | "sleep"
(answer after .sleep_s seconds).

Complaints: .state[("wechatpay-complaint", complaint_id)] and
.state[("alipay-complaint", complain_event_id)] = dict(state/status, txn,
otn, amount, mchid) (see _wx_complaint, _alipay_complaint).
"""

import base64
import datetime
import hashlib
import http.server
import json
import os
import ssl
import tempfile
import threading
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

import pnsign
import pntest


def make_ca(directory):
    """A test CA and a server certificate for 127.0.0.1 (PEM files in
    directory).  Returns (ca_file, cert_file, key_file)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            "paynotify test CA %s" % os.urandom(4).hex())])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    import ipaddress
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = [os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")]
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


def alipay_cert_files(directory, app_public_key_path):
    """Certificate mode: an Alipay-like root file (an RSA root and an ECDSA
    root, which the SN skips as the SM2 one is) and an app certificate for
    the merchant's key issued by the RSA root.  Returns (app_cert,
    root_file, app_cert_sn, alipay_root_cert_sn) with the SNs computed
    as gopay GetCertSN/GetRootCertSN do: md5(issuer RFC 4514 + decimal serial)."""
    from cryptography.hazmat.primitives.asymmetric import ec
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "CN"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Ant Financial"),
                          x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME,
                                             "Certification Authority"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def build(subject, issuer, pub, signer, serial, algo):
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(pub).serial_number(serial)
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1)).sign(signer, algo))

    rsa_root_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_root_key = ec.generate_private_key(ec.SECP256R1())
    rsa_root_name, ec_root_name = name("Ant Financial Certification Authority R1"), \
        name("Ant Financial Certification Authority E1")
    rsa_root = build(rsa_root_name, rsa_root_name, rsa_root_key.public_key(), rsa_root_key,
                     0x1d5f2a6b9c3e, hashes.SHA256())
    ec_root = build(ec_root_name, ec_root_name, ec_root_key.public_key(), ec_root_key,
                    0x2e6a, hashes.SHA256())
    with open(app_public_key_path, "rb") as f:
        app_pub = serialization.load_pem_public_key(f.read())
    app = build(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "2021000000000009")]),
                name("Ant Financial Certification Authority Class 1 R1"), app_pub, rsa_root_key,
                202412010000000000000123456789, hashes.SHA256())

    def sn(cert):
        return hashlib.md5((cert.issuer.rfc4514_string() + str(cert.serial_number))
                           .encode()).hexdigest()

    app_path, root_path = os.path.join(directory, "appCert.crt"), \
        os.path.join(directory, "alipayRootCert.crt")
    with open(app_path, "wb") as f:
        f.write(app.public_bytes(serialization.Encoding.PEM))
    with open(root_path, "wb") as f:
        f.write(ec_root.public_bytes(serialization.Encoding.PEM)
                + rsa_root.public_bytes(serialization.Encoding.PEM))
    return app_path, root_path, sn(app), sn(rsa_root)


class Standins:
    """The stand-in server.  provider_key: the provider's test private key
    (signs answers); wrong_key: another key (mode "wrong_key");
    merchant_pub: the merchant's public key (checks Alipay and WeChat Pay
    requests); merchant_serial, mchid, stripe_key, twoc2p_secret,
    twoc2p_merchant: what requests must carry; wx_apiv2 / wx_apiv3: the WeChat
    Pay merchant's APIv2 / APIv3 keys."""

    def __init__(self, provider_key, wrong_key, merchant_pub, app_id, mchid, merchant_serial,
                 wx_pubid, stripe_key, twoc2p_merchant, twoc2p_secret, wx_apiv2=None,
                 wx_apiv3=None):
        self.provider_key = pnsign.load_private(provider_key)
        self.wrong_key = pnsign.load_private(wrong_key)
        self.merchant_pub = pnsign.load_public(merchant_pub)
        self.app_id = app_id
        self.mchid = mchid
        self.merchant_serial = merchant_serial
        self.wx_pubid = wx_pubid
        self.stripe_key = stripe_key
        self.twoc2p_merchant = twoc2p_merchant
        self.twoc2p_secret = twoc2p_secret
        self.wx_apiv2 = wx_apiv2
        self.wx_apiv3 = wx_apiv3        # seals the platform certificates (/v3/certificates)
        self.alipay_cert_sns = None     # (app_cert_sn, alipay_root_cert_sn) in certificate mode
        self.wx_platform = None         # GET /v3/certificates: see set_wx_platform
        self.state = {}
        self.mode = None
        self.sleep_s = 3
        self.requests = []          # (provider, path) of every request
        self.bad_requests = []      # (provider, why) of requests that did not verify
        self.lock = threading.Lock()
        d = pntest.temp_dir("pnstandin.")
        self.ca_file, cert, key = make_ca(d)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                outer._dispatch(self, "GET")

            def do_POST(self):
                outer._dispatch(self, "POST")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = "https://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        pntest.add_cleanup(self.stop)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self):
        with self.lock:
            self.state.clear()
            self.mode = None
            self.alipay_cert_sns = None
            self.wx_platform = None
            self.requests.clear()
            self.bad_requests.clear()

    # ---- plumbing -----------------------------------------------------------

    def _send(self, h, status, body, headers=None, ctype="application/json; charset=utf-8"):
        if self.mode == "sleep":
            time.sleep(self.sleep_s)
        if self.mode == "500":
            status, body, headers = 502, b"<html>bad gateway</html>", {}
            ctype = "text/html"
        try:
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass

    def _sign_key(self):
        return self.wrong_key if self.mode == "wrong_key" else self.provider_key

    def _dispatch(self, h, method):
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        url = urllib.parse.urlsplit(h.path)
        if method == "POST" and url.path == "/gateway.do":
            prov = "alipay"
            fn = self._alipay
        elif method == "POST" and url.path == "/pay/orderquery":
            prov = "wechatpay-v2"
            fn = self._wechatpay_v2
        elif method == "POST" and url.path == "/pay/refundquery":
            prov = "wechatpay-v2"
            fn = self._wechatpay_v2_refundquery
        elif method == "GET" and url.path.startswith("/v3/pay/transactions/out-trade-no/"):
            prov = "wechatpay"
            fn = self._wechatpay
        elif method == "GET" and url.path.startswith("/v3/combine-transactions/out-trade-no/"):
            prov = "wechatpay"
            fn = self._wechatpay_combine
        elif method == "GET" and url.path == "/alipay-bill":
            prov = "alipay"
            fn = self._alipay_bill_file
        elif method == "GET" and url.path in ("/v3/bill/tradebill", "/v3/billdownload/file"):
            prov = "wechatpay"
            fn = self._wx_bill
        elif method == "GET" and url.path == "/v3/certificates":
            prov = "wechatpay"
            fn = self._wx_certificates
        elif method == "GET" and url.path.startswith("/v3/merchant-service/complaints-v2/"):
            prov = "wechatpay"
            fn = self._wx_complaint
        elif method == "GET" and url.path.startswith("/v1/payment_intents"):
            prov = "stripe"
            fn = self._stripe
        elif method == "POST" and url.path == "/payment/4.3/paymentInquiry":
            prov = "2c2p"
            fn = self._2c2p
        else:
            self._send(h, 404, b'{"error":"no such endpoint"}')
            return
        with self.lock:
            self.requests.append((prov, h.path))
        fn(h, method, url, body)

    def _bad(self, prov, why):
        with self.lock:
            self.bad_requests.append((prov, why))

    # ---- Alipay ---------------------------------------------------------------

    def _alipay(self, h, method, url, body):
        params = dict(urllib.parse.parse_qsl(body.decode("ascii"), keep_blank_values=True,
                                             strict_parsing=True))
        # the request's sign covers every parameter but sign (sign_type too)
        content = pnsign.alipay_content(params, keep_sign_type=True)
        bill = params.get("method") == "alipay.data.dataservice.bill.downloadurl.query"
        complaint = params.get("method") == "alipay.merchant.tradecomplain.query"
        member = ("alipay_data_dataservice_bill_downloadurl_query_response" if bill
                  else "alipay_merchant_tradecomplain_query_response" if complaint
                  else "alipay_trade_query_response")
        sns = (params.get("app_cert_sn"), params.get("alipay_root_cert_sn"))
        if (params.get("method") not in ("alipay.trade.query",
                                         "alipay.data.dataservice.bill.downloadurl.query",
                                         "alipay.merchant.tradecomplain.query")
                or params.get("app_id") != self.app_id
                or params.get("sign_type") != "RSA2" or sns != (self.alipay_cert_sns or (None, None))
                or not pnsign.rsa_verify(self.merchant_pub, params.get("sign", ""), content)):
            self._bad("alipay", "request signature or parameters")
            resp = {"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.invalid-signature",
                    "sub_msg": "invalid signature"}
        elif bill:
            biz = json.loads(params["biz_content"])
            if biz.get("bill_type") == "trade" and ("alipay-bill", biz.get("bill_date")) \
                    in self.state:
                resp = {"code": "10000", "msg": "Success", "bill_download_url":
                        "%s/alipay-bill?date=%s" % (self.url, biz["bill_date"])}
            else:
                resp = {"code": "40004", "msg": "Business Failed",
                        "sub_code": "isp.bill_not_exist", "sub_msg": "bill does not exist"}
        elif complaint:
            resp = self._alipay_complaint(json.loads(params["biz_content"]))
        else:
            otn = json.loads(params["biz_content"])["out_trade_no"]
            st = self.state.get(("alipay", otn))
            if st is None:
                resp = {"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST",
                        "sub_msg": "trade does not exist"}
            else:
                resp = {"code": "10000", "msg": "Success", "trade_no": st["trade_no"],
                        "out_trade_no": otn, "buyer_logon_id": "159****5620",
                        "trade_status": st["trade_status"], "total_amount": st["total_amount"],
                        "buyer_pay_amount": st["total_amount"], "send_pay_date":
                        "2024-05-20 10:00:05", "buyer_user_id": "2088101117955611"}
                # cross-border trades: trans_currency (标价币种, the currency
                # of total_amount), settle_currency / settle_amount (结算币种
                # 订单金额), as alipay-sdk-java AlipayTradeQueryResponse names
                # them; a domestic trade's answer has none of them
                for f in ("trans_currency", "settle_currency", "settle_amount"):
                    if f in st:
                        resp[f] = st[f]
        # Alipay's own spacing: the signature covers these exact bytes.  An
        # "odd" layout (blanks, \u escapes) proves the verifier takes the
        # member's bytes as sent and never re-serialises them.
        st = None if "trade_status" not in resp else self.state.get(("alipay",
                                                                     resp["out_trade_no"]))
        if st and st.get("layout") == "odd":
            resp["subject"] = "\u4f1a\u5458 \"quoted\" \\ {braces}"
            member_text = json.dumps(resp, ensure_ascii=True, indent=1)
        else:
            member_text = json.dumps(resp, ensure_ascii=False, separators=(",", ":"))
        sig = pnsign.rsa_sign_b64(member_text, self._sign_key())
        cert_sn = ',"alipay_cert_sn":"%s"' % ("0" * 32) if self.alipay_cert_sns else ""
        text = '{"%s":%s%s,"sign":"%s"}' % (member, member_text, cert_sn, sig)
        if self.mode == "tamper":
            text = text.replace('"total_amount":"', '"total_amount":"1')
            text = text.replace('"trade_amount":"', '"trade_amount":"1')
        self._send(h, 200, text.encode("utf-8"), ctype="text/html;charset=utf-8")

    def _alipay_complaint(self, biz):
        """alipay.merchant.tradecomplain.query: the member's fields as
        alipay-sdk-java-all's AlipayMerchantTradecomplainQueryResponse names
        them (complain_event_id, status, trade_no, merchant_order_no,
        trade_amount in yuan as text, complain_reason, content, gmt_*,
        phone_no, target_id, target_type); a business failure is code 40004
        with a sub_code, as for every gateway method."""
        cid = biz.get("complain_event_id")
        st = self.state.get(("alipay-complaint", cid))
        if st is None:
            return {"code": "40004", "msg": "Business Failed", "sub_code": "INVALID_PARAMETER",
                    "sub_msg": "complaint does not exist"}
        return {"code": "10000", "msg": "Success", "complain_event_id": cid,
                "status": st["status"], "trade_no": st["txn"], "merchant_order_no": st["otn"],
                "trade_amount": st["amount"], "complain_reason": "商品质量问题",
                "content": "test", "gmt_create": "2024-05-20 10:00:05",
                "gmt_modified": "2024-05-21 10:00:05", "leaf_category_name": "退款",
                "phone_no": st.get("phone", "ENC(1380000xxxx)"), "target_id": self.app_id,
                "target_type": "APPID", "images": []}

    # ---- WeChat Pay v3 ---------------------------------------------------------

    def _wx_complaint(self, h, method, url, body):
        """查询投诉单详情 (GET /v3/merchant-service/complaints-v2/{complaint_id}):
        the fields of WeChat Pay's documented answer (complaint_id,
        complaint_time, complaint_detail, complaint_state, complainted_mchid,
        payer_phone: encrypted with the platform key, here an opaque base64
        text, complaint_order_info[] {transaction_id, out_trade_no, amount},
        complaint_full_refunded, incoming_user_response, problem_description,
        user_complaint_times, problem_type), signed in Wechatpay-* headers as
        every v3 answer; 404 RESOURCE_NOT_EXISTS for an unknown id."""
        if not self._wx_auth_ok(h, method, body):
            self._bad("wechatpay", "Authorization")
            self._wx_answer(h, 401, {"code": "SIGN_ERROR", "message": "signature error"})
            return
        cid = urllib.parse.unquote(url.path.rsplit("/", 1)[1])
        st = self.state.get(("wechatpay-complaint", cid))
        if st is None:
            self._wx_answer(h, 404, {"code": "RESOURCE_NOT_EXISTS", "message": "no such complaint"})
            return
        self._wx_answer(h, 200, {
            "complaint_id": cid, "complaint_time": "2024-05-20T10:00:05+08:00",
            "complaint_detail": "test", "complaint_state": st["state"],
            "complainted_mchid": st.get("mchid", self.mchid),
            "payer_phone": st.get("phone", "Uy5Hdwwb5Tj2gHm0Qm0aEhQbNmmTdf6KJq3Q2a/Bb9Q="),
            "complaint_order_info": [{"transaction_id": st["txn"], "out_trade_no": st["otn"],
                                      "amount": st["amount"]}],
            "complaint_full_refunded": False, "incoming_user_response": False,
            "problem_description": "test", "user_complaint_times": 1,
            "problem_type": st.get("problem_type", "REFUND"), "apply_refund_amount": 1},
            tamper=(b'"complaint_state":"', b'"complaint_state":"PROCESSED'))

    def _wechatpay(self, h, method, url, body):
        ok = self._wx_auth_ok(h, method, body)
        q = dict(urllib.parse.parse_qsl(url.query))
        if not ok or q.get("mchid") != self.mchid:
            self._bad("wechatpay", "Authorization or mchid")
            self._wx_answer(h, 401, {"code": "SIGN_ERROR", "message": "signature error"})
            return
        otn = urllib.parse.unquote(url.path.rsplit("/", 1)[1])
        st = self.state.get(("wechatpay", otn))
        if st is None:
            self._wx_answer(h, 404, {"code": "ORDER_NOT_EXIST", "message": "order does not exist"})
            return
        txn = {"appid": st.get("appid"), "mchid": st.get("mchid", self.mchid),
               "out_trade_no": otn, "trade_type": "JSAPI", "trade_state": st["trade_state"],
               "trade_state_desc": "test", "bank_type": "OTHERS", "attach": "",
               "payer": {"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
               "amount": {"total": st["total"], "payer_total": st["total"], "currency": "CNY",
                          "payer_currency": "CNY"}}
        if st["trade_state"] != "NOTPAY":
            txn["transaction_id"] = st["transaction_id"]
        if st["trade_state"] == "SUCCESS":
            txn["success_time"] = "2024-05-20T10:00:05+08:00"
        self._wx_answer(h, 200, txn)

    def _wechatpay_combine(self, h, method, url, body):
        """合单查询订单: GET /v3/combine-transactions/out-trade-no/{combine_out_trade_no}
        (pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter5_1_11.shtml): no query
        string, the combine merchant is the caller (Authorization's mchid).
        The answer's fields are the combine notification's resource:
        combine_appid, combine_mchid, combine_out_trade_no, scene_info,
        sub_orders[] (mchid, trade_type, trade_state, bank_type, attach,
        success_time, transaction_id, out_trade_no, amount.total_amount,
        payer_amount, currency, payer_currency), combine_payer_info.
        .state[("wechatpay-combine", no)] = {"appid": ..., "sub_orders":
        [{"mchid", "out_trade_no", "trade_state", "transaction_id", "total"}]}."""
        if not self._wx_auth_ok(h, method, body) or url.query:
            self._bad("wechatpay", "Authorization or a query string")
            self._wx_answer(h, 401, {"code": "SIGN_ERROR", "message": "signature error"})
            return
        cotn = urllib.parse.unquote(url.path.rsplit("/", 1)[1])
        st = self.state.get(("wechatpay-combine", cotn))
        if st is None:
            self._wx_answer(h, 404, {"code": "ORDER_NOT_EXIST", "message": "order does not exist"})
            return
        subs = []
        for so in st["sub_orders"]:
            sub = {"mchid": so["mchid"], "trade_type": "JSAPI", "trade_state": so["trade_state"],
                   "bank_type": "OTHERS", "attach": "", "out_trade_no": so["out_trade_no"],
                   "amount": {"total_amount": so["total"], "payer_amount": so["total"],
                              "currency": "CNY", "payer_currency": "CNY"}}
            if so["trade_state"] != "NOTPAY":
                sub["transaction_id"] = so["transaction_id"]
            if so["trade_state"] == "SUCCESS":
                sub["success_time"] = "2024-05-20T10:00:05+08:00"
            subs.append(sub)
        self._wx_answer(h, 200, {"combine_appid": st.get("appid"), "combine_mchid": self.mchid,
                                 "combine_out_trade_no": cotn,
                                 "scene_info": {"device_id": "POS1:1"}, "sub_orders": subs,
                                 "combine_payer_info": {"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}},
                         tamper=(b'"total_amount":', b'"total_amount":1'))

    def _wx_auth_ok(self, h, method, body):
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("WECHATPAY2-SHA256-RSA2048 "):
            return False
        fields = {}
        for part in auth[len("WECHATPAY2-SHA256-RSA2048 "):].split(","):
            k, _, v = part.partition("=")
            fields[k.strip()] = v.strip().strip('"')
        msg = pnsign.wechat_v3_request_message(method, h.path, fields.get("timestamp", ""),
                                               fields.get("nonce_str", ""), body)
        return (fields.get("mchid") == self.mchid
                and fields.get("serial_no") == self.merchant_serial
                and abs(int(fields.get("timestamp", "0")) - time.time()) < 300
                and pnsign.rsa_verify(self.merchant_pub, fields.get("signature", ""), msg))

    def set_alipay_bill(self, date, data):
        """The zip alipay.data.dataservice.bill.downloadurl.query points to for date."""
        with self.lock:
            self.state[("alipay-bill", date)] = data

    def _alipay_bill_file(self, h, method, url, body):
        data = self.state.get(("alipay-bill", dict(urllib.parse.parse_qsl(url.query))
                               .get("date")))
        if data is None:
            self._send(h, 404, b"no such bill", ctype="text/plain")
            return
        self._send(h, 200, data, ctype="application/oct-stream")

    def set_wx_bill(self, date, data):
        """The ALL trade bill (bytes) GET /v3/bill/tradebill?bill_date=date serves."""
        with self.lock:
            self.state[("wechatpay-bill", date)] = data

    def _wx_bill(self, h, method, url, body):
        """Trade bill API v3: the signed answer with hash and download_url, then the
        file itself (the download carries no Wechatpay-Signature)."""
        if not self._wx_auth_ok(h, method, body):
            self._bad("wechatpay", "bill Authorization")
            self._wx_answer(h, 401, {"code": "SIGN_ERROR", "message": "signature error"})
            return
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/v3/bill/tradebill":
            data = self.state.get(("wechatpay-bill", q.get("bill_date")))
            if data is None or q.get("bill_type") != "ALL":
                self._wx_answer(h, 400, {"code": "NO_STATEMENT_EXIST",
                                         "message": "the bill does not exist"})
                return
            digest = hashlib.sha1(data).hexdigest()
            if self.mode == "bad_hash":
                digest = hashlib.sha1(data + b"x").hexdigest()
            self._wx_answer(h, 200, {"hash_type": "SHA1", "hash_value": digest,
                                     "download_url": "%s/v3/billdownload/file?token=%s"
                                     % (self.url, q["bill_date"])})
            return
        data = self.state.get(("wechatpay-bill", q.get("token")))
        if data is None:
            self._wx_answer(h, 404, {"code": "NOT_FOUND", "message": "no such file"})
            return
        self._send(h, 200, data, ctype="text/plain; charset=utf-8")

    def set_wx_platform(self, certs, sign_key=None, sign_serial=None):
        """What GET /v3/certificates answers: certs = [(pem bytes, serial, not_before,
        not_after)], each sealed with the APIv3 key (wx_apiv3); the answer signed
        with sign_key and named by sign_serial in Wechatpay-Serial (default: the
        provider key and the WeChat Pay public key id)."""
        with self.lock:
            self.wx_platform = {"certs": certs, "key": sign_key, "serial": sign_serial}

    def _wx_certificates(self, h, method, url, body):
        """下载平台证书 (pay.weixin.qq.com/wiki/doc/apiv3/apis/wechatpay5_1.shtml):
        GET /v3/certificates, signed like every v3 request; the answer
        {"data": [{"serial_no", "effective_time", "expire_time",
        "encrypt_certificate": {"algorithm": "AEAD_AES_256_GCM", "nonce",
        "associated_data": "certificate", "ciphertext"}}]}, each certificate PEM
        sealed with the merchant's APIv3 key, the answer signed as every v3
        answer.  Modes: "tamper" (body altered after signing), "bad_tag" (a
        ciphertext altered before signing: the signature holds, the GCM tag does
        not), "wrong_key"."""
        if not self._wx_auth_ok(h, method, body) or url.query:
            self._bad("wechatpay", "certificates Authorization")
            self._wx_answer(h, 401, {"code": "SIGN_ERROR", "message": "signature error"})
            return
        st = self.wx_platform
        if st is None:
            self._wx_answer(h, 500, {"code": "SYSTEM_ERROR", "message": "no certificates"})
            return
        data = []
        for pem, serial, not_before, not_after in st["certs"]:
            nonce = hashlib.sha1(os.urandom(8)).hexdigest()[:12]
            ct = pnsign.wechat_v3_encrypt(self.wx_apiv3, nonce, pem, "certificate")
            if self.mode == "bad_tag":
                raw = bytearray(base64.b64decode(ct))
                raw[-1] ^= 1
                ct = base64.b64encode(bytes(raw)).decode()
            fmt = "%Y-%m-%dT%H:%M:%S+08:00"
            cn = datetime.timezone(datetime.timedelta(hours=8))
            data.append({"serial_no": serial,
                         "effective_time": not_before.astimezone(cn).strftime(fmt),
                         "expire_time": not_after.astimezone(cn).strftime(fmt),
                         "encrypt_certificate": {"algorithm": "AEAD_AES_256_GCM",
                                                 "nonce": nonce,
                                                 "associated_data": "certificate",
                                                 "ciphertext": ct}})
        self._wx_answer(h, 200, {"data": data}, tamper=(b'"serial_no":"', b'"serial_no":"0'),
                        key=st["key"], serial=st["serial"])

    def _wx_answer(self, h, status, obj, tamper=(b'"total":', b'"total":1'), key=None,
                   serial=None):
        body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
        ts = str(int(time.time()))
        nonce = hashlib.sha1(os.urandom(8)).hexdigest()
        sig_key = self._sign_key() if key is None or self.mode == "wrong_key" else key
        sig = pnsign.wechat_v3_sign(sig_key, ts, nonce, body)
        if self.mode == "tamper":
            body = body.replace(*tamper)
        self._send(h, status, body, {
            "Wechatpay-Timestamp": ts, "Wechatpay-Nonce": nonce,
            "Wechatpay-Signature": sig,
            "Wechatpay-Serial": serial or self.wx_pubid, "Request-ID": "08F4" + nonce[:8]})

    # ---- WeChat Pay v2 orderquery ------------------------------------------------

    def _wechatpay_v2(self, h, method, url, body):
        import xml.etree.ElementTree as ET
        try:
            req = {e.tag: (e.text or "") for e in ET.fromstring(body)}
        except ET.ParseError:
            req = {}
        alg = req.get("sign_type") or "MD5"
        good = (req.get("mch_id") == self.mchid and alg in ("MD5", "HMAC-SHA256")
                and req.get("sign") == pnsign.wechat_v2_sign(req, self.wx_apiv2, alg))
        if not good:
            self._bad("wechatpay-v2", "sign or mch_id")
            self._send(h, 200, b"<xml><return_code><![CDATA[FAIL]]></return_code>"
                       b"<return_msg><![CDATA[SIGNERROR]]></return_msg></xml>",
                       ctype="text/plain")
            return
        otn = req.get("out_trade_no", "")
        st = self.state.get(("wechatpay-v2", otn))
        out = {"return_code": "SUCCESS", "return_msg": "OK", "appid": req.get("appid", ""),
               "mch_id": self.mchid, "nonce_str": hashlib.sha1(os.urandom(8)).hexdigest()}
        if st is None:
            out.update({"result_code": "FAIL", "err_code": "ORDERNOTEXIST",
                        "err_code_des": "order does not exist"})
        else:
            out.update({"result_code": "SUCCESS", "openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o",
                        "trade_type": "JSAPI", "trade_state": st["trade_state"],
                        "bank_type": "CMC", "total_fee": str(st["total"]), "fee_type": "CNY",
                        "out_trade_no": otn, "attach": "", "time_end": "20240520100005",
                        "trade_state_desc": "test"})
            if st["trade_state"] != "NOTPAY":
                out["transaction_id"] = st["transaction_id"]
        key = "W" * 32 if self.mode == "wrong_key" else self.wx_apiv2
        out["sign"] = pnsign.wechat_v2_sign(out, key, alg)
        if self.mode == "tamper" and "total_fee" in out:
            out["total_fee"] = "1" + out["total_fee"]
        self._send(h, 200, pnsign.wechat_v2_xml(out, cdata_digits=True), ctype="text/plain")

    def set_v2_refund(self, refund_id, out_refund_no, out_trade_no, transaction_id, total_fee,
                      refund_fee, refund_status="SUCCESS"):
        """A refund WeChat Pay knows (for /pay/refundquery), as it knows it."""
        with self.lock:
            self.state[("wechatpay-v2-refund", refund_id)] = dict(
                refund_id=refund_id, out_refund_no=out_refund_no, out_trade_no=out_trade_no,
                transaction_id=transaction_id, total_fee=total_fee, refund_fee=refund_fee,
                refund_status=refund_status)

    def _wechatpay_v2_refundquery(self, h, method, url, body):
        """API v2 refundquery (pay.weixin.qq.com/wiki/doc/api/jsapi.php?chapter=9_5):
        the request signed as every v2 request; one of refund_id, out_refund_no,
        transaction_id, out_trade_no (WeChat's priority in that order); the
        answer lists the order's refunds as refund_count and, per refund $n
        from 0, refund_id_$n, out_refund_no_$n, refund_fee_$n, refund_status_$n
        (SUCCESS, REFUNDCLOSE, PROCESSING, CHANGE), refund_success_time_$n,
        refund_channel_$n, refund_recv_accout_$n; with transaction_id,
        out_trade_no, total_fee, cash_fee and refund_fee (the order's refunds)
        at the top; none: result_code FAIL, err_code REFUNDNOTEXIST.  Signed
        with the request's sign_type (as orderquery)."""
        import xml.etree.ElementTree as ET
        try:
            req = {e.tag: (e.text or "") for e in ET.fromstring(body)}
        except ET.ParseError:
            req = {}
        alg = req.get("sign_type") or "MD5"
        good = (req.get("mch_id") == self.mchid and alg in ("MD5", "HMAC-SHA256")
                and req.get("sign") == pnsign.wechat_v2_sign(req, self.wx_apiv2, alg))
        if not good:
            self._bad("wechatpay-v2", "refundquery sign or mch_id")
            self._send(h, 200, b"<xml><return_code><![CDATA[FAIL]]></return_code>"
                       b"<return_msg><![CDATA[SIGNERROR]]></return_msg></xml>",
                       ctype="text/plain")
            return
        refunds = [st for (p, _), st in self.state.items() if p == "wechatpay-v2-refund"]
        if req.get("refund_id"):
            hit = [st for st in refunds if st["refund_id"] == req["refund_id"]]
        elif req.get("out_refund_no"):
            hit = [st for st in refunds if st["out_refund_no"] == req["out_refund_no"]]
        elif req.get("transaction_id"):
            hit = [st for st in refunds if st["transaction_id"] == req["transaction_id"]]
        else:
            hit = [st for st in refunds if st["out_trade_no"] == req.get("out_trade_no")]
        if hit and not req.get("refund_id") and not req.get("out_refund_no"):
            # by order: every refund of that order
            hit = [st for st in refunds if st["transaction_id"] == hit[0]["transaction_id"]]
        out = {"return_code": "SUCCESS", "return_msg": "OK", "appid": req.get("appid", ""),
               "mch_id": self.mchid, "nonce_str": hashlib.sha1(os.urandom(8)).hexdigest()}
        if not hit:
            out.update({"result_code": "FAIL", "err_code": "REFUNDNOTEXIST",
                        "err_code_des": "not exist"})
        else:
            first = hit[0]
            out.update({"result_code": "SUCCESS", "transaction_id": first["transaction_id"],
                        "out_trade_no": first["out_trade_no"],
                        "total_fee": str(first["total_fee"]), "cash_fee": str(first["total_fee"]),
                        "refund_fee": str(sum(st["refund_fee"] for st in hit)),
                        "refund_count": str(len(hit))})
            for n, st in enumerate(hit):
                out.update({"refund_id_%d" % n: st["refund_id"],
                            "out_refund_no_%d" % n: st["out_refund_no"],
                            "refund_fee_%d" % n: str(st["refund_fee"]),
                            "refund_status_%d" % n: st["refund_status"],
                            "refund_channel_%d" % n: "ORIGINAL",
                            "refund_recv_accout_%d" % n: "\u652f\u4ed8\u7528\u6237\u7684\u96f6\u94b1"})
                if st["refund_status"] == "SUCCESS":
                    out["refund_success_time_%d" % n] = "2024-05-21 10:00:00"
        key = "W" * 32 if self.mode == "wrong_key" else self.wx_apiv2
        out["sign"] = pnsign.wechat_v2_sign(out, key, alg)
        if self.mode == "tamper" and "refund_fee_0" in out:
            out["refund_fee_0"] = "1" + out["refund_fee_0"]
        self._send(h, 200, pnsign.wechat_v2_xml(out, cdata_digits=True), ctype="text/plain")

    # ---- Stripe -----------------------------------------------------------------

    def _stripe(self, h, method, url, body):
        if h.headers.get("Authorization") != "Bearer " + self.stripe_key:
            self._bad("stripe", "Authorization")
            self._send(h, 401, b'{"error":{"type":"invalid_request_error",'
                       b'"message":"Invalid API Key provided"}}')
            return
        pis = [st for (p, _), st in self.state.items() if p == "stripe"]
        if url.path == "/v1/payment_intents/search":
            q = dict(urllib.parse.parse_qsl(url.query)).get("query", "")
            prefix = "metadata['order_id']:'"
            if not (q.startswith(prefix) and q.endswith("'")):
                self._send(h, 400, b'{"error":{"type":"invalid_request_error"}}')
                return
            oid = q[len(prefix):-1].replace("\\'", "'").replace("\\\\", "\\")
            data = [self._pi(st) for st in pis if st["order_id"] == oid]
            out = {"object": "search_result", "data": data, "has_more": False,
                   "next_page": None, "url": "/v1/payment_intents/search"}
        else:
            pid = url.path.rsplit("/", 1)[1]
            found = [self._pi(st) for st in pis if st["id"] == pid]
            if not found:
                self._send(h, 404, b'{"error":{"code":"resource_missing",'
                           b'"type":"invalid_request_error"}}')
                return
            out = found[0]
        text = json.dumps(out, indent=2).encode()
        self._send(h, 200, text, {"Request-Id": "req_test"})

    @staticmethod
    def _pi(st):
        return {"id": st["id"], "object": "payment_intent", "amount": st["amount"],
                "amount_received": st["amount"] if st["status"] == "succeeded" else 0,
                "currency": st["currency"], "livemode": False, "status": st["status"],
                "metadata": {"order_id": st["order_id"]}, "created": int(time.time())}

    # ---- 2C2P -------------------------------------------------------------------

    def _2c2p(self, h, method, url, body):
        try:
            pay = pnsign.jwt_check_hs256(self.twoc2p_secret, json.loads(body)["payload"])
            good, req = pay is not None, json.loads(pay) if pay is not None else {}
        except (ValueError, KeyError, TypeError):
            good, req = False, {}
        if not good or req.get("merchantID") != self.twoc2p_merchant:
            self._bad("2c2p", "JWT")
            self._send(h, 200, b'{"respCode":"9042","respDesc":"Invalid signature"}')
            return
        inv = req["invoiceNo"]
        st = self.state.get(("2c2p", inv))
        if st is None:
            self._send(h, 200, b'{"respCode":"2002","respDesc":"Transaction not found"}')
            return
        payload = ('{"merchantID":"%s","invoiceNo":"%s","accountNo":"411111XXXXXX1111",'
                   '"amount":%s,"currencyCode":"%s","tranRef":"%s","referenceNo":"R1",'
                   '"transactionDateTime":"20240520100005","agentCode":"OCBC",'
                   '"channelCode":"VI","approvalCode":"%s","eci":"%s",'
                   '"respCode":"%s","respDesc":"%s"}'
                   % (st.get("merchant", self.twoc2p_merchant), inv, st["amount"],
                      st["currency"], st["tranRef"], st.get("approvalCode", "123456"),
                      st.get("eci", "05"), st["respCode"], st.get("respDesc", "x")))
        token = pnsign.jwt_hs256("0" * 64 if self.mode == "wrong_key" else self.twoc2p_secret,
                                 payload)
        if self.mode == "tamper":
            h2, p2, s2 = token.split(".")
            token = ".".join([h2, pnsign.b64u(payload.replace(st["amount"], "1" + st["amount"])
                                              .encode()), s2])
        self._send(h, 200, json.dumps({"payload": token}).encode())

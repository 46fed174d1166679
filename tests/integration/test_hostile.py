# test_hostile.py: the hostile-input matrix (issue 7; docs/RELIABILITY.md).
# Every case is a row of tests/fixtures/hostile/cases.json (adding one needs
# no Python; the format is described in tests/fixtures/hostile/README), sent
#   - as CGI: status, failure (or success) form, one log line with the
#     outcome and the reason, and what is stored (nothing, or the documented
#     flagged row: README "How a notification is handled");
#   - over FastCGI to one long-lived worker per provider: the same status and
#     form, and the worker survives the whole matrix.

import base64
import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

CASES_FILE = os.path.join(pntest.REPO, "tests", "fixtures", "hostile", "cases.json")
MAX_BODY = 131072
PG = None
CFG = None
SERVERS = {}

DEFAULT_ORDER = {"stripe": (1999, "USD"), "alipay": (8888, "CNY"), "2c2p": (1999, "SGD"),
                 "wechatpay": (1999, "CNY")}
DEFAULT_CTYPE = {"stripe": "application/json; charset=utf-8",
                 "alipay": pntest.ALIPAY_CONTENT_TYPE, "2c2p": "application/json",
                 "wechatpay": "application/json"}


def load_cases():
    with open(CASES_FILE, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    names = [c["name"] for c in cases]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        raise ValueError("duplicate case names in cases.json: %s" % sorted(dup))
    return cases


def setUpModule():
    global PG, CFG
    if pnkit.AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG, max_body_bytes=MAX_BODY)


def tearDownModule():
    for s in SERVERS.values():
        s.stop()
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# Turning a case into (method, path, headers, body, content_length)


def subst(obj, ctx):
    if isinstance(obj, str):
        for k, v in ctx.items():
            obj = obj.replace("{%s}" % k, str(v))
        return obj
    if isinstance(obj, list):
        return [subst(x, ctx) for x in obj]
    if isinstance(obj, dict):
        return {k: subst(v, ctx) for k, v in obj.items()}
    return obj


def make_body(spec):
    """body: a string, or {"text"|"b64"|"hex": ...}, or {"repeat": UNIT,
    "count": N, "prefix": P, "suffix": S} (suffix may itself repeat:
    "suffix_repeat", "suffix_count")."""
    if spec is None:
        return b""
    if isinstance(spec, str):
        return spec.encode("utf-8")
    if "text" in spec:
        return spec["text"].encode("utf-8")
    if "b64" in spec:
        return base64.b64decode(spec["b64"])
    if "hex" in spec:
        return bytes.fromhex(spec["hex"])
    if "repeat" in spec:
        return (spec.get("prefix", "") + spec["repeat"] * spec["count"]
                + spec.get("suffix_repeat", "") * spec.get("suffix_count", 0)
                + spec.get("suffix", "")).encode("utf-8")
    if "latin1" in spec:
        return spec["latin1"].encode("latin-1")
    raise ValueError("unknown body spec %r" % (spec,))


def build(case, ctx):
    c = subst(case, ctx)
    provider = c["provider"]
    sign = c.get("sign")
    headers = {"Content-Type": DEFAULT_CTYPE[provider]}
    if sign is None:
        body = make_body(c.get("body"))
    elif sign == "stripe":
        headers, body = pnkit.sign_stripe(make_body(c["body"]), t=c.get("t"))
    elif sign == "alipay":
        a = c.get("alipay", {})
        pairs = pnkit.alipay_params(ctx["oid"], a.get("amount", "88.88"),
                                    **a.get("override", {}))
        pairs += [tuple(p) for p in a.get("append", [])]
        headers, body = pnkit.sign_alipay_pairs(pairs, a.get("sign_type", "RSA2"))
    elif sign == "2c2p":
        j = c.get("jwt", {})
        if "payload" in j:
            payload = j["payload"] if isinstance(j["payload"], str) else make_body(j["payload"])
        else:
            payload = pnkit.twoc2p_payload(ctx["oid"], **j.get("fields", {}))
        headers, body = pnkit.sign_2c2p(payload, header=j.get("header",
                                        '{"alg":"HS256","typ":"JWT"}').encode(),
                                        alg=j.get("alg"))
    elif sign == "wechat_v3":
        w = c.get("v3", {})
        if "resource" in w:
            res = w["resource"] if isinstance(w["resource"], str) else make_body(w["resource"])
        else:
            tx = pnkit.wechat_transaction(ctx["oid"], w.get("total", 1999),
                                          mchid=w.get("mchid", pnkit.WX_MCHID))
            res = json.dumps(tx, separators=(",", ":"))
        if "raw_envelope" in w:
            headers, body = pnkit.sign_wechat_v3_raw(make_body(w["raw_envelope"]),
                                                     ts=w.get("ts"))
        else:
            headers, body = pnkit.sign_wechat_v3(res, ts=w.get("ts"),
                                                 serial=w.get("serial", pnkit.WX_PUBID))
    elif sign == "wechat_v2":
        w = c.get("v2", {})
        fields = pnkit.wechat_v2_fields(ctx["oid"], w.get("total_fee", 1999))
        over = w.get("override", {})
        fields = [(k, over.get(k, v)) for k, v in fields]
        headers, body = pnkit.sign_wechat_v2(fields)
        if w.get("prepend"):
            body = w["prepend"].encode() + body
    else:
        raise ValueError("unknown sign %r" % sign)
    if "drop_headers" in c:
        headers = {k: v for k, v in headers.items() if k not in c["drop_headers"]}
    headers.update(c.get("headers", {}))
    for k, v in c.get("header_repeat", {}).items():
        headers[k] = v["unit"] * v["count"]
    if "header_many" in c:
        for n in range(c["header_many"]["count"]):
            headers["%s%d" % (c["header_many"]["prefix"], n)] = "v"
    for old, new in c.get("replace", []):
        assert old.encode() in body, "%s: replace: %r not in the body" % (c["name"], old)
        body = body.replace(old.encode(), new.encode())
    if "truncate" in c:
        body = body[:c["truncate"]]
    path = c.get("path", pnkit.path(provider, c.get("site", pnkit.SITE)))
    return (c.get("method", "POST"), path, headers, body, c.get("content_length"))


# ---------------------------------------------------------------------------


class Hostile(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.cases = load_cases()

    def setUp(self):
        PG.reset()

    def prepare(self, i, case, transport):
        if getattr(self, "dirty", False):    # the previous case failed before its check
            PG.psql("DELETE FROM paynotify.notifications")
        self.dirty = True
        oid = "H%03d-%s-%s" % (i, case["provider"][:2], transport)
        ctx = {"oid": oid, "evt": "evt_hostile_%d_%d" % (os.getpid(), i),
               "now": int(time.time()), "old": int(time.time()) - 3600,
               "future": int(time.time()) + 3600}
        if case.get("order", True):
            amount, currency = DEFAULT_ORDER[case["provider"]]
            PG.add_order(pnkit.SITE, oid, amount, currency)
        return oid, build(case, ctx)

    def check_response(self, case, r, where):
        exp = case["expect"]
        p = case["provider"]
        self.assertEqual(r.status, exp["status"], "%s: %s: %r" % (where, case["name"], r[:3]))
        form = exp.get("form", "failure")
        if form == "failure":
            why = pnkit.failure_form(p, r)
            self.assertIsNone(why, "%s: %s: %s: %r" % (where, case["name"], why, r[:3]))
        elif form == "success":
            self.assertTrue(pnkit.is_success(p, r, v2=case.get("sign") == "wechat_v2"),
                            "%s: %s: expected the success ack: %r" % (where, case["name"], r[:3]))
        elif form == "health":
            self.assertEqual(r.body, b"ok\n", r)
        else:
            raise ValueError(form)

    def check_stored(self, case, oid):
        """What the case stored (and removes it: one psql round trip)."""
        exp = case["expect"]
        row = PG.psql("WITH d AS (DELETE FROM paynotify.notifications RETURNING outcome) "
                      "SELECT coalesce(string_agg(outcome, ','), ''), (SELECT status FROM "
                      "paynotify.orders WHERE site = %s AND order_id = %s) FROM d"
                      % (pntest.q(pnkit.SITE), pntest.q(oid)))[0]
        self.dirty = False
        stored = [x for x in row[0].split(",") if x]
        status = row[1]
        if exp.get("stored") is None:
            self.assertEqual(stored, [], "%s: nothing may be stored" % case["name"])
            if status is not None:
                self.assertEqual(status, "pending", case["name"])
        else:
            self.assertEqual(stored, [exp["stored"]], case["name"])
            if "order_status" in exp:
                self.assertEqual(status, exp["order_status"], case["name"])

    def test_matrix_cgi(self):
        """Every case as CGI: status, form, log line with reason, storage."""
        counts = {}
        for i, case in enumerate(self.cases):
            with self.subTest(case=case["name"]):
                oid, (method, path, headers, body, clen) = self.prepare(i, case, "c")
                r = pntest.run_cgi(pntest.binary(case["provider"]), method, path, headers, body,
                                   CFG.path, content_length=clen)
                self.check_response(case, r, "cgi")
                exp = case["expect"]
                lines = [ln for ln in r.stderr.splitlines() if " request " in ln]
                self.assertEqual(len(lines), 1, "%s: one request log line: %r" % (
                    case["name"], r.stderr))
                line = lines[0]
                self.assertIn(" status=%d " % exp["status"], line)
                if exp.get("outcome"):
                    self.assertIn(" outcome=%s " % exp["outcome"], line)
                if exp["status"] >= 400:
                    self.assertRegex(line, r" reason=\S", "%s: no reason logged: %s" % (
                        case["name"], line))
                if exp.get("reason"):
                    self.assertRegex(line.lower(), exp["reason"].lower(),
                                     "%s: reason not as expected: %s" % (case["name"], line))
                self.check_stored(case, oid)
                counts[case["provider"]] = counts.get(case["provider"], 0) + 1
        sys.stdout.write("    measured: hostile_matrix cases=%d %s\n" % (
            len(self.cases), " ".join("%s=%d" % kv for kv in sorted(counts.items()))))

    def test_matrix_fastcgi(self):
        """Every case over FastCGI to one worker per provider: same answers,
        and the worker survives the whole matrix."""
        for p in DEFAULT_ORDER:
            if p not in SERVERS:
                SERVERS[p] = pntest.FcgiServer(pntest.binary(p), CFG.path, workers=1).start()
        for i, case in enumerate(self.cases):
            with self.subTest(case=case["name"]):
                oid, (method, path, headers, body, clen) = self.prepare(i, case, "f")
                srv = SERVERS[case["provider"]]
                r = srv.request(method, path, headers, body, content_length=clen, timeout=20)
                self.check_response(case, r, "fastcgi")
                self.check_stored(case, oid)
        for p, srv in SERVERS.items():
            self.assertEqual(srv.dead_workers(), [], "%s worker died:\n%s" % (
                p, srv.diagnostics()))

    def test_at_least_60_cases_all_providers(self):
        by = {}
        for c in self.cases:
            by[c["provider"]] = by.get(c["provider"], 0) + 1
            self.assertIn("expect", c, c["name"])
            self.assertIn("status", c["expect"], c["name"])
        self.assertGreaterEqual(len(self.cases), 60)
        self.assertEqual(set(by), set(DEFAULT_ORDER), by)


if __name__ == "__main__":
    unittest.main()

# test_security.py: security checks (issue 7; docs/RELIABILITY.md).
#   - no secret in any log line, response body or admin output: good and bad
#     requests for every provider (CGI and a supervised FastCGI receiver),
#     `paynotify check-config` and `paynotify sign`; searched for every
#     configured secret (as text, hex and base64) and every line of the
#     private keys' PEM
#   - a secret file readable by group or others is refused by the receivers
#     (CGI: 503 + failure form; FastCGI: does not start) and by
#     `paynotify check-config`, naming the file and the chmod that fixes it
#   - source checks: every MAC/signature comparison goes through
#     pn_ct_equal() (no memcmp/strcmp between two non-constant values named
#     like sig/mac/hash/sign/digest); SQL is never built from strings: the
#     compiler enforces it (common/sql.h: every call that takes SQL text gets
#     "" sql "" or a struct pn_sql, so a non-literal does not compile; checked
#     here by compiling planted mistakes), the bypasses of those macros are
#     where they are reviewed, and no printf-like call formats SQL text

import base64
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

PG = None
CFG = None
PROVIDERS = ("alipay", "stripe", "wechatpay", "2c2p")
ADMIN = os.path.join(pntest.REPO, "paynotify")
SECRET_FILES = {"stripe": "stripe-whsec", "2c2p": "2c2p.key", "wechatpay": "apiv3.key"}


def setUpModule():
    global PG, CFG
    if pnkit.AESGCM is None:
        raise unittest.SkipTest("python3-cryptography is not installed")
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG)
    # test signing keys too, so that their bytes are part of the search
    pntest.write_secret(os.path.join(CFG.dir, "private.pem"), open(pnkit.KEY_PRIV).read())
    with open(CFG.path, "a") as f:
        f.write("alipay.test_private_key_file = private.pem\n"
                "wechatpay.test_private_key_file = private.pem\n"
                "stripe.test_signing = on\n2c2p.test_signing = on\n")


def tearDownModule():
    if PG is not None:
        PG.destroy()


def needles():
    """Every form in which a secret could leak, as bytes."""
    out = set()
    for s in pnkit.SECRETS:
        raw = s.encode()
        out |= {raw, raw.hex().encode(), base64.b64encode(raw).rstrip(b"="),
                base64.b64encode(raw[:24]).rstrip(b"=")}
        if s.startswith("whsec_"):
            out.add(s[len("whsec_"):].encode())
    with open(pnkit.KEY_PRIV) as f:
        for line in f:
            line = line.strip()
            if len(line) >= 40 and not line.startswith("-----"):
                out.add(line.encode())
    return out


def requests_for(provider):
    """(headers, body, method, path) good and bad requests for provider."""
    oid = "SEC-" + provider
    p = pnkit.path(provider)
    if provider == "stripe":
        PG.add_order(pnkit.SITE, oid, 1999, "USD")
        good = pnkit.stripe_paid(oid, 1999)
        bad = [(dict(good[0], **{"Stripe-Signature": "t=1,v1=" + "0" * 64}), good[1]),
               pnkit.sign_stripe(good[1], secret="whsec_wrong"),
               pnkit.sign_stripe(good[1], t=1)]
    elif provider == "alipay":
        PG.add_order(pnkit.SITE, oid, 8888, "CNY")
        good = pnkit.alipay_paid(oid, "88.88")
        bad = [(good[0], good[1].replace(b"total_amount=88.88", b"total_amount=1.00")),
               (good[0], b"sign=%zz")]
    elif provider == "wechatpay":
        PG.add_order(pnkit.SITE, oid, 1999, "CNY")
        good = pnkit.wechat_paid(oid, 1999)
        v2 = pnkit.sign_wechat_v2(pnkit.wechat_v2_fields(oid + "-2", 1999))
        bad = [(dict(good[0], **{"Wechatpay-Signature": "QUJD"}), good[1]),
               (good[0], good[1].replace(b'"summary":"ok"', b'"summary":"no"')),
               (v2[0], v2[1].replace(b"<total_fee>1999", b"<total_fee>1")), v2,
               ({"Content-Type": "text/xml"}, b"<!DOCTYPE x><xml/>")]
    else:
        PG.add_order(pnkit.SITE, oid, 1999, "SGD")
        good = pnkit.twoc2p_paid(oid)
        bad = [pnkit.sign_2c2p(pnkit.twoc2p_payload(oid), key="0" * 64),
               pnkit.sign_2c2p("{}", header=b'{"alg":"none"}', alg="none"),
               ({"Content-Type": "application/json"}, b'{"payload":"a.b.c"}')]
    reqs = [(good[0], good[1], "POST", p), (good[0], good[1], "POST", p)]
    reqs += [(h, b, "POST", p) for h, b in bad]
    reqs += [(good[0], good[1], "POST", pnkit.path(provider, "nosuch")),
             (good[0], good[1], "PUT", p), ({}, b"", "GET", p)]
    return reqs


class NoSecretsInOutput(unittest.TestCase):
    def assertNoSecret(self, text, where):
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        for n in needles():
            self.assertNotIn(n, text, "a secret (%r...) appears in %s" % (n[:8], where))

    def test_logs_and_bodies_cgi(self):
        PG.reset()
        seen = 0
        for provider in PROVIDERS:
            for h, b, method, p in requests_for(provider):
                r = pntest.run_cgi(pntest.binary(provider), method, p, h, b, CFG.path)
                self.assertNoSecret(r.body, "%s CGI response body" % provider)
                self.assertNoSecret(repr(r.headers), "%s CGI response headers" % provider)
                self.assertNoSecret(r.stderr, "%s CGI log" % provider)
                seen += 1
        self.assertGreater(seen, 30)

    def test_logs_and_bodies_fastcgi(self):
        PG.reset()
        for provider in PROVIDERS:
            rcv = pnkit.Receiver(provider, CFG, workers=1).start()
            try:
                for h, b, method, p in requests_for(provider):
                    r = rcv.request(method, p, h, b)
                    self.assertNoSecret(r.body, "%s FastCGI response body" % provider)
                # a reload re-reads every secret: still nothing in the log
                os.kill(rcv.proc.pid, 1)
                deadline = time.monotonic() + pntest.patience(30)
                while "reloaded" not in rcv.log_text() and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertIn("reloaded", rcv.log_text())
            finally:
                rcv.stop()
            self.assertIn("request", rcv.log_text())
            self.assertNoSecret(rcv.log_text(), "%s receiver log" % provider)

    def test_admin_output(self):
        env = pntest.clean_env()
        outs = []
        p = subprocess.run([ADMIN, "-c", CFG.path, "check-config"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout)
        outs.append(p.stdout)
        for provider in PROVIDERS:
            p = subprocess.run([ADMIN, "-c", CFG.path, "sign", provider,
                                "--site", pnkit.SITE, "--order", "SIGN-1", "--amount", "19.99",
                                "--curl"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout)
            outs.append(p.stdout)
        for o in outs:
            self.assertNoSecret(o, "paynotify output")

    def test_invalid_secret_file_not_echoed(self):
        """A secret file with an unusable value: errors name the file, never
        the value (one file at a time: loading stops at the first error)."""
        leaked = "sk_live_DoNotEchoThisValue0123456789"
        for provider, name in (("stripe", "stripe-whsec"), ("2c2p", "2c2p.key"),
                               ("wechatpay", "apiv3.key"), ("wechatpay", "apiv2.key")):
            with self.subTest(file=name):
                d = pntest.temp_dir("pnsec.")
                cfg_dir = os.path.join(d, "c")
                shutil.copytree(CFG.dir, cfg_dir)
                pntest.write_secret(os.path.join(cfg_dir, name), leaked + "\n")
                cfg = os.path.join(cfg_dir, "paynotify.ini")
                p = subprocess.run([ADMIN, "-c", cfg, "check-config"], env=pntest.clean_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
                self.assertNotIn(b"DoNotEchoThisValue", p.stdout)
                sys.stdout.write("    %s with an unusable value: check-config exit %d: %s\n" % (
                    name, p.returncode,
                    p.stdout.decode("utf-8", "replace").strip().replace("\n", " | ")[-200:]))
                r = pntest.run_cgi(pntest.binary(provider), "POST", pnkit.path(provider),
                                   {"Content-Type": "application/json"}, b"{}", cfg)
                self.assertNotIn("DoNotEchoThisValue", r.stderr)
                self.assertNotIn(b"DoNotEchoThisValue", r.body)


class LooseSecretFiles(unittest.TestCase):
    def loose_copy(self, name, mode):
        d = pntest.temp_dir("pnloose.")
        cfg_dir = os.path.join(d, "c")
        shutil.copytree(CFG.dir, cfg_dir)
        os.chmod(os.path.join(cfg_dir, name), mode)
        return os.path.join(cfg_dir, "paynotify.ini")

    def test_refused_everywhere(self):
        files = dict(SECRET_FILES, wechatpay_v2="apiv2.key", alipay="private.pem")
        for provider, name in files.items():
            provider = provider.split("_")[0]
            for mode in (0o640, 0o604):
                with self.subTest(file=name, mode=oct(mode)):
                    cfg = self.loose_copy(name, mode)
                    p = subprocess.run([ADMIN, "-c", cfg,
                                        "check-config"], env=pntest.clean_env(),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       timeout=60)
                    out = p.stdout.decode("utf-8", "replace")
                    self.assertNotEqual(p.returncode, 0, out)
                    self.assertIn(name, out)
                    self.assertIn("chmod 600", out)
                    r = pntest.run_cgi(pntest.binary(provider), "POST", pnkit.path(provider),
                                       {"Content-Type": "application/json"}, b"{}", cfg)
                    self.assertEqual(r.status, 503, r)
                    self.assertIsNone(pnkit.failure_form(provider, r), r)
                    self.assertIn(name, r.stderr)
                    rcv = pnkit.Receiver(provider, cfg, workers=1)
                    with self.assertRaisesRegex(RuntimeError, "exited at start-up"):
                        rcv.start()
                    self.assertNotEqual(rcv.proc.returncode, 0)
                    self.assertIn("chmod 600", rcv.log_text())
                    rcv.stop()


# ---------------------------------------------------------------------------
# Source checks

SRC_DIRS = ("common", "webhooks", "admin")
SECRETISH = re.compile(r"(sig|mac|hash|sign|digest|hmac|want|expected|tag)", re.I)
COMPARE_FNS = ("memcmp", "strcmp", "strncmp", "strcasecmp", "strncasecmp", "bcmp", "timingsafe_bcmp")
# The macros of common/sql.h (a literal only) are bypassed by calling the
# function by its name in parentheses, or by making a struct pn_sql by hand.
# Reviewed places: (file, text) -> why it is safe
SQL_BYPASS = re.compile(r"\(\s*(PQexec|PQexecParams|PQprepare|PQsendQuery|PQsendQueryParams|"
                        r"PQsendPrepare|pn_db_query|pn_db_copy_out)\s*\)\s*\(|struct\s+pn_sql\s*\)\s*\{")
SQL_BYPASS_ALLOWED = {
    ("admin/db.c", "(PQexecParams)("): "pn_db_query(): its struct pn_sql was checked when made",
    ("admin/db.c", "(PQexec)("): "pn_db_copy_out() (a struct pn_sql) and pn_db_script(): the "
        "text of the numbered sql/ files, applied as they are by paynotify migrate",
}
# Files whose libpq calls go through common/sql.h (directly or by admin/admin.h)
SQL_USERS = ("common/store.c", "admin/db.c")
SQL_FORMAT_ALLOWED = set()
SQL_WORDS = re.compile(r'"\s*(SELECT|INSERT|UPDATE|DELETE|SET|WITH|CREATE|DROP|ALTER|BEGIN)\b'
                       r'[^"]*%', re.I)
PRINTF_FNS = ("snprintf", "sprintf", "asprintf", "vsnprintf", "pn_buf_printf",
              "pn_arena_printf", "pn_xasprintf", "pn_err_set")


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def calls(src, name):
    """(line, [args]) for every call of name(...) in src (comments stripped)."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(name), src):
        i, depth, args, cur, instr = m.end(), 1, [], "", None
        while i < len(src) and depth:
            c = src[i]
            if instr:
                cur += c
                if c == "\\":
                    cur += src[i + 1]
                    i += 1
                elif c == instr:
                    instr = None
            elif c in "\"'":
                instr = c
                cur += c
            elif c in "([{":
                depth += 1
                cur += c
            elif c in ")]}":
                depth -= 1
                if depth:
                    cur += c
            elif c == "," and depth == 1:
                args.append(cur.strip())
                cur = ""
            else:
                cur += c
            i += 1
        args.append(cur.strip())
        yield src.count("\n", 0, m.start()) + 1, args


def is_constant(arg, src):
    """A string literal, an upper-case macro defined as a literal, or a
    static const char array initialised with literals only."""
    arg = arg.strip()
    if re.fullmatch(r'("([^"\\]|\\.)*"\s*)+', arg):
        return True
    # adjacent literals and literal macros: "... LIMIT " BATCH
    parts = re.findall(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\S', arg)
    if len(parts) > 1 and all(p.startswith('"') or (re.fullmatch(r"[A-Z][A-Z0-9_]*", p)
                                                    and is_constant(p, src)) for p in parts):
        return True
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", arg):
        # defined as a string literal here or in any header (continuation
        # lines allowed)
        pat = r"#define\s+%s\s+(\\\n\s*)?\"" % arg
        return re.search(pat, src) is not None or re.search(pat, headers()) is not None
    m = re.search(r"static\s+const\s+char\s+%s\s*\[\s*\]\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*;"
                  % re.escape(arg), src)
    if m is not None:
        return True
    # literals and literal macros: "SELECT ... WHERE" ELIGIBLE "AND ..."
    m = re.search(r"static\s+const\s+char\s+%s\s*\[\s*\]\s*=\s*((?:\s*(?:\"(?:[^\"\\]|\\.)*\"|"
                  r"[A-Z][A-Z0-9_]*))+)\s*;" % re.escape(arg), src)
    if m is None:
        return False
    parts = re.findall(r'"(?:[^"\\]|\\.)*"|[A-Z][A-Z0-9_]*', m.group(1))
    return all(p.startswith('"') or is_constant(p, src) for p in parts)


def mac_compare_violations(files):
    out = []
    for path, src in files:
        for fn in COMPARE_FNS:
            for line, args in calls(src, fn):
                a, b = (args + ["", ""])[:2]
                if is_constant(a, src) or is_constant(b, src):
                    continue        # against a public constant: not a secret comparison
                if SECRETISH.search(a) or SECRETISH.search(b):
                    out.append("%s:%d: %s(%s, %s) compares MAC/signature-like values; "
                               "use pn_ct_equal()" % (path, line, fn, a, b))
    return out


def sql_violations(files):
    out = []
    for path, src in files:
        for m in SQL_BYPASS.finditer(src):
            text = re.sub(r"\s+", "", m.group(0))
            if (path, text) not in SQL_BYPASS_ALLOWED:
                out.append("%s:%d: %s bypasses the literal-only SQL macros of common/sql.h"
                           % (path, src.count("\n", 0, m.start()) + 1, m.group(0)))
        for fn in PRINTF_FNS:
            for line, args in calls(src, fn):
                for a in args:
                    if SQL_WORDS.search(a) and (path, a) not in SQL_FORMAT_ALLOWED:
                        out.append("%s:%d: %s() formats SQL text %s" % (path, line, fn, a))
    return out


def compile_c(text):
    """cc -fsyntax-only on text (the tree's include paths): (ok, compiler output)."""
    d = pntest.temp_dir("pntest-sqlcc.")
    path = os.path.join(d, "x.c")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    pq = subprocess.run(["pkg-config", "--cflags", "libpq"], capture_output=True, text=True)
    inc = pq.stdout.split() if pq.returncode == 0 else ["-I/usr/include/postgresql"]
    argv = [os.environ.get("CC") or "cc", "-std=c11", "-fsyntax-only", "-I" + pntest.REPO,
            "-I" + os.path.join(pntest.REPO, "common"), "-I" + os.path.join(pntest.REPO, "admin"),
            "-I" + os.path.join(pntest.REPO, "webhooks")]
    p = subprocess.run(argv + inc + [path], capture_output=True, text=True)
    return p.returncode == 0, p.stderr


SQL_PRELUDE = ('#include <stdio.h>\n#include "admin.h"\n'
               'static const char *name = "x";\nstatic const char named_sql[] = "SELECT 2";\n'
               'bool f(PGconn *c, struct pn_err *err);\n'
               'bool f(PGconn *c, struct pn_err *err) {\n\tchar q[128];\n'
               '\tsnprintf(q, sizeof(q), "%s", name);\n\t(void)q;\n')
# Each must fail to compile; SQL_GOOD must compile (the check is not vacuous).
SQL_BAD = {
    "a buffer in pn_db_query": "\treturn pn_db_query(c, q, 0, NULL, NULL, err);\n",
    "a buffer in PN_SQL": "\treturn pn_db_query(c, PN_SQL(q), 0, NULL, NULL, err);\n",
    "a pointer in PN_SQL_CONST": "\treturn pn_db_query(c, PN_SQL_CONST(name), 0, NULL, NULL, err);\n",
    "a buffer in PN_SQL_CONST": "\treturn pn_db_query(c, PN_SQL_CONST(q), 0, NULL, NULL, err);\n",
    "a buffer in PQexec": "\tPQclear(PQexec(c, q));\n\treturn err != NULL;\n",
    "a buffer in PQexecParams":
        "\tPQclear(PQexecParams(c, q, 0, NULL, NULL, NULL, NULL, 0));\n\treturn err != NULL;\n",
    "a buffer in PQprepare": "\tPQclear(PQprepare(c, \"s\", q, 0, NULL));\n\treturn err != NULL;\n",
    "a buffer in PQsendQueryParams":
        "\treturn PQsendQueryParams(c, q, 0, NULL, NULL, NULL, NULL, 0) && err;\n",
    "a pointer in pn_admin_query":
        "\treturn pn_admin_query(name, name, 0, NULL, NULL) && err;\n",
}
SQL_GOOD = ('\tPQclear(PQexec(c, "SELECT 1"));\n'
            '\tPQclear(PQexecParams(c, "SELECT $1" " FROM x", 1, NULL, NULL, NULL, NULL, 0));\n'
            '\treturn pn_db_query(c, PN_SQL("SELECT 1"), 0, NULL, NULL, err)\n'
            '\t    && pn_db_query(c, PN_SQL_CONST(named_sql), 0, NULL, NULL, err);\n')


_headers = []


def headers():
    if not _headers:
        text = []
        for d in SRC_DIRS:
            for name in sorted(os.listdir(os.path.join(pntest.REPO, d))):
                if name.endswith(".h"):
                    with open(os.path.join(pntest.REPO, d, name), encoding="utf-8") as f:
                        text.append(strip_comments(f.read()))
        _headers.append("\n".join(text))
    return _headers[0]


def sources():
    out = []
    for d in SRC_DIRS:
        for name in sorted(os.listdir(os.path.join(pntest.REPO, d))):
            if name.endswith(".c"):
                with open(os.path.join(pntest.REPO, d, name), encoding="utf-8") as f:
                    out.append(("%s/%s" % (d, name), strip_comments(f.read())))
    return out


class SourceChecks(unittest.TestCase):
    def test_mac_comparisons_are_constant_time(self):
        self.assertEqual(mac_compare_violations(sources()), [])

    def test_pn_ct_equal_is_used_and_is_crypto_memcmp(self):
        srcs = dict(sources())
        self.assertRegex(srcs["common/crypto.c"], r"pn_ct_equal\([^)]*\)\s*\{[^}]*CRYPTO_memcmp")
        sites = [(p, line) for p, src in srcs.items() for line, _ in calls(src, "pn_ct_equal")
                 if p != "common/crypto.c"]
        self.assertGreaterEqual(len({p for p, _ in sites}), 3, sites)

    def test_sql_is_parameterised(self):
        self.assertEqual(sql_violations(sources()), [])
        srcs = dict(sources())
        for path in SQL_USERS:
            self.assertRegex(srcs[path], r'#include "(sql|admin)\.h"', path)

    def test_non_literal_sql_does_not_compile(self):
        pntest.need(os.environ.get("CC") or "cc", "build-essential")
        ok, out = compile_c(SQL_PRELUDE + SQL_GOOD + "}\n")
        self.assertTrue(ok, out)
        for what, body in SQL_BAD.items():
            ok, out = compile_c(SQL_PRELUDE + body + "}\n")
            self.assertFalse(ok, "%s compiles" % what)
            self.assertIn("error", out, what)

    def test_checkers_catch_violations(self):
        """The checks are not vacuous: planted mistakes are found."""
        bad = ('static bool f(const unsigned char *mac, const unsigned char *sig) {\n'
               '\treturn memcmp(mac, sig, 32) == 0 || strcmp(want_sign, got) == 0; }\n'
               'static void g(PGconn *c, const char *id) {\n'
               '\tchar q[256];\n\tsnprintf(q, sizeof(q), "SELECT * FROM t WHERE id = %s", id);\n'
               '\tPQexec(c, q);\n}\n')
        self.assertEqual(len(mac_compare_violations([("x.c", bad)])), 2)
        self.assertEqual(len(sql_violations([("x.c", bad)])), 1)
        bypass = ('void b(PGconn *c, const char *q) { (PQexec)(c, q);\n'
                  ' pn_db_query(c, (struct pn_sql){q}, 0, NULL, NULL, NULL); }\n')
        self.assertEqual(len(sql_violations([("x.c", bypass)])), 2)
        ok = ('#define Q "SELECT 1"\nstatic const char s[] = "SELECT 2" "FROM x";\n'
              'void h(PGconn *c){ PQexec(c, Q); pn_db_query(c, PN_SQL_CONST(s), 0, NULL, NULL, 0);\n'
              ' if (strcmp(key, "sign") == 0) return; }\n')
        self.assertEqual(mac_compare_violations([("y.c", ok)]), [])
        self.assertEqual(sql_violations([("y.c", ok)]), [])


if __name__ == "__main__":
    unittest.main()

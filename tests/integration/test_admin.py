# test_admin.py: the `paynotify` admin command against a real (throwaway)
# PostgreSQL, with notifications delivered through the real receivers as
# CGI (signed by `paynotify sign` itself, so sign is proven by acceptance):
#   --help of every subcommand exits 0
#   migrate: a fresh database, twice (no-op), one at version 1 (applies 002)
#   check-config: good (0), bad value (78, file:line), every error of a file
#     at once, certificate expiring in 10 days and expired (WARNING with the
#     date, exit 0), database at the wrong schema version (69); secrets in
#     the wrong form (a Stripe API key: 78, and the receivers still serve the
#     other sites); a root-owned 0600 secret checked as --user nobody (78)
#   exit statuses: one table for every program (unreadable config 78
#     everywhere, usage 64)
#   sign: accepted by the receiver for alipay, wechatpay v3 paid/refund, v2
#     paid/refund, stripe paid/refund/failed/closed, 2c2p jwt and redirect;
#     --curl piped to sh against a local HTTP endpoint; refused for a site
#     without test keys
#   replay: re-verifies stored raw bytes (key named); a row altered in the
#     database is flagged (exit 2); --dry-run changes nothing; --apply applies
#     an unknown_order notification once the order exists, and twice changes
#     nothing (one pg_notify transition); every filter; csv and json parse;
#     --to re-delivers to a local HTTP->CGI endpoint: Alipay (no timestamp)
#     accepted as a duplicate, Stripe refused as stale (exit 1)
#     a rotated-out key is "no longer configured" (exit 4), not altered;
#     positional key ids of earlier builds handled
#   report: unknown order, amount and merchant mismatch, pending too long,
#     paid without notification (exit 1); clean (exit 0)
#   stats: prometheus metric lines and counts
#   typos: every filter of replay, report, stats exits 64 with the valid values
#   tables: fit 100 columns (cells wrap), --wide shows them whole

import csv
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

REPO = pntest.REPO
# the numbered schema files, and the version the build expects (the last)
SQL_FILES = sorted(f for f in os.listdir(os.path.join(REPO, "sql"))
                   if re.match(r"^[0-9]{3}_.*[.]sql$", f))
LATEST = int(SQL_FILES[-1][:3])
ADMIN = os.path.join(REPO, "paynotify")
UNIT_KEYS = os.path.join(REPO, "tests", "fixtures", "unit", "keys")
# test-a.pub.pem's key id: its name here and SHA-256 of its DER SubjectPublicKeyInfo
PUBKEY_ID = "test-public.pem:" + subprocess.run(
    "openssl pkey -pubin -in %s -outform DER | sha256sum" % os.path.join(UNIT_KEYS, "test-a.pub.pem"),
    shell=True, check=True, capture_output=True, text=True).stdout[:8]
PG = None
CFG = None          # the main configuration (path)
CFG_DIR = None
HTTP = None         # the local HTTP -> CGI endpoint (for --to and --curl)

SECRETS = {
    "stripe-whsec": "whsec_admin_test_secret",
    "2c2p.key": "A7D3C0FFEE0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF012345",
    "legacy.key": "LEGACYSECRET",
    "wx-v3.key": "AdminAPIv3Key0123456789abcdefABC",
    "wx-v2.key": "AdminAPIv2Key0123456789abcdefABC",
}


def site_lines(name, app_id="2021000000000001", seller_id="2088000000000001",
               stripe_tolerance=300):
    """A sandbox site with test keys for every provider (as scripts/up's demo)."""
    return [
        "[site %s]" % name,
        "alipay.app_id = %s" % app_id,
        "alipay.seller_id = %s" % seller_id,
        "alipay.public_key_file = test-public.pem",
        "alipay.test_private_key_file = test-private.pem",
        # shop and shop2 share every provider identity (one app, merchant
        # and key each): a site marker each, which `paynotify sign` sets
        "alipay.site_passback = %s" % name,
        "stripe.secret_files = stripe-whsec",
        # the sites share one Stripe secret (one account): each its own marker
        "stripe.site_metadata = site=%s" % name,
        "stripe.tolerance_s = %d" % stripe_tolerance,
        "stripe.test_signing = on",
        "2c2p.merchant_id = JT01",
        "2c2p.secret_key_file = 2c2p.key",
        "2c2p.test_signing = on",
        "2c2p.site_marker = userDefined1=%s" % name,
        "wechatpay.mchid = 1900000109",
        "wechatpay.appid = wxd678efh567hg6787",
        "wechatpay.apiv3_key_file = wx-v3.key",
        "wechatpay.apiv2_key_file = wx-v2.key",
        "wechatpay.public_key_id = PUB_KEY_ID_0000000000000024101100397200000006",
        "wechatpay.public_key_file = test-public.pem",
        "wechatpay.test_private_key_file = test-private.pem",
        "wechatpay.site_attach = %s" % name,
        "",
    ]


def config_text(conninfo, stripe_tolerance=300):
    return "\n".join(
        ["; written by test_admin.py", "[database]", "conninfo = %s" % conninfo, ""]
        + site_lines("shop", stripe_tolerance=stripe_tolerance)
        + site_lines("shop2", stripe_tolerance=stripe_tolerance)
        # same test key, another merchant: signs notifications shop must flag
        + ["[site twin]", "alipay.app_id = 2021000000000002",
           "alipay.seller_id = 2088000000000002", "alipay.public_key_file = test-public.pem",
           "alipay.test_private_key_file = test-private.pem", ""]
        + ["[site legacy]", "2c2p.merchant_id = JT01", "2c2p.secret_key_file = legacy.key",
           "2c2p.api = redirect", "2c2p.test_signing = on", ""]
        # production-like: no test keys
        + ["[site nokeys]", "alipay.app_id = 2021000000000009",
           "alipay.seller_id = 2088000000000009", "alipay.public_key_file = test-public.pem",
           "stripe.secret_files = stripe-whsec", "stripe.site_metadata = site=nokeys", ""])


def write_config(name, conninfo, **kw):
    path = os.path.join(CFG_DIR, name)
    with open(path, "w") as f:
        f.write(config_text(conninfo, **kw))
    return path


def setUpModule():
    global PG, CFG, CFG_DIR, HTTP
    PG = pntest.module_database()
    CFG_DIR = pntest.temp_dir("pntest-admin-cfg.")
    os.chmod(CFG_DIR, 0o755)
    shutil.copy(os.path.join(UNIT_KEYS, "test-a.key.pem"), os.path.join(CFG_DIR, "test-private.pem"))
    os.chmod(os.path.join(CFG_DIR, "test-private.pem"), 0o600)
    shutil.copy(os.path.join(UNIT_KEYS, "test-a.pub.pem"), os.path.join(CFG_DIR, "test-public.pem"))
    for name, text in SECRETS.items():
        pntest.write_secret(os.path.join(CFG_DIR, name), text + "\n")
    CFG = write_config("paynotify.conf", PG.conninfo())
    HTTP = CgiHttpServer(CFG).start()


def tearDownModule():
    if HTTP is not None:
        HTTP.stop()
    if PG is not None:
        PG.destroy()


# ---------------------------------------------------------------------------
# A local HTTP endpoint: each POST /notify/<provider>/<site> runs the
# receiver as CGI (what nginx + fcgiwrap would do, without the weight).


class CgiHttpServer:
    def __init__(self, config):
        self.config = config
        self.server = None
        self.requests = []      # (path, headers dict, body) as received
        self.logs = []          # the receiver's log line for each

    def start(self):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection",
                                                "accept", "user-agent", "expect")}
                outer.requests.append((self.path, headers, body))
                parts = self.path.split("/")
                if len(parts) != 4 or parts[1] != "notify":
                    self.send_error(404)
                    return
                r = pntest.run_cgi(pntest.binary(parts[2]), "POST", self.path, headers, body,
                                   config=outer.config)
                outer.logs.append(r.stderr)
                self.send_response(r.status or 500)
                for k, v in r.headers.items():
                    if k != "status":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.body)))
                self.end_headers()
                self.wfile.write(r.body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------
# Helpers


def me():
    """The name of the user running the tests (check-config --user)."""
    import pwd
    return pwd.getpwuid(os.geteuid()).pw_name


def write_file(name, text, mode=0o644):
    path = os.path.join(CFG_DIR, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def expired_certificate(d, serial="1A2B3D"):
    """A self-signed certificate that expired on 2021-01-01 (openssl ca can
    back-date; req -x509 cannot)."""
    key, csr, crt = (os.path.join(d, n) for n in ("k.pem", "r.csr", "expired.crt"))
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", csr, "-subj", "/CN=expired"], check=True, capture_output=True)
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write(serial + "\n")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca = d\n[d]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n"
                "serial = %s/serial\ndefault_md = sha256\npolicy = p\n[p]\n"
                "commonName = supplied\n" % (d, d, d))
    subprocess.run(["openssl", "ca", "-batch", "-config", os.path.join(d, "ca.cnf"), "-selfsign",
                    "-keyfile", key, "-in", csr, "-out", crt, "-startdate", "20200101000000Z",
                    "-enddate", "20210101000000Z"], check=True, capture_output=True)
    return crt


def admin(*args, config=None, env=None):
    """Run ./paynotify ARGS; returns CompletedProcess (text)."""
    e = pntest.clean_env({"PAYNOTIFY_CONFIG": config or CFG})
    if env:
        e.update(env)
    return subprocess.run([ADMIN] + list(args), env=e, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def sign(provider, site, order, amount, *extra):
    """`paynotify sign` -> (path, headers, body bytes)."""
    p = subprocess.run([ADMIN, "sign", provider, "--site", site, "--order", order,
                        "--amount", amount] + list(extra),
                       env=pntest.clean_env({"PAYNOTIFY_CONFIG": CFG}),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise AssertionError("sign failed (%d): %s" % (p.returncode, p.stderr.decode()))
    head, body = p.stdout.split(b"\n\n", 1)
    assert body.endswith(b"\n")
    lines = head.decode("utf-8").split("\n")
    method, path = lines[0].split(" ", 1)
    assert method == "POST", lines[0]
    return path, dict(line.split(": ", 1) for line in lines[1:]), body[:-1]


def deliver(provider, site, order, amount, *extra, to_site=None, config=None):
    """Sign and deliver through the real receiver as CGI; returns Response."""
    path, headers, body = sign(provider, site, order, amount, *extra)
    if to_site:
        path = "/notify/%s/%s" % (provider, to_site)
    return pntest.run_cgi(pntest.binary(provider), "POST", path, headers, body,
                          config=config or CFG)


def replay(*args):
    """`paynotify replay --format json ARGS` -> (exit code, rows, summary)."""
    p = admin("replay", "--format", "json", *args)
    assert p.returncode in (0, 1, 2), (p.returncode, p.stderr)
    return p.returncode, json.loads(p.stdout), p.stderr.strip()


def ids(rows):
    return sorted(int(r["id"]) for r in rows)


def nid(order, where="true"):
    return int(PG.scalar("SELECT id FROM paynotify.notifications WHERE order_id = %s AND %s "
                         "ORDER BY id DESC LIMIT 1" % (pntest.q(order), where)))


def snapshot():
    return (PG.psql("SELECT n.*::text FROM paynotify.notifications n ORDER BY id"),
            PG.psql("SELECT o.*::text FROM paynotify.orders o ORDER BY site, order_id"))


class AdminTest(unittest.TestCase):
    def setUp(self):
        PG.reset()

    def ok(self, r, status=200):
        self.assertEqual(r.status, status, (r.body, r.stderr))


# ---------------------------------------------------------------------------


class TestHelpAndMigrate(AdminTest):
    def test_help_of_every_subcommand_exits_0(self):
        self.assertEqual(admin("--help").returncode, 0)
        for cmd in ("migrate", "check-config", "replay", "report", "sign", "stats"):
            p = admin(cmd, "--help")
            self.assertEqual(p.returncode, 0, cmd)
            self.assertIn("usage: paynotify", p.stdout, cmd)
        self.assertEqual(admin("no-such-command").returncode, 64)

    def make_db(self, name, files=()):
        name = "%s_%s" % (PG.dbname, name)     # the cluster may be shared
        PG.psql("CREATE DATABASE %s" % name, db="postgres")
        for f in files:
            PG.psql_file(os.path.join(REPO, "sql", f), db=name)
        return write_config(name + ".conf", PG.conninfo().replace("dbname=" + PG.dbname,
                                                                 "dbname=" + name))

    def test_migrate_fresh_twice_and_existing(self):
        sql = os.path.join(REPO, "sql")
        applied = ["applied %s (schema version %d)\n" % (f, int(f[:3])) for f in SQL_FILES]
        funcs = "applied functions.sql\n"       # every run: one definition per function
        cfg = self.make_db("fresh")
        p = admin("migrate", "--sql-dir", sql, config=cfg)
        self.assertEqual((p.returncode, p.stdout), (0, "".join(applied) + funcs), p.stderr)
        self.assertNotIn("NOTICE", p.stderr)    # "does not exist, skipping" is not news
        p = admin("migrate", "--sql-dir", sql, config=cfg)
        self.assertEqual((p.returncode, p.stdout),
                         (0, "schema is at version %d: nothing to do\n" % LATEST + funcs))
        # a database at version 1 (applied by hand with psql) gets the rest
        cfg1 = self.make_db("atone", ["001_schema.sql"])
        p = admin("migrate", "--sql-dir", sql, config=cfg1)
        self.assertEqual((p.returncode, p.stdout), (0, "".join(applied[1:]) + funcs), p.stderr)
        # the test database itself was loaded with psql: nothing to do but the functions
        p = admin("migrate", "--sql-dir", sql)
        self.assertEqual((p.returncode, p.stdout),
                         (0, "schema is at version %d: nothing to do\n" % LATEST + funcs))
        self.assertEqual(PG.scalar("SELECT string_agg(version::text, ',' ORDER BY version) "
                                   "FROM paynotify.schema_version"),
                         ",".join(str(int(f[:3])) for f in SQL_FILES))

    def test_check_config_schema_mismatch(self):
        cfg = self.make_db("oldschema", ["001_schema.sql"])
        p = admin("check-config", "-c", cfg, "--user", me())
        self.assertEqual(p.returncode, 3, p.stdout)        # EX_UNAVAILABLE, not a config error
        self.assertIn("database: ERROR: schema version 1, this build needs %d" % LATEST, p.stdout)
        cfg = self.make_db("noschema")
        p = admin("check-config", "-c", cfg, "--user", me())
        self.assertEqual(p.returncode, 3, p.stdout)
        self.assertIn("schema version 0", p.stdout)


class TestCheckConfig(AdminTest):
    def test_good_config(self):
        p = admin("check-config", "--user", me())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("site shop (line 5)", p.stdout)
        self.assertIn("  alipay: app_id 2021000000000001, seller_id 2088000000000001, RSA2, "
                      "test signing key", p.stdout)
        # key ids: the file's name and the first 8 hex of SHA-256 of the key
        self.assertIn("    secrets: " + pntest.key_id("stripe-whsec", SECRETS["stripe-whsec"]),
                      p.stdout)
        self.assertIn("files: 8 checked as user %s (--user), all readable" % me(), p.stdout)
        self.assertIn("database: reachable, schema version %d" % LATEST, p.stdout)
        self.assertTrue(p.stdout.endswith("0 problems, 0 warnings\n"), p.stdout)
        self.assertNotIn(SECRETS["stripe-whsec"], p.stdout)     # ids, never bytes

    def test_bad_config_names_file_and_line(self):
        text = config_text(PG.conninfo()).replace("stripe.test_signing = on",
                                                  "stripe.test_signing = maybe", 1)
        path = os.path.join(CFG_DIR, "bad.conf")
        with open(path, "w") as f:
            f.write(text)
        line = text.split("\n").index("stripe.test_signing = maybe") + 1
        p = admin("check-config", "-c", path)
        self.assertEqual(p.returncode, 78)                  # EX_CONFIG
        self.assertIn("%s:%d: invalid value \"maybe\" for \"stripe.test_signing\"" % (path, line),
                      p.stderr)
        self.assertIn("ERROR: %s:%d: invalid value" % (path, line), p.stdout)
        self.assertTrue(p.stdout.endswith("1 problem, 0 warnings\n"), p.stdout)

    def test_every_error_reported(self):
        text = (config_text(PG.conninfo())
                .replace("stripe.test_signing = on", "stripe.test_signing = maybe", 1)
                .replace("stripe.tolerance_s = 300", "stripe.tolerance_s = soon", 1)
                .replace("[site twin]", "[site twin]\nalipay.sign_type = MD5", 1)
                + "\n[site broken]\nalipay.app_id = 1\n")
        path = write_file("many.conf", text)
        lines = text.split("\n")
        p = admin("check-config", "-c", path)
        self.assertEqual(p.returncode, 78, p.stdout)
        want = ["%s:%d: invalid value \"maybe\"" % (path, lines.index("stripe.test_signing = maybe") + 1),
                "%s:%d: invalid value \"soon\"" % (path, lines.index("stripe.tolerance_s = soon") + 1),
                "%s:%d: invalid value \"MD5\"" % (path, lines.index("alipay.sign_type = MD5") + 1),
                "%s:%d: site \"broken\": alipay.seller_id is required" % (
                    path, lines.index("[site broken]") + 1),
                "%s:%d: site \"broken\": alipay.public_key_file is required" % (
                    path, lines.index("[site broken]") + 1)]
        for w in want:
            self.assertIn(w, p.stderr)
        self.assertEqual(len(p.stderr.strip().split("\n")), len(want), p.stderr)
        self.assertTrue(p.stdout.endswith("5 problems, 0 warnings\n"), p.stdout)
        # the receivers refuse it with the first error and the count of the others
        r = subprocess.run([pntest.binary("alipay"), "-t", "-c", path], capture_output=True,
                           text=True, env=pntest.clean_env(), timeout=30)
        self.assertEqual(r.returncode, 78)
        self.assertIn(want[1], r.stderr)            # the first by line: tolerance_s comes first
        self.assertIn("(and 4 more errors: `paynotify check-config` lists them all)", r.stderr)

    def test_secret_file_permissions(self):
        bad = os.path.join(CFG_DIR, "loose.key")
        pntest.write_secret(bad, "LOOSE\n")
        os.chmod(bad, 0o644)
        path = os.path.join(CFG_DIR, "loose.conf")
        with open(path, "w") as f:
            f.write(config_text(PG.conninfo()).replace("secret_key_file = legacy.key",
                                                       "secret_key_file = loose.key"))
        p = admin("check-config", "-c", path)
        self.assertEqual(p.returncode, 78)
        self.assertIn("has mode 0644", p.stderr)
        self.assertIn("loose.conf:", p.stderr)

    def test_certificate_expiring_within_30_days(self):
        self._expiring(10, r"expires in (9|10) days \(20")

    def test_certificate_expiring_tomorrow_says_1_day(self):
        self._expiring(1, r"expires in 1 day \(20")

    def _expiring(self, days, expect):
        d = pntest.temp_dir("pntest-admin-cert.")
        key, crt = os.path.join(d, "k.pem"), os.path.join(d, "soon.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-out", crt, "-days", str(days), "-subj", "/CN=expiring soon",
                        "-set_serial", "0x1A2B3C"], check=True, capture_output=True)
        path = os.path.join(CFG_DIR, "expiring.conf")
        with open(path, "w") as f:
            f.write(config_text(PG.conninfo()).replace(
                "alipay.public_key_file = test-public.pem\nalipay.test_private_key_file",
                "alipay.public_key_file = test-public.pem %s\nalipay.test_private_key_file" % crt, 1))
        p = admin("check-config", "-c", path, "--user", me())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)   # a warning, not a problem
        line = [ln for ln in p.stdout.split("\n") if "soon.crt" in ln]
        self.assertEqual(len(line), 2, p.stdout)
        self.assertIn("certificate serial 1A2B3C, expires ", line[0])
        self.assertRegex(line[1], r"^WARNING: .*expiring\.conf:\d+: site \"shop\": "
                         r"alipay.public_key_file soon\.crt:[0-9a-f]{8}: certificate serial "
                         r"1A2B3C " + expect)
        self.assertTrue(p.stdout.endswith("0 problems, 1 warning\n"), p.stdout)

    def test_expired_certificate_is_a_warning_with_its_date(self):
        crt = expired_certificate(pntest.temp_dir("pntest-admin-expired."))
        text = config_text(PG.conninfo()).replace(
            "alipay.public_key_file = test-public.pem\nalipay.test_private_key_file",
            "alipay.public_key_file = test-public.pem %s\nalipay.test_private_key_file" % crt, 1)
        path = write_file("expired.conf", text)
        p = admin("check-config", "-c", path, "--user", me())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("certificate serial 1A2B3D expired on 2021-01-01 00:00:00Z; the receivers "
                      "still accept its key", p.stdout)
        self.assertTrue(p.stdout.endswith("0 problems, 1 warning\n"), p.stdout)
        # and the receiver does load it
        r = subprocess.run([pntest.binary("alipay"), "-t", "-c", path], capture_output=True,
                           text=True, env=pntest.clean_env(), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_stripe_api_key_is_a_site_error(self):
        api = os.path.join(CFG_DIR, "stripe-api-key")
        pntest.write_secret(api, "sk_test_51Hxyzabcdefghijklmnop\n")
        text = config_text(PG.conninfo()).replace(
            "[site nokeys]", "[site wrongkey]\nstripe.secret_files = stripe-api-key\n\n"
            "[site nokeys]")
        path = write_file("apikey.conf", text)
        line = text.split("\n").index("[site wrongkey]") + 1
        p = admin("check-config", "-c", path, "--user", me())
        self.assertEqual(p.returncode, 78, p.stdout)
        msg = ("%s:%d: site \"wrongkey\": stripe.secret_files %s (line 1) is a Stripe secret API "
               "key (sk_...), not a webhook signing secret: every event would fail to verify; "
               "copy the endpoint's signing secret (whsec_...) from the dashboard"
               % (path, line, pntest.key_id("stripe-api-key", "sk_test_51Hxyzabcdefghijklmnop")))
        self.assertIn("ERROR: " + msg, p.stdout)
        self.assertNotIn("51Hxyz", p.stdout + p.stderr)            # never the key itself
        # the receivers load it, log it at error level, and serve the other sites
        PG.add_order("shop", "SE1", 500, "USD")
        r = deliver("stripe", "shop", "SE1", "5.00", "--currency", "USD", config=path)
        self.ok(r)
        self.assertIn("error: " + msg, r.stderr)
        self.assertEqual(PG.order("shop", "SE1")["status"], "paid")

    def test_private_key_where_the_public_key_belongs(self):
        text = config_text(PG.conninfo()).replace(
            "alipay.public_key_file = test-public.pem\nalipay.test_private_key_file",
            "alipay.public_key_file = test-private.pem\nalipay.test_private_key_file", 1)
        path = write_file("swapped.conf", text)
        p = admin("check-config", "-c", path)
        self.assertEqual(p.returncode, 78)
        self.assertIn("this is a private key (your application's private key?), not Alipay's "
                      "public key", p.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "needs root (to own a file nobody may read)")
    def test_unreadable_by_the_receivers_user(self):
        d = pntest.temp_dir("pntest-admin-user.")
        os.chmod(d, 0o755)
        secret = os.path.join(d, "root-only-whsec")
        pntest.write_secret(secret, SECRETS["stripe-whsec"] + "\n")       # root:root 0600
        text = config_text(PG.conninfo()).replace("stripe.secret_files = stripe-whsec",
                                                  "stripe.secret_files = %s" % secret, 1)
        path = os.path.join(d, "paynotify.conf")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        shutil.copy(os.path.join(CFG_DIR, "test-public.pem"), d)
        for name in ("test-private.pem", "2c2p.key", "wx-v3.key", "wx-v2.key", "stripe-whsec",
                     "legacy.key"):
            shutil.copy(os.path.join(CFG_DIR, name), d)
        # as root it loads (root reads everything): the old blind spot
        self.assertEqual(admin("check-config", "-c", path, "--user", "root").returncode, 0)
        p = admin("check-config", "-c", path, "--user", "nobody")
        self.assertEqual(p.returncode, 78, p.stdout)
        line = text.split("\n").index("stripe.secret_files = %s" % secret) + 1
        self.assertIn("%s:%d: user nobody cannot read \"%s\" (owner root, mode 0600): the "
                      "receivers would refuse the configuration, and a reload would keep the "
                      "old one: chown nobody \"%s\"" % (path, line, secret, secret), p.stdout)
        self.assertIn("NOT all readable", p.stdout)
        # the private key is unreadable too: every file is checked, not just the first
        self.assertIn("cannot read \"%s/test-private.pem\"" % d, p.stdout)
        # the reload command's check, as that user, fails the same way
        r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            pntest.binary("stripe"), "--check-config", "-c", path],
                           capture_output=True, text=True, env=pntest.clean_env(), timeout=30)
        self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
        self.assertIn("Permission denied", r.stderr)
        # a directory on the way that nobody cannot enter is named as such
        os.chmod(d, 0o700)
        p = admin("check-config", "-c", path, "--user", "nobody")
        self.assertIn("directory \"%s\" (owner root, mode 0700) is not searchable" % d, p.stdout)
        os.chmod(d, 0o755)
        self.assertEqual(admin("check-config", "-c", path, "--user", "no-such-user").returncode, 64)


class TestSign(AdminTest):
    # (provider, extra args, currency, amount, event, expected order status)
    def check(self, provider, site, order, amount, currency, *extra, status, pre=None,
              ack=200, order_amount=None, outcome="applied"):
        if order_amount is not None:
            PG.add_order(site, order, order_amount, currency)
        r = deliver(provider, site, order, amount, "--currency", currency, *extra)
        self.ok(r, ack)
        self.assertIn("outcome=%s" % outcome, r.stderr)
        self.assertEqual(PG.order(site, order)["status"], status, (provider, extra))

    def test_every_provider_accepted_by_its_receiver(self):
        self.check("alipay", "shop", "A1", "12.34", "CNY", status="paid", order_amount=1234)
        self.check("wechatpay", "shop", "W3", "12.34", "CNY", status="paid", order_amount=1234,
                   ack=204)
        self.check("wechatpay", "shop", "W3", "12.34", "CNY", "--event", "refund",
                   status="refunded", ack=204)
        self.check("wechatpay", "shop", "W2", "12.34", "CNY", "--v2", status="paid",
                   order_amount=1234)
        # a v2 refund result (req_info, no MAC) waits for the signed refundquery answer
        # (test_v2_refund_confirm.py): accepted and stored, the order unchanged
        self.check("wechatpay", "shop", "W2", "12.34", "CNY", "--v2", "--event", "refund",
                   status="paid", outcome="pending_confirmation")
        self.check("stripe", "shop", "S1", "5.00", "USD", status="paid", order_amount=500)
        self.check("stripe", "shop", "S1", "5.00", "USD", "--event", "refund", status="refunded")
        self.check("stripe", "shop", "S2", "5.00", "USD", "--event", "failed", status="failed",
                   order_amount=500)
        self.check("stripe", "shop", "S3", "5.00", "USD", "--event", "closed", status="closed",
                   order_amount=500)
        self.check("2c2p", "shop", "C1", "19.99", "SGD", status="paid", order_amount=1999)
        # a legacy card form (transaction_ref + approval_code + eci split
        # several ways) waits for 2C2P's paymentInquiry (docs/2C2P.md)
        self.check("2c2p", "legacy", "L1", "19.99", "SGD", status="pending", order_amount=1999,
                   outcome="pending_confirmation")
        kinds = PG.psql("SELECT provider, event_kind, outcome FROM paynotify.notifications "
                        "ORDER BY id")
        self.assertEqual(len(kinds), 11)
        # every one applied but the v2 refund, which waits for its signed
        # confirmation, and the legacy 2C2P form, which waits for the inquiry
        self.assertEqual(sorted(k for k in kinds if k[2] != "applied"),
                         [("2c2p", "paid", "pending_confirmation"),
                          ("wechatpay", "refund", "pending_confirmation")], kinds)

    def test_dispute_and_complaint_events(self):
        # a Stripe dispute of a paid order: its case, the order untouched
        self.check("stripe", "shop", "SD1", "5.00", "USD", status="paid", order_amount=500)
        for status in ("needs_response", "won"):
            r = deliver("stripe", "shop", "SD1", "5.00", "--currency", "USD", "--event",
                        "dispute", "--case", "dp_SD1", "--status", status)
            self.ok(r, 200)
            self.assertIn("outcome=dispute", r.stderr)
        self.assertEqual(PG.psql("SELECT case_kind, status, closed_at IS NOT NULL, order_id, "
                                 "amount_minor FROM paynotify.cases WHERE case_id = 'dp_SD1'"),
                         [("dispute", "won", "t", "SD1", "500")])
        self.assertEqual(PG.order("shop", "SD1")["status"], "paid")
        types = PG.psql("SELECT event_type FROM paynotify.notifications "
                        "WHERE event_kind = 'dispute' ORDER BY id")
        self.assertEqual(types, [("charge.dispute.created",), ("charge.dispute.closed",)])
        # WeChat Pay and Alipay complaints: stored, open, not linked yet
        r = deliver("wechatpay", "shop", "WC1", "0.01", "--event", "complaint",
                    "--case", "200201820200101080076610000")
        self.ok(r, 204)
        r = deliver("alipay", "shop", "AC1", "0.01", "--event", "complaint",
                    "--case", "2020092300102000000001459758")
        self.ok(r, 200)
        self.assertEqual(PG.psql("SELECT provider, case_id, closed_at IS NULL, order_id "
                                 "FROM paynotify.cases WHERE case_kind = 'complaint' "
                                 "ORDER BY provider"),
                         [("alipay", "2020092300102000000001459758", "t", None),
                          ("wechatpay", "200201820200101080076610000", "t", None)])
        p = admin("sign", "stripe", "--site", "shop", "--order", "X", "--amount", "1.00",
                  "--event", "dispute", "--status", "needs response")
        self.assertEqual(p.returncode, 64, p.stderr)
        p = admin("sign", "wechatpay", "--site", "shop", "--order", "X", "--amount", "1.00",
                  "--event", "complaint", "--v2")
        self.assertEqual(p.returncode, 78, p.stderr)
        self.assertIn("API v3 notifications only", p.stderr)

    def test_curl_command_through_http(self):
        PG.add_order("shop", "K1", 500, "USD")
        p = admin("sign", "stripe", "--site", "shop", "--order", "K1", "--amount", "5.00",
                  "--currency", "USD", "--curl", "--url", HTTP.url)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("printf '%s' '"), p.stdout)
        sh = subprocess.run(["sh", "-c", p.stdout], capture_output=True, text=True, timeout=30)
        self.assertIn("HTTP/1.0 200", sh.stdout)
        self.assertEqual(PG.order("shop", "K1")["status"], "paid")

    def test_refused_without_test_keys(self):
        p = admin("sign", "alipay", "--site", "nokeys", "--order", "X", "--amount", "1.00")
        self.assertEqual(p.returncode, 78)
        self.assertIn("site nokeys has no alipay.test_private_key_file: refusing to sign", p.stderr)
        p = admin("sign", "stripe", "--site", "nokeys", "--order", "X", "--amount", "1.00")
        self.assertEqual(p.returncode, 78)
        self.assertIn("stripe.test_signing = on: refusing to sign", p.stderr)
        p = admin("sign", "wechatpay", "--site", "nokeys", "--order", "X", "--amount", "1.00")
        self.assertEqual(p.returncode, 78)
        self.assertIn("site \"nokeys\" has no wechatpay configuration", p.stderr)
        self.assertEqual(p.stdout, "")


class TestReplay(AdminTest):
    def three(self):
        """An applied notification per provider: alipay, stripe, wechatpay."""
        PG.add_order("shop", "RA", 1000, "CNY")
        PG.add_order("shop", "RS", 1000, "USD")
        PG.add_order("shop", "RW", 1000, "CNY")
        self.ok(deliver("alipay", "shop", "RA", "10.00"))
        self.ok(deliver("stripe", "shop", "RS", "10.00", "--currency", "USD"))
        self.ok(deliver("wechatpay", "shop", "RW", "10.00"), 204)
        return nid("RA"), nid("RS"), nid("RW")

    def test_reverifies_and_flags_altered_bytes(self):
        a, s, w = self.three()
        rc, rows, summary = replay()
        self.assertEqual(rc, 0, rows)
        self.assertEqual([(r["id"], r["verified"], r["key"], r["event"], r["recorded"], r["now"],
                           r["order_status"]) for r in rows],
                         [(str(a), "yes", PUBKEY_ID, "paid", "applied", "applied", "paid"),
                          (str(s), "yes", pntest.key_id("stripe-whsec", SECRETS["stripe-whsec"]),
                           "paid", "applied", "applied", "paid"),
                          (str(w), "yes", "PUB_KEY_ID_0000000000000024101100397200000006/"
                           + pntest.key_id("wx-v3.key", SECRETS["wx-v3.key"]), "paid", "applied",
                           "applied", "paid")])
        self.assertEqual(summary, "3 notifications: 3 verified, 0 not verified, 0 need a human "
                                  "(dry run: nothing changed)")
        # change one byte of the stored Stripe body: 10.00 becomes 90.00
        PG.psql("UPDATE paynotify.notifications SET raw_body = "
                "convert_to(replace(convert_from(raw_body, 'UTF8'), '\"amount\":1000', "
                "'\"amount\":9000'), 'UTF8') WHERE id = %d" % s)
        self.assertIn(b"9000", PG.notifications("id = %d" % s)[0]["raw_body"])
        rc, rows, summary = replay()
        self.assertEqual(rc, 2, rows)
        bad = [r for r in rows if r["verified"] == "no"]
        self.assertEqual([r["id"] for r in bad], [str(s)])
        self.assertIn("could not verify", bad[0]["note"])
        self.assertIn("is still configured: the stored bytes were altered", bad[0]["note"])
        self.assertEqual(bad[0]["now"], "")
        self.assertIn("1 not verified", summary)
        p = admin("replay", "--id", str(a))     # the others still verify
        self.assertEqual(p.returncode, 0)

    def test_apply_unknown_order_once(self):
        self.ok(deliver("alipay", "shop", "LATE1", "12.34"))
        n = nid("LATE1")
        self.assertEqual(PG.notifications("id = %d" % n)[0]["outcome"], "unknown_order")
        rc, rows, _ = replay("--id", str(n))
        self.assertEqual((rc, rows[0]["now"]), (1, "unknown_order"))
        PG.add_order("shop", "LATE1", 1234, "CNY")
        before = snapshot()
        rc, rows, summary = replay("--id", str(n), "--dry-run")
        self.assertEqual((rc, rows[0]["recorded"], rows[0]["now"], rows[0]["order_status"]),
                         (0, "unknown_order", "applied", "paid"))
        self.assertIn("dry run: nothing changed", summary)
        self.assertEqual(snapshot(), before)            # the dry run changed nothing
        # listen for the transition while applying twice
        listener = pntest.Listener(PG)
        rc, rows, summary = replay("--id", str(n), "--apply")
        self.assertEqual((rc, rows[0]["now"], rows[0]["order_status"]), (0, "applied", "paid"))
        self.assertIn("1 applied now", summary)
        after_first = snapshot()
        rc, rows, summary = replay("--order", "LATE1", "--apply")
        self.assertEqual((rc, rows[0]["recorded"], rows[0]["now"]), (0, "applied", "applied"))
        self.assertIn("0 applied now", summary)
        self.assertEqual(snapshot(), after_first)       # the second apply changed nothing
        notes = listener.drain(expect=1)
        listener.close()
        self.assertEqual(len(notes), 1, notes)
        self.assertIn('"replayed" : true', notes[0])
        o = PG.order("shop", "LATE1")
        self.assertEqual((o["status"], o["psp"]), ("paid", "alipay"))
        row = PG.psql("SELECT outcome, outcome_detail, deliveries FROM paynotify.notifications "
                      "WHERE id = %d" % n)[0]
        self.assertEqual(row, ("applied", "replayed: was unknown_order", "1"))

    def test_dry_run_changes_nothing(self):
        self.three()
        self.ok(deliver("stripe", "shop", "DRY1", "3.00", "--currency", "USD"))
        PG.add_order("shop", "DRY1", 300, "USD")
        before = snapshot()
        rc, rows, _ = replay()                  # the default is a dry run
        self.assertEqual(rc, 0)
        self.assertEqual([r["now"] for r in rows if r["order"] == "DRY1"], ["applied"])
        self.assertEqual(snapshot(), before)
        self.assertEqual(PG.order("shop", "DRY1")["status"], "pending")

    def test_filters(self):
        a, s, w = self.three()
        PG.add_order("shop2", "F2", 500, "USD")
        self.ok(deliver("stripe", "shop2", "F2", "5.00", "--currency", "USD"))
        self.ok(deliver("alipay", "shop2", "F3", "1.00"))           # unknown order
        f2, f3 = nid("F2"), nid("F3")
        PG.psql("UPDATE paynotify.notifications SET received_at = '2024-01-15 12:00+00' "
                "WHERE id IN (%d, %d)" % (a, f2))
        cases = [
            (("--site", "shop2"), [f2, f3]),
            (("--site", "shop"), [a, s, w]),
            (("--provider", "alipay"), [a, f3]),
            (("--provider", "stripe", "--site", "shop2"), [f2]),
            (("--order", "RW"), [w]),
            (("--outcome", "unknown_order"), [f3]),
            (("--id", str(s)), [s]),
            (("--until", "2024-02-01"), [a, f2]),
            (("--since", "2024-02-01"), [s, w, f3]),
            (("--since", "2024-01-15 12:00+00", "--until", "2024-01-15 12:00:01+00"), [a, f2]),
        ]
        for args, want in cases:
            rc, rows, _ = replay(*args)
            self.assertEqual(ids(rows), sorted(want), args)
            self.assertEqual(rc, 1 if f3 in want else 0, args)
        p = admin("replay", "--since", "not a time")
        self.assertEqual(p.returncode, 64)
        # a duration means that long ago
        rc, rows, _ = replay("--since", "1h")
        self.assertEqual(ids(rows), sorted([s, w, f3]))

    def test_csv_and_table_formats(self):
        self.three()
        p = admin("replay", "--format", "csv")
        self.assertEqual(p.returncode, 0)
        rows = list(csv.DictReader(io.StringIO(p.stdout, newline="")))
        self.assertEqual(len(rows), 3)
        self.assertEqual(list(rows[0].keys()),
                         ["id", "site", "provider", "order", "event", "verified", "key",
                          "recorded", "now", "order_status", "note"])
        self.assertEqual({r["verified"] for r in rows}, {"yes"})
        self.assertIn("3 notifications: 3 verified", p.stderr)
        p = admin("replay", "--format", "table", "--wide")
        lines = p.stdout.split("\n")
        self.assertEqual(lines[0].split(), ["id", "site", "provider", "order", "event", "verified",
                                            "key", "recorded", "now", "order_status", "note"])
        self.assertEqual(set(lines[1]), {"-", " "})
        self.assertTrue(lines[-2].startswith("3 notifications: "), lines[-2])
        # 100 columns: order_status, of low value on a terminal, makes room (and it says so)
        p = admin("replay", "--format", "table")
        lines = p.stdout.split("\n")
        self.assertEqual(lines[0].split(), ["id", "site", "provider", "order", "event", "verified",
                                            "key", "recorded", "now", "note"])
        self.assertEqual(lines[-3], "(not shown: order_status; --wide shows every column)")
        self.assertTrue(lines[-2].startswith("3 notifications: "), lines[-2])
        self.assertEqual(admin("replay", "--format", "xml").returncode, 64)
        self.assertEqual(admin("replay", "--apply", "--to", HTTP.url).returncode, 64)

    def test_to_redelivers(self):
        PG.add_order("shop", "TO1", 1234, "CNY")
        self.ok(deliver("alipay", "shop", "TO1", "12.34"))
        a = nid("TO1")
        # a Stripe event signed an hour ago, accepted then by a receiver that
        # allowed it (tolerance 1 day); the live receiver allows 300 s
        lenient = write_config("lenient.conf", PG.conninfo(), stripe_tolerance=86400)
        PG.add_order("shop", "TO2", 500, "USD")
        path, headers, body = sign("stripe", "shop", "TO2", "5.00", "--currency", "USD")
        t_old = int(time.time()) - 3600
        headers["Stripe-Signature"] = pntest.stripe_header(SECRETS["stripe-whsec"], t_old, body)
        self.ok(pntest.run_cgi(pntest.binary("stripe"), "POST", path, headers, body,
                               config=lenient))
        s = nid("TO2")
        HTTP.requests.clear()
        p = admin("replay", "--format", "json", "--to", HTTP.url + "/", "--id", str(a))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        row = json.loads(p.stdout)[0]
        self.assertEqual((row["verified"], row["now"]), ("yes", "HTTP 200"))
        # the original request: path, body and kept headers, byte for byte
        stored = PG.notifications("id = %d" % a)[0]
        self.assertEqual(HTTP.requests[0][0], "/notify/alipay/shop")
        self.assertEqual(HTTP.requests[0][2], stored["raw_body"])
        self.assertEqual(HTTP.requests[0][1]["Content-Type"], PG.scalar(
            "SELECT raw_headers->>'Content-Type' FROM paynotify.notifications WHERE id = %d" % a))
        self.assertEqual(PG.notifications("id = %d" % a)[0]["deliveries"], 2)   # a duplicate
        p = admin("replay", "--format", "json", "--to", HTTP.url, "--id", str(s))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        row = json.loads(p.stdout)[0]
        # replay itself verifies it (freshness off); the live receiver refuses it as stale
        self.assertEqual((row["verified"], row["now"], row["note"]),
                         ("yes", "HTTP 400", "re-delivery not acknowledged"))
        self.assertEqual(HTTP.requests[-1][1]["Stripe-Signature"], headers["Stripe-Signature"])
        self.assertIn("(tolerance 300 s)", HTTP.logs[-1])
        self.assertIn("1 need a human", p.stderr)
        self.assertEqual(PG.notifications("id = %d" % s)[0]["deliveries"], 1)
        p = admin("replay", "--to", "http://127.0.0.1:9", "--id", str(a))    # nobody there
        self.assertEqual(p.returncode, 1)
        self.assertIn("unreachable", p.stdout)


class TestReport(AdminTest):
    def test_each_anomaly_then_clean(self):
        p = admin("report", "--format", "json")
        self.assertEqual((p.returncode, json.loads(p.stdout)), (0, []))
        self.assertIn("0 items need a human", p.stderr)
        self.ok(deliver("alipay", "shop", "NOORDER", "1.00"))                   # unknown order
        PG.add_order("shop", "AMT", 999, "CNY")
        self.ok(deliver("alipay", "shop", "AMT", "1.00"))                       # amount mismatch
        PG.add_order("shop", "MER", 100, "CNY")
        self.ok(deliver("alipay", "twin", "MER", "1.00", to_site="shop"))      # merchant mismatch
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency, "
                "created_at) VALUES ('shop2', 'OLD', 100, 'USD', now() - interval '2 hours')")
        PG.add_order("shop", "FRESH", 100, "USD")                               # pending, recent
        PG.add_order("shop", "MANUAL", 100, "USD", status="paid")               # paid, no notif.
        PG.add_order("shop", "OK", 100, "CNY")
        self.ok(deliver("alipay", "shop", "OK", "1.00"))                        # fine
        p = admin("report", "--format", "json")
        self.assertEqual(p.returncode, 1, p.stderr)
        got = sorted((r["kind"], r["site"], r["order_id"]) for r in json.loads(p.stdout))
        self.assertEqual(got, [("amount_mismatch", "shop", "AMT"),
                               ("merchant_mismatch", "shop", "MER"),
                               ("paid_without_notification", "shop", "MANUAL"),
                               ("pending_without_notification", "shop2", "OLD"),
                               ("unknown_order", "shop", "NOORDER")])
        self.assertIn("5 items need a human", p.stderr)
        detail = {r["order_id"]: r["detail"] for r in json.loads(p.stdout)}
        # amounts in major units with their currency
        self.assertEqual(detail["AMT"], "paid 1.00 CNY, order 9.99 CNY pending")
        self.assertEqual(detail["NOORDER"], "paid 1.00 CNY, no such order")
        amount = {r["order_id"]: r["amount"] for r in json.loads(p.stdout)}
        self.assertEqual((amount["AMT"], amount["OLD"]), ("1.00 CNY", "1.00 USD"))
        # the flagged one is stored outside the site's key space; replay
        # still re-derives its key and keeps it flagged
        self.assertTrue(PG.scalar("SELECT dedup_key FROM paynotify.notifications "
                                  "WHERE order_id = 'MER'").startswith("!merchant_mismatch:"))
        p = admin("replay", "--format", "json", "--order", "MER")
        row = json.loads(p.stdout)[0]
        self.assertEqual((row["verified"], row["now"], row["note"]),
                         ("yes", "merchant_mismatch", ""), p.stdout)
        p = admin("report", "--pending-older-than", "3h", "--format", "csv")
        self.assertEqual(p.returncode, 1)
        rows = list(csv.DictReader(io.StringIO(p.stdout, newline="")))
        self.assertEqual(len(rows), 4)
        self.assertNotIn("OLD", [r["order_id"] for r in rows])
        p = admin("report", "--site", "shop2", "--pending-older-than", "30m", "--format", "table",
                  "--wide")
        self.assertEqual(p.returncode, 1)
        self.assertIn("pending_without_notification  shop2", p.stdout)
        self.assertTrue(p.stdout.endswith("1 item needs a human\n"), p.stdout)
        # fix everything: the report is empty and cron stays quiet
        PG.psql("DELETE FROM paynotify.notifications WHERE outcome <> 'applied'; "
                "DELETE FROM paynotify.orders WHERE order_id IN ('OLD', 'MANUAL')")
        p = admin("report", "--format", "table")
        self.assertEqual((p.returncode, p.stdout.split("\n")[-2]), (0, "0 items need a human"))
        self.assertEqual(admin("report", "--pending-older-than", "soon").returncode, 64)
        for form in ("90m", "1h30m", "90 minutes", "2 hours", "1 day", "1w"):
            self.assertEqual(admin("report", "--pending-older-than", form).returncode, 0, form)


class TestStats(AdminTest):
    def test_prometheus(self):
        PG.add_order("shop", "P1", 100, "CNY")
        PG.add_order("shop", "P2", 500, "USD")
        path, headers, body = sign("alipay", "shop", "P1", "1.00")
        for _ in range(3):                      # one event, three deliveries
            self.ok(pntest.run_cgi(pntest.binary("alipay"), "POST", path, headers, body,
                                   config=CFG))
        self.ok(deliver("stripe", "shop", "P2", "5.00", "--currency", "USD"))
        self.ok(deliver("stripe", "shop2", "P3", "5.00", "--currency", "USD"))  # unknown order
        t0 = int(time.time())
        p = admin("stats", "--format", "prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.split("\n")
        for want in [
            "# TYPE paynotify_notifications_total counter",
            'paynotify_notifications_total{site="shop",provider="alipay",event_kind="paid",'
            'outcome="applied"} 1',
            'paynotify_deliveries_total{site="shop",provider="alipay",event_kind="paid",'
            'outcome="applied"} 3',
            'paynotify_duplicate_deliveries_total{site="shop",provider="alipay",'
            'event_kind="paid",outcome="applied"} 2',
            'paynotify_notifications_total{site="shop",provider="stripe",event_kind="paid",'
            'outcome="applied"} 1',
            'paynotify_notifications_total{site="shop2",provider="stripe",event_kind="paid",'
            'outcome="unknown_order"} 1',
            "# TYPE paynotify_last_notification_timestamp_seconds gauge",
        ]:
            self.assertIn(want, lines)
        last = [ln for ln in lines if ln.startswith("paynotify_last_notification_timestamp")]
        self.assertEqual([ln.split("{")[1].split("}")[0] for ln in last],
                         ['site="shop",provider="alipay"', 'site="shop",provider="stripe"',
                          'site="shop2",provider="stripe"'])
        for ln in last:
            self.assertLessEqual(abs(int(ln.split()[-1]) - t0), 60)
        # every sample line is "name{labels} number" (the textfile collector is strict)
        for ln in lines:
            if ln and not ln.startswith("#"):
                self.assertRegex(ln, r'^[a-z_]+\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\} [0-9]+$')
        p = admin("stats", "--format", "json", "--site", "shop2")
        self.assertEqual([(r["provider"], r["outcome"], r["notifications"])
                          for r in json.loads(p.stdout)], [("stripe", "unknown_order", "1")])


class TestExitStatuses(AdminTest):
    """One table for every program (docs/OPERATIONS.md, "Exit statuses")."""

    def test_unreadable_config_is_78_everywhere(self):
        missing = os.path.join(CFG_DIR, "no-such.conf")
        sql = os.path.join(REPO, "sql")
        for args in (["check-config"], ["replay"], ["report"], ["stats"],
                     ["migrate", "--sql-dir", sql],
                     ["sign", "stripe", "--site", "shop", "--order", "X", "--amount", "1.00"]):
            p = admin("-c", missing, *args)
            self.assertEqual(p.returncode, 78, (args, p.stderr))
            self.assertIn('could not open "%s"' % missing, p.stderr, args)
        for prov in ("alipay", "stripe", "wechatpay", "2c2p"):
            r = subprocess.run([pntest.binary(prov), "-t", "-c", missing], capture_output=True,
                               text=True, env=pntest.clean_env(), timeout=30)
            self.assertEqual(r.returncode, 78, (prov, r.stderr))
            r = subprocess.run([pntest.binary(prov), "-t", "-c", CFG], capture_output=True,
                               text=True, env=pntest.clean_env(), timeout=30)
            self.assertEqual(r.returncode, 0, (prov, r.stderr))

    def test_usage_is_64_everywhere(self):
        for args in (["--no-such-option"], ["check-config", "extra"], ["replay", "--bogus"],
                     ["report", "--format", "xml"], ["stats", "--format", "yaml"],
                     ["sign", "stripe"], ["migrate", "--nope"], ["no-such-command"],
                     ["migrate", "--sql-dir", "/nonexistent/sql"]):
            self.assertEqual(admin(*args).returncode, 64, args)
        for argv in (["--workers", "many"], ["--socket-mode", "999"], ["--bogus"], ["extra"]):
            r = subprocess.run([pntest.binary("stripe")] + argv, capture_output=True, text=True,
                               env=pntest.clean_env(), timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 64, (argv, r.stderr))

    def test_database_unavailable_is_3(self):
        down = write_config("down.conf", "host=/nonexistent dbname=paynotify")
        for args in (["replay"], ["report"], ["stats"],
                     ["migrate", "--sql-dir", os.path.join(REPO, "sql")],
                     ["check-config", "--user", me()]):
            p = admin("-c", down, *args)
            self.assertEqual(p.returncode, 3, (args, p.stdout, p.stderr))


class TestTypos(AdminTest):
    """Every option value is checked: a typo exits 64 with the valid values,
    instead of matching nothing and exiting 0."""

    def typo(self, args, *want):
        p = admin(*args)
        self.assertEqual(p.returncode, 64, (args, p.stdout, p.stderr))
        for w in want:
            self.assertIn(w, p.stderr, args)
        self.assertEqual(p.stdout, "", args)

    def test_every_filter(self):
        sites = "the sites are: shop, shop2, twin, legacy, nokeys"
        outcomes = ("expected one of applied, already_applied, unknown_order, amount_mismatch, "
                    "merchant_mismatch, mode_mismatch, ignored, duplicate_payment, "
                    "paid_after_close, conflicting_duplicate, txn_mismatch, combined, missing_id, "
                    "foreign_site, unhandled, refund_failed, pending_confirmation, dispute, "
                    "complaint")
        durations = "expected a duration: a number and a unit (s, m, h, d, w, or the words)"
        self.typo(["replay", "--site", "nosuch"], '--site "nosuch": no such site in %s; ' % CFG,
                  sites)
        self.typo(["replay", "--outcome", "foo"], '--outcome "foo": unknown outcome; ' + outcomes)
        self.typo(["replay", "--provider", "paypal"], '--provider "paypal": unknown provider; '
                  "expected one of alipay, stripe, wechatpay, 2c2p")
        self.typo(["replay", "--since", "yesterday-ish"], '--since "yesterday-ish": expected a time')
        self.typo(["replay", "--until", "2026-13-01"], '--until "2026-13-01": expected a time')
        self.typo(["replay", "--until", "2026-02-30"], "expected a time")
        self.typo(["replay", "--id", "12x"], '--id "12x": expected a notification id')
        self.typo(["replay", "--id", "0"], "expected a notification id")
        self.typo(["replay", "--order", ""], "--order: empty order id")
        self.typo(["replay", "--to", "ftp://x"], '--to "ftp://x": expected http://')
        self.typo(["report", "--site", "nosuch"], sites)
        self.typo(["report", "--pending-older-than", "1x"], '--pending-older-than "1x": ' + durations,
                  "1h30m")
        self.typo(["report", "--pending-older-than", "-5m"], durations)
        self.typo(["stats", "--site", "nosuch"], sites)
        self.typo(["sign", "paypal", "--site", "shop", "--order", "X", "--amount", "1"],
                  "unknown provider")
        self.typo(["sign", "stripe", "--site", "nosuch", "--order", "X", "--amount", "1"], sites)
        self.typo(["sign", "stripe", "--site", "shop", "--order", "X", "--amount", "1",
                   "--currency", "XYZ"], '--currency "XYZ": unknown currency')
        # the valid forms still work
        for args in (["replay", "--since", "2026-11-30"], ["replay", "--since", "2026-11-30 08:00+08"],
                     ["replay", "--until", "2026-11-30T08:00:00Z"], ["replay", "--since", "90 minutes"],
                     ["replay", "--since", "yesterday", "--until", "today"],
                     ["replay", "--outcome", "txn_mismatch"], ["stats", "--site", "legacy"]):
            p = admin(*args)
            self.assertEqual(p.returncode, 0, (args, p.stderr))


class TestKeyRotation(AdminTest):
    def test_rotated_out_key_is_not_tampering(self):
        PG.add_order("shop", "ROT1", 500, "USD")
        self.ok(deliver("stripe", "shop", "ROT1", "5.00", "--currency", "USD"))
        n = nid("ROT1")
        old_id = pntest.key_id("stripe-whsec", SECRETS["stripe-whsec"])
        self.assertEqual(PG.notifications("id = %d" % n)[0]["key_id"], old_id)
        # rotation: a new secret added first, the old one kept: the id still names the old one
        pntest.write_secret(os.path.join(CFG_DIR, "rotated-whsec"),
                            "whsec_the_new_one\n" + SECRETS["stripe-whsec"] + "\n")
        both = write_file("rot-both.conf", config_text(PG.conninfo()).replace(
            "stripe.secret_files = stripe-whsec", "stripe.secret_files = rotated-whsec"))
        p = admin("replay", "--format", "json", "--id", str(n), config=both)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)[0]["key"], pntest.key_id("rotated-whsec",
                                                                       SECRETS["stripe-whsec"]))
        # then the old secret removed: "no longer configured", exit 4, not "altered" (2)
        pntest.write_secret(os.path.join(CFG_DIR, "new-only-whsec"), "whsec_the_new_one\n")
        new = write_file("rot-new.conf", config_text(PG.conninfo()).replace(
            "stripe.secret_files = stripe-whsec", "stripe.secret_files = new-only-whsec"))
        p = admin("replay", "--format", "json", "--id", str(n), config=new)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        row = json.loads(p.stdout)[0]
        self.assertEqual((row["verified"], row["note"]),
                         ("key_gone", "the key that verified this notification (%s) is no "
                          "longer configured" % old_id))
        self.assertIn("1 verified by a key no longer configured", p.stderr)
        # altered bytes still win over a retired key (exit 2)
        PG.psql("UPDATE paynotify.notifications SET raw_body = raw_body || ' '::bytea "
                "WHERE id = %d" % n)
        p = admin("replay", "--format", "json", "--id", str(n))
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("the stored bytes were altered", json.loads(p.stdout)[0]["note"])

    def test_positional_ids_of_earlier_builds(self):
        PG.add_order("shop", "ROT2", 500, "USD")
        self.ok(deliver("stripe", "shop", "ROT2", "5.00", "--currency", "USD"))
        n = nid("ROT2")
        pntest.write_secret(os.path.join(CFG_DIR, "new-only-whsec"), "whsec_the_new_one\n")
        new = write_file("rot-new2.conf", config_text(PG.conninfo()).replace(
            "stripe.secret_files = stripe-whsec", "stripe.secret_files = new-only-whsec"))
        # "stripe-whsec:1": that file is no longer configured at all: gone
        PG.psql("UPDATE paynotify.notifications SET key_id = 'stripe-whsec:1' WHERE id = %d" % n)
        p = admin("replay", "--format", "json", "--id", str(n), config=new)
        self.assertEqual(p.returncode, 4, p.stdout)
        # "new-only-whsec:2": the file is configured, what line 2 was cannot be told
        PG.psql("UPDATE paynotify.notifications SET key_id = 'new-only-whsec:2' WHERE id = %d" % n)
        p = admin("replay", "--format", "json", "--id", str(n), config=new)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("it was verified by new-only-whsec:2, a key id from an earlier build",
                      json.loads(p.stdout)[0]["note"])
        # and one that still verifies verifies, whatever its stored id
        p = admin("replay", "--format", "json", "--id", str(n))
        self.assertEqual(p.returncode, 0, p.stdout)


class TestTables(AdminTest):
    def test_fit_100_columns_and_wide(self):
        PG.add_order("shop", "TAB1", 1000, "CNY")
        self.ok(deliver("wechatpay", "shop", "TAB1", "10.00"), 204)
        self.ok(deliver("alipay", "shop", "订单-二〇二六-十二月-很长的订单号", "1.00"))  # unknown order
        n = nid("TAB1")
        PG.psql("UPDATE paynotify.notifications SET raw_body = raw_body || ' '::bytea "
                "WHERE id = %d" % n)                                 # a long note
        for cmd in (["replay"], ["report"], ["stats"]):
            p = admin(*cmd, "--format", "table")
            self.assertIn(p.returncode, (0, 1, 2), (cmd, p.stderr))
            widths = [pntest_display_width(ln) for ln in p.stdout.split("\n")]
            self.assertLessEqual(max(widths), 100, (cmd, p.stdout))
            wide = admin(*cmd, "--format", "table", "--wide")
            self.assertEqual(wide.returncode, p.returncode)
            if cmd == ["replay"]:
                self.assertGreater(max(pntest_display_width(ln)
                                       for ln in wide.stdout.split("\n")), 100, wide.stdout)
                self.assertIn("订单", p.stdout)
        # wrapped, nothing lost: the note column of the row, line by line, is the note
        note = json.loads(admin("replay", "--format", "json", "--id", str(n)).stdout)[0]["note"]
        lines = admin("replay", "--format", "table", "--id", str(n)).stdout.split("\n")
        start = lines[1].rindex(" ") + 1                    # the last column's dashes
        self.assertEqual(lines[0][start:], "note")
        cell = " ".join(ln[start:] for ln in lines[2:-2])
        self.assertEqual("".join(cell.split()), "".join(note.split()))
        self.assertEqual(admin("replay", "--wide", "--format", "csv").returncode, 2)


def pntest_display_width(line):
    """Columns a terminal gives line: East Asian wide characters take two."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


if __name__ == "__main__":
    unittest.main()

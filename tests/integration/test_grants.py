# test_grants.py: the database roles of docs/DATABASE.md, as shipped.
#   - sql/roles.sql (run as a superuser) creates the roles and logins, and
#     `paynotify migrate` as paynotify_owner (owner_conninfo of the one
#     configuration, set in its conf.d/) creates the schema and applies
#     sql/grants.sql; again: idempotent, the same privileges
#   - every table, sequence and function of the schema has a decided grant
#     in sql/grants.sql's one list (an object it does not name makes
#     migrate warn, and this test fail); a role holds nothing else
#   - the receivers, logged in as a role that is only a member of
#     paynotify_receiver, ingest (a Stripe payment applied and acked, its
#     duplicate counted, the health check 200); a login role without those
#     grants, and the feed consumers' role, cannot (503, nothing stored)
#   - every admin command as the admin login paynotify_ops (admin_conninfo
#     of the same configuration): check-config, report, stats, replay
#     --apply, resolve, purge, query (against the loopback Stripe stand-in)
#     and reconcile --apply; the receivers' and the consumers' roles are
#     refused with a permission error where the command needs the admin's
#     rights, and nothing is written; migrate as the admin login is refused
#   - paynotify_consumer's grants claim and acknowledge feed events, and a
#     stale acknowledgement is refused and counted (schema 12)
#   - the documented admin login: peer authentication with the pg_ident.conf
#     map of docs/DATABASE.md lets root log in as paynotify_ops, and not
#     another system user
#   - retention (the two shell blocks of docs/DATABASE.md, run as written
#     but for the database name and the notification id): rows delivered
#     over a year ago are archived to CSV and deleted, unknown_order ones
#     stay; the archive loads back and `paynotify replay` verifies it

import os
import pwd
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402
import psp_standins  # noqa: E402
from pntest import SITE_A  # noqa: E402

KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")

DOC = os.path.join(pntest.REPO, "docs", "DATABASE.md")
ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")
SQL_DIR = os.environ.get("PN_SQL_DIR") or os.path.join(pntest.REPO, "sql")
ROLES_SQL = os.path.join(SQL_DIR, "roles.sql")
GRANTS_SQL = os.path.join(SQL_DIR, "grants.sql")
PG = None
MIGRATED = None         # the first migrate, as paynotify_owner
SI = None               # the loopback Stripe stand-in (query)
ROLES = ("paynotify_receiver", "paynotify_admin", "paynotify_consumer")
STRIPE_RK = "rk_test_51GrantsRestrictedKey0123456789"


def doc_text():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def doc_sql_blocks():
    text = doc_text()
    return re.findall(r"```sql\n(.*?)```", text, re.S), text


def conninfo(role):
    return "host=%s port=%d dbname=%s user=%s" % (PG.host, PG.port, pntest.PG_DB, role)


def add_conf_d(cfg_dir, admin="paynotify_ops", owner="paynotify_owner"):
    """The documented layout: the main file as it is, the admin and owner
    logins in conf.d/10-roles.conf beside it (one configuration)."""
    d = os.path.join(cfg_dir, "conf.d")
    os.makedirs(d, exist_ok=True)
    lines = ["[database]"]
    if admin:
        lines.append("admin_conninfo = %s" % conninfo(admin))
    if owner:
        lines.append("owner_conninfo = %s" % conninfo(owner))
    path = os.path.join(d, "10-roles.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o640)
    return path


def config(rcv="pn_rcv", admin="paynotify_ops", owner="paynotify_owner"):
    """A configuration for site shop-a: the receivers log in as rcv, the
    admin commands as admin (conf.d/), migrate as owner."""
    cfg = pntest.write_config(conninfo=conninfo(rcv))
    add_conf_d(cfg.dir, admin, owner)
    return cfg


def run_admin(cfg, *args, user="carol"):
    path = cfg if isinstance(cfg, str) else cfg.path
    return subprocess.run([ADMIN] + list(args),
                          env=pntest.clean_env({"PAYNOTIFY_CONFIG": path, "USER": user}),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def migrate(cfg):
    return run_admin(cfg, "migrate", "--sql-dir", SQL_DIR)


def grants_list():
    """(name, kind, role) of sql/grants.sql's one list."""
    with open(GRANTS_SQL, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^\s*\['([a-z_0-9]+)',\s*'(table|sequence|function)',\s*"
                      r"(?:'([a-z_]+)'|NULL)", text, re.M)


def privileges():
    """Every privilege the three roles hold on the schema's objects."""
    return sorted(PG.psql(
        "SELECT c.relname, a.grantee::regrole::text, a.privilege_type"
        "  FROM pg_class c, aclexplode(c.relacl) a"
        " WHERE c.relnamespace = 'paynotify'::regnamespace AND a.grantee <> c.relowner"
        " UNION ALL "
        "SELECT c.relname || '.' || t.attname, a.grantee::regrole::text, a.privilege_type"
        "  FROM pg_class c JOIN pg_attribute t ON t.attrelid = c.oid, aclexplode(t.attacl) a"
        " WHERE c.relnamespace = 'paynotify'::regnamespace"
        " UNION ALL "
        "SELECT p.proname, coalesce(nullif(a.grantee, 0)::regrole::text, 'PUBLIC'),"
        "       a.privilege_type"
        "  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a"
        " WHERE p.pronamespace = 'paynotify'::regnamespace AND a.grantee <> p.proowner"))


def setUpModule():
    global PG, MIGRATED
    # roles are cluster-wide: a cluster of its own, with no schema: migrate makes it
    PG = pntest.PgCluster(load_schema=False).start()
    PG.psql_file(ROLES_SQL)             # once, as a superuser (docs/DATABASE.md)
    PG.psql_file(ROLES_SQL)             # idempotent
    # the test cluster's superuser is called paynotify (the documented receivers'
    # login), so the receivers log in as another member of paynotify_receiver
    PG.psql("CREATE ROLE pn_rcv LOGIN IN ROLE paynotify_receiver; CREATE ROLE pn_nobody LOGIN; "
            "CREATE ROLE pn_shop LOGIN IN ROLE paynotify_consumer")
    MIGRATED = migrate(config())


def tearDownModule():
    if SI is not None:
        SI.stop()


def stripe_post(cfg, order_id, amount_minor, body=None):
    body = body or pntest.stripe_checkout_completed(order_id, amount_minor, currency="usd")
    r = pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/" + SITE_A.name,
                       pntest.stripe_headers(SITE_A, body), body, config=cfg)
    return r, body


class TestMigrateAndList(unittest.TestCase):
    def test_migrate_as_owner_applies_grants(self):
        p = MIGRATED
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.endswith("applied functions.sql\napplied grants.sql\n"),
                        p.stdout)
        self.assertNotIn("WARNING", p.stderr)      # every object has a decided grant
        self.assertEqual(PG.scalar("SELECT nspowner::regrole::text FROM pg_namespace "
                                   "WHERE nspname = 'paynotify'"), "paynotify_owner")
        before = privileges()
        p = migrate(config())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("nothing to do\napplied functions.sql\napplied grants.sql\n", p.stdout)
        self.assertEqual(privileges(), before)     # idempotent
        # nothing for PUBLIC, on the schema or any function
        self.assertEqual([x for x in before if x[1] == "PUBLIC"], [])
        self.assertEqual(PG.scalar("SELECT has_schema_privilege('pn_nobody', 'paynotify', "
                                   "'USAGE')::text"), "false")

    def test_every_object_has_a_decided_grant(self):
        listed = {(n, "function" if k == "function" else "rel") for n, k, _ in grants_list()}
        self.assertGreater(len(listed), 25)
        objects = PG.psql(
            "SELECT relname, 'rel' FROM pg_class WHERE relnamespace = 'paynotify'::regnamespace"
            "   AND relkind IN ('r', 'p', 'S', 'v', 'm', 'f')"
            " UNION SELECT proname, 'function' FROM pg_proc"
            "  WHERE pronamespace = 'paynotify'::regnamespace")
        self.assertIn(("feed_event_seq", "rel"), objects)
        self.assertIn(("ingest", "function"), objects)
        undecided = sorted(o for o in objects if o not in listed)
        self.assertEqual(undecided, [], "objects of schema paynotify that sql/grants.sql's "
                         "list does not name: add a line for each")
        # the roles hold nothing the list does not give
        given = {(n, r) for n, _, r in grants_list() if r}
        for obj, role, _ in privileges():
            self.assertIn((obj.split(".")[0], role), given, (obj, role))

    def test_unlisted_object_is_reported_and_listed_missing_is_an_error(self):
        PG.psql("SET ROLE paynotify_owner; CREATE TABLE paynotify.pn_unlisted (x int); "
                "CREATE FUNCTION paynotify.pn_unlisted_f() RETURNS int LANGUAGE sql AS "
                "'SELECT 1'")
        try:
            p = migrate(config())
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("no grant is decided for paynotify.pn_unlisted, "
                          "paynotify.pn_unlisted_f(): only the owner can use it", p.stderr)
            self.assertEqual(PG.scalar("SELECT has_function_privilege('pn_nobody', "
                                       "'paynotify.pn_unlisted_f()', 'EXECUTE')::text"), "false")
        finally:
            PG.psql("DROP TABLE paynotify.pn_unlisted; DROP FUNCTION paynotify.pn_unlisted_f()")
        # a name on the list that is not in the schema: an error, nothing changed
        d = pntest.temp_dir("pntest-grants-sql.")
        for f in os.listdir(SQL_DIR):
            shutil.copy(os.path.join(SQL_DIR, f), d)
        with open(os.path.join(d, "grants.sql")) as f:
            text = f.read()
        with open(os.path.join(d, "grants.sql"), "w") as f:
            f.write(text.replace("['query_runs',", "['query_runz',", 1))
        before = privileges()
        p = run_admin(config(), "migrate", "--sql-dir", d)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("grants.sql names table paynotify.query_runz, which does not exist",
                      p.stderr)
        self.assertEqual(privileges(), before)

    def test_migrate_as_admin_login_is_refused(self):
        p = migrate(config(owner=None))             # owner_conninfo unset: admin_conninfo
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("permission denied", p.stderr)

    def test_migrate_without_roles_leaves_grants_alone(self):
        # a database of another cluster with no paynotify roles: migrate as
        # its superuser works and says why it applied no grants
        other = pntest.module_database()
        try:
            cfg = pntest.write_config(other)
            p = migrate(cfg)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertNotIn("grants.sql", p.stdout)
            self.assertIn("warning: roles paynotify_admin, paynotify_consumer, "
                          "paynotify_receiver do not exist: grants.sql not applied", p.stderr)
        finally:
            other.destroy()


class TestReceivers(unittest.TestCase):
    def test_receiver_with_its_grants_ingests(self):
        cfg = config()
        PG.add_order(SITE_A.name, "G-1", 1200, "USD")
        r, body = stripe_post(cfg, "G-1", 1200)
        self.assertEqual(r.status, 200, r.stderr)
        self.assertIn("outcome=applied", r.stderr)
        self.assertEqual(PG.order(SITE_A.name, "G-1")["status"], "paid")
        r2, _ = stripe_post(cfg, "G-1", 1200, body)
        self.assertEqual(r2.status, 200, r2.stderr)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE order_id = 'G-1'"), "2")
        # an amount mismatch: the rules' general path and its detail (money_text)
        PG.add_order(SITE_A.name, "G-4", 1200, "USD")
        r3, _ = stripe_post(cfg, "G-4", 1100)
        self.assertEqual(r3.status, 200, r3.stderr)
        self.assertIn('reason="paid 11.00 USD, order 12.00 USD pending; order status pending"',
                      r3.stderr)
        h = pntest.run_cgi(pntest.binary("stripe"), "GET", "/notify/stripe/" + SITE_A.name,
                           config=cfg)
        self.assertEqual(h.status, 200, h.stderr)
        # who ran it: the row was written by pn_rcv's session, not a superuser
        self.assertEqual(PG.scalar("SELECT rolsuper::text FROM pg_roles WHERE rolname = 'pn_rcv'"),
                         "false")

    def test_roles_without_receivers_grants_cannot_ingest(self):
        for n, role in enumerate(("pn_nobody", "pn_shop")):    # pn_shop: the feed consumer
            with self.subTest(role=role):
                cfg = config(rcv=role)
                oid = "G-2-%d" % n
                PG.add_order(SITE_A.name, oid, 700, "USD")
                r, _ = stripe_post(cfg, oid, 700)
                self.assertEqual(r.status, 503, r.stderr)
                self.assertIn("permission denied", r.stderr)
                self.assertEqual(PG.order(SITE_A.name, oid)["status"], "pending")
                self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                           "WHERE order_id = %s" % pntest.q(oid)), "0")


def refused(test, p, what):
    test.assertNotEqual(p.returncode, 0, "%s: %s%s" % (what, p.stdout, p.stderr))
    test.assertIn("permission denied", p.stderr, what)


class TestAdminCommands(unittest.TestCase):
    """Each admin command as the admin login (admin_conninfo), and as the
    receivers' and consumers' roles, which must be refused."""

    def test_check_config(self):
        p = run_admin(config(), "check-config")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("(as paynotify_ops, admin_conninfo)", p.stdout)
        self.assertIn("database (receivers, conninfo): reachable as pn_rcv, may ingest",
                      p.stdout)
        self.assertRegex(p.stdout, r"  read \S+/paynotify.ini\n  then \S+/conf.d/10-roles.conf\n")
        # the receivers' role cannot read schema_version
        p = run_admin(config(admin="pn_rcv"), "check-config")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("permission denied for table schema_version", p.stdout)
        # a receivers' login without the grants: check-config says so
        p = run_admin(config(rcv="pn_nobody"), "check-config")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("ERROR: role \"pn_nobody\" lacks the receivers' grants", p.stdout)

    def test_report_stats_replay(self):
        cfg = config()
        # a payment before its order: unknown_order, then the order, then --apply
        r, _ = stripe_post(cfg, "G-3", 500)
        self.assertEqual(r.status, 200, r.stderr)
        PG.add_order(SITE_A.name, "G-3", 500, "USD")
        for role in ("pn_rcv", "pn_shop"):
            other = config(admin=role)
            refused(self, run_admin(other, "report"), "report as " + role)
            refused(self, run_admin(other, "replay", "--order", "G-3", "--apply"),
                    "replay as " + role)
        refused(self, run_admin(config(admin="pn_shop"), "stats"), "stats as pn_shop")
        self.assertEqual(PG.order(SITE_A.name, "G-3")["status"], "pending")
        for args, ok in ((["report"], (0, 1)), (["stats"], (0,)),
                         (["stats", "--format", "prometheus"], (0,)),
                         (["replay", "--order", "G-3", "--apply"], (0,))):
            p = run_admin(cfg, *args)
            self.assertIn(p.returncode, ok, "%s: %s%s" % (args, p.stdout, p.stderr))
        self.assertEqual(PG.order(SITE_A.name, "G-3")["status"], "paid")

    def test_resolve(self):
        cfg = config()
        r, _ = stripe_post(cfg, "G-6-NO-SUCH-ORDER", 500)      # unknown_order
        self.assertEqual(r.status, 200, r.stderr)
        nid = PG.scalar("SELECT id FROM paynotify.notifications "
                        "WHERE order_id = 'G-6-NO-SUCH-ORDER'")
        # the receivers' and consumers' roles are refused, and nothing is written
        for role in ("pn_rcv", "pn_shop", "pn_nobody"):
            p = run_admin(config(admin=role), "resolve", nid, "--note", "seen")
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
            self.assertIn("permission denied", p.stderr)
        self.assertIsNone(PG.scalar("SELECT resolved_by FROM paynotify.notifications "
                                    "WHERE id = %s" % nid))
        p = run_admin(cfg, "report", "--format", "csv")
        self.assertIn(",G-6-NO-SUCH-ORDER,%s," % nid, p.stdout)
        p = run_admin(cfg, "resolve", nid, "--note", "test order, never shipped")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(PG.scalar("SELECT resolved_by FROM paynotify.notifications "
                                   "WHERE id = %s" % nid), "paynotify_ops (carol)")
        p = run_admin(cfg, "report", "--format", "csv")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertNotIn("G-6-NO-SUCH-ORDER", p.stdout)

    def test_purge(self):
        cfg = config()
        PG.add_order(SITE_A.name, "G-7", 300, "USD")
        r, _ = stripe_post(cfg, "G-7", 300)
        self.assertEqual(r.status, 200, r.stderr)
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '2 years', "
                "last_delivery_at = now() - interval '2 years' WHERE order_id = 'G-7'")
        work = pntest.temp_dir("pntest-grants-purge.")
        archive = os.path.join(work, "a.csv")
        for role in ("pn_rcv", "pn_shop"):
            p = run_admin(config(admin=role), "purge", "--archive", archive)
            refused(self, p, "purge as " + role)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id = 'G-7'"), "1")
        p = run_admin(cfg, "purge", "--archive", archive, "--dry-run")
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        p = run_admin(cfg, "purge", "--archive", archive)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id = 'G-7'"), "0")
        with open(archive) as f:
            self.assertIn(",G-7,", f.read())

    def stripe_query_config(self, admin="paynotify_ops"):
        global SI
        if SI is None:
            SI = psp_standins.Standins(
                provider_key=os.path.join(KEYS, "test-a.key.pem"),
                wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys",
                                       "site-b-private.pem"),
                merchant_pub=os.path.join(KEYS, "test-b.pub.pem"),
                app_id=pnkit.ALIPAY_APP_ID, mchid=pnkit.WX_MCHID,
                merchant_serial="5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
                wx_pubid=pnkit.WX_PUBID, stripe_key=STRIPE_RK,
                twoc2p_merchant=pnkit.TWOC2P_MERCHANT, twoc2p_secret=pnkit.TWOC2P_KEY,
                wx_apiv2=pnkit.WX_APIV2)
        cfg = pnkit.write_all_config(PG, conninfo=conninfo("pn_rcv"))
        pntest.write_secret(os.path.join(cfg.dir, "stripe-rk"), STRIPE_RK + "\n")
        with open(cfg.path) as f:
            text = f.read()
        text = text.replace("[site %s]\n" % pnkit.SITE, "\n".join([
            "[query]", "ca_file = %s" % SI.ca_file, "connect_timeout_ms = 1000",
            "timeout_ms = 3000", "", "[site %s]" % pnkit.SITE,
            "stripe.query_key_file = stripe-rk", "stripe.query_url = %s" % SI.url,
            "stripe.mode = test", ""]))
        with open(cfg.path, "w") as f:
            f.write(text)
        add_conf_d(cfg.dir, admin)
        return cfg.path

    def test_query(self):
        oid, pi = "G-8-" + pnkit.seq(), "pi_test_" + pnkit.seq()
        PG.add_order(pnkit.SITE, oid, 1999, "USD")
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '1 hour' "
                "WHERE order_id = %s" % pntest.q(oid))
        cfg = self.stripe_query_config()
        SI.state[("stripe", pi)] = {"id": pi, "order_id": oid, "amount": 1999,
                                    "currency": "usd", "status": "succeeded"}
        runs = PG.scalar("SELECT count(*) FROM paynotify.query_runs")
        # a dry run as the receivers' role asks, but cannot record the run
        p = run_admin(self.stripe_query_config("pn_rcv"), "query", "--provider", "stripe",
                      "--order", oid)
        self.assertIn("could not record the query run: query failed: ERROR:  permission "
                      "denied for table query_runs", p.stderr)
        # the consumers' role cannot even read the orders
        refused(self, run_admin(self.stripe_query_config("pn_shop"), "query", "--provider",
                                "stripe", "--order", oid, "--apply"), "query as pn_shop")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.query_runs"), runs)
        self.assertEqual(PG.order(pnkit.SITE, oid)["status"], "pending")
        p = run_admin(cfg, "query", "--provider", "stripe", "--order", oid, "--apply")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(PG.order(pnkit.SITE, oid)["status"], "paid")
        self.assertEqual(int(PG.scalar("SELECT count(*) FROM paynotify.query_runs")),
                         int(runs) + 1)     # recorded (query_runs_id_seq)
        p = run_admin(cfg, "stats", "--format", "prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("paynotify_query_last_run", p.stdout)

    def test_reconcile_apply(self):
        import test_reconcile as tr
        oid, pi = "G-9-" + tr.digits(), "pi_test_recon" + tr.digits()
        PG.add_order(pnkit.SITE, oid, 1999, "USD")
        tr.clear_of_midnight(0)
        t = tr.now_in(0).strftime("%Y-%m-%d %H:%M:%S")
        stmt = os.path.join(pntest.temp_dir("pntest-grants-recon."), "stripe.csv")
        with open(stmt, "wb") as f:
            f.write(tr.stripe_report([{"time": t, "category": "charge", "minor": 1999,
                                       "pi": pi, "oid": oid}]))
        cfg = self.stripe_query_config()
        p = run_admin(cfg, "reconcile", "--provider", "stripe", "--site", pnkit.SITE,
                      "--statement", stmt, "--apply", "--format", "csv")
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assertIn("missing_payment", p.stdout)
        self.assertEqual(PG.order(pnkit.SITE, oid)["status"], "paid", p.stdout + p.stderr)
        refused(self, run_admin(self.stripe_query_config("pn_shop"), "reconcile", "--provider",
                                "stripe", "--site", pnkit.SITE, "--statement", stmt),
                "reconcile as pn_shop")


class TestAdminLogin(unittest.TestCase):
    """The documented peer map: root reaches paynotify_ops and paynotify_owner
    (the system user paynotify does not exist here), another user does not."""

    def doc_lines(self):
        text = doc_text()
        m = re.search(r"<<'MAP'\n(.*?)\nMAP\n", text, re.S)
        h = re.search(r"sed -i '1i (local .*?)' \"\$hba\"", text)
        self.assertIsNotNone(m, "docs/DATABASE.md: the pg_ident.conf map")
        self.assertIsNotNone(h, "docs/DATABASE.md: the pg_hba.conf line")
        return m.group(1).split("\n"), h.group(1)

    def psql_as(self, system_user, role):
        argv = ["psql", "-X", "-At", "-h", PG.host, "-p", str(PG.port), "-U", role,
                "-d", pntest.PG_DB, "-c", "SELECT current_user"]
        if system_user is not None:
            argv = ["runuser", "-u", system_user, "--"] + argv
        return subprocess.run(argv, env=pntest.clean_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)

    def wait_for(self, ok):
        deadline = time.monotonic() + pntest.patience(30)
        while not ok():
            self.assertLess(time.monotonic(), deadline, "PostgreSQL did not reload its hba")
            time.sleep(0.05)

    def test_peer_map(self):
        ident_lines, hba_line = self.doc_lines()
        self.assertIn("paynotify  paynotify  paynotify_ops", ident_lines)  # the timers
        me = "root" if pntest.IS_ROOT else pwd.getpwuid(os.getuid()).pw_name
        ident = os.path.join(PG.data, "pg_ident.conf")
        hba = os.path.join(PG.data, "pg_hba.conf")
        with open(ident) as f:
            old_ident = f.read()
        with open(hba) as f:
            old_hba = f.read()
        # the test cluster's superuser is called paynotify: keep it on trust
        line = hba_line.replace(" shop ", " %s " % pntest.PG_DB).replace(
            "paynotify,paynotify_ops", "paynotify_ops")
        self.assertIn("peer map=paynotify", line)
        try:
            with open(ident, "a") as f:
                f.write("\n".join(l.replace(" root ", " %s " % me) for l in ident_lines)
                        + "\n")
            with open(hba, "w") as f:
                f.write(line + "\n" + old_hba)
            PG.psql("SELECT pg_reload_conf()")
            if pntest.IS_ROOT:      # another system user is refused once it applies
                self.wait_for(lambda: self.psql_as("nobody", "paynotify_ops").returncode != 0)
                p = self.psql_as("nobody", "paynotify_ops")
                self.assertIn("Peer authentication failed for user \"paynotify_ops\"",
                              p.stderr)
            for role in ("paynotify_ops", "paynotify_owner"):
                p = self.psql_as(None, role)
                self.assertEqual((p.returncode, p.stdout.strip()), (0, role), p.stderr)
            # and the admin commands log in that way, with no password
            cfg = config()
            with open(os.path.join(cfg.dir, "conf.d", "10-roles.conf"), "w") as f:
                f.write("[database]\nadmin_conninfo = host=%s port=%d dbname=%s "
                        "user=paynotify_ops\n" % (PG.host, PG.port, pntest.PG_DB))
            p = run_admin(cfg, "stats")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        finally:
            with open(hba, "w") as f:
                f.write(old_hba)
            with open(ident, "w") as f:
                f.write(old_ident)
            PG.psql("SELECT pg_reload_conf()")
            if pntest.IS_ROOT:
                self.wait_for(lambda: self.psql_as("nobody", "paynotify_ops").returncode == 0)


class TestOneConfiguration(unittest.TestCase):
    def test_shipped_example_then_conf_d(self):
        """The documented layout: the package's example as it is, the database in
        conf.d/10-database.conf (migrate needs no site), then a site's file."""
        d = pntest.temp_dir("pntest-grants-confd.")
        shutil.copy(os.path.join(pntest.REPO, "conf", "paynotify.conf.example"),
                    os.path.join(d, "paynotify.conf"))
        conf_d = os.path.join(d, "conf.d")
        os.mkdir(conf_d, 0o750)
        with open(os.path.join(conf_d, "10-database.conf"), "w") as f:
            f.write("[database]\nconninfo = %s\nadmin_conninfo = %s\nowner_conninfo = %s\n"
                    % (conninfo("pn_rcv"), conninfo("paynotify_ops"),
                       conninfo("paynotify_owner")))
        os.chmod(os.path.join(conf_d, "10-database.conf"), 0o640)
        main = os.path.join(d, "paynotify.conf")
        p = migrate(main)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("applied grants.sql", p.stdout)
        p = run_admin(main, "check-config")
        self.assertEqual(p.returncode, 78, p.stdout + p.stderr)
        self.assertIn("no [site NAME] section here or in %s/conf.d/*.conf" % d, p.stdout)
        # a site of its own file: the receivers and the admin commands see it alike
        src = pntest.write_config(conninfo=conninfo("pn_rcv"))
        with open(src.path) as f:
            site = f.read()
        site = site[site.index("[site %s]" % SITE_A.name):]
        site = site[:site.index("\n\n")].replace("secrets/", src.dir + "/secrets/").replace(
            "keys/", src.dir + "/keys/")
        with open(os.path.join(conf_d, "50-shop-a.conf"), "w") as f:
            f.write(site + "\n")
        p = run_admin(main, "check-config")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("  then %s/conf.d/10-database.conf\n  then %s/conf.d/50-shop-a.conf\n"
                      % (d, d), p.stdout)
        self.assertIn("site shop-a (%s/conf.d/50-shop-a.conf:1)" % d, p.stdout)
        PG.add_order(SITE_A.name, "G-10", 800, "USD")
        r, _ = stripe_post(main, "G-10", 800)
        self.assertEqual(r.status, 200, r.stderr)
        self.assertEqual(PG.order(SITE_A.name, "G-10")["status"], "paid")
        # the same key in two files: refused, both places named
        with open(os.path.join(conf_d, "60-again.conf"), "w") as f:
            f.write("[database]\nadmin_conninfo = %s\n" % conninfo("pn_rcv"))
        os.chmod(os.path.join(conf_d, "60-again.conf"), 0o600)
        p = run_admin(main, "report")
        self.assertEqual(p.returncode, 78, p.stdout + p.stderr)
        self.assertIn("60-again.conf:2: key \"admin_conninfo\" of [database] is set twice "
                      "(first at %s/conf.d/10-database.conf:3)" % d, p.stderr)



class TestFollowUpGrants(unittest.TestCase):
    def test_shop_inserts_orders_admin_works_the_follow_up_schedule(self):
        # the shop's two documented grants only: its INSERT schedules the order
        # (the trigger's function runs as its owner)
        PG.psql("DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pn_shop_ins')"
                " THEN CREATE ROLE pn_shop_ins LOGIN; END IF; END$$;"
                " GRANT USAGE ON SCHEMA paynotify TO pn_shop_ins;"
                " GRANT SELECT, INSERT ON paynotify.orders TO pn_shop_ins;")
        import psycopg2
        conn = psycopg2.connect(host=PG.host, port=PG.port, user="pn_shop_ins",
                                dbname=pntest.PG_DB)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency)"
                        " VALUES (%s, 'G-FU1', 900, 'USD')", (SITE_A.name,))
            with self.assertRaises(psycopg2.Error):     # and nothing more
                cur.execute("SELECT * FROM paynotify.follow_ups")
        conn.close()
        self.assertEqual(PG.scalar("SELECT state FROM paynotify.follow_ups "
                                   "WHERE order_id = 'G-FU1'"), "scheduled")
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '1 second' "
                "WHERE order_id = 'G-FU1'")
        # the receivers' role may not work the schedule
        p = run_admin(config(admin="pn_rcv"), "query", "--due", "--apply")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("permission denied", p.stderr)
        # the admin login: swept, claimed, asked (no query credentials in this
        # configuration: attention, exit 1) and recorded
        adm = config()
        p = run_admin(adm, "query", "--due", "--apply", "--format", "csv")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(",G-FU1,", p.stdout)
        self.assertNotIn("could not record the query run", p.stderr)   # query_runs' sequence
        self.assertEqual(PG.psql("SELECT state, attempts, last_result FROM paynotify.follow_ups "
                                 "WHERE order_id = 'G-FU1'"), [("scheduled", "1", "attention")])
        p = run_admin(adm, "stats", "--follow-up", "--format", "csv")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # (other tests' pending orders are scheduled too: none is due)
        self.assertRegex(p.stdout, r"\n%s,0,[1-9][0-9]*,0,0,0,0\n" % SITE_A.name)


class TestConsumerGrants(unittest.TestCase):
    def as_shop(self, sql):
        import psycopg2
        conn = psycopg2.connect(host=PG.host, port=PG.port, user="pn_shop", dbname=pntest.PG_DB,
                                connect_timeout=30)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                rows = cur.fetchall() if cur.description else []
            return rows, list(conn.notices)
        finally:
            conn.close()

    def test_consumer_claims_acks_and_is_fenced(self):
        import time
        import psycopg2
        PG.psql("TRUNCATE paynotify.feed")
        cfg = config()
        PG.add_order(SITE_A.name, "G-5", 900, "USD")
        r, _ = stripe_post(cfg, "G-5", 900)
        self.assertEqual(r.status, 200, r.stderr)
        a, _ = self.as_shop("SELECT event_id, lease_token::text, order_id FROM "
                            "paynotify.claim_events('default', 10, 1)")
        self.assertEqual([x[2] for x in a], ["G-5"])
        time.sleep(1.3)
        b, _ = self.as_shop("SELECT event_id, lease_token::text FROM "
                            "paynotify.claim_events('default', 10, 60)")
        self.assertEqual([x[0] for x in b], [a[0][0]])
        rows, notices = self.as_shop("SELECT paynotify.ack_events('default', ARRAY[%d]::bigint[], "
                                     "'%s')" % (a[0][0], a[0][1]))
        self.assertEqual(rows, [(0,)])
        self.assertTrue(any("refused" in n for n in notices), notices)
        rows, _ = self.as_shop("SELECT paynotify.ack_events('default', ARRAY[%d]::bigint[], "
                               "'%s')" % (b[0][0], b[0][1]))
        self.assertEqual(rows, [(1,)])
        self.assertEqual(PG.scalar("SELECT stale_acks FROM paynotify.feed_consumers "
                                   "WHERE consumer = 'default'"), "1")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.feed"), "0")
        # the consumer's role cannot ingest, nor add itself a group
        with self.assertRaisesRegex(psycopg2.Error, "permission denied"):
            self.as_shop("SELECT paynotify.feed_subscribe('other')")
        # the admin's stats see the feed
        p = run_admin(config(), "stats", "--format", "prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('paynotify_feed_stale_acks_total{consumer="default"} 1\n', p.stdout)
        self.assertIn('paynotify_feed_events{consumer="default"} 0\n', p.stdout)


def sh_blocks():
    _, text = doc_sql_blocks()
    return re.findall(r"```sh\n(.*?)```", text, re.S)


class TestRetention(unittest.TestCase):
    def test_archive_and_reload(self):
        archive = [b for b in sh_blocks() if "notifications-archive.csv' WITH" in b
                   and "DELETE FROM" in b]
        reload_ = [b for b in sh_blocks() if "\\copy paynotify.notifications FROM" in b]
        self.assertEqual((len(archive), len(reload_)), (1, 1), "the doc's retention blocks")
        cfg = pntest.write_config(PG)
        ids = []
        for order, known in (("R-1", True), ("R-2", True), ("R-3", False)):
            if known:
                PG.add_order(SITE_A.name, order, 900, "USD")
            r, _ = stripe_post(cfg, order, 900)
            self.assertEqual(r.status, 200, r.stderr)
            ids.append(PG.scalar("SELECT id FROM paynotify.notifications WHERE order_id = %s"
                                 % pntest.q(order)))
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '2 years', "
                "last_delivery_at = now() - interval '2 years' WHERE order_id LIKE 'R-%'")
        work = pntest.temp_dir("pntest-archive.")
        env = pntest.clean_env(PG.libpq_env())
        env["PATH"] = os.path.dirname(ADMIN) + ":" + env["PATH"]
        env["PAYNOTIFY_CONFIG"] = cfg.path
        db = "-d %s " % pntest.PG_DB

        def sh(script):
            # the test database instead of shop; its superuser instead of the
            # owner role (this cluster has none: test_docs_run.py runs the
            # blocks with it)
            script = script.replace("-d shop ", db).replace("-U paynotify_owner ", "")
            p = subprocess.run(["bash", "-e", "-c", script], cwd=work,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            return p

        sh(archive[0])
        self.assertTrue(os.path.exists(os.path.join(work, "notifications-archive.csv.gz")))
        left = PG.psql("SELECT order_id, outcome FROM paynotify.notifications "
                       "WHERE order_id LIKE 'R-%' ORDER BY order_id")
        self.assertEqual(left, [("R-3", "unknown_order")])
        p = sh(reload_[0].replace("--id 17", "--id %s --format csv" % ids[0]))
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id IN ('R-1', 'R-2')"), "2")
        self.assertIn("%s,%s,stripe,R-1,paid,yes," % (ids[0], SITE_A.name), p.stdout)


if __name__ == "__main__":
    unittest.main()

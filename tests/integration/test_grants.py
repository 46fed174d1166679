# test_grants.py: the database roles of docs/DATABASE.md, as documented.
#   - the grants block of docs/DATABASE.md (run verbatim after the schema)
#     is enough for a receiver logged in as a role that is only a member of
#     paynotify_receiver: a Stripe payment is applied and acked, its
#     duplicate counted, the health check answers 200
#   - a login role without those grants cannot ingest: 503 + failure form,
#     nothing stored, the order untouched (so the test above can fail)
#   - paynotify_admin's grants run report, stats, replay --apply and resolve
#     (a role without them is refused)
#   - paynotify_consumer's grants claim and acknowledge feed events, and a
#     stale acknowledgement is refused and counted (schema 12) for a role
#     that is only a member of paynotify_consumer, which cannot ingest
#   - retention (the two shell blocks of docs/DATABASE.md, run as written
#     but for the database name and the notification id): rows delivered
#     over a year ago are archived to CSV and deleted, unknown_order ones
#     stay; the archive loads back and `paynotify replay` verifies it

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
from pntest import SITE_A  # noqa: E402

DOC = os.path.join(pntest.REPO, "docs", "DATABASE.md")
ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")
PG = None


def doc_sql_blocks():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```sql\n(.*?)```", text, re.S), text


def grants_block():
    """The block after the marker comment: the one the doc says is tested."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- grants: tests/integration/test_grants.py runs the next block -->\n"
                  r"```sql\n(.*?)```", text, re.S)
    if m is None:
        raise AssertionError("docs/DATABASE.md has no grants block after its marker")
    return m.group(1)


def roles_block():
    """The first block: CREATE ROLE ... for database `shop`; the test
    database is called paynotify."""
    blocks, _ = doc_sql_blocks()
    first = blocks[0]
    if "CREATE ROLE paynotify_receiver" not in first:
        raise AssertionError("the first SQL block of docs/DATABASE.md no longer creates the roles")
    return first.replace("DATABASE shop", "DATABASE %s" % pntest.PG_DB)


def setUpModule():
    global PG
    PG = pntest.PgCluster().start()
    # The documented roles; the documented login role `paynotify` is the
    # test cluster's superuser here, so the receivers log in as another
    # member of paynotify_receiver, and the admin as a member of
    # paynotify_admin.
    PG.psql(roles_block().replace(
        "CREATE ROLE paynotify LOGIN IN ROLE paynotify_receiver;",
        "CREATE ROLE pn_rcv LOGIN IN ROLE paynotify_receiver;"))
    PG.psql("CREATE ROLE pn_adm LOGIN IN ROLE paynotify_admin; CREATE ROLE pn_nobody LOGIN; "
            "CREATE ROLE pn_shop LOGIN IN ROLE paynotify_consumer")
    PG.psql(grants_block())


def conninfo(role):
    return "host=%s port=%d dbname=%s user=%s" % (PG.host, PG.port, pntest.PG_DB, role)


def stripe_post(cfg, order_id, amount_minor, body=None):
    body = body or pntest.stripe_checkout_completed(order_id, amount_minor, currency="usd")
    r = pntest.run_cgi(pntest.binary("stripe"), "POST", "/notify/stripe/" + SITE_A.name,
                       pntest.stripe_headers(SITE_A, body), body, config=cfg)
    return r, body


class TestGrants(unittest.TestCase):
    def test_roles_block_creates_login_role_paynotify(self):
        # what the test replaces must be what the doc says
        self.assertIn("CREATE ROLE paynotify LOGIN IN ROLE paynotify_receiver;", roles_block())

    def test_receiver_with_documented_grants_ingests(self):
        cfg = pntest.write_config(conninfo=conninfo("pn_rcv"))
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

    def test_role_without_grants_cannot_ingest(self):
        cfg = pntest.write_config(conninfo=conninfo("pn_nobody"))
        PG.add_order(SITE_A.name, "G-2", 700, "USD")
        r, _ = stripe_post(cfg, "G-2", 700)
        self.assertEqual(r.status, 503, r.stderr)
        self.assertIn("permission denied", r.stderr)
        self.assertEqual(PG.order(SITE_A.name, "G-2")["status"], "pending")
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE order_id = 'G-2'"), "0")

    def test_admin_grants_run_report_stats_replay(self):
        rcv = pntest.write_config(conninfo=conninfo("pn_rcv"))
        adm = pntest.write_config(conninfo=conninfo("pn_adm"))
        # a payment before its order: unknown_order, then the order, then --apply
        r, _ = stripe_post(rcv, "G-3", 500)
        self.assertEqual(r.status, 200, r.stderr)
        PG.add_order(SITE_A.name, "G-3", 500, "USD")
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": adm.path})
        for args, ok in ((["report"], (0, 1)), (["stats"], (0,)),
                         (["replay", "--order", "G-3", "--apply"], (0,)),
                         (["check-config"], (0,))):
            p = subprocess.run([ADMIN] + args, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=60)
            self.assertIn(p.returncode, ok, "%s: %s%s" % (args, p.stdout, p.stderr))
        self.assertEqual(PG.order(SITE_A.name, "G-3")["status"], "paid")

    def test_admin_grants_run_resolve(self):
        rcv = pntest.write_config(conninfo=conninfo("pn_rcv"))
        adm = pntest.write_config(conninfo=conninfo("pn_adm"))
        nobody = pntest.write_config(conninfo=conninfo("pn_nobody"))
        r, _ = stripe_post(rcv, "G-6-NO-SUCH-ORDER", 500)      # unknown_order
        self.assertEqual(r.status, 200, r.stderr)
        nid = PG.scalar("SELECT id FROM paynotify.notifications "
                        "WHERE order_id = 'G-6-NO-SUCH-ORDER'")

        def run(cfg, *args):
            return subprocess.run([ADMIN] + list(args),
                                  env=pntest.clean_env({"PAYNOTIFY_CONFIG": cfg.path,
                                                        "USER": "carol"}),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)
        # a role without the grants is refused, and nothing is written
        p = run(nobody, "resolve", nid, "--note", "seen")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("permission denied", p.stderr)
        self.assertIsNone(PG.scalar("SELECT resolved_by FROM paynotify.notifications "
                                    "WHERE id = %s" % nid))
        p = run(adm, "report", "--format", "csv")
        self.assertIn(",G-6-NO-SUCH-ORDER,%s," % nid, p.stdout)
        p = run(adm, "resolve", nid, "--note", "test order, never shipped")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(PG.scalar("SELECT resolved_by FROM paynotify.notifications "
                                   "WHERE id = %s" % nid), "pn_adm (carol)")
        p = run(adm, "report", "--format", "csv")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertNotIn("G-6-NO-SUCH-ORDER", p.stdout)


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
                        " VALUES (%s, 'G-7', 900, 'USD')", (SITE_A.name,))
            with self.assertRaises(psycopg2.Error):     # and nothing more
                cur.execute("SELECT * FROM paynotify.follow_ups")
        conn.close()
        self.assertEqual(PG.scalar("SELECT state FROM paynotify.follow_ups "
                                   "WHERE order_id = 'G-7'"), "scheduled")
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '1 second' "
                "WHERE order_id = 'G-7'")
        adm = pntest.write_config(conninfo=conninfo("pn_adm"))
        nobody = pntest.write_config(conninfo=conninfo("pn_nobody"))
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": nobody.path})
        p = subprocess.run([ADMIN, "query", "--due", "--apply"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("permission denied", p.stderr)
        # the admin role: swept, claimed, asked (no query credentials in this
        # configuration: attention, exit 1) and recorded
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": adm.path})
        p = subprocess.run([ADMIN, "query", "--due", "--apply", "--format", "csv"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(",G-7,", p.stdout)
        self.assertNotIn("could not record the query run", p.stderr)   # query_runs' sequence
        self.assertEqual(PG.psql("SELECT state, attempts, last_result FROM paynotify.follow_ups "
                                 "WHERE order_id = 'G-7'"), [("scheduled", "1", "attention")])
        p = subprocess.run([ADMIN, "stats", "--follow-up", "--format", "csv"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
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
        cfg = pntest.write_config(conninfo=conninfo("pn_rcv"))
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
        adm = pntest.write_config(conninfo=conninfo("pn_adm"))
        p = subprocess.run([ADMIN, "stats", "--format", "prometheus"],
                           env=pntest.clean_env({"PAYNOTIFY_CONFIG": adm.path}),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
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
            p = subprocess.run(["bash", "-e", "-c", script.replace("-d shop ", db)], cwd=work,
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

# test_resolve.py: paynotify resolve (issue 24, item 7; docs/OPERATIONS.md
# "resolve").  Real notifications stored by the real receivers: a shared
# Alipay app's foreign events (merchant_mismatch), an unknown order and an
# amount mismatch (Stripe).  Resolving by id and by class records who, when
# and why; report exits 0 once everything is resolved; purge archives and
# deletes resolved old rows and keeps unresolved ones; applied rows and
# dispute events are refused; every option is validated (64, with the valid
# values); --dry-run changes nothing; two purges on one day both succeed,
# each with its own archive.

import csv
import io
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

PG = None
CFG = None
ADMIN = os.path.join(pntest.REPO, "paynotify")
SITE = pnkit.SITE
OTHER_SELLER = "2088009999999999"     # the other merchant of a shared Alipay app


def setUpModule():
    global PG, CFG
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG)


def tearDownModule():
    if PG is not None:
        PG.destroy()


def run(*args, env=None):
    e = pntest.clean_env(env or {})
    p = subprocess.run(pntest.valgrind_argv([ADMIN, "-c", CFG.path] + list(args)), env=e,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def rows_csv(text):
    return list(csv.DictReader(io.StringIO(text)))


class Resolve(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stripe = pnkit.Receiver("stripe", CFG, workers=1).start()
        cls.alipay = pnkit.Receiver("alipay", CFG, workers=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.stripe.stop()
        cls.alipay.stop()

    def setUp(self):
        PG.reset()
        self.dir = pntest.temp_dir("pntest-resolve.")

    def stripe_send(self, oid, eid, amount=1999):
        h, b = pnkit.stripe_paid(oid, amount, event_id=eid)
        r = pnkit.oneshot(self.stripe.sock, "POST", pnkit.path("stripe"), h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)

    def foreign_alipay(self, oid):
        h, b = pnkit.alipay_paid(oid, "19.99", seller_id=OTHER_SELLER)
        r = pnkit.oneshot(self.alipay.sock, "POST", pnkit.path("alipay"), h, b)
        self.assertTrue(pnkit.is_success("alipay", r), r)

    def ids(self, where):
        return [r[0] for r in PG.psql("SELECT id::text FROM paynotify.notifications WHERE %s "
                                      "ORDER BY id" % where)]

    def resolution(self, nid):
        return PG.psql("SELECT CASE WHEN resolved_at IS NULL THEN 'f' ELSE 't' END, resolved_by, resolution_note, "
                       "resolved_outcome::text FROM paynotify.notifications WHERE id = %s" % nid)[0]

    def store_findings(self):
        """Two foreign Alipay events, one unknown order, one amount mismatch,
        one applied payment; returns the outcomes by id."""
        PG.add_order(SITE, "A1", 1999, "USD")
        PG.add_order(SITE, "A2", 1999, "USD")
        PG.add_order(SITE, "ALI1", 1999, "CNY")
        PG.add_order(SITE, "ALI2", 1999, "CNY")
        self.stripe_send("A1", "evt_applied")
        self.stripe_send("NOPE", "evt_unknown")
        self.stripe_send("A2", "evt_mismatch", amount=1)
        self.foreign_alipay("ALI1")
        self.foreign_alipay("ALI2")
        got = dict(PG.psql("SELECT id::text, outcome::text FROM paynotify.notifications"))
        self.assertEqual(sorted(got.values()),
                         ["amount_mismatch", "applied", "merchant_mismatch",
                          "merchant_mismatch", "unknown_order"])
        return got

    def test_by_id_and_by_class_then_report_exits_0(self):
        self.store_findings()
        rc, out, err = run("report", "--format", "csv")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("4 items need a human", err)

        # by class: the other merchant's events of the shared Alipay app
        rc, out, err = run("resolve", "--outcome", "merchant_mismatch", "--site", SITE,
                           "--provider", "alipay", "--note", "shared app: seller 2088009999999999",
                           "--format", "csv", env={"USER": "paynotify", "SUDO_USER": "alice"})
        self.assertEqual(rc, 0, out + err)
        self.assertIn("resolved 2 notifications", err)
        printed = rows_csv(out)
        self.assertEqual(sorted(r["id"] for r in printed),
                         sorted(self.ids("outcome = 'merchant_mismatch'")))
        for r in printed:
            self.assertEqual(r["outcome"], "merchant_mismatch")
            self.assertEqual(r["note"], "shared app: seller 2088009999999999")
        role = PG.scalar("SELECT current_user")
        for nid in self.ids("outcome = 'merchant_mismatch'"):
            self.assertEqual(self.resolution(nid),
                             ("t", "%s (alice)" % role, "shared app: seller 2088009999999999",
                              "merchant_mismatch"))
        rc, out, err = run("report", "--format", "csv")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("2 items need a human", err)
        self.assertNotIn("merchant_mismatch", out)

        # by id: the two Stripe findings; $USER when there is no $SUDO_USER
        two = self.ids("outcome IN ('unknown_order', 'amount_mismatch')")
        rc, out, err = run("resolve", *two, "--note", "refunded by hand, ticket 42",
                           "--format", "csv", env={"USER": "bob"})
        self.assertEqual(rc, 0, out + err)
        self.assertIn("resolved 2 notifications", err)
        self.assertEqual(sorted(r["id"] for r in rows_csv(out)), sorted(two))
        for nid in two:
            self.assertEqual(self.resolution(nid)[1], "%s (bob)" % role)
        rc, out, err = run("report", "--format", "csv")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("0 items need a human", err)

        # again: already resolved, left as it is (the first resolution stays)
        rc, out, err = run("resolve", two[0], "--note", "again", "--format", "csv")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("notification %s was resolved at" % two[0], err)
        self.assertIn("resolved 0 notifications", err)
        self.assertEqual(self.resolution(two[0])[2], "refunded by hand, ticket 42")

        # a resolution holds for the outcome it looked at: a row that later
        # has another outcome is on report again
        PG.psql("UPDATE paynotify.notifications SET outcome = 'txn_mismatch' WHERE id = %s"
                % two[0])
        rc, out, err = run("report", "--format", "csv")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual([r["notification_id"] for r in rows_csv(out)], [two[0]])

    def test_final_rows_refused_all_or_nothing(self):
        got = self.store_findings()
        applied = [k for k, v in got.items() if v == "applied"][0]
        unknown = [k for k, v in got.items() if v == "unknown_order"][0]
        rc, out, err = run("resolve", unknown, applied, "--note", "x")
        self.assertEqual(rc, 64, out + err)
        self.assertIn("notification %s is applied: nothing to resolve" % applied, err)
        self.assertIn("nothing resolved", err)
        self.assertEqual(self.resolution(unknown), ("f", None, None, None))
        rc, out, err = run("resolve", "999999", "--note", "x")
        self.assertEqual(rc, 64, out + err)
        self.assertIn("no notification 999999", err)
        # a dispute's event ends with its case, never by hand
        PG.psql("UPDATE paynotify.notifications SET outcome = 'dispute' WHERE id = %s" % unknown)
        rc, out, err = run("resolve", unknown, "--note", "x")
        self.assertEqual(rc, 64, out + err)
        self.assertIn("a case ends when the provider closes it", err)
        self.assertEqual(PG.scalar("SELECT count(*) FROM paynotify.notifications "
                                   "WHERE resolved_at IS NOT NULL"), "0")

    def test_dry_run_changes_nothing(self):
        self.store_findings()
        before = PG.psql("SELECT * FROM paynotify.notifications ORDER BY id")
        rc, out, err = run("resolve", "--outcome", "merchant_mismatch", "--note", "look",
                           "--dry-run", "--format", "csv")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("would resolve 2 notifications (dry run: nothing changed)", err)
        self.assertEqual(len(rows_csv(out)), 2)
        self.assertEqual(PG.psql("SELECT * FROM paynotify.notifications ORDER BY id"), before)
        # --older-than: received just now, none is older than a day
        rc, out, err = run("resolve", "--outcome", "merchant_mismatch", "--older-than", "1d",
                           "--note", "look", "--format", "csv")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("resolved 0 notifications", err)
        self.assertEqual(PG.psql("SELECT * FROM paynotify.notifications ORDER BY id"), before)

    def test_options_validated(self):
        cases = [
            ((), "which notifications?"),
            (("1",), "--note TEXT is required"),
            (("1", "--note", ""), "--note must be 1..1000 bytes"),
            (("1", "--note", "x" * 1001), "--note must be 1..1000 bytes"),
            (("1", "--note", "two\nlines"), "control characters"),
            (("abc", "--note", "x"), "expected a notification id"),
            (("0", "--note", "x"), "expected a notification id"),
            (("--outcome", "unknown-order", "--note", "x"),
             "unknown outcome; expected one of applied, already_applied, unknown_order"),
            (("--outcome", "applied", "--note", "x"),
             "nothing to resolve (final); the outcomes a person resolves are: unknown_order"),
            (("--outcome", "dispute", "--note", "x"), "a case ends when the provider closes it"),
            (("--outcome", "merchant_mismatch", "--site", "shpo", "--note", "x"),
             "no such site in %s; the sites are: %s" % (CFG.path, SITE)),
            (("--outcome", "merchant_mismatch", "--provider", "paypal", "--note", "x"),
             "unknown provider; expected one of"),
            (("--outcome", "merchant_mismatch", "--older-than", "soon", "--note", "x"),
             "--older-than"),
            (("--outcome", "merchant_mismatch", "--format", "xml", "--note", "x"),
             "--format must be table, csv or json"),
            (("1", "--outcome", "merchant_mismatch", "--note", "x"), "not both"),
            (("1", "--site", SITE, "--note", "x"), "select by --outcome"),
            (("--bogus",), "usage: paynotify resolve"),
        ]
        for args, text in cases:
            rc, out, err = run("resolve", *args)
            self.assertEqual(rc, 64, (args, out, err))
            self.assertIn(text, out + err, args)
        rc, out, err = run("resolve", *[str(i) for i in range(1, 1002)], "--note", "x")
        self.assertEqual(rc, 64, out + err)
        self.assertIn("at most 1000 ids", err)


class PurgeResolved(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stripe = pnkit.Receiver("stripe", CFG, workers=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.stripe.stop()

    def setUp(self):
        PG.reset()
        self.dir = pntest.temp_dir("pntest-resolve.")

    def send(self, oid, eid, amount=1999):
        h, b = pnkit.stripe_paid(oid, amount, event_id=eid)
        r = pnkit.oneshot(self.stripe.sock, "POST", pnkit.path("stripe"), h, b)
        self.assertTrue(pnkit.is_success("stripe", r), r)

    def age(self, eid, days):
        PG.psql("UPDATE paynotify.notifications SET received_at = now() - interval '%d days', "
                "last_delivery_at = now() - interval '%d days' WHERE dedup_key = %s"
                % (days, days, pntest.q(eid)))

    def left(self):
        return {r[0] for r in PG.psql("SELECT dedup_key FROM paynotify.notifications")}

    def purge(self, *args):
        return run("purge", "--pause-ms", "0", *args)

    def test_purge_removes_resolved_keeps_unresolved_and_never_collides(self):
        PG.add_order(SITE, "P1", 1999, "USD")
        self.send("NOPE1", "evt_unknown_resolved")
        self.send("NOPE2", "evt_unknown_open")
        self.send("NOPE3", "evt_unknown_resolved_young")
        for eid in ("evt_unknown_resolved", "evt_unknown_open"):
            self.age(eid, 200)
        nid = PG.scalar("SELECT id::text FROM paynotify.notifications "
                        "WHERE dedup_key = 'evt_unknown_resolved'")
        young = PG.scalar("SELECT id::text FROM paynotify.notifications "
                          "WHERE dedup_key = 'evt_unknown_resolved_young'")
        rc, out, err = run("resolve", nid, young, "--note", "test order of the shop's QA")
        self.assertEqual(rc, 0, out + err)

        archive = os.path.join(self.dir, "notifications-2026-12-01.csv")
        rc, out, err = self.purge("--dry-run")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("1 resolved notification to purge (dry run)", out)
        self.assertIn("kept: 1 unresolved notification older than the cutoff", out)

        rc, out, err = self.purge("--archive", archive)
        self.assertEqual(rc, 1, out + err)      # evt_unknown_open still needs a person
        self.assertIn("purged 1 notification;", out)
        self.assertIn("archive %s " % archive, out)
        # the resolved old row is gone, the unresolved one and the young one stay
        self.assertEqual(self.left(), {"evt_unknown_open", "evt_unknown_resolved_young"})
        with open(archive, newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["dedup_key"] for r in rows], ["evt_unknown_resolved"])
        self.assertEqual(rows[0]["resolution_note"], "test order of the shop's QA")
        with open(archive, "rb") as f:
            first = f.read()

        # the second purge of the day, same name (cron's $(date +%F)): a new archive
        open_id = PG.scalar("SELECT id::text FROM paynotify.notifications "
                            "WHERE dedup_key = 'evt_unknown_open'")
        rc, out, err = run("resolve", open_id, "--note", "customer paid twice; refunded")
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.purge("--archive", archive)
        second = os.path.join(self.dir, "notifications-2026-12-01.1.csv")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("purged 1 notification; archive %s " % second, out)
        with open(archive, "rb") as f:
            self.assertEqual(f.read(), first)        # the first archive is untouched
        self.assertEqual(os.stat(second).st_mode & 0o777, 0o600)
        with open(second, newline="") as f:
            self.assertEqual([r["dedup_key"] for r in csv.DictReader(f)],
                             ["evt_unknown_open"])
        self.assertEqual(self.left(), {"evt_unknown_resolved_young"})
        # and a third, nothing left to purge: a third archive, both others kept
        rc, out, err = self.purge("--archive", archive)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("purged 0 notifications; archive %s " %
                      os.path.join(self.dir, "notifications-2026-12-01.2.csv"), out)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["notifications-2026-12-01.1.csv", "notifications-2026-12-01.2.csv",
                          "notifications-2026-12-01.csv"])
        rc, out, err = run("report", "--format", "csv")
        self.assertEqual(rc, 0, out + err)

    def table_columns(self):
        return [r[0] for r in PG.psql(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'paynotify.notifications'::regclass"
            " AND attnum > 0 AND NOT attisdropped ORDER BY attnum")]

    def restore_old_archive(self, old_cols, doc_marker, name):
        """Archive the table with an older schema's columns (old_cols, in its
        order), empty it, restore with the docs/OPERATIONS.md block that
        follows doc_marker: every current column comes back as it was."""
        cols = self.table_columns()
        before = PG.psql("SELECT %s FROM paynotify.notifications" % ", ".join(cols))
        archive = os.path.join(self.dir, name)
        copy = ("\\copy (SELECT %s FROM paynotify.notifications ORDER BY id) TO '%s' "
                "WITH (FORMAT csv, HEADER)" % (", ".join(old_cols), archive))
        p = subprocess.run(PG._psql_argv(PG.dbname), input=copy.encode(),
                           env=pntest.clean_env(), capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        PG.psql("DELETE FROM paynotify.notifications")
        with open(os.path.join(pntest.REPO, "docs", "OPERATIONS.md")) as f:
            doc = f.read()
        m = re.search(re.escape(doc_marker) + r".*?```sh\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m)
        script = m.group(1).split("<<'SQL'\n", 1)[1].rsplit("SQL\n", 1)[0]
        script = script.replace("/var/backups/paynotify/notifications-2026-09.csv", archive)
        p = subprocess.run(PG._psql_argv(PG.dbname), input=script.encode(),
                           env=pntest.clean_env(), capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(PG.psql("SELECT %s FROM paynotify.notifications" % ", ".join(cols)),
                         before)
        return before

    def test_archive_of_schema_13_restores_with_the_documented_variant(self):
        # what a purge of schema 13 wrote: every column but the four of 014,
        # deliveries after outcome_detail (schema 16 moved it last)
        self.send("NOPE1", "evt_old_archive")
        cols = self.table_columns()
        self.assertEqual(cols[-5:], ["resolved_at", "resolved_by", "resolution_note",
                                     "resolved_outcome", "deliveries"])
        v13 = cols[:-5]
        v13.insert(v13.index("outcome_detail") + 1, "deliveries")
        self.restore_old_archive(v13, "lacks the last four columns", "v13.csv")

    def test_archive_of_schema_15_restores_with_the_documented_variant(self):
        # what a purge of schema 14 or 15 wrote: deliveries after outcome_detail
        self.send("NOPE1", "evt_v15_archive")
        self.send("NOPE1", "evt_v15_archive")
        cols = self.table_columns()
        v15 = [c for c in cols if c != "deliveries"]
        v15.insert(v15.index("outcome_detail") + 1, "deliveries")
        self.assertNotEqual(v15, cols)
        before = self.restore_old_archive(v15, "written by schema 14 or 15 lists it after",
                                          "v15.csv")
        self.assertIn("2", [r[cols.index("deliveries")] for r in before])

    def test_resolved_row_of_an_open_case_is_kept(self):
        self.send("NOPE1", "evt_case")
        self.age("evt_case", 200)
        nid = PG.scalar("SELECT id::text FROM paynotify.notifications WHERE dedup_key = 'evt_case'")
        rc, out, err = run("resolve", nid, "--note", "seen")
        self.assertEqual(rc, 0, out + err)
        # the row belongs to a case the provider has not closed: evidence, kept
        PG.psql("UPDATE paynotify.notifications SET case_id = 'dp_open' WHERE id = %s" % nid)
        PG.psql("INSERT INTO paynotify.cases (site, provider, case_id, case_kind, status, "
                "opened_at, notification_id) VALUES (%s, 'stripe', 'dp_open', 'dispute', "
                "'needs_response', now(), %s)" % (pntest.q(SITE), nid))
        rc, out, err = self.purge("--dry-run")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("0 resolved notifications to purge", out)
        PG.psql("UPDATE paynotify.cases SET closed_at = now() WHERE case_id = 'dp_open'")
        rc, out, err = self.purge("--dry-run")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("1 resolved notification to purge", out)


if __name__ == "__main__":
    unittest.main()

# test_follow_up.py: the per-order follow-up schedule of `paynotify query
# --due` (issue 26, item 5; sql/017, docs/QUERY.md "Follow-up schedule"),
# against the loopback stand-ins (tests/lib/psp_standins.py: signed WeChat
# Pay v3 and v2 answers, every request's signature checked) and a real
# (throwaway) PostgreSQL.  Time is moved by SQL (the schedule's times set
# back), never slept:
#   - the shop's INSERT of a pending order schedules it a minute later
#     (trigger); not asked before that, asked once when due;
#   - an order answered "pending" is asked again on time, by the backoff
#     2, 5, 10, 30, 60, 60 minutes (next_ask_at - last_asked_at), capped at
#     the horizon ([query] follow_up_wechatpay_hours) and expired after it;
#     a paid answer applies the order and ends its schedule;
#   - two concurrent `--due --apply` runs ask the stand-in exactly once per
#     due order (requests counted at the stand-in, a slow stand-in so that
#     the runs overlap);
#   - a claim whose claimer crashed is not taken while its lease lasts and
#     comes back after it; the late claimer's answer is not recorded;
#   - an order paid by its notification leaves the schedule without a call;
#   - a WeChat Pay v2 refund stored pending_confirmation is confirmed
#     through --due (refundquery), and leaves the schedule;
#   - the sweep schedules pending orders that have no row (inserted before
#     schema 17 or with triggers off), within the horizon only;
#   - a dry run asks and changes nothing, --limit, usage errors (64);
#   - stats --follow-up and the Prometheus series show the backlog.

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pnsign  # noqa: E402
import pntest  # noqa: E402

try:
    import pnkit  # noqa: E402
    import psp_standins  # noqa: E402
except ImportError:     # pragma: no cover (python3-cryptography missing)
    psp_standins = None

ADMIN = os.path.join(pntest.REPO, "paynotify")
KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
MERCHANT_SERIAL = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
SITE = pnkit.SITE if psp_standins else "shop-x"
SITE_V2 = "shop-w2"
SITE_LEGACY = "shop-l"      # 2C2P legacy Redirect API
WX_APPID_V2 = "wxd678efh567hg6799"

PG = None
SI = None
CFG = None


def setUpModule():
    global PG, SI, CFG
    if psp_standins is None:
        raise unittest.SkipTest("python3-cryptography is needed for the stand-ins")
    PG = pntest.module_database()
    SI = psp_standins.Standins(
        provider_key=os.path.join(KEYS, "test-a.key.pem"),
        wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys", "site-b-private.pem"),
        merchant_pub=os.path.join(KEYS, "test-b.pub.pem"), app_id=pnkit.ALIPAY_APP_ID,
        mchid=pnkit.WX_MCHID, merchant_serial=MERCHANT_SERIAL, wx_pubid=pnkit.WX_PUBID,
        stripe_key="rk_test_x", twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
        twoc2p_secret=pnkit.TWOC2P_KEY, wx_apiv2=pnkit.WX_APIV2)
    cfg = pnkit.write_all_config(PG)
    shutil.copyfile(os.path.join(KEYS, "test-b.key.pem"), os.path.join(cfg.dir, "merchant-api.key"))
    os.chmod(os.path.join(cfg.dir, "merchant-api.key"), 0o600)
    def section(header, keys):
        return "[%s]\n%s\n" % (header, "".join("%s = %s\n" % kv for kv in keys))
    query = section("query", [("ca_file", SI.ca_file), ("connect_timeout_ms", 1000),
                              ("timeout_ms", 5000), ("follow_up_wechatpay_hours", 25)])
    site_keys = section("site %s" % SITE, [
        ("wechatpay.query_private_key_file", "merchant-api.key"),
        ("wechatpay.query_cert_serial", MERCHANT_SERIAL), ("wechatpay.query_url", SI.url),
        # an order naming no provider is asked at every one the site can
        # query: 2C2P's query needs no key of its own, so point it here too
        ("2c2p.query_url", SI.url)])
    v2_site = section("site %s" % SITE_V2, [      # WeChat Pay API v2 keys only
        ("wechatpay.mchid", pnkit.WX_MCHID), ("wechatpay.appid", WX_APPID_V2),
        ("wechatpay.apiv2_key_file", "apiv2.key"), ("wechatpay.query_url", SI.url)])
    with open(cfg.path) as f:
        text = f.read()
    # the site's section gets the query keys first (the rest of it follows)
    text = text.replace("[site %s]\n" % SITE, query + site_keys.rstrip("\n") + "\n")
    legacy_site = section("site %s" % SITE_LEGACY, [
        ("2c2p.merchant_id", pnkit.TWOC2P_MERCHANT), ("2c2p.secret_key_file", "2c2p.key"),
        ("2c2p.api", "redirect"), ("2c2p.query_url", SI.url)])
    with open(cfg.path, "w") as f:
        f.write(text + "\n" + v2_site + "\n" + legacy_site)
    CFG = cfg.path


def tearDownModule():
    if PG is not None:
        PG.destroy()


def admin(*args):
    return pntest.run_admin(CFG, *args)


def due(*extra):
    rc, out, err = admin("query", "--due", *(list(extra) + ["--format", "json"]))
    return rc, json.loads(out) if out.strip().startswith("[") else [], err


def asked(oid):
    """Requests the stand-in had about order oid (WeChat Pay v3: in the path)."""
    return [p for prov, p in SI.requests if prov == "wechatpay" and "/%s?" % oid in p]


def item(oid, site=SITE, ref=0):
    rows = PG.psql("SELECT state, attempts, last_answer, last_result,"
                   "       extract(epoch FROM next_ask_at - last_asked_at)::bigint,"
                   "       claim_token IS NOT NULL"
                   "  FROM paynotify.follow_ups WHERE site = %s AND order_id = %s AND ref = %d"
                   % (pntest.q(site), pntest.q(oid), ref))
    if not rows:
        return None
    r = rows[0]
    return {"state": r[0], "attempts": int(r[1]), "answer": r[2], "result": r[3],
            "delay": None if r[4] is None else int(r[4]), "claimed": r[5] == "t"}


def make_due(oid, site=SITE, ref=0):
    """Time passes until the item is due: every time of its row (and of its
    order) moves back by what is left until next_ask_at, plus a second."""
    PG.psql("WITH d AS (SELECT next_ask_at - now() + interval '1 second' AS d"
            "             FROM paynotify.follow_ups"
            "            WHERE site = %(s)s AND order_id = %(o)s AND ref = %(r)d)"
            " UPDATE paynotify.follow_ups f SET starts_at = starts_at - d.d,"
            "        next_ask_at = next_ask_at - d.d, last_asked_at = last_asked_at - d.d"
            "   FROM d WHERE f.site = %(s)s AND f.order_id = %(o)s AND f.ref = %(r)d"
            % {"s": pntest.q(site), "o": pntest.q(oid), "r": ref})


class Base(unittest.TestCase):
    def setUp(self):
        PG.reset()
        PG.psql("TRUNCATE paynotify.follow_ups; UPDATE paynotify.follow_up_sweeps "
                "SET full_at = '-infinity'")
        SI.reset()

    def tearDown(self):
        self.assertEqual(SI.bad_requests, [], "the stand-in refused a request's signature")

    def order(self, state="NOTPAY", psp="wechatpay"):
        oid = "F-%s" % pnkit.seq()
        PG.add_order(SITE, oid, 8888, "CNY")
        if psp:
            PG.psql("UPDATE paynotify.orders SET psp = %s WHERE order_id = %s"
                    % (pntest.q(psp), pntest.q(oid)))
        self.answer(oid, state)
        return oid

    def receive(self, provider, site, content_type, body, v2=False):
        """A notification through the real receiver (CGI): acknowledged."""
        r = pntest.run_cgi(pntest.binary(provider), "POST", pnkit.path(provider, site),
                           {"Content-Type": content_type}, body, config=CFG)
        self.assertTrue(pnkit.is_success(provider, r, v2=v2), (r.status, r.body, r.stderr))
        return r

    def answer(self, oid, state):
        SI.state[("wechatpay", oid)] = {"trade_state": state, "total": 8888,
                                        "transaction_id": "4200009" + oid[2:].zfill(12),
                                        "appid": pnkit.WX_APPID, "mchid": pnkit.WX_MCHID}


class TestSchedule(Base):
    def test_new_order_scheduled_a_minute_later_asked_once_when_due(self):
        oid = self.order()
        row = PG.psql("SELECT state, attempts, extract(epoch FROM next_ask_at - o.created_at),"
                      "       f.starts_at = o.created_at"
                      "  FROM paynotify.follow_ups f JOIN paynotify.orders o USING (site, order_id)"
                      " WHERE order_id = %s AND ref = 0" % pntest.q(oid))
        self.assertEqual(row, [("scheduled", "0", "60.000000", "t")])
        # not due yet: nothing asked
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows, asked(oid)), (0, [], []), err)
        make_due(oid)
        rc, rows, err = due("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["order_id"], r["result"], r["answer"]) for r in rows],
                         [(oid, "waiting", "NOTPAY")])
        self.assertEqual(len(asked(oid)), 1)
        self.assertIn("schedule: 0 done, 1 asked again later, 0 expired", err)
        self.assertEqual(item(oid)["attempts"], 1)
        # asked again only when due again
        rc, rows, err = due("--apply")
        self.assertEqual((rows, len(asked(oid))), ([], 1), err)

    def test_pending_answer_asked_again_by_the_backoff_then_paid_ends_it(self):
        oid = self.order()
        delays = []
        for n in range(6):
            make_due(oid)
            rc, rows, err = due("--apply")
            self.assertEqual(rc, 0, (rows, err))
            self.assertEqual([r["result"] for r in rows], ["waiting"], rows)
            it = item(oid)
            self.assertEqual((it["state"], it["attempts"], it["answer"], it["result"]),
                             ("scheduled", n + 1, "NOTPAY", "waiting"))
            delays.append(it["delay"])
        self.assertEqual(delays, [120, 300, 600, 1800, 3600, 3600])
        self.assertEqual(len(asked(oid)), 6, "one request per due ask")
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        # paid at the provider: the next ask applies it and ends the schedule
        self.answer(oid, "SUCCESS")
        make_due(oid)
        rc, rows, err = due("--apply")
        self.assertEqual([r["result"] for r in rows], ["applied"], (rows, err))
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        self.assertEqual(item(oid)["state"], "done")
        # the next run drops it lazily, without a call
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows, item(oid), len(asked(oid))), (0, [], None, 7), err)

    def test_order_naming_no_provider_records_the_final_answer(self):
        # asked at WeChat Pay (paid) and 2C2P (does not know it): done, with
        # WeChat Pay's words, whatever the provider asked after it said
        oid = self.order(state="SUCCESS", psp=None)
        make_due(oid)
        rc, rows, err = due("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(sorted((r["provider"], r["result"]) for r in rows),
                         [("2c2p", "not_found"), ("wechatpay", "applied")])
        it = item(oid)
        self.assertEqual((it["state"], it["answer"], it["result"]), ("done", "SUCCESS", "applied"))

    def test_capped_at_the_horizon_then_expired(self):
        oid = self.order()
        # 24 h 40 min into a 25-hour horizon, asked hourly: the next ask is at
        # the horizon (20 minutes), not an hour later
        PG.psql("UPDATE paynotify.follow_ups SET attempts = 20,"
                "       starts_at = now() - interval '24 hours 40 minutes',"
                "       next_ask_at = now() - interval '1 second' WHERE order_id = %s"
                % pntest.q(oid))
        rc, rows, err = due("--apply")
        self.assertEqual([r["result"] for r in rows], ["waiting"], (rows, err))
        # (at the horizon exactly: less than 20 minutes after the ask, however
        # slow the run was)
        self.assertEqual(PG.psql("SELECT state, next_ask_at = starts_at + interval '25 hours',"
                                 "       next_ask_at - last_asked_at <= interval '20 minutes'"
                                 "  FROM paynotify.follow_ups WHERE order_id = %s"
                                 % pntest.q(oid)), [("scheduled", "t", "t")])
        # asked at the horizon, still pending: expired, asked no more, the order unchanged
        make_due(oid)
        rc, rows, err = due("--apply")
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["waiting"]), err)
        self.assertIn("1 expired", err)
        self.assertEqual(item(oid)["state"], "expired")
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '1 hour'")
        rc, rows, err = due("--apply")
        self.assertEqual((rows, len(asked(oid))), ([], 2), err)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        # and stays (not scheduled again by the sweep) until it leaves the window
        self.assertEqual(item(oid)["state"], "expired")

    def test_final_by_notification_leaves_without_a_call(self):
        oid = self.order(state="SUCCESS")
        r = pntest.run_cgi(pntest.binary("wechatpay"), "POST", pnkit.path("wechatpay", SITE),
                           *pnkit.wechat_paid(oid, 8888), config=CFG)
        self.assertTrue(pnkit.is_success("wechatpay", r), (r.status, r.body, r.stderr))
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        make_due(oid)
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows), (0, []), err)
        self.assertEqual(SI.requests, [])
        self.assertIsNone(item(oid))

    def test_sweep_schedules_orders_without_a_row_within_the_horizon(self):
        young, old = self.order(), self.order()
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '10 minutes'"
                " WHERE order_id = %s" % pntest.q(young))
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '30 days'"
                " WHERE order_id = %s" % pntest.q(old))
        PG.psql("TRUNCATE paynotify.follow_ups")        # as before schema 17
        rc, rows, err = due("--apply")
        self.assertEqual([(r["order_id"], r["result"]) for r in rows], [(young, "waiting")],
                         (rows, err))
        self.assertEqual(item(young)["attempts"], 1)
        self.assertIsNone(item(old), "beyond every horizon: not followed up")
        self.assertEqual(asked(old), [])
        # that read of the orders table is made at most every 15 minutes
        # (the trigger is the way in); a run for one site makes it always
        late = self.order()
        PG.psql("UPDATE paynotify.orders SET created_at = now() - interval '10 minutes'"
                " WHERE order_id = %s; DELETE FROM paynotify.follow_ups WHERE order_id = %s"
                % (pntest.q(late), pntest.q(late)))
        rc, rows, err = due("--apply")
        self.assertEqual((rows, item(late)), ([], None), err)
        PG.psql("UPDATE paynotify.follow_up_sweeps SET full_at = now() - interval '16 minutes'")
        rc, rows, err = due("--apply")
        self.assertEqual([r["order_id"] for r in rows], [late], (rows, err))
        PG.psql("DELETE FROM paynotify.follow_ups WHERE order_id = %s" % pntest.q(late))
        rc, rows, err = due("--apply", "--site", SITE)
        self.assertEqual([r["order_id"] for r in rows], [late], (rows, err))

    def test_bulk_insert_scheduled_once_per_pending_order(self):
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency, status)"
                " SELECT %s, 'K-' || g, 100, 'CNY', CASE WHEN g %% 2 = 0 THEN 'pending'"
                " ELSE 'paid' END FROM generate_series(1, 1000) g" % pntest.q(SITE))
        self.assertEqual(PG.psql("SELECT count(*), count(DISTINCT order_id),"
                                 "       bool_and(order_id ~ '^K-[0-9]*[02468]$')"
                                 "  FROM paynotify.follow_ups"), [("500", "500", "t")])

    def test_dry_run_asks_and_changes_nothing_limit(self):
        oids = [self.order() for _ in range(3)]
        for oid in oids:
            make_due(oid)
        self.answer(oids[0], "SUCCESS")
        before = PG.psql("SELECT * FROM paynotify.follow_ups ORDER BY order_id")
        rc, rows, err = due()
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(r["result"] for r in rows),
                         ["waiting", "waiting", "would_ingest_paid"], rows)
        self.assertEqual(PG.psql("SELECT * FROM paynotify.follow_ups ORDER BY order_id"), before)
        self.assertEqual(PG.order(SITE, oids[0])["status"], "pending")
        SI.reset()
        for oid in oids:
            self.answer(oid, "NOTPAY")
        rc, rows, err = due("--apply", "--limit", "2")
        self.assertEqual(len(rows), 2, (rows, err))
        self.assertEqual(len(SI.requests), 2)
        rc, rows, err = due("--apply", "--limit", "2")
        self.assertEqual(len(rows), 1, (rows, err))

    def test_usage_errors(self):
        for args in (["--order", "x"], ["--pending-older-than", "5m"], ["--complaints"],
                     ["--limit", "0"], ["--limit", "100001"], ["--limit", "x"],
                     ["--provider", "wechatpay"], ["--dry-run", "--apply"]):
            rc, out, err = admin("query", "--due", *args)
            self.assertEqual(rc, 64, (args, err))
            self.assertTrue(err.startswith("paynotify"), err)
        rc, out, err = admin("query", "--order", "x", "--limit", "5")
        self.assertEqual(rc, 64, err)
        rc, out, err = admin("stats", "--follow-up", "--format", "prometheus")
        self.assertEqual(rc, 64, err)


class TestLegacyFormConfirmation(Base):
    """A legacy 2C2P form stored pending_confirmation (docs/2C2P.md "Which
    transaction") that came after the schedule's answer paid its order."""

    def post(self, body):
        return self.receive("2c2p", SITE_LEGACY, "application/x-www-form-urlencoded", body)

    def test_form_after_the_answer_scheduled_again_and_confirmed(self):
        oid = "LF-" + pnkit.seq()
        genuine = ("7654321", "123456", "05")
        PG.add_order(SITE_LEGACY, oid, 1999, "SGD")
        SI.state[("2c2p", oid)] = {"amount": '"19.99"', "currency": "SGD", "tranRef": genuine[0],
                                   "approvalCode": genuine[1], "eci": genuine[2],
                                   "respCode": "0000"}
        make_due(oid, SITE_LEGACY)
        rc, rows, err = due("--apply")
        self.assertEqual([(r["provider"], r["result"]) for r in rows], [("2c2p", "applied")],
                         (rows, err))
        self.assertEqual(PG.order(SITE_LEGACY, oid)["status"], "paid")
        self.assertEqual(item(oid, SITE_LEGACY)["state"], "done")
        # the buyer's copy of the form comes now: it waits for a confirmation
        r = self.post(pnkit.twoc2p_legacy_form(oid, *genuine))
        self.assertIn("outcome=pending_confirmation", r.stderr)
        # the next run schedules the order again (a minute after the form came)
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows), (0, []), err)
        it = item(oid, SITE_LEGACY)
        self.assertEqual((it["state"], it["attempts"]), ("scheduled", 0))
        make_due(oid, SITE_LEGACY)
        rc, rows, err = due("--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([r["result"] for r in rows], ["duplicate"], rows)
        self.assertIn("confirmed 1 stored notification", rows[0]["detail"])
        self.assertEqual(sorted(n["outcome"] for n in PG.notifications(
            "order_id = %s" % pntest.q(oid))), ["already_applied", "applied"])
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows, item(oid, SITE_LEGACY)), (0, [], None), err)
        self.assertEqual(len([p for p, _ in SI.requests if p == "2c2p"]), 2)


class TestDocumentedTimer(Base):
    """The query timer as shipped (conf/systemd/paynotify-query.service's
    ExecStart) and the cron line of docs/OPERATIONS.md ("query"), run as
    written."""

    def command(self, marker, pattern):
        if marker.endswith(".service"):
            with open(os.path.join(pntest.REPO, "conf", "systemd", marker)) as f:
                block = f.read()
        else:
            with open(os.path.join(pntest.REPO, "docs", "OPERATIONS.md")) as f:
                doc = f.read()
            block = doc.split(marker, 1)[1].split("```", 1)[0]
        m = re.search(pattern, block, re.M)
        self.assertIsNotNone(m, block)
        return m.group(1).replace("/usr/local/bin/", "").replace("/usr/bin/", "")

    def run_documented(self, cmd):
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": CFG,
                                "PATH": pntest.REPO + ":" + os.environ.get("PATH", "")})
        return subprocess.run(["sh", "-c", cmd], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=pntest.patience(120))

    def test_unit_and_cron_line_work_the_schedule(self):
        pntest.need("chronic", "moreutils")
        unit = self.command("paynotify-query.service",
                            r"^ExecStart=(.+)$")
        cron = self.command("# /etc/cron.d/paynotify-query",
                            r"^\* \* \* \* \*\s+paynotify\s+(.+)$")
        for cmd in (unit, cron):
            self.assertIn("query --due --apply", cmd)
            oid = self.order(state="SUCCESS")
            make_due(oid)
            p = self.run_documented(cmd)
            self.assertEqual(p.returncode, 0, (cmd, p.stdout, p.stderr))
            self.assertEqual(PG.order(SITE, oid)["status"], "paid", cmd)
            self.assertEqual(len(asked(oid)), 1, cmd)
        self.assertEqual(p.stdout, "", "chronic: a run that needs nobody mails nothing")


class TestClaims(Base):
    def test_two_concurrent_runs_ask_once_per_due_order(self):
        oids = [self.order() for _ in range(10)]
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '1 second'")
        SI.mode, SI.sleep_s = "sleep", 0.15      # each answer takes a while: the runs overlap
        env = pntest.clean_env()
        procs = [subprocess.Popen([ADMIN, "-c", CFG, "query", "--due", "--apply", "--format",
                                   "json"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=pntest.patience(120)) for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], outs)
        SI.mode = None
        self.assertEqual({oid: len(asked(oid)) for oid in oids}, {oid: 1 for oid in oids})
        self.assertEqual(len(SI.requests), 10)
        rows = sum((json.loads(o or b"[]") for o, _ in outs), [])
        self.assertEqual(sorted(r["order_id"] for r in rows), sorted(oids))
        self.assertEqual(PG.psql("SELECT DISTINCT attempts, claim_token IS NULL"
                                 "  FROM paynotify.follow_ups"), [("1", "t")])

    def test_crashed_claim_comes_back_after_its_lease(self):
        oid = self.order()
        make_due(oid)
        # a run claims it and dies before answering
        token = PG.scalar("SELECT claim_token FROM paynotify.follow_up_claim(NULL, 600, "
                          "'crashed:1')")
        self.assertIsNotNone(token)
        self.assertTrue(item(oid)["claimed"])
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows, SI.requests), (0, [], []), err)
        # the lease runs out: the next run takes it
        PG.psql("UPDATE paynotify.follow_ups SET claimed_until = now() - interval '1 second'")
        rc, rows, err = due("--apply")
        self.assertEqual([r["result"] for r in rows], ["waiting"], (rows, err))
        self.assertEqual(len(asked(oid)), 1)
        it = item(oid)
        self.assertEqual((it["attempts"], it["claimed"]), (1, False))
        # the crashed claimer's late answer is not recorded
        got = PG.psql("SELECT state FROM paynotify.follow_up_answered(%s, %s, 0, %s, 'SUCCESS',"
                      " 'applied', true, 3600)" % (pntest.q(SITE), pntest.q(oid),
                                                   pntest.q(token)))
        self.assertEqual(got, [(None,)])
        self.assertEqual(item(oid)["state"], "scheduled")

    def test_stats_shows_the_backlog(self):
        a, b = self.order(), self.order()
        self.order()        # scheduled later
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '5 minutes'"
                " WHERE order_id = %s" % pntest.q(a))
        PG.psql("UPDATE paynotify.follow_ups SET next_ask_at = now() - interval '1 minute'"
                " WHERE order_id = %s" % pntest.q(b))
        rc, out, err = admin("stats", "--follow-up", "--format", "json")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(len(got), 1, got)
        s = got[0]     # (the JSON format gives every value as text)
        self.assertEqual((s["site"], s["due"], s["later"], s["claimed"], s["done"],
                          s["expired"]), (SITE, "2", "1", "0", "0", "0"), s)
        self.assertGreaterEqual(int(s["oldest_due_seconds"]), 300)
        self.assertLess(int(s["oldest_due_seconds"]), 300 + pntest.patience(60))
        rc, out, err = admin("stats", "--format", "prometheus")
        self.assertEqual(rc, 0, err)
        self.assertIn('paynotify_follow_up_items{site="%s",state="due"} 2' % SITE, out)
        self.assertIn('paynotify_follow_up_items{site="%s",state="later"} 1' % SITE, out)
        self.assertRegex(out, r'paynotify_follow_up_oldest_due_seconds\{site="%s"\} 3\d\d'
                         % SITE)


def v2_refund_result(refund_id, refund_fee, oid, txn, total_fee):
    inner = pnsign.wechat_v2_xml([
        ("refund_id", refund_id), ("out_refund_no", "R" + refund_id[-12:]),
        ("refund_fee", str(refund_fee)), ("refund_status", "SUCCESS"),
        ("success_time", "2024-05-21 10:00:00"), ("refund_recv_accout", "balance"),
        ("refund_request_source", "API"), ("out_trade_no", oid),
        ("transaction_id", txn), ("total_fee", str(total_fee))], root="root")
    sealed = pnsign.wechat_v2_seal(inner, pnkit.WX_APIV2)
    if isinstance(sealed, bytes):
        sealed = sealed.decode()
    return pnsign.wechat_v2_xml([
        ("return_code", "SUCCESS"), ("appid", WX_APPID_V2), ("mch_id", pnkit.WX_MCHID),
        ("nonce_str", "n" + pnkit.seq()), ("req_info", sealed)])


class TestRefundConfirmation(Base):
    def post(self, body):
        return self.receive("wechatpay", SITE_V2, "text/xml", body, v2=True)

    def test_pending_confirmation_refund_confirmed_through_due(self):
        n = pnkit.seq()
        oid, txn, rid = "V-%s" % n, "4200000003%018d" % int(n), "5030000003%019d" % int(n)
        PG.add_order(SITE_V2, oid, 10000, "CNY")
        fields = [(k, {"out_trade_no": oid, "transaction_id": txn,
                       "appid": WX_APPID_V2}.get(k, v))
                  for k, v in pnkit.wechat_v2_fields(oid, 10000)]
        self.post(pnkit.sign_wechat_v2(fields)[1])
        self.assertEqual(PG.order(SITE_V2, oid)["status"], "paid")
        self.post(v2_refund_result(rid, 6000, oid, txn, 10000))
        nid = int(PG.scalar("SELECT id FROM paynotify.notifications WHERE event_kind = 'refund'"
                            " AND outcome = 'pending_confirmation'"))
        # the sweep schedules it (a minute after it came): not due yet
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows), (0, []), err)
        self.assertEqual(item(oid, SITE_V2, nid)["state"], "scheduled")
        # WeChat Pay still processing: asked, left pending, asked again later
        SI.set_v2_refund(rid, "R" + rid[-12:], oid, txn, 10000, 6000, "PROCESSING")
        make_due(oid, SITE_V2, nid)
        rc, rows, err = due("--apply")
        self.assertEqual([r["result"] for r in rows], ["waiting"], (rows, err))
        it = item(oid, SITE_V2, nid)
        self.assertEqual((it["state"], it["attempts"], it["delay"]), ("scheduled", 1, 120))
        # confirmed: applied, and the schedule lets it go
        SI.set_v2_refund(rid, "R" + rid[-12:], oid, txn, 10000, 6000)
        make_due(oid, SITE_V2, nid)
        rc, rows, err = due("--apply")
        self.assertEqual((rc, [r["result"] for r in rows]), (0, ["applied"]), (rows, err))
        o = PG.order(SITE_V2, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 6000))
        self.assertEqual(item(oid, SITE_V2, nid)["state"], "done")
        rc, rows, err = due("--apply")
        self.assertEqual((rc, rows, item(oid, SITE_V2, nid)), (0, [], None), err)
        self.assertEqual(len([p for p, _ in SI.requests if p == "wechatpay-v2"]), 2)


if __name__ == "__main__":
    unittest.main()

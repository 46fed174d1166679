# test_reconcile.py: `paynotify reconcile` against statements the test makes
# from known events, in each provider's documented layout (docs/RECONCILE.md):
# the Alipay 业务明细 bill in GBK with its header and footer lines, the WeChat
# Pay ALL trade bill with backtick fields and its totals section, a Stripe
# itemized report CSV.  Real PostgreSQL, real receivers (CGI) for the
# notifications, the real admin binary.  Per provider:
#   - all matched (the notification came): exit 0
#   - a lost payment: dry run reports it and changes nothing (exit 1); --apply
#     applies it once (source statement); the real signed notification sent
#     afterwards through the receiver is acknowledged and applies nothing;
#     a second --apply run is all matched
#   - every discrepancy class of the statement: amount_mismatch, unknown_order,
#     duplicate_payment, not_in_statement, missing_refund, fees and net shown,
#     totals per currency in the summary line
#   - an empty day (exit 0; WeChat Pay and Stripe need --date)
#   - malformed files (truncated, edited totals, a field without its
#     backtick, a bad amount, a missing, doubled or reworded Alipay totals
#     line, a file of NUL bytes, empty or UTF-16): exit 3, the line (or what is
#     wrong with the file) named, nothing changed
# And: Alipay refunds missed and applied once even when the refund notification
# arrives afterwards; a bill of another Alipay account or another WeChat Pay
# merchant is refused (exit 3); usage errors exit 64.

import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pnkit  # noqa: E402

ADMIN = os.path.join(pntest.REPO, "paynotify")
SITE = pnkit.SITE
PG = None
CFG = None
TMP = None


def setUpModule():
    global PG, CFG, TMP
    PG = pntest.module_database()
    CFG = pnkit.write_all_config(PG).path
    TMP = tempfile.mkdtemp(prefix="pntest-reconcile.")
    pntest.add_cleanup(lambda: subprocess.run(["rm", "-rf", TMP]))


def tearDownModule():
    if PG is not None:
        PG.destroy()


def reconcile(provider, path, *args):
    p = subprocess.run([ADMIN, "-c", CFG, "reconcile", "--provider", provider, "--site", SITE,
                        "--statement", path, "--format", "json"] + list(args),
                       env=pntest.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    out = p.stdout.decode()
    rows = json.loads(out) if out.strip().startswith("[") else []
    return p.returncode, rows, p.stderr.decode()


# the longest a test of Base takes from its setUp() (which reads "today") to
# its last reconcile, with room for a slow ASan or valgrind run on a loaded
# machine
DAY_MARGIN_S = 180


def clear_of_midnight(offset_h, margin_s=DAY_MARGIN_S):
    """Wait, if the provider's day (UTC+offset_h) ends within margin_s, until
    it has ended.  A test reads "today" once and then has orders paid now
    (paid_at is the database's clock): one that straddled the provider's
    midnight would have them on the next day, not on the statement's."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=offset_h)
    left = 86400 - (t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6)
    if left < margin_s:
        sys.stdout.write("    (waiting %.0f s for the provider's midnight, UTC%+d)\n"
                         % (left + 1, offset_h))
        time.sleep(left + 1)


def now_in(offset_h):
    """Now in the provider's zone, kept inside today (not in the last 20 minutes)."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=offset_h)
    t = t.replace(tzinfo=None, microsecond=0)
    end = t.replace(hour=23, minute=40, second=0)
    return min(t, end)


def write(name, data):
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def yuan(minor):
    sign = "-" if minor < 0 else ""
    minor = abs(minor)
    return "%s%d.%02d" % (sign, minor // 100, minor % 100)


_n = [0]


def digits():
    _n[0] += 1
    return "%d%06d" % (os.getpid() % 100000, _n[0])


# ---- the statements, in the providers' layouts --------------------------------

ALIPAY_HEADER = ("支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,"
                 "操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
                 "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
                 "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注")


# The totals lines in the wording of real bills (docs/RECONCILE.md "Alipay"), e.g.
# a Java payment library's alipayBill() fixture of a real 2019-09-16 bill:
#   #交易合计：6笔，商家实收共0.06元，商家优惠共0.00元
#   #退款合计：4笔，商家实收退款共-0.04元，商家优惠退款共0.00元
ALIPAY_TRADE_TOTAL = "#交易合计：%d笔，商家实收共%s元，商家优惠共%s元"
ALIPAY_REFUND_TOTAL = "#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共%s元"


def alipay_bill(day, rows, account=pnkit.ALIPAY_SELLER_ID + "0156", edit_total=0, cut=None,
                edit_refund_total=0, totals=None):
    """rows: dicts trade_no, oid, type (交易/退款), time, minor (signed as in the
    bill: refunds negative), fee (minor, positive = charged), batch.  GBK bytes.
    edit_total / edit_refund_total: fen added to the 交易合计 / 退款合计 商家实收 sum;
    totals: a function given the two totals lines, returning the lines to write."""
    d0 = datetime.date.fromisoformat(day)
    d1 = d0 + datetime.timedelta(days=1)
    lines = ["#支付宝业务明细查询", "#账号：[%s]" % account,
             "#起始日期：[%s 00:00:00]   终止日期：[%s 00:00:00]"
             % (d0.strftime("%Y年%m月%d日"), d1.strftime("%Y年%m月%d日")),
             "#-----------------------------------------业务明细列表"
             "----------------------------------------", ALIPAY_HEADER]
    n_trade = n_refund = sum_trade = sum_refund = 0
    for r in rows:
        m = r["minor"]
        lines.append(",".join([
            r["trade_no"] + "\t", r["oid"] + "\t", r["type"] + "\t", "测试商品", r["time"],
            r["time"], "\t", "\t", "\t", "\t", "**博(156******89)\t", yuan(m), yuan(m), "0.00",
            "0.00", "0.00", "0.00", "0.00", "", "0.00\t", "0.00", r.get("batch", "") + "\t",
            yuan(-r.get("fee", 0)), "0.00", ""]))
        if r["type"] == "交易":
            n_trade += 1
            sum_trade += m
        else:
            n_refund += 1
            sum_refund += m
    lines += ["#-----------------------------------------业务明细列表结束"
              "------------------------------------",
              ] + (totals or (lambda t: t))([
                  ALIPAY_TRADE_TOTAL % (n_trade, yuan(sum_trade + edit_total), "0.00"),
                  ALIPAY_REFUND_TOTAL % (n_refund, yuan(sum_refund + edit_refund_total),
                                         "0.00")]) + [
              "#导出时间：[%s 09:00:00]" % d1.strftime("%Y年%m月%d日")]
    if cut is not None:
        lines = lines[:cut]
    return ("\r\n".join(lines) + "\r\n").encode("gbk")


class _GbkName(zipfile.ZipInfo):
    """A zip entry named in GBK without the UTF-8 flag, as Alipay's bill zip has them."""
    def _encodeFilenameFlags(self):
        return self.filename.encode("gbk"), self.flag_bits


def alipay_zip(day, detail, gbk_names=True, with_detail=True):
    base = "%s_%s_" % (pnkit.ALIPAY_SELLER_ID + "0156", day.replace("-", ""))
    summary = ("#支付宝业务汇总查询\r\n#账号：[x]\r\n").encode("gbk")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in ([(base + "业务明细.csv", detail)] if with_detail else []) + \
                [(base + "业务明细(汇总).csv", summary)]:
            info = _GbkName(name) if gbk_names else zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()


WX_HEADER = ("交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,"
             "交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,"
             "充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,"
             "费率备注")


def wechat_bill(rows, mchid=pnkit.WX_MCHID, edit_count=0, no_tick=False, drop_totals=False):
    """rows: dicts time, txn, oid, state (SUCCESS/REFUND), minor, refund_id, fee (minor)."""
    lines = [WX_HEADER]
    settle = refund = fee = 0
    for r in rows:
        pay = r["state"] == "SUCCESS"
        f = [r["time"], pnkit.WX_APPID, mchid, "0", "", r["txn"], r["oid"], "o-user", "JSAPI",
             r["state"], "OTHERS", "CNY", yuan(r["minor"]) if pay else "0.00", "0.00",
             "0" if pay else r["refund_id"], "0" if pay else "R" + r["refund_id"],
             "0.00" if pay else yuan(r["minor"]), "0.00", "" if pay else "ORIGINAL",
             "" if pay else "SUCCESS", "测试商品", "", "%d.%05d" % (r.get("fee", 0) // 100,
                                                                   r.get("fee", 0) % 100 * 1000),
             "0.60%", yuan(r["minor"]) if pay else "0.00", "0.00" if pay else yuan(r["minor"]),
             ""]
        lines.append(",".join(("" if (no_tick and i == 6) else "`") + v for i, v in enumerate(f)))
        settle += r["minor"] if pay else 0
        refund += 0 if pay else r["minor"]
        fee += r.get("fee", 0)
    if not drop_totals:
        lines += ["总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,"
                  "申请退款总金额",
                  ",".join("`" + v for v in [str(len(rows) + edit_count), yuan(settle),
                                              yuan(refund), "0.00", yuan(fee), yuan(settle),
                                              yuan(refund)])]
    return ("\r\n".join(lines) + "\r\n").encode("utf-8")


STRIPE_COLS = ["balance_transaction_id", "created_utc", "created", "available_on_utc",
               "currency", "gross", "fee", "net", "reporting_category", "source_id",
               "description", "customer_facing_amount", "customer_facing_currency",
               "charge_id", "payment_intent_id", "payment_metadata[order_id]"]


def stripe_report(rows):
    """rows: dicts time, category, minor (signed), fee, pi, oid, source."""
    lines = [",".join(STRIPE_COLS)]
    for r in rows:
        g, fee = r["minor"], r.get("fee", 0)
        lines.append(",".join([
            "txn_" + digits(), r["time"], r["time"], r["time"], r.get("cur", "usd"), yuan(g),
            yuan(fee),
            yuan(g - fee), r["category"], r.get("source", "ch_" + digits()),
            '"Payment for order, ""%s"""' % r.get("oid", ""), yuan(abs(g)), "usd",
            "ch_" + digits(), r.get("pi", ""), r.get("oid", "")]))
    return ("\n".join(lines) + "\n").encode("utf-8")


# ---- the cases -----------------------------------------------------------------

class Base:
    provider = None
    offset_h = 8
    currency = "CNY"
    amount = 6600

    def setUp(self):
        PG.reset()
        clear_of_midnight(self.offset_h)
        self.day = now_in(self.offset_h).date().isoformat()
        self.t = now_in(self.offset_h).strftime("%Y-%m-%d %H:%M:%S")

    def new_order(self, amount=None, status="pending"):
        oid = "R%s-%s" % (self.provider[:2], digits())
        PG.add_order(SITE, oid, amount or self.amount, self.currency, status)
        return oid

    def deliver(self, headers, body):
        r = pntest.run_cgi(pntest.binary(self.provider), "POST", pnkit.path(self.provider),
                           headers, body, config=CFG)
        self.assertTrue(pnkit.is_success(self.provider, r), (r.status, r.body, r.stderr))
        return r

    def applied(self, oid):
        return [n for n in PG.notifications("order_id = %s" % pntest.q(oid))
                if n["outcome"] == "applied"]

    def source_of(self, nid):
        return PG.scalar("SELECT source FROM paynotify.notifications WHERE id = %d" % nid)

    def classes(self, rows):
        return sorted(r["class"] for r in rows)

    # per provider
    def txn(self):
        raise NotImplementedError

    def payment_row(self, oid, txn, minor=None, fee=0):
        raise NotImplementedError

    def statement(self, rows, **kw):
        raise NotImplementedError

    def notify_paid(self, oid, txn, minor=None):
        raise NotImplementedError

    def recon(self, rows, *args, **kw):
        path = write("%s-%s.csv" % (self.provider, digits()), self.statement(rows, **kw))
        return reconcile(self.provider, path, *args)

    # ---- cases ---------------------------------------------------------------
    def test_all_matched(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        rc, rows, err = self.recon([self.payment_row(oid, txn, fee=40)])
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(self.classes(rows), ["matched"], rows)
        self.assertEqual(rows[0]["statement"], "payment %s %s" % (yuan(self.amount),
                                                                  self.currency))
        self.assertEqual(rows[0]["fee"], "0.40 %s" % self.currency)
        self.assertEqual(rows[0]["net"], "%s %s" % (yuan(self.amount - 40), self.currency))
        self.assertIn("matched 1", err)
        self.assertIn("%s: payments 1 %s %s" % (self.currency, yuan(self.amount), self.currency),
                      err)

    def test_lost_payment_applied_once_then_notification_applies_nothing(self):
        oid, txn = self.new_order(), self.txn()
        rows_in = [self.payment_row(oid, txn)]
        rc, rows, err = self.recon(rows_in)
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["missing_payment"], rows)
        self.assertEqual(rows[0]["result"], "not applied")
        self.assertEqual(PG.order(SITE, oid)["status"], "pending", "a dry run changed the order")
        self.assertEqual(PG.notifications(), [])

        rc, rows, err = self.recon(rows_in, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied")], rows)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        stored = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertEqual(len(stored), 1)
        self.assertEqual(self.source_of(stored[0]["id"]), "statement")
        self.assertIn(oid.encode(), stored[0]["raw_body"], "the statement line is kept")

        # the real notification, late: acknowledged, nothing applied a second time
        self.notify_paid(oid, txn)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        self.assertEqual(len(self.applied(oid)), 1, "applied twice")
        after = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertTrue(after[0]["deliveries"] == 2
                        or (len(after) == 2 and after[1]["outcome"] == "already_applied"), after)

        rc, rows, err = self.recon(rows_in, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(self.classes(rows), ["matched"], rows)
        self.assertEqual(len(self.applied(oid)), 1)

        # replay re-verifies notifications only: the statement's line has no signature
        p = subprocess.run([ADMIN, "-c", CFG, "replay", "--order", oid, "--format", "json"],
                           env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        replayed = json.loads(p.stdout.decode() or "[]")
        want = int(PG.scalar("SELECT count(*) FROM paynotify.notifications WHERE order_id = %s "
                             "AND source = 'notification'" % pntest.q(oid)))
        self.assertEqual(len(replayed), want, replayed)
        self.assertTrue(all(r.get("verified") == "yes" for r in replayed), replayed)

    def test_every_discrepancy(self):
        ok, ok_txn = self.new_order(), self.txn()
        self.notify_paid(ok, ok_txn)
        short, short_txn = self.new_order(), self.txn()          # collected less than ordered
        dup, dup_txn1, dup_txn2 = self.new_order(), self.txn(), self.txn()
        self.notify_paid(dup, dup_txn1)
        here_only, here_txn = self.new_order(), self.txn()       # paid here, not at the provider
        self.notify_paid(here_only, here_txn)
        unknown = "R-nosuch-" + digits()
        lost = self.new_order()
        stmt = [self.payment_row(ok, ok_txn, fee=40),
                self.payment_row(short, short_txn, minor=self.amount - 100),
                self.payment_row(dup, dup_txn1), self.payment_row(dup, dup_txn2),
                self.payment_row(unknown, self.txn()),
                self.payment_row(lost, self.txn())]
        before = PG.psql("SELECT order_id, status FROM paynotify.orders ORDER BY order_id")
        rc, rows, err = self.recon(stmt)
        self.assertEqual(rc, 1, (rows, err))
        got = {(r["class"], r["order_id"]) for r in rows}
        self.assertEqual(got, {("matched", ok), ("matched", dup), ("amount_mismatch", short),
                               ("duplicate_payment", dup), ("unknown_order", unknown),
                               ("missing_payment", lost), ("not_in_statement", here_only)},
                         rows)
        mm = [r for r in rows if r["class"] == "amount_mismatch"][0]
        self.assertIn("%s %s" % (yuan(self.amount - 100), self.currency), mm["detail"])
        self.assertIn("needs a human 5", err)
        self.assertIn(", paid here not on the statement 1 %s %s" % (yuan(self.amount),
                                                                    self.currency), err)
        self.assertEqual(before, PG.psql("SELECT order_id, status FROM paynotify.orders "
                                         "ORDER BY order_id"), "a dry run changed orders")
        # --apply: the lost one is applied; the duplicate is recorded for a human
        rc, rows, err = self.recon(stmt, "--apply")
        self.assertEqual(rc, 1, (rows, err))
        res = {r["class"]: r["result"] for r in rows}
        self.assertEqual(res["missing_payment"], "applied")
        self.assertEqual(res["duplicate_payment"], "duplicate_payment")
        self.assertEqual(PG.order(SITE, lost)["status"], "paid")
        self.assertEqual(PG.order(SITE, short)["status"], "pending")
        self.assertEqual(PG.order(SITE, dup)["psp_txn_id"], dup_txn1)

    def test_cut_off_in_the_providers_zone(self):
        """The day is the provider's (Alipay, WeChat Pay UTC+8, Stripe UTC); paid_at is when
        the payment was applied here, after the provider completed it."""
        day, nxt = "2024-05-20", "2024-05-21"
        start = datetime.datetime(2024, 5, 20) - datetime.timedelta(hours=self.offset_h)
        cut = start + datetime.timedelta(days=1)           # the day's end, in UTC

        def paid(at):
            oid, txn = self.new_order(), self.txn()
            self.notify_paid(oid, txn)
            PG.psql("UPDATE paynotify.orders SET paid_at = '%s+00' WHERE order_id = %s"
                    % (at.isoformat(sep=" "), pntest.q(oid)))
            return oid, txn

        # completed at 23:59:50 the provider's time, the notification applied 2 s after
        late, late_txn = paid(cut + datetime.timedelta(seconds=2))
        near, _ = paid(cut - datetime.timedelta(minutes=10))   # not on the day's statement
        mid, _ = paid(start + datetime.timedelta(hours=5))     # not on the statement either
        after, _ = paid(cut + datetime.timedelta(seconds=30))  # the next day, in that zone
        row = self.payment_row(late, late_txn)
        row["time"] = "%s 23:59:50" % day
        self.day = day
        rc, rows, err = self.recon([row], "--date", day)
        self.assertEqual(rc, 1, (rows, err))
        got = {r["order_id"]: r for r in rows}
        self.assertEqual(sorted(got), sorted([late, near, mid]), rows)
        self.assertEqual(got[late]["class"], "matched")
        self.assertEqual(got[near]["class"], "not_in_statement")
        self.assertIn("within 15 minutes of the statement's cut-off", got[near]["detail"])
        self.assertIn("UTC%+d" % self.offset_h, got[near]["detail"])
        local = (cut - datetime.timedelta(minutes=10)
                 + datetime.timedelta(hours=self.offset_h)).isoformat(sep=" ")
        self.assertIn("paid here at %s" % local, got[near]["detail"])
        self.assertEqual(got[mid]["class"], "not_in_statement")
        self.assertIn("query the provider", got[mid]["detail"])
        self.assertIn("UTC%+d" % self.offset_h, err)

        # the next day's statement does not have them: the previous day's does (or may)
        self.day = nxt
        path = write("%s-%s.csv" % (self.provider, digits()), self.statement([]))
        rc, rows, err = reconcile(self.provider, path, "--date", nxt)
        self.assertEqual(rc, 1, (rows, err))
        got = {r["order_id"]: r for r in rows}
        self.assertEqual(sorted(got), sorted([late, after]), rows)
        # no statement row: the money at stake is still in the summary, in its currency
        self.assertIn("; %s: payments 0 0.00 %s, refunds 0 0.00 %s, fees 0.00 %s, net 0.00 %s, "
                      "paid here not on the statement 2 %s %s"
                      % ((self.currency,) * 5 + (yuan(2 * self.amount), self.currency)), err)
        for oid, secs in ((late, 2), (after, 30)):
            self.assertEqual(got[oid]["class"], "not_in_statement")
            self.assertIn("%d s after the previous day's cut-off" % secs, got[oid]["detail"])
            self.assertIn("previous day's statement", got[oid]["detail"])

    def test_applied_from_a_past_statement_is_not_missing_from_the_next(self):
        """The daily routine: yesterday's lost payment applied this morning (paid_at today)
        is on yesterday's statement, not a discrepancy of today's."""
        oid, txn = self.new_order(), self.txn()
        row = self.payment_row(oid, txn)
        row["time"] = "2024-05-20 12:00:00"
        today = self.day
        self.day = "2024-05-20"
        rc, rows, err = self.recon([row], "--apply")
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied")], (rows, err))
        self.day = today
        path = write("%s-%s.csv" % (self.provider, digits()), self.statement([]))
        rc, rows, err = reconcile(self.provider, path, "--date", today)
        self.assertEqual((rc, rows), (0, []), err)
        # paid here by its notification today and absent: still reported
        other, other_txn = self.new_order(), self.txn()
        self.notify_paid(other, other_txn)
        rc, rows, err = reconcile(self.provider, path, "--date", today)
        self.assertEqual((rc, [(r["class"], r["order_id"]) for r in rows]),
                         (1, [("not_in_statement", other)]), err)

    def test_paid_after_close_applied_for_a_human(self):
        oid, txn = self.new_order(status="closed"), self.txn()
        rc, rows, err = self.recon([self.payment_row(oid, txn)], "--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "paid_after_close")], rows)
        self.assertIn("the order is closed here", rows[0]["detail"])
        self.assertEqual(len(PG.notifications("order_id = %s" % pntest.q(oid))), 1)
        self.assertIn("applied 0", err)
        stored = PG.notifications("order_id = %s" % pntest.q(oid))
        self.assertEqual([n["outcome"] for n in stored], ["paid_after_close"])
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        # again: the statement and the order now agree; the human's item stays on the
        # stored notification (paynotify report), nothing is applied a second time
        rc, rows, err = self.recon([self.payment_row(oid, txn)], "--apply")
        self.assertEqual((rc, self.classes(rows)), (0, ["matched"]), (rows, err))
        self.assertEqual(len(PG.notifications("order_id = %s" % pntest.q(oid))), 1)

    def test_malformed_file_exit_3_nothing_changed(self):
        oid, txn = self.new_order(), self.txn()
        for name, data, where in self.malformed(oid, txn):
            path = write("bad-%s" % name, data)
            rc, rows, err = reconcile(self.provider, path, "--apply")
            self.assertEqual(rc, 3, (name, rows, err))
            self.assertIn("nothing changed", err, name)
            self.assertIn(where, err, (name, err))
            self.assertEqual(rows, [])
            self.assertEqual(PG.order(SITE, oid)["status"], "pending", name)
            self.assertEqual(PG.notifications(), [], name)

    def test_unreadable_file_exit_3(self):
        rc, rows, err = reconcile(self.provider, os.path.join(TMP, "no-such-file"))
        self.assertEqual(rc, 3, err)
        self.assertIn("could not read the statement", err)


class TestAlipay(Base, unittest.TestCase):
    provider = "alipay"

    def txn(self):
        return "2026" + digits().rjust(24, "0")

    def payment_row(self, oid, txn, minor=None, fee=0):
        return {"trade_no": txn, "oid": oid, "type": "交易", "time": self.t,
                "minor": minor or self.amount, "fee": fee}

    def refund_row(self, oid, txn, minor, batch):
        return {"trade_no": txn, "oid": oid, "type": "退款", "time": self.t, "minor": -minor,
                "fee": 0, "batch": batch}

    def statement(self, rows, **kw):
        return alipay_bill(self.day, rows, **kw)

    def notify_paid(self, oid, txn, minor=None):
        body = pntest.alipay_notification(pnkit.ALIPAY_SITE, oid, yuan(minor or self.amount),
                                          trade_no=txn)
        return self.deliver(pntest.alipay_headers(), body)

    def notify_refund(self, oid, txn, refund_fee_total, batch):
        body = pntest.alipay_notification(pnkit.ALIPAY_SITE, oid, yuan(self.amount),
                                          trade_no=txn, refund_fee=yuan(refund_fee_total),
                                          out_biz_no=batch, gmt_refund=self.t + ".000")
        return self.deliver(pntest.alipay_headers(), body)

    def malformed(self, oid, txn):
        good = [self.payment_row(oid, txn)]
        full = alipay_bill(self.day, good)
        refunded = good + [self.refund_row(oid, txn, 1000, "RF" + digits())]
        nul = b"\0" * 4096
        return [
            ("truncated", alipay_bill(self.day, good, cut=6), "before the"),
            ("edited-total", alipay_bill(self.day, good, edit_total=100),
             "line 8: the bill's 交易合计 line does not match its rows: it says 1 rows, "
             "商家实收 67.00 CNY"),
            ("edited-refund-total", alipay_bill(self.day, refunded, edit_refund_total=-1),
             "line 10: the bill's 退款合计 line does not match its rows: it says 1 rows, "
             "商家实收 -10.01 CNY, 商家优惠 0.00 CNY; the 退款 rows are 1, -10.00 CNY"),
            ("edited-refund-count", alipay_bill(self.day, refunded, totals=lambda t: [
                t[0], t[1].replace("1笔", "2笔")]), "line 10: the bill's 退款合计 line does "
             "not match its rows: it says 2 rows"),
            ("edited-refund-discount", alipay_bill(self.day, refunded, totals=lambda t: [
                t[0], t[1].replace("商家优惠退款共0.00元", "商家优惠退款共-0.50元")]),
             "商家优惠 -0.50 CNY; the 退款 rows are 1, -10.00 CNY, 0.00 CNY"),
            ("no-refund-total", alipay_bill(self.day, refunded, totals=lambda t: t[:1]),
             "no \"#退款合计：\" totals line after the rows"),
            ("no-trade-total", alipay_bill(self.day, good, totals=lambda t: t[1:]),
             "no \"#交易合计：\" totals line after the rows"),
            ("two-refund-totals", alipay_bill(self.day, refunded, totals=lambda t: t + t[1:]),
             "line 11: a second 退款合计 line (the first is line 10)"),
            # the trade line's wording on the refund line (this file's fixture once had
            # it): never read as "no sum to check"
            ("refund-total-trade-wording", alipay_bill(self.day, refunded, totals=lambda t: [
                t[0], t[1].replace("商家实收退款共", "商家实收共")]),
             "line 10: unreadable 退款合计 line"),
            ("refund-total-no-discount", alipay_bill(self.day, refunded, totals=lambda t: [
                t[0], t[1].split("，商家优惠")[0]]), "line 10: unreadable 退款合计 line"),
            ("nul-bytes", nul, "not text: NUL bytes at offset 0 (all 4096 bytes are NUL: "
             "a truncated or corrupt download?)"),
            ("nul-zip", alipay_zip(self.day, nul), "the zip's 业务明细 file "
             + pnkit.ALIPAY_SELLER_ID + "0156_" + self.day.replace("-", "")
             + "_业务明细.csv: not text: NUL bytes at offset 0"),
            ("nul-tail", full + nul, "not text: NUL bytes at offset %d" % len(full)),
            ("empty-zip-entry", alipay_zip(self.day, b""), "业务明细.csv: empty (0 bytes"),
            ("utf-16", "\ufeff#支付宝业务明细查询\r\n".encode("utf-16-le"), "UTF-16"),
            ("bad-amount", full.replace(yuan(self.amount).encode(), b"66,00", 1), "line 6"),
            ("not-gbk", b"#\xff\xff\xff\r\n", "not GBK"),
            ("utf8-header-only", "#支付宝业务明细查询\n".encode(), "no header row"),
            ("monthly", full.replace(b"00:00:00]   ", b"00:00:00]  ", 1).replace(
                (datetime.date.fromisoformat(self.day) + datetime.timedelta(days=1)).strftime(
                    "%Y年%m月%d日 00:00:00]").encode("gbk"),
                (datetime.date.fromisoformat(self.day) + datetime.timedelta(days=31)).strftime(
                    "%Y年%m月%d日 00:00:00]").encode("gbk"), 1), "not one day"),
        ]

    def test_empty_day(self):
        rc, rows, err = self.recon([])
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows, [])
        self.assertIn("0 statement rows", err)

    def test_genuine_footer_passes_edited_refund_total_refused(self):
        # the shape of the published sample: six 交易 of 0.01, four of them refunded
        # (退款 -0.01): its footer, byte for byte, is what the bill must carry
        orders = [(self.new_order(amount=1), self.txn()) for _ in range(6)]
        stmt = [self.payment_row(oid, txn, minor=1) for oid, txn in orders]
        stmt += [self.refund_row(oid, txn, 1, "re_test_" + digits()) for oid, txn in orders[:4]]
        bill = alipay_bill(self.day, stmt)
        text = bill.decode("gbk")
        self.assertIn("\r\n#交易合计：6笔，商家实收共0.06元，商家优惠共0.00元\r\n"
                      "#退款合计：4笔，商家实收退款共-0.04元，商家优惠退款共0.00元\r\n", text)
        edited = text.replace("商家实收退款共-0.04元", "商家实收退款共-0.03元").encode("gbk")
        rc, rows, err = reconcile(self.provider, write("alipay-%s.csv" % digits(), edited),
                                  "--apply")
        self.assertEqual(rc, 3, (rows, err))
        self.assertIn("the bill's 退款合计 line does not match its rows: it says 4 rows, "
                      "商家实收 -0.03 CNY, 商家优惠 0.00 CNY; the 退款 rows are 4, -0.04 CNY, "
                      "0.00 CNY (an edited or truncated bill: refused); nothing changed", err)
        self.assertEqual(rows, [])
        self.assertEqual(PG.notifications(), [])
        self.assertEqual([PG.order(SITE, oid)["status"] for oid, _ in orders], ["pending"] * 6)
        rc, rows, err = reconcile(self.provider, write("alipay-%s.csv" % digits(), bill),
                                  "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied")] * 6
                         + [("missing_refund", "applied")] * 4, rows)
        self.assertEqual([PG.order(SITE, oid)["status"] for oid, _ in orders],
                         ["refunded"] * 4 + ["paid"] * 2)

    def test_the_zip_as_downloaded(self):
        oid, txn = self.new_order(), self.txn()
        bill = alipay_bill(self.day, [self.payment_row(oid, txn)])
        for gbk in (True, False):
            PG.reset()
            PG.add_order(SITE, oid, self.amount, self.currency)
            path = write("alipay-%s.zip" % digits(), alipay_zip(self.day, bill, gbk_names=gbk))
            rc, rows, err = reconcile(self.provider, path, "--apply")
            self.assertEqual(rc, 0, (gbk, rows, err))
            self.assertEqual([(r["class"], r["result"]) for r in rows],
                             [("missing_payment", "applied")], rows)
        path = write("alipay-%s.zip" % digits(), alipay_zip(self.day, bill, with_detail=False))
        rc, rows, err = reconcile(self.provider, path, "--apply")
        self.assertEqual(rc, 3, err)
        self.assertIn("no 业务明细 file", err)
        data = alipay_zip(self.day, bill)
        path = write("alipay-%s.zip" % digits(), data[:len(data) // 2])
        rc, rows, err = reconcile(self.provider, path, "--apply")
        self.assertEqual(rc, 3, err)
        self.assertIn("zip", err)

    def test_another_account_refused(self):
        oid, txn = self.new_order(), self.txn()
        rc, rows, err = self.recon([self.payment_row(oid, txn)], "--apply",
                                 account="20889999999999990156")
        self.assertEqual(rc, 3, err)
        self.assertIn("not site shop-x's seller_id", err)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_lost_refund_applied_once_then_refund_notification(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        stmt = [self.payment_row(oid, txn), self.refund_row(oid, txn, 1000, "RF" + digits())]
        rc, rows, err = self.recon(stmt)
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["matched", "missing_refund"], rows)
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 0)
        rc, rows, err = self.recon(stmt, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows[1]["result"], "applied", rows)
        o = PG.order(SITE, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 1000))
        # Alipay's refund notification (refund_fee is the running total), late
        self.notify_refund(oid, txn, 1000, stmt[1]["batch"])
        o = PG.order(SITE, oid)
        self.assertEqual((o["status"], o["refunded_minor"]), ("partially_refunded", 1000),
                         "the refund was applied twice")
        refunds = [n for n in PG.notifications("order_id = %s AND event_kind = 'refund'"
                                               % pntest.q(oid))]
        # the same dedup identity (adapters keyed on trade_no): a second delivery of the
        # statement's row; a receiver keyed otherwise: a second row, already_applied
        self.assertTrue((len(refunds) == 1 and refunds[0]["deliveries"] == 2)
                        or (len(refunds) == 2 and refunds[1]["outcome"] == "already_applied"),
                        refunds)
        rc, rows, err = self.recon(stmt, "--apply")
        self.assertEqual((rc, self.classes(rows)), (0, ["matched", "matched"]), (rows, err))

    def test_refund_notification_first_then_statement(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        batch = "RF" + digits()
        self.notify_refund(oid, txn, 6600, batch)        # whole: the bill's TRADE_CLOSED case
        self.assertEqual(PG.order(SITE, oid)["status"], "refunded")
        rc, rows, err = self.recon([self.payment_row(oid, txn),
                                    self.refund_row(oid, txn, 6600, batch)], "--apply")
        self.assertEqual((rc, self.classes(rows)), (0, ["matched", "matched"]), (rows, err))
        # on the notification's identity, or (a receiver keyed otherwise) on the total
        self.assertIn(rows[1]["detail"], (None, "refund total recorded here"), rows)
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 6600)

    def test_refund_here_not_in_statement(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        self.notify_refund(oid, txn, 1000, "RF" + digits())
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 1000)
        rc, rows, err = self.recon([self.payment_row(oid, txn)], "--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["matched", "refund_not_in_statement"], rows)
        r = [x for x in rows if x["class"] == "refund_not_in_statement"][0]
        self.assertEqual(r["order_id"], oid)
        self.assertIn("is not on the statement", r["detail"])
        self.assertIsNone(r["result"], "nothing is applied for it")
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 1000)

    def test_refund_applied_from_a_past_statement_is_not_missing_from_the_next(self):
        oid, txn = self.new_order(), self.txn()
        pay, ref = self.payment_row(oid, txn), self.refund_row(oid, txn, 1000, "RF" + digits())
        pay["time"] = ref["time"] = "2024-05-20 12:00:00"
        today = self.day
        self.day = "2024-05-20"
        rc, rows, err = self.recon([pay, ref], "--apply")
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied"), ("missing_refund", "applied")],
                         (rows, err))
        self.day = today
        rc, rows, err = self.recon([], "--date", today)
        self.assertEqual((rc, rows), (0, []), err)

    def test_refund_over_the_paid_amount(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        rc, rows, err = self.recon([self.payment_row(oid, txn),
                                    self.refund_row(oid, txn, 5000, "A" + digits()),
                                    self.refund_row(oid, txn, 5000, "B" + digits())], "--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["matched", "missing_refund",
                                              "refund_total_mismatch"], rows)
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 5000)


class TestWechatPay(Base, unittest.TestCase):
    provider = "wechatpay"

    def txn(self):
        return "4200" + digits().rjust(24, "0")

    def payment_row(self, oid, txn, minor=None, fee=0):
        return {"time": self.t, "txn": txn, "oid": oid, "state": "SUCCESS",
                "minor": minor or self.amount, "fee": fee}

    def statement(self, rows, **kw):
        return wechat_bill(rows, **kw)

    def notify_paid(self, oid, txn, minor=None):
        return self.deliver(*pnkit.wechat_paid(oid, minor or self.amount, txn=txn))

    def malformed(self, oid, txn):
        good = [self.payment_row(oid, txn)]
        return [
            ("no-totals", wechat_bill(good, drop_totals=True), "before its totals row"),
            ("edited-count", wechat_bill(good, edit_count=1), "line 4"),
            ("no-backtick", wechat_bill(good, no_tick=True), "line 2: field 7"),
            ("gbk", wechat_bill(good).decode().encode("gbk"), "not UTF-8"),
            ("nul-bytes", b"\0" * 100, "not text: NUL bytes at offset 0 (all 100 bytes"),
            ("empty", b"", "empty (0 bytes"),
        ]

    def test_empty_day(self):
        path = write("wx-empty.csv", wechat_bill([]))
        rc, rows, err = reconcile(self.provider, path)
        self.assertEqual(rc, 64, err)
        self.assertIn("give --date", err)
        rc, rows, err = reconcile(self.provider, path, "--date", self.day)
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual(rows, [])

    def test_another_merchant_refused(self):
        oid, txn = self.new_order(), self.txn()
        rc, rows, err = self.recon([self.payment_row(oid, txn)], "--apply", mchid="1999999999")
        self.assertEqual(rc, 3, err)
        self.assertIn("is not site shop-x's wechatpay.mchid", err)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")

    def test_lost_refund_applied(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        rid = "5030" + digits()
        stmt = [self.payment_row(oid, txn),
                {"time": self.t, "txn": txn, "oid": oid, "state": "REFUND", "minor": 600,
                 "refund_id": rid}]
        rc, rows, err = self.recon(stmt, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("matched", None), ("missing_refund", "applied")], rows)
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 600)
        key = PG.scalar("SELECT dedup_key FROM paynotify.notifications WHERE event_kind = "
                        "'refund' AND order_id = %s" % pntest.q(oid))
        self.assertEqual(key, "refund:%s:REFUND.SUCCESS" % rid, "the v3 notification's key")
        rc, rows, err = self.recon(stmt, "--apply")
        self.assertEqual((rc, self.classes(rows)), (0, ["matched", "matched"]), (rows, err))
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 600)


class TestStripe(Base, unittest.TestCase):
    provider = "stripe"
    offset_h = 0
    currency = "USD"
    amount = 1999

    def txn(self):
        return "pi_test_" + digits()

    def payment_row(self, oid, txn, minor=None, fee=0):
        return {"time": self.t, "category": "charge", "minor": minor or self.amount,
                "fee": fee, "pi": txn, "oid": oid}

    def statement(self, rows, **kw):
        return stripe_report(rows)

    def notify_paid(self, oid, txn, minor=None):
        body = pntest.stripe_checkout_completed(oid, minor or self.amount, "usd",
                                                payment_intent=txn)
        return self.deliver(*pnkit.sign_stripe(body))

    def malformed(self, oid, txn):
        good = stripe_report([self.payment_row(oid, txn)])
        return [
            ("bad-net", good.replace(b",19.99,0.00,19.99,", b",19.99,0.00,19.98,", 1), "line 2"),
            ("not-a-report", b"id,amount\n1,2\n", "no column \"balance_transaction_id\""),
            ("quote", good.replace(b'"Payment', b'"Pay"ment', 1), "line 2"),
            ("other-day", stripe_report([self.payment_row(oid, txn),
                                         dict(self.payment_row(oid, txn),
                                              time="2020-01-01 10:00:00")]), "line 3"),
            ("nul-tail", good + b"\0\0", "not text: NUL bytes at offset %d (2 of %d bytes"
             % (len(good), len(good) + 2)),
        ]

    def test_empty_day(self):
        path = write("stripe-empty.csv", stripe_report([]))
        rc, rows, err = reconcile(self.provider, path, "--date", self.day)
        self.assertEqual(rc, 0, (rows, err))

    def test_dispute_and_refund(self):
        oid, txn = self.new_order(), self.txn()
        self.notify_paid(oid, txn)
        rc, rows, err = self.recon([
            self.payment_row(oid, txn, fee=88),
            {"time": self.t, "category": "refund", "minor": -500, "pi": txn, "oid": oid,
             "source": "re_" + digits()},
            {"time": self.t, "category": "dispute", "minor": -1499, "fee": 1500, "pi": txn,
             "oid": oid, "source": "du_" + digits()},
            {"time": self.t, "category": "fee", "minor": -200, "source": "fee_x"},
        ], "--apply")
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["dispute", "fee", "matched", "missing_refund"],
                         rows)
        self.assertIn("USD: payments 1 19.99 USD, refunds 1 5.00 USD, fees 15.88 USD, "
                      "net -17.88 USD", err)
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 500)
        # the charge.refunded notification (cumulative), late: adds nothing
        self.deliver(*pnkit.sign_stripe(pntest.stripe_charge_refunded(
            oid, self.amount, 500, "usd", payment_intent=txn)))
        self.assertEqual(PG.order(SITE, oid)["refunded_minor"], 500, "refund applied twice")

    def test_currency_mismatch_and_payouts(self):
        oid, txn = self.new_order(), self.txn()           # a USD order
        paid, paid_txn = self.new_order(), self.txn()
        self.notify_paid(paid, paid_txn)
        rc, rows, err = self.recon([
            dict(self.payment_row(oid, txn), cur="eur"),
            self.payment_row(paid, paid_txn),
            {"time": self.t, "category": "refund", "minor": -500, "pi": paid_txn, "oid": paid,
             "source": "re_" + digits(), "cur": "eur"},
            {"time": self.t, "category": "payout", "minor": -1999, "source": "po_" + digits()},
        ], "--apply")
        self.assertEqual(rc, 1, (rows, err))
        got = [(r["class"], r["order_id"]) for r in rows]
        self.assertEqual(got, [("currency_mismatch", oid), ("matched", paid),
                               ("currency_mismatch", paid), ("other", None)], rows)
        self.assertEqual(rows[0]["statement"], "payment 19.99 EUR")
        self.assertEqual(rows[0]["here"], "pending 19.99 USD")
        self.assertIn("payout: not compared", rows[3]["detail"])
        self.assertIn("needs a human 2", err)
        self.assertEqual(PG.order(SITE, oid)["status"], "pending", "applied in another currency")
        self.assertEqual(PG.order(SITE, paid)["refunded_minor"], 0)
        self.assertIn("EUR: payments 1 19.99 EUR, refunds 1 5.00 EUR", err)

    def test_totals_per_currency_never_folded(self):
        """Seventeen currencies on one report: each has its own totals in the summary."""
        curs = ["usd", "eur", "gbp", "aud", "cad", "chf", "cny", "hkd", "sgd", "nzd", "sek",
                "nok", "dkk", "pln", "czk", "thb", "myr"]
        rows_in = [{"time": self.t, "category": "charge", "minor": 1000 + i, "fee": 10 + i,
                    "pi": self.txn(), "oid": "R-nosuch-" + digits(), "cur": c}
                   for i, c in enumerate(curs)]
        rows_in.append(dict(rows_in[-1], minor=500, fee=5))
        rc, rows, err = self.recon(rows_in)
        self.assertEqual(rc, 1, (rows, err))
        self.assertEqual(self.classes(rows), ["unknown_order"] * 18)
        for i, c in enumerate(curs):
            C = c.upper()
            n, gross, fee = (2, 1000 + i + 500, 10 + i + 5) if i == 16 else (1, 1000 + i, 10 + i)
            self.assertIn("; %s: payments %d %s %s, refunds 0 0.00 %s, fees %s %s, net %s %s"
                          % (C, n, yuan(gross), C, C, yuan(fee), C, yuan(gross - fee), C), err)


try:
    import psp_standins  # noqa: E402
except ImportError:     # pragma: no cover (python3-cryptography missing)
    psp_standins = None

KEYS = os.path.join(pntest.REPO, "tests", "fixtures", "unit", "keys")
MERCHANT_SERIAL = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"


class TestFetch(unittest.TestCase):
    """--fetch: the bill downloaded from loopback stand-ins of WeChat Pay's and Alipay's
    bill APIs (tests/lib/psp_standins.py: HTTPS with a test CA, the merchant's request
    signature checked, the answers signed with the providers' test key)."""

    @classmethod
    def setUpClass(cls):
        if psp_standins is None:
            raise unittest.SkipTest("python3-cryptography is needed for the stand-ins")
        cls.si = psp_standins.Standins(
            provider_key=os.path.join(KEYS, "test-a.key.pem"),
            wrong_key=os.path.join(pntest.REPO, "tests", "fixtures", "keys",
                                   "site-b-private.pem"),
            merchant_pub=os.path.join(KEYS, "test-b.pub.pem"), app_id=pnkit.ALIPAY_APP_ID,
            mchid=pnkit.WX_MCHID, merchant_serial=MERCHANT_SERIAL, wx_pubid=pnkit.WX_PUBID,
            stripe_key="rk_test_unused", twoc2p_merchant=pnkit.TWOC2P_MERCHANT,
            twoc2p_secret=pnkit.TWOC2P_KEY)
        cfg = pnkit.write_all_config(PG)
        key = os.path.join(cfg.dir, "merchant-api.key")
        with open(os.path.join(KEYS, "test-b.key.pem"), "rb") as f:
            pntest.write_secret(key, f.read().decode())
        with open(cfg.path) as f:
            text = f.read()
        text = text.replace("[site %s]\n" % SITE, "\n".join([
            "[query]", "ca_file = %s" % cls.si.ca_file, "connect_timeout_ms = 1000",
            "timeout_ms = 5000", "", "[site %s]" % SITE,
            "wechatpay.query_private_key_file = merchant-api.key",
            "wechatpay.query_cert_serial = %s" % MERCHANT_SERIAL,
            "wechatpay.query_url = %s" % cls.si.url,
            "alipay.query_private_key_file = merchant-api.key",
            "alipay.query_url = %s/gateway.do" % cls.si.url, ""]))
        with open(cfg.path, "w") as f:
            f.write(text)
        cls.cfg = cfg.path

    def setUp(self):
        PG.reset()
        self.si.reset()
        self.w = TestWechatPay("test_all_matched")
        self.w.setUp()

    def tearDown(self):
        self.assertEqual(self.si.bad_requests, [], "the stand-in refused a request")

    def fetch(self, path, *args, provider="wechatpay"):
        p = subprocess.run([ADMIN, "-c", self.cfg, "reconcile", "--provider", provider,
                            "--site", SITE, "--statement", path, "--fetch", "--format",
                            "json"] + list(args), env=pntest.clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        out = p.stdout.decode()
        return p.returncode, json.loads(out) if out.strip().startswith("[") else [], \
            p.stderr.decode()

    def test_fetch_and_apply(self):
        oid, txn = self.w.new_order(), self.w.txn()
        bill = wechat_bill([self.w.payment_row(oid, txn, fee=40)])
        self.si.set_wx_bill(self.w.day, bill)
        path = os.path.join(TMP, "fetched-%s.csv" % digits())
        rc, rows, err = self.fetch(path, "--date", self.w.day, "--apply")
        self.assertEqual(rc, 0, (rows, err))
        self.assertIn("SHA1 checked", err)
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied")], rows)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), bill, "the bill is kept as downloaded")
        self.assertEqual([p for _, p in self.si.requests],
                         ["/v3/bill/tradebill?bill_date=%s&bill_type=ALL" % self.w.day,
                          "/v3/billdownload/file?token=%s" % self.w.day])

    def test_bad_hash_or_missing_bill_changes_nothing(self):
        oid, txn = self.w.new_order(), self.w.txn()
        self.si.set_wx_bill(self.w.day, wechat_bill([self.w.payment_row(oid, txn)]))
        self.si.mode = "bad_hash"
        path = os.path.join(TMP, "fetched-%s.csv" % digits())
        rc, rows, err = self.fetch(path, "--date", self.w.day, "--apply")
        self.assertEqual(rc, 3, err)
        self.assertIn("is not the hash_value", err)
        self.assertFalse(os.path.exists(path))
        self.assertEqual(PG.order(SITE, oid)["status"], "pending")
        self.si.mode = None
        rc, rows, err = self.fetch(path, "--date", "2020-01-01", "--apply")
        self.assertEqual(rc, 3, err)
        self.assertIn("NO_STATEMENT_EXIST", err)
        self.assertEqual(PG.notifications(), [])

    def test_fetch_alipay_zip_and_apply(self):
        a = TestAlipay("test_all_matched")
        a.setUp()
        oid, txn = a.new_order(), a.txn()
        z = alipay_zip(a.day, alipay_bill(a.day, [a.payment_row(oid, txn, fee=40)]))
        self.si.set_alipay_bill(a.day, z)
        path = os.path.join(TMP, "fetched-%s.zip" % digits())
        rc, rows, err = self.fetch(path, "--date", a.day, "--apply", provider="alipay")
        self.assertEqual(rc, 0, (rows, err))
        self.assertEqual([(r["class"], r["result"]) for r in rows],
                         [("missing_payment", "applied")], rows)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), z)
        self.assertEqual(PG.order(SITE, oid)["status"], "paid")
        # no bill that day: Alipay's signed error, nothing changed
        rc, rows, err = self.fetch(path + "2", "--date", "2020-01-01", "--apply",
                                   provider="alipay")
        self.assertEqual(rc, 3, err)
        self.assertIn("isp.bill_not_exist", err)
        # an answer signed with another key is refused
        self.si.mode = "wrong_key"
        rc, rows, err = self.fetch(path + "3", "--date", a.day, provider="alipay")
        self.assertEqual(rc, 3, err)
        self.assertIn("could not verify Alipay's signature", err)
        self.assertFalse(os.path.exists(path + "3"))

    def test_fetch_stripe_is_usage(self):
        p = subprocess.run([ADMIN, "-c", self.cfg, "reconcile", "--provider", "stripe", "--site",
                            SITE, "--statement", os.path.join(TMP, "x"), "--fetch"],
                           env=pntest.clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 64, p.stderr)


class TestUsage(unittest.TestCase):
    def test_usage(self):
        path = write("u.csv", b"x")
        for args, want in [([], 64),
                           (["--provider", "alipay", "--site", SITE], 64),
                           (["--provider", "paypal", "--site", SITE, "--statement", path], 64),
                           (["--provider", "2c2p", "--site", SITE, "--statement", path], 64),
                           (["--provider", "alipay", "--site", "nosuch", "--statement", path],
                            64),
                           (["--provider", "alipay", "--site", SITE, "--statement", path,
                             "--date", "2024-02-30"], 64),
                           (["--provider", "alipay", "--site", SITE, "--statement", path,
                             "--format", "xml"], 64)]:
            p = subprocess.run([ADMIN, "-c", CFG, "reconcile"] + args, env=pntest.clean_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(p.returncode, want, (args, p.stderr))
            if "2c2p" in args:
                # no layout was invented for 2C2P's report: the operator is told why
                self.assertIn(b"field table is unpublished", p.stderr)
                self.assertIn(b"use --by-query", p.stderr)


if __name__ == "__main__":
    unittest.main()

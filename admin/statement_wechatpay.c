/*
 * statement_wechatpay.c: WeChat Pay's trade bill (交易账单, tradebill) with
 * bill_type=ALL, as GET /v3/bill/tradebill's download_url (or the v2
 * downloadbill API) returns it.  Layout: docs/RECONCILE.md "WeChat Pay".
 *
 *   交易时间,公众账号ID,商户号,特约商户号,...,费率备注      (header row)
 *   `2024-05-20 10:00:05,`wx...,`1900000001,`0,...          (one row per payment
 *                                                           or refund; every field
 *                                                           starts with a backtick)
 *   总交易单数,应结订单总金额,退款总金额,...                  (totals header)
 *   `2,`66.00,`10.00,...                                    (totals row)
 *
 * Columns are found by name (the v2 layout says 子商户号 and 总金额 where
 * v3 says 特约商户号 and 应结订单金额).  The totals row is checked against
 * the rows.  UTF-8; times are Beijing time (UTC+8), one calendar day.
 * Fees (手续费) are written with 5 decimals; they are shown rounded to the
 * fen, half away from zero.
 */
#include "config.h"

#include <string.h>

#include "money.h"
#include "statement.h"
#include "wechatpay/identity.h"

enum col {
	C_TIME,
	C_APPID,
	C_MCHID,
	C_SUBMCH,
	C_TXN,
	C_OTN,
	C_STATE,
	C_CUR,
	C_SETTLE,
	C_REFUND_ID,
	C_OUT_REFUND,
	C_REFUND,
	C_REFUND_STATE,
	C_FEE,
	C_TOTAL,
	C_REFUND_ASKED,
	NCOLS
};

/* Each column and its v2 name where it differs; NULL second name: none. */
static const char *const col_names[NCOLS][2] = {
    {"交易时间", NULL},         {"公众账号ID", NULL},   {"商户号", NULL},
    {"特约商户号", "子商户号"}, {"微信订单号", NULL},   {"商户订单号", NULL},
    {"交易状态", NULL},         {"货币种类", NULL},     {"应结订单金额", "总金额"},
    {"微信退款单号", NULL},     {"商户退款单号", NULL}, {"退款金额", NULL},
    {"退款状态", NULL},         {"手续费", NULL},       {"订单金额", NULL},
    {"申请退款金额", NULL},
};
/* Optional columns (the newer layout only). */
#define OPTIONAL(c) ((c) == C_TOTAL || (c) == C_REFUND_ASKED || (c) == C_SUBMCH)

static bool
unquote(char **f, size_t n, int lineno, struct pn_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (f[i][0] != '`') {
			pn_err_set(err, "line %d: field %zu does not start with a backtick", lineno,
			           i + 1);
			return false;
		}
		f[i]++;
	}
	return true;
}

static bool
amount(const char *s, int64_t *out, const char *what, int lineno, struct pn_err *err)
{
	struct pn_err e;

	if (!pn_stmt_amount(s, 2, out, &e)) {
		pn_err_set(err, "line %d: %s \"%.32s\": %s", lineno, what, s, e.msg);
		return false;
	}
	return true;
}

/* 手续费: up to 5 decimals ("0.04000", "-0.00600"); rounded to the fen, half away from
 * zero. */
static bool
fee_amount(const char *s, int64_t *out, int lineno, struct pn_err *err)
{
	const char *p = s;
	bool neg = false;
	int64_t whole = 0, frac = 0;
	int nd = 0, nf = 0;

	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p >= '0' && *p <= '9' && nd < 12; p++, nd++)
		whole = whole * 10 + (*p - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && nf < 5; p++, nf++)
			frac = frac * 10 + (*p - '0');
	if (nd == 0 || *p != '\0') {
		pn_err_set(err, "line %d: 手续费 \"%.32s\" is not an amount of at most 5 decimals",
		           lineno, s);
		return false;
	}
	for (; nf < 5; nf++)
		frac *= 10;
	*out = whole * 100 + (frac + 500) / 1000;
	if (neg)
		*out = -*out;
	return true;
}

static bool
wechatpay_parse(struct pn_arena *a, const unsigned char *data, size_t len, struct pn_statement *st,
                struct pn_err *err)
{
	struct pn_lines l;
	char *line, *f[PN_STMT_MAX_FIELDS];
	size_t nf, ncols = 0;
	int col[NCOLS], i, state = 0; /* 0 header, 1 rows, 2 totals row, 3 done */
	int64_t sum_settle = 0, sum_refund = 0, v;
	long rows = 0;
	bool eof;

	if (!pn_stmt_text_check(data, len, err))
		return false;
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
		data += 3;
		len -= 3;
	}
	if (!pn_utf8_valid((const char *)data, len)) {
		pn_err_set(err, "not UTF-8 text (WeChat Pay bills are UTF-8)");
		return false;
	}
	memset(st, 0, sizeof(*st));
	pn_lines_init(&l, data, len);
	for (;;) {
		if (!pn_lines_next(&l, a, &line, &eof, err))
			return false;
		if (eof)
			break;
		if (*line == '\0')
			continue;
		if (state == 0) {
			if (!pn_csv_split(line, f, &nf, err)) {
				pn_err_prefix(err, "line %d (header row)", l.lineno);
				return false;
			}
			for (i = 0; i < NCOLS; i++) {
				col[i] = pn_csv_col(f, nf, col_names[i][0]);
				if (col[i] < 0 && col_names[i][1])
					col[i] = pn_csv_col(f, nf, col_names[i][1]);
				if (col[i] < 0 && !OPTIONAL(i)) {
					pn_err_set(err,
					           "line %d: not a WeChat Pay ALL trade bill: the "
					           "header row has no column \"%s\"",
					           l.lineno, col_names[i][0]);
					return false;
				}
			}
			ncols = nf;
			state = 1;
			continue;
		}
		if (state == 1 && strncmp(line, "总交易单数", strlen("总交易单数")) == 0) {
			state = 2;
			continue;
		}
		if (!pn_csv_split(line, f, &nf, err)) {
			pn_err_prefix(err, "line %d", l.lineno);
			return false;
		}
		if (!unquote(f, nf, l.lineno, err))
			return false;
		if (state == 2) {
			int64_t t_settle, t_refund;
			char s1[32], s2[32];

			if (nf < 3 || !pn_parse_i64(f[0], &v) ||
			    !amount(f[1], &t_settle, "应结订单总金额", l.lineno, err) ||
			    !amount(f[2], &t_refund, "退款总金额", l.lineno, err)) {
				if (nf < 3 || err->msg[0] == '\0')
					pn_err_set(err, "line %d: unreadable totals row", l.lineno);
				return false;
			}
			if (v != rows || t_settle != sum_settle || t_refund != sum_refund) {
				pn_money_format(sum_settle, 2, s1, sizeof(s1));
				pn_money_format(sum_refund, 2, s2, sizeof(s2));
				pn_err_set(
				    err,
				    "line %d: the totals row says %lld rows, %s settled, %s "
				    "refunded; the rows are %ld, %s, %s (truncated or edited?)",
				    l.lineno, (long long)v, f[1], f[2], rows, s1, s2);
				return false;
			}
			state = 3;
			continue;
		}
		if (state == 3) {
			pn_err_set(err, "line %d: text after the totals row", l.lineno);
			return false;
		}
		if (nf != ncols) {
			pn_err_set(err, "line %d: %zu fields, the header row has %zu", l.lineno, nf,
			           ncols);
			return false;
		}
		{
			struct pn_stmt_txn *t = pn_stmt_add(a, st, l.lineno, err);
			const char *state_word, *cur;
			int64_t settle, refund, fee, total;
			char canon[4];

			if (t == NULL)
				return false;
			rows++;
			t->raw = pn_arena_strndup(a, (const char *)l.raw, l.raw_len);
			t->raw_len = l.raw_len;
			t->time = f[col[C_TIME]];
			t->app_id = f[col[C_APPID]];
			t->mch_id =
			    col[C_SUBMCH] >= 0 && *f[col[C_SUBMCH]] && strcmp(f[col[C_SUBMCH]], "0")
			        ? f[col[C_SUBMCH]]
			        : f[col[C_MCHID]];
			t->psp_txn_id = *f[col[C_TXN]] ? f[col[C_TXN]] : NULL;
			t->order_id = *f[col[C_OTN]] ? f[col[C_OTN]] : NULL;
			state_word = f[col[C_STATE]];
			t->type = state_word;
			cur = f[col[C_CUR]];
			if (!pn_money_currency(cur, canon)) {
				pn_err_set(err,
				           "line %d: 货币种类 \"%.8s\" is not an ISO 4217 code",
				           l.lineno, cur);
				return false;
			}
			memcpy(t->currency, canon, 4);
			if (!pn_stmt_time(t->time, 8 * 3600, &t->epoch)) {
				pn_err_set(err,
				           "line %d: 交易时间 \"%.40s\" is not YYYY-MM-DD HH:MM:SS",
				           l.lineno, t->time);
				return false;
			}
			if (!amount(f[col[C_SETTLE]], &settle, col_names[C_SETTLE][0], l.lineno,
			            err) ||
			    !amount(f[col[C_REFUND]], &refund, "退款金额", l.lineno, err) ||
			    !fee_amount(f[col[C_FEE]], &fee, l.lineno, err))
				return false;
			sum_settle += settle;
			sum_refund += refund;
			total = settle;
			if (col[C_TOTAL] >= 0 &&
			    !amount(f[col[C_TOTAL]], &total, "订单金额", l.lineno, err))
				return false;
			t->has_fee = true;
			t->fee_minor = fee;
			t->has_net = true;
			if (strcmp(state_word, "SUCCESS") == 0) {
				t->kind = PN_STMT_PAYMENT;
				t->amount_minor = total;
				t->net_minor = settle - fee;
			} else if (strcmp(state_word, "REFUND") == 0 &&
			           strcmp(f[col[C_REFUND_STATE]], "SUCCESS") == 0) {
				int64_t asked = refund;

				if (col[C_REFUND_ASKED] >= 0 &&
				    !amount(f[col[C_REFUND_ASKED]], &asked, "申请退款金额",
				            l.lineno, err))
					return false;
				t->kind = PN_STMT_REFUND;
				t->amount_minor = asked > 0 ? asked : refund;
				t->refund_id = *f[col[C_REFUND_ID]] ? f[col[C_REFUND_ID]] : NULL;
				t->net_minor = -refund - fee;
				if (t->refund_id == NULL) {
					pn_err_set(err,
					           "line %d: a refund row without 微信退款单号",
					           l.lineno);
					return false;
				}
			} else {
				/* REVOKED, a refund still PROCESSING, ...: listed for a human */
				t->kind = PN_STMT_OTHER;
				t->amount_minor = total;
				t->net_minor = settle - refund - fee;
			}
			if ((t->kind == PN_STMT_PAYMENT || t->kind == PN_STMT_REFUND) &&
			    (t->psp_txn_id == NULL || t->order_id == NULL ||
			     strlen(t->order_id) > 255 || strlen(t->psp_txn_id) > 64)) {
				pn_err_set(err,
				           "line %d: a %s row without a usable 微信订单号 and "
				           "商户订单号",
				           l.lineno, state_word);
				return false;
			}
			if (t->amount_minor < 0) {
				pn_err_set(err, "line %d: a negative amount on a %s row", l.lineno,
				           state_word);
				return false;
			}
		}
	}
	if (state == 0) {
		pn_err_set(err, "empty file: not even the header row of a WeChat Pay trade bill");
		return false;
	}
	if (state != 3) {
		pn_err_set(err,
		           "line %d: the file ends before its totals row (总交易单数; "
		           "truncated?)",
		           l.lineno);
		return false;
	}
	if (st->ntxns > 0) {
		/* the day: the first row's Beijing date */
		st->date = pn_arena_strndup(a, st->txns[0].time, 10);
	}
	return true;
}

static bool
wechatpay_check_site(const struct pn_site *site, const struct pn_statement *st, struct pn_err *err)
{
	size_t i;

	for (i = 0; i < st->ntxns; i++) {
		const struct pn_stmt_txn *t = &st->txns[i];

		if (site->wechatpay.mchid && t->mch_id &&
		    strcmp(t->mch_id, site->wechatpay.mchid)) {
			pn_err_set(err, "line %d: 商户号 %s is not site %s's wechatpay.mchid %s",
			           t->line, t->mch_id, site->name, site->wechatpay.mchid);
			return false;
		}
		if (site->wechatpay.appid && t->app_id && *t->app_id &&
		    strcmp(t->app_id, site->wechatpay.appid)) {
			pn_err_set(err,
			           "line %d: 公众账号ID %s is not site %s's wechatpay.appid %s",
			           t->line, t->app_id, site->name, site->wechatpay.appid);
			return false;
		}
	}
	return true;
}

static void
wechatpay_event(struct pn_arena *a, const struct pn_site *site, const struct pn_stmt_txn *t,
                int64_t order_amount, int64_t refunded_after, struct pn_event *ev)
{
	/* The identity of the notification this site receives (wechatpay/identity.c): API
	 * v3 when it has an APIv3 key (as `paynotify query`, which asks API v3), else API
	 * v2; the bill names the transaction and the refund (both required of its rows). */
	bool v3 = site->wechatpay.napiv3_keys > 0;
	struct pn_wechatpay_fact f;
	const char *missing;

	(void)refunded_after;
	pn_event_init(ev);
	ev->source = "statement";
	ev->key_id = "statement";
	ev->order_id = t->order_id;
	ev->psp_txn_id = t->psp_txn_id;
	ev->currency = pn_arena_strdup(a, t->currency);
	ev->psp_time = t->time;
	memset(&f, 0, sizeof(f));
	f.v2 = !v3;
	f.refund = t->kind != PN_STMT_PAYMENT;
	f.state = "SUCCESS";
	f.transaction_id = t->psp_txn_id;
	f.out_trade_no = t->order_id;
	f.refund_id = t->refund_id;
	if (t->kind == PN_STMT_PAYMENT) {
		ev->event_type = f.event_type = v3 ? "TRANSACTION.SUCCESS" : NULL;
		pn_wechatpay_identity(a, &f, ev, &missing);
		ev->amount_minor = t->amount_minor;
		return;
	}
	/* the notification's content (amount.total, amount.refund: this refund alone) */
	ev->event_type = f.event_type = v3 ? "REFUND.SUCCESS" : NULL;
	pn_wechatpay_identity(a, &f, ev, &missing);
	ev->amount_minor = order_amount;
	ev->refund_minor = t->amount_minor;
}

const struct pn_stmt_adapter pn_stmt_wechatpay = {
    .provider = "wechatpay",
    .format = "WeChat Pay trade bill (tradebill, bill_type=ALL)",
    .utc_offset_s = 8 * 3600,
    .parse = wechatpay_parse,
    .check_site = wechatpay_check_site,
    .event = wechatpay_event,
};

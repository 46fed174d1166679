/*
 * statement_alipay.c: Alipay's daily business detail bill (业务明细), the
 * CSV inside the zip that alipay.data.dataservice.bill.downloadurl.query
 * (bill_type=trade) points to.  Layout: docs/RECONCILE.md "Alipay".
 *
 * The zip itself is read too (libzip).  GBK encoded (read through iconv as
 * GB18030, its superset; a file already converted to UTF-8 is accepted
 * too).  Lines:
 *
 *   #支付宝业务明细查询
 *   #账号：[<PID>0156]
 *   #起始日期：[2024年05月20日 00:00:00]   终止日期：[2024年05月21日 00:00:00]
 *   #-----...业务明细列表-----...
 *   支付宝交易号,商户订单号,业务类型,...        (the header row: 25 columns)
 *   <rows: values padded with a trailing tab>
 *   #-----...业务明细列表结束-----...
 *   #交易合计：N笔，商家实收共X元，商家优惠共Y元
 *   #退款合计：M笔，商家实收退款共-Z元，商家优惠退款共W元
 *   #导出时间：[...]
 *
 * Currency: every amount column of this bill is named in yuan (订单金额（元）,
 * 商家实收（元）, 服务费（元）) and the totals lines say 元, so its rows are
 * CNY by the file's own wording; the columns are found by those exact
 * names, so a bill laid out in another currency is refused (no such
 * column), never read as CNY.  A row of a cross-border trade priced in
 * another trans_currency (webhooks/alipay.c pn_alipay_currency) is then a
 * currency_mismatch against its order in `reconcile`, never applied
 * (docs/PROVIDERS.md "Alipay: currency").
 *
 * Columns are found by name in the header row; both totals lines must be
 * there, in that wording, and agree with the rows (count, 商家实收 sum,
 * 商家优惠 sum, in fen), so a truncated or edited file is refused.
 *
 * The totals wording is that of real downloaded bills as public projects
 * reproduce them (docs/RECONCILE.md "Alipay" names them), e.g. a Java
 * payment library's AlipayGeneralPaymentHandlerTest alipayBill() fixture of
 * 2019-09-16:
 *   #交易合计：6笔，商家实收共0.06元，商家优惠共0.00元
 *   #退款合计：4笔，商家实收退款共-0.04元，商家优惠退款共0.00元
 * (its rows: six 交易 of 0.01 and four 退款 of -0.01: the sums are the
 * columns' signed sums per 业务类型).
 * Times are Beijing time (UTC+8); the bill covers one calendar day there.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <zip.h>

#include "alipay/identity.h"
#include "money.h"
#include "statement.h"

#define H_FIRST "#支付宝业务明细查询"
#define M_LIST "业务明细列表"
#define M_END "业务明细列表结束"
#define T_TRADE "#交易合计："
#define T_REFUND "#退款合计："
/* after the count: the 商家实收 and 商家优惠 labels of each totals line */
#define T_TRADE_RECV "商家实收共"
#define T_TRADE_DISC "商家优惠共"
#define T_REFUND_RECV "商家实收退款共"
#define T_REFUND_DISC "商家优惠退款共"

enum col {
	C_TRADE_NO,
	C_OTN,
	C_TYPE,
	C_DONE,
	C_TOTAL,
	C_RECEIVED,
	C_BATCH,
	C_FEE,
	C_DISCOUNT,
	NCOLS
};

static const char *const col_names[NCOLS] = {
    "支付宝交易号",   "商户订单号",        "业务类型",     "完成时间",       "订单金额（元）",
    "商家实收（元）", "退款批次号/请求号", "服务费（元）", "商家优惠（元）",
};

/* Alipay pads values with a tab (so spreadsheets keep long numbers as text). */
static char *
clean(char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	return s;
}

/* Signed fen as yuan, "-0.04" (pn_money_format takes no negative amounts). */
static void
yuan(int64_t minor, char *buf, size_t size)
{
	buf[0] = '-';
	pn_money_format(minor < 0 ? -minor : minor, 2, buf + (minor < 0), size - 1);
}

static bool
all_digits(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* "2024年05月20日 00:00:00" (after the "[") into "2024-05-20". */
static bool
cn_date(struct pn_arena *a, const char *s, const char **out)
{
	if (strlen(s) < 16 || strncmp(s + 4, "年", 3) != 0 || strncmp(s + 9, "月", 3) != 0 ||
	    strncmp(s + 14, "日", 3) != 0)
		return false;
	*out = pn_arena_printf(a, "%.4s-%.2s-%.2s", s, s + 7, s + 12);
	return true;
}

/* What one totals line says, or the rows add up to. */
struct totals {
	long count;
	int64_t received; /* 商家实收, fen, signed as in the bill */
	int64_t discount; /* 商家优惠, fen, signed as in the bill */
};

/* "<label><amount>元" at *p (amount signed, 2 decimals): fen, *p moved past it. */
static bool
labelled_amount(const char **p, const char *label, int64_t *minor)
{
	struct pn_err e;
	char num[32];
	size_t n;

	if (strncmp(*p, label, strlen(label)) != 0)
		return false;
	*p += strlen(label);
	n = strspn(*p, "-0123456789.");
	if (n == 0 || n >= sizeof(num) || strncmp(*p + n, "元", strlen("元")) != 0)
		return false;
	memcpy(num, *p, n);
	num[n] = '\0';
	if (!pn_stmt_amount(num, 2, minor, &e))
		return false;
	*p += n + strlen("元");
	return true;
}

/*
 * The text after "#交易合计：" or "#退款合计：", in the wording of real bills
 * and nothing else: "6笔，商家实收共0.06元，商家优惠共0.00元" or
 * "4笔，商家实收退款共-0.04元，商家优惠退款共0.00元".  Any other wording is
 * unreadable (never skipped: a check skipped is an edited total accepted).
 */
static bool
totals_line(const char *s, bool trade, struct totals *t)
{
	const char *p = s;
	size_t n = strspn(s, "0123456789");

	if (n == 0 || n > 9) /* a count, at most PN_STMT_MAX_ROWS: no overflow */
		return false;
	t->count = strtol(s, NULL, 10);
	p += n;
	if (strncmp(p, "笔，", strlen("笔，")) != 0)
		return false;
	p += strlen("笔，");
	if (!labelled_amount(&p, trade ? T_TRADE_RECV : T_REFUND_RECV, &t->received))
		return false;
	if (strncmp(p, "，", strlen("，")) != 0)
		return false;
	p += strlen("，");
	if (!labelled_amount(&p, trade ? T_TRADE_DISC : T_REFUND_DISC, &t->discount))
		return false;
	return *p == '\0';
}

/*
 * The zip bill_download_url serves: <PID>_<date>_业务明细.csv beside
 * <PID>_<date>_业务明细(汇总).csv, names in GBK without the UTF-8 flag.
 * The detail file is found by name (UTF-8-flagged names are read as they
 * are), its size bounded before it is inflated (libzip checks the CRC).
 */
static bool
alipay_unzip(struct pn_arena *a, const unsigned char *data, size_t len, const unsigned char **out,
             size_t *outlen, const char **entry, struct pn_err *err)
{
	zip_error_t ze;
	zip_source_t *src;
	zip_t *z;
	zip_stat_t zs;
	zip_file_t *f = NULL;
	zip_int64_t n, i, found = -1, got;
	const char *found_name = NULL;
	unsigned char *buf;
	bool ok = false;

	zip_error_init(&ze);
	if ((src = zip_source_buffer_create(data, len, 0, &ze)) == NULL) {
		pn_err_set(err, "could not read the zip: %s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		return false;
	}
	if ((z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze)) == NULL) {
		pn_err_set(err, "not a readable zip: %s", zip_error_strerror(&ze));
		zip_source_free(src);
		zip_error_fini(&ze);
		return false;
	}
	zip_error_fini(&ze);
	n = zip_get_num_entries(z, 0);
	for (i = 0; i < n && i < 64; i++) {
		const char *raw = zip_get_name(z, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
		char *name = NULL;
		struct pn_err e;

		if (raw == NULL)
			continue;
		if (pn_utf8_valid(raw, strlen(raw)))
			name = pn_arena_strdup(a, raw);
		else if (!pn_stmt_from_gbk(a, raw, strlen(raw), &name, &e))
			continue;
		if (strstr(name, "业务明细") == NULL || strstr(name, "汇总") != NULL)
			continue;
		if (found >= 0) {
			pn_err_set(err, "the zip holds two 业务明细 files");
			goto done;
		}
		found = i;
		found_name = name;
	}
	if (found < 0) {
		pn_err_set(err, "the zip holds no 业务明细 file (%lld entries)", (long long)n);
		goto done;
	}
	if (zip_stat_index(z, (zip_uint64_t)found, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE) ||
	    zs.size > PN_STMT_MAX_FILE) {
		pn_err_set(err, "the zip's 业务明细 file is larger than %d bytes",
		           PN_STMT_MAX_FILE);
		goto done;
	}
	if ((f = zip_fopen_index(z, (zip_uint64_t)found, 0)) == NULL) {
		pn_err_set(err, "could not open the zip's 业务明细 file: %s", zip_strerror(z));
		goto done;
	}
	buf = pn_arena_alloc(a, (size_t)zs.size + 1);
	got = zip_fread(f, buf, zs.size);
	if (got < 0 || (zip_uint64_t)got != zs.size) {
		pn_err_set(err, "could not inflate the zip's 业务明细 file: %s",
		           zip_file_strerror(f));
		goto done;
	}
	*out = buf;
	*outlen = (size_t)zs.size;
	*entry = found_name;
	ok = true;
done:
	if (f != NULL)
		zip_fclose(f);
	zip_discard(z);
	return ok;
}

static bool
alipay_parse(struct pn_arena *a, const unsigned char *data, size_t len, struct pn_statement *st,
             struct pn_err *err)
{
	struct pn_lines l;
	char *text, *line, *f[PN_STMT_MAX_FIELDS];
	size_t nf, ncols = 0;
	int col[NCOLS], i, state = 0; /* 0 preamble, 1 header next, 2 rows, 3 after */
	struct totals rows[2] = {{0, 0, 0}, {0, 0, 0}}; /* [0] 交易, [1] 退款 */
	int seen_total[2] = {0, 0};                     /* the line of each totals line */
	bool eof;
	struct pn_err e;

	if (len >= 4 && memcmp(data, "PK\x03\x04", 4) == 0) {
		const char *name;

		if (!alipay_unzip(a, data, len, &data, &len, &name, err))
			return false;
		if (!pn_stmt_text_check(data, len, err)) {
			pn_err_prefix(err, "the zip's 业务明细 file %s", name);
			return false;
		}
	} else if (!pn_stmt_text_check(data, len, err))
		return false;
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
		data += 3;
		len -= 3;
	}
	if (len >= strlen(H_FIRST) && memcmp(data, H_FIRST, strlen(H_FIRST)) == 0) {
		if (!pn_utf8_valid((const char *)data, len)) {
			pn_err_set(err, "starts as UTF-8 but is not valid UTF-8");
			return false;
		}
		text = pn_arena_strndup(a, (const char *)data, len);
	} else if (!pn_stmt_from_gbk(a, (const char *)data, len, &text, err)) {
		pn_err_prefix(err, "not an Alipay bill");
		return false;
	}
	memset(st, 0, sizeof(*st));
	pn_lines_init(&l, (const unsigned char *)text, strlen(text));
	for (;;) {
		if (!pn_lines_next(&l, a, &line, &eof, err))
			return false;
		if (eof)
			break;
		if (l.lineno == 1) {
			if (strcmp(clean(line), H_FIRST) != 0) {
				pn_err_set(err,
				           "line 1: expected \"%s\" (the business detail bill, "
				           "业务明细), found \"%.60s\"",
				           H_FIRST, line);
				return false;
			}
			continue;
		}
		if (state == 0) {
			if (strncmp(line, "#账号：[", strlen("#账号：[")) == 0) {
				char *acc = line + strlen("#账号：["), *close = strchr(acc, ']');

				if (close == NULL) {
					pn_err_set(err, "line %d: unreadable account line",
					           l.lineno);
					return false;
				}
				*close = '\0';
				st->account = pn_arena_strdup(a, acc);
			} else if (strncmp(line, "#起始日期：[", strlen("#起始日期：[")) == 0) {
				const char *from = line + strlen("#起始日期：["), *to, *d1, *d2;
				int64_t e1, e2;

				to = strstr(from, "终止日期：[");
				if (to == NULL || !cn_date(a, from, &d1) ||
				    !cn_date(a, to + strlen("终止日期：["), &d2) ||
				    !pn_stmt_day(d1, 8 * 3600, &e1) ||
				    !pn_stmt_day(d2, 8 * 3600, &e2)) {
					pn_err_set(err, "line %d: unreadable date range \"%.80s\"",
					           l.lineno, line);
					return false;
				}
				if (e2 - e1 != 86400) {
					pn_err_set(err,
					           "line %d: the bill covers %s to %s, not one day "
					           "(a monthly bill? reconcile takes daily bills)",
					           l.lineno, d1, d2);
					return false;
				}
				st->date = d1;
			} else if (line[0] == '#' && strstr(line, M_LIST) != NULL &&
			           strstr(line, M_END) == NULL) {
				state = 1;
			} else if (line[0] != '#') {
				pn_err_set(err,
				           "line %d: expected the \"%s\" marker before the rows",
				           l.lineno, M_LIST);
				return false;
			}
			continue;
		}
		if (state == 1) {
			if (!pn_csv_split(line, f, &nf, err)) {
				pn_err_prefix(err, "line %d (header row)", l.lineno);
				return false;
			}
			for (i = 0; i < NCOLS; i++) {
				col[i] = pn_csv_col(f, nf, col_names[i]);
				if (col[i] < 0) {
					pn_err_set(err,
					           "line %d: the header row has no column \"%s\"",
					           l.lineno, col_names[i]);
					return false;
				}
			}
			ncols = nf;
			state = 2;
			continue;
		}
		if (state == 2) {
			struct pn_stmt_txn *t;
			const char *type, *trade_no, *otn;
			int64_t total, recv, fee, disc;

			if (line[0] == '#') {
				if (strstr(line, M_END) == NULL) {
					pn_err_set(
					    err, "line %d: unexpected comment line inside the rows",
					    l.lineno);
					return false;
				}
				state = 3;
				continue;
			}
			if (!pn_csv_split(line, f, &nf, err)) {
				pn_err_prefix(err, "line %d", l.lineno);
				return false;
			}
			if (nf != ncols) {
				pn_err_set(err, "line %d: %zu fields, the header row has %zu",
				           l.lineno, nf, ncols);
				return false;
			}
			if ((t = pn_stmt_add(a, st, l.lineno, err)) == NULL)
				return false;
			t->raw = pn_arena_strndup(a, (const char *)l.raw, l.raw_len);
			t->raw_len = l.raw_len;
			type = clean(f[col[C_TYPE]]);
			trade_no = clean(f[col[C_TRADE_NO]]);
			otn = clean(f[col[C_OTN]]);
			t->type = type;
			t->time = clean(f[col[C_DONE]]);
			memcpy(t->currency, "CNY", 4);	/* the columns are in 元 (above) */
			if (strcmp(type, "交易") == 0)
				t->kind = PN_STMT_PAYMENT;
			else if (strcmp(type, "退款") == 0)
				t->kind = PN_STMT_REFUND;
			else {
				t->kind = PN_STMT_OTHER; /* listed for a human, never applied */
			}
			if (t->kind != PN_STMT_OTHER &&
			    (!all_digits(trade_no) || strlen(trade_no) > 64)) {
				pn_err_set(err,
				           "line %d: 支付宝交易号 \"%.40s\" is not a trade number",
				           l.lineno, trade_no);
				return false;
			}
			if (t->kind != PN_STMT_OTHER && (*otn == '\0' || strlen(otn) > 255)) {
				pn_err_set(err,
				           "line %d: 商户订单号 is empty or longer than 255 bytes",
				           l.lineno);
				return false;
			}
			t->psp_txn_id = *trade_no ? trade_no : NULL;
			t->order_id = *otn ? otn : NULL;
			if (!pn_stmt_time(t->time, 8 * 3600, &t->epoch)) {
				pn_err_set(err,
				           "line %d: 完成时间 \"%.40s\" is not YYYY-MM-DD HH:MM:SS",
				           l.lineno, t->time);
				return false;
			}
			if (!pn_stmt_amount(clean(f[col[C_TOTAL]]), 2, &total, &e) ||
			    !pn_stmt_amount(clean(f[col[C_RECEIVED]]), 2, &recv, &e) ||
			    !pn_stmt_amount(clean(f[col[C_FEE]]), 2, &fee, &e) ||
			    !pn_stmt_amount(clean(f[col[C_DISCOUNT]]), 2, &disc, &e)) {
				pn_err_set(err, "line %d: unreadable amount: %s", l.lineno, e.msg);
				return false;
			}
			if ((t->kind == PN_STMT_PAYMENT && total < 0) ||
			    (t->kind == PN_STMT_REFUND && total > 0)) {
				pn_err_set(err, "line %d: 订单金额 of a %s has the wrong sign",
				           l.lineno, type);
				return false;
			}
			t->amount_minor = total < 0 ? -total : total;
			t->has_fee = t->has_net = true;
			t->fee_minor = -fee; /* 服务费 is negative when charged */
			t->net_minor = recv + fee;
			if (t->kind == PN_STMT_REFUND) {
				const char *batch = clean(f[col[C_BATCH]]);

				t->refund_id = *batch ? batch : NULL;
			}
			if (t->kind == PN_STMT_PAYMENT || t->kind == PN_STMT_REFUND) {
				struct totals *sum = &rows[t->kind == PN_STMT_REFUND];

				/* integer fen; 10^6 rows of 10^15 fen could overflow: refused */
				sum->count++;
				if (__builtin_add_overflow(sum->received, recv, &sum->received) ||
				    __builtin_add_overflow(sum->discount, disc, &sum->discount)) {
					pn_err_set(err, "line %d: the rows' sums overflow",
					           l.lineno);
					return false;
				}
			}
			continue;
		}
		/* state 3: the totals and the export time */
		if (*clean(line) == '\0')
			continue;
		if (line[0] != '#') {
			pn_err_set(err, "line %d: rows after the \"%s\" marker", l.lineno, M_END);
			return false;
		}
		if (strncmp(line, T_TRADE, strlen(T_TRADE)) == 0 ||
		    strncmp(line, T_REFUND, strlen(T_REFUND)) == 0) {
			bool trade = strncmp(line, T_TRADE, strlen(T_TRADE)) == 0;
			const struct totals *want = &rows[!trade];
			struct totals said;
			const char *what = trade ? "交易合计" : "退款合计";

			if (seen_total[!trade]) {
				pn_err_set(err, "line %d: a second %s line (the first is line %d)",
				           l.lineno, what, seen_total[!trade]);
				return false;
			}
			seen_total[!trade] = l.lineno;
			if (!totals_line(clean(line) + strlen(trade ? T_TRADE : T_REFUND), trade,
			                 &said)) {
				pn_err_set(err,
				           "line %d: unreadable %s line \"%.100s\" (expected "
				           "\"%sN笔，%sX元，%sY元\")",
				           l.lineno, what, line, trade ? T_TRADE : T_REFUND,
				           trade ? T_TRADE_RECV : T_REFUND_RECV,
				           trade ? T_TRADE_DISC : T_REFUND_DISC);
				return false;
			}
			if (said.count != want->count || said.received != want->received ||
			    said.discount != want->discount) {
				char s1[32], s2[32], s3[32], s4[32];

				yuan(said.received, s1, sizeof(s1));
				yuan(want->received, s2, sizeof(s2));
				yuan(said.discount, s3, sizeof(s3));
				yuan(want->discount, s4, sizeof(s4));
				pn_err_set(
				    err,
				    "line %d: the bill's %s line does not match its rows: it "
				    "says %ld rows, 商家实收 %s CNY, 商家优惠 %s CNY; the %s "
				    "rows are %ld, %s CNY, %s CNY (an edited or truncated "
				    "bill: refused)",
				    l.lineno, what, said.count, s1, s3, trade ? "交易" : "退款",
				    want->count, s2, s4);
				return false;
			}
		}
	}
	if (state < 2) {
		pn_err_set(err, "line %d: no header row (\"%s\" marker missing)", l.lineno, M_LIST);
		return false;
	}
	if (state == 2) {
		pn_err_set(err, "line %d: the file ends before the \"%s\" marker (truncated?)",
		           l.lineno, M_END);
		return false;
	}
	for (i = 0; i < 2; i++)
		if (!seen_total[i]) {
			/* a real bill has both, "#退款合计：0笔，..." on a day without refunds */
			pn_err_set(err,
			           "line %d: no \"%s\" totals line after the rows (truncated or "
			           "edited?)",
			           l.lineno, i == 0 ? T_TRADE : T_REFUND);
			return false;
		}
	return true;
}

static bool
alipay_check_site(const struct pn_site *site, const struct pn_statement *st, struct pn_err *err)
{
	/* 账号 is the seller's PID (2088 + 12 digits) followed by a 4-digit suffix. */
	if (st->account != NULL && site->alipay.seller_id != NULL &&
	    strncmp(st->account, site->alipay.seller_id, strlen(site->alipay.seller_id)) != 0) {
		pn_err_set(err, "the bill is for Alipay account %s, not site %s's seller_id %s",
		           st->account, site->name, site->alipay.seller_id);
		return false;
	}
	return true;
}

static void
alipay_event(struct pn_arena *a, const struct pn_site *site, const struct pn_stmt_txn *t,
             int64_t order_amount, int64_t refunded_after, struct pn_event *ev)
{
	struct pn_alipay_fact fact;
	struct pn_alipay_amounts am;

	(void)site;
	pn_event_init(ev);
	ev->source = "statement";
	ev->key_id = "statement";
	ev->psp_time = t->time;
	/* the notification's identity (alipay/identity.c); the columns are in 元: CNY */
	memset(&fact, 0, sizeof(fact));
	fact.trade_no = t->psp_txn_id;
	fact.out_trade_no = t->order_id;
	fact.minor_known = true;
	if (t->kind == PN_STMT_PAYMENT) {
		fact.trade_status = "TRADE_SUCCESS";
		fact.total_minor = t->amount_minor;
		pn_alipay_identity(a, &fact, ev, &am);
		return;
	}
	/* A refund's notification: TRADE_SUCCESS while part is refunded, TRADE_CLOSED once
	 * all is, with exactly the notification's content (else a conflicting_duplicate):
	 * total_amount and refund_fee, the running total refunded. */
	fact.trade_status = refunded_after >= order_amount ? "TRADE_CLOSED" : "TRADE_SUCCESS";
	fact.refund = true;
	fact.out_biz_no = t->refund_id;
	fact.total_minor = order_amount;
	fact.refund_total_minor = refunded_after;
	pn_alipay_identity(a, &fact, ev, &am);
}

const struct pn_stmt_adapter pn_stmt_alipay = {
    .provider = "alipay",
    .format = "Alipay business detail bill (业务明细)",
    .utc_offset_s = 8 * 3600,
    .parse = alipay_parse,
    .check_site = alipay_check_site,
    .event = alipay_event,
};

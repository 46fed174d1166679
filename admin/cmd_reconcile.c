/*
 * cmd_reconcile.c: paynotify reconcile — compare one day of a provider's
 * statement with the stored notifications and the orders (对账), and with
 * --apply feed what the provider collected or refunded, but no
 * notification brought, through the same ingest as a notification
 * (docs/RECONCILE.md, docs/OPERATIONS.md "Daily reconciliation").
 *
 * The whole file is parsed (and its own totals checked) before anything
 * is read from or written to the database: a file that cannot be read or
 * does not parse exits 3 and changes nothing.  A statement row is applied
 * with ev->source "statement", its line as raw_body, and the dedup
 * identity of the provider's notification (or `paynotify query`) for the
 * same payment or refund (admin/statement_<provider>.c), so that whichever
 * comes second is a duplicate or already_applied, never a second
 * application.
 *
 * Exit status: 0 everything matched (lost payments and refunds applied
 * with --apply count as matched once applied), 1 something needs a human,
 * 3 could not do the job (file unreadable or malformed, a statement of
 * another merchant, database), 64 usage, 78 configuration.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"
#include "arena.h"
#include "crypto.h"
#include "json.h"
#include "money.h"
#include "provider.h"
#include "query.h"
#include "statement.h"
#include "store.h"
#include "strmap.h"

#define CUTOFF_NEAR_S                                                                              \
	900 /* "paid here, not in the statement" within 15 min after the day's                     \
	     * start: probably on the previous day's statement; within 15 min                      \
	     * before its end: perhaps on the next day's */

/* What a line of the report says. */
enum cls {
	K_MATCHED,                 /* statement and here agree */
	K_MISSING_PAYMENT,         /* paid at the provider, not here: a lost notification */
	K_MISSING_REFUND,          /* refunded at the provider, not here */
	K_NOT_IN_STATEMENT,        /* paid here, absent from the statement */
	K_REFUND_NOT_IN_STATEMENT, /* refunded here that day, absent from the statement */
	K_AMOUNT_MISMATCH,         /* the amounts differ */
	K_CURRENCY_MISMATCH,       /* the currencies differ */
	K_STATUS_MISMATCH,         /* --by-query: paid here, the provider says pending,
	                            * failed or cancelled */
	K_REFUND_TOTAL_MISMATCH,   /* the statement's refunds exceed what was paid, or a
	                            * refund is stored but did not move the order */
	K_DUPLICATE_PAYMENT,       /* two provider transactions for one order */
	K_UNKNOWN_ORDER,           /* the statement names an order we do not have */
	K_DISPUTE,                 /* a chargeback (Stripe) */
	K_FEE,                     /* a fee of its own: counted in the totals */
	K_OTHER,                   /* payouts, revoked trades...: listed, not compared */
	NCLS
};

static const char *const cls_names[NCLS] = {
    "matched",
    "missing_payment",
    "missing_refund",
    "not_in_statement",
    "refund_not_in_statement",
    "amount_mismatch",
    "currency_mismatch",
    "status_mismatch",
    "refund_total_mismatch",
    "duplicate_payment",
    "unknown_order",
    "dispute",
    "fee",
    "other",
};

/* ---- the run -------------------------------------------------------------- */

struct order {
	const char *order_id, *currency, *status, *psp, *psp_txn_id;
	int64_t amount, refunded, paid_at; /* paid_at: -1 when never paid */
	bool stmt_paid;                    /* a statement payment row names it */
	const char *stmt_txn;              /* that row's transaction */
	int64_t stmt_refunds;              /* statement refunds seen so far */
	int64_t refunded_now;              /* refunded here, after our own applies */
	bool by_statement;                 /* paid by a statement row (an earlier run) */
};

struct notif {
	const char *dedup_key, *event_kind, *order_id, *outcome, *source;
	int64_t received;
};

struct totals {
	char cur[4];
	int nrows, npay, nref;
	int nfee, nnet; /* rows that give a fee, a net amount */
	int64_t pay, ref, fee, net;
	int nabsent; /* orders paid here that day, not on the statement */
	int64_t absent;
};

struct run {
	const struct pn_stmt_adapter *ad;
	const struct pn_site *site;
	struct pn_config *cfg;
	struct pn_arena *a;
	struct pn_statement st;
	const char *path;
	const char *day;
	int64_t from, to; /* the day, Unix seconds, [from, to) */
	bool apply;
	PGconn *conn;
	struct pn_store *store;
	struct order *orders;
	size_t norders;
	struct pn_strmap by_order, by_txn, by_key, stmt_keys, refunded_orders;
	struct notif *notifs;
	size_t nnotifs;
	struct pn_table out;
	int count[NCLS];
	int human, applied, errors;
	struct totals *tot; /* one per currency, in the order first seen (arena) */
	size_t ntot, captot;
	/* --by-query: what was asked and answered, in the order asked */
	bool by_query;
	struct byq *byq;
	size_t nbyq;
	const char *row_order; /* the order a row names when it has no order here */
};

/* One inquiry of --by-query and its verified answer (arena). */
struct byq {
	const char *order_id;
	struct pn_query_answer ans;
	bool row; /* a paid answer: a payment row of r->st, compared as one */
};

static void
help(FILE *f)
{
	fprintf(f,
	        "usage: paynotify reconcile --provider P --site S --statement FILE [--date D]\n"
	        "                           [--fetch] [--apply] [--format table|csv|json] [--wide]\n"
	        "       paynotify reconcile --provider 2c2p --site S --by-query [--date D]\n"
	        "                           [--max-inquiries N] [--inquiries-per-second N]\n"
	        "                           [--apply] [--format table|csv|json] [--wide]\n\n"
	        "Compare one day of the provider's statement with the stored notifications and\n"
	        "the orders, in major units with currency:\n"
	        "  missing_payment / missing_refund  collected or refunded at the provider, not\n"
	        "                      here (a lost notification); --apply feeds it through the\n"
	        "                      ingest with source \"statement\" and the notification's\n"
	        "                      dedup identity, so it is applied once\n"
	        "  not_in_statement    paid here, absent from the statement\n"
	        "  refund_not_in_statement, amount_mismatch, currency_mismatch,\n"
	        "  refund_total_mismatch, duplicate_payment, unknown_order, dispute\n"
	        "Fees and net amounts are shown where the statement gives them.\n"
	        "Statements: alipay (业务明细 daily bill CSV, GBK), wechatpay (tradebill\n"
	        "bill_type=ALL), stripe (itemized balance change or payout reconciliation\n"
	        "report CSV); 2C2P's report is not read (its field table is unpublished:\n"
	        "docs/RECONCILE.md).  D is YYYY-MM-DD in the provider's day (Alipay,\n"
	        "WeChat Pay: UTC+8; Stripe: UTC); default: the day the statement covers.\n"
	        "--by-query (2C2P, instead of a statement): ask 2C2P's paymentInquiry, as\n"
	        "paynotify query does, about every order of the site created or changed on D\n"
	        "(UTC+7; default yesterday) and every order a 2C2P notification of D names,\n"
	        "one at a time, at most --inquiries-per-second (default 5, 1 to 50), at most\n"
	        "--max-inquiries (default 1000, 1 to 100000; more candidates: nothing is\n"
	        "asked, exit 3); the answers are compared as statement rows, plus\n"
	        "status_mismatch (paid here, 2C2P says pending or failed); refunds are not\n"
	        "compared (paymentInquiry does not report them).\n"
	        "--fetch (Alipay, WeChat Pay): download the day's bill (default: yesterday)\n"
	        "with the keys of `paynotify query` into FILE first (the Alipay zip; the\n"
	        "WeChat Pay ALL bill, its SHA1 checked against the signed answer).\n"
	        "Exit status: 0 all matched, 1 something needs a human, 3 the file cannot be\n"
	        "read or is malformed (nothing changed) or the database failed, 64 usage,\n"
	        "78 configuration.  See docs/RECONCILE.md.\n");
}

static void
money(char *buf, size_t n, int64_t minor, const char *cur)
{
	char num[48];
	int exp = pn_money_exponent(cur);

	pn_money_format(minor < 0 ? -minor : minor, exp < 0 ? 2 : exp, num, sizeof(num));
	snprintf(buf, n, "%s%s %s", minor < 0 ? "-" : "", num, cur);
}

static const char *
amt(struct run *r, int64_t minor, const char *cur)
{
	char buf[64];

	money(buf, sizeof(buf), minor, cur);
	return pn_arena_strdup(r->a, buf);
}

static const char *
kind_word(enum pn_stmt_kind k)
{
	switch (k) {
	case PN_STMT_PAYMENT:
		return "payment";
	case PN_STMT_REFUND:
		return "refund";
	case PN_STMT_DISPUTE:
		return "dispute";
	case PN_STMT_FEE:
		return "fee";
	case PN_STMT_OTHER:
		return "other";
	}
	return "other";
}

static struct totals *
totals_for(struct run *r, const char *cur)
{
	size_t i;

	for (i = 0; i < r->ntot; i++)
		if (strcmp(r->tot[i].cur, cur) == 0)
			return &r->tot[i];
	if (r->ntot == r->captot) {
		/* every currency its own totals: never folded into another's */
		size_t cap = r->captot ? r->captot * 2 : 8;
		struct totals *t = pn_arena_alloc(r->a, cap * sizeof(*t));

		if (r->ntot > 0)
			memcpy(t, r->tot, r->ntot * sizeof(*t));
		r->tot = t;
		r->captot = cap;
	}
	memset(&r->tot[r->ntot], 0, sizeof(r->tot[0]));
	snprintf(r->tot[r->ntot].cur, sizeof(r->tot[0].cur), "%s", cur);
	return &r->tot[r->ntot++];
}

static void
row(struct run *r, enum cls c, bool human, const struct pn_stmt_txn *t, const struct order *o,
    const char *result, const char *detail)
{
	const char *cells[10];
	char line[16];

	r->count[c]++;
	if (human)
		r->human++;
	snprintf(line, sizeof(line), "%d", t ? t->line : 0);
	cells[0] = cls_names[c];
	cells[1] = t && t->order_id ? t->order_id : o ? o->order_id : r->row_order;
	cells[2] = t && t->psp_txn_id ? t->psp_txn_id : o ? o->psp_txn_id : NULL;
	cells[3] = t ? line : NULL;
	cells[4] = t ? pn_arena_printf(r->a, "%s %s", kind_word(t->kind),
	                               amt(r, t->amount_minor, t->currency))
	             : NULL;
	cells[5] =
	    o ? pn_arena_printf(r->a, "%s %s%s", o->status, amt(r, o->amount, o->currency),
	                        o->refunded > 0 ? pn_arena_printf(r->a, ", %s refunded",
	                                                          amt(r, o->refunded, o->currency))
	                                        : "")
	    : t && (t->kind == PN_STMT_PAYMENT || t->kind == PN_STMT_REFUND) ? "no such order"
	                                                                     : NULL;
	cells[6] = t && t->has_fee ? amt(r, t->fee_minor, t->currency) : NULL;
	cells[7] = t && t->has_net ? amt(r, t->net_minor, t->currency) : NULL;
	cells[8] = result;
	cells[9] = detail;
	pn_table_add(&r->out, cells);
}

/* ---- loading -------------------------------------------------------------- */

static const char orders_sql[] =
    "SELECT order_id, amount_minor, currency, status, psp, psp_txn_id, refunded_minor,"
    "       coalesce(extract(epoch FROM paid_at)::bigint, -1) AS paid_at,"
    "       EXISTS (SELECT 1 FROM paynotify.notifications n"
    "                WHERE n.site = o.site AND n.order_id = o.order_id"
    "                  AND n.provider = $4 AND n.source = 'statement'"
    "                  AND n.event_kind = 'paid'"
    "                  AND n.outcome IN ('applied', 'paid_after_close')) AS by_statement"
    "  FROM paynotify.orders o"
    " WHERE site = $1"
    "   AND (order_id IN (SELECT jsonb_array_elements_text($2::jsonb))"
    "        OR psp_txn_id IN (SELECT jsonb_array_elements_text($3::jsonb))"
    "        OR (psp = $4 AND paid_at >= to_timestamp($5::bigint)"
    "            AND paid_at < to_timestamp($6::bigint)))"
    " ORDER BY paid_at NULLS LAST, order_id";

static const char notifs_sql[] =
    "SELECT dedup_key, event_kind, order_id, outcome, source,"
    "       extract(epoch FROM received_at)::bigint AS received"
    "  FROM paynotify.notifications"
    " WHERE site = $1 AND provider = $2"
    "   AND (dedup_key IN (SELECT jsonb_array_elements_text($3::jsonb))"
    "        OR (event_kind = 'refund' AND received_at >= to_timestamp($4::bigint)"
    "            AND received_at < to_timestamp($5::bigint)))"
    " ORDER BY id";

static const char *
dumps(struct run *r, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	const char *out = pn_arena_strdup(r->a, s ? s : "[]");

	free(s);
	json_decref(j);
	return out;
}

/* Both identities an Alipay refund may carry (part or whole refunded); one for the rest. */
static void
refund_keys(struct run *r, const struct pn_stmt_txn *t, const char **k1, const char **k2)
{
	struct pn_event ev;

	r->ad->event(r->a, r->site, t, 1, 0, &ev);
	*k1 = ev.dedup_key;
	r->ad->event(r->a, r->site, t, 1, 1, &ev);
	*k2 = strcmp(ev.dedup_key, *k1) ? ev.dedup_key : NULL;
}

static bool
parse_signed(const char *s, int64_t *out)
{
	if (s != NULL && s[0] == '-') {
		if (!pn_parse_i64(s + 1, out))
			return false;
		*out = -*out;
		return true;
	}
	return pn_parse_i64(s, out);
}

static bool
load(struct run *r, struct pn_err *err)
{
	json_t *oids = json_array(), *txns = json_array(), *keys = json_array();
	const char *keys_json;
	struct pn_table t;
	char from[24], to[24];
	const char *p[6];
	size_t i;

	for (i = 0; i < r->nbyq; i++)
		json_array_append_new(oids, json_string(r->byq[i].order_id));
	for (i = 0; i < r->st.ntxns; i++) {
		const struct pn_stmt_txn *x = &r->st.txns[i];

		if (x->order_id)
			json_array_append_new(oids, json_string(x->order_id));
		if (x->psp_txn_id)
			json_array_append_new(txns, json_string(x->psp_txn_id));
		if (x->kind == PN_STMT_REFUND) {
			const char *k1, *k2;

			refund_keys(r, x, &k1, &k2);
			json_array_append_new(keys, json_string(k1));
			pn_strmap_put(&r->stmt_keys, k1, (void *)x);
			if (k2) {
				json_array_append_new(keys, json_string(k2));
				pn_strmap_put(&r->stmt_keys, k2, (void *)x);
			}
			if (x->order_id)
				pn_strmap_put(&r->refunded_orders, x->order_id, (void *)x);
		}
	}
	snprintf(from, sizeof(from), "%lld", (long long)r->from);
	snprintf(to, sizeof(to), "%lld", (long long)r->to);
	p[0] = r->site->name;
	p[1] = dumps(r, oids);
	p[2] = dumps(r, txns);
	/* the refund keys' parameter of the second query, made now so that
	 * every way out below has nothing left to free */
	keys_json = dumps(r, keys);
	p[3] = r->ad->provider;
	p[4] = from;
	p[5] = to;
	if (!pn_db_query(r->conn, PN_SQL_CONST(orders_sql), 6, p, &t, err))
		return false;
	r->norders = t.nrows;
	r->orders = pn_arena_alloc(r->a, (t.nrows + 1) * sizeof(*r->orders));
	pn_strmap_init(&r->by_order, r->a, t.nrows);
	pn_strmap_init(&r->by_txn, r->a, t.nrows);
	for (i = 0; i < t.nrows; i++) {
		struct order *o = &r->orders[i];
		const char *v;

		o->order_id = pn_arena_strdup(r->a, pn_table_get(&t, i, "order_id"));
		o->currency = pn_arena_strdup(r->a, pn_table_get(&t, i, "currency"));
		o->status = pn_arena_strdup(r->a, pn_table_get(&t, i, "status"));
		o->psp = (v = pn_table_get(&t, i, "psp")) ? pn_arena_strdup(r->a, v) : NULL;
		o->psp_txn_id =
		    (v = pn_table_get(&t, i, "psp_txn_id")) ? pn_arena_strdup(r->a, v) : NULL;
		if (!pn_parse_i64(pn_table_get(&t, i, "amount_minor"), &o->amount) ||
		    !pn_parse_i64(pn_table_get(&t, i, "refunded_minor"), &o->refunded) ||
		    !parse_signed(pn_table_get(&t, i, "paid_at"), &o->paid_at)) {
			pn_table_free(&t);
			pn_err_set(err, "unreadable order row for %s", o->order_id);
			return false;
		}
		o->refunded_now = o->refunded;
		o->by_statement = (v = pn_table_get(&t, i, "by_statement")) && strcmp(v, "t") == 0;
		pn_strmap_put(&r->by_order, o->order_id, o);
		pn_strmap_put(&r->by_txn, o->psp_txn_id, o);
	}
	pn_table_free(&t);

	p[1] = r->ad->provider;
	p[2] = keys_json;
	p[3] = from;
	p[4] = to;
	if (!pn_db_query(r->conn, PN_SQL_CONST(notifs_sql), 5, p, &t, err))
		return false;
	r->nnotifs = t.nrows;
	r->notifs = pn_arena_alloc(r->a, (t.nrows + 1) * sizeof(*r->notifs));
	pn_strmap_init(&r->by_key, r->a, t.nrows);
	for (i = 0; i < t.nrows; i++) {
		struct notif *n = &r->notifs[i];
		const char *v;

		n->dedup_key = pn_arena_strdup(r->a, pn_table_get(&t, i, "dedup_key"));
		n->event_kind = pn_arena_strdup(r->a, pn_table_get(&t, i, "event_kind"));
		n->order_id =
		    (v = pn_table_get(&t, i, "order_id")) ? pn_arena_strdup(r->a, v) : NULL;
		n->outcome = pn_arena_strdup(r->a, pn_table_get(&t, i, "outcome"));
		n->source = pn_arena_strdup(r->a, pn_table_get(&t, i, "source"));
		if (!pn_parse_i64(pn_table_get(&t, i, "received"), &n->received))
			n->received = 0;
		pn_strmap_put(&r->by_key, n->dedup_key, n);
	}
	pn_table_free(&t);
	return true;
}

/* ---- applying ------------------------------------------------------------- */

static bool
settled(const char *outcome)
{
	return strcmp(outcome, "applied") == 0 || strcmp(outcome, "already_applied") == 0;
}

/*
 * Feed one statement row through the ingest.  *human: the result needs a
 * human (anything but applied / already applied).  Returns the result word.
 */
static const char *
ingest(struct run *r, const struct pn_stmt_txn *t, const struct order *o, int64_t refunded_after,
       bool *human, const char **detail)
{
	struct pn_event ev;
	struct pn_ingest_result res;
	struct pn_err err;
	json_t *h;
	const char *hj;

	r->ad->event(r->a, r->site, t, o ? o->amount : -1, refunded_after, &ev);
	if (!r->apply) {
		*human = true;
		*detail = pn_arena_printf(r->a, "%s; --apply ingests it as %s (dedup key %s)",
		                          *detail, pn_kind_name(ev.kind), ev.dedup_key);
		return "not applied";
	}
	if (t->headers_json != NULL) {
		hj = t->headers_json; /* a verified answer: stored as `paynotify query` would */
	} else {
		h = json_pack("{s:s, s:s, s:i}", "statement-format", r->ad->format,
		              "statement-file", r->path, "statement-line", t->line);
		hj = dumps(r, h);
	}
	if (!pn_store_ingest(r->store, r->site->name, r->ad->provider, &ev, hj,
	                     (const unsigned char *)t->raw, t->raw_len, &res, &err)) {
		r->errors++;
		*human = true;
		*detail = pn_arena_printf(r->a, "%s; not stored: %s", *detail, err.msg);
		return "error";
	}
	if (res.wakeup) {
		struct pn_err werr;

		if (!pn_store_send_wakeup(r->store, &werr))
			fprintf(stderr, "paynotify: reconcile: warning: wake-up not sent: %s\n",
			        werr.msg);
	}
	*detail = pn_arena_printf(r->a, "%s; notification %lld%s%s", *detail,
	                          (long long)res.notification_id,
	                          res.order_status[0] ? ", order " : "", res.order_status);
	if (res.duplicate) {
		*human = !settled(res.outcome);
		return pn_arena_printf(r->a, "duplicate (%s)", res.outcome);
	}
	*human = !settled(res.outcome);
	if (strcmp(res.outcome, "applied") == 0)
		r->applied++;
	return pn_arena_strdup(r->a, res.outcome);
}

/* ---- comparing ------------------------------------------------------------ */

static bool
paid_status(const char *s)
{
	return strcmp(s, "paid") == 0 || strcmp(s, "partially_refunded") == 0 ||
	       strcmp(s, "refunded") == 0;
}

static struct order *
order_of(struct run *r, const struct pn_stmt_txn *t)
{
	struct order *o = pn_strmap_get(&r->by_order, t->order_id);

	if (o == NULL && t->order_id == NULL)
		o = pn_strmap_get(&r->by_txn, t->psp_txn_id);
	return o;
}

static void
payment(struct run *r, const struct pn_stmt_txn *t)
{
	struct order *o = order_of(r, t);
	const char *detail, *result = NULL;
	bool human = true;

	if (o == NULL) {
		row(r, K_UNKNOWN_ORDER, true, t, NULL, NULL,
		    "the provider collected money for an "
		    "order this site does not have");
		return;
	}
	if (strcmp(o->currency, t->currency) != 0) {
		o->stmt_paid = true;
		row(r, K_CURRENCY_MISMATCH, true, t, o, NULL,
		    "the statement's currency is not "
		    "the order's");
		return;
	}
	if (o->amount != t->amount_minor) {
		o->stmt_paid = true;
		row(r, K_AMOUNT_MISMATCH, true, t, o, NULL,
		    pn_arena_printf(r->a, "the provider collected %s, the order is for %s",
		                    amt(r, t->amount_minor, t->currency),
		                    amt(r, o->amount, o->currency)));
		return;
	}
	if ((o->stmt_paid && o->stmt_txn && t->psp_txn_id && strcmp(o->stmt_txn, t->psp_txn_id)) ||
	    (paid_status(o->status) && o->psp_txn_id && t->psp_txn_id &&
	     strcmp(o->psp_txn_id, t->psp_txn_id) != 0)) {
		detail = pn_arena_printf(r->a,
		                         "the order is paid by %s; this is a second "
		                         "provider transaction: refund one",
		                         o->stmt_paid && o->stmt_txn ? o->stmt_txn : o->psp_txn_id);
		result = ingest(r, t, o, 0, &human, &detail);
		(void)human;
		row(r, K_DUPLICATE_PAYMENT, true, t, o, result, detail);
		return;
	}
	o->stmt_paid = true;
	o->stmt_txn = t->psp_txn_id;
	if (paid_status(o->status)) {
		row(r, K_MATCHED, false, t, o, NULL, NULL);
		return;
	}
	detail = pn_arena_printf(r->a,
	                         "the provider collected it; the order is %s here "
	                         "(lost notification)",
	                         o->status);
	result = ingest(r, t, o, 0, &human, &detail);
	row(r, K_MISSING_PAYMENT, human, t, o, result, detail);
}

static void
refund(struct run *r, const struct pn_stmt_txn *t)
{
	struct order *o = order_of(r, t);
	const char *k1, *k2, *detail, *result;
	struct notif *n;
	bool human = true;

	if (o == NULL) {
		row(r, K_UNKNOWN_ORDER, true, t, NULL, NULL,
		    "the provider refunded an order this "
		    "site does not have");
		return;
	}
	if (strcmp(o->currency, t->currency) != 0) {
		row(r, K_CURRENCY_MISMATCH, true, t, o, NULL,
		    "the refund's currency is not the "
		    "order's");
		return;
	}
	o->stmt_refunds += t->amount_minor;
	if (o->stmt_refunds > o->amount) {
		row(r, K_REFUND_TOTAL_MISMATCH, true, t, o, NULL,
		    pn_arena_printf(
		        r->a, "the statement's refunds total %s, more than the order's %s",
		        amt(r, o->stmt_refunds, o->currency), amt(r, o->amount, o->currency)));
		return;
	}
	refund_keys(r, t, &k1, &k2);
	n = pn_strmap_get(&r->by_key, k1);
	if (n == NULL && k2)
		n = pn_strmap_get(&r->by_key, k2);
	if (n != NULL) {
		if (settled(n->outcome))
			row(r, K_MATCHED, false, t, o, NULL, NULL);
		else
			row(r, K_REFUND_TOTAL_MISMATCH, true, t, o, NULL,
			    pn_arena_printf(r->a,
			                    "the refund's notification is stored as %s and did "
			                    "not move the order",
			                    n->outcome));
		return;
	}
	if (o->refunded >= o->stmt_refunds) {
		/* recorded here under another identity (Stripe keys on evt_ ids) */
		row(r, K_MATCHED, false, t, o, NULL, "refund total recorded here");
		return;
	}
	detail = pn_arena_printf(r->a,
	                         "the provider refunded it; refunded here: %s (lost "
	                         "notification)",
	                         amt(r, o->refunded_now, o->currency));
	result = ingest(r, t, o, o->refunded_now + t->amount_minor, &human, &detail);
	if (strcmp(result, "applied") == 0 || strncmp(result, "duplicate", 9) == 0)
		o->refunded_now += t->amount_minor;
	row(r, K_MISSING_REFUND, human, t, o, result, detail);
}

/* Unix seconds as "YYYY-MM-DD HH:MM:SS" in the statement's zone. */
static const char *
local_time(struct run *r, int64_t epoch)
{
	time_t t = (time_t)(epoch + r->ad->utc_offset_s);
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	return pn_arena_strdup(r->a, buf);
}

/*
 * --by-query: the answers that are not payment rows (pending, failed,
 * cancelled, not found, refused, errors), against the orders.  Paid here
 * and not paid at the provider is a human's: status_mismatch (2C2P knows
 * the invoice, not as paid) or not_in_statement (2C2P does not know it).
 * Not paid on either side agrees.  The order is marked stmt_paid so that
 * the "paid here, absent" pass below does not list it twice.
 */
static void
byq_compare(struct run *r)
{
	size_t i;

	for (i = 0; i < r->nbyq; i++) {
		const struct byq *q = &r->byq[i];
		const struct pn_query_answer *ans = &q->ans;
		struct order *o = pn_strmap_get(&r->by_order, q->order_id);
		const char *said = ans->detail ? ans->detail : "no answer";
		bool paid_here = o != NULL && paid_status(o->status);

		/* asked, and answered here or as a payment row (a second tranRef
		 * included: duplicate_payment names the one paid here) */
		if (o != NULL)
			o->stmt_paid = true;
		if (q->row)
			continue;
		r->row_order = q->order_id;
		if (o == NULL && ans->state != PN_Q_ERROR && ans->state != PN_Q_REFUSED &&
		    ans->state != PN_Q_ATTENTION) {
			/* a 2C2P notification of the day names an order this site does
			 * not have (stored unknown_order); 2C2P collected nothing */
			row(r, K_OTHER, false, NULL, NULL, NULL,
			    pn_arena_printf(r->a,
			                    "a 2C2P notification of the day names this order, which "
			                    "this site does not have; not paid at 2C2P (%s)",
			                    said));
			continue;
		}
		switch (ans->state) {
		case PN_Q_ERROR:
			r->errors++;
			row(r, K_OTHER, true, NULL, o, "error",
			    pn_arena_printf(r->a, "order %s not reconciled: %s", q->order_id, said));
			continue;
		case PN_Q_REFUSED:
		case PN_Q_ATTENTION:
			row(r, K_OTHER, true, NULL, o, ans->state == PN_Q_REFUSED ? "refused" : NULL,
			    pn_arena_printf(r->a, "order %s: %s; nothing changed", q->order_id, said));
			continue;
		case PN_Q_NOT_FOUND:
		case PN_Q_WAITING:
		case PN_Q_FINAL: /* closed or failed: paid answers are payment rows */
			if (paid_here) {
				bool unknown = ans->state == PN_Q_NOT_FOUND;

				row(r, unknown ? K_NOT_IN_STATEMENT : K_STATUS_MISMATCH, true, NULL, o,
				    NULL,
				    pn_arena_printf(r->a, "paid here (%s), 2C2P %s (%s): %s before "
				                    "shipping more",
				                    o->psp_txn_id ? o->psp_txn_id : "no tranRef",
				                    unknown ? "does not know the invoice"
				                            : "says the invoice is not paid",
				                    said,
				                    unknown ? "query the provider (paynotify query "
				                              "--order)"
				                            : "look in the 2C2P portal"));
			} else
				row(r, K_MATCHED, false, NULL, o, NULL,
				    pn_arena_printf(r->a, "%s here, %s%s", o->status, said,
				                    ans->state == PN_Q_FINAL &&
				                            strcmp(o->status, "pending") == 0
				                        ? "; paynotify query --order --apply records it"
				                        : ""));
			continue;
		}
	}
	r->row_order = NULL;
}

static void
compare(struct run *r)
{
	size_t i;

	for (i = 0; i < r->st.ntxns; i++) {
		const struct pn_stmt_txn *t = &r->st.txns[i];
		struct totals *tt = totals_for(r, t->currency);

		tt->nrows++;
		if (t->has_fee) {
			tt->fee += t->fee_minor;
			tt->nfee++;
		}
		if (t->has_net) {
			tt->net += t->net_minor;
			tt->nnet++;
		}
		switch (t->kind) {
		case PN_STMT_PAYMENT:
			tt->npay++;
			tt->pay += t->amount_minor;
			payment(r, t);
			break;
		case PN_STMT_REFUND:
			tt->nref++;
			tt->ref += t->amount_minor;
			refund(r, t);
			break;
		case PN_STMT_DISPUTE:
			row(r, K_DISPUTE, true, t, order_of(r, t), NULL,
			    pn_arena_printf(r->a, "%s: answer or accept it in the Dashboard",
			                    t->type));
			break;
		case PN_STMT_FEE:
			row(r, K_FEE, false, t, NULL, NULL, t->type);
			break;
		case PN_STMT_OTHER:
			row(r, K_OTHER, false, t, order_of(r, t), NULL,
			    pn_arena_printf(r->a, "%s: not compared", t->type));
			break;
		}
	}
	if (r->by_query)
		byq_compare(r);
	/*
	 * Paid here that day, absent from the statement.  paid_at is when the
	 * payment was applied here, which is after the provider completed it:
	 * just after the day's start, it was probably completed before the
	 * previous cut-off and is on the previous day's statement; just before
	 * the day's end, the provider may date it after the cut-off (the next
	 * day's statement).
	 */
	for (i = 0; i < r->norders; i++) {
		struct order *o = &r->orders[i];
		const char *when, *detail;
		struct totals *tt;

		/* by_statement: applied from an earlier day's statement (the daily run
		 * applies yesterday's lost payment this morning): reconciled there */
		if (o->stmt_paid || o->by_statement || !paid_status(o->status) || o->psp == NULL ||
		    strcmp(o->psp, r->ad->provider) != 0 || o->paid_at < r->from ||
		    o->paid_at >= r->to)
			continue;
		when = local_time(r, o->paid_at);
		if (o->paid_at < r->from + CUTOFF_NEAR_S)
			detail = pn_arena_printf(
			    r->a,
			    "paid here at %s (UTC%+d), %lld s after the previous day's cut-off: "
			    "the payment is probably on the previous day's statement; reconcile "
			    "that day before acting",
			    when, r->ad->utc_offset_s / 3600, (long long)(o->paid_at - r->from));
		else if (o->paid_at >= r->to - CUTOFF_NEAR_S)
			detail = pn_arena_printf(
			    r->a,
			    "paid here at %s (UTC%+d), within 15 minutes of the statement's "
			    "cut-off: look for it on the next day's statement before acting",
			    when, r->ad->utc_offset_s / 3600);
		else
			detail = pn_arena_printf(
			    r->a,
			    "paid here at %s (UTC%+d), the provider's statement does not have "
			    "it: query the provider (paynotify query --order) before shipping "
			    "more",
			    when, r->ad->utc_offset_s / 3600);
		row(r, K_NOT_IN_STATEMENT, true, NULL, o, NULL, detail);
		tt = totals_for(r, o->currency);
		tt->nabsent++;
		tt->absent += o->amount;
	}
	/* refunded here that day (a notification received then), absent from the
	 * statement; a refund applied from a statement was on that statement.
	 * Not by query: paymentInquiry does not report refunds. */
	for (i = 0; r->by_query == false && i < r->nnotifs; i++) {
		const struct notif *n = &r->notifs[i];
		struct order *o;

		if (strcmp(n->event_kind, "refund") != 0 || strcmp(n->outcome, "applied") != 0 ||
		    strcmp(n->source, "statement") == 0 ||
		    pn_strmap_get(&r->stmt_keys, n->dedup_key) != NULL ||
		    (n->order_id && pn_strmap_get(&r->refunded_orders, n->order_id) != NULL) ||
		    n->received < r->from || n->received >= r->to)
			continue;
		o = pn_strmap_get(&r->by_order, n->order_id);
		row(r, K_REFUND_NOT_IN_STATEMENT, true, NULL, o, NULL,
		    pn_arena_printf(r->a,
		                    "a refund notification (%s) applied here at %s (UTC%+d) is not "
		                    "on the statement%s",
		                    n->dedup_key, local_time(r, n->received),
		                    r->ad->utc_offset_s / 3600,
		                    n->received < r->from + CUTOFF_NEAR_S
		                        ? ": just after the previous day's cut-off, look on the "
		                          "previous day's statement first"
		                        : ""));
	}
}

/* A total some rows did not give: "?" when none did, else which part it is. */
static const char *
partial(struct run *r, const char *amount, int known, int rows)
{
	if (known == rows)
		return amount;
	if (known == 0)
		return "?";
	return pn_arena_printf(r->a, "%s (%d of %d rows)", amount, known, rows);
}

static void
summary(struct run *r, FILE *f)
{
	char buf[2048], a1[64], a2[64], a3[64], a4[64];
	size_t i, n = 0;
	int c;

	if (r->by_query)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
		                      "paynotify: reconcile: %s %s %s (UTC%+d): %zu orders asked "
		                      "by paymentInquiry, %zu paid there;",
		                      r->ad->provider, r->site->name, r->day,
		                      r->ad->utc_offset_s / 3600, r->nbyq, r->st.ntxns);
	else
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
		                      "paynotify: reconcile: %s %s %s (UTC%+d): "
		                      "%zu statement rows;",
		                      r->ad->provider, r->site->name, r->day,
		                      r->ad->utc_offset_s / 3600, r->st.ntxns);
	for (c = 0; c < NCLS && n < sizeof(buf); c++)
		if (r->count[c] > 0)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s %d,", cls_names[c],
			                      r->count[c]);
	if (n < sizeof(buf))
		n += (size_t)snprintf(
		    buf + n, sizeof(buf) - n, " needs a human %d%s", r->human,
		    r->apply ? pn_arena_printf(r->a, ", applied %d", r->applied)
		             : " (dry run: --apply applies lost payments and refunds)");
	fputs(buf, f);
	for (i = 0; i < r->ntot; i++) {
		const struct totals *t = &r->tot[i];

		money(a1, sizeof(a1), t->pay, t->cur);
		money(a2, sizeof(a2), t->ref, t->cur);
		money(a3, sizeof(a3), t->fee, t->cur);
		money(a4, sizeof(a4), t->net, t->cur);
		fprintf(f, "; %s: payments %d %s, refunds %d %s, fees %s, net %s", t->cur, t->npay,
		        a1, t->nref, a2, partial(r, a3, t->nfee, t->nrows),
		        partial(r, a4, t->nnet, t->nrows));
		if (t->nabsent > 0) {
			money(a1, sizeof(a1), t->absent, t->cur);
			fprintf(f, ", paid here not on the statement %d %s", t->nabsent, a1);
		}
	}
	fputc('\n', f);
}

/* ---- --fetch (WeChat Pay) ------------------------------------------------- */

/* Write a downloaded bill to path atomically (path.part, then rename). */
static bool
write_bill(const char *path, const unsigned char *data, size_t len, struct pn_err *err)
{
	char *tmp = pn_xasprintf("%s.part", path);
	FILE *f = fopen(tmp, "wb");
	bool ok = f != NULL && fwrite(data, 1, len, f) == len && fflush(f) == 0;

	if (f != NULL && fclose(f) != 0)
		ok = false;
	if (!ok)
		pn_err_set(err, "could not write %s: %s", tmp, strerror(errno));
	else if (rename(tmp, path) != 0) {
		pn_err_set(err, "could not rename %s to %s: %s", tmp, path, strerror(errno));
		ok = false;
	}
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok;
}

/* What both --fetch paths hold: the query module's credentials and client. */
struct fetch {
	const struct pn_query_provider *qp;
	void   *creds;
	struct pn_qhttp http;
	struct pn_query_ctx ctx;	/* ctx.http points at http: f stays put */
};

/* Load qp's credentials for r->site (those of `paynotify query`) and set up
 * the HTTP client for a bill-sized answer; fetch_close() when true. */
static bool
fetch_open(struct run *r, const struct pn_query_provider *qp, struct fetch *f,
           struct pn_err *err)
{
	const char *why = NULL;

	memset(f, 0, sizeof(*f));
	f->qp = qp;
	if (!qp->configured(r->site, &why)) {
		pn_err_set(err, "site %s cannot fetch bills: %s (the keys of paynotify query)",
		           r->site->name, why);
		return false;
	}
	if (!qp->load(r->site, &f->creds, err))
		return false;
	if (!pn_qhttp_init(&f->http, r->cfg, err)) {
		qp->free_creds(f->creds);
		return false;
	}
	f->http.max_answer = PN_STMT_MAX_FILE;
	f->ctx.cfg = r->cfg;
	f->ctx.site = r->site;
	f->ctx.http = &f->http;
	f->ctx.arena = r->a;
	f->ctx.now = (int64_t)time(NULL);
	f->ctx.creds = f->creds;
	return true;
}

static void
fetch_close(struct fetch *f)
{
	pn_qhttp_destroy(&f->http);
	f->qp->free_creds(f->creds);
}

/*
 * Alipay: alipay.data.dataservice.bill.downloadurl.query (bill_type trade),
 * signed with `paynotify query`'s key, its answer verified; then the
 * bill_download_url of the signed answer (https, valid 30 seconds; the zip
 * is trusted for its TLS and the signed answer that named it), kept at path.
 */
static bool
fetch_alipay(struct run *r, const char *path, struct pn_err *err)
{
	const char *get_headers[] = {NULL};
	struct fetch f;
	struct pn_qhttp_answer h;
	const char *url;
	json_t *biz, *root = NULL, *resp = NULL;
	bool ok = false;

	if (!fetch_open(r, &pn_query_alipay, &f, err))
		return false;
	biz = json_pack("{s:s, s:s}", "bill_type", "trade", "bill_date", r->day);
	ok = pn_query_alipay_call(&f.ctx, "alipay.data.dataservice.bill.downloadurl.query", biz,
	                          &root, &resp, err);
	json_decref(biz);
	if (!ok)
		goto done;
	ok = false;
	url = pn_json_str(r->a, resp, "bill_download_url");
	/* "https:/" "/" split: the source checks strip // comments */
	if (url == NULL || strncmp(url,
	                           "https:/"
	                           "/",
	                           8) != 0) {
		pn_err_set(err, "Alipay's answer has no https bill_download_url");
		goto done;
	}
	if (!pn_qhttp_do(&f.http, r->a, "GET", url, get_headers, NULL, 0, &h, err))
		goto done;
	if (h.status != 200) {
		pn_err_set(err, "HTTP %ld downloading the bill: %.200s", h.status,
		           (const char *)h.body);
		goto done;
	}
	if (!write_bill(path, h.body, h.body_len, err))
		goto done;
	fprintf(stderr,
	        "paynotify: reconcile: fetched Alipay's %s trade bill (%zu bytes) into %s\n",
	        r->day, h.body_len, path);
	ok = true;
done:
	json_decref(root);
	fetch_close(&f);
	return ok;
}

/*
 * Download the day's ALL trade bill with `paynotify query`'s credentials and
 * client: GET /v3/bill/tradebill (the answer's signature verified), then its
 * download_url (on the same API host; signed request; the file's SHA1 checked
 * against the signed answer's hash_value), written to path atomically.
 */
static bool
fetch_wechatpay(struct run *r, const char *path, struct pn_err *err)
{
	const struct pn_site *site = r->site;
	struct fetch f;
	struct pn_qhttp_answer h;
	const char *hash_type, *hash_value, *url;
	json_t *root = NULL;
	unsigned char md[64];
	size_t mdlen = 0;
	struct pn_iov iov;
	char *hex;
	bool ok = false;

	if (!fetch_open(r, &pn_query_wechatpay, &f, err))
		return false;
	url = pn_arena_printf(r->a, "%s/v3/bill/tradebill?bill_date=%s&bill_type=ALL",
	                      site->wechatpay.query_url, r->day);
	if (!pn_query_wechatpay_get(&f.ctx, url, true, &h, err))
		goto done;
	root = pn_json_parse(h.body, h.body_len, err);
	hash_type = root ? pn_json_str(r->a, root, "hash_type") : NULL;
	hash_value = root ? pn_json_str(r->a, root, "hash_value") : NULL;
	url = root ? pn_json_str(r->a, root, "download_url") : NULL;
	if (hash_type == NULL || strcmp(hash_type, "SHA1") != 0 || hash_value == NULL ||
	    strlen(hash_value) != 40 || url == NULL) {
		pn_err_set(err, "WeChat Pay's tradebill answer has no SHA1 hash_value and "
		                "download_url");
		goto done;
	}
	/* the signed request goes to WeChat Pay's API host only */
	if (strncmp(url, site->wechatpay.query_url, strlen(site->wechatpay.query_url)) != 0 ||
	    url[strlen(site->wechatpay.query_url)] != '/') {
		pn_err_set(err, "download_url %.120s is not on wechatpay.query_url %s", url,
		           site->wechatpay.query_url);
		goto done;
	}
	if (!pn_query_wechatpay_get(&f.ctx, url, false, &h, err))
		goto done;
	iov.p = h.body;
	iov.len = h.body_len;
	if (!pn_digest(PN_MD_SHA1, &iov, 1, md, &mdlen)) {
		pn_err_set(err, "could not hash the bill");
		goto done;
	}
	hex = pn_hex_encode(r->a, md, mdlen, false);
	{
		char want[41];
		size_t i;

		for (i = 0; i < 40; i++)
			want[i] = (char)(hash_value[i] >= 'A' && hash_value[i] <= 'F'
			                     ? hash_value[i] - 'A' + 'a'
			                     : hash_value[i]);
		want[40] = '\0';
		if (!pn_ct_equal(hex, want, 40)) {
			pn_err_set(err,
			           "the downloaded bill's SHA1 %s is not the hash_value %s of "
			           "the signed answer",
			           hex, want);
			goto done;
		}
	}
	if (!write_bill(path, h.body, h.body_len, err))
		goto done;
	fprintf(stderr,
	        "paynotify: reconcile: fetched WeChat Pay's %s ALL bill (%zu bytes, SHA1 "
	        "checked) into %s\n",
	        r->day, h.body_len, path);
	ok = true;
done:
	json_decref(root);
	fetch_close(&f);
	return ok;
}

/* ---- --by-query (2C2P) ---------------------------------------------------- */

/*
 * 2C2P's daily report cannot be read (docs/RECONCILE.md "2C2P"), but its
 * paymentInquiry answers one invoice at a time, signed: the day's
 * candidates are asked with `paynotify query`'s module (admin/query_2c2p.c,
 * pn_query_2c2p.ask: the same request, verification and normalisation), a
 * paid answer becomes a payment row of r->st and goes through the same
 * comparison and --apply as a statement row (its event and raw answer are
 * exactly what `paynotify query --apply` would ingest), the other answers
 * through byq_compare().
 *
 * The day is UTC+7: 2C2P's own reports are cut at GMT+7 (its report
 * delivery, "Before 4:00AM GMT+7"); the day only chooses which orders are
 * asked about, consecutive days cover every order once.
 */
#define BYQ_UTC_OFFSET_S (7 * 3600)
#define BYQ_MAX_DEFAULT 1000
#define BYQ_RATE_DEFAULT 5

static void
byq_event(struct pn_arena *a, const struct pn_site *site, const struct pn_stmt_txn *t,
          int64_t order_amount, int64_t refunded_after, struct pn_event *ev)
{
	(void)a;
	(void)site;
	(void)order_amount;
	(void)refunded_after;
	*ev = *t->ev; /* the verified answer's event: source "query", its dedup key */
}

static const struct pn_stmt_adapter byq_2c2p = {
    .provider = "2c2p",
    .format = "2C2P paymentInquiry answers",
    .utc_offset_s = BYQ_UTC_OFFSET_S,
    .event = byq_event,
};

/* Every order of the site created, changed or paid on the day that 2C2P may
 * have (psp 2c2p or none yet), and every order a 2C2P notification of the
 * day names; at most $5 (one more than --max-inquiries: too many). */
static const char byq_sql[] =
    "SELECT order_id FROM ("
    "  SELECT order_id FROM paynotify.orders"
    "   WHERE site = $1 AND (psp IS NULL OR psp = $2)"
    "     AND ((created_at >= to_timestamp($3::bigint) AND created_at < to_timestamp($4::bigint))"
    "       OR (updated_at >= to_timestamp($3::bigint) AND updated_at < to_timestamp($4::bigint))"
    "       OR (paid_at >= to_timestamp($3::bigint) AND paid_at < to_timestamp($4::bigint)))"
    "  UNION"
    "  SELECT order_id FROM paynotify.notifications"
    "   WHERE site = $1 AND provider = $2 AND order_id IS NOT NULL"
    "     AND received_at >= to_timestamp($3::bigint)"
    "     AND received_at < to_timestamp($4::bigint)"
    ") c ORDER BY order_id LIMIT $5::bigint";

/* Sleep until start + n / rate seconds (CLOCK_MONOTONIC). */
static void
byq_pace(const struct timespec *start, size_t n, int64_t rate)
{
	struct timespec now, d;
	int64_t due_ns = (int64_t)n * (1000000000 / rate), at_ns;

	clock_gettime(CLOCK_MONOTONIC, &now);
	at_ns = (int64_t)(now.tv_sec - start->tv_sec) * 1000000000 + (now.tv_nsec - start->tv_nsec);
	if (at_ns >= due_ns)
		return;
	d.tv_sec = (time_t)((due_ns - at_ns) / 1000000000);
	d.tv_nsec = (long)((due_ns - at_ns) % 1000000000);
	while (nanosleep(&d, &d) != 0 && errno == EINTR)
		;
}

/*
 * Ask 2C2P about every candidate of the day, one at a time, at most rate
 * per second.  More than max candidates: nothing is asked (false, err).
 * A transport error is an answer (PN_Q_ERROR, exit 3), not a stop.
 */
static bool
byq_ask(struct run *r, int64_t max, int64_t rate, struct pn_err *err)
{
	const struct pn_query_provider *qp = &pn_query_2c2p;
	char from[24], to[24], lim[24];
	const char *p[5];
	struct pn_table t;
	struct fetch f;
	struct timespec start;
	size_t i;

	snprintf(from, sizeof(from), "%lld", (long long)r->from);
	snprintf(to, sizeof(to), "%lld", (long long)r->to);
	snprintf(lim, sizeof(lim), "%lld", (long long)max + 1);
	p[0] = r->site->name;
	p[1] = qp->name;
	p[2] = from;
	p[3] = to;
	p[4] = lim;
	if (!pn_db_query(r->conn, PN_SQL_CONST(byq_sql), 5, p, &t, err))
		return false;
	if ((int64_t)t.nrows > max) {
		pn_table_free(&t);
		pn_err_set(err,
		           "more than --max-inquiries %lld orders to ask 2C2P about on %s; nothing "
		           "asked (raise --max-inquiries: at %lld per second, %lld take %lld s)",
		           (long long)max, r->day, (long long)rate, (long long)max,
		           (long long)(max / rate));
		return false;
	}
	if (!fetch_open(r, qp, &f, err)) {
		pn_table_free(&t);
		return false;
	}
	f.http.max_answer = 0; /* one answer: PN_QUERY_MAX_ANSWER */
	r->nbyq = t.nrows;
	r->byq = pn_arena_alloc(r->a, (t.nrows + 1) * sizeof(*r->byq));
	memset(r->byq, 0, (t.nrows + 1) * sizeof(*r->byq));
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < t.nrows; i++) {
		struct byq *q = &r->byq[i];
		struct pn_query_order o;
		struct pn_stmt_txn *x;

		byq_pace(&start, i, rate);
		q->order_id = pn_arena_strdup(r->a, pn_table_get(&t, i, "order_id"));
		memset(&o, 0, sizeof(o));
		o.site = r->site->name;
		o.order_id = q->order_id;
		f.ctx.now = (int64_t)time(NULL);
		qp->ask(&f.ctx, &o, &q->ans);
		if (q->ans.state != PN_Q_FINAL || q->ans.ev.kind != PN_KIND_PAID)
			continue;
		if ((x = pn_stmt_add(r->a, &r->st, (int)i + 1, err)) == NULL) {
			fetch_close(&f);
			pn_table_free(&t);
			return false;
		}
		q->row = true;
		x->kind = PN_STMT_PAYMENT;
		x->type = q->ans.psp_state ? q->ans.psp_state : "0000";
		x->order_id = q->ans.ev.order_id;
		x->psp_txn_id = q->ans.ev.psp_txn_id;
		x->epoch = f.ctx.now;
		x->amount_minor = q->ans.ev.amount_minor;
		snprintf(x->currency, sizeof(x->currency), "%s",
		         q->ans.ev.currency ? q->ans.ev.currency : "");
		x->raw = (const char *)q->ans.raw;
		x->raw_len = q->ans.raw_len;
		x->ev = &q->ans.ev;
		x->headers_json = q->ans.raw_headers_json ? q->ans.raw_headers_json : "{}";
	}
	fetch_close(&f);
	pn_table_free(&t);
	return true;
}

/* ---- the command ---------------------------------------------------------- */

static int
reconcile_exec(int argc, char **argv, const char *config_path)
{
	static const char *const cols[] = {"class", "order_id", "psp_txn_id", "line",   "statement",
	                                   "here",  "fee",      "net",        "result", "detail"};
	const char *provider = NULL, *site_name = NULL, *date = NULL;
	enum pn_format fmt = pn_format_default();
	struct run r;
	struct pn_err err;
	char *data = NULL;
	size_t len = 0, i;
	int64_t day_epoch;
	int rc;
	bool fetch = false;
	int64_t max_inq = BYQ_MAX_DEFAULT, rate = BYQ_RATE_DEFAULT;
	bool max_given = false, rate_given = false, wide = false;
	const struct pn_arg options[] = {
	    {"provider", required_argument, 0, PN_ARG_STR, .str = &provider},
	    {"site", required_argument, 0, PN_ARG_STR, .str = &site_name},
	    {"statement", required_argument, 0, PN_ARG_STR, .str = &r.path},
	    {"date", required_argument, 0, PN_ARG_STR, .str = &date},
	    {"apply", no_argument, 0, PN_ARG_FLAG, .flag = &r.apply},
	    {"fetch", no_argument, 0, PN_ARG_FLAG, .flag = &fetch},
	    {"by-query", no_argument, 0, PN_ARG_FLAG, .flag = &r.by_query},
	    {"max-inquiries", required_argument, 0, PN_ARG_INT, .num = &max_inq, .min = 1,
	     .max = 100000, .seen = &max_given},
	    {"inquiries-per-second", required_argument, 0, PN_ARG_INT, .num = &rate, .min = 1,
	     .max = 50, .seen = &rate_given},
	    {"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
	    {"wide", no_argument, 0, PN_ARG_FLAG, .flag = &wide},
	    PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "reconcile", .help = help, .opts = options,
	                             .rest = PN_REST_NAMED};

	memset(&r, 0, sizeof(r));
	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_FAILED;
	if (wide)
		pn_table_set_wide(true);
	if ((max_given || rate_given) && !r.by_query) {
		fprintf(stderr, "paynotify: reconcile: --max-inquiries and --inquiries-per-second "
		                "bound --by-query\n");
		return PN_EXIT_USAGE;
	}
	if (r.by_query && (provider == NULL || strcmp(provider, "2c2p") != 0)) {
		fprintf(stderr, "paynotify: reconcile: --by-query asks 2C2P's paymentInquiry "
		                "(--provider 2c2p); Alipay, WeChat Pay and Stripe have statements\n");
		return PN_EXIT_USAGE;
	}
	if (r.by_query && (r.path != NULL || fetch)) {
		fprintf(stderr, "paynotify: reconcile: --by-query asks 2C2P instead of reading a "
		                "statement: no --statement or --fetch\n");
		return PN_EXIT_USAGE;
	}
	if (provider == NULL || site_name == NULL ||
	    (!r.by_query && (r.path == NULL || *r.path == '\0'))) {
		fprintf(stderr, "paynotify: reconcile: --provider, --site and --statement (or, "
		                "for 2C2P, --by-query) are required\n");
		return PN_EXIT_USAGE;
	}
	if (r.by_query)
		r.ad = &byq_2c2p;
	else if ((r.ad = pn_stmt_adapter_find(provider)) == NULL) {
		fprintf(stderr,
		        "paynotify: reconcile: no statement format for provider \"%s\"; "
		        "expected alipay, wechatpay or stripe%s\n",
		        provider,
		        strcmp(provider, "2c2p") == 0
		            ? " (2C2P's reconciliation report is not read: its field table is "
		              "unpublished, and 2C2P's own sample rows have 67 and 79 fields, not "
		              "the 85 its page states, so a guessed layout is not trusted with "
		              "money; docs/RECONCILE.md \"2C2P\"; use --by-query, which asks "
		              "2C2P's paymentInquiry about each order of the day)"
		            : "");
		return PN_EXIT_USAGE;
	}
	if (date != NULL && !pn_stmt_day(date, r.ad->utc_offset_s, &day_epoch)) {
		fprintf(stderr,
		        "paynotify: reconcile: invalid --date \"%s\": expected YYYY-MM-DD "
		        "(2024-05-20)\n",
		        date);
		return PN_EXIT_USAGE;
	}
	if (fetch && strcmp(provider, "wechatpay") != 0 && strcmp(provider, "alipay") != 0) {
		fprintf(stderr,
		        "paynotify: reconcile: --fetch downloads Alipay and WeChat Pay bills "
		        "only; give the %s report as --statement FILE\n",
		        provider);
		return PN_EXIT_USAGE;
	}
	if ((fetch || r.by_query) && date == NULL) {
		/* yesterday in the provider's zone: the bill of a finished day */
		static char yday[16];
		time_t t = time(NULL) + r.ad->utc_offset_s - 86400;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(yday, sizeof(yday), "%Y-%m-%d", &tm);
		date = yday;
	}
	if ((r.cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if ((r.site = pn_cfg_site(r.cfg, site_name)) == NULL) {
		fprintf(stderr, "paynotify: reconcile: --site \"%s\": no such site in %s\n",
		        site_name, r.cfg->path);
		rc = PN_EXIT_USAGE;
		goto done;
	}
	if (!pn_provider_configured(pn_provider_find(provider), r.site)) {
		fprintf(stderr, "paynotify: reconcile: site %s has no %s configuration in %s\n",
		        site_name, provider, r.cfg->path);
		rc = PN_EXIT_CONFIG;
		goto done;
	}
	r.a = pn_arena_new();
	if (r.by_query) {
		/* 1. the day's candidates asked, before anything is compared */
		r.day = date;
		r.path = "paymentInquiry";
		if (!pn_stmt_day(r.day, r.ad->utc_offset_s, &r.from))
			goto done;
		r.to = r.from + 86400;
		if ((r.conn = pn_db_connect(r.cfg, &err)) == NULL) {
			fprintf(stderr, "paynotify: reconcile: %s\n", err.msg);
			goto done;
		}
		if (!byq_ask(&r, max_inq, rate, &err)) {
			fprintf(stderr, "paynotify: reconcile: 2c2p %s: %s\n", r.site->name, err.msg);
			goto done;
		}
		goto compare;
	}
	/* 1. the whole file, parsed and checked, before the database is touched */
	if (fetch) {
		r.day = date;
		if (!(strcmp(provider, "alipay") == 0 ? fetch_alipay(&r, r.path, &err)
		                                      : fetch_wechatpay(&r, r.path, &err))) {
			fprintf(stderr,
			        "paynotify: reconcile: could not fetch the bill: %s; nothing "
			        "changed\n",
			        err.msg);
			goto done;
		}
	}
	if (!pn_read_file(r.path, PN_STMT_MAX_FILE, &data, &len, &err)) {
		fprintf(stderr, "paynotify: reconcile: could not read the statement: %s\n",
		        err.msg);
		goto done;
	}
	if (!r.ad->parse(r.a, (const unsigned char *)data, len, &r.st, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s: not a valid %s: %s; nothing changed\n",
		        r.path, r.ad->format, err.msg);
		goto done;
	}
	if (!r.ad->check_site(r.site, &r.st, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s: %s; nothing changed\n", r.path, err.msg);
		goto done;
	}
	if (date != NULL && r.st.date != NULL && strcmp(date, r.st.date) != 0) {
		fprintf(stderr,
		        "paynotify: reconcile: %s covers %s, not --date %s; nothing "
		        "changed\n",
		        r.path, r.st.date, date);
		goto done;
	}
	r.day = date ? date : r.st.date;
	if (r.day == NULL) {
		fprintf(stderr, "paynotify: reconcile: %s names no day (no rows): give --date\n",
		        r.path);
		rc = PN_EXIT_USAGE;
		goto done;
	}
	if (!pn_stmt_day(r.day, r.ad->utc_offset_s, &r.from)) {
		fprintf(stderr, "paynotify: reconcile: %s: unreadable day \"%s\"\n", r.path, r.day);
		goto done;
	}
	r.to = r.from + 86400;
	for (i = 0; i < r.st.ntxns; i++) {
		const struct pn_stmt_txn *t = &r.st.txns[i];

		if (t->kind == PN_STMT_PAYMENT && (t->epoch < r.from || t->epoch >= r.to)) {
			fprintf(stderr,
			        "paynotify: reconcile: %s: line %d: a payment at %s is outside "
			        "%s (UTC%+d): one statement day per run; nothing changed\n",
			        r.path, t->line, t->time, r.day, r.ad->utc_offset_s / 3600);
			goto done;
		}
	}
	if ((r.conn = pn_db_connect(r.cfg, &err)) == NULL) {
		fprintf(stderr, "paynotify: reconcile: %s\n", err.msg);
		goto done;
	}
compare:
	pn_strmap_init(&r.stmt_keys, r.a, r.st.ntxns * 2);
	pn_strmap_init(&r.refunded_orders, r.a, r.st.ntxns);

	/* 2. what we have */
	if (!load(&r, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s\n", err.msg);
		goto done;
	}
	if (r.apply)
		r.store = pn_store_new(pn_cfg_admin_conninfo(r.cfg), r.cfg->statement_timeout_ms,
		                       r.cfg->connect_timeout_s, "paynotify-reconcile");

	/* 3. compare, apply, report */
	pn_table_init(&r.out, PN_ARRAY_LEN(cols), cols);
	compare(&r);
	pn_table_print(&r.out, fmt, stdout);
	fflush(stdout);
	/* after a table on stdout; on stderr with csv and json, so stdout stays parseable */
	summary(&r, fmt == PN_FMT_TABLE ? stdout : stderr);
	pn_table_free(&r.out);
	rc = r.errors > 0 ? PN_EXIT_FAILED : r.human > 0 ? PN_EXIT_ATTENTION : PN_EXIT_OK;
done:
	free(data);
	pn_store_free(r.store);
	PQfinish(r.conn);
	pn_arena_free(r.a);
	pn_cfg_free(r.cfg);
	return rc;
}

const struct pn_cmd pn_cmd_reconcile = {
    "reconcile",
    "--provider P --site S --statement FILE [--date D] [--apply]",
    "compare a provider's daily statement with the notifications and orders",
    reconcile_exec,
    help,
};

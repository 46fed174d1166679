/*
 * reconcile_compare.c: the comparison of `paynotify reconcile` — each
 * statement row (or --by-query answer) against the orders and
 * notifications load() found, the discrepancy classes of the report, the
 * --apply of lost payments and refunds through the ingest, and the summary
 * line (docs/RECONCILE.md).
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "money.h"
#include "reconcile.h"

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

const char *
pn_rec_dumps(struct run *r, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	const char *out = pn_arena_strdup(r->a, s ? s : "[]");

	free(s);
	json_decref(j);
	return out;
}

/* Both identities an Alipay refund may carry (part or whole refunded); one for the rest. */
void
pn_rec_refund_keys(struct run *r, const struct pn_stmt_txn *t, const char **k1, const char **k2)
{
	struct pn_event ev;

	r->ad->event(r->a, r->site, t, 1, 0, &ev);
	*k1 = ev.dedup_key;
	r->ad->event(r->a, r->site, t, 1, 1, &ev);
	*k2 = strcmp(ev.dedup_key, *k1) ? ev.dedup_key : NULL;
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
		hj = pn_rec_dumps(r, h);
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
	pn_rec_refund_keys(r, t, &k1, &k2);
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

/* One statement row: counted in its currency's totals, then compared by kind. */
static void
compare_row(struct run *r, const struct pn_stmt_txn *t)
{
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
		    pn_arena_printf(r->a, "%s: answer or accept it in the Dashboard", t->type));
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

/*
 * Why an order paid here that day is absent from the statement.  paid_at
 * is when the payment was applied here, which is after the provider
 * completed it: just after the day's start, it was probably completed
 * before the previous cut-off and is on the previous day's statement; just
 * before the day's end, the provider may date it after the cut-off (the
 * next day's statement).
 */
static const char *
absent_detail(struct run *r, const struct order *o)
{
	const char *when = local_time(r, o->paid_at);

	if (o->paid_at < r->from + CUTOFF_NEAR_S)
		return pn_arena_printf(
		    r->a,
		    "paid here at %s (UTC%+d), %lld s after the previous day's cut-off: "
		    "the payment is probably on the previous day's statement; reconcile "
		    "that day before acting",
		    when, r->ad->utc_offset_s / 3600, (long long)(o->paid_at - r->from));
	if (o->paid_at >= r->to - CUTOFF_NEAR_S)
		return pn_arena_printf(r->a,
		                       "paid here at %s (UTC%+d), within 15 minutes of the statement's "
		                       "cut-off: look for it on the next day's statement before acting",
		                       when, r->ad->utc_offset_s / 3600);
	return pn_arena_printf(r->a,
	                       "paid here at %s (UTC%+d), the provider's statement does not have "
	                       "it: query the provider (paynotify query --order) before shipping "
	                       "more",
	                       when, r->ad->utc_offset_s / 3600);
}

/* Paid here that day, absent from the statement: not_in_statement. */
static void
compare_absent_payments(struct run *r)
{
	size_t i;

	for (i = 0; i < r->norders; i++) {
		struct order *o = &r->orders[i];
		struct totals *tt;

		/* by_statement: applied from an earlier day's statement (the daily run
		 * applies yesterday's lost payment this morning): reconciled there */
		if (o->stmt_paid || o->by_statement || !paid_status(o->status) || o->psp == NULL ||
		    strcmp(o->psp, r->ad->provider) != 0 || o->paid_at < r->from ||
		    o->paid_at >= r->to)
			continue;
		row(r, K_NOT_IN_STATEMENT, true, NULL, o, NULL, absent_detail(r, o));
		tt = totals_for(r, o->currency);
		tt->nabsent++;
		tt->absent += o->amount;
	}
}

/* Refunded here that day (a notification received then), absent from the
 * statement: refund_not_in_statement; a refund applied from a statement
 * was on that statement.  Not by query: paymentInquiry does not report
 * refunds. */
static void
compare_absent_refunds(struct run *r)
{
	size_t i;

	if (r->by_query)
		return;
	for (i = 0; i < r->nnotifs; i++) {
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

/* The report's rows in this order: the statement's (or the answers'), the
 * --by-query answers that are not rows, paid here and absent, refunded
 * here and absent. */
void
pn_rec_compare(struct run *r)
{
	size_t i;

	for (i = 0; i < r->st.ntxns; i++)
		compare_row(r, &r->st.txns[i]);
	if (r->by_query)
		byq_compare(r);
	compare_absent_payments(r);
	compare_absent_refunds(r);
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

void
pn_rec_summary(struct run *r, FILE *f)
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


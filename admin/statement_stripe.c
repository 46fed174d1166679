/*
 * statement_stripe.c: Stripe's itemized reports, as CSV: "Balance change
 * from activity" (balance_change_from_activity.itemized.*) and "Payout
 * reconciliation" (payout_reconciliation.itemized.*), downloaded from the
 * Dashboard or through the Reporting API (report runs).  Layout:
 * docs/RECONCILE.md "Stripe".
 *
 * One header row of column names, then one row per balance transaction.
 * Columns are found by name (report runs let the caller pick columns):
 * balance_transaction_id, created_utc, currency, gross, fee, net and
 * reporting_category are required; payment_intent_id, charge_id,
 * source_id and payment_metadata[order_id] are used when present.
 * Amounts are decimals in major units, signed (a refund's gross is
 * negative); currencies lower case.  The day is the UTC day of created_utc.
 */
#include "config.h"

#include <string.h>

#include "money.h"
#include "statement.h"
#include "stripe/identity.h"

enum col {
	C_BT,
	C_CREATED,
	C_CUR,
	C_GROSS,
	C_FEE,
	C_NET,
	C_CAT,
	C_PI,
	C_CHARGE,
	C_SOURCE,
	C_ORDER,
	NCOLS
};

static const char *const col_names[NCOLS] = {
    "balance_transaction_id",
    "created_utc",
    "currency",
    "gross",
    "fee",
    "net",
    "reporting_category",
    "payment_intent_id",
    "charge_id",
    "source_id",
    "payment_metadata[order_id]",
};
#define REQUIRED(c) ((c) <= C_CAT)

static const char *
opt(char **f, const int *col, enum col c)
{
	return col[c] >= 0 && *f[col[c]] ? f[col[c]] : NULL;
}

static bool
stripe_parse(struct pn_arena *a, const unsigned char *data, size_t len, struct pn_statement *st,
             struct pn_err *err)
{
	struct pn_lines l;
	char *line, *f[PN_STMT_MAX_FIELDS];
	size_t nf, ncols = 0;
	int col[NCOLS], i;
	bool eof, header = false;

	if (!pn_stmt_text_check(data, len, err))
		return false;
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
		data += 3;
		len -= 3;
	}
	if (!pn_utf8_valid((const char *)data, len)) {
		pn_err_set(err, "not UTF-8 text (Stripe reports are UTF-8)");
		return false;
	}
	memset(st, 0, sizeof(*st));
	pn_lines_init(&l, data, len);
	for (;;) {
		struct pn_stmt_txn *t;
		const char *cat, *cur;
		int64_t gross, fee, net;
		struct pn_err e;
		char canon[4];
		int exp;

		if (!pn_lines_next(&l, a, &line, &eof, err))
			return false;
		if (eof)
			break;
		if (*line == '\0')
			continue;
		if (!pn_csv_split(line, f, &nf, err)) {
			pn_err_prefix(err, "line %d", l.lineno);
			return false;
		}
		if (!header) {
			for (i = 0; i < NCOLS; i++) {
				col[i] = pn_csv_col(f, nf, col_names[i]);
				if (col[i] < 0 && REQUIRED(i)) {
					pn_err_set(err,
					           "line %d: not a Stripe itemized report: the "
					           "header row has no column \"%s\"",
					           l.lineno, col_names[i]);
					return false;
				}
			}
			ncols = nf;
			header = true;
			continue;
		}
		if (nf != ncols) {
			pn_err_set(err, "line %d: %zu fields, the header row has %zu", l.lineno, nf,
			           ncols);
			return false;
		}
		if ((t = pn_stmt_add(a, st, l.lineno, err)) == NULL)
			return false;
		t->raw = pn_arena_strndup(a, (const char *)l.raw, l.raw_len);
		t->raw_len = l.raw_len;
		cat = f[col[C_CAT]];
		cur = f[col[C_CUR]];
		t->type = cat;
		t->time = f[col[C_CREATED]];
		if (!pn_money_currency(cur, canon) || (exp = pn_money_exponent(canon)) < 0) {
			pn_err_set(err, "line %d: currency \"%.8s\" is not an ISO 4217 code",
			           l.lineno, cur);
			return false;
		}
		memcpy(t->currency, canon, 4);
		if (!pn_stmt_time(t->time, 0, &t->epoch)) {
			pn_err_set(err, "line %d: created_utc \"%.40s\" is not YYYY-MM-DD HH:MM:SS",
			           l.lineno, t->time);
			return false;
		}
		if (!pn_stmt_amount(f[col[C_GROSS]], exp, &gross, &e) ||
		    !pn_stmt_amount(f[col[C_FEE]], exp, &fee, &e) ||
		    !pn_stmt_amount(f[col[C_NET]], exp, &net, &e)) {
			pn_err_set(err, "line %d: unreadable amount: %s", l.lineno, e.msg);
			return false;
		}
		if (gross - fee != net) {
			pn_err_set(err, "line %d: gross %s - fee %s is not net %s", l.lineno,
			           f[col[C_GROSS]], f[col[C_FEE]], f[col[C_NET]]);
			return false;
		}
		t->has_fee = t->has_net = true;
		t->fee_minor = fee;
		t->net_minor = net;
		t->amount_minor = gross < 0 ? -gross : gross;
		t->order_id = opt(f, col, C_ORDER);
		t->psp_txn_id = opt(f, col, C_PI) ? opt(f, col, C_PI) : opt(f, col, C_CHARGE);
		if (strcmp(cat, "charge") == 0 || strcmp(cat, "payment") == 0) {
			t->kind = PN_STMT_PAYMENT;
			if (t->psp_txn_id == NULL)
				t->psp_txn_id = opt(f, col, C_SOURCE);
		} else if (strcmp(cat, "refund") == 0) {
			t->kind = PN_STMT_REFUND;
			t->refund_id = opt(f, col, C_SOURCE) ? opt(f, col, C_SOURCE) : f[col[C_BT]];
		} else if (strncmp(cat, "dispute", 7) == 0) {
			t->kind = PN_STMT_DISPUTE;
		} else if (strcmp(cat, "fee") == 0) {
			t->kind = PN_STMT_FEE;
		} else
			t->kind = PN_STMT_OTHER; /* payout, transfer, refund_failure, ... */
		if ((t->kind == PN_STMT_PAYMENT || t->kind == PN_STMT_REFUND) &&
		    t->order_id == NULL && t->psp_txn_id == NULL) {
			pn_err_set(err,
			           "line %d: a %s row names neither payment_metadata[order_id] "
			           "nor payment_intent_id",
			           l.lineno, cat);
			return false;
		}
		if ((t->kind == PN_STMT_PAYMENT && gross < 0) ||
		    (t->kind == PN_STMT_REFUND && gross > 0)) {
			pn_err_set(err, "line %d: a %s with gross %s has the wrong sign", l.lineno,
			           cat, f[col[C_GROSS]]);
			return false;
		}
	}
	if (!header) {
		pn_err_set(err, "empty file: not even the header row of a Stripe report");
		return false;
	}
	if (st->ntxns > 0)
		st->date = pn_arena_strndup(a, st->txns[0].time, 10);
	return true;
}

static bool
stripe_check_site(const struct pn_site *site, const struct pn_statement *st, struct pn_err *err)
{
	(void)site;
	(void)st;
	(void)err;
	return true; /* the reports name no account; the Dashboard download is the site's */
}

static void
stripe_event(struct pn_arena *a, const struct pn_site *site, const struct pn_stmt_txn *t,
             int64_t order_amount, int64_t refunded_after, struct pn_event *ev)
{
	struct pn_stripe_fact fact;
	struct pn_stripe_result r;

	(void)site;
	(void)order_amount;
	pn_event_init(ev);
	ev->source = "statement";
	ev->key_id = "statement";
	ev->order_id = t->order_id;
	ev->psp_time = t->time;
	/* stripe/identity.c: a payment has the identity `paynotify query` gives this
	 * PaymentIntent (a notification keys on its evt_ id, and the order then says
	 * already_applied); a refund is charge.refunded's running total
	 * (refund_cumulative): whichever of the two comes second adds nothing, even
	 * though their keys differ */
	memset(&fact, 0, sizeof(fact));
	fact.type = t->kind == PN_STMT_PAYMENT ? "payment_intent.succeeded" : "charge.refunded";
	fact.payment_intent = t->psp_txn_id;
	fact.refund_id = t->refund_id;
	fact.currency = pn_arena_strdup(a, t->currency);
	fact.amount_minor = t->amount_minor;
	fact.refund_total_minor = refunded_after;
	pn_stripe_identity(a, &fact, ev, &r);
}

const struct pn_stmt_adapter pn_stmt_stripe = {
    .provider = "stripe",
    .format = "Stripe itemized balance change / payout reconciliation report",
    .utc_offset_s = 0,
    .parse = stripe_parse,
    .check_site = stripe_check_site,
    .event = stripe_event,
};

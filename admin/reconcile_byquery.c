/*
 * reconcile_byquery.c: `paynotify reconcile --provider 2c2p --by-query` —
 * the day's candidate orders asked through 2C2P's paymentInquiry, the paid
 * answers made rows of the run's statement (docs/RECONCILE.md "2C2P").
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "reconcile.h"

/*
 * 2C2P's daily report cannot be read (docs/RECONCILE.md "2C2P"), but its
 * paymentInquiry answers one invoice at a time, signed: the day's
 * candidates are asked with `paynotify query`'s module (admin/query_2c2p.c,
 * pn_query_2c2p.ask: the same request, verification and normalisation), a
 * paid answer becomes a payment row of r->st and goes through the same
 * comparison and --apply as a statement row (its event and raw answer are
 * exactly what `paynotify query --apply` would ingest), the other answers
 * through byq_compare() (admin/reconcile_compare.c).
 *
 * The day is UTC+7: 2C2P's own reports are cut at GMT+7 (its report
 * delivery, "Before 4:00AM GMT+7"); the day only chooses which orders are
 * asked about, consecutive days cover every order once.
 */
#define BYQ_UTC_OFFSET_S (7 * 3600)

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

const struct pn_stmt_adapter pn_rec_byq_2c2p = {
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
bool
pn_rec_byq_ask(struct run *r, int64_t max, int64_t rate, struct pn_err *err)
{
	const struct pn_query_provider *qp = &pn_query_2c2p;
	char from[24], to[24], lim[24];
	const char *p[5];
	struct pn_table t;
	struct pn_rec_fetch f;
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
	if (!pn_rec_fetch_open(r, qp, &f, err)) {
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
			pn_rec_fetch_close(&f);
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
	pn_rec_fetch_close(&f);
	pn_table_free(&t);
	return true;
}


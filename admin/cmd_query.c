/*
 * cmd_query.c: paynotify query — ask the provider about orders whose
 * notification never came, and feed a final, verified answer through the
 * same ingest as a notification (docs/QUERY.md).
 *
 * One request per order and provider, never retried within a run; bounded
 * times ([query] connect_timeout_ms, timeout_ms).  Only final answers
 * (paid; closed or failed where the provider says so) are ingested, with
 * ev->source "query", the verified answer's raw bytes as raw_body and the
 * dedup identity of the provider's notification for the same payment, so
 * that whichever comes second is a duplicate or already_applied, never a
 * second application.  Not found, waiting, refused answers and transport
 * errors change nothing and are reported.
 *
 * Exit status: 0 nothing to do (every order was asked; nothing needs a
 * human), 1 something needs a human (an answer refused, a stored outcome
 * such as paid_after_close or amount_mismatch, an order no provider can be
 * asked about), 3 could not do the job (configuration, database, an order
 * not asked because of a transport error, timeout or 5xx), 64 usage.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"
#include "arena.h"
#include "crypto.h"
#include "money.h"
#include "query.h"
#include "store.h"

const struct pn_query_provider *const pn_query_providers[] = {
	&pn_query_alipay,
	&pn_query_wechatpay,
	&pn_query_stripe,
	&pn_query_2c2p,
	NULL,
};

const struct pn_query_provider *
pn_query_provider_find(const char *name)
{
	const struct pn_query_provider *const *p;

	for (p = pn_query_providers; *p; p++)
		if (strcmp((*p)->name, name) == 0)
			return *p;
	return NULL;
}

void
pn_query_set(const struct pn_query_ctx *ctx, struct pn_query_answer *ans,
	     enum pn_query_state state, const char *fmt, ...)
{
	va_list	ap;
	char	buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ans->state = state;
	ans->detail = pn_arena_strdup(ctx->arena, buf);
}

bool
pn_query_http_ok(const struct pn_query_ctx *ctx, const struct pn_qhttp_answer *h,
		 bool not_found_404, struct pn_query_answer *ans)
{
	if (h->status >= 200 && h->status < 300)
		return true;
	if (h->status == 404 && not_found_404)
		pn_query_set(ctx, ans, PN_Q_NOT_FOUND, "HTTP 404: %.200s", (const char *)h->body);
	else
		pn_query_set(ctx, ans, PN_Q_ERROR, "HTTP %ld from the provider: %.200s", h->status,
			     (const char *)h->body);
	return false;
}

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify query [--site S] [--provider P]\n"
		"                       (--order ID | --pending-older-than DURATION\n"
		"                        [--pending-younger-than DURATION] | --complaints\n"
		"                        | --combine COMBINE_OUT_TRADE_NO | --due [--limit N])\n"
		"                       [--dry-run | --apply] [--format table|csv|json]\n\n"
		"Ask each order's provider for the payment's state with its order-query API\n"
		"(Alipay alipay.trade.query, WeChat Pay v3, Stripe PaymentIntents, 2C2P\n"
		"paymentInquiry), verify the answer, and with --apply feed a final answer\n"
		"(paid, closed, failed) through the same ingest as a notification, recorded\n"
		"with source \"query\".  --dry-run (the default) asks and changes nothing.\n"
		"One request per order and provider, no retries; timeouts from [query].\n"
		"The provider is the order's (orders.psp), else --provider, else every\n"
		"provider the site can be queried with.  --pending-older-than selects pending\n"
		"orders created at least that long ago (and orders with a notification stored\n"
		"pending_confirmation that long ago, which a final paid answer confirms: a\n"
		"legacy 2C2P form), --pending-younger-than at most that long ago (a window:\n"
		"docs/OPERATIONS.md).  DURATION: 90s, 5m, 2h, 1d.\n"
		"Then the WeChat Pay v2 refund results that wait for a signed confirmation\n"
		"(pending_confirmation) received in that window (or of --order): one\n"
		"refundquery each; applied only when the signed answer has the same refund,\n"
		"transaction, order and amounts, status SUCCESS (docs/WECHATPAY.md).\n"
		"--complaints asks about every open complaint instead (WeChat Pay\n"
		"complaints-v2, Alipay alipay.merchant.tradecomplain.query): the verified\n"
		"answer links the complaint to its order and says whether it is still open.\n"
		"--combine asks WeChat Pay (API v3, --site required) about a combine order\n"
		"and feeds each final sub-order of the site as its notification would; one\n"
		"row per sub-order (another merchant's: other_merchant, not ingested).\n"
		"--complaints and --combine do only that (no refund confirmations).\n"
		"--due works the follow-up schedule (docs/QUERY.md): every pending order and\n"
		"every refund waiting for its confirmation is asked about when its next ask\n"
		"is due (1, 2, 5, 10, 30 minutes, then hourly, up to [query]\n"
		"follow_up_<provider>_hours), at most --limit items (default 500).  With\n"
		"--apply each due item is claimed (SKIP LOCKED, a lease: several hosts or\n"
		"timers never ask twice), asked as --order asks it, and its answer recorded:\n"
		"a final answer ends its schedule, another one schedules the next ask.\n"
		"Without --apply the due items are asked and nothing changes.\n"
		"Exit status: 0 nothing to do, 1 something needs a human, 3 could not do the\n"
		"job (an order could not be asked: transport error, timeout, 5xx), 64 usage,\n"
		"78 configuration error.\n");
}

/* "90s", "5m", "2h", "1d" (or plain seconds) into seconds. */
static bool
parse_duration(const char *s, int64_t *out)
{
	char   *end;
	long long v;
	int64_t	mult = 1;

	if (*s < '0' || *s > '9')
		return false;
	v = strtoll(s, &end, 10);
	if (end == s || v < 0 || v > 100LL * 365 * 86400)
		return false;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		mult = 60, end++;
	else if (*end == 'h')
		mult = 3600, end++;
	else if (*end == 'd')
		mult = 86400, end++;
	if (*end != '\0')
		return false;
	*out = (int64_t)v * mult;
	return *out <= INT64_C(100) * 365 * 86400;
}

const char *const pn_query_columns[PN_QUERY_NCOLUMNS] = {
	"site", "provider", "order_id", "amount", "answer", "result", "detail",
};

void
pn_query_run_release_creds(struct pn_query_run *r)
{
	size_t	i;

	for (i = 0; i < r->ncache; i++)
		if (r->cache[i].creds)
			r->cache[i].qp->free_creds(r->cache[i].creds);
	free(r->cache);
	r->cache = NULL;
	r->ncache = 0;
}

static struct pn_query_creds *
creds_for(struct pn_query_run *r, const struct pn_site *site, const struct pn_query_provider *qp)
{
	struct pn_query_creds *c;
	struct pn_err err;
	size_t	i;

	for (i = 0; i < r->ncache; i++)
		if (r->cache[i].site == site && r->cache[i].qp == qp)
			return &r->cache[i];
	r->cache = pn_xrealloc(r->cache, (r->ncache + 1) * sizeof(*r->cache));
	c = &r->cache[r->ncache++];
	memset(c, 0, sizeof(*c));
	c->site = site;
	c->qp = qp;
	if (!qp->load(site, &c->creds, &err)) {
		c->failed = true;
		snprintf(c->why, sizeof(c->why), "%s", err.msg);
	}
	return c;
}

static const char *
state_name(enum pn_query_state s)
{
	switch (s) {
	case PN_Q_FINAL: return "final";
	case PN_Q_WAITING: return "waiting";
	case PN_Q_NOT_FOUND: return "not_found";
	case PN_Q_REFUSED: return "refused";
	case PN_Q_ATTENTION: return "attention";
	case PN_Q_ERROR: return "error";
	}
	return "error";
}

/* "66.00 CNY" (arena); NULL without a currency. */
static const char *
amount_text(struct pn_arena *a, int64_t minor, const char *currency)
{
	char	amount[48];
	int	exp;

	if (currency == NULL)
		return NULL;
	exp = pn_money_exponent(currency);
	if (exp >= 0)
		pn_money_format(minor, exp, amount, sizeof(amount));
	else		/* not an ISO 4217 code: say what the database holds */
		snprintf(amount, sizeof(amount), "%lld minor units of", (long long)minor);
	return pn_arena_printf(a, "%s %s", amount, currency);
}

static void
add_row(struct pn_query_run *r, struct pn_arena *a, const struct pn_query_order *o, const char *provider,
	const char *answer, const char *result, const char *detail)
{
	const char *cells[7];

	cells[0] = o->site;
	cells[1] = provider;
	cells[2] = o->order_id;
	cells[3] = amount_text(a, o->amount_minor, o->currency);
	cells[4] = answer;
	cells[5] = result;
	cells[6] = detail;
	pn_table_add(&r->out, cells);
	if (r->last_kept)
		return;
	snprintf(r->last_answer, sizeof(r->last_answer), "%s", answer ? answer : "");
	snprintf(r->last_result, sizeof(r->last_result), "%s", result ? result : "");
}

/* Outcomes after which nothing is left for a human. */
static bool
outcome_settled(const char *outcome)
{
	return strcmp(outcome, "applied") == 0 || strcmp(outcome, "already_applied") == 0
	    || strcmp(outcome, "ignored") == 0 || strcmp(outcome, "foreign_site") == 0
	    || strcmp(outcome, "unhandled") == 0;
}

/*
 * Stored pending_confirmation notifications of the order (docs/2C2P.md
 * "Which transaction"): those of the same site, provider, amount and
 * currency that the final paid answer confirms (qp->confirms on their raw
 * bytes) become already_applied, with why in outcome_detail: the answer
 * has just been ingested (or was, by an earlier run), so the payment they
 * announce is applied, with the provider's own transaction.  With apply
 * false, only counted.  Returns how many; -1 on a database error (err).
 */
static const char pending_sql[] =
	"SELECT id, encode(raw_body, 'hex') AS raw, amount_minor, currency"
	"  FROM paynotify.notifications"
	" WHERE site = $1 AND provider = $2 AND order_id = $3"
	"   AND outcome = 'pending_confirmation' AND event_kind = 'paid'"
	" ORDER BY id";

static const char confirm_sql[] =
	"UPDATE paynotify.notifications SET outcome = 'already_applied', outcome_detail = $2"
	" WHERE id = $1::bigint AND outcome = 'pending_confirmation'";

static int
confirm_pending(struct pn_query_run *r, const struct pn_query_ctx *ctx, const struct pn_query_provider *qp,
		const struct pn_query_order *o, const struct pn_query_answer *ans, bool apply,
		struct pn_err *err)
{
	const char *params[3] = {o->site, qp->name, o->order_id};
	struct pn_table t;
	size_t	i;
	int	n = 0;

	if (qp->confirms == NULL || ans->ev.kind != PN_KIND_PAID || ans->confirm_segment == NULL)
		return 0;
	if (!pn_db_query(r->conn, PN_SQL_CONST(pending_sql), 3, params, &t, err))
		return -1;
	for (i = 0; i < t.nrows; i++) {
		const char *hex = pn_table_get(&t, i, "raw"), *why = NULL;
		const char *amt = pn_table_get(&t, i, "amount_minor");
		const char *cur = pn_table_get(&t, i, "currency");
		size_t	hlen = hex ? strlen(hex) : 0, got = 0;
		unsigned char *raw = pn_arena_alloc(ctx->arena, hlen / 2 + 1);
		int64_t	v;

		if (amt == NULL || !pn_parse_i64(amt, &v) || v != ans->ev.amount_minor
		    || cur == NULL || ans->ev.currency == NULL || strcmp(cur, ans->ev.currency) != 0)
			continue;
		if (hlen % 2 != 0 || !pn_hex_decode(hex, hlen, raw, hlen / 2 + 1, &got))
			continue;
		if (!qp->confirms(ctx, ans, raw, got, &why))
			continue;
		if (apply) {
			const char *up[2] = {pn_table_get(&t, i, "id"), why};

			if (!pn_db_query(r->conn, PN_SQL_CONST(confirm_sql), 2, up, NULL, err)) {
				pn_table_free(&t);
				return -1;
			}
		}
		n++;
	}
	pn_table_free(&t);
	return n;
}

/*
 * The context of one request to qp for site, with the site's credentials
 * from the run's cache; counted as asked.  False, with an error row for o,
 * when the credentials could not be loaded.
 */
static bool
ask_ctx(struct pn_query_run *r, struct pn_arena *a, const struct pn_site *site,
	const struct pn_query_provider *qp, const struct pn_query_order *o,
	struct pn_query_ctx *ctx)
{
	struct pn_query_creds *cc = creds_for(r, site, qp);

	if (cc->failed) {
		r->errors++;
		add_row(r, a, o, qp->name, NULL, "error", cc->why);
		return false;
	}
	memset(ctx, 0, sizeof(*ctx));
	ctx->cfg = r->cfg;
	ctx->site = site;
	ctx->http = &r->http;
	ctx->arena = a;
	ctx->now = (int64_t)time(NULL);
	ctx->creds = cc->creds;
	r->asked++;
	return true;
}

/* An answer's state in the run's counts (the summary line). */
static void
count_state(struct pn_query_run *r, enum pn_query_state state)
{
	switch (state) {
	case PN_Q_WAITING: r->waiting++; break;
	case PN_Q_NOT_FOUND: r->not_found++; break;
	case PN_Q_REFUSED: r->refused++; break;
	case PN_Q_ATTENTION: r->attention++; break;
	case PN_Q_ERROR: r->errors++; break;
	case PN_Q_FINAL: r->final++; break;
	}
}

static void
query_one(struct pn_query_run *r, struct pn_arena *a, const struct pn_site *site,
	  const struct pn_query_provider *qp, const struct pn_query_order *o)
{
	struct pn_query_answer ans;
	struct pn_query_ctx ctx;
	struct pn_ingest_result res;
	struct pn_err err;
	const char *word, *why = "";
	int	confirmed = 0;

	if (!ask_ctx(r, a, site, qp, o, &ctx))
		return;
	memset(&ans, 0, sizeof(ans));
	qp->ask(&ctx, o, &ans);
	word = ans.psp_state;
	count_state(r, ans.state);
	if (ans.state != PN_Q_FINAL) {
		add_row(r, a, o, qp->name, word, state_name(ans.state), ans.detail);
		return;
	}
	if (!r->apply) {
		int	would = ans.ev.flag ? 0 : confirm_pending(r, &ctx, qp, o, &ans, false, &err);

		if (would < 0) {
			r->errors++;
			add_row(r, a, o, qp->name, word, "error", err.msg);
			return;
		}
		add_row(r, a, o, qp->name, word,
			pn_arena_printf(a, "would_ingest_%s", pn_kind_name(ans.ev.kind)),
			pn_arena_printf(a, "%s; dedup key %s%s%s%s", ans.detail, ans.ev.dedup_key,
					ans.ev.flag ? "; flagged " : "",
					ans.ev.flag ? ans.ev.flag : "",
					would ? pn_arena_printf(a, "; would confirm %d stored "
								"notification%s", would,
								would == 1 ? "" : "s") : ""));
		return;
	}
	if (!pn_store_ingest(r->store, site->name, qp->name, &ans.ev, ans.raw_headers_json,
			     ans.raw, ans.raw_len, &res, &err)) {
		r->errors++;
		add_row(r, a, o, qp->name, word, "error",
			pn_arena_printf(a, "%s; not stored: %s", ans.detail, err.msg));
		return;
	}
	if (res.duplicate || outcome_settled(res.outcome)) {
		if (!res.duplicate && strcmp(res.outcome, "applied") == 0)
			r->applied++;
	} else
		r->attention++;
	/* the payment is applied (now or before): the forms that announced it
	 * without saying which transaction it was are confirmed by it */
	if (res.duplicate || strcmp(res.outcome, "applied") == 0
	    || strcmp(res.outcome, "already_applied") == 0
	    || strcmp(res.outcome, "paid_after_close") == 0)
		confirmed = confirm_pending(r, &ctx, qp, o, &ans, true, &err);
	if (confirmed < 0) {
		r->errors++;
		confirmed = 0;
		why = pn_arena_printf(a, "; stored notifications not confirmed: %s", err.msg);
	}
	add_row(r, a, o, qp->name, word, res.duplicate ? "duplicate" : res.outcome,
		pn_arena_printf(a, "%s; notification %lld, order %s%s%s%s%s", ans.detail,
				(long long)res.notification_id,
				res.order_status[0] ? res.order_status : "unknown",
				/* why it was not applied (the row's outcome_detail:
				 * amounts in major units with currency) */
				res.detail && strcmp(res.outcome, "applied") != 0 ? ": " : "",
				res.detail && strcmp(res.outcome, "applied") != 0 ? res.detail : "",
				confirmed ? pn_arena_printf(a, "; confirmed %d stored notification%s",
							    confirmed, confirmed == 1 ? "" : "s")
				: "", why));
	r->last_kept = true;	/* --due records this answer, not another provider's */
}

/* --combine: one combine order of one site (WeChat Pay v3). */
static void
query_combine(struct pn_query_run *r, struct pn_arena *a, const struct pn_site *site, const char *cotn)
{
	const struct pn_query_provider *qp = &pn_query_wechatpay;
	struct pn_query_answer ans;
	struct pn_query_ctx ctx;
	struct pn_ingest_result *res = NULL;
	struct pn_query_order o;
	struct pn_err err;
	const char *why = NULL;
	bool	stored = false;
	size_t	i;

	memset(&o, 0, sizeof(o));
	o.site = site->name;
	o.order_id = cotn;
	o.currency = "CNY";
	o.amount_minor = 0;
	r->orders++;
	if (!qp->configured(site, &why)) {
		r->attention++;
		add_row(r, a, &o, qp->name, NULL, "attention", pn_arena_printf(a, "cannot query: %s",
									       why));
		return;
	}
	if (!ask_ctx(r, a, site, qp, &o, &ctx))
		return;
	memset(&ans, 0, sizeof(ans));
	pn_query_wechatpay_combine(&ctx, cotn, &ans);
	count_state(r, ans.state);
	if (ans.nsubs == 0) {
		add_row(r, a, &o, qp->name, NULL, state_name(ans.state), ans.detail);
		return;
	}
	if (ans.state == PN_Q_FINAL && r->apply) {
		res = pn_arena_alloc(a, (ans.ev.nsubs + 1) * sizeof(*res));
		stored = pn_store_ingest_combined(r->store, site->name, qp->name, &ans.ev,
						  ans.raw_headers_json, ans.raw, ans.raw_len, a, res,
						  &err);
		if (!stored)
			r->errors++;
	}
	for (i = 0; i < ans.nsubs; i++) {
		const struct pn_query_sub *q = &ans.subs[i];
		struct pn_query_order so = o;
		const struct pn_ingest_result *ir = stored && q->ingest >= 0 ? &res[q->ingest + 1]
		    : NULL;
		const struct pn_event *ev = q->ingest >= 0 ? &ans.ev.subs[q->ingest] : NULL;
		const char *result = q->result;

		so.order_id = q->order_id;
		so.amount_minor = q->amount_minor < 0 ? 0 : q->amount_minor;
		so.currency = q->currency ? q->currency : "CNY";
		if (ev != NULL && !r->apply)
			result = pn_arena_printf(a, "would_ingest_%s", pn_kind_name(ev->kind));
		else if (ev != NULL && ir == NULL)
			result = "error";
		else if (ir != NULL) {
			result = ir->duplicate ? "duplicate" : ir->outcome;
			if (ir->duplicate || outcome_settled(ir->outcome)) {
				if (!ir->duplicate && strcmp(ir->outcome, "applied") == 0)
					r->applied++;
			} else
				r->attention++;
		}
		add_row(r, a, &so, qp->name, q->psp_state, result,
			ev != NULL && ir == NULL && r->apply
			? pn_arena_printf(a, "%s; not stored: %s", q->detail, err.msg)
			: ir != NULL ? pn_arena_printf(a, "%s; combine order %s, notification %lld, "
						       "order %s", q->detail, cotn,
						       (long long)ir->notification_id,
						       ir->order_status[0] ? ir->order_status
						       : "unknown")
			: ev != NULL ? pn_arena_printf(a, "%s; dedup key %s%s%s", q->detail,
						       ev->dedup_key, ev->flag ? "; flagged " : "",
						       ev->flag ? ev->flag : "")
			: q->detail);
	}
}

/*
 * --complaints: ask about every open complaint (paynotify.cases) whose
 * provider has a complaint query (WeChat Pay complaints-v2, Alipay
 * alipay.merchant.tradecomplain.query), and with --apply ingest the
 * verified answer: the complaint's transaction links it to the order, its
 * state says whether it is still open.  The order column is the
 * complaint's order as linked (before this run).
 */
static void
query_case(struct pn_query_run *r, struct pn_arena *a, const struct pn_site *site,
	   const struct pn_query_provider *qp, const struct pn_query_order *o,
	   const char *case_id)
{
	struct pn_query_answer ans;
	struct pn_query_ctx ctx;
	struct pn_ingest_result res;
	struct pn_err err;

	if (!ask_ctx(r, a, site, qp, o, &ctx))
		return;
	memset(&ans, 0, sizeof(ans));
	qp->ask_case(&ctx, case_id, &ans);
	count_state(r, ans.state);
	if (ans.state != PN_Q_FINAL) {
		add_row(r, a, o, qp->name, ans.psp_state, state_name(ans.state),
			pn_arena_printf(a, "complaint %s: %s", case_id, ans.detail));
		return;
	}
	if (!r->apply) {
		add_row(r, a, o, qp->name, ans.psp_state, "would_ingest_complaint",
			pn_arena_printf(a, "%s; order %s; dedup key %s", ans.detail,
					ans.ev.order_id ? ans.ev.order_id : "-", ans.ev.dedup_key));
		return;
	}
	if (!pn_store_ingest(r->store, site->name, qp->name, &ans.ev, ans.raw_headers_json,
			     ans.raw, ans.raw_len, &res, &err)) {
		r->errors++;
		add_row(r, a, o, qp->name, ans.psp_state, "error",
			pn_arena_printf(a, "%s; not stored: %s", ans.detail, err.msg));
		return;
	}
	/* recorded in its case: an open complaint stays on `paynotify report` */
	if (!res.duplicate && strcmp(res.outcome, "complaint") != 0)
		r->attention++;
	add_row(r, a, o, qp->name, ans.psp_state, res.duplicate ? "duplicate" : res.outcome,
		pn_arena_printf(a, "%s; notification %lld%s%s", ans.detail,
				(long long)res.notification_id, res.detail ? "; " : "",
				res.detail ? res.detail : ""));
}

static const char cases_sql[] =
	"SELECT site, provider, case_id, order_id, amount_minor, currency FROM paynotify.cases"
	" WHERE case_kind = 'complaint' AND closed_at IS NULL"
	"   AND ($1::text IS NULL OR site = $1) AND ($2::text IS NULL OR provider = $2)"
	" ORDER BY opened_at, site, case_id";

static void
query_cases(struct pn_query_run *r, struct pn_arena *a, const struct pn_table *cases)
{
	size_t	i;

	for (i = 0; i < cases->nrows; i++) {
		const struct pn_site *site = pn_cfg_site(r->cfg, pn_table_get(cases, i, "site"));
		const struct pn_query_provider *qp =
		    pn_query_provider_find(pn_table_get(cases, i, "provider"));
		const char *case_id = pn_table_get(cases, i, "case_id"), *why = NULL;
		struct pn_query_order o;
		int64_t	amount = 0;

		memset(&o, 0, sizeof(o));
		o.site = pn_table_get(cases, i, "site");
		o.order_id = pn_table_get(cases, i, "order_id");
		o.currency = pn_table_get(cases, i, "currency");
		if (!pn_parse_i64(pn_table_get(cases, i, "amount_minor"), &amount))
			o.currency = NULL;
		o.amount_minor = amount;
		r->orders++;
		if (site == NULL || qp == NULL || qp->ask_case == NULL) {
			r->attention++;
			add_row(r, a, &o, pn_table_get(cases, i, "provider"), NULL, "attention",
				pn_arena_printf(a, "complaint %s: %s", case_id, site == NULL
						? "the site is not in the configuration"
						: "this provider has no complaint query"));
		} else if (!qp->configured(site, &why)) {
			r->attention++;
			add_row(r, a, &o, qp->name, NULL, "attention",
				pn_arena_printf(a, "complaint %s: cannot query: %s", case_id, why));
		} else
			query_case(r, a, site, qp, &o, case_id);
		pn_arena_reset(a);
	}
}

/*
 * The orders to ask about: pending ones older than the threshold, and
 * (schema 12) those with a payment stored pending_confirmation longer than
 * the threshold, whatever their status: a legacy 2C2P form that came after
 * the order was paid (by this command) is confirmed on the next run.  Only
 * payments (event_kind paid, what confirm_pending() settles): a WeChat Pay
 * v2 refund result that waits (schema 13) is confirmed by its own
 * refundquery below, and its order, paid, has nothing to ask its order
 * query about.
 */
static const char orders_sql[] =
	"SELECT site, order_id, status, amount_minor, currency, psp, psp_txn_id FROM ("
	" SELECT o.site, o.order_id, o.status, o.amount_minor, o.currency, o.psp, o.psp_txn_id,"
	"        o.created_at"
	"   FROM paynotify.orders o"
	"  WHERE ($3::bigint IS NULL OR (o.status = 'pending'"
	"         AND o.created_at < now() - make_interval(secs => $3::bigint)))"
	" UNION"
	" SELECT o.site, o.order_id, o.status, o.amount_minor, o.currency, o.psp, o.psp_txn_id,"
	"        o.created_at"
	"   FROM paynotify.orders o"
	"   JOIN (SELECT DISTINCT n.site, n.order_id FROM paynotify.notifications n"
	"          WHERE n.outcome = 'pending_confirmation' AND n.event_kind = 'paid'"
	"            AND n.received_at < now() - make_interval(secs => $3::bigint)) p"
	"     ON p.site = o.site AND p.order_id = o.order_id"
	"  WHERE $3::bigint IS NOT NULL"
	" ) q"
	" WHERE ($1::text IS NULL OR site = $1)"
	"   AND ($2::text IS NULL OR order_id = $2)"
	"   AND ($4::text IS NULL OR psp IS NULL OR psp = $4)"
	"   AND ($5::bigint IS NULL OR created_at >= now() - make_interval(secs => $5::bigint))"
	" ORDER BY created_at, site, order_id";

/*
 * Ask about row i of orders_sql's orders: its provider (orders.psp), else
 * only, else every provider the site can be queried with; with r->apply a
 * final answer is ingested.  One row (or more) in r->out.
 */
void
pn_query_order_row(struct pn_query_run *r, struct pn_arena *a, const struct pn_table *orders,
		   size_t i, const struct pn_query_provider *only)
{
	const struct pn_site *site = pn_cfg_site(r->cfg, pn_table_get(orders, i, "site"));
	const char *psp = pn_table_get(orders, i, "psp");
	struct pn_query_order o;
	int64_t	amount = 0;
	size_t	asked = 0, j;
	const char *why = NULL;

	o.site = pn_table_get(orders, i, "site");
	o.order_id = pn_table_get(orders, i, "order_id");
	o.status = pn_table_get(orders, i, "status");
	o.currency = pn_table_get(orders, i, "currency");
	o.psp_txn_id = pn_table_get(orders, i, "psp_txn_id");
	if (!pn_parse_i64(pn_table_get(orders, i, "amount_minor"), &amount))
		amount = 0;
	o.amount_minor = amount;
	r->orders++;
	if (site == NULL) {
		r->attention++;
		add_row(r, a, &o, psp, NULL, "attention",
			"the order's site is not in the configuration");
		return;
	}
	for (j = 0; pn_query_providers[j]; j++) {
		const struct pn_query_provider *qp = pn_query_providers[j];

		if ((only && qp != only) || (psp && strcmp(psp, qp->name) != 0))
			continue;
		if (!qp->configured(site, &why)) {
			/* said only when this provider was the one to ask */
			if (psp != NULL || only != NULL) {
				r->attention++;
				add_row(r, a, &o, qp->name, NULL, "attention",
					pn_arena_printf(a, "cannot query: %s", why));
				asked++;
			}
			continue;
		}
		query_one(r, a, site, qp, &o);
		asked++;
	}
	if (asked == 0) {
		r->attention++;
		add_row(r, a, &o, psp, NULL, "attention",
			"no provider of the site can be queried (see docs/QUERY.md)");
	}
}

/* The stored refunds that wait for a signed confirmation, in the same
 * window as the orders (received that long ago instead of created).  A
 * payment that waits (a legacy 2C2P form) is confirmed by its order's
 * answer instead: confirm_pending(). */
static const char refunds_pending_sql[] =
	"SELECT id, site, provider, order_id, amount_minor, refund_minor,"
	"       encode(raw_body, 'hex') AS raw_body"
	"  FROM paynotify.notifications"
	" WHERE outcome = 'pending_confirmation' AND event_kind = 'refund'"
	"   AND ($1::text IS NULL OR site = $1)"
	"   AND ($2::text IS NULL OR order_id = $2)"
	"   AND ($3::bigint IS NULL OR received_at < now() - make_interval(secs => $3::bigint))"
	"   AND ($4::text IS NULL OR provider = $4)"
	"   AND ($5::bigint IS NULL OR received_at >= now() - make_interval(secs => $5::bigint))"
	" ORDER BY received_at, id";

static const char confirm_refund_sql[] =
	"SELECT outcome, order_id, order_status, detail, wakeup FROM paynotify.confirm_refund("
	"$1::bigint, $2, $3, $4, $5::bigint, $6::bigint, $7, $8)";

static const char *
i64_or_null(struct pn_arena *a, int64_t v)
{
	return v < 0 ? NULL : pn_arena_printf(a, "%lld", (long long)v);
}

/*
 * One stored event that waits for a signed confirmation: ask the provider
 * (one request), and with --apply settle it as the answer says
 * (paynotify.confirm_refund: applied under the weak-identity rules when
 * confirmed, flagged with the answer's words when contradicted, left
 * pending otherwise).
 */
static void
confirm_one(struct pn_query_run *r, struct pn_arena *a, const struct pn_site *site,
	    const struct pn_query_provider *qp, const struct pn_table *rows, size_t i)
{
	const char *id = pn_table_get(rows, i, "id"), *hex = pn_table_get(rows, i, "raw_body");
	struct pn_query_confirmation c;
	struct pn_query_order o;
	struct pn_query_ctx ctx;
	struct pn_table t;
	struct pn_err err;
	unsigned char *raw = NULL;
	size_t	raw_len = 0;
	int64_t	refund = -1;
	const char *verdict, *params[8], *outcome, *wakeup;

	memset(&o, 0, sizeof(o));
	o.site = site->name;
	o.order_id = pn_table_get(rows, i, "order_id");
	o.status = NULL;
	if (!pn_parse_i64(pn_table_get(rows, i, "refund_minor"), &refund))
		refund = 0;
	o.amount_minor = refund;	/* the refund's amount, for the amount column */
	o.currency = "CNY";
	r->orders++;
	if (hex != NULL)
		raw = pn_arena_alloc(a, strlen(hex) / 2 + 1);
	if (hex == NULL || !pn_hex_decode(hex, strlen(hex), raw, strlen(hex) / 2 + 1, &raw_len)) {
		r->errors++;
		add_row(r, a, &o, qp->name, NULL, "error",
			pn_arena_printf(a, "notification %s: stored raw body unreadable", id));
		return;
	}
	if (!ask_ctx(r, a, site, qp, &o, &ctx))
		return;
	qp->confirm(&ctx, raw, raw_len, &c);
	switch (c.state) {
	case PN_C_CONFIRMED: verdict = "confirmed"; break;
	case PN_C_CONTRADICTED: verdict = c.outcome; break;
	case PN_C_WAITING: verdict = "pending"; break;
	case PN_C_REFUSED:
		r->refused++;
		add_row(r, a, &o, qp->name, c.psp_state, "refused",
			pn_arena_printf(a, "notification %s: %s", id, c.detail));
		return;
	case PN_C_ERROR:
	default:
		r->errors++;
		add_row(r, a, &o, qp->name, c.psp_state, "error",
			pn_arena_printf(a, "notification %s: %s", id, c.detail));
		return;
	}
	if (!r->apply) {
		if (c.state == PN_C_WAITING)
			r->waiting++;
		else if (c.state == PN_C_CONFIRMED)
			r->final++;
		else
			r->attention++;
		add_row(r, a, &o, qp->name, c.psp_state, c.state == PN_C_WAITING ? "waiting"
			: c.state == PN_C_CONFIRMED ? "would_confirm"
			: pn_arena_printf(a, "would_flag_%s", c.outcome),
			pn_arena_printf(a, "notification %s: %s", id, c.detail));
		return;
	}
	params[0] = id;
	params[1] = c.ev.dedup_key;
	params[2] = c.ev.order_id;
	params[3] = c.ev.psp_txn_id;
	params[4] = i64_or_null(a, c.ev.amount_minor);
	params[5] = i64_or_null(a, c.ev.refund_minor);
	params[6] = verdict;
	params[7] = c.detail;
	if (!pn_db_query(r->conn, PN_SQL_CONST(confirm_refund_sql), 8, params, &t, &err)) {
		r->errors++;
		add_row(r, a, &o, qp->name, c.psp_state, "error",
			pn_arena_printf(a, "notification %s: %s; not stored: %s", id, c.detail,
					err.msg));
		return;
	}
	outcome = t.nrows && t.cells[0] ? pn_arena_strdup(a, t.cells[0]) : "";
	wakeup = t.nrows && t.cells[4] ? pn_arena_strdup(a, t.cells[4]) : NULL;
	add_row(r, a, &o, qp->name, c.psp_state,
		strcmp(outcome, "pending_confirmation") == 0 ? "waiting" : outcome,
		pn_arena_printf(a, "notification %s: %s; order %s", id,
				t.nrows && t.cells[3] ? t.cells[3] : c.detail,
				t.nrows && t.cells[2] ? t.cells[2] : "unchanged"));
	pn_table_free(&t);
	if (strcmp(outcome, "pending_confirmation") == 0)
		r->waiting++;
	else if (outcome_settled(outcome)) {
		r->final++;
		if (strcmp(outcome, "applied") == 0)
			r->applied++;
	} else
		r->attention++;
	/* The LISTEN wake-up, after the commit, as the receivers send it. */
	if (wakeup != NULL && !pn_db_query(r->conn, PN_SQL("SELECT pg_notify('paynotify', $1)"), 1,
					    &wakeup, NULL, &err))
		fprintf(stderr, "paynotify: notification %s: wake-up not sent: %s\n", id, err.msg);
}

/* Row i of refunds_pending_sql's rows: confirmed with its provider, or
 * said why it cannot be. */
static void
confirm_row(struct pn_query_run *r, struct pn_arena *a, const struct pn_table *rows, size_t i)
{
	const struct pn_site *site = pn_cfg_site(r->cfg, pn_table_get(rows, i, "site"));
	const struct pn_query_provider *qp =
	    pn_query_provider_find(pn_table_get(rows, i, "provider"));
	struct pn_query_order o;

	if (site != NULL && qp != NULL && qp->confirm != NULL) {
		confirm_one(r, a, site, qp, rows, i);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.site = pn_table_get(rows, i, "site");
	o.order_id = pn_table_get(rows, i, "order_id");
	o.currency = "CNY";
	r->orders++;
	r->attention++;
	add_row(r, a, &o, pn_table_get(rows, i, "provider"), NULL, "attention",
		pn_arena_printf(a, "notification %s waits for a confirmation that cannot be asked "
				"for (site not configured)", pn_table_get(rows, i, "id")));
}

/*
 * --due: the follow-up schedule (sql/017; docs/QUERY.md "Follow-up
 * schedule").  Each item is an order (ref 0: asked exactly as --order asks
 * it, pn_query_order_row()) or a refund waiting for its signed confirmation
 * (ref: its notification id, confirm_row()).  With --apply a run sweeps
 * (follow_up_sweep()), then claims one due item at a time
 * (follow_up_claim(): FOR UPDATE SKIP LOCKED and a lease), asks, and
 * records the answer (follow_up_answered(): done on a final answer, else
 * the next ask by the backoff, up to the provider's horizon).  A dry run
 * lists and asks the due items and changes nothing, the schedule included.
 */

/* The horizon of an item of provider (NULL: the order names none, or
 * unknown: the longest), in seconds. */
static int64_t
horizon_s(const struct pn_config *cfg, const char *provider)
{
	const struct {
		const char *name;
		int64_t	hours;
	} h[] = {
		{"alipay", cfg->query_follow_up_alipay_h},
		{"wechatpay", cfg->query_follow_up_wechatpay_h},
		{"stripe", cfg->query_follow_up_stripe_h},
		{"2c2p", cfg->query_follow_up_2c2p_h},
	};
	int64_t	longest = 0;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(h); i++) {
		if (provider != NULL && strcmp(provider, h[i].name) == 0)
			return h[i].hours * 3600;
		if (h[i].hours > longest)
			longest = h[i].hours;
	}
	return longest * 3600;
}

static const char due_refund_sql[] =
	"SELECT id, site, provider, order_id, amount_minor, refund_minor,"
	"       encode(raw_body, 'hex') AS raw_body"
	"  FROM paynotify.notifications"
	" WHERE id = $1::bigint AND outcome = 'pending_confirmation' AND event_kind = 'refund'";

static const char due_list_sql[] =
	"SELECT site, order_id, ref, attempts, NULL::text AS claim_token"
	"  FROM paynotify.follow_ups"
	" WHERE state = 'scheduled' AND next_ask_at <= now()"
	"   AND (claimed_until IS NULL OR claimed_until <= now())"
	"   AND ($1::text IS NULL OR site = $1)"
	" ORDER BY next_ask_at LIMIT $2::int";

static const char due_claim_sql[] =
	"SELECT site, order_id, ref, attempts, claim_token FROM paynotify.follow_up_claim("
	"$1, $2::int, $3)";

static const char due_sweep_sql[] =
	"SELECT added, dropped FROM paynotify.follow_up_sweep($1, $2::bigint)";

static const char due_answered_sql[] =
	"SELECT state FROM paynotify.follow_up_answered($1, $2, $3::bigint, $4::uuid, $5, $6,"
	" $7::boolean, $8::bigint)";

/*
 * Ask about row k of due (an item of the schedule) and, with r->apply,
 * record the answer under the item's claim token.  Final: a final answer
 * was stored (whatever its outcome), a refund's confirmation was settled,
 * or there is nothing left to ask about.  An item whose order could not be
 * read is not recorded: its lease runs out and it comes back.
 */
static void
follow_one(struct pn_query_run *r, struct pn_arena *a, const struct pn_table *due, size_t k)
{
	const char *site = pn_table_get(due, k, "site"), *oid = pn_table_get(due, k, "order_id");
	const char *ref = pn_table_get(due, k, "ref"), *provider = NULL, *params[8], *st;
	int	final0 = r->final, attention0 = r->attention, errors0 = r->errors;
	bool	confirmation = ref != NULL && strcmp(ref, "0") != 0, final;
	struct pn_table t;
	struct pn_err err;
	char	horizon[24];

	r->last_answer[0] = r->last_result[0] = '\0';
	r->last_kept = false;
	if (confirmation) {
		params[0] = ref;
		if (!pn_db_query(r->conn, PN_SQL_CONST(due_refund_sql), 1, params, &t, &err))
			goto unread;
	} else {
		params[0] = site;
		params[1] = oid;
		params[2] = params[3] = params[4] = NULL;
		if (!pn_db_query(r->conn, PN_SQL_CONST(orders_sql), 5, params, &t, &err))
			goto unread;
	}
	if (t.nrows == 1) {
		provider = pn_table_get(&t, 0, confirmation ? "provider" : "psp");
		provider = provider ? pn_arena_strdup(a, provider) : NULL;
		if (confirmation)
			confirm_row(r, a, &t, 0);
		else
			pn_query_order_row(r, a, &t, 0, NULL);
		final = r->errors == errors0 && (r->final > final0
						 || (confirmation && r->attention > attention0));
	} else {
		/* settled or deleted since it was scheduled: nothing to ask */
		snprintf(r->last_result, sizeof(r->last_result), "%s", "gone");
		final = true;
	}
	pn_table_free(&t);
	if (!r->apply)
		return;
	snprintf(horizon, sizeof(horizon), "%lld", (long long)horizon_s(r->cfg, provider));
	params[0] = site;
	params[1] = oid;
	params[2] = ref;
	params[3] = pn_table_get(due, k, "claim_token");
	params[4] = r->last_answer;
	params[5] = r->last_result;
	params[6] = final ? "true" : "false";
	params[7] = horizon;
	if (!pn_db_query(r->conn, PN_SQL_CONST(due_answered_sql), 8, params, &t, &err)) {
		r->errors++;
		fprintf(stderr, "paynotify: query: order %s of site %s: answer not recorded in the "
			"schedule (asked again when its lease runs out): %s\n", oid, site, err.msg);
		return;
	}
	st = t.nrows == 1 ? pn_table_get(&t, 0, "state") : NULL;
	if (st == NULL)
		r->fu_lost++;	/* the lease ran out and another run holds it, or swept */
	else if (strcmp(st, "done") == 0)
		r->fu_done++;
	else if (strcmp(st, "expired") == 0)
		r->fu_expired++;
	else
		r->fu_again++;
	pn_table_free(&t);
	return;
unread:
	r->orders++;
	r->errors++;
	{
		struct pn_query_order o;

		memset(&o, 0, sizeof(o));
		o.site = site;
		o.order_id = oid;
		add_row(r, a, &o, NULL, NULL, "error", err.msg);
	}
}

/* The lease of one claimed item: every provider an order may be asked at,
 * each request bounded by [query], and a minute for the database. */
static int64_t
lease_s(const struct pn_config *cfg)
{
	return 60 + 4 * (cfg->query_connect_timeout_ms + cfg->query_timeout_ms + 999) / 1000;
}

/* --due: returns false (err) when the schedule could not be read. */
static bool
query_due(struct pn_query_run *r, struct pn_arena *a, const char *site, int64_t limit, struct pn_err *err)
{
	char	lim[24], lease[24], window[24], host[128], claimer[200];
	const char *params[3];
	struct pn_table t;
	int64_t	n;
	size_t	i;

	snprintf(lim, sizeof(lim), "%lld", (long long)limit);
	if (!r->apply) {
		params[0] = site;
		params[1] = lim;
		if (!pn_db_query(r->conn, PN_SQL_CONST(due_list_sql), 2, params, &t, err))
			return false;
		for (i = 0; i < t.nrows; i++) {
			follow_one(r, a, &t, i);
			pn_arena_reset(a);
		}
		pn_table_free(&t);
		return true;
	}
	snprintf(window, sizeof(window), "%lld", (long long)horizon_s(r->cfg, NULL));
	params[0] = site;
	params[1] = window;
	if (!pn_db_query(r->conn, PN_SQL_CONST(due_sweep_sql), 2, params, &t, err))
		return false;
	pn_table_free(&t);
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "%s", "?");
	host[sizeof(host) - 1] = '\0';
	snprintf(claimer, sizeof(claimer), "%s:%ld", host, (long)getpid());
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_s(r->cfg));
	for (n = 0; n < limit; n++) {
		params[0] = site;
		params[1] = lease;
		params[2] = claimer;
		if (!pn_db_query(r->conn, PN_SQL_CONST(due_claim_sql), 3, params, &t, err))
			return false;
		if (t.nrows == 0) {
			pn_table_free(&t);
			break;
		}
		follow_one(r, a, &t, 0);
		pn_table_free(&t);
		pn_arena_reset(a);
	}
	return true;
}

static const char record_sql[] =
	"INSERT INTO paynotify.query_runs (started_at, dry_run, site, provider, orders, asked,"
	"       final, applied, waiting, not_found, refused, errors, attention, exit_code)"
	" SELECT to_timestamp($1::bigint), $2::boolean, $3, $4, $5::int, $6::int, $7::int,"
	"        $8::int, $9::int, $10::int, $11::int, $12::int, $13::int, $14::int"
	"  WHERE to_regclass('paynotify.query_runs') IS NOT NULL";

static void
record_run(struct pn_query_run *r, time_t started, const char *site, const char *provider, int rc)
{
	char	num[14][24];
	const char *p[14];
	int	v[] = {r->orders, r->asked, r->final, r->applied, r->waiting, r->not_found,
		       r->refused, r->errors, r->attention, rc};
	struct pn_err err;
	size_t	i;

	snprintf(num[0], sizeof(num[0]), "%lld", (long long)started);
	p[0] = num[0];
	p[1] = r->apply ? "false" : "true";
	p[2] = site;
	p[3] = provider;
	for (i = 0; i < PN_ARRAY_LEN(v); i++) {
		snprintf(num[4 + i], sizeof(num[4 + i]), "%d", v[i]);
		p[4 + i] = num[4 + i];
	}
	if (!pn_db_query(r->conn, PN_SQL_CONST(record_sql), 14, p, NULL, &err))
		fprintf(stderr, "paynotify: warning: could not record the query run: %s\n", err.msg);
}

static int
query_exec(int argc, char **argv, const char *config_path)
{
	const char *site_name = NULL, *provider = NULL, *order = NULL, *older = NULL;
	const char *younger = NULL, *combine = NULL, *limit_arg = NULL;
	bool	dry_run = false, apply = false, complaints = false, due = false;
	enum pn_format fmt = pn_format_default();
	const struct pn_query_provider *only = NULL;
	struct pn_query_run r;
	struct pn_table orders;
	struct pn_arena *a = NULL;
	struct pn_err err;
	char	secs[24], ysecs[24];
	const char *params[5];
	int64_t	older_s = 0, younger_s = 0, limit = 500;
	time_t	started = time(NULL);
	int	rc;
	size_t	i;
	const struct pn_arg options[] = {
		{"site", required_argument, 0, PN_ARG_STR, .str = &site_name},
		{"provider", required_argument, 0, PN_ARG_STR, .str = &provider},
		{"order", required_argument, 0, PN_ARG_STR, .str = &order},
		{"pending-older-than", required_argument, 0, PN_ARG_STR, .str = &older},
		{"pending-younger-than", required_argument, 0, PN_ARG_STR, .str = &younger},
		{"complaints", no_argument, 0, PN_ARG_FLAG, .flag = &complaints},
		{"dry-run", no_argument, 0, PN_ARG_FLAG, .flag = &dry_run},
		{"apply", no_argument, 0, PN_ARG_FLAG, .flag = &apply},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
		{"combine", required_argument, 0, PN_ARG_STR, .str = &combine},
		{"due", no_argument, 0, PN_ARG_FLAG, .flag = &due},
		{"limit", required_argument, 0, PN_ARG_STR, .str = &limit_arg},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "query", .help = help, .opts = options,
				     .rest = PN_REST_NAMED};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_FAILED;
	if ((order != NULL) + (older != NULL) + complaints + (combine != NULL) + due != 1) {
		fprintf(stderr, "paynotify: query: give exactly one of --order, "
			"--pending-older-than, --complaints, --combine and --due\n");
		return PN_EXIT_USAGE;
	}
	if (limit_arg != NULL && (!due || !pn_parse_i64(limit_arg, &limit) || limit < 1
				  || limit > 100000)) {
		fprintf(stderr, "paynotify: query: invalid --limit \"%s\": expected a number of "
			"items from 1 to 100000, with --due\n", limit_arg);
		return PN_EXIT_USAGE;
	}
	if (due && provider != NULL) {
		fprintf(stderr, "paynotify: query: --due asks each item's own provider (the "
			"order's, else every provider its site can be queried with): no "
			"--provider\n");
		return PN_EXIT_USAGE;
	}
	if (combine != NULL && (site_name == NULL || (provider != NULL
						      && strcmp(provider, "wechatpay") != 0))) {
		fprintf(stderr, "paynotify: query: --combine needs --site (and is WeChat Pay's: "
			"--provider wechatpay or none)\n");
		return PN_EXIT_USAGE;
	}
	if (combine != NULL && (*combine == '\0' || strlen(combine) > 32)) {
		fprintf(stderr, "paynotify: query: --combine needs a combine_out_trade_no of 1 to 32 "
			"bytes\n");
		return PN_EXIT_USAGE;
	}
	if (dry_run && apply) {
		fprintf(stderr, "paynotify: query: --dry-run and --apply exclude each other\n");
		return PN_EXIT_USAGE;
	}
	if (order != NULL && (*order == '\0' || strlen(order) > 255)) {
		fprintf(stderr, "paynotify: query: --order needs an order id of 1 to 255 bytes\n");
		return PN_EXIT_USAGE;
	}
	if (older != NULL && !parse_duration(older, &older_s)) {
		fprintf(stderr, "paynotify: query: invalid --pending-older-than \"%s\": expected a "
			"number with s, m, h or d (90s, 5m, 2h, 1d)\n", older);
		return PN_EXIT_USAGE;
	}
	if (younger != NULL && (older == NULL || !parse_duration(younger, &younger_s)
				|| younger_s <= older_s)) {
		fprintf(stderr, "paynotify: query: --pending-younger-than \"%s\" needs "
			"--pending-older-than and a longer duration (90s, 5m, 2h, 1d)\n", younger);
		return PN_EXIT_USAGE;
	}
	if (provider != NULL && (only = pn_query_provider_find(provider)) == NULL) {
		fprintf(stderr, "paynotify: query: unknown provider \"%s\" (alipay, wechatpay, "
			"stripe or 2c2p)\n", provider);
		return PN_EXIT_USAGE;
	}

	memset(&r, 0, sizeof(r));
	r.apply = apply;
	if ((r.cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (site_name != NULL && !pn_opt_site(r.cfg, "--site", site_name)) {
		pn_cfg_free(r.cfg);
		return PN_EXIT_USAGE;
	}
	if (!pn_qhttp_init(&r.http, r.cfg, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		pn_cfg_free(r.cfg);
		return PN_EXIT_FAILED;
	}
	if ((r.conn = pn_db_connect(r.cfg, &err)) == NULL) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		goto done;
	}
	if (complaints) {
		params[0] = site_name;
		params[1] = provider;
		if (!pn_db_query(r.conn, PN_SQL_CONST(cases_sql), 2, params, &orders, &err)) {
			fprintf(stderr, "paynotify: %s\n", err.msg);
			goto done;
		}
		r.store = pn_store_new(pn_cfg_admin_conninfo(r.cfg), r.cfg->statement_timeout_ms,
				       r.cfg->connect_timeout_s, "paynotify-query");
		pn_table_init(&r.out, PN_QUERY_NCOLUMNS, pn_query_columns);
		a = pn_arena_new();
		query_cases(&r, a, &orders);
		goto summary;
	}
	if (due) {
		r.store = pn_store_new(r.cfg->conninfo, r.cfg->statement_timeout_ms,
				       r.cfg->connect_timeout_s, "paynotify-query");
		pn_table_init(&r.out, PN_QUERY_NCOLUMNS, pn_query_columns);
		a = pn_arena_new();
		if (!query_due(&r, a, site_name, limit, &err)) {
			/* what was asked is printed; the rest waits for the next run */
			fprintf(stderr, "paynotify: %s\n", err.msg);
			r.errors++;
		}
		goto print;
	}
	snprintf(secs, sizeof(secs), "%lld", (long long)older_s);
	params[0] = site_name;
	params[1] = order;
	params[2] = older ? secs : NULL;
	params[3] = provider;
	snprintf(ysecs, sizeof(ysecs), "%lld", (long long)younger_s);
	params[4] = younger ? ysecs : NULL;
	memset(&orders, 0, sizeof(orders));
	if (combine == NULL
	    && !pn_db_query(r.conn, PN_SQL_CONST(orders_sql), 5, params, &orders, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		goto done;
	}
	r.store = pn_store_new(pn_cfg_admin_conninfo(r.cfg), r.cfg->statement_timeout_ms,
			       r.cfg->connect_timeout_s, "paynotify-query");
	pn_table_init(&r.out, PN_QUERY_NCOLUMNS, pn_query_columns);
	a = pn_arena_new();
	if (combine != NULL)
		query_combine(&r, a, pn_cfg_site(r.cfg, site_name), combine);
	for (i = 0; i < orders.nrows; i++) {
		pn_query_order_row(&r, a, &orders, i, only);
		pn_arena_reset(a);
	}
	pn_table_free(&orders);
	/*
	 * Then the stored events that wait for the provider's signed
	 * confirmation, of --order or of the --pending-older-than window.  Not
	 * after --complaints or --combine: neither names an order or a window
	 * (params would select every waiting refund of the site, whatever its
	 * age), and each asks one thing only.
	 */
	if (complaints || combine != NULL)
		goto print;
	if (!pn_db_query(r.conn, PN_SQL_CONST(refunds_pending_sql), 5, params, &orders, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		pn_table_free(&r.out);
		rc = PN_EXIT_FAILED;
		goto done;
	}
	for (i = 0; i < orders.nrows; i++) {
		confirm_row(&r, a, &orders, i);
		pn_arena_reset(a);
	}
summary:
	pn_table_free(&orders);
print:
	pn_table_print(&r.out, fmt, stdout);
	if (r.errors > 0)
		rc = PN_EXIT_FAILED;
	else if (r.refused > 0 || r.attention > 0)
		rc = PN_EXIT_ATTENTION;
	else
		rc = PN_EXIT_OK;
	fprintf(stderr, "paynotify: query: %d order%s, %d asked: %d final (%d applied), "
		"%d waiting, %d not found, %d refused, %d need a human, %d errors%s\n",
		r.orders, r.orders == 1 ? "" : "s", r.asked, r.final, r.applied, r.waiting,
		r.not_found, r.refused, r.attention, r.errors, apply ? "" : " (dry run)");
	if (due && apply)
		fprintf(stderr, "paynotify: query: schedule: %d done, %d asked again later, "
			"%d expired%s\n", r.fu_done, r.fu_again, r.fu_expired,
			r.fu_lost ? pn_arena_printf(a, ", %d held by another run", r.fu_lost) : "");
	record_run(&r, started, site_name, provider, rc);
	pn_table_free(&r.out);
done:
	pn_arena_free(a);
	pn_query_run_release_creds(&r);
	pn_store_free(r.store);
	PQfinish(r.conn);
	pn_qhttp_destroy(&r.http);
	pn_cfg_free(r.cfg);
	return rc;
}

const struct pn_cmd pn_cmd_query = {
	"query",
	"(--order ID | --pending-older-than D | --complaints | --combine NO | --due) [--apply]",
	"ask the provider about orders whose notification never came", query_exec, help,
};

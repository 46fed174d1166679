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
 *
 * This file is the command: its options, their checks, the run's steps and
 * the loading of what the database has; the parts are listed in
 * admin/reconcile.h.
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "provider.h"
#include "reconcile.h"

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

/* The statement's order ids, transactions and refund identities, as the
 * JSON arrays of the two queries; the refund identities also into
 * r->stmt_keys and their orders into r->refunded_orders. */
static void
load_keys(struct run *r, const char **oids_json, const char **txns_json, const char **keys_json)
{
	json_t *oids = json_array(), *txns = json_array(), *keys = json_array();
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

			pn_rec_refund_keys(r, x, &k1, &k2);
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
	*oids_json = pn_rec_dumps(r, oids);
	*txns_json = pn_rec_dumps(r, txns);
	/* the refund keys' parameter of the second query, made now so that
	 * every way out of load() has nothing left to free */
	*keys_json = pn_rec_dumps(r, keys);
}

/* The orders the statement names or the provider's payments of the day
 * (orders_sql: p[0..5]) into r->orders, r->by_order and r->by_txn. */
static bool
load_orders(struct run *r, const char *const p[6], struct pn_err *err)
{
	struct pn_table t;
	size_t i;

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
	return true;
}

/* The notifications of the statement's refunds and the refunds received
 * that day (notifs_sql: p[0..4]) into r->notifs and r->by_key. */
static bool
load_notifs(struct run *r, const char *const p[5], struct pn_err *err)
{
	struct pn_table t;
	size_t i;

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

/* What we have: the orders, then the notifications, for the statement's rows. */
static bool
load(struct run *r, struct pn_err *err)
{
	const char *keys_json;
	char from[24], to[24];
	const char *p[6];

	snprintf(from, sizeof(from), "%lld", (long long)r->from);
	snprintf(to, sizeof(to), "%lld", (long long)r->to);
	p[0] = r->site->name;
	load_keys(r, &p[1], &p[2], &keys_json);
	p[3] = r->ad->provider;
	p[4] = from;
	p[5] = to;
	if (!load_orders(r, p, err))
		return false;
	p[1] = r->ad->provider;
	p[2] = keys_json;
	p[3] = from;
	p[4] = to;
	return load_notifs(r, p, err);
}

/* ---- the command ---------------------------------------------------------- */

/* The options as given; --statement, --apply and --by-query are set in the
 * struct run itself (path, apply, by_query). */
struct rec_opts {
	const char *provider, *site_name, *date;
	enum pn_format fmt;
	bool fetch, wide;
	int64_t max_inq, rate;
	bool max_given, rate_given;
};

#define GO_ON (-1) /* a step's answer when the run goes on to the next step */

/* The statement adapter of --provider (or of --by-query); NULL: usage, said. */
static const struct pn_stmt_adapter *
choose_adapter(const struct rec_opts *o, bool by_query)
{
	const struct pn_stmt_adapter *ad;

	if (by_query)
		return &pn_rec_byq_2c2p;
	if ((ad = pn_stmt_adapter_find(o->provider)) != NULL)
		return ad;
	fprintf(stderr,
	        "paynotify: reconcile: no statement format for provider \"%s\"; "
	        "expected alipay, wechatpay or stripe%s\n",
	        o->provider,
	        strcmp(o->provider, "2c2p") == 0
	            ? " (2C2P's reconciliation report is not read: its field table is "
	              "unpublished, and 2C2P's own sample rows have 67 and 79 fields, not "
	              "the 85 its page states, so a guessed layout is not trusted with "
	              "money; docs/RECONCILE.md \"2C2P\"; use --by-query, which asks "
	              "2C2P's paymentInquiry about each order of the day)"
	            : "");
	return NULL;
}

/* The options' combinations checked, in this order; false: usage, said. */
static bool
usage_ok(struct run *r, const struct rec_opts *o)
{
	int64_t day_epoch;

	if ((o->max_given || o->rate_given) && !r->by_query) {
		fprintf(stderr, "paynotify: reconcile: --max-inquiries and --inquiries-per-second "
		                "bound --by-query\n");
		return false;
	}
	if (r->by_query && (o->provider == NULL || strcmp(o->provider, "2c2p") != 0)) {
		fprintf(stderr, "paynotify: reconcile: --by-query asks 2C2P's paymentInquiry "
		                "(--provider 2c2p); Alipay, WeChat Pay and Stripe have statements\n");
		return false;
	}
	if (r->by_query && (r->path != NULL || o->fetch)) {
		fprintf(stderr, "paynotify: reconcile: --by-query asks 2C2P instead of reading a "
		                "statement: no --statement or --fetch\n");
		return false;
	}
	if (o->provider == NULL || o->site_name == NULL ||
	    (!r->by_query && (r->path == NULL || *r->path == '\0'))) {
		fprintf(stderr, "paynotify: reconcile: --provider, --site and --statement (or, "
		                "for 2C2P, --by-query) are required\n");
		return false;
	}
	if ((r->ad = choose_adapter(o, r->by_query)) == NULL)
		return false;
	if (o->date != NULL && !pn_stmt_day(o->date, r->ad->utc_offset_s, &day_epoch)) {
		fprintf(stderr,
		        "paynotify: reconcile: invalid --date \"%s\": expected YYYY-MM-DD "
		        "(2024-05-20)\n",
		        o->date);
		return false;
	}
	if (o->fetch && strcmp(o->provider, "wechatpay") != 0 &&
	    strcmp(o->provider, "alipay") != 0) {
		fprintf(stderr,
		        "paynotify: reconcile: --fetch downloads Alipay and WeChat Pay bills "
		        "only; give the %s report as --statement FILE\n",
		        o->provider);
		return false;
	}
	return true;
}

/* --fetch and --by-query without --date: yesterday in the provider's zone,
 * the bill of a finished day. */
static void
default_date(const struct run *r, struct rec_opts *o)
{
	static char yday[16];
	time_t t;
	struct tm tm;

	if (!(o->fetch || r->by_query) || o->date != NULL)
		return;
	t = time(NULL) + r->ad->utc_offset_s - 86400;
	gmtime_r(&t, &tm);
	strftime(yday, sizeof(yday), "%Y-%m-%d", &tm);
	o->date = yday;
}

/* The configuration, the site and its provider configuration. */
static int
open_site(struct run *r, const struct rec_opts *o, const char *config_path)
{
	if ((r->cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if ((r->site = pn_cfg_site(r->cfg, o->site_name)) == NULL) {
		fprintf(stderr, "paynotify: reconcile: --site \"%s\": no such site in %s\n",
		        o->site_name, r->cfg->path);
		return PN_EXIT_USAGE;
	}
	if (!pn_provider_configured(pn_provider_find(o->provider), r->site)) {
		fprintf(stderr, "paynotify: reconcile: site %s has no %s configuration in %s\n",
		        o->site_name, o->provider, r->cfg->path);
		return PN_EXIT_CONFIG;
	}
	return GO_ON;
}

static bool
connect_db(struct run *r)
{
	struct pn_err err;

	if ((r->conn = pn_db_connect(r->cfg, &err)) == NULL) {
		fprintf(stderr, "paynotify: reconcile: %s\n", err.msg);
		return false;
	}
	return true;
}

/* --by-query, step 1: the day's candidates asked, before anything is compared. */
static bool
ask_by_query(struct run *r, const struct rec_opts *o)
{
	struct pn_err err;

	r->day = o->date;
	r->path = "paymentInquiry";
	if (!pn_stmt_day(r->day, r->ad->utc_offset_s, &r->from))
		return false;
	r->to = r->from + 86400;
	if (!connect_db(r))
		return false;
	if (!pn_rec_byq_ask(r, o->max_inq, o->rate, &err)) {
		fprintf(stderr, "paynotify: reconcile: 2c2p %s: %s\n", r->site->name, err.msg);
		return false;
	}
	return true;
}

/* Step 1: the whole file (fetched first with --fetch), parsed and checked,
 * before the database is touched. */
static bool
read_statement(struct run *r, const struct rec_opts *o)
{
	struct pn_err err;

	if (o->fetch) {
		r->day = o->date;
		if (!(strcmp(o->provider, "alipay") == 0 ? pn_rec_fetch_alipay(r, r->path, &err)
		                                         : pn_rec_fetch_wechatpay(r, r->path, &err))) {
			fprintf(stderr,
			        "paynotify: reconcile: could not fetch the bill: %s; nothing "
			        "changed\n",
			        err.msg);
			return false;
		}
	}
	if (!pn_read_file(r->path, PN_STMT_MAX_FILE, &r->data, &r->len, &err)) {
		fprintf(stderr, "paynotify: reconcile: could not read the statement: %s\n",
		        err.msg);
		return false;
	}
	if (!r->ad->parse(r->a, (const unsigned char *)r->data, r->len, &r->st, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s: not a valid %s: %s; nothing changed\n",
		        r->path, r->ad->format, err.msg);
		return false;
	}
	if (!r->ad->check_site(r->site, &r->st, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s: %s; nothing changed\n", r->path, err.msg);
		return false;
	}
	return true;
}

/* The statement's day (--date, or the one it covers) and every payment row in it. */
static int
statement_day(struct run *r, const char *date)
{
	size_t i;

	if (date != NULL && r->st.date != NULL && strcmp(date, r->st.date) != 0) {
		fprintf(stderr,
		        "paynotify: reconcile: %s covers %s, not --date %s; nothing "
		        "changed\n",
		        r->path, r->st.date, date);
		return PN_EXIT_FAILED;
	}
	r->day = date ? date : r->st.date;
	if (r->day == NULL) {
		fprintf(stderr, "paynotify: reconcile: %s names no day (no rows): give --date\n",
		        r->path);
		return PN_EXIT_USAGE;
	}
	if (!pn_stmt_day(r->day, r->ad->utc_offset_s, &r->from)) {
		fprintf(stderr, "paynotify: reconcile: %s: unreadable day \"%s\"\n", r->path, r->day);
		return PN_EXIT_FAILED;
	}
	r->to = r->from + 86400;
	for (i = 0; i < r->st.ntxns; i++) {
		const struct pn_stmt_txn *t = &r->st.txns[i];

		if (t->kind == PN_STMT_PAYMENT && (t->epoch < r->from || t->epoch >= r->to)) {
			fprintf(stderr,
			        "paynotify: reconcile: %s: line %d: a payment at %s is outside "
			        "%s (UTC%+d): one statement day per run; nothing changed\n",
			        r->path, t->line, t->time, r->day, r->ad->utc_offset_s / 3600);
			return PN_EXIT_FAILED;
		}
	}
	return GO_ON;
}

/* Steps 2 and 3: what we have, loaded; then compare, apply, report. */
static int
compare_and_report(struct run *r, enum pn_format fmt)
{
	static const char *const cols[] = {"class", "order_id", "psp_txn_id", "line",   "statement",
	                                   "here",  "fee",      "net",        "result", "detail"};
	struct pn_err err;

	pn_strmap_init(&r->stmt_keys, r->a, r->st.ntxns * 2);
	pn_strmap_init(&r->refunded_orders, r->a, r->st.ntxns);
	if (!load(r, &err)) {
		fprintf(stderr, "paynotify: reconcile: %s\n", err.msg);
		return PN_EXIT_FAILED;
	}
	if (r->apply)
		r->store = pn_store_new(pn_cfg_admin_conninfo(r->cfg), r->cfg->statement_timeout_ms,
		                        r->cfg->connect_timeout_s, "paynotify-reconcile");
	pn_table_init(&r->out, PN_ARRAY_LEN(cols), cols);
	pn_rec_compare(r);
	pn_table_print(&r->out, fmt, stdout);
	fflush(stdout);
	/* after a table on stdout; on stderr with csv and json, so stdout stays parseable */
	pn_rec_summary(r, fmt == PN_FMT_TABLE ? stdout : stderr);
	pn_table_free(&r->out);
	return r->errors > 0 ? PN_EXIT_FAILED : r->human > 0 ? PN_EXIT_ATTENTION : PN_EXIT_OK;
}

/* After the options: the site, the rows (asked or read), the comparison. */
static int
reconcile_run(struct run *r, struct rec_opts *o, const char *config_path)
{
	int rc;

	if (!usage_ok(r, o))
		return PN_EXIT_USAGE;
	default_date(r, o);
	if ((rc = open_site(r, o, config_path)) != GO_ON)
		return rc;
	r->a = pn_arena_new();
	if (r->by_query) {
		if (!ask_by_query(r, o))
			return PN_EXIT_FAILED;
	} else {
		if (!read_statement(r, o))
			return PN_EXIT_FAILED;
		if ((rc = statement_day(r, o->date)) != GO_ON)
			return rc;
		if (!connect_db(r))
			return PN_EXIT_FAILED;
	}
	return compare_and_report(r, o->fmt);
}

static int
reconcile_exec(int argc, char **argv, const char *config_path)
{
	struct run r;
	struct rec_opts o = {.fmt = pn_format_default(),
	                     .max_inq = BYQ_MAX_DEFAULT,
	                     .rate = BYQ_RATE_DEFAULT};
	int rc;
	const struct pn_arg options[] = {
	    {"provider", required_argument, 0, PN_ARG_STR, .str = &o.provider},
	    {"site", required_argument, 0, PN_ARG_STR, .str = &o.site_name},
	    {"statement", required_argument, 0, PN_ARG_STR, .str = &r.path},
	    {"date", required_argument, 0, PN_ARG_STR, .str = &o.date},
	    {"apply", no_argument, 0, PN_ARG_FLAG, .flag = &r.apply},
	    {"fetch", no_argument, 0, PN_ARG_FLAG, .flag = &o.fetch},
	    {"by-query", no_argument, 0, PN_ARG_FLAG, .flag = &r.by_query},
	    {"max-inquiries", required_argument, 0, PN_ARG_INT, .num = &o.max_inq, .min = 1,
	     .max = 100000, .seen = &o.max_given},
	    {"inquiries-per-second", required_argument, 0, PN_ARG_INT, .num = &o.rate, .min = 1,
	     .max = 50, .seen = &o.rate_given},
	    {"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &o.fmt},
	    {"wide", no_argument, 0, PN_ARG_FLAG, .flag = &o.wide},
	    PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "reconcile", .help = help, .opts = options,
	                             .rest = PN_REST_NAMED};

	memset(&r, 0, sizeof(r));
	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	if (o.wide)
		pn_table_set_wide(true);
	rc = reconcile_run(&r, &o, config_path);
	free(r.data);
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

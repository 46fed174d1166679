/*
 * cmd_confirm.c: paynotify confirm — the endpoint the shop's backend asks
 * "is this order paid?" when the buyer returns before the notification
 * (docs/SHOP-ORDERS.md "The buyer returns: confirm").
 *
 * A FastCGI program on the receivers' server loop (common/server.c: fd 0
 * from a systemd socket unit, or --listen; --workers; SIGHUP reloads,
 * SIGTERM finishes the request in flight), with its own request handler
 * (struct pn_provider.handle) instead of the notification pipeline.  It is
 * a subcommand of `paynotify` and not a receiver because it asks the
 * providers: it needs the order-query modules (admin/query_*.c, libcurl,
 * the sites' API credentials), which no receiver links or reads
 * (tests/integration/test_receiver_symbols.py).
 *
 * One request (GET or POST, form-encoded): site, order_id, ts (Unix
 * seconds) and token, the hex HMAC-SHA256 of
 *     "paynotify-confirm\n" site "\n" order_id "\n" ts
 * under the site's confirm.secret_file key, compared in constant time, ts
 * within PN_CONFIRM_SKEW_S of now.  Then:
 *   - the order as stored; a final one (not pending) is answered at once,
 *     without asking anyone ("source": "stored");
 *   - a pending one: the right to ask (paynotify.confirm_claim(): one ask
 *     per order per confirm.min_interval_s over every worker and host); if
 *     someone asked within the interval, the stored status with "asked":
 *     false and "rate_limited": true;
 *   - else the provider is asked exactly as `paynotify query --order ID
 *     --apply` asks it (pn_query_order_row(): the same verified query, the
 *     same ingest), every request to it within confirm.timeout_ms; the
 *     order is read again and answered ("source": "provider").  A timeout
 *     or another failure answers the stored status (pending) and is
 *     logged; the follow-up schedule asks again later.
 * Answers are JSON; 200 for every known order (whatever its status), 400
 * bad input, 401 no credentials, 403 bad credentials, 404 unknown order,
 * 405 method, 503 database unavailable.
 *
 * Connects to PostgreSQL as the receivers do ([database] conninfo:
 * confirm_order(), ingest(), confirm_claim()): the least that works
 * (docs/DATABASE.md).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "admin.h"
#include "args.h"
#include "arena.h"
#include "crypto.h"
#include "form.h"
#include "http.h"
#include "log.h"
#include "money.h"
#include "pipeline.h"
#include "provider.h"
#include "query.h"
#include "server.h"
#include "store.h"

#define PN_CONFIRM_SKEW_S 300		/* ts accepted this far from now, either way */
#define PN_CONFIRM_MAX_BODY 4096	/* a request's body */
#define PN_CONFIRM_MIN_KEY 32		/* bytes of a site's key */
#define PN_CONFIRM_TAG "paynotify-confirm\n"

/* A site's key, loaded from confirm.secret_file. */
struct site_key {
	const struct pn_site *site;
	unsigned char *key;
	size_t	len;
};

/* The state of one worker (struct pn_receiver.app). */
struct app {
	struct pn_query_run run;
	struct site_key *keys;
	size_t	nkeys;
	bool	http_ok;
};

/*
 * Read and check site's confirm.secret_file: the file's mode and owner as
 * every secret file's, one line of at least PN_CONFIRM_MIN_KEY bytes.
 * *key malloc'd (wipe it), false with err.
 */
static bool
load_key(const struct pn_site *site, unsigned char **key, size_t *len, struct pn_err *err)
{
	char   *text = NULL, *k;
	size_t	tlen = 0, n;

	if (!pn_cfg_secret_file_ok(site->confirm.secret_path, err)
	    || !pn_read_file(site->confirm.secret_path, 4096, &text, &tlen, err))
		return false;
	k = pn_trim(text);
	n = strcspn(k, "\r\n");
	if (k[n] != '\0' && pn_trim(k + n)[0] != '\0') {
		pn_err_set(err, "site %s: confirm.secret_file %s holds more than one line",
			   site->name, site->confirm.secret_path);
		goto failed;
	}
	if (n < PN_CONFIRM_MIN_KEY) {
		pn_err_set(err, "site %s: confirm.secret_file %s holds %zu bytes: at least %d "
			   "expected (openssl rand -hex 32)", site->name,
			   site->confirm.secret_path, n, PN_CONFIRM_MIN_KEY);
		goto failed;
	}
	*key = pn_xmalloc(n);
	memcpy(*key, k, n);
	*len = n;
	OPENSSL_cleanse(text, tlen);
	free(text);
	return true;
failed:
	OPENSSL_cleanse(text, tlen);
	free(text);
	return false;
}

static void
app_free(void *p)
{
	struct app *app = p;
	size_t	i;

	if (app == NULL)
		return;
	for (i = 0; i < app->nkeys; i++) {
		OPENSSL_cleanse(app->keys[i].key, app->keys[i].len);
		free(app->keys[i].key);
	}
	free(app->keys);
	pn_query_run_release_creds(&app->run);
	PQfinish(app->run.conn);
	if (app->http_ok)
		pn_qhttp_destroy(&app->run.http);
	free(app);
}

/* Every key of cfg's sites that set confirm.*; false (err: the first
 * failure) when one does not load. */
static bool
load_keys(const struct pn_config *cfg, struct site_key **out, size_t *n, struct pn_err *err)
{
	struct site_key *keys = pn_xcalloc(cfg->nsites ? cfg->nsites : 1, sizeof(*keys));
	size_t	i, k = 0;

	for (i = 0; i < cfg->nsites; i++) {
		const struct pn_site *s = &cfg->sites[i];

		if (!s->confirm.configured || s->confirm.secret_path == NULL)
			continue;
		if (!load_key(s, &keys[k].key, &keys[k].len, err)) {
			while (k-- > 0) {
				OPENSSL_cleanse(keys[k].key, keys[k].len);
				free(keys[k].key);
			}
			free(keys);
			return false;
		}
		keys[k++].site = s;
	}
	*out = keys;
	*n = k;
	return true;
}

static struct app *
app_get(struct pn_receiver *rcv)
{
	struct app *app = rcv->app;
	struct pn_err err;

	if (app != NULL)
		return app;
	app = pn_xcalloc(1, sizeof(*app));
	app->run.cfg = rcv->cfg;
	app->run.store = rcv->store;
	app->run.apply = true;
	if (!load_keys(rcv->cfg, &app->keys, &app->nkeys, &err)) {
		/* checked at start and on reload: a file changed under us */
		pn_log(PN_LOG_ERROR, "%s; refusing every request until it loads", err.msg);
		free(app);
		return NULL;
	}
	if (!pn_qhttp_init(&app->run.http, rcv->cfg, &err))
		pn_log(PN_LOG_ERROR, "%s", err.msg);
	else
		app->http_ok = true;
	rcv->app = app;
	return app;
}

/* The connection for reading orders, (re)made when needed; NULL (err). */
static PGconn *
app_conn(struct app *app, struct pn_err *err)
{
	if (app->run.conn != NULL && PQstatus(app->run.conn) == CONNECTION_OK)
		return app->run.conn;
	PQfinish(app->run.conn);
	app->run.conn = pn_db_connect_receivers(app->run.cfg, err);
	return app->run.conn;
}

static const struct site_key *
site_key(const struct app *app, const char *site)
{
	size_t	i;

	for (i = 0; i < app->nkeys; i++)
		if (strcmp(app->keys[i].site->name, site) == 0)
			return &app->keys[i];
	return NULL;
}

/* ---- the answer ------------------------------------------------------------ */

struct answer {
	int	status;
	const char *error;		/* non-200: why, for the caller */
	const char *site, *order_id;
	const char *order_status;	/* NULL: unknown */
	const char *amount;		/* "12.34 CNY" */
	const char *source;		/* stored, provider */
	bool	asked;
	bool	rate_limited;
	const char *result;		/* the ask's result (query's result column) */
};

static void
respond(struct pn_receiver *rcv, struct pn_io *io, const struct answer *an)
{
	json_t *o = json_object();
	char   *text;

	if (an->site)
		json_object_set_new(o, "site", json_string(an->site));
	if (an->order_id)
		json_object_set_new(o, "order_id", json_string(an->order_id));
	if (an->error)
		json_object_set_new(o, "error", json_string(an->error));
	if (an->order_status) {
		json_object_set_new(o, "status", json_string(an->order_status));
		if (an->amount)
			json_object_set_new(o, "amount", json_string(an->amount));
		json_object_set_new(o, "source", json_string(an->source));
		json_object_set_new(o, "asked", json_boolean(an->asked));
		if (an->rate_limited)
			json_object_set_new(o, "rate_limited", json_true());
		if (an->result)
			json_object_set_new(o, "result", json_string(an->result));
	}
	/* json_string() refuses invalid UTF-8: such a value is left out */
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	pn_response_set(&rcv->res, an->status, "application/json", text ? text : "{}");
	free(text);
	pn_buf_puts(&rcv->res.body, "\n");
	if (!pn_response_write(io, &rcv->res))
		pn_log(PN_LOG_WARNING, "confirm: the answer could not be written (the caller went "
		       "away)");
}

/* "66.00 CNY" (arena). */
static const char *
amount_text(struct pn_arena *a, const char *minor_text, const char *currency)
{
	char	amount[48];
	int64_t	minor;
	int	exp;

	if (minor_text == NULL || currency == NULL || !pn_parse_i64(minor_text, &minor))
		return NULL;
	exp = pn_money_exponent(currency);
	if (exp < 0)
		return pn_arena_printf(a, "%lld minor units of %s", (long long)minor, currency);
	pn_money_format(minor, exp, amount, sizeof(amount));
	return pn_arena_printf(a, "%s %s", amount, currency);
}

/* ---- the request ------------------------------------------------------------ */

/* Printable ASCII, no blanks: what a site name, order id, ts or token is. */
static bool
word_ok(const char *s, size_t max)
{
	size_t	n = 0;

	if (s == NULL || *s == '\0')
		return false;
	for (; *s; s++, n++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || n >= max)
			return false;
	return true;
}

/* Does token (hex) MAC site, order_id, ts under key?  Constant time. */
static bool
token_ok(struct pn_arena *a, const struct site_key *k, const char *site, const char *order_id,
	 const char *ts, const char *token)
{
	unsigned char mac[64], got[32];
	size_t	maclen = 0, gotlen = 0;
	struct pn_iov iov[6] = {
		{PN_CONFIRM_TAG, strlen(PN_CONFIRM_TAG)}, {site, strlen(site)}, {"\n", 1},
		{order_id, strlen(order_id)}, {"\n", 1}, {ts, strlen(ts)},
	};

	(void)a;
	if (strlen(token) != 64 || !pn_hex_decode(token, 64, got, sizeof(got), &gotlen)
	    || gotlen != 32)
		return false;
	if (!pn_hmac(PN_MD_SHA256, k->key, k->len, iov, PN_ARRAY_LEN(iov), mac, &maclen)
	    || maclen != 32)
		return false;
	return pn_ct_equal(mac, got, 32);
}

/* confirm_order() (sql/functions.sql): through order_rows(), so a shop
 * that keeps its orders in its own table (docs/SHOP-ORDERS.md) is answered
 * from it. */
static const char order_sql[] =
	"SELECT site, order_id, status, amount_minor, currency, psp, psp_txn_id"
	"  FROM paynotify.confirm_order($1, $2)";

static const char claim_sql[] =
	"SELECT paynotify.confirm_claim($1, $2, $3::int) AS claimed";

/* Read the order into *t (one row or none); false (err) on a database error. */
static bool
read_order(struct app *app, const char *site, const char *oid, struct pn_table *t,
	   struct pn_err *err)
{
	const char *params[2] = {site, oid};
	PGconn *conn = app_conn(app, err);

	if (conn == NULL)
		return false;
	if (!pn_db_query(conn, PN_SQL_CONST(order_sql), 2, params, t, err)) {
		PQfinish(app->run.conn);	/* made again by the next request */
		app->run.conn = NULL;
		return false;
	}
	return true;
}

static void
confirm_handle(struct pn_receiver *rcv, struct pn_io *io)
{
	struct pn_arena *a = rcv->arena;
	struct app *app;
	struct pn_request req;
	struct pn_form form;
	struct pn_table t;
	struct pn_err err;
	struct answer an;
	const struct site_key *key;
	const struct pn_site *site;
	const char *s, *oid, *ts, *token, *qs, *params[3];
	int64_t	started = pn_now_us(), now = (int64_t)time(NULL), tsv = 0;
	enum pn_read_rc rc;
	char	interval[24];
	bool	claimed;

	memset(&an, 0, sizeof(an));
	memset(&t, 0, sizeof(t));
	rc = pn_request_read(io, PN_CONFIRM_MAX_BODY, a, &req, &err);
	if (rc != PN_READ_OK) {
		an.status = rc == PN_READ_TOO_LARGE ? 413 : rc == PN_READ_HEADERS_TOO_LARGE ? 431
		    : rc == PN_READ_TIMEOUT ? 408 : 400;
		an.error = "the request could not be read";
		pn_log(PN_LOG_WARNING, "confirm: %s", err.msg);
		goto answer;
	}
	if (strcmp(req.method, "GET") != 0 && strcmp(req.method, "POST") != 0) {
		an.status = 405;
		an.error = "GET or POST";
		goto answer;
	}
	qs = io->param(io->ctx, "QUERY_STRING");
	if (strcmp(req.method, "POST") == 0 ? !pn_form_parse(a, (const char *)req.body,
							       req.body_len, &form, &err)
	    : !pn_form_parse(a, qs ? qs : "", qs ? strlen(qs) : 0, &form, &err)) {
		an.status = 400;
		an.error = "the parameters are not a valid form";
		goto answer;
	}
	s = pn_form_get(&form, "site");
	oid = pn_form_get(&form, "order_id");
	ts = pn_form_get(&form, "ts");
	token = pn_form_get(&form, "token");
	if (!word_ok(s, 64) || !word_ok(oid, 255)) {
		an.status = 400;
		an.error = "site and order_id are required (printable ASCII, no blanks)";
		goto answer;
	}
	an.site = s;
	an.order_id = oid;
	if (ts == NULL || token == NULL) {
		an.status = 401;
		an.error = "ts and token are required (docs/SHOP-ORDERS.md)";
		goto answer;
	}
	if ((app = app_get(rcv)) == NULL) {
		an.status = 503;
		an.error = "the endpoint's keys did not load; try again later";
		goto answer;
	}
	key = site_key(app, s);
	if (key == NULL || strspn(ts, "0123456789") != strlen(ts) || strlen(ts) > 12
	    || !pn_parse_i64(ts, &tsv) || tsv < now - PN_CONFIRM_SKEW_S
	    || tsv > now + PN_CONFIRM_SKEW_S || !token_ok(a, key, s, oid, ts, token)) {
		an.status = 403;
		an.error = "not authorised: an unknown site, a token that does not match, or a ts "
			   "more than 300 s from now";
		pn_log(PN_LOG_WARNING, "confirm: refused a request for site %.64s order %.255s: %s",
		       s, oid, key == NULL ? "the site has no confirm.secret_file"
		       : (tsv < now - PN_CONFIRM_SKEW_S || tsv > now + PN_CONFIRM_SKEW_S)
		       ? "ts out of the window" : "the token does not match");
		goto answer;
	}
	site = key->site;

	if (!read_order(app, s, oid, &t, &err)) {
		pn_log(PN_LOG_ERROR, "confirm: site %s order %s: %s", s, oid, err.msg);
		an.status = 503;
		an.error = "the database is not available; try again later";
		goto answer;
	}
	if (t.nrows == 0) {
		an.status = 404;
		an.error = "no such order";
		goto answer;
	}
	an.status = 200;
	an.order_status = pn_arena_strdup(a, pn_table_get(&t, 0, "status"));
	an.amount = amount_text(a, pn_table_get(&t, 0, "amount_minor"),
				pn_table_get(&t, 0, "currency"));
	an.source = "stored";
	if (strcmp(an.order_status, "pending") != 0)
		goto answer;		/* final: nobody is asked */

	snprintf(interval, sizeof(interval), "%lld", (long long)site->confirm.min_interval_s);
	params[0] = s;
	params[1] = oid;
	params[2] = interval;
	{
		struct pn_table c;

		if (!pn_db_query(app->run.conn, PN_SQL_CONST(claim_sql), 3, params, &c, &err)) {
			pn_log(PN_LOG_ERROR, "confirm: site %s order %s: could not claim the ask: %s",
			       s, oid, err.msg);
			PQfinish(app->run.conn);
			app->run.conn = NULL;
			goto answer;	/* the stored status, not asked */
		}
		claimed = c.nrows == 1 && pn_table_get(&c, 0, "claimed") != NULL
		    && strcmp(pn_table_get(&c, 0, "claimed"), "t") == 0;
		pn_table_free(&c);
	}
	if (!claimed) {
		an.rate_limited = true;
		goto answer;
	}
	if (!app->http_ok) {
		pn_log(PN_LOG_ERROR, "confirm: site %s order %s: not asked: libcurl did not "
		       "initialise", s, oid);
		goto answer;
	}

	/* The ask: exactly `paynotify query --order ID --apply`'s, bounded. */
	pn_table_init(&app->run.out, PN_QUERY_NCOLUMNS, pn_query_columns);
	app->run.orders = app->run.asked = app->run.final = app->run.applied = 0;
	app->run.waiting = app->run.not_found = app->run.refused = 0;
	app->run.errors = app->run.attention = 0;
	app->run.last_kept = false;
	app->run.http.deadline_us = pn_now_us() + site->confirm.timeout_ms * 1000;
	pn_query_order_row(&app->run, a, &t, 0, NULL);
	app->run.http.deadline_us = 0;
	an.asked = app->run.asked > 0;
	an.source = an.asked ? "provider" : "stored";
	an.result = app->run.last_result[0] ? pn_arena_strdup(a, app->run.last_result) : NULL;
	if (app->run.errors > 0 || app->run.refused > 0 || app->run.attention > 0) {
		size_t	i;

		for (i = 0; i < app->run.out.nrows; i++)
			pn_log(app->run.errors > 0 ? PN_LOG_WARNING : PN_LOG_ERROR,
			       "confirm: site %s order %s: %s %s: %s", s, oid,
			       pn_table_get(&app->run.out, i, "provider")
			       ? pn_table_get(&app->run.out, i, "provider") : "-",
			       pn_table_get(&app->run.out, i, "result"),
			       pn_table_get(&app->run.out, i, "detail")
			       ? pn_table_get(&app->run.out, i, "detail") : "");
	}
	pn_table_free(&app->run.out);
	pn_table_free(&t);
	memset(&t, 0, sizeof(t));
	/* what the order is now, whatever the ask did */
	if (!read_order(app, s, oid, &t, &err))
		pn_log(PN_LOG_ERROR, "confirm: site %s order %s: could not read it again: %s "
		       "(answered as read before the ask)", s, oid, err.msg);
	else if (t.nrows == 1) {
		an.order_status = pn_arena_strdup(a, pn_table_get(&t, 0, "status"));
		an.amount = amount_text(a, pn_table_get(&t, 0, "amount_minor"),
					pn_table_get(&t, 0, "currency"));
	}
answer:
	pn_table_free(&t);
	respond(rcv, io, &an);
	pn_log(an.status == 200 ? PN_LOG_INFO : PN_LOG_WARNING,
	       "confirm: %d site %.64s order %.255s: %s (%s%s%s%s) in %lld ms", an.status,
	       an.site ? an.site : "-", an.order_id ? an.order_id : "-",
	       an.order_status ? an.order_status : an.error ? an.error : "-",
	       an.source ? an.source : "-", an.asked ? ", asked" : "",
	       an.rate_limited ? ", rate-limited" : "",
	       an.result ? pn_arena_printf(a, ", %s", an.result) : "",
	       (long long)((pn_now_us() - started) / 1000));
	pn_arena_reset(a);
}

static const struct pn_provider confirm_program = {
	.name = "confirm",
	.program = "paynotify-confirm",
	.handle = confirm_handle,
	.app_free = app_free,
};

/* ---- the command ---------------------------------------------------------------- */

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify confirm [--listen unix:PATH|HOST:PORT] [--workers N]\n"
		"                         [--socket-mode MODE] [--check]\n\n"
		"Serve the confirm endpoint over FastCGI: the shop's backend asks whether an\n"
		"order is paid when the buyer returns (docs/SHOP-ORDERS.md \"The buyer\n"
		"returns: confirm\").  A final order is answered as stored; a pending one is\n"
		"asked about as `query --order ID --apply` asks (the same verification and\n"
		"ingest), within [site] confirm.timeout_ms, at most once per order per\n"
		"confirm.min_interval_s.  Requests carry site, order_id, ts and token (HMAC-\n"
		"SHA256 under the site's confirm.secret_file key).\n"
		"Without --listen, fd 0 must be a listening socket (a systemd socket unit).\n"
		"  --listen ADDR      FastCGI on unix:PATH or HOST:PORT\n"
		"  --workers N        pre-forked workers (0..64; default 2 with --listen,\n"
		"                     0 on fd 0: serve in this process)\n"
		"  --socket-mode MODE the unix socket's mode, octal (default 0660)\n"
		"  --check            load the configuration and every site's key, then exit\n"
		"Exit status: 0 stopped, 64 usage, 71 could not listen, 73 the socket is\n"
		"another process's, 78 configuration error.\n");
}

/* --socket-mode: octal, 0..0777 */
static bool
socket_mode(const struct pn_arg *arg, const char *value)
{
	int64_t *mode = arg->dest;
	char   *end;

	errno = 0;
	*mode = strtol(value, &end, 8);
	if (errno != 0 || end == value || *end != '\0' || *mode < 0 || *mode > 0777) {
		fprintf(stderr, "paynotify: confirm: invalid --socket-mode \"%s\": "
			"expected an octal mode such as 0660\n", value);
		return false;
	}
	return true;
}

static int
confirm_exec(int argc, char **argv, const char *config_path)
{
	struct pn_server_opts opts = {NULL, NULL, -1, 0660, NULL};
	struct pn_config *cfg;
	struct site_key *keys = NULL;
	struct pn_err err;
	int64_t	workers = -1, mode = 0660;
	size_t	nkeys = 0, i;
	bool	check = false;
	int	listen_fd = 0, accepting = 0, rc;
	socklen_t len = sizeof(accepting);
	const struct pn_arg options[] = {
		{"listen", required_argument, 0, PN_ARG_STR, .str = &opts.listen},
		{"workers", required_argument, 0, PN_ARG_INT, .num = &workers, .min = 0, .max = 64},
		{"socket-mode", required_argument, 0, PN_ARG_CALL, .dest = &mode,
		 .set = socket_mode},
		{"check", no_argument, 0, PN_ARG_FLAG, .flag = &check},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "confirm", .help = help, .opts = options,
				     .rest = PN_REST_NAMED};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	opts.config_path = config_path ? config_path : pn_cfg_default_path();
	opts.socket_mode = (mode_t)mode;
	opts.workers = (int)workers;
	pn_log_init("paynotify-confirm", 1);
	if ((cfg = pn_cfg_load(opts.config_path, &err)) == NULL) {
		pn_log(PN_LOG_ERROR, "could not load configuration: %s", err.msg);
		return PN_EXIT_CONFIG;
	}
	pn_log_set_level((int)cfg->log_level);
	if (!load_keys(cfg, &keys, &nkeys, &err)) {
		pn_log(PN_LOG_ERROR, "%s", err.msg);
		pn_cfg_free(cfg);
		return PN_EXIT_CONFIG;
	}
	for (i = 0; i < nkeys; i++) {
		OPENSSL_cleanse(keys[i].key, keys[i].len);
		free(keys[i].key);
	}
	free(keys);
	if (nkeys == 0)
		pn_log(PN_LOG_WARNING, "no site sets confirm.secret_file: every request will be "
		       "refused (403)");
	if (check) {
		printf("paynotify: confirm: configuration and %zu site key%s load\n", nkeys,
		       nkeys == 1 ? "" : "s");
		pn_cfg_free(cfg);
		return PN_EXIT_OK;
	}
	if (opts.listen != NULL) {
		listen_fd = pn_server_listen(opts.listen, opts.socket_mode, NULL, &err);
		if (listen_fd < 0) {
			pn_log(PN_LOG_ERROR, "%s", err.msg);
			pn_cfg_free(cfg);
			return listen_fd == PN_LISTEN_IN_USE ? PN_EXIT_IN_USE : PN_EXIT_OSERR;
		}
		if (opts.workers < 0)
			opts.workers = 2;
	} else {
		if (getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0
		    || !accepting) {
			fprintf(stderr, "paynotify: confirm: fd 0 is not a listening socket: give "
				"--listen unix:PATH (or start it from paynotify-confirm.socket)\n");
			pn_cfg_free(cfg);
			return PN_EXIT_USAGE;
		}
		if (opts.workers < 0)
			opts.workers = 0;
	}
	rc = pn_server_run(&confirm_program, &opts, listen_fd, cfg);
	pn_server_unlink_socket();
	return rc;
}

const struct pn_cmd pn_cmd_confirm = {
	"confirm",
	"[--listen unix:PATH|HOST:PORT] [--workers N] [--socket-mode MODE] [--check]",
	"serve the shop's \"is this order paid?\" endpoint (FastCGI)", confirm_exec, help,
};

/*
 * cmd_replay.c: paynotify replay — re-verify stored notifications from their
 * raw bytes with the sites' configured keys (freshness off: it is history),
 * re-derive the event and report, apply (through the same SQL transition as
 * live traffic) or re-deliver it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "admin.h"
#include "args.h"
#include "arena.h"
#include "crypto.h"
#include "provider.h"

#define BATCH "200"
#define PROGRESS_AFTER_US 1000000	/* show the progress bar once a run takes longer */
#define PROGRESS_WIDTH 30

/* Shared by the count and the batches: $1 the last id seen, $2 site .. $8 id.  Only
 * notifications: a `paynotify query` answer or a `paynotify reconcile` statement line
 * carries no notification signature for the receivers' verification to re-check. */
#define FILTERS \
	" FROM paynotify.notifications WHERE id > $1::bigint" \
	" AND source = 'notification'" \
	" AND ($2::text IS NULL OR site = $2)" \
	" AND ($3::text IS NULL OR provider = $3)" \
	" AND ($4::timestamptz IS NULL OR received_at >= $4)" \
	" AND ($5::timestamptz IS NULL OR received_at < $5)" \
	" AND ($6::text IS NULL OR order_id = $6)" \
	" AND ($7::text IS NULL OR outcome = $7)" \
	" AND ($8::bigint IS NULL OR id = $8)" \
	" AND source = 'notification'"	/* query answers: verified when fetched (QUERY.md) */

enum mode { MODE_DRY_RUN, MODE_APPLY, MODE_TO };

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify replay [filters] [--dry-run | --apply | --to URL]\n"
		"                        [--format table|csv|json] [--wide]\n\n"
		"Re-verify each stored notification from its raw bytes with the site's\n"
		"configured keys (timestamps are not checked: it is history) and re-derive\n"
		"its event, then:\n"
		"  --dry-run   (default) report what applying it would do now\n"
		"  --apply     run it through the same transition as live traffic\n"
		"              (idempotent; applies notifications flagged unknown_order or\n"
		"              amount_mismatch once the order is there and matches)\n"
		"  --to URL    re-deliver the original request (headers and body) to\n"
		"              URL/notify/<provider>/<site>, e.g. a staging receiver\n\n"
		"Filters: --site S --provider P --since TIME --until TIME --order ID\n"
		"         --outcome OUTCOME --id N   (TIME: 2026-11-30, '2026-11-30 08:00+08',\n"
		"         2026-11-30T00:00:00Z, today, yesterday, or a duration meaning that\n"
		"         long ago: 2h, 1d;\n"
		"         a site must be in the configuration, an outcome one the schema\n"
		"         records: a typo exits 64 with the valid values)\n"
		"Only notifications (source notification): answers stored by paynotify\n"
		"query or reconcile were verified when fetched and are not re-verified here.\n"
		"  --wide      every column in a table, however wide (default: fit 100)\n\n"
		"Exit status: 0 all verified and settled; 1 something still needs a human\n"
		"(unknown order, amount or merchant mismatch, failed re-delivery); 2 some\n"
		"stored notification does not verify with the key that verified it (its\n"
		"bytes were altered); 4 the key that verified one is no longer configured\n"
		"(rotated out), nothing else wrong; 3 database; 64 usage; 78 configuration.\n");
}

struct replay {
	enum mode mode;
	const char *to;
	int	nmodes;			/* --dry-run, --apply and --to given (one at most) */
	struct pn_config *cfg;
	PGconn *conn;
	CURL   *curl;
	bool	curl_global;		/* curl_global_init() done */
	struct pn_arena *a;
	struct pn_table out;
	size_t	n, verified, unverified, key_gone, attention, applied;
};

/* Rebuild the request from the stored headers and body. */
static void
rebuild_request(struct pn_arena *a, const char *provider, const char *site,
		const char *headers_json, const unsigned char *body, size_t body_len,
		struct pn_request *req)
{
	json_t *obj = json_loads(headers_json ? headers_json : "{}", 0, NULL);
	const char *k;
	json_t *v;

	memset(req, 0, sizeof(*req));
	req->method = "POST";
	req->path_info = pn_arena_printf(a, "/notify/%s/%s", provider, site);
	req->body = body;
	req->body_len = body_len;
	json_object_foreach(obj, k, v) {
		if (!json_is_string(v) || req->nheaders == PN_MAX_HEADERS)
			continue;
		if (strcmp(k, "Content-Type") == 0) {
			req->content_type = pn_arena_strdup(a, json_string_value(v));
			continue;
		}
		req->headers[req->nheaders].name = pn_arena_strdup(a, k);
		req->headers[req->nheaders].value = pn_arena_strdup(a, json_string_value(v));
		req->nheaders++;
	}
	json_decref(obj);
}

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

/* POST the original request to URL/notify/<provider>/<site>; HTTP status or -1. */
static long
redeliver(struct replay *r, const struct pn_request *req, const char *provider,
	  const char *site)
{
	struct curl_slist *hdrs = NULL;
	size_t	n = strlen(r->to);
	char   *url;
	long	status = -1;
	size_t	i;

	while (n > 0 && r->to[n - 1] == '/')	/* "http://host/" is "http://host" */
		n--;
	url = pn_arena_printf(r->a, "%.*s/notify/%s/%s", (int)n, r->to, provider, site);
	if (req->content_type)
		hdrs = curl_slist_append(hdrs, pn_arena_printf(r->a, "Content-Type: %s",
							       req->content_type));
	for (i = 0; i < req->nheaders; i++)
		hdrs = curl_slist_append(hdrs, pn_arena_printf(r->a, "%s: %s", req->headers[i].name,
							       req->headers[i].value));
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_reset(r->curl);
	curl_easy_setopt(r->curl, CURLOPT_URL, url);
	curl_easy_setopt(r->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, (const char *)req->body);
	curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(r->curl, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(r->curl, CURLOPT_USERAGENT, "paynotify-replay/" PACKAGE_VERSION);
	if (curl_easy_perform(r->curl) == CURLE_OK)
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	return status;
}

static bool
needs_human(const char *outcome)
{
	/*
	 * Everything but a plain transition, nothing to do, or knowingly not
	 * this site's to act on (README "Outcomes": the counted ones).  A
	 * dispute or complaint re-verified is nothing more to do for replay:
	 * whether its case needs a human is `paynotify report`'s to say.
	 */
	return outcome && *outcome && strcmp(outcome, "applied") != 0
	    && strcmp(outcome, "already_applied") != 0 && strcmp(outcome, "ignored") != 0
	    && strcmp(outcome, "foreign_site") != 0 && strcmp(outcome, "unhandled") != 0
	    && strcmp(outcome, "dispute") != 0 && strcmp(outcome, "complaint") != 0
	    && strcmp(outcome, "combined") != 0;
}

static const char *
i64(struct pn_arena *a, int64_t v)
{
	return v < 0 ? NULL : pn_arena_printf(a, "%lld", (long long)v);
}

/* Run reapply() on a verified event; fills now/status.  false on a DB error. */
static bool
reapply(struct replay *r, const char *id, const struct pn_event *ev, const char **now,
	const char **status, struct pn_err *err)
{
	const char *params[10] = {
		id, pn_kind_name(ev->kind), ev->order_id, ev->psp_txn_id,
		i64(r->a, ev->amount_minor), ev->currency, i64(r->a, ev->refund_minor),
		ev->refund_cumulative ? "true" : "false", ev->flag,
		ev->weak_identity ? "true" : "false",
	};
	struct pn_table t;
	bool	dry = r->mode != MODE_APPLY;
	const char *wakeup = NULL;

	if (dry && !pn_db_query(r->conn, PN_SQL("BEGIN"), 0, NULL, NULL, err))
		return false;
	if (!pn_db_query(r->conn,
			 PN_SQL("SELECT outcome_now, order_status, wakeup FROM paynotify.reapply("
			 "$1::bigint, $2, $3, $4, $5::bigint, $6, $7::bigint, $8::boolean, $9, "
			 "$10::boolean)"), 10,
			 params, &t, err)) {
		if (dry && !pn_db_query(r->conn, PN_SQL("ROLLBACK"), 0, NULL, NULL, err))
			return false;
		return false;
	}
	*now = t.nrows ? pn_arena_strdup(r->a, t.cells[0] ? t.cells[0] : "") : "";
	*status = t.nrows && t.cells[1] ? pn_arena_strdup(r->a, t.cells[1]) : "";
	if (t.nrows && t.cells[2])
		wakeup = pn_arena_strdup(r->a, t.cells[2]);
	pn_table_free(&t);
	if (dry && !pn_db_query(r->conn, PN_SQL("ROLLBACK"), 0, NULL, NULL, err))
		return false;
	/* The LISTEN wake-up, after the commit, as the receivers send it. */
	if (!dry && wakeup != NULL) {
		struct pn_err werr;

		if (!pn_db_query(r->conn, PN_SQL("SELECT pg_notify('paynotify', $1)"), 1, &wakeup,
				 NULL, &werr))
			fprintf(stderr, "paynotify: notification %s: wake-up not sent: %s\n", id,
				werr.msg);
	}
	return true;
}

/*
 * Does a stored key belong to the re-derived event key?  ingest stores a
 * flagged event under "!<flag>:<key>", a conflicting duplicate under
 * "!conflicting_duplicate:<key>:<md5>" and a second, different result
 * that waits for a confirmation under "!pending_confirmation:<key>:<md5>"
 * (sql/functions.sql).
 */
static bool
same_event_key(const char *stored, const char *derived)
{
	static const char conflict[] = "!conflicting_duplicate:";
	static const char pending[] = "!pending_confirmation:";
	size_t	n = strlen(stored), dn = strlen(derived);
	size_t	plen = strncmp(stored, conflict, sizeof(conflict) - 1) == 0 ? sizeof(conflict) - 1
	    : strncmp(stored, pending, sizeof(pending) - 1) == 0 ? sizeof(pending) - 1 : 0;

	if (strcmp(stored, derived) == 0)
		return true;
	if (plen > 0) {
		stored += plen;
		n -= plen;
		if (n < 33 || stored[n - 33] != ':')
			return false;
		n -= 33;
		if (n == dn && memcmp(stored, derived, dn) == 0)
			return true;
	}
	if (n > 0 && stored[0] == '!') {
		const char *colon = memchr(stored, ':', n);

		if (colon == NULL)
			return false;
		n -= (size_t)(colon + 1 - stored);
		stored = colon + 1;
		return n == dn && memcmp(stored, derived, dn) == 0;
	}
	return false;
}

/* One stored notification. */
static bool
replay_row(struct replay *r, const struct pn_table *rows, size_t i, struct pn_err *err)
{
	const char *id = pn_table_get(rows, i, "id"), *site_name = pn_table_get(rows, i, "site");
	const char *row_site = site_name;	/* a sub-order's; its bytes came to parent_site */
	const char *prov_name = pn_table_get(rows, i, "provider");
	const char *recorded = pn_table_get(rows, i, "outcome");
	const char *stored_key = pn_table_get(rows, i, "dedup_key");
	const char *stored_key_id = pn_table_get(rows, i, "key_id");
	const char *hex = pn_table_get(rows, i, "raw_body");
	const char *parent_site = pn_table_get(rows, i, "parent_site");
	const char *headers = pn_table_get(rows, i, "raw_headers");
	const struct pn_provider *p = pn_provider_find(prov_name);
	const struct pn_site *site;
	const char *verified = "no", *key = "", *event = "", *now = "", *status = "";
	const char *order = pn_table_get(rows, i, "order_id"), *note = "";
	unsigned char *body = pn_arena_alloc(r->a, strlen(hex) / 2 + 1);
	size_t	body_len = 0;
	struct pn_request req;
	struct pn_event ev;
	struct pn_err verr;

	verr.msg[0] = '\0';
	if (parent_site != NULL) {
		/*
		 * A sub-order of a combine payment: re-verified from its
		 * envelope's bytes with the keys of the site they came to, the
		 * sub-order with this row's key picked out below.
		 */
		hex = pn_table_get(rows, i, "parent_body");
		headers = pn_table_get(rows, i, "parent_headers");
		body = pn_arena_alloc(r->a, (hex ? strlen(hex) : 0) / 2 + 1);
		site_name = parent_site;
	}
	site = pn_cfg_site(r->cfg, site_name);
	if (hex == NULL || !pn_hex_decode(hex, strlen(hex), body, strlen(hex) / 2 + 1, &body_len))
		body_len = 0;
	rebuild_request(r->a, prov_name, site_name, headers, body, body_len, &req);
	pn_event_init(&ev);
	if (p == NULL || site == NULL || !pn_provider_configured(p, site)) {
		note = "the site or its provider is no longer configured";
		verified = "key_gone";
	} else {
		struct pn_verify_ctx vc = {&req, site, r->a, (int64_t)time(NULL), false, 0, r->cfg};

		bool	ok = p->verify(&vc, &ev, &verr) == PN_VERIFIED;

		if (ok && parent_site != NULL) {
			/* the sub-order this row stores (flagged keys compare as stored) */
			size_t	k;

			pn_event_canonicalise(&ev, r->a);
			for (k = 0; k < ev.nsubs; k++)
				if (same_event_key(stored_key, ev.subs[k].dedup_key))
					break;
			if (k < ev.nsubs)
				ev = ev.subs[k];
			else {
				ev.dedup_key = "(not among the envelope's sub-orders)";
				ev.nsubs = 0;
			}
			if (strcmp(ev.site ? ev.site : parent_site, row_site) != 0) {
				/*
				 * Routed today to another site than the one it is
				 * stored under (a site added since): reapply() works
				 * on the stored row's site, so it is not applied
				 * here, kept flagged, for a human.
				 */
				note = pn_arena_printf(r->a, "this sub-order now belongs to site %s, "
						       "not %s: not re-applied",
						       ev.site ? ev.site : parent_site, row_site);
				if (ev.flag == NULL)
					ev.flag = "merchant_mismatch";
			}
		}
		if (ok) {
			/* the form that was stored: the keys and ids compare as stored */
			pn_event_canonicalise(&ev, r->a);
			verified = "yes";
			key = ev.key_id ? ev.key_id : "";
			event = pn_kind_name(ev.kind);
			if (ev.order_id)
				order = ev.order_id;
		} else {
			/* Not verified: altered bytes, or the key that verified it then has
			 * been rotated out since?  The stored key id tells. */
			switch (pn_cfg_site_key_state(site, stored_key_id)) {
			case PN_KEY_GONE:
				verified = "key_gone";
				note = pn_arena_printf(r->a, "the key that verified this notification "
						       "(%s) is no longer configured", stored_key_id);
				break;
			case PN_KEY_UNKNOWN:
				note = pn_arena_printf(r->a, "%s; it was verified by %s, a key id from "
						       "an earlier build (a line number or a file "
						       "name): whether that key was rotated out "
						       "cannot be told", verr.msg,
						       stored_key_id ? stored_key_id : "(none)");
				break;
			case PN_KEY_CONFIGURED:
				note = pn_arena_printf(r->a, "%s; the key that verified it (%s) is "
						       "still configured: the stored bytes were "
						       "altered", verr.msg, stored_key_id);
				break;
			}
		}
	}
	if (strcmp(verified, "yes") == 0 && !same_event_key(stored_key, ev.dedup_key)) {
		note = pn_arena_printf(r->a, "re-derived event key \"%s\" differs from the stored one",
				       ev.dedup_key);
		verified = "no";
	}
	if (strcmp(verified, "key_gone") == 0) {
		r->key_gone++;
	} else if (strcmp(verified, "yes") != 0) {
		r->unverified++;
	} else {
		r->verified++;
		if (r->mode == MODE_TO) {
			long code = redeliver(r, &req, prov_name, site_name);

			now = code < 0 ? "unreachable" : pn_arena_printf(r->a, "HTTP %ld", code);
			if (code < 200 || code > 299) {
				r->attention++;
				note = "re-delivery not acknowledged";
			}
		} else {
			if (!reapply(r, id, &ev, &now, &status, err))
				return false;
			if (needs_human(now))
				r->attention++;
			if (r->mode == MODE_APPLY && (strcmp(now, "applied") == 0
						      || strcmp(now, "paid_after_close") == 0)
			    && strcmp(recorded, now) != 0)
				r->applied++;
		}
	}
	{
		const char *cells[] = {id, row_site, prov_name, order ? order : "", event,
				       verified, key, recorded, now, status, note};

		pn_table_add(&r->out, cells);
	}
	return true;
}

/* "replaying [#######.......] 120/300" on stderr, redrawn in place. */
static void
progress_bar(size_t done, size_t total)
{
	size_t	fill = total ? done * PROGRESS_WIDTH / total : 0, i;

	fputs("\rreplaying [", stderr);
	for (i = 0; i < PROGRESS_WIDTH; i++)
		fputc(i < fill ? '#' : '.', stderr);
	fprintf(stderr, "] %zu/%zu", done, total);
	fflush(stderr);
}

/* --dry-run, --apply, --to URL */
static bool
mode_arg(const struct pn_arg *arg, const char *value)
{
	struct replay *r = arg->dest;

	if (value != NULL) {
		r->mode = MODE_TO;
		r->to = value;
	} else
		r->mode = strcmp(arg->name, "apply") == 0 ? MODE_APPLY : MODE_DRY_RUN;
	r->nmodes++;
	return true;
}

static int
replay_exec(int argc, char **argv, const char *config_path)
{
	static const char *cols[] = {"id", "site", "provider", "order", "event", "verified", "key",
				     "recorded", "now", "order_status", "note"};
	const char *filter[7] = {NULL};	/* site provider since until order outcome id */
	struct replay r;
	struct pn_err err;
	enum pn_format fmt = pn_format_default();
	char	last[24] = "0";
	bool	tty = isatty(STDERR_FILENO), shown = false;
	size_t	total = 0;
	char   *since = NULL, *until = NULL;
	int	rc;
	int64_t	t0 = pn_now_us();
	bool	wide = false;
	const struct pn_arg options[] = {
		{"site", required_argument, 0, PN_ARG_STR, .str = &filter[0]},
		{"provider", required_argument, 0, PN_ARG_STR, .str = &filter[1]},
		{"since", required_argument, 0, PN_ARG_STR, .str = &filter[2]},
		{"until", required_argument, 0, PN_ARG_STR, .str = &filter[3]},
		{"order", required_argument, 0, PN_ARG_STR, .str = &filter[4]},
		{"outcome", required_argument, 0, PN_ARG_STR, .str = &filter[5]},
		{"id", required_argument, 0, PN_ARG_STR, .str = &filter[6]},
		{"dry-run", no_argument, 0, PN_ARG_CALL, .dest = &r, .set = mode_arg},
		{"apply", no_argument, 0, PN_ARG_CALL, .dest = &r, .set = mode_arg},
		{"to", required_argument, 0, PN_ARG_CALL, .dest = &r, .set = mode_arg},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
		{"wide", no_argument, 0, PN_ARG_FLAG, .flag = &wide},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "replay", .help = help, .opts = options,
				     .rest = PN_REST_HELP};

	memset(&r, 0, sizeof(r));
	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_UNAVAILABLE;
	if (wide)
		pn_table_set_wide(true);
	if (r.nmodes > 1) {
		fprintf(stderr, "paynotify: --dry-run, --apply and --to exclude each other\n");
		goto usage;
	}
	/* every value, before anything runs: a typo is not an empty answer */
	if ((filter[1] && !pn_opt_provider("--provider", filter[1]))
	    || (filter[2] && !pn_opt_time("--since", filter[2], &since))
	    || (filter[3] && !pn_opt_time("--until", filter[3], &until))
	    || (filter[5] && !pn_opt_outcome("--outcome", filter[5]))
	    || (filter[6] && !pn_opt_id("--id", filter[6])))
		goto usage;
	filter[2] = since;
	filter[3] = until;
	if (filter[4] && *filter[4] == '\0') {
		fprintf(stderr, "paynotify: --order: empty order id\n");
		goto usage;
	}
	if (r.to && !pn_opt_url("--to", r.to))
		goto usage;
	if ((r.cfg = pn_admin_config(config_path)) == NULL) {
		rc = PN_EXIT_CONFIG;
		goto done;
	}
	if (filter[0] && !pn_opt_site(r.cfg, "--site", filter[0]))
		goto usage;
	r.a = pn_arena_new();
	pn_table_init(&r.out, PN_ARRAY_LEN(cols), cols);
	if ((r.conn = pn_db_connect(r.cfg, &err)) == NULL)
		goto failed;
	if (r.mode == MODE_TO) {
		r.curl_global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
		if (!r.curl_global || (r.curl = curl_easy_init()) == NULL) {
			pn_err_set(&err, "could not initialise libcurl");
			rc = PN_EXIT_SOFTWARE;
			goto failed;
		}
	}
	if (tty) {	/* the total, for the progress bar */
		const char *params[8] = {last, filter[0], filter[1], filter[2], filter[3],
					 filter[4], filter[5], filter[6]};
		struct pn_table t;

		if (!pn_db_query(r.conn, PN_SQL("SELECT count(*)" FILTERS), 8, params, &t, &err))
			goto failed;
		total = t.nrows == 1 && t.cells[0] ? strtoull(t.cells[0], NULL, 10) : 0;
		pn_table_free(&t);
	}
	for (;;) {
		const char *params[8] = {last, filter[0], filter[1], filter[2], filter[3], filter[4],
					 filter[5], filter[6]};
		struct pn_table rows;
		size_t	i, got;

		if (!pn_db_query(r.conn,
				 PN_SQL("SELECT id, site, provider, dedup_key, order_id, outcome, "
					"key_id, raw_headers::text AS raw_headers, "
					"encode(raw_body, 'hex') AS raw_body, "
					/* a combine sub-order: the bytes are its envelope's */
					"(SELECT p.site FROM paynotify.notifications p"
					"  WHERE p.id = notifications.parent_id) AS parent_site, "
					"(SELECT p.raw_headers::text FROM paynotify.notifications p"
					"  WHERE p.id = notifications.parent_id) AS parent_headers, "
					"(SELECT encode(p.raw_body, 'hex') FROM paynotify.notifications p"
					"  WHERE p.id = notifications.parent_id) AS parent_body"
					FILTERS " ORDER BY id LIMIT " BATCH),
				 8, params, &rows, &err))
			goto failed;
		for (i = 0; i < rows.nrows; i++) {
			if (!replay_row(&r, &rows, i, &err)) {
				pn_table_free(&rows);
				goto failed;
			}
			r.n++;
			pn_arena_reset(r.a);
			if (tty && (r.n % 10 == 0 || r.n == total)
			    && pn_now_us() - t0 > PROGRESS_AFTER_US) {
				progress_bar(r.n, total > r.n ? total : r.n);
				shown = true;
			}
		}
		got = rows.nrows;
		if (got > 0)
			snprintf(last, sizeof(last), "%s", pn_table_get(&rows, got - 1, "id"));
		pn_table_free(&rows);
		if (got == 0)
			break;
	}
	if (shown)
		fprintf(stderr, "\r\033[K");
	pn_table_optional(&r.out, "order_status");	/* a terminal too narrow: the key matters more */
	pn_table_print(&r.out, fmt, stdout);
	fprintf(fmt == PN_FMT_TABLE ? stdout : stderr,
		"%zu notification%s: %zu verified, %zu not verified, %s%zu need a human%s\n", r.n,
		r.n == 1 ? "" : "s", r.verified, r.unverified,
		r.key_gone ? pn_arena_printf(r.a, "%zu verified by a key no longer configured, ",
					     r.key_gone) : "", r.attention,
		r.mode == MODE_APPLY ? pn_arena_printf(r.a, ", %zu applied now", r.applied)
		: r.mode == MODE_DRY_RUN ? " (dry run: nothing changed)" : "");
	rc = r.unverified ? PN_EXIT_UNVERIFIED : r.key_gone ? PN_EXIT_KEY_GONE
	     : r.attention ? PN_EXIT_ATTENTION : PN_EXIT_OK;
	goto done;
usage:
	rc = PN_EXIT_USAGE;
	goto done;
failed:
	fprintf(stderr, "paynotify: %s\n", err.msg);
done:
	free(since);
	free(until);
	if (r.curl)
		curl_easy_cleanup(r.curl);
	if (r.curl_global)
		curl_global_cleanup();
	PQfinish(r.conn);
	pn_table_free(&r.out);
	pn_arena_free(r.a);
	pn_cfg_free(r.cfg);
	return rc;
}

const struct pn_cmd pn_cmd_replay = {
	"replay", "[filters] [--dry-run|--apply|--to URL]",
	"re-verify stored notifications; report, apply or re-deliver", replay_exec, help,
};

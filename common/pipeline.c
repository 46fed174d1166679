/*
 * pipeline.c: read, route, verify, store, answer, log.
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "addr.h"
#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "pipeline.h"

static int64_t
wall_clock(void)
{
	return (int64_t)time(NULL);
}

void
pn_receiver_init(struct pn_receiver *r, const struct pn_provider *provider,
		 struct pn_config *cfg)
{
	memset(r, 0, sizeof(*r));
	r->provider = provider;
	r->cfg = cfg;
	if (cfg)
		r->store = pn_store_new(cfg->conninfo, cfg->statement_timeout_ms,
					cfg->connect_timeout_s, provider->program);
	if (cfg)
		pn_store_set_prepared(r->store, cfg->prepared_statements);
	r->arena = pn_arena_new();
	r->clock = wall_clock;
}

void
pn_receiver_destroy(struct pn_receiver *r)
{
	if (r->app != NULL && r->provider != NULL && r->provider->app_free != NULL)
		r->provider->app_free(r->app);
	pn_store_free(r->store);
	pn_arena_free(r->arena);
	pn_buf_free(&r->res.body);
	memset(r, 0, sizeof(*r));
}

/* The headers kept with the raw body, as a JSON object (malloc'd). */
static char *
raw_headers_json(const struct pn_provider *p, const struct pn_request *req)
{
	json_t *obj = json_object();
	const char *const *h;
	char   *out;

	json_t *v;

	/* json_string() refuses invalid UTF-8: such a header is not kept. */
	if (req->content_type && (v = json_string(req->content_type)) != NULL)
		json_object_set_new(obj, "Content-Type", v);
	for (h = p->keep_headers; h && *h; h++) {
		const struct pn_header *hd = pn_request_header(req, *h);

		if (hd && (v = json_string(hd->value)) != NULL)
			json_object_set_new(obj, *h, v);
	}
	out = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(obj);
	return out;
}

/*
 * Copy an address-like value for the log: at most sz - 1 bytes of printable
 * ASCII, anything else replaced by '?', "..." at the end when cut.  The
 * log escapes again; this bounds what a client can put on the line.
 */
static const char *
log_value(char *dst, size_t sz, const char *src)
{
	size_t	i;

	if (src == NULL)
		return NULL;
	for (i = 0; i < sz - 1 && src[i]; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[i] = '\0';
	if (src[i] != '\0' && sz > 4)
		memcpy(dst + sz - 4, "...", 4);
	return dst;
}

/* Is this GET for the status path: [metrics] status_path or status_path/<provider>? */
static bool
is_status_path(const struct pn_receiver *r, const struct pn_request *req)
{
	const char *conf = r->cfg->status_path, *path = req->path_info;
	size_t	plen, wlen;

	if (conf == NULL)
		return false;
	if (*path == '\0' && req->request_uri != NULL)
		path = req->request_uri;	/* no PATH_INFO: Apache's mod_proxy_fcgi */
	plen = strcspn(path, "?");
	wlen = strlen(conf);
	if (plen == wlen)
		return strncmp(path, conf, wlen) == 0;
	return plen == wlen + 1 + strlen(r->provider->name) && strncmp(path, conf, wlen) == 0
	    && path[wlen] == '/'
	    && strncmp(path + wlen + 1, r->provider->name, plen - wlen - 1) == 0;
}

/* A request answered in the provider's failure form: outcome and why in the log line. */
static void
reject(struct pn_receiver *r, int variant, struct pn_reqlog *rl, int status, const char *outcome,
       const char *why, const char *answer)
{
	rl->outcome = outcome;
	rl->reason = why;
	r->provider->answer(variant, &r->res, status, answer);
}

/*
 * A combine payment (ev->nsubs > 0): stored in one transaction; the log
 * line says what became of each sub-order ("applied WX-1@shop-a,
 * merchant_mismatch WX-3", "duplicate" when the envelope and every
 * sub-order were stored before).
 */
static bool
ingest_combined(struct pn_receiver *r, const struct pn_site *site, const struct pn_event *ev,
		const char *headers_json, const struct pn_request *req, struct pn_reqlog *rl,
		struct pn_err *err)
{
	struct pn_ingest_result *ir = pn_arena_alloc(r->arena, (ev->nsubs + 1) * sizeof(*ir));
	struct pn_buf b = PN_BUF_INIT;
	bool	all_dup;
	size_t	i;

	if (!pn_store_ingest_combined(r->store, site->name, r->provider->name, ev, headers_json,
				      req->body, req->body_len, r->arena, ir, err))
		return false;
	all_dup = ir[0].duplicate;
	pn_buf_printf(&b, "combine payment, %zu sub-orders:", ev->nsubs);
	for (i = 0; i < ev->nsubs; i++) {
		const struct pn_event *sub = &ev->subs[i];

		all_dup = all_dup && ir[i + 1].duplicate;
		pn_buf_printf(&b, "%s %s %.64s%s%.64s", i ? "," : "",
			      ir[i + 1].duplicate ? "duplicate" : ir[i + 1].outcome,
			      sub->order_id ? sub->order_id : "-", sub->site ? "@" : "",
			      sub->site ? sub->site : "");
	}
	rl->notification_id = ir[0].notification_id;
	rl->outcome = all_dup ? "duplicate" : "combined";
	rl->reason = pn_arena_strndup(r->arena, (const char *)b.data, b.len);
	pn_buf_free(&b);
	return true;
}

void
pn_pipeline_handle(struct pn_receiver *r, struct pn_io *io)
{
	const struct pn_provider *p = r->provider;
	struct pn_reqlog rl;
	struct pn_request req;
	struct pn_event ev;
	struct pn_ingest_result ir;
	struct pn_err err;
	const struct pn_site *site = NULL;
	char   *headers_json = NULL;
	int64_t	t0 = pn_now_us();
	int	status, variant = 0;
	enum pn_read_rc rc;
	bool	counted = true;		/* status-path scrapes are not counted */
	enum pn_reject rejected = PN_REJECT_DEFAULT;	/* DEFAULT: not a rejection */
	char	client[64], forwarded[PN_LOG_FORWARDED_MAX];

	memset(&rl, 0, sizeof(rl));
	memset(&req, 0, sizeof(req));
	err.msg[0] = '\0';
	rl.provider = p->name;
	pn_event_init(&ev);
	/* Every line names the client, rejected ones above all (issue 13). */
	rl.client = log_value(client, sizeof(client), io->param(io->ctx, "REMOTE_ADDR"));
	if (r->cfg != NULL && r->cfg->ntrusted_proxies > 0
	    && pn_addr_match(r->cfg->trusted_proxies, r->cfg->ntrusted_proxies, rl.client))
		rl.forwarded = log_value(forwarded, sizeof(forwarded), io->param(io->ctx,
			r->cfg->forwarded_header == PN_FWD_FORWARDED ? "HTTP_FORWARDED"
			: "HTTP_X_FORWARDED_FOR"));

	if (r->cfg == NULL) {
		/* CGI with a broken configuration: ask the provider to retry. */
		reject(r, p->variant ? p->variant(&req) : 0, &rl, 503, "unavailable",
		       "configuration not loaded", "service unavailable");
		goto respond;
	}

	rc = pn_request_read(io, (size_t)r->cfg->max_body_bytes, r->arena, &req, &err);
	/* the provider's form of this request, told once (a partial read too) */
	if (p->variant != NULL)
		variant = p->variant(&req);
	if (rc != PN_READ_OK) {
		status = rc == PN_READ_TOO_LARGE ? 413 : rc == PN_READ_HEADERS_TOO_LARGE ? 431
		    : rc == PN_READ_TIMEOUT ? 408 : 400;
		if (req.path_info != NULL)	/* read before the headers and the body */
			rl.site = pn_request_site(&req, r->arena);
		rejected = status == 413 || status == 431 ? PN_REJECT_TOO_LARGE
		    : status == 408 ? PN_REJECT_TIMEOUT : PN_REJECT_BAD_REQUEST;
		reject(r, variant, &rl, status, "rejected", err.msg,
		       status == 413 ? "body too large" : status == 408 ? "request timeout"
		       : "bad request");
		goto respond;
	}
	rl.site = pn_request_site(&req, r->arena);
	if ((strcmp(req.method, "GET") == 0 || strcmp(req.method, "HEAD") == 0)
	    && is_status_path(r, &req)) {
		/* Live counters for monitoring (docs/OPERATIONS.md "Live metrics"). */
		rl.site = NULL;
		rl.outcome = "status";
		counted = false;
		if (!pn_metrics_live()) {
			status = 404;
			rl.reason = "no live metrics under CGI (use paynotify stats)";
			pn_response_set(&r->res, status, "text/plain",
					"no live metrics under CGI: use paynotify stats\n");
		} else if (!pn_addr_match(r->cfg->status_allow, r->cfg->nstatus_allow,
					  req.remote_addr)) {
			status = 403;
			rl.reason = "client not in [metrics] allow";
			pn_response_set(&r->res, status, "text/plain", "forbidden\n");
		} else {
			bool db_up = pn_store_ping(r->store, &err);

			status = 200;
			if (!db_up)
				rl.reason = err.msg;
			pn_response_set(&r->res, status, "text/plain; version=0.0.4; charset=utf-8",
					NULL);
			pn_metrics_render(&r->res.body, db_up);
		}
		goto respond;
	}
	if (strcmp(req.method, "GET") == 0 || strcmp(req.method, "HEAD") == 0) {
		/* Health check for load balancers: never touches orders. */
		rl.site = NULL;
		if (pn_store_ping(r->store, &err)) {
			status = 200;
			rl.outcome = "health";
			pn_response_set(&r->res, status, "text/plain", "ok\n");
		} else {
			status = 503;
			rl.outcome = "health";
			rl.reason = err.msg;
			pn_response_set(&r->res, status, "text/plain", "database unavailable\n");
		}
		goto respond;
	}
	if (strcmp(req.method, "POST") != 0) {
		rejected = PN_REJECT_METHOD;
		reject(r, variant, &rl, 405, "rejected",
		       pn_arena_printf(r->arena, "method %.16s not allowed", req.method),
		       "method not allowed");
		goto respond;
	}
	site = pn_cfg_site(r->cfg, rl.site);
	if (site == NULL || !pn_provider_configured(p, site)) {
		rejected = PN_REJECT_UNKNOWN_SITE;
		reject(r, variant, &rl, 404, "rejected", rl.site == NULL ? "no site in PATH_INFO"
		       : site == NULL ? "unknown site" : "provider not configured for this site",
		       "unknown site");
		goto respond;
	}
	if (site->disabled != NULL) {
		/* its keys could not be loaded: the provider retries until fixed */
		reject(r, variant, &rl, 503, "unavailable",
		       pn_arena_printf(r->arena, "site %s is disabled: %s", site->name,
				       site->disabled), "temporarily unavailable, retry later");
		goto respond;
	}

	{
		struct pn_verify_ctx vc = {&req, site, r->arena, r->clock(), true, variant, r->cfg};

		switch (p->verify(&vc, &ev, &err)) {
		case PN_VERIFIED:
			/* signed and fresh: the only source of the skew gauge */
			if (ev.signed_time != 0)
				pn_metrics_skew(site->name, vc.now - ev.signed_time);
			break;
		case PN_MALFORMED:
			rejected = ev.reject != PN_REJECT_DEFAULT ? ev.reject : PN_REJECT_MALFORMED;
			reject(r, variant, &rl, 400, "rejected", err.msg, "malformed notification");
			goto respond;
		case PN_UNVERIFIED:
		default:
			rejected = ev.reject != PN_REJECT_DEFAULT ? ev.reject
			    : PN_REJECT_BAD_SIGNATURE;
			reject(r, variant, &rl, PN_UNVERIFIED_STATUS, "rejected", err.msg,
			       "signature verification failed");
			goto respond;
		}
	}
	rl.dedup_key = ev.dedup_key;
	rl.order_id = ev.order_id;
	rl.key_id = ev.key_id;

	headers_json = raw_headers_json(p, &req);
	if (ev.nsubs > 0) {
		/* a combine payment: every sub-order in one transaction, then the answer */
		if (!ingest_combined(r, site, &ev, headers_json, &req, &rl, &err)) {
			reject(r, variant, &rl, 503, "unavailable", err.msg,
			       "temporarily unavailable, retry later");
			goto respond;
		}
		pn_metrics_ingested();
		/* a combine payment is a type with handling (its envelope's type;
		 * each sub-order's outcome is its own row's) */
		pn_metrics_event(site->name, ev.event_type, true);
		p->answer(variant, &r->res, 200, NULL);
		goto respond;
	}
	if (!pn_store_ingest(r->store, site->name, p->name, &ev, headers_json, req.body,
			     req.body_len, &ir, &err)) {
		/* Nothing is known to be committed: the provider must retry. */
		reject(r, variant, &rl, 503, "unavailable", err.msg,
		       "temporarily unavailable, retry later");
		goto respond;
	}
#ifdef PN_FAULT_INJECTION
	/*
	 * Test-only crash point (tests/faults, docs/RELIABILITY.md): compiled
	 * only into tests/faults/paynotify-stripe-crashpoint, never into an
	 * installed receiver.  The commit is done; die before any byte of the
	 * answer is written, as a kill -9 or an OOM kill at the worst moment.
	 */
	{
		const char *k = getenv("PN_TEST_CRASH_AFTER_COMMIT");

		if (k && *k && !ir.duplicate && strstr(ev.dedup_key, k) != NULL)
			raise(SIGKILL);
	}
#endif
	pn_metrics_ingested();
	pn_metrics_event(site->name, ev.event_type,
			 ev.flag == NULL || strcmp(ev.flag, "unhandled") != 0);
	status = 200;
	rl.notification_id = ir.notification_id;
	rl.outcome = ir.duplicate ? "duplicate" : pn_arena_strdup(r->arena, ir.outcome);
	if (ev.flag)
		rl.reason = ev.flag_detail;
	else if (!ir.duplicate && strcmp(ir.outcome, "applied") != 0
		 && strcmp(ir.outcome, "ignored") != 0)
		rl.reason = pn_arena_printf(r->arena, "%s%sorder status %s",
					    ir.detail ? ir.detail : "", ir.detail ? "; " : "",
					    ir.order_status[0] ? ir.order_status : "(none)");
	p->answer(variant, &r->res, status, NULL);

respond:
	rl.status = r->res.status;
	if (!pn_response_write(io, &r->res))
		pn_log(PN_LOG_WARNING, "could not write the answer for site %s (client gone?)",
		       rl.site ? rl.site : "-");
	rl.micros = pn_now_us() - t0;
	if (counted) {
		if (site == NULL && r->cfg != NULL)
			site = pn_cfg_site(r->cfg, rl.site);
		pn_metrics_request(site ? site->name : NULL, rl.site != NULL, rl.outcome,
				   rl.status);
		if (rejected != PN_REJECT_DEFAULT)
			pn_metrics_rejected(site ? site->name : NULL, rl.site != NULL, rejected);
	}
	pn_log_request(&rl);
	free(headers_json);
	pn_arena_reset(r->arena);
}

void
pn_pipeline_after_answer(struct pn_receiver *r)
{
	struct pn_err err;

	err.msg[0] = '\0';
	if (r->store != NULL && !pn_store_send_wakeup(r->store, &err))
		pn_log(PN_LOG_WARNING, "%s (listeners learn of it from the feed)", err.msg);
}

/*
 * pipeline.c: read, route, verify, store, answer, log: pn_pipeline_handle()
 * runs one step after the other over a struct handling, each step either
 * leaving the request to the next or answering it.
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

/*
 * One request on its way through the pipeline: what each step of
 * pn_pipeline_handle() reads and leaves for the next ones.
 */
struct handling {
	struct pn_receiver *r;
	struct pn_io *io;
	const struct pn_provider *p;
	struct pn_reqlog rl;		/* the log line */
	struct pn_request req;
	struct pn_event ev;
	struct pn_err err;
	const struct pn_site *site;	/* routed to; NULL until then */
	char   *headers_json;		/* kept with the raw body (malloc'd) */
	int64_t	t0;
	int	variant;		/* the provider's form of the request */
	bool	counted;		/* status-path scrapes are not counted */
	enum pn_reject rejected;	/* PN_REJECT_DEFAULT: not a rejection */
	char	client[64], forwarded[PN_LOG_FORWARDED_MAX];
};

/* A request answered in the provider's failure form: outcome and why in the log line. */
static void
reject(struct handling *h, int status, const char *outcome, const char *why, const char *answer)
{
	h->rl.outcome = outcome;
	h->rl.reason = why;
	h->p->answer(h->variant, &h->r->res, status, answer);
}

/* Start: the log line names the client, rejected requests above all (issue 13). */
static void
begin(struct handling *h, struct pn_receiver *r, struct pn_io *io)
{
	const struct pn_config *cfg = r->cfg;

	memset(h, 0, sizeof(*h));
	h->r = r;
	h->io = io;
	h->p = r->provider;
	h->t0 = pn_now_us();
	h->counted = true;
	h->rejected = PN_REJECT_DEFAULT;
	h->rl.provider = h->p->name;
	pn_event_init(&h->ev);
	h->rl.client = log_value(h->client, sizeof(h->client), io->param(io->ctx, "REMOTE_ADDR"));
	if (cfg != NULL && cfg->ntrusted_proxies > 0
	    && pn_addr_match(cfg->trusted_proxies, cfg->ntrusted_proxies, h->rl.client))
		h->rl.forwarded = log_value(h->forwarded, sizeof(h->forwarded),
					    io->param(io->ctx, cfg->forwarded_header
						      == PN_FWD_FORWARDED ? "HTTP_FORWARDED"
						      : "HTTP_X_FORWARDED_FOR"));
}

/* Read the request whole (headers and body, bounded); false: answered. */
static bool
read_request(struct handling *h)
{
	struct pn_receiver *r = h->r;
	enum pn_read_rc rc;
	int	status;

	if (r->cfg == NULL) {
		/* CGI with a broken configuration: ask the provider to retry. */
		h->variant = h->p->variant ? h->p->variant(&h->req) : 0;
		reject(h, 503, "unavailable", "configuration not loaded", "service unavailable");
		return false;
	}
	rc = pn_request_read(h->io, (size_t)r->cfg->max_body_bytes, r->arena, &h->req, &h->err);
	/* the provider's form of this request, told once (a partial read too) */
	if (h->p->variant != NULL)
		h->variant = h->p->variant(&h->req);
	if (rc == PN_READ_OK)
		return true;
	status = rc == PN_READ_TOO_LARGE ? 413 : rc == PN_READ_HEADERS_TOO_LARGE ? 431
	    : rc == PN_READ_TIMEOUT ? 408 : 400;
	if (h->req.path_info != NULL)	/* read before the headers and the body */
		h->rl.site = pn_request_site(&h->req, r->arena);
	h->rejected = status == 413 || status == 431 ? PN_REJECT_TOO_LARGE
	    : status == 408 ? PN_REJECT_TIMEOUT : PN_REJECT_BAD_REQUEST;
	reject(h, status, "rejected", h->err.msg, status == 413 ? "body too large"
	       : status == 408 ? "request timeout" : "bad request");
	return false;
}

/* The status path: live counters for monitoring (docs/OPERATIONS.md "Live metrics"). */
static void
answer_status(struct handling *h)
{
	struct pn_receiver *r = h->r;

	h->rl.site = NULL;
	h->rl.outcome = "status";
	h->counted = false;
	if (!pn_metrics_live()) {
		h->rl.reason = "no live metrics under CGI (use paynotify stats)";
		pn_response_set(&r->res, 404, "text/plain",
				"no live metrics under CGI: use paynotify stats\n");
	} else if (!pn_addr_match(r->cfg->status_allow, r->cfg->nstatus_allow,
				  h->req.remote_addr)) {
		h->rl.reason = "client not in [metrics] allow";
		pn_response_set(&r->res, 403, "text/plain", "forbidden\n");
	} else {
		bool db_up = pn_store_ping(r->store, &h->err);

		if (!db_up)
			h->rl.reason = h->err.msg;
		pn_response_set(&r->res, 200, "text/plain; version=0.0.4; charset=utf-8", NULL);
		pn_metrics_render(&r->res.body, db_up);
	}
}

/* Any other GET: the health check for load balancers, which never touches orders. */
static void
answer_health(struct handling *h)
{
	struct pn_receiver *r = h->r;

	h->rl.site = NULL;
	h->rl.outcome = "health";
	if (pn_store_ping(r->store, &h->err))
		pn_response_set(&r->res, 200, "text/plain", "ok\n");
	else {
		h->rl.reason = h->err.msg;
		pn_response_set(&r->res, 503, "text/plain", "database unavailable\n");
	}
}

/*
 * Routing: the status path and the health check (answered here), then a
 * POST to a site configured for this provider and not disabled; false:
 * answered.
 */
static bool
route(struct handling *h)
{
	struct pn_receiver *r = h->r;
	const char *method = h->req.method;
	const struct pn_site *site;

	h->rl.site = pn_request_site(&h->req, r->arena);
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
		if (is_status_path(r, &h->req))
			answer_status(h);
		else
			answer_health(h);
		return false;
	}
	if (strcmp(method, "POST") != 0) {
		h->rejected = PN_REJECT_METHOD;
		reject(h, 405, "rejected", pn_arena_printf(r->arena, "method %.16s not allowed",
							   method), "method not allowed");
		return false;
	}
	h->site = site = pn_cfg_site(r->cfg, h->rl.site);
	if (site == NULL || !pn_provider_configured(h->p, site)) {
		h->rejected = PN_REJECT_UNKNOWN_SITE;
		reject(h, 404, "rejected", h->rl.site == NULL ? "no site in PATH_INFO"
		       : site == NULL ? "unknown site" : "provider not configured for this site",
		       "unknown site");
		return false;
	}
	if (site->disabled != NULL) {
		/* its keys could not be loaded: the provider retries until fixed */
		reject(h, 503, "unavailable", pn_arena_printf(r->arena, "site %s is disabled: %s",
							      site->name, site->disabled),
		       "temporarily unavailable, retry later");
		return false;
	}
	return true;
}

/* The provider's adapter verifies and normalises into h->ev; false: answered. */
static bool
verify(struct handling *h)
{
	struct pn_receiver *r = h->r;
	struct pn_verify_ctx vc = {
		.req = &h->req, .site = h->site, .arena = r->arena, .now = r->clock(),
		.check_freshness = true, .variant = h->variant, .cfg = r->cfg,
	};

	switch (h->p->verify(&vc, &h->ev, &h->err)) {
	case PN_VERIFIED:
		/* signed and fresh: the only source of the skew gauge */
		if (h->ev.signed_time != 0)
			pn_metrics_skew(h->site->name, vc.now - h->ev.signed_time);
		break;
	case PN_MALFORMED:
		h->rejected = h->ev.reject != PN_REJECT_DEFAULT ? h->ev.reject : PN_REJECT_MALFORMED;
		reject(h, 400, "rejected", h->err.msg, "malformed notification");
		return false;
	case PN_UNVERIFIED:
	default:
		h->rejected = h->ev.reject != PN_REJECT_DEFAULT ? h->ev.reject
		    : PN_REJECT_BAD_SIGNATURE;
		reject(h, PN_UNVERIFIED_STATUS, "rejected", h->err.msg,
		       "signature verification failed");
		return false;
	}
	h->rl.dedup_key = h->ev.dedup_key;
	h->rl.order_id = h->ev.order_id;
	h->rl.key_id = h->ev.key_id;
	return true;
}

/*
 * Test-only crash point (tests/faults, docs/RELIABILITY.md): compiled
 * only into tests/faults/paynotify-stripe-crashpoint, never into an
 * installed receiver.  The commit is done; die before any byte of the
 * answer is written, as a kill -9 or an OOM kill at the worst moment.
 */
static void
crash_point(const struct pn_event *ev, const struct pn_ingest_result *ir)
{
#ifdef PN_FAULT_INJECTION
	const char *k = getenv("PN_TEST_CRASH_AFTER_COMMIT");

	if (k && *k && !ir->duplicate && strstr(ev->dedup_key, k) != NULL)
		raise(SIGKILL);
#endif
}

/* Store a combine payment (ev.nsubs > 0): every sub-order in one transaction. */
static void
store_combined(struct handling *h)
{
	if (!ingest_combined(h->r, h->site, &h->ev, h->headers_json, &h->req, &h->rl, &h->err)) {
		reject(h, 503, "unavailable", h->err.msg, "temporarily unavailable, retry later");
		return;
	}
	pn_metrics_ingested();
	/* a combine payment is a type with handling (its envelope's type;
	 * each sub-order's outcome is its own row's) */
	pn_metrics_event(h->site->name, h->ev.event_type, true);
	h->p->answer(h->variant, &h->r->res, 200, NULL);
}

/* Store the event (one transaction), then the answer: success only after the commit. */
static void
store(struct handling *h)
{
	struct pn_receiver *r = h->r;
	const struct pn_event *ev = &h->ev;
	struct pn_ingest_result ir;

	h->headers_json = raw_headers_json(h->p, &h->req);
	if (ev->nsubs > 0) {
		store_combined(h);
		return;
	}
	if (!pn_store_ingest(r->store, h->site->name, h->p->name, ev, h->headers_json,
			     h->req.body, h->req.body_len, &ir, &h->err)) {
		/* Nothing is known to be committed: the provider must retry. */
		reject(h, 503, "unavailable", h->err.msg, "temporarily unavailable, retry later");
		return;
	}
	crash_point(ev, &ir);
	pn_metrics_ingested();
	pn_metrics_event(h->site->name, ev->event_type,
			 ev->flag == NULL || strcmp(ev->flag, "unhandled") != 0);
	h->rl.notification_id = ir.notification_id;
	h->rl.outcome = ir.duplicate ? "duplicate" : pn_arena_strdup(r->arena, ir.outcome);
	if (ev->flag)
		h->rl.reason = ev->flag_detail;
	else if (!ir.duplicate && strcmp(ir.outcome, "applied") != 0
		 && strcmp(ir.outcome, "ignored") != 0)
		h->rl.reason = pn_arena_printf(r->arena, "%s%sorder status %s",
					       ir.detail ? ir.detail : "", ir.detail ? "; " : "",
					       ir.order_status[0] ? ir.order_status : "(none)");
	h->p->answer(h->variant, &r->res, 200, NULL);
}

/* The answer out, then the metrics and the log line; the request's memory goes. */
static void
finish(struct handling *h)
{
	struct pn_receiver *r = h->r;
	struct pn_reqlog *rl = &h->rl;
	const struct pn_site *site = h->site;

	rl->status = r->res.status;
	if (!pn_response_write(h->io, &r->res))
		pn_log(PN_LOG_WARNING, "could not write the answer for site %s (client gone?)",
		       rl->site ? rl->site : "-");
	rl->micros = pn_now_us() - h->t0;
	if (h->counted) {
		if (site == NULL && r->cfg != NULL)
			site = pn_cfg_site(r->cfg, rl->site);
		pn_metrics_request(site ? site->name : NULL, rl->site != NULL, rl->outcome,
				   rl->status);
		if (h->rejected != PN_REJECT_DEFAULT)
			pn_metrics_rejected(site ? site->name : NULL, rl->site != NULL, h->rejected);
	}
	pn_log_request(rl);
	free(h->headers_json);
	pn_arena_reset(r->arena);
}

/* Read, route (status and health answered there), verify, store and answer, log. */
void
pn_pipeline_handle(struct pn_receiver *r, struct pn_io *io)
{
	struct handling h;

	begin(&h, r, io);
	if (read_request(&h) && route(&h) && verify(&h))
		store(&h);
	finish(&h);
}

void
pn_pipeline_after_answer(struct pn_receiver *r)
{
	struct pn_err err;

	err.msg[0] = '\0';
	if (r->store != NULL && !pn_store_send_wakeup(r->store, &err))
		pn_log(PN_LOG_WARNING, "%s (listeners learn of it from the feed)", err.msg);
}

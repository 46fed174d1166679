/*
 * provider.h: what a provider adapter is.
 *
 * Each webhooks/<provider>.c exports one const struct pn_provider.  main()
 * and the request pipeline exist once (common/pipeline.c, common/main.c);
 * an adapter only knows how to verify and normalise its provider's
 * notification and how to answer in the provider's exact form.
 */
#ifndef PN_PROVIDER_H
#define PN_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "http.h"
#include "util.h"

struct pn_receiver;	/* pipeline.h */

enum pn_verdict {
	PN_VERIFIED = 0,	/* event filled in; store it */
	PN_MALFORMED,		/* 400: not a notification of this provider's form */
	PN_UNVERIFIED,		/* signature/MAC/JWT invalid, stale, probe, unknown key */
};

struct pn_verify_ctx {
	const struct pn_request *req;
	const struct pn_site *site;
	struct pn_arena *arena;
	int64_t	now;			/* Unix seconds, injectable for tests */
	bool	check_freshness;	/* false when replaying history */
	int	variant;		/* the provider's variant(req); 0: verify decides */
	/*
	 * The whole installation, or NULL.  Lets an adapter tell a sibling
	 * site's event (Stripe: another configured site's marker) from a
	 * stranger's, and route each part of a notification that names
	 * several merchants (a WeChat Pay combine payment) to the site whose
	 * keys verify it too and whose identity it carries.  NULL (replay,
	 * tests): only site; every other marker is a stranger's.
	 */
	const struct pn_config *cfg;
};

/* The HTTP status of PN_UNVERIFIED, for every provider. */
#define PN_UNVERIFIED_STATUS 400

struct pn_provider {
	const char *name;		/* "alipay": config prefix, path segment, provider column */
	const char *program;		/* "paynotify-alipay" */
	/* Headers kept with the raw body (for replay and re-delivery). */
	const char *const *keep_headers;
	/* Its configuration declarations (webhooks/<provider>_cfg.c): a site
	 * is configured for it when it sets any of its keys. */
	const struct pn_cfg_provider *keys;
	/*
	 * Which of the provider's forms the request is in (WeChat Pay: API v3
	 * or v2), told once per request by the pipeline, before any answer,
	 * and given to verify (ctx->variant) and answer.  NULL: one form
	 * only, variant 0.
	 */
	int	(*variant)(const struct pn_request *req);
	/* Verify the raw request and normalise it into ev. */
	enum pn_verdict (*verify)(const struct pn_verify_ctx *ctx, struct pn_event *ev,
				  struct pn_err *err);
	/* Fill res with the provider's success (2xx) or failure form, in the
	 * request's variant. */
	void	(*answer)(int variant, struct pn_response *res, int status, const char *reason);
	/*
	 * A FastCGI program that is no receiver (`paynotify confirm`): the
	 * server loop (common/server.c) hands it each request instead of the
	 * notification pipeline; it reads the request from io and writes its
	 * answer there, its own state in r->app (made when it needs it,
	 * freed by app_free when the receiver state goes: a reload, a stop).
	 * NULL for the receivers: pn_pipeline_handle().
	 */
	void	(*handle)(struct pn_receiver *r, struct pn_io *io);
	void	(*app_free)(void *app);
};

/* pn_provider_alipay, ...: one per line of webhooks/providers.mk (each
 * module's receiver.c defines its own). */
#define PN_MODULE(name) extern const struct pn_provider pn_provider_##name;
#include "provider_list.h"
#undef PN_MODULE

/* Is p configured for site (any of its keys set)? */
static inline bool
pn_provider_configured(const struct pn_provider *p, const struct pn_site *site)
{
	return pn_cfg_configured(site, p->keys);
}

/* Look a provider up by name (for the admin command); NULL if unknown. */
const struct pn_provider *pn_provider_find(const char *name);
extern const struct pn_provider *const pn_providers[];

#endif

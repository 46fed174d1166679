/*
 * 2c2p.c: 2C2P payment notifications (paynotify-2c2p): the descriptor.
 *
 * Two generations, chosen per site by 2c2p.api, never by the request:
 * PGW v4 (jwt, the default; 2c2p_jwt.c) and the legacy Redirect API
 * (redirect; 2c2p_redirect.c).  Both answer as 2C2P's sample handler does.
 *
 * A genuine notification for another merchantID / merchant_id is stored as
 * merchant_mismatch and never applied (README "How a notification is
 * handled").  See docs/2C2P.md for every decision.
 */
#include "config.h"

#include <string.h>

#include "2c2p.h"
#include "2c2p_int.h"
#include "adapter.h"
#include "provider.h"

static const char *const twoc2p_keep_headers[] = {NULL};

/* merchantID (v4) or merchant_id (legacy) must be the site's 2c2p.merchant_id. */
void
pn_2c2p_check_merchant(struct pn_arena *a, const struct pn_site *site, const char *field,
		       const char *got, struct pn_event *ev)
{
	if (got == NULL || strcmp(got, site->twoc2p.merchant_id) != 0)
		pn_flag_merchant(a, ev, field, 32, got, site, site->twoc2p.merchant_id);
}

static PN_WUR enum pn_verdict
twoc2p_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	if (ctx->site->twoc2p.api == PN_2C2P_REDIRECT)
		return pn_2c2p_verify_redirect(ctx, ev, err);
	return pn_2c2p_verify_v4(ctx, ev, err);
}

/* 2C2P's own sample handler: 200 {"status":"received"}, 400 {"error":...}. */
static void
twoc2p_answer(int variant, struct pn_response *res, int status, const char *reason)
{
	if (status >= 200 && status < 300)
		pn_response_set(res, status, "application/json", "{\"status\":\"received\"}");
	else
		pn_answer_error(res, status, reason);
}

const struct pn_provider pn_provider_2c2p = {
	.name = "2c2p",
	.program = "paynotify-2c2p",
	.keep_headers = twoc2p_keep_headers,
	.keys = &pn_twoc2p_cfg_keys,
	.verify = twoc2p_verify,
	.answer = twoc2p_answer,
};


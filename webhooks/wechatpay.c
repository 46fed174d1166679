/*
 * wechatpay.c: WeChat Pay notifications, API v3 and API v2
 * (paynotify-wechatpay): the descriptor.  One program serves both
 * generations for a site; the request tells them apart
 * (pn_wechatpay_is_v2, once per request as the descriptor's variant): an
 * XML body is v2, anything else is v3.  verify dispatches to
 * wechatpay_v3.c or wechatpay_v2.c, answer writes that generation's form.
 * What both generations share is here too (wechatpay_int.h).
 * docs/WECHATPAY.md lists what was checked against the official SDKs and
 * every decision taken.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "crypto.h"
#include "money.h"
#include "provider.h"
#include "wechatpay_cfg.h"
#include "wechatpay.h"
#include "wechatpay_int.h"

static const char *const wechatpay_keep_headers[] = {
	"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Signature", "Wechatpay-Serial",
	"Wechatpay-Signature-Type", NULL};

/* ---- telling v2 from v3 --------------------------------------------------- */

static bool
is_blank(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool
pn_wechatpay_is_v2(const struct pn_request *req)
{
	size_t	i = 0;

	if (req == NULL)
		return false;
	if (req->body != NULL) {
		/* a UTF-8 byte order mark, then blanks */
		if (req->body_len >= 3 && memcmp(req->body, "\xEF\xBB\xBF", 3) == 0)
			i = 3;
		while (i < req->body_len && is_blank(req->body[i]))
			i++;
		if (i < req->body_len)
			return req->body[i] == '<';
	}
	/* No body (unread, too large): the headers are all we have. */
	if (pn_request_header(req, "Wechatpay-Signature") != NULL
	    || pn_request_header(req, "Wechatpay-Serial") != NULL)
		return false;
	return req->content_type != NULL && strcasestr(req->content_type, "xml") != NULL;
}

/* ---- shared by v3 and v2 ---------------------------------------------------- */

/* Currency as sent, CNY when absent (WeChat Pay's default); false if unknown. */
bool
pn_wechatpay_currency(struct pn_arena *a, const char *sent, const char **out)
{
	char	cur[4];

	if (sent == NULL || *sent == '\0') {
		*out = "CNY";
		return true;
	}
	if (!pn_money_currency(sent, cur))
		return false;
	*out = pn_arena_strdup(a, cur);
	return true;
}

/* Is the notification addressed to this site?  (wechatpay_int.h) */
void
pn_wechatpay_check_merchant(struct pn_arena *a, const struct pn_site *site,
			    const struct pn_wechatpay_merchant *m, bool need_appid,
			    struct pn_event *ev)
{
	const char *mch = nonempty(m->sub_mchid) ? m->sub_mchid : nonempty(m->mchid);
	const char *app = nonempty(m->sub_appid) ? m->sub_appid : nonempty(m->appid);
	const char *mch_name = nonempty(m->sub_mchid) ? "sub_mchid" : m->mchid_name;

	if (!streq(mch, site->wechatpay.mchid))
		pn_flag_merchant(a, ev, mch_name, 32, mch, site, site->wechatpay.mchid);
	else if ((app != NULL || need_appid) && !streq(app, site->wechatpay.appid))
		pn_flag_merchant(a, ev, nonempty(m->sub_appid) ? "sub_appid" : m->appid_name, 40,
				 app, site, site->wechatpay.appid);
}

void
pn_wechatpay_check_attach(struct pn_arena *a, const struct pn_config *cfg,
			  const struct pn_site *site, const char *attach, size_t attach_len,
			  struct pn_event *ev)
{
	pn_check_marker(a, cfg, site, &pn_wechatpay_cfg_keys, "attach", attach, attach_len, ev);
}

/*
 * wechatpay.site_attach on a combine sub-order (its own attach, signed with
 * the rest of the notification).  A sub-order that stayed at the request's
 * site but whose attach is the marker of a sibling (a site of the same
 * identity: it holds the key that verified this notification, which the
 * loader's shared-identity check requires) is that sibling's: routed there,
 * so that its payment is applied where it belongs and never dropped as
 * foreign.  Otherwise the marker is checked at the site the sub-order was
 * routed to, exactly as for a single payment.
 */
void
pn_wechatpay_sub_marker(const struct pn_verify_ctx *ctx, const char *attach, struct pn_event *sub)
{
	const struct pn_site *at = sub->site ? pn_cfg_site(ctx->cfg, sub->site) : ctx->site;
	const struct pn_site *sib;
	size_t	len = attach ? strlen(attach) : 0;

	if (at == NULL)
		return;
	if (sub->site == NULL && sub->flag == NULL && attach != NULL && ctx->cfg != NULL
	    && (sib = pn_marker_sibling(ctx->cfg, ctx->site, &pn_wechatpay_cfg_keys, attach,
					len)) != NULL) {
		sub->site = sib->name;
		return;
	}
	pn_wechatpay_check_attach(ctx->arena, ctx->cfg, at, attach, len, sub);
}

/*
 * Keys are indexed (unique per site and provider): a key built from an
 * unusually long provider field is replaced by its SHA-256, so that it can
 * never make the insert fail and the provider retry forever.
 */
const char *
pn_wechatpay_bound_key(struct pn_arena *a, const char *key)
{
	struct pn_iov iov = {key, strlen(key)};
	unsigned char md[64];
	size_t	mdlen = 0;

	if (iov.len <= PN_WECHATPAY_MAX_KEY || !pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen))
		return key;
	return pn_arena_printf(a, "sha256:%s", pn_hex_encode(a, md, mdlen, false));
}

const char *
pn_wechatpay_noid_key(struct pn_arena *a, const struct pn_iov *parts, size_t n)
{
	unsigned char md[64];
	size_t	mdlen = 0;

	if (!pn_digest(PN_MD_SHA256, parts, n, md, &mdlen))
		pn_fatal("could not compute SHA-256");
	return pn_arena_printf(a, "noid:%s", pn_hex_encode(a, md, mdlen, false));
}

void
pn_wechatpay_flag_missing_id(struct pn_event *ev, const char *detail)
{
	if (ev->flag != NULL)
		return;
	ev->flag = PN_FLAG_MISSING_ID;
	ev->flag_detail = detail;
}

/* Does site t carry this identity (merchant id and appid both)? */
static bool
site_is(const struct pn_site *t, const char *mch, const char *app)
{
	return streq(mch, t->wechatpay.mchid) && streq(app, t->wechatpay.appid);
}

void
pn_wechatpay_route(struct pn_wechatpay_router *r, const struct pn_wechatpay_merchant *m,
		   struct pn_event *sub)
{
	const struct pn_verify_ctx *ctx = r->ctx;
	const struct pn_config *cfg = ctx->cfg;
	const char *mch = nonempty(m->sub_mchid) ? m->sub_mchid : nonempty(m->mchid);
	const char *app = nonempty(m->sub_appid) ? m->sub_appid : nonempty(m->appid);
	const char *unverified = NULL;
	size_t	i;

	sub->key_id = r->own_key_id;
	if (site_is(ctx->site, mch, app))
		return;		/* the request's own site: no flag */
	for (i = 0; cfg != NULL && i < cfg->nsites; i++) {
		const struct pn_site *t = &cfg->sites[i];

		if (t == ctx->site || t->disabled != NULL
		    || !pn_cfg_configured(t, &pn_wechatpay_cfg_keys) || !site_is(t, mch, app))
			continue;
		if (r->state == NULL) {
			r->state = pn_arena_alloc(ctx->arena, cfg->nsites);
			memset(r->state, 0, cfg->nsites);
			r->key_ids = pn_arena_alloc(ctx->arena, cfg->nsites * sizeof(*r->key_ids));
		}
		if (r->state[i] == 0)
			r->state[i] = r->verified(r->arg, t, &r->key_ids[i]) ? 1 : -1;
		if (r->state[i] > 0) {
			sub->site = t->name;
			sub->key_id = r->key_ids[i];
			return;
		}
		if (unverified == NULL)
			unverified = t->name;
	}
	/* No site of ours with keys that verified it: for a human. */
	pn_wechatpay_check_merchant(ctx->arena, ctx->site, m, true, sub);
	if (sub->flag == NULL)	/* cannot happen: the identity is not the site's */
		pn_flag_merchant(ctx->arena, sub, m->mchid_name, 32, mch, ctx->site,
				 ctx->site->wechatpay.mchid);
	if (unverified != NULL)
		sub->flag_detail = pn_arena_printf(ctx->arena, "%s; site %s has this merchant id "
						   "and appid, but its keys did not verify this "
						   "notification", sub->flag_detail, unverified);
}

/* ---- the adapter ----------------------------------------------------------- */

/* Once per request, by the pipeline: ctx->variant and answer's variant. */
static int
wechatpay_variant(const struct pn_request *req)
{
	return pn_wechatpay_is_v2(req) ? PN_WECHATPAY_V2 : PN_WECHATPAY_V3;
}

static PN_WUR enum pn_verdict
wechatpay_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	/* 0: a caller that does not classify (replay, tests) */
	int	variant = ctx->variant ? ctx->variant : wechatpay_variant(ctx->req);

	return variant == PN_WECHATPAY_V2 ? pn_wechatpay_v2_verify(ctx, ev, err)
	    : pn_wechatpay_v3_verify(ctx, ev, err);
}

/* A reason fit for CDATA: printable ASCII, no ']', bounded. */
static void
cdata_reason(const char *reason, char *out, size_t sz)
{
	size_t o = 0;

	for (; reason && *reason && o + 1 < sz; reason++)
		if (*reason >= 0x20 && *reason < 0x7f && *reason != ']')
			out[o++] = *reason;
	out[o] = '\0';
}

/* v2 reads return_code in the body; v3 reads only the status (2xx = done). */
static void
wechatpay_answer(int variant, struct pn_response *res, int status, const char *reason)
{
	bool	ok = status >= 200 && status < 300;
	char	clean[128];

	if (variant == PN_WECHATPAY_V2) {
		cdata_reason(ok ? "OK" : reason ? reason : "FAIL", clean, sizeof(clean));
		pn_response_set(res, ok ? 200 : status, "text/xml", NULL);
		pn_buf_printf(&res->body, "<xml><return_code><![CDATA[%s]]></return_code>"
			      "<return_msg><![CDATA[%s]]></return_msg></xml>",
			      ok ? "SUCCESS" : "FAIL", clean);
		return;
	}
	if (ok) {
		pn_response_set(res, 204, NULL, NULL);
		return;
	}
	pn_answer_json(res, status, json_pack("{s:s,s:s}", "code", "FAIL", "message",
					      reason ? reason : "failed"),
		       "{\"code\":\"FAIL\",\"message\":\"failed\"}");
}

const struct pn_provider pn_provider_wechatpay = {
	.name = "wechatpay",
	.program = "paynotify-wechatpay",
	.keep_headers = wechatpay_keep_headers,
	.keys = &pn_wechatpay_cfg_keys,
	.variant = wechatpay_variant,
	.verify = wechatpay_verify,
	.answer = wechatpay_answer,
};

/*
 * wechatpay_int.h: between the WeChat Pay adapter's files (wechatpay.c,
 * wechatpay_v3.c, wechatpay_v2.c); not for anything else.
 */
#ifndef PN_WECHATPAY_INT_H
#define PN_WECHATPAY_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "provider.h"

#define PN_WECHATPAY_MAX_FEN INT64_C(1000000000000000)	/* 10^15, as pn_money_parse */
#define PN_WECHATPAY_MAX_KEY 255

/* Non-empty string or NULL. */
static inline const char *
nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

static inline bool
streq(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Currency as sent, CNY when absent (WeChat Pay's default); false if unknown. */
bool pn_wechatpay_currency(struct pn_arena *a, const char *sent, const char **out) PN_WUR;

/*
 * Is the notification addressed to this site?  In service-provider mode
 * (sub_mchid present) the site is the sub-merchant: sub_mchid must be
 * wechatpay.mchid and the appid is sub_appid when present, else the
 * provider's.  appid is compared when present; need_appid makes its
 * absence a mismatch too (payments always carry one, refunds never do).
 */
struct pn_wechatpay_merchant {
	const char *mchid, *sub_mchid, *appid, *sub_appid;
	const char *mchid_name, *appid_name;	/* field names, for the detail */
};
void pn_wechatpay_check_merchant(struct pn_arena *a, const struct pn_site *site,
				 const struct pn_wechatpay_merchant *m, bool need_appid,
				 struct pn_event *ev);

/* A dedup key of at most PN_WECHATPAY_MAX_KEY bytes (else "sha256:<hex>"). */
/*
 * wechatpay.site_attach against the payment's signed attach (v3: the
 * decrypted resource; v2: the signed XML), attach NULL when absent:
 * pn_check_marker().  cfg NULL (paynotify query): a sibling's attach is
 * merchant_mismatch too.
 */
void pn_wechatpay_check_attach(struct pn_arena *a, const struct pn_config *cfg,
			       const struct pn_site *site, const char *attach, size_t attach_len,
			       struct pn_event *ev);
/* A combine sub-order's attach: to the sibling it names, else checked where it
 * was routed (wechatpay.site_attach; after pn_wechatpay_route). */
void pn_wechatpay_sub_marker(const struct pn_verify_ctx *ctx, const char *attach,
			     struct pn_event *sub);
const char *pn_wechatpay_bound_key(struct pn_arena *a, const char *key);

/* "noid:<sha256 hex>" of content: the key of an event no provider id names
 * (PN_FLAG_MISSING_ID), the same for every delivery of the same content. */
const char *pn_wechatpay_noid_key(struct pn_arena *a, const struct pn_iov *parts, size_t n);
/* Flag ev missing_id (unless another flag is set) with a detail. */
void pn_wechatpay_flag_missing_id(struct pn_event *ev, const char *detail);

/*
 * Routing the sub-orders of a combine payment (合单支付).  A sub-order goes
 * to the request's site when its signed identity (sub_mchid, else mchid;
 * sub_appid, else combine_appid) is that site's; else to another site of
 * the installation (ctx->cfg) with that identity whose own keys verify the
 * same notification (verified(), asked once per site); else it is flagged
 * merchant_mismatch under the request's site, for a human.  A site whose
 * keys did not verify the notification never gets anything.
 */
typedef bool (*pn_wechatpay_verified_fn)(void *arg, const struct pn_site *t,
					 const char **key_id);
struct pn_wechatpay_router {
	const struct pn_verify_ctx *ctx;
	pn_wechatpay_verified_fn verified;
	void   *arg;
	const char *own_key_id;		/* what verified it for the request's site */
	signed char *state;		/* per cfg->sites: 0 not asked, 1 verified, -1 not */
	const char **key_ids;
};
void pn_wechatpay_route(struct pn_wechatpay_router *r, const struct pn_wechatpay_merchant *m,
			struct pn_event *sub);

/* The two generations' verify. */
enum pn_verdict pn_wechatpay_v3_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev,
				       struct pn_err *err) PN_WUR;
enum pn_verdict pn_wechatpay_v2_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev,
				       struct pn_err *err) PN_WUR;

#endif

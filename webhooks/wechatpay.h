/*
 * wechatpay.h: the parts of the WeChat Pay adapter that tests and the
 * admin command use directly.
 */
#ifndef PN_WECHATPAY_H
#define PN_WECHATPAY_H

#include <stdbool.h>

#include <jansson.h>

#include "arena.h"
#include "cfg.h"
#include "http.h"
#include "util.h"
#include "event.h"
#include "provider.h"
#include "xml.h"

/* Probe signatures WeChat Pay sends to check that merchants verify. */
#define PN_WECHATPAY_PROBE_PREFIX "WECHATPAY/SIGNTEST/"
#define PN_WECHATPAY_SIGN_TYPE "WECHATPAY2-SHA256-RSA2048"

/* API v2 (XML) or v3 (JSON + Wechatpay-* headers)?  Decided from the body
 * (first non-blank byte '<') and, for an empty body, from the headers;
 * the descriptor's variant (pn_provider.variant) is one of these. */
bool pn_wechatpay_is_v2(const struct pn_request *req);
enum { PN_WECHATPAY_V3 = 1, PN_WECHATPAY_V2 = 2 };

/*
 * The API v2 signature of a flat XML notification, as the official WXPay
 * SDK computes it (WXPayUtil.generateSignature): every field but "sign"
 * whose value is non-empty after trimming, sorted by name (byte order),
 * "k=v" joined by '&' with the trimmed value, then "&key=" and the APIv2
 * key; MD5 or HMAC-SHA256 (keyed with the APIv2 key) in upper-case hex.
 * Returns an arena string, or NULL on an OpenSSL failure.
 */
char *pn_wechatpay_v2_sign(struct pn_arena *a, const struct pn_xml_flat *x,
			   enum pn_wxv2_sign alg, const struct pn_secret *key);
/* The same as bytes: mac (64 bytes) receives *maclen (16 or 32). */
bool pn_wechatpay_v2_mac(struct pn_arena *a, const struct pn_xml_flat *x, enum pn_wxv2_sign alg,
			 const struct pn_secret *key, unsigned char *mac, size_t *maclen) PN_WUR;

/* The AES-256-ECB key for a v2 refund req_info: the 32 ASCII characters of
 * the lower-case hex MD5 of the APIv2 key. */
bool pn_wechatpay_v2_refund_key(const struct pn_secret *key, unsigned char out[32]) PN_WUR;

/*
 * For `paynotify query`: verify the Wechatpay-Timestamp/-Nonce/-Signature/
 * -Serial of ctx->req (an API answer's headers and raw body) exactly as a
 * notification's (platform certificate or public-key mode, freshness when
 * ctx->check_freshness); and normalise a transaction object (as returned by
 * GET /v3/pay/transactions/...) as the resource of an event_type
 * notification, merchant identity checked: the same dedup identity; and
 * a v2 payment result (orderquery answer with result_code and trade_state
 * SUCCESS) as the v2 payment notification.
 */
bool pn_wechatpay_v3_verify_sig(const struct pn_verify_ctx *ctx, const char **key_id,
				struct pn_err *err) PN_WUR;
/*
 * A stored WeChat Pay v2 refund result (ctx->req: its raw body) opened with
 * the site's APIv2 keys and normalised exactly as the receiver does (ev:
 * the same dedup key, order, transaction, amounts); r: the refund's own ids
 * and status (arena strings, NULL when absent).  For `paynotify query`,
 * which confirms it with the signed refundquery answer.
 */
struct pn_wechatpay_v2_refund {
	const char *refund_id;
	const char *out_refund_no;
	const char *refund_status;
};

bool pn_wechatpay_v2_refund_result(const struct pn_verify_ctx *ctx, struct pn_event *ev,
				   struct pn_wechatpay_v2_refund *r, struct pn_err *err) PN_WUR;

void pn_wechatpay_v2_payment(struct pn_arena *a, const struct pn_site *site,
			     const struct pn_xml_flat *x, struct pn_event *ev);
void pn_wechatpay_v3_transaction(struct pn_arena *a, const struct pn_site *site, json_t *p,
				 const char *event_type, struct pn_event *ev);

/*
 * `paynotify query --combine` (admin/query_wechatpay.c): sub-order so of a
 * combine order's answer (root: GET /v3/combine-transactions/out-trade-no/
 * {combine_out_trade_no}, the same fields as the notification's resource),
 * normalised exactly as the notification's sub-order (its dedup key too).
 * True when its signed identity (sub_mchid or mchid, sub_appid or
 * combine_appid) is site's; false: another merchant's sub-order, not for
 * this site.
 */
bool pn_wechatpay_v3_combine_sub(struct pn_arena *a, const struct pn_site *site, json_t *root,
				 json_t *so, const char *event_type, struct pn_event *sub);

#endif

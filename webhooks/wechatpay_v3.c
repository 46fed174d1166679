/*
 * wechatpay_v3.c: WeChat Pay API v3 notifications (JSON, Wechatpay-*
 * headers), as wechatpay-go (core/auth/validators, core/notify) and
 * wechatpay-java (NotificationParser) verify them; the descriptor and the
 * answer are in wechatpay.c, docs/WECHATPAY.md gives every decision.
 *   - Wechatpay-Timestamp, -Nonce, -Signature and -Serial must be present
 *     and non-empty (trimmed); a Wechatpay-Signature-Type other than
 *     WECHATPAY2-SHA256-RSA2048 is refused; probe signatures
 *     (WECHATPAY/SIGNTEST/...) are refused and said to be probes;
 *   - the timestamp must be within wechatpay.tolerance_s of now;
 *   - SHA256withRSA over "timestamp\nnonce\nbody\n" on the raw body, with
 *     the WeChat Pay public key when the serial is wechatpay.public_key_id,
 *     else with the platform certificate of that serial (case-insensitive);
 *   - then resource is opened with AEAD_AES_256_GCM under an APIv3 key
 *     (nonce and associated_data used as their bytes, tag = last 16 bytes).
 * A genuine notification whose merchant identity is not the site's is
 * stored flagged merchant_mismatch and never applied.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "crypto.h"
#include "json.h"
#include "money.h"
#include "wechatpay.h"
#include "wechatpay_int.h"
#include "wechatpay/identity.h"

/* A fen amount from a JSON integer (API v3 fields). */
static bool
fen_json(json_t *obj, const char *path, int64_t *out)
{
	int64_t v;

	if (!pn_json_int(obj, path, &v) || v < 0 || v > PN_WECHATPAY_MAX_FEN)
		return false;
	*out = v;
	return true;
}

struct v3_headers {
	const char *ts, *nonce, *sig, *serial;
	int64_t	t;
};

/* A required Wechatpay-* header, trimmed; NULL (and err) when unusable. */
static const char *
v3_header(const struct pn_request *req, struct pn_arena *a, const char *name, bool required,
	  struct pn_err *err)
{
	const struct pn_header *h = pn_request_header(req, name);
	char   *v;

	if (h != NULL && h->duplicate) {
		pn_err_set(err, "more than one %s header", name);
		return NULL;
	}
	v = h ? pn_trim(pn_arena_strdup(a, h->value)) : NULL;
	if (v == NULL || *v == '\0') {
		if (required)
			pn_err_set(err, "missing or empty %s header", name);
		return NULL;
	}
	return v;
}

static PN_WUR bool
v3_read_headers(const struct pn_request *req, struct pn_arena *a, struct v3_headers *h,
		enum pn_reject *why, struct pn_err *err)
{
	const struct pn_header *st = pn_request_header(req, "Wechatpay-Signature-Type");
	const char *type;

	memset(h, 0, sizeof(*h));
	if ((h->ts = v3_header(req, a, "Wechatpay-Timestamp", true, err)) == NULL
	    || (h->nonce = v3_header(req, a, "Wechatpay-Nonce", true, err)) == NULL
	    || (h->sig = v3_header(req, a, "Wechatpay-Signature", true, err)) == NULL
	    || (h->serial = v3_header(req, a, "Wechatpay-Serial", true, err)) == NULL) {
		*why = PN_REJECT_UNSIGNED;
		return false;
	}
	/* Absent means the one type there is (wechatpay-go's default). */
	type = v3_header(req, a, "Wechatpay-Signature-Type", false, err);
	if ((st != NULL && st->duplicate)
	    || (type != NULL && strcmp(type, PN_WECHATPAY_SIGN_TYPE) != 0)) {
		pn_err_set(err, "unsupported Wechatpay-Signature-Type \"%.48s\" (only %s)",
			   type ? type : "", PN_WECHATPAY_SIGN_TYPE);
		return false;
	}
	/* Probes must fail; saying so keeps on-call from chasing a forgery. */
	if (strncmp(h->sig, PN_WECHATPAY_PROBE_PREFIX, strlen(PN_WECHATPAY_PROBE_PREFIX)) == 0) {
		pn_err_set(err, "WeChat Pay signature probe (Wechatpay-Signature starts with %s): "
			   "rejected as WeChat Pay expects", PN_WECHATPAY_PROBE_PREFIX);
		*why = PN_REJECT_PROBE;
		return false;
	}
	if (strlen(h->ts) > 18 || !pn_parse_i64(h->ts, &h->t)) {
		pn_err_set(err, "invalid Wechatpay-Timestamp \"%.24s\"", h->ts);
		return false;
	}
	return true;
}

/* |now - t| <= tolerance_s: "largest accepted distance" (cfg contract). */
static PN_WUR bool
v3_fresh(const struct pn_verify_ctx *ctx, const struct v3_headers *h, struct pn_err *err)
{
	int64_t d = ctx->now - h->t, tol = ctx->site->wechatpay.tolerance_s;

	if (d < 0)
		d = -d;
	if (d > tol) {
		pn_err_set(err, "Wechatpay-Timestamp %lld is %lld s away from now (tolerance %lld s)",
			   (long long)h->t, (long long)d, (long long)tol);
		return false;
	}
	return true;
}

/* SHA256withRSA over "ts\nnonce\nbody\n"; *key_id names the key that verified. */
static PN_WUR bool
v3_signature(const struct pn_verify_ctx *ctx, const struct v3_headers *h, const char **key_id,
	     enum pn_reject *why, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	const struct pn_request *req = ctx->req;
	struct pn_iov iov[6] = {{h->ts, strlen(h->ts)}, {"\n", 1}, {h->nonce, strlen(h->nonce)},
				{"\n", 1}, {req->body, req->body_len}, {"\n", 1}};
	bool	pubkey_mode = streq(h->serial, s->wechatpay.public_key_id);
	unsigned char *sig;
	size_t	siglen, i, tried = 0;

	if (!pn_b64_decode(ctx->arena, h->sig, strlen(h->sig), &sig, &siglen)) {
		pn_err_set(err, "Wechatpay-Signature is not valid base64");
		return false;
	}
	for (i = 0; pubkey_mode && i < s->wechatpay.npublic_keys; i++, tried++)
		if (pn_rsa_verify(s->wechatpay.public_keys[i].pkey, PN_MD_SHA256, iov, 6, sig,
				  siglen)) {
			*key_id = s->wechatpay.public_key_id;
			return true;
		}
	for (i = 0; !pubkey_mode && i < s->wechatpay.ncerts; i++) {
		const struct pn_pubkey *c = &s->wechatpay.certs[i];

		if (!pn_streq_nocase(c->serial, h->serial))
			continue;
		tried++;
		if (pn_rsa_verify(c->pkey, PN_MD_SHA256, iov, 6, sig, siglen)) {
			*key_id = c->serial;
			return true;
		}
	}
	if (tried == 0)
		*why = PN_REJECT_UNKNOWN_KEY;
	if (tried == 0)
		pn_err_set(err, "unknown Wechatpay-Serial \"%.64s\" for site %s: no platform "
			   "certificate has this serial and it is not wechatpay.public_key_id",
			   h->serial, s->name);
	else
		pn_err_set(err, "could not verify WeChat Pay signature for site %s with the key "
			   "of serial %.64s", s->name, h->serial);
	return false;
}

/* A string member of a JSON object with its length; false if absent/not a string. */
static bool
json_bytes(json_t *obj, const char *key, const char **p, size_t *len)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_string(v))
		return false;
	*p = json_string_value(v);
	*len = json_string_length(v);
	return true;
}

/* Open resource (AEAD_AES_256_GCM) with each APIv3 key in turn. */
static PN_WUR enum pn_verdict
v3_decrypt(const struct pn_verify_ctx *ctx, json_t *env, unsigned char **plain, size_t *plen,
	   const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	json_t *res = json_object_get(env, "resource");
	const char *alg = NULL, *ct = NULL, *nonce = NULL, *aad = "";
	size_t	alglen, ctlen, noncelen, aadlen = 0, rawlen, i;
	unsigned char *raw;

	if (!json_is_object(res)) {
		pn_err_set(err, "WeChat Pay notification has no resource object");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "algorithm", &alg, &alglen) || strcmp(alg, "AEAD_AES_256_GCM") != 0) {
		pn_err_set(err, "unsupported resource.algorithm \"%.32s\" (only AEAD_AES_256_GCM)",
			   alg ? alg : "");
		return PN_MALFORMED;
	}
	if (json_object_get(res, "associated_data") != NULL
	    && !json_bytes(res, "associated_data", &aad, &aadlen)) {
		pn_err_set(err, "resource.associated_data is not a string");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "nonce", &nonce, &noncelen) || noncelen != 12) {
		pn_err_set(err, "resource.nonce must be a string of 12 characters");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "ciphertext", &ct, &ctlen)
	    || !pn_b64_decode(ctx->arena, ct, ctlen, &raw, &rawlen) || rawlen <= 16) {
		pn_err_set(err, "resource.ciphertext is not base64 of ciphertext and a 16-byte tag");
		return PN_MALFORMED;
	}
	for (i = 0; i < s->wechatpay.napiv3_keys; i++) {
		const struct pn_secret *k = &s->wechatpay.apiv3_keys[i];

		if (k->len == 32
		    && pn_aes256gcm_decrypt(ctx->arena, k->data, nonce, noncelen, aad, aadlen, raw,
					    rawlen, plain, plen)) {
			*key_id = k->id;
			return PN_VERIFIED;
		}
	}
	pn_err_set(err, "could not decrypt WeChat Pay resource for site %s: the AES-256-GCM tag "
		   "does not match under any APIv3 key (%zu tried)", s->name,
		   s->wechatpay.napiv3_keys);
	return PN_UNVERIFIED;
}

/* ---- API v3: normalising the decrypted resource ------------------------- */

static const char *
jstr(struct pn_arena *a, json_t *obj, const char *path)
{
	return nonempty(pn_json_str(a, obj, path));
}

/* The merchant ids of a resource: mchid/appid, or sp_mchid/sp_appid of a
 * service provider, with sub_mchid/sub_appid. */
static void
v3_merchant(struct pn_arena *a, json_t *p, struct pn_wechatpay_merchant *m)
{
	m->mchid = jstr(a, p, "mchid");
	m->mchid_name = "mchid";
	m->sub_mchid = jstr(a, p, "sub_mchid");
	m->appid = jstr(a, p, "appid");
	m->appid_name = "appid";
	m->sub_appid = jstr(a, p, "sub_appid");
	if (m->mchid == NULL) {	/* service-provider mode */
		m->mchid = jstr(a, p, "sp_mchid");
		m->mchid_name = "sp_mchid";
	}
	if (m->appid == NULL) {
		m->appid = jstr(a, p, "sp_appid");
		m->appid_name = "sp_appid";
	}
}

static void
v3_amounts(struct pn_arena *a, json_t *p, struct pn_event *ev)
{
	if (!pn_wechatpay_currency(a, pn_json_str(a, p, "amount.currency"), &ev->currency)) {
		ev->currency = NULL;
		pn_flag_amount(ev, "amount.currency is not an ISO 4217 code");
	}
	if (!fen_json(p, "amount.total", &ev->amount_minor)) {
		ev->amount_minor = -1;
		if (ev->kind == PN_KIND_PAID && ev->flag == NULL)
			pn_flag_amount(ev, "no usable integer amount.total on a payment");
	}
}

/* The canonical text of a JSON value (keys sorted, compact): arena. */
static const char *
v3_canonical(struct pn_arena *a, json_t *v)
{
	char   *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	const char *out;

	if (t == NULL)
		pn_fatal("could not serialise a JSON value");
	out = pn_arena_strdup(a, t);
	free(t);
	return out;
}

/* "noid:<sha256>" of the canonical resource (and a prefix naming its context). */
static const char *
v3_noid(struct pn_arena *a, const char *context, json_t *p)
{
	const char *c = v3_canonical(a, p);
	struct pn_iov iov[3] = {{context, strlen(context)}, {"\n", 1}, {c, strlen(c)}};

	return pn_wechatpay_noid_key(a, iov, 3);
}

/* The signed content of a resource, for wechatpay/identity.c. */
struct v3_content {
	const char *context;
	json_t *p;
};

static const char *
v3_content_key(struct pn_arena *a, void *arg)
{
	const struct v3_content *c = arg;

	return v3_noid(a, c->context, c->p);
}

/*
 * The identity of a payment-like resource (a transaction, a combine
 * sub-order, a query answer): wechatpay/identity.c, shared with query and
 * reconcile.  Its kind first, for the amounts; the missing_id flag after
 * them, as ever (an amount flag is not replaced).
 */
static const char *
v3_payment_identity(struct pn_arena *a, json_t *p, const char *context, const char *id,
		    const char *state, const char *txn, const char *otn, struct pn_event *ev)
{
	struct v3_content c = {context, p};
	struct pn_wechatpay_fact f;
	const char *missing = NULL;

	memset(&f, 0, sizeof(f));
	f.event_type = ev->event_type;
	f.state = state;
	f.transaction_id = txn;
	f.out_trade_no = otn;
	f.event_id = id;
	f.content_key = v3_content_key;
	f.content_arg = &c;
	pn_wechatpay_identity(a, &f, ev, &missing);
	return missing;
}

static void
v3_transaction(struct pn_arena *a, json_t *p, const char *id, struct pn_event *ev)
{
	const char *state = jstr(a, p, "trade_state");
	const char *txn = jstr(a, p, "transaction_id"), *otn = jstr(a, p, "out_trade_no");

	const char *missing;

	ev->order_id = otn;
	ev->psp_txn_id = txn;
	ev->psp_time = jstr(a, p, "success_time");
	missing = v3_payment_identity(a, p, "transaction", id, state, txn, otn, ev);
	v3_amounts(a, p, ev);
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(ev, missing);
}

static void
v3_refund(struct pn_arena *a, json_t *p, const char *id, struct pn_event *ev)
{
	struct v3_content c = {"refund", p};
	struct pn_wechatpay_fact f;
	const char *missing = NULL;

	ev->order_id = jstr(a, p, "out_trade_no");
	ev->psp_txn_id = jstr(a, p, "transaction_id");
	ev->psp_time = jstr(a, p, "success_time");
	/* dedup key and kind: wechatpay/identity.c, shared with reconcile */
	memset(&f, 0, sizeof(f));
	f.refund = true;
	f.event_type = ev->event_type;
	f.state = jstr(a, p, "refund_status");
	f.refund_id = jstr(a, p, "refund_id");
	f.out_refund_no = jstr(a, p, "out_refund_no");
	f.event_id = id;
	f.content_key = v3_content_key;
	f.content_arg = &c;
	pn_wechatpay_identity(a, &f, ev, &missing);
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(ev, missing);
	/* ABNORMAL and CLOSED are recorded: a human looks at them. */
	if (ev->kind != PN_KIND_REFUND)
		return;
	if (!pn_wechatpay_currency(a, pn_json_str(a, p, "amount.currency"), &ev->currency)) {
		ev->currency = NULL;
		pn_flag_amount(ev, "amount.currency is not an ISO 4217 code");
	}
	if (!fen_json(p, "amount.refund", &ev->refund_minor)) {
		ev->refund_minor = -1;
		pn_flag_amount(ev, "no usable integer amount.refund on a refund");
	}
	if (!fen_json(p, "amount.total", &ev->amount_minor))
		ev->amount_minor = -1;	/* the refund amount alone is enough */
}

/*
 * REFUND.ABNORMAL and REFUND.CLOSED: the refund did not happen (WeChat Pay
 * 退款结果通知, https://pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter3_1_11.shtml:
 * ABNORMAL 退款异常, the money could not reach the buyer's card or account,
 * and is re-issued from the merchant platform's 异常退款 or paid another
 * way; CLOSED 退款关闭, closed without money returned).  For a person, with
 * what the refund was.
 */
static const char *
v3_refund_failed_detail(struct pn_arena *a, json_t *p, const char *type)
{
	const char *rid = jstr(a, p, "refund_id"), *orn = jstr(a, p, "out_refund_no");
	const char *txn = jstr(a, p, "transaction_id"), *st = jstr(a, p, "refund_status");
	const char *cur = jstr(a, p, "amount.currency");
	int64_t	fen = -1;
	char	amount[48] = "no amount";

	if (fen_json(p, "amount.refund", &fen)) {
		pn_money_format(fen, 2, amount, sizeof(amount));
		snprintf(amount + strlen(amount), sizeof(amount) - strlen(amount), " %.3s",
			 cur ? cur : "CNY");
	}
	return pn_arena_printf(a, "refund %.64s (out_refund_no %.64s, %s) of transaction %.64s "
			       "did not happen: %s (refund_status %.16s): %s",
			       rid ? rid : "-", orn ? orn : "-", amount, txn ? txn : "-", type,
			       st ? st : "-",
			       streq(type, "REFUND.ABNORMAL")
			       ? "the money could not reach the buyer (退款异常); re-issue it from "
				 "the merchant platform or pay the buyer another way"
			       : "closed without money returned (退款关闭); refund again if it is "
				 "still owed");
}

/*
 * 消费者投诉 2.0: COMPLAINT.CREATE, COMPLAINT.STATE_CHANGE (WeChat Pay
 * "投诉通知回调", pay.weixin.qq.com/docs/merchant/apis/consumer-complaint/
 * complaint-notifications; the decrypted resource as wechatpay-java's and
 * binarywang WxPayService's ComplaintNotifyResult read it): signed and
 * encrypted as a payment notification (resource original_type
 * "complaint"), the plaintext holds only complaint_id and action_type
 * (CREATE_COMPLAINT, CONTINUE_COMPLAINT, USER_RESPONSE,
 * RESPONSE_BY_PLATFORM, SELLER_REFUND, MERCHANT_RESPONSE,
 * MERCHANT_CONFIRM_COMPLETE, USER_APPLY_PLATFORM_SERVICE,
 * USER_CANCEL_PLATFORM_SERVICE, PLATFORM_SERVICE_FINISHED,
 * MERCHANT_APPROVE_REFUND, MERCHANT_REJECT_REFUND, REFUND_SUCCESS).  No
 * merchant id: the notification is this merchant's because this site's
 * keys verified and decrypted it.  The transaction and the complaint's
 * state come from GET /v3/merchant-service/complaints-v2/{complaint_id}
 * (`paynotify query --complaints`).  A complaint is recorded in its case,
 * deduplicated per complaint and action ("complaint:<id>:<action>"), never
 * applied to an order; CONTINUE_COMPLAINT reopens a closed one.
 */
static void
v3_complaint(struct pn_arena *a, json_t *p, const char *id, struct pn_event *ev)
{
	const char *cid = jstr(a, p, "complaint_id"), *action = jstr(a, p, "action_type");

	if (cid == NULL || strlen(cid) > 128) {
		ev->kind = PN_KIND_IGNORED;	/* kept as it is: no case to put it in */
		if (id != NULL)
			ev->dedup_key = pn_arena_printf(a, "event:%s", id);
		else {
			/* no notification id either: the content names it (the nonce
			 * is per delivery), for a person */
			ev->dedup_key = v3_noid(a, "complaint", p);
			pn_wechatpay_flag_missing_id(ev, "a complaint notification without id or "
						     "complaint_id: keyed by its signed content");
		}
		return;
	}
	ev->kind = PN_KIND_COMPLAINT;
	ev->case_id = cid;
	ev->case_status = action ? action : "unknown";
	ev->case_reopens = streq(action, "CONTINUE_COMPLAINT");
	ev->dedup_key = pn_wechatpay_complaint_key(a, cid, action, NULL, NULL);
}

/* wechatpay.site_attach: the resource's attach (a payment's; a refund's
 * resource has none: pn_check_marker's weak identity). */
static void
v3_attach(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site, json_t *p,
	  struct pn_event *ev)
{
	json_t *v = json_object_get(p, "attach");

	pn_wechatpay_check_attach(a, cfg, site, json_is_string(v) ? json_string_value(v) : NULL,
				  json_is_string(v) ? json_string_length(v) : 0, ev);
}

/* ---- API v3: combine payments (合单支付) --------------------------------- */

/*
 * A combine payment's resource (docs/WECHATPAY.md "Combine payments"):
 * combine_appid, combine_mchid, combine_out_trade_no and sub_orders[], each
 * sub-order with mchid (sub_mchid, sub_appid in service-provider mode),
 * trade_state, transaction_id, out_trade_no, success_time and
 * amount.total_amount / payer_amount / currency: no top-level mchid,
 * out_trade_no or transaction_id.
 */
static bool
v3_is_combine(json_t *p)
{
	return json_object_get(p, "combine_out_trade_no") != NULL
	    || json_object_get(p, "sub_orders") != NULL;
}

/* What re-verifying for another site needs: the request's parts. */
struct v3_reverify {
	const struct pn_verify_ctx *ctx;
	const struct v3_headers *h;
	json_t *env;
	const unsigned char *plain;
	size_t	plen;
};

/* Do site t's own keys verify the same notification (signature, and the same plaintext)? */
static bool
v3_verified_by(void *arg, const struct pn_site *t, const char **key_id)
{
	const struct v3_reverify *rv = arg;
	struct pn_verify_ctx tc = *rv->ctx;
	const char *sk = NULL, *ak = NULL;
	unsigned char *p2 = NULL;
	size_t	l2 = 0;
	struct pn_err e;
	enum pn_reject why;

	tc.site = t;
	if (t->wechatpay.napiv3_keys == 0 || (tc.check_freshness && !v3_fresh(&tc, rv->h, &e))
	    || !v3_signature(&tc, rv->h, &sk, &why, &e)
	    || v3_decrypt(&tc, rv->env, &p2, &l2, &ak, &e) != PN_VERIFIED
	    || l2 != rv->plen || memcmp(p2, rv->plain, l2) != 0)
		return false;
	*key_id = pn_arena_printf(tc.arena, "%s/%s", sk, ak);
	return true;
}

/* One sub-order, normalised exactly as a single payment's transaction. */
static void
v3_sub_order(struct pn_arena *a, json_t *so, const char *combine_id, struct pn_event *sub)
{
	const char *state = jstr(a, so, "trade_state");
	const char *txn = jstr(a, so, "transaction_id"), *otn = jstr(a, so, "out_trade_no");
	const char *missing;

	sub->order_id = otn;
	sub->psp_txn_id = txn;
	sub->psp_time = jstr(a, so, "success_time");
	missing = v3_payment_identity(a, so, combine_id, NULL, state, txn, otn, sub);
	/* amount.total_amount is the sub-order's order amount (标价金额), as
	 * amount.total of a single payment; payer_amount is what the payer paid */
	if (!pn_wechatpay_currency(a, pn_json_str(a, so, "amount.currency"), &sub->currency)) {
		sub->currency = NULL;
		pn_flag_amount(sub, "amount.currency is not an ISO 4217 code");
	}
	if (!fen_json(so, "amount.total_amount", &sub->amount_minor)) {
		sub->amount_minor = -1;
		if (sub->kind == PN_KIND_PAID && sub->flag == NULL)
			pn_flag_amount(sub, "no usable integer amount.total_amount on a sub-order");
	}
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(sub, missing);
}

static void
v3_combine(const struct pn_verify_ctx *ctx, json_t *env, json_t *p, const struct v3_headers *h,
	   const unsigned char *plain, size_t plen, struct pn_event *ev)
{
	struct pn_arena *a = ctx->arena;
	json_t *subs = json_object_get(p, "sub_orders");
	const char *cotn = jstr(a, p, "combine_out_trade_no");
	const char *cmch = jstr(a, p, "combine_mchid"), *capp = jstr(a, p, "combine_appid");
	const char *combine_id = pn_arena_printf(a, "combine\n%s\n%s", cmch ? cmch : "",
						 cotn ? cotn : "");
	struct v3_reverify rv = {ctx, h, env, plain, plen};
	struct pn_wechatpay_router router;
	size_t	i, n = json_is_array(subs) ? json_array_size(subs) : 0;

	/* The envelope: stored once with the raw bytes, keyed by its content. */
	ev->kind = PN_KIND_IGNORED;
	ev->dedup_key = pn_arena_printf(a, "combine:%s:%s", v3_noid(a, "combine", p) + 5,
					ev->event_type ? ev->event_type : "");
	if (n == 0 || n > PN_EVENT_MAX_SUBS) {
		/* nothing to route: the envelope alone, for a human */
		pn_wechatpay_flag_missing_id(ev, pn_arena_printf(a, "combine payment %.32s with %zu "
					     "usable sub_orders (1 to %d expected): not applied",
					     cotn ? cotn : "(no combine_out_trade_no)", n,
					     PN_EVENT_MAX_SUBS));
		return;
	}
	ev->flag_detail = pn_arena_printf(a, "combine payment %.32s of combine_mchid %.32s: %zu "
					  "sub-orders", cotn ? cotn : "-", cmch ? cmch : "-", n);
	ev->subs = pn_arena_alloc(a, n * sizeof(*ev->subs));
	ev->nsubs = n;
	memset(&router, 0, sizeof(router));
	router.ctx = ctx;
	router.verified = v3_verified_by;
	router.arg = &rv;
	router.own_key_id = ev->key_id;
	for (i = 0; i < n; i++) {
		json_t *so = json_array_get(subs, i);
		struct pn_event *sub = &ev->subs[i];
		struct pn_wechatpay_merchant m;

		pn_event_init(sub);
		sub->event_type = ev->event_type;
		sub->psp_event_id = ev->psp_event_id;
		sub->source = ev->source;
		if (!json_is_object(so)) {
			sub->dedup_key = v3_noid(a, combine_id, so);
			sub->key_id = ev->key_id;
			pn_wechatpay_flag_missing_id(sub, "a sub_orders entry that is not an object");
			continue;
		}
		v3_sub_order(a, so, combine_id, sub);
		memset(&m, 0, sizeof(m));
		m.mchid = jstr(a, so, "mchid");
		m.sub_mchid = jstr(a, so, "sub_mchid");
		m.appid = capp;
		m.sub_appid = jstr(a, so, "sub_appid");
		m.mchid_name = "sub_orders[].mchid";
		m.appid_name = "combine_appid";
		pn_wechatpay_route(&router, &m, sub);
		pn_wechatpay_sub_marker(ctx, jstr(a, so, "attach"), sub);
		/* as a single transaction (v3_normalise): the merchant first, then a
		 * trade_state with no handling (REFUND: refunds have their own events) */
		if (sub->kind == PN_KIND_IGNORED && !streq(jstr(a, so, "trade_state"), "REFUND"))
			pn_flag_unhandled(a, sub, "WeChat Pay");
		sub->dedup_key = pn_wechatpay_bound_key(a, sub->dedup_key);
	}
}

static void
v3_normalise(const struct pn_verify_ctx *ctx, json_t *env, json_t *p, const struct v3_headers *h,
	     const unsigned char *plain, size_t plen, struct pn_event *ev)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_config *cfg = ctx->cfg;
	const struct pn_site *site = ctx->site;
	const char *id = jstr(a, env, "id");
	const char *type = jstr(a, env, "event_type");
	bool	txn = type && strncmp(type, "TRANSACTION.", 12) == 0;
	bool	refund = type && strncmp(type, "REFUND.", 7) == 0;
	struct pn_wechatpay_merchant m;

	(void)h;
	ev->psp_event_id = id;
	ev->event_type = type;
	ev->psp_time = jstr(a, env, "create_time");
	if (txn && v3_is_combine(p)) {
		v3_combine(ctx, env, p, h, plain, plen, ev);
		return;
	}
	v3_merchant(a, p, &m);
	if (txn)
		v3_transaction(a, p, id, ev);
	else if (refund)
		v3_refund(a, p, id, ev);
	else if (type && strncmp(type, "COMPLAINT.", 10) == 0)
		v3_complaint(a, p, id, ev);
	else {
		ev->kind = PN_KIND_IGNORED;
		if (id != NULL)
			ev->dedup_key = pn_arena_printf(a, "event:%s", id);
		else {
			/* the nonce is per delivery: the content names it */
			ev->dedup_key = v3_noid(a, type ? type : "event", p);
			pn_wechatpay_flag_missing_id(ev, "a notification without id: keyed by its "
						     "signed content");
		}
	}
	if (ev->psp_time == NULL)
		ev->psp_time = jstr(a, env, "create_time");
	/* Other products' events name no merchant reliably: checked when they do. */
	if (txn || refund || m.mchid != NULL || m.sub_mchid != NULL)
		pn_wechatpay_check_merchant(a, site, &m, txn, ev);
	if (txn || refund)
		v3_attach(a, cfg, site, p, ev);
	/*
	 * What paynotify does with each event_type (docs/PROVIDERS.md "Every
	 * event type"): TRANSACTION.* by trade_state (REFUND: refunds have
	 * their own events, ignored); REFUND.SUCCESS applied; REFUND.ABNORMAL
	 * and REFUND.CLOSED refund_failed, for a person; anything else (other
	 * products: PAYSCORE.*, ENTRUST.*, PROFITSHARING.*, ...) unhandled.
	 */
	if (ev->kind != PN_KIND_IGNORED)
		return;
	if (refund && (streq(type, "REFUND.ABNORMAL") || streq(type, "REFUND.CLOSED"))) {
		/* a refund event (its amount on report), never applied: flagged */
		ev->kind = PN_KIND_REFUND;
		if (!fen_json(p, "amount.refund", &ev->refund_minor))
			ev->refund_minor = -1;
		if (!pn_wechatpay_currency(a, pn_json_str(a, p, "amount.currency"), &ev->currency))
			ev->currency = NULL;
		pn_flag_refund_failed(ev, v3_refund_failed_detail(a, p, type));
	} else if (!txn || !streq(jstr(a, p, "trade_state"), "REFUND"))
		pn_flag_unhandled(a, ev, "WeChat Pay");
}

enum pn_verdict
pn_wechatpay_v3_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	struct v3_headers h;
	json_t *env = NULL, *plain_json = NULL;
	const char *sig_key = NULL, *aes_key = NULL;
	unsigned char *plain = NULL;
	size_t	plen = 0;
	enum pn_verdict v;

	if (ctx->site->wechatpay.napiv3_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv3_key_file: API v3 notifications "
			   "cannot be verified", ctx->site->name);
		return PN_UNVERIFIED;
	}
	/*
	 * The reason label of a refusal (paynotify_rejections_total): the
	 * freshness check runs before the signature (wechatpay-go's order), so
	 * "stale" here does not say the signature was genuine.
	 */
	if (!v3_read_headers(req, ctx->arena, &h, &ev->reject, err))
		return PN_UNVERIFIED;
	if (ctx->check_freshness && !v3_fresh(ctx, &h, err)) {
		ev->reject = PN_REJECT_STALE;
		return PN_UNVERIFIED;
	}
	if (!v3_signature(ctx, &h, &sig_key, &ev->reject, err))
		return PN_UNVERIFIED;
	ev->signed_time = h.t;		/* signed: "timestamp\nnonce\nbody\n" */
	/* Only now is the body genuine: parse, then decrypt. */
	env = pn_json_parse(req->body, req->body_len, err);
	if (env == NULL || !json_is_object(env)) {
		pn_err_prefix(err, "WeChat Pay notification is not a JSON object");
		v = PN_MALFORMED;
		goto done;
	}
	v = v3_decrypt(ctx, env, &plain, &plen, &aes_key, err);
	if (v != PN_VERIFIED)
		goto done;
	plain_json = pn_json_parse(plain, plen, err);
	if (plain_json == NULL || !json_is_object(plain_json)) {
		pn_err_prefix(err, "decrypted WeChat Pay resource is not a JSON object");
		v = PN_MALFORMED;
		goto done;
	}
	ev->key_id = pn_arena_printf(ctx->arena, "%s/%s", sig_key, aes_key);
	v3_normalise(ctx, env, plain_json, &h, plain, plen, ev);
	ev->dedup_key = pn_wechatpay_bound_key(ctx->arena, ev->dedup_key);
done:
	json_decref(plain_json);
	json_decref(env);
	return v;
}

/*
 * Shared with `paynotify query` (admin/query_wechatpay.c): the answer to an
 * API v3 request carries the same Wechatpay-* headers and is verified by
 * exactly the code above; a transaction it returns is normalised as the
 * decrypted resource of a TRANSACTION.* notification, merchant check
 * included.
 */
bool
pn_wechatpay_v3_verify_sig(const struct pn_verify_ctx *ctx, const char **key_id,
			   struct pn_err *err)
{
	struct v3_headers h;
	enum pn_reject why;

	return v3_read_headers(ctx->req, ctx->arena, &h, &why, err)
	    && (!ctx->check_freshness || v3_fresh(ctx, &h, err))
	    && v3_signature(ctx, &h, key_id, &why, err);
}

void
pn_wechatpay_v3_transaction(struct pn_arena *a, const struct pn_site *site, json_t *p,
			    const char *event_type, struct pn_event *ev)
{
	struct pn_wechatpay_merchant m;

	v3_merchant(a, p, &m);
	ev->event_type = event_type;
	v3_transaction(a, p, "query", ev);
	pn_wechatpay_check_merchant(a, site, &m, true, ev);
	v3_attach(a, NULL, site, p, ev);
	ev->dedup_key = pn_wechatpay_bound_key(a, ev->dedup_key);
}

bool
pn_wechatpay_v3_combine_sub(struct pn_arena *a, const struct pn_site *site, json_t *root,
			    json_t *so, const char *event_type, struct pn_event *sub)
{
	const char *cotn = jstr(a, root, "combine_out_trade_no");
	const char *cmch = jstr(a, root, "combine_mchid");
	const char *combine_id = pn_arena_printf(a, "combine\n%s\n%s", cmch ? cmch : "",
						 cotn ? cotn : "");
	struct pn_wechatpay_merchant m;

	pn_event_init(sub);
	sub->event_type = event_type;
	if (!json_is_object(so))
		return false;
	v3_sub_order(a, so, combine_id, sub);
	memset(&m, 0, sizeof(m));
	m.mchid = jstr(a, so, "mchid");
	m.sub_mchid = jstr(a, so, "sub_mchid");
	m.appid = jstr(a, root, "combine_appid");
	m.sub_appid = jstr(a, so, "sub_appid");
	m.mchid_name = "sub_orders[].mchid";
	m.appid_name = "combine_appid";
	sub->dedup_key = pn_wechatpay_bound_key(a, sub->dedup_key);
	if (!streq(nonempty(m.sub_mchid) ? m.sub_mchid : m.mchid, site->wechatpay.mchid))
		return false;
	pn_wechatpay_check_merchant(a, site, &m, true, sub);	/* the appid */
	return true;
}

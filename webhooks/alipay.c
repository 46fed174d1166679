/*
 * alipay.c: Alipay asynchronous notifications (paynotify-alipay).
 *
 * As Alipay's SDKs verify them (alipay-sdk-java AlipaySignature.rsaCheckV1/
 * V2, alipay-sdk-nodejs checkNotifySignV2; see docs/PROVIDERS.md):
 *   - the form body is decoded exactly once, values kept as bytes;
 *   - content = sorted "k=v" joined by '&', without sign, sign_type (V1) and
 *     empty values; if V1 does not verify, V2 (sign_type kept) is tried;
 *     when the body has empty values, both are tried again with them kept,
 *     as alipay-sdk-nodejs builds the content (every variant is a function
 *     of the same signed fields, so accepting it forges nothing);
 *   - RSA2 = SHA256withRSA, RSA = SHA1withRSA, chosen by alipay.sign_type in
 *     the configuration, never by the payload's sign_type;
 *   - every configured key is tried (rotation); key_id names the one that
 *     verified.
 * Then app_id and seller_id must be the site's, or the notification is
 * stored as merchant_mismatch and never applied.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapter.h"
#include "alipay.h"
#include "alipay/identity.h"
#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "money.h"
#include "provider.h"

static const char *const alipay_keep_headers[] = {NULL};

static int
field_cmp(const void *a, const void *b)
{
	const struct pn_form_field *fa = *(const struct pn_form_field *const *)a;
	const struct pn_form_field *fb = *(const struct pn_form_field *const *)b;

	return strcmp(fa->key, fb->key);
}

char *
pn_alipay_sign_content(struct pn_arena *a, const struct pn_form *f, bool keep_sign_type,
		       bool keep_empty, size_t *len)
{
	const struct pn_form_field **sorted;
	size_t	i, n = 0, total = 1, o = 0;
	char   *out;

	sorted = pn_arena_alloc(a, (f->n + 1) * sizeof(*sorted));
	for (i = 0; i < f->n; i++) {
		const struct pn_form_field *fl = &f->fields[i];

		if (strcmp(fl->key, "sign") == 0)
			continue;
		if (!keep_sign_type && strcmp(fl->key, "sign_type") == 0)
			continue;
		if (fl->value_len == 0 && !keep_empty)
			continue;
		sorted[n++] = fl;
		total += strlen(fl->key) + fl->value_len + 2;
	}
	qsort(sorted, n, sizeof(*sorted), field_cmp);
	out = pn_arena_alloc(a, total);
	for (i = 0; i < n; i++) {
		size_t klen = strlen(sorted[i]->key);

		if (i > 0)
			out[o++] = '&';
		memcpy(out + o, sorted[i]->key, klen);
		o += klen;
		out[o++] = '=';
		memcpy(out + o, sorted[i]->value, sorted[i]->value_len);
		o += sorted[i]->value_len;
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* base64 of "sign"; a raw '+' that arrived unescaped decodes to ' '. */
static PN_WUR bool
decode_sign(struct pn_arena *a, const char *sign, unsigned char **sig, size_t *siglen)
{
	char   *fixed, *p;

	if (pn_b64_decode(a, sign, strlen(sign), sig, siglen))
		return true;
	if (strchr(sign, ' ') == NULL)
		return false;
	fixed = pn_arena_strdup(a, sign);
	for (p = fixed; *p; p++)
		if (*p == ' ')
			*p = '+';
	return pn_b64_decode(a, fixed, strlen(fixed), sig, siglen);
}

static PN_WUR bool
verify_content(struct pn_arena *a, const struct pn_form *f, bool v2, bool keep_empty,
	       const struct pn_site *site, const unsigned char *sig, size_t siglen,
	       const char **key_id)
{
	enum pn_md md = site->alipay.sign_type == PN_ALIPAY_RSA ? PN_MD_SHA1 : PN_MD_SHA256;
	size_t	len, i;
	char   *content = pn_alipay_sign_content(a, f, v2, keep_empty, &len);
	struct pn_iov iov = {content, len};

	for (i = 0; i < site->alipay.nkeys; i++)
		if (pn_rsa_verify(site->alipay.keys[i].pkey, md, &iov, 1, sig, siglen)) {
			*key_id = site->alipay.keys[i].id;
			return true;
		}
	return false;
}

/* Rules V1 then V2; then both with empty values kept, if there are any. */
static PN_WUR bool
verify_rules(struct pn_arena *a, const struct pn_form *f, const struct pn_site *site,
	     const unsigned char *sig, size_t siglen, const char **key_id)
{
	bool	has_empty = false;
	size_t	i;

	if (verify_content(a, f, false, false, site, sig, siglen, key_id)
	    || verify_content(a, f, true, false, site, sig, siglen, key_id))
		return true;
	for (i = 0; i < f->n; i++)
		if (f->fields[i].value_len == 0 && strcmp(f->fields[i].key, "sign") != 0)
			has_empty = true;
	return has_empty && (verify_content(a, f, false, true, site, sig, siglen, key_id)
			     || verify_content(a, f, true, true, site, sig, siglen, key_id));
}

static bool
streq_opt(const char *a, const char *b)
{
	return a != NULL && strcmp(a, b) == 0;
}

static const char *
nonempty(const struct pn_form *f, const char *key)
{
	const char *v = pn_form_get(f, key);

	return v && *v ? v : NULL;
}

static void
flag_amount(struct pn_event *ev, struct pn_arena *a, const char *field, const char *value,
	    const char *why)
{
	pn_flag_amount(ev, pn_arena_printf(a, "%s \"%.40s\": %s", field, value ? value : "", why));
}

bool
pn_alipay_currency(struct pn_arena *a, const char *trans_currency, const char **out,
		   int *exponent)
{
	char	cur[4];

	if (trans_currency == NULL || *trans_currency == '\0') {
		*out = "CNY";
		*exponent = 2;
		return true;
	}
	if (!pn_money_currency(trans_currency, cur) || strcmp(cur, trans_currency) != 0)
		return false;
	*out = pn_arena_strdup(a, cur);
	*exponent = pn_money_exponent(cur);
	return *exponent >= 0;
}

/*
 * A trade complaint (交易投诉): Alipay's message service posts
 * msg_method=alipay.merchant.tradecomplain.changed to the app's gateway
 * URL (应用网关), a form like a notification (charset, biz_content,
 * msg_method, utc_timestamp, version, sign_type, notify_id, app_id, sign),
 * signed the same way (verified above: sorted parameters without sign).
 * biz_content is JSON holding only complain_event_id (Alipay's "交易投诉
 * 接入指南": 接收投诉通知, then alipay.merchant.tradecomplain.query for the
 * details, `paynotify query --complaints`).  app_id, signed, must be the
 * site's; there is no seller_id.  Recorded in its case, deduplicated per
 * complaint and message (notify_id, stable across Alipay's resends),
 * never applied to an order.
 */
static void
normalise_complaint(struct pn_arena *a, const struct pn_form *f, const struct pn_site *site,
		    struct pn_event *ev)
{
	const char *biz = pn_form_get(f, "biz_content"), *app_id = pn_form_get(f, "app_id");
	const char *id = NULL, *msg = nonempty(f, "notify_id");
	struct pn_err err;
	json_t *j = biz ? pn_json_parse((const unsigned char *)biz, strlen(biz), &err) : NULL;

	if (j != NULL)
		id = pn_json_str(a, j, "complain_event_id");
	json_decref(j);
	ev->event_type = "alipay.merchant.tradecomplain.changed";
	ev->psp_event_id = msg;
	ev->psp_time = nonempty(f, "utc_timestamp");
	if (msg == NULL)
		msg = ev->psp_time ? ev->psp_time : pn_form_get(f, "sign");
	if ((id == NULL || *id == '\0' || strlen(id) > 128) && ev->psp_event_id == NULL) {
		/* neither a complaint nor a message id: no placeholder key (a time
		 * two messages may share), its signature, and a person looks
		 * (missing_id, as every Alipay message without notify_id) */
		ev->kind = PN_KIND_IGNORED;
		ev->dedup_key = pn_arena_printf(a, "unkeyed:%s", pn_form_get(f, "sign"));
		ev->flag = PN_FLAG_MISSING_ID;
		ev->flag_detail = "an Alipay complaint message without complain_event_id or "
		    "notify_id: keyed by its signature";
	} else if (id == NULL || *id == '\0' || strlen(id) > 128) {
		ev->kind = PN_KIND_IGNORED;	/* kept as it is: no complaint to put it in */
		ev->dedup_key = pn_arena_printf(a, "notify:%s", msg);
	} else {
		ev->kind = PN_KIND_COMPLAINT;
		ev->case_id = id;
		ev->case_status = NULL;		/* the message says "changed"; query says how */
		ev->dedup_key = pn_alipay_complaint_key(a, id, msg, NULL, NULL);
	}
	if (app_id == NULL || strcmp(app_id, site->alipay.app_id) != 0)
		pn_flag_merchant(a, ev, "app_id", 32, app_id, site, site->alipay.app_id);
}

/* Normalise a verified notification. */
static void
normalise(struct pn_arena *a, const struct pn_config *cfg, const struct pn_form *f,
	  const struct pn_site *site, struct pn_event *ev)
{
	const struct pn_form_field *pb;
	size_t	i;
	const char *status = nonempty(f, "trade_status");
	const char *otn = nonempty(f, "out_trade_no");
	const char *biz = nonempty(f, "out_biz_no");
	const char *refund_fee = nonempty(f, "refund_fee");
	const char *total = nonempty(f, "total_amount");
	const char *app_id = pn_form_get(f, "app_id"), *seller_id = pn_form_get(f, "seller_id");
	const char *trans_currency = nonempty(f, "trans_currency");
	bool	refund = biz != NULL || refund_fee != NULL || nonempty(f, "gmt_refund") != NULL;
	bool	currency_ok;
	struct pn_alipay_fact fact;
	struct pn_alipay_amounts am;
	int	exp = 2;

	ev->event_type = status;
	ev->order_id = otn;
	ev->psp_txn_id = nonempty(f, "trade_no");
	ev->psp_event_id = nonempty(f, "notify_id");
	/*
	 * total_amount and refund_fee are in trans_currency (标价币种), signed
	 * like every field; absent on a domestic trade: CNY (pn_alipay_currency).
	 * settle_currency / settle_amount (what Alipay settles to the merchant,
	 * after conversion) never decide anything: kept in the stored body.
	 */
	currency_ok = pn_alipay_currency(a, trans_currency, &ev->currency, &exp);
	if (!currency_ok)
		ev->currency = NULL;
	ev->psp_time = nonempty(f, "gmt_refund");
	if (ev->psp_time == NULL)
		ev->psp_time = nonempty(f, "gmt_payment");
	if (ev->psp_time == NULL)
		ev->psp_time = nonempty(f, "notify_time");

	if (status == NULL && streq_opt(nonempty(f, "msg_method"),
					"alipay.merchant.tradecomplain.changed")) {
		normalise_complaint(a, f, site, ev);
		return;
	}
	if (status == NULL || otn == NULL) {
		/*
		 * Not a trade notification: an open-platform gateway message
		 * (msg_method, e.g. alipay.trade.refund.depositback.completed),
		 * an older product's notify (method / notify_type, e.g.
		 * servicemarket_order_notify).  Its type is that name.  The
		 * bank-card refund deposit-back receipt is informational (the
		 * refund itself came as a trade notification): ignored.  Every
		 * other one has no handling: unhandled (docs/PROVIDERS.md).
		 */
		const char *method = nonempty(f, "msg_method");

		if (method == NULL)
			method = nonempty(f, "method");
		if (method == NULL)
			method = nonempty(f, "notify_type");
		ev->event_type = status != NULL ? status : method;
		ev->kind = PN_KIND_IGNORED;
		if (ev->psp_event_id) {
			ev->dedup_key = pn_arena_printf(a, "notify:%s", ev->psp_event_id);
		} else {
			/* no notify_id: the sign names the signed content (RSA PKCS #1
			 * v1.5 is deterministic), and a person looks at it (issue 22):
			 * missing_id comes before unhandled (a flag is never replaced) */
			ev->dedup_key = pn_arena_printf(a, "unkeyed:%s", pn_form_get(f, "sign"));
			ev->flag = PN_FLAG_MISSING_ID;
			ev->flag_detail = "an Alipay message without notify_id: keyed by its signature";
		}
		if (status != NULL || method == NULL
		    || strcmp(method, "alipay.trade.refund.depositback.completed") != 0)
			pn_flag_unhandled(a, ev, "Alipay");
		return;
	}
	/* dedup key, kind and amounts: alipay/identity.c, shared with query and reconcile */
	memset(&fact, 0, sizeof(fact));
	fact.trade_no = ev->psp_txn_id;
	fact.out_trade_no = otn;
	fact.trade_status = status;
	fact.refund = refund;
	fact.out_biz_no = biz;
	fact.refund_fee = refund_fee;
	fact.notify_id = ev->psp_event_id;
	fact.sign = pn_form_get(f, "sign");
	fact.trans_currency = trans_currency;
	fact.total_amount = total;
	pn_alipay_identity(a, &fact, ev, &am);
	/* refund_fee first; no amount is read in an unknown currency: flagged below */
	if (refund && am.currency_ok && !am.refund_ok)
		flag_amount(ev, a, "refund_fee", refund_fee,
			    refund_fee ? am.refund_err.msg : "missing on a refund notification");
	if (!am.currency_ok) {
		/* never guessed: the event keeps no amount and a person looks */
		if (ev->flag == NULL)
			flag_amount(ev, a, "trans_currency", trans_currency,
				    "not an ISO 4217 currency code as Alipay writes them");
	} else if (total != NULL) {
		if (!am.total_ok && ev->flag == NULL)
			flag_amount(ev, a, "total_amount", total, am.total_err.msg);
	} else if (ev->kind == PN_KIND_PAID && ev->flag == NULL)
		flag_amount(ev, a, "total_amount", NULL, "missing on a payment notification");

	/* Addressed to this merchant?  Otherwise stored flagged, never applied. */
	if (app_id == NULL || strcmp(app_id, site->alipay.app_id) != 0)
		pn_flag_merchant(a, ev, "app_id", 32, app_id, site, site->alipay.app_id);
	else if (seller_id == NULL || strcmp(seller_id, site->alipay.seller_id) != 0)
		pn_flag_merchant(a, ev, "seller_id", 32, seller_id, site, site->alipay.seller_id);
	/*
	 * alipay.site_passback: passback_params is signed like every field
	 * but sign and sign_type, and returned "as you URL-encoded it at order
	 * time" (psp/alipay-wechatpay.md; Alipay's notify parameter list): one
	 * form decode leaves the merchant's own encoding, which for a marker
	 * of unreserved characters is the marker itself.  Compared whole,
	 * byte for byte, never decoded again.
	 */
	for (pb = NULL, i = 0; i < f->n && pb == NULL; i++)
		if (strcmp(f->fields[i].key, "passback_params") == 0)
			pb = &f->fields[i];
	pn_check_marker(a, cfg, site, &pn_alipay_cfg_keys, "passback_params",
			pb ? pb->value : NULL, pb ? pb->value_len : 0, ev);
	/* a trade_status Alipay does not document (the four above) */
	if (ev->kind == PN_KIND_IGNORED)
		pn_flag_unhandled(a, ev, "Alipay");
}

static PN_WUR enum pn_verdict
alipay_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	const struct pn_site *site = ctx->site;
	struct pn_form form;
	const char *sign, *key_id = NULL;
	unsigned char *sig;
	size_t	siglen;

	if (!pn_form_parse(ctx->arena, (const char *)req->body, req->body_len, &form, err)) {
		pn_err_prefix(err, "Alipay notification is not a valid form body");
		return PN_MALFORMED;
	}
	sign = pn_form_get(&form, "sign");
	if (sign == NULL || *sign == '\0') {
		pn_err_set(err, "Alipay notification has no sign field");
		ev->reject = PN_REJECT_UNSIGNED;
		return PN_UNVERIFIED;
	}
	if (!decode_sign(ctx->arena, sign, &sig, &siglen)) {
		pn_err_set(err, "Alipay sign is not valid base64");
		return PN_UNVERIFIED;
	}
	if (!verify_rules(ctx->arena, &form, site, sig, siglen, &key_id)) {
		pn_err_set(err, "could not verify Alipay %s signature for site %s: no key matched "
			   "(%zu tried, rules V1 and V2)",
			   site->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2", site->name,
			   site->alipay.nkeys);
		return PN_UNVERIFIED;
	}
	ev->key_id = key_id;
	normalise(ctx->arena, ctx->cfg, &form, site, ev);
	return PN_VERIFIED;
}

/* Alipay reads the body: exactly "success" stops its retries. */
static void
alipay_answer(int variant, struct pn_response *res, int status, const char *reason)
{
	bool ok = status >= 200 && status < 300;

	pn_response_set(res, status, "text/plain", ok ? "success" : "fail");
}

const struct pn_provider pn_provider_alipay = {
	.name = "alipay",
	.program = "paynotify-alipay",
	.keep_headers = alipay_keep_headers,
	.keys = &pn_alipay_cfg_keys,
	.verify = alipay_verify,
	.answer = alipay_answer,
};

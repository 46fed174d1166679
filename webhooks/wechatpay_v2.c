/*
 * wechatpay_v2.c: WeChat Pay API v2 notifications (flat XML, common/xml.c);
 * the descriptor and the answer are in wechatpay.c, docs/WECHATPAY.md
 * gives every decision.  Payment results carry an MD5 or HMAC-SHA256
 * "sign" made with the APIv2 key (WXPayUtil.generateSignature); refund
 * results carry no sign but an AES-256-ECB "req_info" whose key is the
 * lower-case hex MD5 of the APIv2 key.  A genuine payment result whose
 * merchant identity is not the site's is stored flagged merchant_mismatch
 * and never applied.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "adapter.h"
#include "money.h"
#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "wechatpay.h"
#include "wechatpay_int.h"
#include "wechatpay/identity.h"

/* A fen amount from a decimal string (API v2 fields). */
static bool
fen_text(const char *s, int64_t *out)
{
	int64_t v;

	if (s == NULL || strlen(s) > 16 || !pn_parse_i64(s, &v) || v > PN_WECHATPAY_MAX_FEN)
		return false;
	*out = v;
	return true;
}

/* Java's String.trim(): every byte <= 0x20 at either end. */
static void
trim_java(const char *s, size_t len, const char **start, size_t *out)
{
	while (len > 0 && (unsigned char)*s <= 0x20)
		s++, len--;
	while (len > 0 && (unsigned char)s[len - 1] <= 0x20)
		len--;
	*start = s;
	*out = len;
}

/* A v2 value as it was signed (trimmed, see v2_sign_string), or NULL if empty. */
static const char *
v2_get(struct pn_arena *a, const struct pn_xml_flat *x, const char *name)
{
	const char *v = pn_xml_get(x, name), *s;
	size_t	len;

	if (v == NULL)
		return NULL;
	trim_java(v, strlen(v), &s, &len);
	return len ? pn_arena_strndup(a, s, len) : NULL;
}

static int
field_cmp(const void *a, const void *b)
{
	const struct pn_xml_field *fa = *(const struct pn_xml_field *const *)a;
	const struct pn_xml_field *fb = *(const struct pn_xml_field *const *)b;

	return strcmp(fa->name, fb->name);
}

/* "k=v&...&key=APIv2KEY" as WXPayUtil.generateSignature builds it. */
static struct pn_buf
v2_sign_string(struct pn_arena *a, const struct pn_xml_flat *x, const struct pn_secret *key)
{
	const struct pn_xml_field **sorted = pn_arena_alloc(a, (x->n + 1) * sizeof(*sorted));
	struct pn_buf b = PN_BUF_INIT;
	size_t	i, n = 0;

	for (i = 0; i < x->n; i++)
		if (strcmp(x->fields[i].name, "sign") != 0)
			sorted[n++] = &x->fields[i];
	qsort(sorted, n, sizeof(*sorted), field_cmp);
	for (i = 0; i < n; i++) {
		const char *v;
		size_t	vlen;

		trim_java(sorted[i]->value, sorted[i]->value_len, &v, &vlen);
		if (vlen == 0)
			continue;
		pn_buf_puts(&b, sorted[i]->name);
		pn_buf_putc(&b, '=');
		pn_buf_put(&b, v, vlen);
		pn_buf_putc(&b, '&');
	}
	if (key == NULL)	/* the signed content alone (v2_noid) */
		return b;
	pn_buf_puts(&b, "key=");
	pn_buf_put(&b, key->data, key->len);
	return b;
}

/*
 * "noid:<sha256>" of the signed content (the fields as the sign covers
 * them, without the key): the key of an event no id names, the same for
 * every delivery of the same fields.
 */
static const char *
v2_noid(struct pn_arena *a, const char *context, const struct pn_xml_flat *x)
{
	struct pn_buf b = v2_sign_string(a, x, NULL);
	struct pn_iov iov[3] = {{context, strlen(context)}, {"\n", 1}, {b.data, b.len}};
	const char *k = pn_wechatpay_noid_key(a, iov, 3);

	pn_buf_free(&b);
	return k;
}

bool
pn_wechatpay_v2_mac(struct pn_arena *a, const struct pn_xml_flat *x, enum pn_wxv2_sign alg,
		    const struct pn_secret *key, unsigned char *mac, size_t *maclen)
{
	struct pn_buf b = v2_sign_string(a, x, key);
	struct pn_iov iov = {b.data, b.len};
	bool	ok;

	/* HMAC-SHA256 is keyed with the APIv2 key AND still ends in "&key=..." */
	if (alg == PN_WXV2_HMAC_SHA256)
		ok = pn_hmac(PN_MD_SHA256, key->data, key->len, &iov, 1, mac, maclen);
	else
		ok = pn_digest(PN_MD_MD5, &iov, 1, mac, maclen);
	OPENSSL_cleanse(b.data, b.len);
	pn_buf_free(&b);
	return ok;
}

char *
pn_wechatpay_v2_sign(struct pn_arena *a, const struct pn_xml_flat *x, enum pn_wxv2_sign alg,
		     const struct pn_secret *key)
{
	unsigned char mac[64];
	size_t	maclen = 0;

	if (!pn_wechatpay_v2_mac(a, x, alg, key, mac, &maclen))
		return NULL;
	return pn_hex_encode(a, mac, maclen, true);
}

bool
pn_wechatpay_v2_refund_key(const struct pn_secret *key, unsigned char out[32])
{
	struct pn_iov iov = {key->data, key->len};
	static const char hex[] = "0123456789abcdef";
	unsigned char md[64];
	size_t	mdlen = 0, i;

	if (!pn_digest(PN_MD_MD5, &iov, 1, md, &mdlen) || mdlen != 16)
		return false;
	for (i = 0; i < 16; i++) {
		out[2 * i] = (unsigned char)hex[md[i] >> 4];
		out[2 * i + 1] = (unsigned char)hex[md[i] & 15];
	}
	OPENSSL_cleanse(md, sizeof(md));
	return true;
}

/* The algorithm named by sign_type (absent or blank = MD5, as the SDK). */
static PN_WUR bool
v2_algorithm(const struct pn_xml_flat *x, enum pn_wxv2_sign *alg)
{
	const char *st = pn_xml_get(x, "sign_type"), *v = "";
	size_t	len = 0;

	if (st != NULL)
		trim_java(st, strlen(st), &v, &len);
	if (len == 0 || (len == 3 && memcmp(v, "MD5", 3) == 0))
		*alg = PN_WXV2_MD5;
	else if (len == 11 && memcmp(v, "HMAC-SHA256", 11) == 0)
		*alg = PN_WXV2_HMAC_SHA256;
	else
		return false;
	return true;
}

/* The message of pn_mac_match(): the notification and the algorithm. */
struct v2_msg {
	struct pn_arena *a;
	const struct pn_xml_flat *x;
	enum pn_wxv2_sign alg;
};

static bool
v2_mac(const void *msg, const struct pn_secret *key, unsigned char *out, size_t *outlen)
{
	const struct v2_msg *m = msg;

	return pn_wechatpay_v2_mac(m->a, m->x, m->alg, key, out, outlen);
}

/* sign against every APIv2 key, as decoded bytes in constant time, no early exit. */
static PN_WUR bool
v2_check_sign(const struct pn_verify_ctx *ctx, const struct pn_xml_flat *x,
	      const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	const char *sign = pn_xml_get(x, "sign");
	struct v2_msg msg = {ctx->arena, x, PN_WXV2_MD5};
	const char *alg_name;
	unsigned char want[64];
	size_t	wantlen = 0;

	if (sign == NULL || *sign == '\0') {
		pn_err_set(err, "WeChat Pay v2 notification has no sign");
		return false;
	}
	if (!v2_algorithm(x, &msg.alg)) {
		pn_err_set(err, "unsupported sign_type \"%.32s\"", pn_xml_get(x, "sign_type"));
		return false;
	}
	alg_name = msg.alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256";
	if ((s->wechatpay.v2_sign_types & (unsigned)msg.alg) == 0) {
		pn_err_set(err, "sign_type %s is not accepted for site %s (wechatpay.v2_sign_type)",
			   alg_name, s->name);
		return false;
	}
	/* hex of either case; anything else matches no key */
	if (!pn_hex_decode(sign, strlen(sign), want, sizeof(want), &wantlen))
		wantlen = 0;
	if (wantlen == 0 || !pn_mac_match(v2_mac, &msg, s->wechatpay.apiv2_keys,
					  s->wechatpay.napiv2_keys, want, 1, wantlen, key_id)) {
		pn_err_set(err, "could not verify WeChat Pay v2 %s sign for site %s: no APIv2 key "
			   "matched (%zu tried)", alg_name, s->name, s->wechatpay.napiv2_keys);
		return false;
	}
	return true;
}

/* The signed fields of a result, for wechatpay/identity.c. */
struct v2_content {
	const char *context;
	const struct pn_xml_flat *x;
};

static const char *
v2_content_key(struct pn_arena *a, void *arg)
{
	const struct v2_content *c = arg;

	return v2_noid(a, c->context, c->x);
}

static void
v2_payment(struct pn_arena *a, const struct pn_xml_flat *x, struct pn_event *ev)
{
	const char *result = v2_get(a, x, "result_code");
	const char *txn = v2_get(a, x, "transaction_id");
	const char *otn = v2_get(a, x, "out_trade_no");
	struct v2_content c = {"v2.pay", x};
	struct pn_wechatpay_fact f;
	const char *missing = NULL;

	ev->order_id = otn;
	ev->psp_txn_id = txn;
	ev->psp_time = v2_get(a, x, "time_end");
	/* dedup key, kind and type: wechatpay/identity.c, shared with query and reconcile */
	memset(&f, 0, sizeof(f));
	f.v2 = true;
	f.state = result;
	f.transaction_id = txn;
	f.out_trade_no = otn;
	f.other_product = v2_get(a, x, "contract_code") != NULL;
	f.content_key = v2_content_key;
	f.content_arg = &c;
	pn_wechatpay_identity(a, &f, ev, &missing);
	if (txn == NULL && otn == NULL) {
		/*
		 * Signed with the APIv2 key but not a payment result: another
		 * product's v2 notification (委托代扣 contract changes carry
		 * contract_code and change_type).  No handling: unhandled, typed
		 * by what it carries (docs/PROVIDERS.md "Every event type").
		 */
		const char *ct = v2_get(a, x, "change_type");

		ev->event_type = f.other_product
		    ? pn_arena_printf(a, "v2.contract.%s", ct ? ct : "-") : "v2.other";
	}
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(ev, missing);
	if (ev->kind == PN_KIND_IGNORED)
		pn_flag_unhandled(a, ev, "WeChat Pay");
	if (!pn_wechatpay_currency(a, v2_get(a, x, "fee_type"), &ev->currency)) {
		ev->currency = NULL;
		pn_flag_amount(ev, "fee_type is not an ISO 4217 code");
	}
	if (!fen_text(v2_get(a, x, "total_fee"), &ev->amount_minor)) {
		ev->amount_minor = -1;
		if (ev->kind == PN_KIND_PAID && ev->flag == NULL)
			pn_flag_amount(ev, "no usable total_fee on a payment");
	}
}

/* Decrypt req_info with each APIv2 key; the inner <root> XML must parse. */
static PN_WUR bool
v2_open_refund(const struct pn_verify_ctx *ctx, const char *req_info, struct pn_xml_flat *in,
	       const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	unsigned char *raw, *plain, aes[32];
	size_t	rawlen, plen, i;
	const char *opened = NULL;
	struct pn_err inner;

	if (!pn_b64_decode(ctx->arena, req_info, strlen(req_info), &raw, &rawlen)) {
		pn_err_set(err, "req_info is not valid base64");
		return false;
	}
	for (i = 0; i < s->wechatpay.napiv2_keys; i++) {
		bool dec = pn_wechatpay_v2_refund_key(&s->wechatpay.apiv2_keys[i], aes)
		    && pn_aes256ecb_decrypt(ctx->arena, aes, raw, rawlen, &plain, &plen);

		OPENSSL_cleanse(aes, sizeof(aes));
		if (!dec)
			continue;
		/* No MAC: well-formed <root> XML is the rest of the proof. */
		if (pn_xml_parse_flat(ctx->arena, plain, plen, "root", in, &inner)) {
			*key_id = s->wechatpay.apiv2_keys[i].id;
			return true;
		}
		opened = s->wechatpay.apiv2_keys[i].id;
	}
	if (opened != NULL)
		pn_err_set(err, "WeChat Pay v2 req_info for site %s decrypts with APIv2 key %s but "
			   "is not acceptable XML: %s", s->name, opened, inner.msg);
	else
		pn_err_set(err, "could not decrypt WeChat Pay v2 refund req_info for site %s with "
			   "any APIv2 key (%zu tried)", s->name, s->wechatpay.napiv2_keys);
	return false;
}

static void
v2_refund(struct pn_arena *a, const struct pn_xml_flat *in, struct pn_event *ev,
	  struct pn_wechatpay_v2_refund *r)
{
	const char *status = v2_get(a, in, "refund_status");
	const char *rid = v2_get(a, in, "refund_id");
	const char *orn = v2_get(a, in, "out_refund_no");
	struct v2_content c = {"v2.refund", in};
	struct pn_wechatpay_fact f;
	const char *missing = NULL;

	r->refund_id = rid;
	r->out_refund_no = orn;
	r->refund_status = status;

	ev->order_id = v2_get(a, in, "out_trade_no");
	ev->psp_txn_id = v2_get(a, in, "transaction_id");
	ev->psp_time = v2_get(a, in, "success_time");
	/* dedup key, kind and type: wechatpay/identity.c, shared with reconcile */
	memset(&f, 0, sizeof(f));
	f.v2 = true;
	f.refund = true;
	f.state = status;
	f.refund_id = rid;
	f.out_refund_no = orn;
	f.content_key = v2_content_key;
	f.content_arg = &c;
	pn_wechatpay_identity(a, &f, ev, &missing);
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(ev, missing);
	ev->currency = "CNY";
	if (!fen_text(v2_get(a, in, "total_fee"), &ev->amount_minor))
		ev->amount_minor = -1;
	/*
	 * refund_status (退款结果通知, pay.weixin.qq.com/wiki/doc/api/jsapi.php?
	 * chapter=9_16): SUCCESS 退款成功; CHANGE 退款异常, the money could not
	 * reach the buyer (a closed card or account) and is re-issued from the
	 * merchant platform or paid another way; REFUNDCLOSE 退款关闭, closed
	 * without money returned.  The last two are refund_failed, for a
	 * person, saying so; any other status has no handling (unhandled).
	 */
	if (streq(status, "CHANGE") || streq(status, "REFUNDCLOSE")) {
		const char *rfee = v2_get(a, in, "refund_fee");
		int64_t	fen;
		char	amount[48] = "no amount";

		/* a refund event (its amount on report, kind refund), never applied: flagged */
		ev->refund_minor = -1;
		if (fen_text(rfee, &fen)) {
			pn_money_format(fen, 2, amount, sizeof(amount));
			strcat(amount, " CNY");
			ev->refund_minor = fen;
		}
		pn_flag_refund_failed(ev, pn_arena_printf(
			a, "refund %.64s (out_refund_no %.64s, %s) of transaction %.64s did not "
			"happen: refund_status %s: %s", rid ? rid : "-", orn ? orn : "-", amount,
			ev->psp_txn_id ? ev->psp_txn_id : "-", status,
			streq(status, "CHANGE")
			? "the money could not reach the buyer (退款异常); re-issue it from the "
			  "merchant platform or pay the buyer another way"
			: "closed without money returned (退款关闭); refund again if it is still "
			  "owed"));
		return;
	}
	if (!streq(status, "SUCCESS")) {
		pn_flag_unhandled(a, ev, "WeChat Pay");
		return;
	}
	/* kind refund, refund_fee this refund alone (refund_cumulative false) */
	if (!fen_text(v2_get(a, in, "refund_fee"), &ev->refund_minor)) {
		ev->refund_minor = -1;
		pn_flag_amount(ev, "no usable refund_fee on a refund");
	}
}

bool
pn_wechatpay_v2_refund_result(const struct pn_verify_ctx *ctx, struct pn_event *ev,
			      struct pn_wechatpay_v2_refund *r, struct pn_err *err)
{
	struct pn_xml_flat x, in;
	const char *req_info, *key_id = NULL;

	memset(r, 0, sizeof(*r));
	pn_event_init(ev);
	if (!pn_xml_parse_flat(ctx->arena, ctx->req->body, ctx->req->body_len, "xml", &x, err)) {
		pn_err_prefix(err, "stored WeChat Pay v2 refund result is not acceptable XML");
		return false;
	}
	req_info = v2_get(ctx->arena, &x, "req_info");
	if (req_info == NULL) {
		pn_err_set(err, "stored WeChat Pay v2 notification has no req_info: not a refund");
		return false;
	}
	if (!v2_open_refund(ctx, req_info, &in, &key_id, err))
		return false;
	v2_refund(ctx->arena, &in, ev, r);
	ev->weak_identity = true;
	ev->key_id = key_id;
	ev->dedup_key = pn_wechatpay_bound_key(ctx->arena, ev->dedup_key);
	return true;
}

/*
 * Shared with `paynotify query` (admin/query_wechatpay.c): an API v2
 * orderquery answer with trade_state SUCCESS is the payment result of the
 * notification, normalised by the same code: the same dedup key
 * ("<transaction_id>:SUCCESS"), amounts and merchant check.
 */
static void
v2_payment_site(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
		const struct pn_xml_flat *x, struct pn_event *ev)
{
	struct pn_wechatpay_merchant m;
	const char *attach;

	v2_payment(a, x, ev);
	m.mchid = v2_get(a, x, "mch_id");
	m.sub_mchid = v2_get(a, x, "sub_mch_id");
	m.appid = v2_get(a, x, "appid");
	m.sub_appid = v2_get(a, x, "sub_appid");
	m.mchid_name = "mch_id";
	m.appid_name = "appid";
	pn_wechatpay_check_merchant(a, site, &m, true, ev);
	/* wechatpay.site_attach: attach is one of the signed fields (every
	 * field but sign is signed, WeChat Pay v2 "安全规范") */
	attach = v2_get(a, x, "attach");
	pn_wechatpay_check_attach(a, cfg, site, attach, attach ? strlen(attach) : 0, ev);
	ev->dedup_key = pn_wechatpay_bound_key(a, ev->dedup_key);
}

void
pn_wechatpay_v2_payment(struct pn_arena *a, const struct pn_site *site,
			const struct pn_xml_flat *x, struct pn_event *ev)
{
	v2_payment_site(a, NULL, site, x, ev);
}

/* ---- API v2: combine payments (合单支付) --------------------------------- */

/*
 * The v2 combine payment result (docs/WECHATPAY.md "Combine payments"):
 * combine_appid, combine_mch_id, combine_out_trade_no, result_code, sign
 * over every field, and sub_order_list, a JSON string {"order_num": N,
 * "order_list": [{appid, mch_id, (sub_mch_id, sub_appid,) openid,
 * total_fee, cash_fee, transaction_id, out_trade_no, attach, time_end}]}.
 * The sign covers sub_order_list as a string, so each sub-order is signed.
 */
struct v2_reverify {
	const struct pn_verify_ctx *ctx;
	const struct pn_xml_flat *x;
};

static bool
v2_verified_by(void *arg, const struct pn_site *t, const char **key_id)
{
	const struct v2_reverify *rv = arg;
	struct pn_verify_ctx tc = *rv->ctx;
	struct pn_err e;

	tc.site = t;
	return t->wechatpay.napiv2_keys > 0 && v2_check_sign(&tc, rv->x, key_id, &e);
}

/* A sub-order amount: a JSON integer, or a decimal string of fen. */
static bool
v2_sub_fen(json_t *so, const char *name, int64_t *out)
{
	json_t *v = json_object_get(so, name);

	if (json_is_string(v))
		return fen_text(json_string_value(v), out);
	if (!json_is_integer(v) || json_integer_value(v) < 0
	    || json_integer_value(v) > PN_WECHATPAY_MAX_FEN)
		return false;
	*out = json_integer_value(v);
	return true;
}

static const char *
v2_sub_str(struct pn_arena *a, json_t *so, const char *name)
{
	const char *v = pn_json_str(a, so, name);

	return v && *v ? v : NULL;
}

/* A sub-order's signed content (its canonical JSON), for wechatpay/identity.c. */
struct v2_sub_content {
	const char *combine_id;
	json_t *so;
};

static const char *
v2_sub_content_key(struct pn_arena *a, void *arg)
{
	const struct v2_sub_content *sc = arg;
	char   *c = json_dumps(sc->so, JSON_COMPACT | JSON_SORT_KEYS);
	struct pn_iov iov[3] = {{sc->combine_id, strlen(sc->combine_id)}, {"\n", 1},
				{c ? c : "", c ? strlen(c) : 0}};
	const char *k = pn_wechatpay_noid_key(a, iov, 3);

	free(c);
	return k;
}

static void
v2_sub_order(struct pn_arena *a, json_t *so, const char *combine_id, const char *result,
	     struct pn_event *sub)
{
	const char *txn = v2_sub_str(a, so, "transaction_id");
	const char *otn = v2_sub_str(a, so, "out_trade_no");
	struct v2_sub_content c = {combine_id, so};
	struct pn_wechatpay_fact f;
	const char *missing = NULL;

	sub->order_id = otn;
	sub->psp_txn_id = txn;
	sub->psp_time = v2_sub_str(a, so, "time_end");
	/* the key a single v2 payment of this transaction has (wechatpay/identity.c) */
	memset(&f, 0, sizeof(f));
	f.v2 = true;
	f.sub_order = true;
	f.state = result;
	f.transaction_id = txn;
	f.out_trade_no = otn;
	f.content_key = v2_sub_content_key;
	f.content_arg = &c;
	pn_wechatpay_identity(a, &f, sub, &missing);
	if (!pn_wechatpay_currency(a, v2_sub_str(a, so, "fee_type"), &sub->currency)) {
		sub->currency = NULL;
		pn_flag_amount(sub, "fee_type is not an ISO 4217 code");
	}
	if (!v2_sub_fen(so, "total_fee", &sub->amount_minor)) {
		sub->amount_minor = -1;
		if (sub->kind == PN_KIND_PAID && sub->flag == NULL)
			pn_flag_amount(sub, "no usable total_fee on a sub-order");
	}
	if (missing != NULL)
		pn_wechatpay_flag_missing_id(sub, missing);
}

static void
v2_combine(const struct pn_verify_ctx *ctx, const struct pn_xml_flat *x, const char *key_id,
	   struct pn_event *ev)
{
	struct pn_arena *a = ctx->arena;
	const char *result = v2_get(a, x, "result_code");
	const char *cotn = v2_get(a, x, "combine_out_trade_no");
	const char *cmch = v2_get(a, x, "combine_mch_id"), *capp = v2_get(a, x, "combine_appid");
	const char *list = v2_get(a, x, "sub_order_list");
	const char *combine_id = pn_arena_printf(a, "combine\n%s\n%s", cmch ? cmch : "",
						 cotn ? cotn : "");
	struct v2_reverify rv = {ctx, x};
	struct pn_wechatpay_router router;
	struct pn_err jerr;
	json_t *root = NULL, *orders;
	size_t	i, n = 0;

	ev->kind = PN_KIND_IGNORED;
	ev->key_id = key_id;
	ev->event_type = pn_arena_printf(a, "v2.combine.%s", result ? result : "-");
	ev->psp_time = v2_get(a, x, "time_end");
	ev->dedup_key = pn_arena_printf(a, "combine:%s:%s", v2_noid(a, "v2.combine", x) + 5,
					result ? result : "-");
	if (list != NULL)
		root = pn_json_parse(list, strlen(list), &jerr);
	orders = json_is_object(root) ? json_object_get(root, "order_list") : NULL;
	n = json_is_array(orders) ? json_array_size(orders) : 0;
	if (n == 0 || n > PN_EVENT_MAX_SUBS) {
		pn_wechatpay_flag_missing_id(ev, pn_arena_printf(a, "combine payment %.32s with %zu "
					     "usable sub-orders in sub_order_list (1 to %d "
					     "expected): not applied",
					     cotn ? cotn : "(no combine_out_trade_no)", n,
					     PN_EVENT_MAX_SUBS));
		goto done;
	}
	ev->flag_detail = pn_arena_printf(a, "combine payment %.32s of combine_mch_id %.32s: %zu "
					  "sub-orders", cotn ? cotn : "-", cmch ? cmch : "-", n);
	ev->subs = pn_arena_alloc(a, n * sizeof(*ev->subs));
	ev->nsubs = n;
	memset(&router, 0, sizeof(router));
	router.ctx = ctx;
	router.verified = v2_verified_by;
	router.arg = &rv;
	router.own_key_id = key_id;
	for (i = 0; i < n; i++) {
		json_t *so = json_array_get(orders, i);
		struct pn_event *sub = &ev->subs[i];
		struct pn_wechatpay_merchant m;

		pn_event_init(sub);
		sub->event_type = pn_arena_printf(a, "v2.pay.%s", result ? result : "-");
		sub->key_id = key_id;
		if (!json_is_object(so)) {
			char   *c = json_dumps(so, JSON_COMPACT | JSON_ENCODE_ANY);
			struct pn_iov iov[3] = {{combine_id, strlen(combine_id)}, {"\n", 1},
						{c ? c : "", c ? strlen(c) : 0}};

			sub->dedup_key = pn_wechatpay_noid_key(a, iov, 3);
			free(c);
			pn_wechatpay_flag_missing_id(sub, "an order_list entry that is not an object");
			continue;
		}
		v2_sub_order(a, so, combine_id, result, sub);
		memset(&m, 0, sizeof(m));
		m.mchid = v2_sub_str(a, so, "mch_id");
		m.sub_mchid = v2_sub_str(a, so, "sub_mch_id");
		/* the sub-order's own appid (WeChat: bound to its mch_id), else the combine one */
		m.appid = v2_sub_str(a, so, "appid");
		if (m.appid == NULL)
			m.appid = capp;
		m.sub_appid = v2_sub_str(a, so, "sub_appid");
		m.mchid_name = "order_list[].mch_id";
		m.appid_name = "order_list[].appid";
		pn_wechatpay_route(&router, &m, sub);
		pn_wechatpay_sub_marker(ctx, v2_sub_str(a, so, "attach"), sub);
		/* as a single v2 payment (v2_payment): a result_code with no handling */
		if (sub->kind == PN_KIND_IGNORED)
			pn_flag_unhandled(a, sub, "WeChat Pay");
		sub->dedup_key = pn_wechatpay_bound_key(a, sub->dedup_key);
	}
done:
	json_decref(root);
}

enum pn_verdict
pn_wechatpay_v2_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	struct pn_xml_flat x, in;
	const char *rc, *req_info, *key_id = NULL;

	if (ctx->site->wechatpay.napiv2_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv2_key_file: API v2 notifications "
			   "cannot be verified", ctx->site->name);
		return PN_UNVERIFIED;
	}
	if (!pn_xml_parse_flat(ctx->arena, req->body, req->body_len, "xml", &x, err)) {
		pn_err_prefix(err, "WeChat Pay v2 notification is not acceptable XML");
		return PN_MALFORMED;
	}
	/* return_code is a transport flag; without SUCCESS nothing is signed. */
	rc = v2_get(ctx->arena, &x, "return_code");
	if (!streq(rc, "SUCCESS")) {
		pn_err_set(err, "WeChat Pay v2 return_code is \"%.16s\", not SUCCESS: nothing to "
			   "verify or record", rc ? rc : "");
		return PN_MALFORMED;
	}
	req_info = v2_get(ctx->arena, &x, "req_info");
	if (req_info != NULL) {
		struct pn_wechatpay_v2_refund r;

		if (!v2_open_refund(ctx, req_info, &in, &key_id, err))
			return PN_UNVERIFIED;
		v2_refund(ctx->arena, &in, ev, &r);
		/*
		 * Nothing signed ties a v2 refund result to this site, or even
		 * holds it together: the outer mch_id/sub_mch_id/appid are not
		 * covered by anything (a sender may edit them freely), and
		 * req_info is AES-256-ECB without integrity: 16-byte blocks of
		 * two genuine refunds under the same APIv2 key can be swapped,
		 * giving one order's transaction_id with another refund's
		 * refund_id and refund_fee (issue 23).  So the outer ids decide
		 * nothing, not even a merchant_mismatch flag, and a refund is
		 * stored pending_confirmation: `paynotify query` asks WeChat
		 * Pay's signed refundquery about its refund_id and applies it
		 * only when the answer has the same refund, transaction, order
		 * and amounts, status SUCCESS; the store then still requires a
		 * payment this site verified (same transaction_id, not above
		 * what was paid: weak_identity, else txn_mismatch).  A result
		 * that is not a SUCCESS refund changes no order and needs no
		 * confirmation.
		 */
		ev->weak_identity = true;
		ev->key_id = key_id;
		ev->dedup_key = pn_wechatpay_bound_key(ctx->arena, ev->dedup_key);
		if (ev->kind == PN_KIND_REFUND && ev->flag == NULL) {
			ev->flag = PN_FLAG_PENDING_CONFIRMATION;
			ev->flag_detail = "WeChat Pay v2 refund result (req_info carries no MAC): "
					  "waits for a signed refundquery answer (paynotify query)";
		}
		return PN_VERIFIED;
	}
	if (!v2_check_sign(ctx, &x, &key_id, err))
		return PN_UNVERIFIED;
	if (pn_xml_get(&x, "sub_order_list") != NULL
	    || pn_xml_get(&x, "combine_out_trade_no") != NULL) {
		v2_combine(ctx, &x, key_id, ev);
		return PN_VERIFIED;
	}
	ev->key_id = key_id;
	v2_payment_site(ctx->arena, ctx->cfg, ctx->site, &x, ev);
	return PN_VERIFIED;
}

/*
 * sign_wechatpay.c: WeChat Pay test notifications (`paynotify sign
 * wechatpay [--v2]`): API v3, the resource sealed with AEAD_AES_256_GCM
 * under the first APIv3 key and the envelope signed SHA256withRSA with
 * wechatpay.test_private_key_file; API v2, the XML signed with the first
 * APIv2 key (pn_wechatpay_v2_sign) or, for a refund, req_info sealed with
 * AES-256-ECB under the key pn_wechatpay_v2_refund_key derives.
 */
#include "config.h"

#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "sign.h"
#include "wechatpay.h"
#include "xml.h"

/* The test payment's transaction id: one per order, so that a signed refund
 * names the payment it refunds (the store checks it). */
static const char *
test_txn(struct pn_arena *a, const struct pn_sign_req *r)
{
	size_t	n = strlen(r->order_id);

	return pn_arena_printf(a, "42%s", pn_hex_encode(a, r->order_id, n > 15 ? 15 : n, false));
}

static char *
random_token(struct pn_arena *a, const char *id, size_t len)
{
	/* Derived from the caller's unique id: 32 hex characters at most. */
	unsigned char md[64];
	size_t	n;
	struct pn_iov iov = {id, strlen(id)};

	if (!pn_digest(PN_MD_SHA256, &iov, 1, md, &n))
		return pn_arena_strdup(a, "0123456789abcdef0123456789abcdef");
	return pn_arena_strndup(a, pn_hex_encode(a, md, n, true), len);
}

/* The sub-order i (0: the request's own) of a combine payment. */
static void
combine_part(const struct pn_sign_req *r, size_t i, const struct pn_site **site,
	     const char **order, int64_t *amount)
{
	*site = i == 0 ? r->site : r->subs[i - 1].site;
	*order = i == 0 ? r->order_id : r->subs[i - 1].order_id;
	*amount = i == 0 ? r->amount_minor : r->subs[i - 1].amount_minor;
}

/* An API v3 combine payment (合单支付) resource, as WeChat Pay documents its
 * notification (docs/WECHATPAY.md "Combine payments"). */
static json_t *
combine_v3(const struct pn_sign_req *r)
{
	struct pn_arena *a = r->arena;
	json_t *subs = json_array();
	size_t	i;

	for (i = 0; i <= r->nsubs; i++) {
		const struct pn_site *s;
		const char *order;
		int64_t	amount;
		struct pn_sign_req one = *r;

		combine_part(r, i, &s, &order, &amount);
		one.order_id = order;
		json_array_append_new(subs, json_pack(
			"{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:s, s:s}}",
			"mchid", s->wechatpay.mchid, "trade_type", "JSAPI", "trade_state", "SUCCESS",
			"bank_type", "OTHERS", "attach", "", "success_time",
			"2024-05-20T10:00:05+08:00", "transaction_id", test_txn(a, &one),
			"out_trade_no", order, "amount", "total_amount", (json_int_t)amount,
			"payer_amount", (json_int_t)amount, "currency", r->currency,
			"payer_currency", r->currency));
	}
	return json_pack("{s:s, s:s, s:s, s:{s:s}, s:o}", "combine_appid", r->site->wechatpay.appid,
			 "combine_mchid", r->site->wechatpay.mchid, "combine_out_trade_no",
			 pn_arena_printf(a, "C%s", r->id), "combine_payer_info", "openid", "o-test",
			 "sub_orders", subs);
}

/* The v2 sub_order_list JSON string of a combine payment. */
static char *
combine_v2_list(const struct pn_sign_req *r)
{
	struct pn_arena *a = r->arena;
	json_t *list = json_array();
	size_t	i;

	for (i = 0; i <= r->nsubs; i++) {
		const struct pn_site *s;
		const char *order;
		int64_t	amount;
		struct pn_sign_req one = *r;

		combine_part(r, i, &s, &order, &amount);
		one.order_id = order;
		json_array_append_new(list, json_pack(
			"{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:s}", "appid",
			s->wechatpay.appid, "mch_id", s->wechatpay.mchid, "openid", "o-test",
			"total_fee", (json_int_t)amount, "cash_fee", (json_int_t)amount,
			"fee_type", r->currency, "transaction_id", test_txn(a, &one),
			"out_trade_no", order, "attach", "", "time_end", "20240520100005"));
	}
	return pn_sign_json(a, json_pack("{s:I, s:o}", "order_num", (json_int_t)(r->nsubs + 1),
					 "order_list", list));
}

static bool
sign_v3(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	const struct pn_site *s = r->site;
	struct pn_arena *a = r->arena;
	const char *type, *aad, *serial, *nonce = random_token(a, r->id, 12);
	const char *ts = pn_arena_printf(a, "%lld", (long long)r->now);
	const char *hnonce = random_token(a, pn_arena_printf(a, "n%s", r->id), 32);
	json_t *res, *env;
	char   *plain;
	unsigned char *ct, *sig;
	size_t	ctlen, siglen;
	struct pn_buf msg = PN_BUF_INIT;

	if (s->wechatpay.napiv3_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv3_key_file", s->name);
		return false;
	}
	serial = s->wechatpay.public_key_id ? s->wechatpay.public_key_id
	    : s->wechatpay.ncerts ? s->wechatpay.certs[0].serial : NULL;
	if (serial == NULL) {
		pn_err_set(err, "site %s has no WeChat Pay public key id or certificate", s->name);
		return false;
	}
	switch (r->nsubs > 0 ? -1 : (int)r->kind) {
	case -1:
		type = "TRANSACTION.SUCCESS";
		aad = "transaction";
		res = combine_v3(r);
		break;
	case PN_KIND_PAID:
	case PN_KIND_CLOSED:
	case PN_KIND_FAILED:
		type = "TRANSACTION.SUCCESS";
		aad = "transaction";
		res = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:I, s:I, s:s, s:s}}",
				"mchid", s->wechatpay.mchid, "appid", s->wechatpay.appid,
				"out_trade_no", r->order_id, "transaction_id",
				test_txn(a, r), "trade_type", "JSAPI",
				"trade_state", r->kind == PN_KIND_PAID ? "SUCCESS"
				: r->kind == PN_KIND_CLOSED ? "CLOSED" : "PAYERROR",
				"success_time", "2024-05-20T10:00:05+08:00", "payer", "openid", "o-test",
				"amount", "total", (json_int_t)r->amount_minor, "payer_total",
				(json_int_t)r->amount_minor, "currency", r->currency, "payer_currency",
				r->currency);
		if (res != NULL && r->marker != NULL)
			json_object_set_new(res, "attach", json_string(r->marker));
		if (r->kind != PN_KIND_PAID)
			type = "TRANSACTION.CLOSED";
		break;
	case PN_KIND_REFUND:
		type = "REFUND.SUCCESS";
		aad = "refund";
		/* The order total is not known here: amount.total is left out,
		 * so only the refund amount is checked against the order. */
		res = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:s}}",
				"mchid", s->wechatpay.mchid, "out_trade_no", r->order_id,
				"transaction_id", test_txn(a, r), "out_refund_no",
				pn_arena_printf(a, "R%s", r->id), "refund_id",
				pn_arena_printf(a, "50%s", r->id), "refund_status", "SUCCESS", "amount",
				"refund", (json_int_t)r->amount_minor, "payer_refund",
				(json_int_t)r->amount_minor, "currency", r->currency);
		break;
	case PN_KIND_COMPLAINT:
		/* 消费者投诉 2.0: only the complaint's id and what happened (wechatpay_v3.c) */
		type = r->case_status && strcmp(r->case_status, "CREATE_COMPLAINT") != 0
		    ? "COMPLAINT.STATE_CHANGE" : "COMPLAINT.CREATE";
		aad = "complaint";
		res = json_pack("{s:s, s:s}", "complaint_id",
				r->case_id ? r->case_id : pn_arena_printf(a, "200201820%s", r->id),
				"action_type", r->case_status ? r->case_status : "CREATE_COMPLAINT");
		break;
	default:
		pn_err_set(err, "no WeChat Pay test notification for \"%s\"", pn_kind_name(r->kind));
		return false;
	}
	plain = pn_sign_json(a, res);
	if (plain == NULL || !pn_aes256gcm_encrypt(a, s->wechatpay.apiv3_keys[0].data, nonce, 12,
						    aad, strlen(aad), plain, strlen(plain), &ct,
						    &ctlen)) {
		pn_err_set(err, "could not encrypt the resource");
		return false;
	}
	env = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}", "id",
			pn_arena_printf(a, "EV-%s", r->id), "create_time", "2024-05-20T10:00:06+08:00",
			"resource_type", "encrypt-resource", "event_type", type, "summary", "test",
			"resource", "original_type", aad, "algorithm", "AEAD_AES_256_GCM",
			"ciphertext", pn_b64_encode(a, ct, ctlen), "associated_data", aad, "nonce",
			nonce);
	if ((out->body = pn_sign_json(a, env)) == NULL) {
		pn_err_set(err, "could not build the envelope");
		return false;
	}
	out->body_len = strlen(out->body);
	pn_buf_printf(&msg, "%s\n%s\n", ts, hnonce);
	pn_buf_put(&msg, out->body, out->body_len);
	pn_buf_putc(&msg, '\n');
	if (!pn_rsa_sign(a, s->wechatpay.test_key, PN_MD_SHA256, msg.data, msg.len, &sig, &siglen)) {
		pn_buf_free(&msg);
		pn_err_set(err, "could not sign with wechatpay.test_private_key_file");
		return false;
	}
	pn_buf_free(&msg);
	out->content_type = "application/json";
	out->headers[0].name = "Wechatpay-Timestamp";
	out->headers[0].value = ts;
	out->headers[1].name = "Wechatpay-Nonce";
	out->headers[1].value = hnonce;
	out->headers[2].name = "Wechatpay-Serial";
	out->headers[2].value = serial;
	out->headers[3].name = "Wechatpay-Signature-Type";
	out->headers[3].value = PN_WECHATPAY_SIGN_TYPE;
	out->headers[4].name = "Wechatpay-Signature";
	out->headers[4].value = pn_b64_encode(a, sig, siglen);
	out->nheaders = 5;
	return true;
}

/* Flat <xml>/<root> document with CDATA values. */
static char *
xml_doc(struct pn_arena *a, const char *root, const struct pn_xml_flat *x)
{
	struct pn_buf b = PN_BUF_INIT;
	char   *out;
	size_t	i;

	pn_buf_printf(&b, "<%s>", root);
	for (i = 0; i < x->n; i++)
		pn_buf_printf(&b, "<%s><![CDATA[%s]]></%s>", x->fields[i].name, x->fields[i].value,
			      x->fields[i].name);
	pn_buf_printf(&b, "</%s>", root);
	out = pn_arena_strndup(a, b.data, b.len);
	pn_buf_free(&b);
	return out;
}

static void
xml_add(struct pn_xml_flat *x, const char *name, const char *value)
{
	x->fields[x->n].name = name;
	x->fields[x->n].value = value;
	x->fields[x->n].value_len = strlen(value);
	x->n++;
}

static bool
sign_v2(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	const struct pn_site *s = r->site;
	struct pn_arena *a = r->arena;
	const struct pn_secret *key;
	struct pn_xml_flat x, in;
	const char *fen = pn_arena_printf(a, "%lld", (long long)r->amount_minor);
	enum pn_wxv2_sign alg;
	const char *sign;

	if (s->wechatpay.napiv2_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv2_key_file", s->name);
		return false;
	}
	key = &s->wechatpay.apiv2_keys[0];
	x.n = in.n = 0;
	x.fields = pn_arena_alloc(a, 24 * sizeof(*x.fields));
	in.fields = pn_arena_alloc(a, 16 * sizeof(*in.fields));
	xml_add(&x, "return_code", "SUCCESS");
	xml_add(&x, "appid", s->wechatpay.appid);
	xml_add(&x, "mch_id", s->wechatpay.mchid);
	xml_add(&x, "nonce_str", random_token(a, r->id, 32));
	if (r->kind == PN_KIND_REFUND) {
		unsigned char aes[32], *ct;
		size_t	ctlen;
		bool	ok;

		xml_add(&in, "out_refund_no", pn_arena_printf(a, "R%s", r->id));
		xml_add(&in, "out_trade_no", r->order_id);
		xml_add(&in, "refund_fee", fen);
		xml_add(&in, "refund_id", pn_arena_printf(a, "50%s", r->id));
		xml_add(&in, "refund_status", "SUCCESS");	/* total_fee unknown here */
		xml_add(&in, "transaction_id", test_txn(a, r));
		ok = pn_wechatpay_v2_refund_key(key, aes);
		if (ok) {
			const char *doc = xml_doc(a, "root", &in);

			ok = pn_aes256ecb_encrypt(a, aes, doc, strlen(doc), &ct, &ctlen);
		}
		OPENSSL_cleanse(aes, sizeof(aes));
		if (!ok) {
			pn_err_set(err, "could not encrypt req_info");
			return false;
		}
		xml_add(&x, "req_info", pn_b64_encode(a, ct, ctlen));
	} else if (r->nsubs > 0) {
		/* combine payment result: no top-level appid/mch_id, HMAC-SHA256 as
		 * the combine order API requires */
		const char *list = combine_v2_list(r);

		x.n = 0;
		xml_add(&x, "return_code", "SUCCESS");
		xml_add(&x, "combine_appid", s->wechatpay.appid);
		xml_add(&x, "combine_mch_id", s->wechatpay.mchid);
		xml_add(&x, "nonce_str", random_token(a, r->id, 32));
		xml_add(&x, "combine_out_trade_no", pn_arena_printf(a, "C%s", r->id));
		xml_add(&x, "trade_type", "JSAPI");
		xml_add(&x, "result_code", "SUCCESS");
		if (list == NULL) {
			pn_err_set(err, "could not build sub_order_list");
			return false;
		}
		xml_add(&x, "sub_order_list", list);
		alg = (s->wechatpay.v2_sign_types & PN_WXV2_HMAC_SHA256) ? PN_WXV2_HMAC_SHA256
		    : PN_WXV2_MD5;
		if (alg == PN_WXV2_HMAC_SHA256)
			xml_add(&x, "sign_type", "HMAC-SHA256");
		sign = pn_wechatpay_v2_sign(a, &x, alg, key);
		if (sign == NULL) {
			pn_err_set(err, "could not compute the v2 sign");
			return false;
		}
		xml_add(&x, "sign", sign);
	} else if (r->kind == PN_KIND_PAID || r->kind == PN_KIND_FAILED) {
		/* MD5 unless the site accepts HMAC-SHA256 only. */
		alg = (s->wechatpay.v2_sign_types & PN_WXV2_MD5) ? PN_WXV2_MD5 : PN_WXV2_HMAC_SHA256;
		xml_add(&x, "result_code", r->kind == PN_KIND_PAID ? "SUCCESS" : "FAIL");
		xml_add(&x, "out_trade_no", r->order_id);
		xml_add(&x, "transaction_id", test_txn(a, r));
		xml_add(&x, "total_fee", fen);
		xml_add(&x, "fee_type", r->currency);
		xml_add(&x, "trade_type", "JSAPI");
		xml_add(&x, "time_end", "20240520100005");
		if (r->marker != NULL)
			xml_add(&x, "attach", r->marker);
		if (alg == PN_WXV2_HMAC_SHA256)
			xml_add(&x, "sign_type", "HMAC-SHA256");
		sign = pn_wechatpay_v2_sign(a, &x, alg, key);
		if (sign == NULL) {	/* an OpenSSL failure: never strlen(NULL) */
			pn_err_set(err, "could not compute the v2 sign");
			return false;
		}
		xml_add(&x, "sign", sign);
	} else {
		pn_err_set(err, "no WeChat Pay v2 test notification for \"%s\"", pn_kind_name(r->kind));
		return false;
	}
	out->content_type = "text/xml";
	out->nheaders = 0;
	out->body = xml_doc(a, "xml", &x);
	out->body_len = strlen(out->body);
	return true;
}

bool
pn_sign_wechatpay(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	if (r->site->wechatpay.test_key == NULL) {
		pn_err_set(err, "site %s has no wechatpay.test_private_key_file: refusing to sign",
			   r->site->name);
		return false;
	}
	if (r->nsubs > 0 && r->kind != PN_KIND_PAID) {
		pn_err_set(err, "a combine payment (--combine) is a payment: --event paid only");
		return false;
	}
	if (r->variant && strcmp(r->variant, "v2") == 0) {
		if (r->kind == PN_KIND_COMPLAINT) {
			pn_err_set(err, "complaints are WeChat Pay API v3 notifications only");
			return false;
		}
		return sign_v2(r, out, err);
	}
	return sign_v3(r, out, err);
}


/*
 * sign_2c2p.c: 2C2P test notifications (`paynotify sign 2c2p`), for sites
 * with 2c2p.test_signing: a PGW v4 {"payload":"<JWT>"} (HS256 with the
 * first secret) or, for 2c2p.api = redirect, the legacy form with its
 * hash_value over pn_2c2p_redirect_content().
 */
#include "config.h"

#include <string.h>
#include <time.h>

#include <jansson.h>

#include "2c2p.h"
#include "buf.h"
#include "crypto.h"
#include "form.h"
#include "money.h"
#include "sign.h"

static const char *
sign_resp_code(enum pn_kind kind, bool legacy)
{
	switch (kind) {
	case PN_KIND_PAID:
		return legacy ? "000" : "0000";
	case PN_KIND_CLOSED:
		return legacy ? "003" : "0003";
	case PN_KIND_FAILED:
		return legacy ? "002" : "4051";
	default:
		return NULL;
	}
}

static bool
sign_v4(const struct pn_sign_req *r, const char *code, struct pn_signed *out,
	struct pn_err *err)
{
	const struct pn_secret *key = &r->site->twoc2p.secrets[0];
	struct pn_arena *a = r->arena;
	char	amount[32], when[16];
	const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", *signing;
	char   *payload;
	json_t *obj;
	unsigned char mac[64];
	size_t	maclen;
	struct pn_iov iov;
	time_t	t = (time_t)r->now;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y%m%d%H%M%S", &tm);
	pn_money_format(r->amount_minor, pn_money_exponent(r->currency), amount, sizeof(amount));
	obj = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
			"merchantID", r->site->twoc2p.merchant_id, "invoiceNo", r->order_id,
			"cardNo", "411111XXXXXX1111", "amount", amount, "currencyCode", r->currency,
			"tranRef", pn_arena_printf(a, "t%s", r->id), "referenceNo", r->id,
			"approvalCode", "123456", "eci", "05", "transactionDateTime", when,
			"respCode", code, "respDesc", "paynotify test");
	if (obj != NULL && r->marker != NULL) {
		struct pn_cfg_marker mk;
		const char *field = "userDefined1";

		if (pn_cfg_marker(r->site, &pn_twoc2p_cfg_keys, &mk))
			field = pn_arena_strndup(a, mk.field, mk.field_len);
		json_object_set_new(obj, field, json_string(r->marker));
	}
	payload = pn_sign_json(a, obj);
	if (payload == NULL) {
		pn_err_set(err, "could not build the payload");
		return false;
	}
	signing = pn_arena_printf(a, "%s.%s", pn_b64url_encode(a, hdr, strlen(hdr)),
				  pn_b64url_encode(a, payload, strlen(payload)));
	iov.p = signing;
	iov.len = strlen(signing);
	if (!pn_hmac(PN_MD_SHA256, key->data, key->len, &iov, 1, mac, &maclen)) {
		pn_err_set(err, "HMAC failed");
		return false;
	}
	out->content_type = "application/json; charset=utf-8";
	out->body = pn_arena_printf(a, "{\"payload\":\"%s.%s\"}", signing,
				    pn_b64url_encode(a, mac, maclen));
	out->body_len = strlen(out->body);
	return true;
}

static bool
sign_redirect(const struct pn_sign_req *r, const char *code, struct pn_signed *out,
	      struct pn_err *err)
{
	const struct pn_secret *key = &r->site->twoc2p.secrets[0];
	struct pn_arena *a = r->arena;
	struct pn_form f;
	struct pn_buf body = PN_BUF_INIT;
	unsigned char mac[64];
	size_t	maclen, len, i;
	struct pn_iov iov;
	const char *numeric = pn_money_numeric(r->currency);
	char	when[24];
	time_t	t = (time_t)r->now;
	struct tm tm;
	static const char *keys[] = {"version", "request_timestamp", "merchant_id", "order_id",
		"invoice_no", "currency", "amount", "transaction_ref", "approval_code", "eci",
		"transaction_datetime", "payment_channel", "payment_status",
		"channel_response_code", "channel_response_desc", "masked_pan", "hash_value"};
	const char *vals[PN_ARRAY_LEN(keys)];
	char	ud[16] = "user_defined_1";
	struct pn_cfg_marker mk;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	vals[0] = "7.0";
	vals[1] = when;
	vals[2] = r->site->twoc2p.merchant_id;
	vals[3] = r->order_id;
	vals[4] = r->site->twoc2p.redirect_invoice_no == PN_2C2P_INVOICE_ORDER_ID ? r->order_id : "";
	vals[5] = numeric;
	vals[6] = pn_arena_printf(a, "%012lld", (long long)r->amount_minor);
	vals[7] = pn_arena_printf(a, "t%s", r->id);
	vals[8] = "123456";
	vals[9] = "05";
	vals[10] = when;
	vals[11] = "001";
	vals[12] = code;
	vals[13] = "00";
	vals[14] = "paynotify test";
	vals[15] = "411111XXXXXX1111";
	f.n = PN_ARRAY_LEN(keys) - 1;
	f.fields = pn_arena_alloc(a, (PN_ARRAY_LEN(keys) + 1) * sizeof(*f.fields));
	for (i = 0; i < f.n; i++) {
		f.fields[i].key = keys[i];
		f.fields[i].value = vals[i];
		f.fields[i].value_len = strlen(vals[i]);
	}
	if (r->marker != NULL) {
		/* userDefinedN of 2c2p.site_marker is the form's user_defined_N */
		if (pn_cfg_marker(r->site, &pn_twoc2p_cfg_keys, &mk))
			ud[13] = mk.field[mk.field_len - 1];
		f.fields[f.n].key = ud;
		f.fields[f.n].value = r->marker;
		f.fields[f.n].value_len = strlen(r->marker);
		f.n++;
	}
	iov.p = pn_2c2p_redirect_content(a, &f, &len);
	iov.len = len;
	if (!pn_hmac(r->site->twoc2p.redirect_hash == PN_2C2P_SHA256 ? PN_MD_SHA256 : PN_MD_SHA1,
		     key->data, key->len, &iov, 1, mac, &maclen)) {
		pn_err_set(err, "HMAC failed");
		return false;
	}
	vals[16] = pn_hex_encode(a, mac, maclen, false);
	for (i = 0; i < PN_ARRAY_LEN(keys); i++)
		pn_buf_printf(&body, "%s%s=%s", i ? "&" : "", keys[i], pn_form_encode(a, vals[i]));
	if (r->marker != NULL)
		pn_buf_printf(&body, "&%s=%s", ud, pn_form_encode(a, r->marker));
	out->content_type = "application/x-www-form-urlencoded";
	out->body = pn_arena_memdup(a, body.data, body.len);
	out->body_len = body.len;
	pn_buf_free(&body);
	return true;
}

bool
pn_sign_2c2p(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	bool	legacy = r->site->twoc2p.api == PN_2C2P_REDIRECT;
	const char *code = sign_resp_code(r->kind, legacy);

	if (!r->site->twoc2p.test_signing) {
		pn_err_set(err, "site %s does not set 2c2p.test_signing = on: refusing to sign",
			   r->site->name);
		return false;
	}
	if (code == NULL) {
		pn_err_set(err, "2C2P sends no \"%s\" notification", pn_kind_name(r->kind));
		return false;
	}
	out->nheaders = 0;
	return legacy ? sign_redirect(r, code, out, err) : sign_v4(r, code, out, err);
}


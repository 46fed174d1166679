/*
 * query_wechatpay.c: WeChat Pay API v3 "query an order by out_trade_no"
 * (docs/QUERY.md "WeChat Pay").
 *
 * Request: GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=...
 * with Authorization: WECHATPAY2-SHA256-RSA2048 mchid="",nonce_str="",
 * signature="",timestamp="",serial_no="": SHA256withRSA with the merchant
 * API private key over "GET\n<path?query>\n<timestamp>\n<nonce>\n\n" (empty
 * body), serial_no the merchant API certificate's serial
 * (wechatpay-go core/auth/signers, credentials.WechatPayCredentials).
 * Answer: 200 and the transaction as JSON (not encrypted), signed in its
 * Wechatpay-Timestamp/-Nonce/-Signature/-Serial headers exactly as a
 * notification; verified by the receiver's own code
 * (pn_wechatpay_v3_verify_sig), then normalised by it
 * (pn_wechatpay_v3_transaction): a SUCCESS answer gets the dedup key of the
 * TRANSACTION.SUCCESS notification of that transaction_id.
 * Other statuses: 404 ORDER_NOT_EXIST is "not found"; wechatpay-go checks
 * no signature on a non-2xx answer, and neither do we: such answers change
 * nothing.
 * A site with only API v2 keys is asked with API v2 orderquery
 * (https://pay.weixin.qq.com/wiki/doc/api/jsapi.php?chapter=9_2): POST
 * <query_url>/pay/orderquery, flat XML appid, mch_id, out_trade_no,
 * nonce_str, sign_type, sign (WXPayUtil.generateSignature with the APIv2
 * key: HMAC-SHA256 when wechatpay.v2_sign_type accepts it, else MD5); the
 * answer is signed the same way with the algorithm of the request (WXPay
 * processResponseXml checks with the configured type; the answer names
 * none) and, with trade_state SUCCESS, normalised by the receiver's
 * pn_wechatpay_v2_payment: the v2 notification's "<transaction_id>:SUCCESS".
 * The APIv2 key is already the receiver's: v2 needs no new credential.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "json.h"
#include "xml.h"
#include "provider.h"
#include "form.h"
#include "query.h"
#include "wechatpay.h"

struct creds {
	EVP_PKEY *key;		/* NULL: API v2 (the APIv2 key is the configuration's) */
};

static const char *
wechatpay_describe(const void *p)
{
	const struct creds *c = p;

	return c->key ? "API v3" : "API v2 orderquery";
}

static bool
wechatpay_configured(const struct pn_site *site, const char **why)
{
	if (!site->wechatpay.configured) {
		*why = "WeChat Pay is not configured";
		return false;
	}
	if (site->wechatpay.napiv3_keys == 0)
		return site->wechatpay.napiv2_keys > 0;	/* API v2 orderquery */
	if (site->wechatpay.query_key_path == NULL) {
		*why = "wechatpay.query_private_key_file and wechatpay.query_cert_serial are not set";
		return false;
	}
	return true;
}

static bool
wechatpay_load(const struct pn_site *site, void **out, struct pn_err *err)
{
	struct creds *c;
	EVP_PKEY *k;

	if (site->wechatpay.napiv3_keys == 0) {	/* v2: the APIv2 key is loaded already */
		*out = pn_xcalloc(1, sizeof(struct creds));
		return true;
	}
	if (!pn_cfg_secret_file_ok(site->wechatpay.query_key_path, err))
		return false;
	k = pn_privkey_load(site->wechatpay.query_key_path, err);
	if (k == NULL) {
		pn_err_prefix(err, "site %s: wechatpay.query_private_key_file", site->name);
		return false;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA || EVP_PKEY_get_bits(k) < 2048) {
		EVP_PKEY_free(k);
		pn_err_set(err, "site %s: wechatpay.query_private_key_file is not an RSA key of at "
			   "least 2048 bits", site->name);
		return false;
	}
	c = pn_xcalloc(1, sizeof(*c));
	c->key = k;
	*out = c;
	return true;
}

static void
wechatpay_free(void *p)
{
	struct creds *c = p;

	if (c == NULL)
		return;
	EVP_PKEY_free(c->key);
	free(c);
}

/* The path (and query) of url as it goes on the request line. */
static const char *
url_path(const char *url)
{
	const char *p = strchr(url + 8, '/');	/* after "https://" */

	return p ? p : "";
}

/* ---- API v2 orderquery ---------------------------------------------------- */

static void
xml_add(struct pn_buf *b, struct pn_xml_flat *x, const char *name, const char *value)
{
	x->fields[x->n].name = name;
	x->fields[x->n].value = value;
	x->fields[x->n].value_len = strlen(value);
	x->n++;
	/* values we send are ids and hex: CDATA keeps any other byte literal */
	pn_buf_printf(b, "<%s><![CDATA[%s]]></%s>", name, value, name);
}

static bool
v2_sign_ok(struct pn_arena *a, const struct pn_site *site, const struct pn_xml_flat *x,
	   enum pn_wxv2_sign alg, const char **key_id)
{
	const char *sign = pn_xml_get(x, "sign");
	size_t	i, len;

	if (sign == NULL)
		return false;
	len = strlen(sign);
	for (i = 0; i < site->wechatpay.napiv2_keys; i++) {
		const char *want = pn_wechatpay_v2_sign(a, x, alg, &site->wechatpay.apiv2_keys[i]);

		if (want != NULL && strlen(want) == len && pn_ct_equal(want, sign, len)) {
			*key_id = site->wechatpay.apiv2_keys[i].id;
			return true;
		}
	}
	return false;
}

static void
v2_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
       struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	enum pn_wxv2_sign alg = site->wechatpay.v2_sign_types & PN_WXV2_HMAC_SHA256
	    ? PN_WXV2_HMAC_SHA256 : PN_WXV2_MD5;
	const char *headers[] = {"Content-Type: text/xml; charset=utf-8", NULL};
	const char *sign, *key_id = NULL, *rc, *result, *state, *otn;
	struct pn_xml_flat req, x;
	struct pn_buf b = PN_BUF_INIT;
	struct pn_qhttp_answer h;
	struct pn_event *ev = &ans->ev;
	unsigned char rnd[16];
	struct pn_err err;
	char   *body, *url;
	size_t	blen;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not make a nonce");
		return;
	}
	req.n = 0;
	req.fields = pn_arena_alloc(a, 8 * sizeof(*req.fields));
	pn_buf_puts(&b, "<xml>");
	xml_add(&b, &req, "appid", site->wechatpay.appid);
	xml_add(&b, &req, "mch_id", site->wechatpay.mchid);
	xml_add(&b, &req, "out_trade_no", o->order_id);
	xml_add(&b, &req, "nonce_str", pn_hex_encode(a, rnd, sizeof(rnd), true));
	xml_add(&b, &req, "sign_type", alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256");
	sign = pn_wechatpay_v2_sign(a, &req, alg, &site->wechatpay.apiv2_keys[0]);
	if (sign == NULL) {
		pn_buf_free(&b);
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not sign the orderquery request");
		return;
	}
	pn_buf_printf(&b, "<sign>%s</sign></xml>", sign);
	blen = b.len;
	body = pn_arena_memdup(a, b.data, b.len + 1);
	pn_buf_free(&b);
	url = pn_arena_printf(a, "%s/pay/orderquery", site->wechatpay.query_url);
	if (!pn_qhttp_do(ctx->http, a, "POST", url, headers, body, blen, &h, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return;
	}
	if (!pn_query_http_ok(ctx, &h, false, ans))
		return;
	if (!pn_xml_parse_flat(a, h.body, h.body_len, "xml", &x, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay v2 answer is not acceptable XML: %s",
			     err.msg);
		return;
	}
	rc = pn_xml_get(&x, "return_code");
	if (rc == NULL || strcmp(rc, "SUCCESS") != 0) {	/* unsigned transport error */
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay v2 return_code %.16s: %.120s",
			     rc ? rc : "-", pn_xml_get(&x, "return_msg")
			     ? pn_xml_get(&x, "return_msg") : "");
		return;
	}
	if (!v2_sign_ok(a, site, &x, alg, &key_id)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "could not verify WeChat Pay v2 %s sign of the "
			     "orderquery answer for site %s: no APIv2 key matched",
			     alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256", site->name);
		return;
	}
	result = pn_xml_get(&x, "result_code");
	state = pn_xml_get(&x, "trade_state");
	otn = pn_xml_get(&x, "out_trade_no");
	ans->psp_state = state ? state : pn_xml_get(&x, "err_code");
	if (result == NULL || strcmp(result, "SUCCESS") != 0) {
		const char *ec = pn_xml_get(&x, "err_code");

		pn_query_set(ctx, ans, ec && strcmp(ec, "ORDERNOTEXIST") == 0 ? PN_Q_NOT_FOUND
			     : PN_Q_ERROR, "WeChat Pay v2 result_code %.16s, err_code %.32s",
			     result ? result : "-", ec ? ec : "-");
		return;
	}
	if (otn == NULL || strcmp(otn, o->order_id) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answered for out_trade_no "
			     "\"%.64s\", not \"%s\"", otn ? otn : "", o->order_id);
		return;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->key_id = key_id;
	if (state != NULL && strcmp(state, "SUCCESS") == 0)
		pn_wechatpay_v2_payment(a, site, &x, ev);
	else if (state != NULL && strcmp(state, "REFUND") == 0) {
		pn_query_set(ctx, ans, PN_Q_ATTENTION, "WeChat Pay trade_state REFUND: the order was "
			     "paid and refunded; look at it by hand");
		return;
	} else {
		/* CLOSED/REVOKED close, PAYERROR fails: keyed apart from the payment */
		const char *txn = pn_xml_get(&x, "transaction_id");

		ev->kind = state == NULL ? PN_KIND_IGNORED
		    : strcmp(state, "CLOSED") == 0 || strcmp(state, "REVOKED") == 0 ? PN_KIND_CLOSED
		    : strcmp(state, "PAYERROR") == 0 ? PN_KIND_FAILED : PN_KIND_PENDING;
		ev->order_id = otn;
		ev->psp_txn_id = txn && *txn ? txn : NULL;
		ev->event_type = pn_arena_printf(a, "v2.query.%s", state ? state : "-");
		ev->dedup_key = pn_arena_printf(a, "%s:QUERY:%s", ev->psp_txn_id ? ev->psp_txn_id
						: pn_arena_printf(a, "otn:%s", otn), state ? state : "-");
		if (ev->kind == PN_KIND_PENDING || ev->kind == PN_KIND_IGNORED) {
			pn_query_set(ctx, ans, PN_Q_WAITING, "WeChat Pay trade_state %.32s",
				     state ? state : "(none)");
			return;
		}
	}
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "WeChat Pay v2 trade_state %s, transaction_id %s", state,
		     ev->psp_txn_id ? ev->psp_txn_id : "-");
}

/* ---- API v3 ----------------------------------------------------------------- */

/* Sign and send a GET of url: WECHATPAY2-SHA256-RSA2048 over "GET\n<path>\n<ts>\n<nonce>\n\n". */
static bool
signed_get(const struct pn_query_ctx *ctx, const char *url, struct pn_qhttp_answer *h,
	   struct pn_err *err)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const struct creds *c = ctx->creds;
	unsigned char rnd[16], *sig;
	char   *nonce, *message, *auth, ts[24];
	const char *headers[5];
	size_t	siglen, nh = 0;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		pn_err_set(err, "could not make a nonce");
		return false;
	}
	nonce = pn_hex_encode(a, rnd, sizeof(rnd), true);
	snprintf(ts, sizeof(ts), "%lld", (long long)ctx->now);
	message = pn_arena_printf(a, "GET\n%s\n%s\n%s\n\n", url_path(url), ts, nonce);
	if (!pn_rsa_sign(a, c->key, PN_MD_SHA256, message, strlen(message), &sig, &siglen)) {
		pn_err_set(err, "could not sign the request with wechatpay.query_private_key_file");
		return false;
	}
	auth = pn_arena_printf(a, "Authorization: " PN_WECHATPAY_SIGN_TYPE " mchid=\"%s\","
			       "nonce_str=\"%s\",signature=\"%s\",timestamp=\"%s\",serial_no=\"%s\"",
			       site->wechatpay.mchid, nonce, pn_b64_encode(a, sig, siglen), ts,
			       site->wechatpay.query_cert_serial);
	headers[nh++] = auth;
	headers[nh++] = "Accept: application/json";
	if (site->wechatpay.public_key_id)	/* public-key mode: say which key we verify with */
		headers[nh++] = pn_arena_printf(a, "Wechatpay-Serial: %s",
						site->wechatpay.public_key_id);
	headers[nh] = NULL;
	return pn_qhttp_do(ctx->http, a, "GET", url, headers, NULL, 0, h, err);
}

bool
pn_query_wechatpay_get(const struct pn_query_ctx *ctx, const char *url, bool verify,
		       struct pn_qhttp_answer *out, struct pn_err *err)
{
	struct pn_verify_ctx vctx;
	const char *key_id = NULL;

	if (!signed_get(ctx, url, out, err))
		return false;
	if (out->status < 200 || out->status > 299) {
		pn_err_set(err, "HTTP %ld from WeChat Pay: %.200s", out->status,
			   (const char *)out->body);
		return false;
	}
	if (!verify)
		return true;
	memset(&vctx, 0, sizeof(vctx));
	vctx.req = &out->headers;
	vctx.site = ctx->site;
	vctx.arena = ctx->arena;
	vctx.now = ctx->now;
	vctx.check_freshness = true;
	if (!pn_wechatpay_v3_verify_sig(&vctx, &key_id, err)) {
		pn_err_prefix(err, "WeChat Pay answer refused");
		return false;
	}
	return true;
}

static void
wechatpay_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
	      struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	char   *url;
	const char *key_id = NULL, *state, *otn;
	struct pn_qhttp_answer h;
	struct pn_verify_ctx vctx;
	struct pn_err err;
	json_t *root = NULL;
	struct pn_event *ev = &ans->ev;

	if (site->wechatpay.napiv3_keys == 0) {
		v2_ask(ctx, o, ans);
		return;
	}
	url = pn_arena_printf(a, "%s/v3/pay/transactions/out-trade-no/%s?mchid=%s",
			      site->wechatpay.query_url, pn_uri_encode(a, o->order_id),
			      pn_uri_encode(a, site->wechatpay.mchid));
	if (!signed_get(ctx, url, &h, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return;
	}
	if (!pn_query_http_ok(ctx, &h, true, ans))
		return;
	memset(&vctx, 0, sizeof(vctx));
	vctx.req = &h.headers;
	vctx.site = site;
	vctx.arena = a;
	vctx.now = ctx->now;
	vctx.check_freshness = true;
	if (!pn_wechatpay_v3_verify_sig(&vctx, &key_id, &err)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answer refused: %s", err.msg);
		return;
	}
	root = pn_json_parse(h.body, h.body_len, &err);
	if (root == NULL || !json_is_object(root)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay answer is not a JSON object");
		goto done;
	}
	state = pn_json_str(a, root, "trade_state");
	otn = pn_json_str(a, root, "out_trade_no");
	ans->psp_state = state;
	if (otn == NULL || strcmp(otn, o->order_id) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answered for out_trade_no "
			     "\"%.64s\", not \"%s\"", otn ? otn : "", o->order_id);
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->key_id = key_id;
	pn_wechatpay_v3_transaction(a, site, root, state && strcmp(state, "SUCCESS") == 0
				    ? "TRANSACTION.SUCCESS" : "QUERY", ev);
	if (state != NULL && strcmp(state, "REFUND") == 0) {
		pn_query_set(ctx, ans, PN_Q_ATTENTION, "WeChat Pay trade_state REFUND: the order was "
			     "paid and refunded; look at it by hand");
		goto done;
	}
	if (ev->kind != PN_KIND_PAID && ev->kind != PN_KIND_CLOSED && ev->kind != PN_KIND_FAILED) {
		pn_query_set(ctx, ans, PN_Q_WAITING, "WeChat Pay trade_state %.32s",
			     state ? state : "(none)");
		goto done;
	}
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "WeChat Pay trade_state %s, transaction_id %s", state,
		     ev->psp_txn_id ? ev->psp_txn_id : "-");
done:
	json_decref(root);
}

/*
 * A combine order (合单查询订单, docs/WECHATPAY.md "Combine payments"):
 * GET /v3/combine-transactions/out-trade-no/{combine_out_trade_no}, no
 * mchid parameter (the combine merchant is the caller); the answer has the
 * notification's resource fields: combine_appid, combine_mchid,
 * combine_out_trade_no, sub_orders[] with mchid, (sub_mchid,) trade_state,
 * transaction_id, out_trade_no, amount.total_amount / payer_amount.
 */
void
pn_query_wechatpay_combine(const struct pn_query_ctx *ctx, const char *cotn,
			   struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *key_id = NULL, *got;
	struct pn_qhttp_answer h;
	struct pn_verify_ctx vctx;
	struct pn_err err;
	json_t *root = NULL, *subs;
	struct pn_event *ev = &ans->ev;
	struct pn_query_sub *qs;
	size_t	i, n, nfinal = 0, nwaiting = 0;
	char   *canon;

	if (site->wechatpay.napiv3_keys == 0) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "combine orders are queried with API v3: site "
			     "%s has no wechatpay.apiv3_key_file", site->name);
		return;
	}
	if (!signed_get(ctx, pn_arena_printf(a, "%s/v3/combine-transactions/out-trade-no/%s",
					     site->wechatpay.query_url, pn_uri_encode(a, cotn)),
			&h, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return;
	}
	if (!pn_query_http_ok(ctx, &h, true, ans))
		return;
	memset(&vctx, 0, sizeof(vctx));
	vctx.req = &h.headers;
	vctx.site = site;
	vctx.arena = a;
	vctx.now = ctx->now;
	vctx.check_freshness = true;
	if (!pn_wechatpay_v3_verify_sig(&vctx, &key_id, &err)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answer refused: %s", err.msg);
		return;
	}
	root = pn_json_parse(h.body, h.body_len, &err);
	if (root == NULL || !json_is_object(root)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay answer is not a JSON object");
		goto done;
	}
	got = pn_json_str(a, root, "combine_out_trade_no");
	subs = json_object_get(root, "sub_orders");
	n = json_is_array(subs) ? json_array_size(subs) : 0;
	if (got == NULL || strcmp(got, cotn) != 0 || n == 0 || n > PN_EVENT_MAX_SUBS) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answered for combine_out_trade_no "
			     "\"%.64s\" with %zu sub_orders, not for \"%s\" (1 to %d sub-orders)",
			     got ? got : "", n, cotn, PN_EVENT_MAX_SUBS);
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->key_id = key_id;
	ev->event_type = "QUERY";
	canon = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	{
		struct pn_iov iov = {canon ? canon : "", canon ? strlen(canon) : 0};
		unsigned char md[64];
		size_t	mdlen = 0;

		if (!pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen))
			mdlen = 0;
		ev->dedup_key = pn_arena_printf(a, "combine:%s:QUERY",
						pn_hex_encode(a, md, mdlen, false));
	}
	free(canon);
	ev->subs = pn_arena_alloc(a, n * sizeof(*ev->subs));
	qs = pn_arena_alloc(a, n * sizeof(*qs));
	ans->subs = qs;
	ans->nsubs = n;
	for (i = 0; i < n; i++) {
		json_t *so = json_array_get(subs, i);
		const char *state = json_is_object(so) ? pn_json_str(a, so, "trade_state") : NULL;
		struct pn_event *sub = &ev->subs[nfinal];
		bool	ours = pn_wechatpay_v3_combine_sub(a, site, root, so,
							   state && strcmp(state, "SUCCESS") == 0
							   ? "TRANSACTION.SUCCESS" : "QUERY", sub);

		memset(&qs[i], 0, sizeof(qs[i]));
		qs[i].order_id = sub->order_id ? sub->order_id : "";
		qs[i].psp_state = state;
		qs[i].amount_minor = sub->amount_minor;
		qs[i].currency = sub->currency;
		qs[i].ingest = -1;
		if (!ours) {
			qs[i].result = "other_merchant";
			qs[i].detail = pn_arena_printf(a, "sub-order of merchant %.32s, not site %s's: "
						       "its own site queries it",
						       json_is_object(so) ? pn_json_str(a, so, "mchid")
						       : "?", site->name);
			continue;
		}
		if (sub->kind != PN_KIND_PAID && sub->kind != PN_KIND_CLOSED
		    && sub->kind != PN_KIND_FAILED) {
			qs[i].result = "waiting";
			qs[i].detail = pn_arena_printf(a, "WeChat Pay trade_state %.32s",
						       state ? state : "(none)");
			nwaiting++;
			continue;
		}
		sub->source = "query";
		sub->key_id = key_id;
		qs[i].ingest = (int)nfinal++;
		qs[i].detail = pn_arena_printf(a, "WeChat Pay trade_state %s, transaction_id %s",
					       state, sub->psp_txn_id ? sub->psp_txn_id : "-");
	}
	ev->nsubs = nfinal;
	ev->flag_detail = pn_arena_printf(a, "combine order %.32s queried: %zu sub-orders, %zu of "
					  "site %s final", cotn, n, nfinal, site->name);
	if (nfinal == 0) {
		pn_query_set(ctx, ans, PN_Q_WAITING, "combine order %s: nothing final for site %s "
			     "(%zu waiting)", cotn, site->name, nwaiting);
		goto done;
	}
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "combine order %s: %zu of %zu sub-orders final", cotn,
		     nfinal, n);
done:
	json_decref(root);
}

const struct pn_query_provider pn_query_wechatpay = {
	.name = "wechatpay",
	.configured = wechatpay_configured,
	.load = wechatpay_load,
	.free_creds = wechatpay_free,
	.describe = wechatpay_describe,
	.ask = wechatpay_ask,
};

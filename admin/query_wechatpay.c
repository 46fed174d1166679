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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "json.h"
#include "money.h"
#include "xml.h"
#include "provider.h"
#include "form.h"
#include "query.h"
#include "wechatpay.h"
#include "wechatpay/identity.h"

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

/*
 * One signed API v2 call: POST <query_url><path> with appid, mch_id, the
 * query field (name = value), nonce_str (random), sign_type and sign
 * (HMAC-SHA256 when wechatpay.v2_sign_type accepts it, else MD5).  True
 * when the answer is flat XML with return_code SUCCESS whose sign verifies
 * with the algorithm of the request and one of the site's APIv2 keys (x,
 * h and key_id filled); false with ans set (ERROR or REFUSED) otherwise.
 */
static bool
v2_call(const struct pn_query_ctx *ctx, const char *path, const char *name, const char *value,
	struct pn_xml_flat *x, struct pn_qhttp_answer *h, const char **key_id,
	struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	enum pn_wxv2_sign alg = site->wechatpay.v2_sign_types & PN_WXV2_HMAC_SHA256
	    ? PN_WXV2_HMAC_SHA256 : PN_WXV2_MD5;
	const char *headers[] = {"Content-Type: text/xml; charset=utf-8", NULL};
	const char *sign, *rc;
	struct pn_xml_flat req;
	struct pn_buf b = PN_BUF_INIT;
	unsigned char rnd[16];
	struct pn_err err;
	char   *body, *url;
	size_t	blen;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not make a nonce");
		return false;
	}
	req.n = 0;
	req.fields = pn_arena_alloc(a, 8 * sizeof(*req.fields));
	pn_buf_puts(&b, "<xml>");
	xml_add(&b, &req, "appid", site->wechatpay.appid);
	xml_add(&b, &req, "mch_id", site->wechatpay.mchid);
	xml_add(&b, &req, name, value);
	xml_add(&b, &req, "nonce_str", pn_hex_encode(a, rnd, sizeof(rnd), true));
	xml_add(&b, &req, "sign_type", alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256");
	sign = pn_wechatpay_v2_sign(a, &req, alg, &site->wechatpay.apiv2_keys[0]);
	if (sign == NULL) {
		pn_buf_free(&b);
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not sign the %s request", path + 5);
		return false;
	}
	pn_buf_printf(&b, "<sign>%s</sign></xml>", sign);
	blen = b.len;
	body = pn_arena_memdup(a, b.data, b.len + 1);
	pn_buf_free(&b);
	url = pn_arena_printf(a, "%s%s", site->wechatpay.query_url, path);
	if (!pn_qhttp_do(ctx->http, a, "POST", url, headers, body, blen, h, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return false;
	}
	if (!pn_query_http_ok(ctx, h, false, ans))
		return false;
	if (!pn_xml_parse_flat(a, h->body, h->body_len, "xml", x, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay v2 answer is not acceptable XML: %s",
			     err.msg);
		return false;
	}
	rc = pn_xml_get(x, "return_code");
	if (rc == NULL || strcmp(rc, "SUCCESS") != 0) {	/* unsigned transport error */
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay v2 return_code %.16s: %.120s",
			     rc ? rc : "-", pn_xml_get(x, "return_msg")
			     ? pn_xml_get(x, "return_msg") : "");
		return false;
	}
	if (!v2_sign_ok(a, site, x, alg, key_id)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "could not verify WeChat Pay v2 %s sign of the "
			     "%s answer for site %s: no APIv2 key matched",
			     alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256", path + 5, site->name);
		return false;
	}
	return true;
}

static void
v2_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
       struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *key_id = NULL, *result, *state, *otn;
	struct pn_xml_flat x;
	struct pn_qhttp_answer h;
	struct pn_event *ev = &ans->ev;

	if (!v2_call(ctx, "/pay/orderquery", "out_trade_no", o->order_id, &x, &h, &key_id, ans))
		return;
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
		/*
		 * CLOSED/REVOKED close, PAYERROR fails: keyed apart from the payment,
		 * as an API v3 answer of that state (wechatpay/identity.c:
		 * "<transaction_id or otn:...>:QUERY:<trade_state>")
		 */
		const char *txn = pn_xml_get(&x, "transaction_id");
		struct pn_wechatpay_fact f;
		const char *missing;

		ev->order_id = otn;
		ev->psp_txn_id = txn && *txn ? txn : NULL;
		memset(&f, 0, sizeof(f));
		f.event_type = "QUERY";
		f.state = state;
		f.transaction_id = ev->psp_txn_id;
		f.out_trade_no = otn;
		pn_wechatpay_identity(a, &f, ev, &missing);
		ev->event_type = pn_arena_printf(a, "v2.query.%s", state ? state : "-");
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

/* ---- API v2 refundquery: confirming a stored refund result -------------- */

static void
confirm_set(const struct pn_query_ctx *ctx, struct pn_query_confirmation *c,
	    enum pn_confirm_state state, const char *outcome, const char *fmt, ...)
	PN_PRINTF(5, 6);

static void
confirm_set(const struct pn_query_ctx *ctx, struct pn_query_confirmation *c,
	    enum pn_confirm_state state, const char *outcome, const char *fmt, ...)
{
	va_list	ap;
	char	buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	c->state = state;
	c->outcome = outcome;
	c->detail = pn_arena_strdup(ctx->arena, buf);
}

/* "12.34 CNY" (v2 refunds are CNY: the result has no currency field). */
static const char *
fen_text(struct pn_arena *a, int64_t fen)
{
	char	buf[48];

	if (fen < 0)
		return "no amount";
	pn_money_format(fen, 2, buf, sizeof(buf));
	return pn_arena_printf(a, "%s CNY", buf);
}

static bool
same_text(const char *answer, const char *stored)
{
	return answer != NULL && stored != NULL && strcmp(answer, stored) == 0;
}

/*
 * A stored v2 refund result against WeChat Pay's signed refundquery answer
 * (https://pay.weixin.qq.com/wiki/doc/api/jsapi.php?chapter=9_5; the
 * field names checked against the SDKs: WXPay refundQuery, wechatpay-php's
 * v2/pay/refundquery, and answers quoted in client code, see
 * docs/WECHATPAY.md).  Request: appid, mch_id, refund_id (else
 * out_refund_no: WeChat's priority is refund_id > out_refund_no >
 * transaction_id > out_trade_no), nonce_str, sign_type, sign.  Answer:
 * return_code, result_code, transaction_id, out_trade_no, total_fee,
 * refund_count and per refund $n (from 0) refund_id_$n, out_refund_no_$n,
 * refund_fee_$n, refund_status_$n (SUCCESS, REFUNDCLOSE, PROCESSING,
 * CHANGE), signed as every v2 answer.  result_code FAIL with err_code
 * REFUNDNOTEXIST: not known (yet: some SDKs retry it), asked again.
 */
static void
wechatpay_confirm(const struct pn_query_ctx *ctx, const unsigned char *raw, size_t raw_len,
		  struct pn_query_confirmation *c)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	struct pn_wechatpay_v2_refund r;
	struct pn_event *ev = &c->ev;
	struct pn_query_answer ans;
	struct pn_verify_ctx vctx;
	struct pn_request req;
	struct pn_xml_flat x;
	struct pn_qhttp_answer h;
	struct pn_err err;
	const char *key_id = NULL, *result, *txn, *otn, *mch, *appid, *count_s, *status = NULL;
	const char *rfee_s = NULL, *orn = NULL, *total_s;
	int64_t	count = 0, rfee = -1, total = -1, n;
	bool	found = false;

	memset(c, 0, sizeof(*c));
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.body = raw;
	req.body_len = raw_len;
	memset(&vctx, 0, sizeof(vctx));
	vctx.req = &req;
	vctx.site = site;
	vctx.arena = a;
	vctx.now = ctx->now;
	if (site->wechatpay.napiv2_keys == 0) {
		confirm_set(ctx, c, PN_C_ERROR, NULL, "site %s has no wechatpay.apiv2_key_file: "
			    "the stored refund result cannot be opened", site->name);
		return;
	}
	if (!pn_wechatpay_v2_refund_result(&vctx, ev, &r, &err)) {
		confirm_set(ctx, c, PN_C_ERROR, NULL, "%s", err.msg);
		return;
	}
	if (r.refund_id == NULL && r.out_refund_no == NULL) {
		confirm_set(ctx, c, PN_C_ERROR, NULL, "the stored refund result has neither "
			    "refund_id nor out_refund_no: nothing to ask about");
		return;
	}
	memset(&ans, 0, sizeof(ans));
	if (!v2_call(ctx, "/pay/refundquery", r.refund_id ? "refund_id" : "out_refund_no",
		     r.refund_id ? r.refund_id : r.out_refund_no, &x, &h, &key_id, &ans)) {
		confirm_set(ctx, c, ans.state == PN_Q_REFUSED ? PN_C_REFUSED : PN_C_ERROR, NULL,
			    "%s", ans.detail);
		return;
	}
	result = pn_xml_get(&x, "result_code");
	if (result == NULL || strcmp(result, "SUCCESS") != 0) {
		const char *ec = pn_xml_get(&x, "err_code");

		c->psp_state = ec;
		if (ec != NULL && strcmp(ec, "REFUNDNOTEXIST") == 0)
			confirm_set(ctx, c, PN_C_WAITING, NULL, "refundquery %s: WeChat Pay knows no "
				    "refund %s (yet); not confirmed", ec, r.refund_id ? r.refund_id
				    : r.out_refund_no);
		else
			confirm_set(ctx, c, PN_C_ERROR, NULL, "refundquery result_code %.16s, "
				    "err_code %.32s", result ? result : "-", ec ? ec : "-");
		return;
	}
	/* the answer is the site's merchant's (we asked with its mch_id and key) */
	mch = pn_xml_get(&x, "mch_id");
	appid = pn_xml_get(&x, "appid");
	if (!same_text(mch, site->wechatpay.mchid)
	    || (appid != NULL && site->wechatpay.appid != NULL
		&& strcmp(appid, site->wechatpay.appid) != 0)) {
		confirm_set(ctx, c, PN_C_REFUSED, NULL, "refundquery answer for mch_id \"%.32s\" "
			    "appid \"%.32s\", not site %s's", mch ? mch : "", appid ? appid : "",
			    site->name);
		return;
	}
	txn = pn_xml_get(&x, "transaction_id");
	otn = pn_xml_get(&x, "out_trade_no");
	total_s = pn_xml_get(&x, "total_fee");
	count_s = pn_xml_get(&x, "refund_count");
	if (count_s == NULL || !pn_parse_i64(count_s, &count) || count < 0 || count > 100)
		count = -1;
	for (n = 0; n < count && !found; n++) {
		const char *id = pn_xml_get(&x, pn_arena_printf(a, "refund_id_%lld", (long long)n));
		const char *no = pn_xml_get(&x, pn_arena_printf(a, "out_refund_no_%lld",
								(long long)n));

		if (r.refund_id ? same_text(id, r.refund_id) : same_text(no, r.out_refund_no)) {
			found = true;
			orn = no;
			status = pn_xml_get(&x, pn_arena_printf(a, "refund_status_%lld",
								(long long)n));
			rfee_s = pn_xml_get(&x, pn_arena_printf(a, "refund_fee_%lld", (long long)n));
		}
	}
	c->psp_state = status;
	if (count < 0) {
		confirm_set(ctx, c, PN_C_ERROR, NULL, "refundquery answer has no usable "
			    "refund_count");
		return;
	}
	if (!found) {
		confirm_set(ctx, c, PN_C_CONTRADICTED, "txn_mismatch", "not confirmed: WeChat Pay's "
			    "signed refundquery answer lists no refund %s (%lld listed)",
			    r.refund_id ? r.refund_id : r.out_refund_no, (long long)count);
		return;
	}
	if (!same_text(txn, ev->psp_txn_id) || !same_text(otn, ev->order_id)
	    || (r.out_refund_no != NULL && !same_text(orn, r.out_refund_no))) {
		confirm_set(ctx, c, PN_C_CONTRADICTED, "txn_mismatch", "not confirmed: WeChat Pay "
			    "says refund %s (out_refund_no %.64s) is of transaction %.64s, order "
			    "%.64s; this result names transaction %.64s, order %.64s, out_refund_no "
			    "%.64s", r.refund_id ? r.refund_id : "-", orn ? orn : "-",
			    txn ? txn : "-", otn ? otn : "-", ev->psp_txn_id ? ev->psp_txn_id : "-",
			    ev->order_id ? ev->order_id : "-",
			    r.out_refund_no ? r.out_refund_no : "-");
		return;
	}
	if (rfee_s == NULL || !pn_parse_i64(rfee_s, &rfee) || rfee < 0)
		rfee = -1;
	if (total_s == NULL || !pn_parse_i64(total_s, &total) || total < 0)
		total = -1;
	if (rfee < 0 || rfee != ev->refund_minor || total != ev->amount_minor) {
		confirm_set(ctx, c, PN_C_CONTRADICTED, "amount_mismatch", "not confirmed: WeChat "
			    "Pay says refund %s is %s of a payment of %s; this result says %s of %s",
			    r.refund_id ? r.refund_id : orn, fen_text(a, rfee), fen_text(a, total),
			    fen_text(a, ev->refund_minor), fen_text(a, ev->amount_minor));
		return;
	}
	if (status != NULL && strcmp(status, "PROCESSING") == 0) {
		confirm_set(ctx, c, PN_C_WAITING, NULL, "refundquery: refund %s is PROCESSING; not "
			    "confirmed yet", r.refund_id ? r.refund_id : orn);
		return;
	}
	if (status == NULL || strcmp(status, "SUCCESS") != 0) {
		confirm_set(ctx, c, PN_C_CONTRADICTED, "refund_failed", "not confirmed: WeChat Pay "
			    "says refund %s is %.32s, not SUCCESS; nothing was refunded",
			    r.refund_id ? r.refund_id : orn, status ? status : "(no status)");
		return;
	}
	confirm_set(ctx, c, PN_C_CONFIRMED, NULL, "confirmed by WeChat Pay's signed refundquery "
		    "answer (key %s): refund %s SUCCESS, %s, transaction %s", key_id,
		    r.refund_id ? r.refund_id : orn, fen_text(a, rfee), txn);
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
 * A complaint (消费者投诉 2.0, `paynotify query --complaints`): a
 * COMPLAINT.* notification names only complaint_id and action_type
 * (webhooks/wechatpay_v3.c).  "查询投诉单详情": GET
 * /v3/merchant-service/complaints-v2/{complaint_id}, signed as every v3
 * request; the answer (pay.weixin.qq.com/docs/merchant/apis/
 * consumer-complaint/complaints/query-complaint-v2; its fields as
 * wechatpay-im's OpenAPI description lists them): complaint_id,
 * complaint_time, complaint_detail, complaint_state (PENDING, PROCESSING,
 * PROCESSED), complainted_mchid, payer_phone (encrypted with the
 * merchant's platform key: never decrypted here, never stored apart from
 * the verified answer's bytes), complaint_order_info[] {transaction_id,
 * out_trade_no, amount (fen)}, problem_type, problem_description,
 * apply_refund_amount, complaint_full_refunded.  The answer is verified by
 * the receivers' own code (Wechatpay-* headers), exactly as an order query
 * answer; complainted_mchid must be the site's mchid, complaint_id the one
 * asked about.  The first complaint_order_info entry links the complaint
 * to the payment (its transaction_id, the order's recorded transaction).
 */
static void
wechatpay_ask_case(const struct pn_query_ctx *ctx, const char *case_id,
		   struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *key_id = NULL, *id, *state, *mch, *txn, *otn;
	struct pn_qhttp_answer h;
	struct pn_verify_ctx vctx;
	struct pn_err err;
	json_t *root = NULL, *orders, *o0;
	struct pn_event *ev = &ans->ev;
	int64_t	fen;
	char   *url;

	if (site->wechatpay.napiv3_keys == 0) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "complaints are an API v3 product: site %s has "
			     "no wechatpay.apiv3_key_file", site->name);
		return;
	}
	url = pn_arena_printf(a, "%s/v3/merchant-service/complaints-v2/%s",
			      site->wechatpay.query_url, pn_uri_encode(a, case_id));
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
	id = pn_json_str(a, root, "complaint_id");
	state = pn_json_str(a, root, "complaint_state");
	mch = pn_json_str(a, root, "complainted_mchid");
	ans->psp_state = state;
	if (id == NULL || strcmp(id, case_id) != 0 || strlen(id) > 64) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay answered for complaint_id "
			     "\"%.64s\", not \"%s\"", id ? id : "", case_id);
		goto done;
	}
	if (mch == NULL || strcmp(mch, site->wechatpay.mchid) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "WeChat Pay complaint %s is against merchant "
			     "\"%.32s\", not site %s's mchid %s", id, mch ? mch : "", site->name,
			     site->wechatpay.mchid);
		goto done;
	}
	if (state == NULL || *state == '\0') {
		pn_query_set(ctx, ans, PN_Q_ERROR, "WeChat Pay complaint answer has no "
			     "complaint_state");
		goto done;
	}
	orders = json_object_get(root, "complaint_order_info");
	o0 = json_is_array(orders) ? json_array_get(orders, 0) : NULL;
	txn = o0 ? pn_json_str(a, o0, "transaction_id") : NULL;
	otn = o0 ? pn_json_str(a, o0, "out_trade_no") : NULL;
	pn_event_init(ev);
	ev->source = "query";
	ev->kind = PN_KIND_COMPLAINT;
	ev->event_type = "complaints-v2";
	ev->key_id = key_id;
	ev->case_id = id;
	ev->case_status = state;
	ev->case_reason = pn_json_str(a, root, "problem_type");
	ev->case_closed = strcmp(state, "PROCESSED") == 0;
	ev->case_reopens = !ev->case_closed;	/* the answer is the complaint as it is now */
	ev->psp_txn_id = txn && *txn ? txn : NULL;
	ev->order_id = otn && *otn ? otn : NULL;
	ev->psp_time = pn_json_str(a, root, "complaint_time");
	if (o0 != NULL && pn_json_int(o0, "amount", &fen) && fen >= 0
	    && fen <= INT64_C(1000000000000000)) {	/* 10^15 fen, the receivers' bound */
		ev->amount_minor = fen;
		ev->currency = "CNY";	/* v3 amounts without a currency are fen of CNY */
	}
	/* per complaint and state (wechatpay/identity.c); ids <= 64, below */
	ev->dedup_key = pn_wechatpay_complaint_key(a, id, NULL, state, ev->psp_txn_id);
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "WeChat Pay complaint %s complaint_state %s, "
		     "transaction_id %s", id, state, ev->psp_txn_id ? ev->psp_txn_id : "-");
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
	.confirm = wechatpay_confirm,
	.ask_case = wechatpay_ask_case,
};

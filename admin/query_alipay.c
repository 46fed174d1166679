/*
 * query_alipay.c: alipay.trade.query (docs/QUERY.md "Alipay").
 *
 * Request: the open-platform common parameters (app_id, method, format,
 * charset, sign_type, timestamp in Beijing time, version) and
 * biz_content {"out_trade_no": ...}, signed as every open-platform request
 * is: the sorted "k=v" of every non-empty parameter but sign, joined by
 * '&', RSA2 (SHA256withRSA) or RSA (SHA1withRSA) with the app's private key
 * (alipay.query_private_key_file), sent as a form body.
 * Answer: {"alipay_trade_query_response": {...}, "sign": "..."}; the
 * signature covers the exact bytes of the response member's value as they
 * appear in the answer (found in the text, never re-serialised), as
 * alipay-sdk-java (AlipaySignature.getSignSourceData) and gopay
 * (getSignData) take them; it is checked with the site's Alipay public
 * key(s) (alipay.public_key_file, a bare key or the Alipay public-key
 * certificate) with the algorithm of alipay.sign_type.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "2c2p.h"
#include "alipay.h"
#include "alipay/identity.h"
#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "form.h"
#include "json.h"
#include "money.h"
#include "query.h"

#define METHOD "alipay.trade.query"
#define RESPONSE_MEMBER "alipay_trade_query_response"

struct creds {
	EVP_PKEY *key;
	char   *app_cert_sn;		/* certificate mode, else NULL */
	char   *root_cert_sn;
};

/*
 * A certificate's SN as Alipay's SDKs compute it (gopay GetCertSN,
 * alipay-sdk-java AntCertificationUtil.getCertSN): lower-case hex MD5 of
 * the issuer DN in RFC 2253 form (the most significant RDN last:
 * "CN=...,OU=...,O=...,C=CN", UTF-8 kept) followed by the serial number in
 * decimal.  Returns a malloc'd string or NULL.
 */
static char *
cert_sn(X509 *x)
{
	static const char hex[] = "0123456789abcdef";
	BIO    *bio = BIO_new(BIO_s_mem());
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	char   *dec = bn ? BN_bn2dec(bn) : NULL, *name = NULL, *out = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	long	nlen;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (bio == NULL || dec == NULL || ctx == NULL
	    || X509_NAME_print_ex(bio, X509_get_issuer_name(x), 0,
				  XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) < 0)
		goto done;
	nlen = BIO_get_mem_data(bio, &name);
	if (nlen < 0 || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1
	    || EVP_DigestUpdate(ctx, name, (size_t)nlen) != 1
	    || EVP_DigestUpdate(ctx, dec, strlen(dec)) != 1
	    || EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
		goto done;
	out = pn_xmalloc(2 * mdlen + 1);
	for (i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * mdlen] = '\0';
done:
	EVP_MD_CTX_free(ctx);
	OPENSSL_free(dec);
	BN_free(bn);
	BIO_free(bio);
	return out;
}

/*
 * app_cert_sn of the first certificate of path, or (root) alipay_root_cert_sn:
 * the SNs of every certificate signed with an RSA algorithm, joined by '_'
 * (gopay GetRootCertSN; the root file also holds an SM2 certificate, which
 * is skipped).  NULL and err on failure.
 */
static char *
file_sn(const char *path, bool root, struct pn_err *err)
{
	BIO    *bio = BIO_new_file(path, "r");
	struct pn_buf b = PN_BUF_INIT;
	X509   *x;
	char   *sn;

	if (bio == NULL) {
		pn_err_set(err, "could not read certificate file \"%s\"", path);
		return NULL;
	}
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		int	pknid = NID_undef;

		if (root && (!OBJ_find_sigid_algs(X509_get_signature_nid(x), NULL, &pknid)
			     || (pknid != NID_rsaEncryption && pknid != NID_rsassaPss))) {
			X509_free(x);
			continue;
		}
		sn = cert_sn(x);
		X509_free(x);
		if (sn == NULL)
			break;
		pn_buf_printf(&b, "%s%s", b.len ? "_" : "", sn);
		free(sn);
		if (!root)
			break;
	}
	BIO_free(bio);
	if (b.len == 0) {
		pn_buf_free(&b);
		pn_err_set(err, "\"%s\" holds no usable %scertificate", path,
			   root ? "RSA-signed " : "");
		return NULL;
	}
	return pn_buf_steal(&b, NULL);
}

static bool
alipay_configured(const struct pn_site *site, const char **why)
{
	if (!site->alipay.configured) {
		*why = "Alipay is not configured";
		return false;
	}
	if (site->alipay.query_key_path == NULL) {
		*why = "alipay.query_private_key_file is not set";
		return false;
	}
	return true;
}

static void
alipay_free(void *p)
{
	struct creds *c = p;

	if (c == NULL)
		return;
	EVP_PKEY_free(c->key);
	free(c->app_cert_sn);
	free(c->root_cert_sn);
	free(c);
}

static const char *
alipay_describe(const void *p)
{
	const struct creds *c = p;

	return c->app_cert_sn ? "certificate mode" : "public-key mode";
}

static bool
alipay_load(const struct pn_site *site, void **out, struct pn_err *err)
{
	struct creds *c;
	EVP_PKEY *k;

	if (!pn_cfg_secret_file_ok(site->alipay.query_key_path, err))
		return false;
	k = pn_privkey_load(site->alipay.query_key_path, err);
	if (k == NULL) {
		pn_err_prefix(err, "site %s: alipay.query_private_key_file", site->name);
		return false;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA) {
		EVP_PKEY_free(k);
		pn_err_set(err, "site %s: alipay.query_private_key_file is not an RSA key",
			   site->name);
		return false;
	}
	c = pn_xcalloc(1, sizeof(*c));
	c->key = k;
	if (site->alipay.query_app_cert != NULL
	    && ((c->app_cert_sn = file_sn(site->alipay.query_app_cert, false, err)) == NULL
		|| (c->root_cert_sn = file_sn(site->alipay.query_root_cert, true, err)) == NULL)) {
		pn_err_prefix(err, "site %s: certificate mode", site->name);
		alipay_free(c);
		return false;
	}
	*out = c;
	return true;
}

static int
param_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pn_form_field *)a)->key, ((const struct pn_form_field *)b)->key);
}

/* The signed request body (form); NULL when signing failed. */
static char *
build_request(const struct pn_query_ctx *ctx, const struct creds *c, const char *method,
	      json_t *biz, size_t *len)
{
	const struct pn_site *site = ctx->site;
	struct pn_arena *a = ctx->arena;
	enum pn_md md = site->alipay.sign_type == PN_ALIPAY_RSA ? PN_MD_SHA1 : PN_MD_SHA256;
	struct pn_form_field p[10];
	struct pn_buf content = PN_BUF_INIT, body = PN_BUF_INIT;
	char   *biz_text = json_dumps(biz, JSON_COMPACT), when[32], *out = NULL;
	time_t	bj = (time_t)ctx->now + 8 * 3600;	/* Alipay reads Beijing time */
	unsigned char *sig;
	size_t	siglen, i, n = 0;
	struct tm tm;

	gmtime_r(&bj, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	p[n++] = (struct pn_form_field){"app_id", site->alipay.app_id, 0};
	p[n++] = (struct pn_form_field){"biz_content", pn_arena_strdup(a, biz_text), 0};
	p[n++] = (struct pn_form_field){"charset", "utf-8", 0};
	p[n++] = (struct pn_form_field){"format", "JSON", 0};
	p[n++] = (struct pn_form_field){"method", method, 0};
	p[n++] = (struct pn_form_field){"sign_type",
		site->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2", 0};
	p[n++] = (struct pn_form_field){"timestamp", pn_arena_strdup(a, when), 0};
	p[n++] = (struct pn_form_field){"version", "1.0", 0};
	if (c->app_cert_sn != NULL) {	/* public-key certificate mode */
		p[n++] = (struct pn_form_field){"app_cert_sn", c->app_cert_sn, 0};
		p[n++] = (struct pn_form_field){"alipay_root_cert_sn", c->root_cert_sn, 0};
	}
	free(biz_text);
	qsort(p, n, sizeof(p[0]), param_cmp);
	for (i = 0; i < n; i++)
		pn_buf_printf(&content, "%s%s=%s", i ? "&" : "", p[i].key, p[i].value);
	if (!pn_rsa_sign(a, c->key, md, content.data, content.len, &sig, &siglen))
		goto done;
	for (i = 0; i < n; i++)
		pn_buf_printf(&body, "%s=%s&", p[i].key, pn_form_encode(a, p[i].value));
	pn_buf_printf(&body, "sign=%s", pn_form_encode(a, pn_b64_encode(a, sig, siglen)));
	out = pn_arena_memdup(a, body.data, body.len + 1);
	*len = body.len;
done:
	pn_buf_free(&content);
	pn_buf_free(&body);
	return out;
}

/* Verify sign over the raw bytes of the response member. */
static bool
verify_answer(const struct pn_query_ctx *ctx, const struct pn_qhttp_answer *h, const char *member,
	      const char *sign, const char **key_id)
{
	const struct pn_site *site = ctx->site;
	enum pn_md md = site->alipay.sign_type == PN_ALIPAY_RSA ? PN_MD_SHA1 : PN_MD_SHA256;
	const char *raw;
	size_t	rawlen, siglen, i;
	unsigned char *sig;
	struct pn_iov iov;

	if (!pn_2c2p_raw_member((const char *)h->body, h->body_len, member, &raw, &rawlen)
	    || raw[0] != '{')
		return false;
	if (!pn_b64_decode(ctx->arena, sign, strlen(sign), &sig, &siglen))
		return false;
	iov.p = raw;
	iov.len = rawlen;
	for (i = 0; i < site->alipay.nkeys; i++)
		if (pn_rsa_verify(site->alipay.keys[i].pkey, md, &iov, 1, sig, siglen)) {
			*key_id = site->alipay.keys[i].id;
			return true;
		}
	return false;
}

/*
 * One signed gateway call, its answer's <member> verified on its raw
 * bytes (verify_answer) and its code 10000: true, with *root (json_decref
 * it), *resp the member inside it, h the answer as received and *key_id
 * the key that verified it.  Otherwise false and ans says why: an
 * unverified answer is refused, an answer with sub_code not_found is "not
 * found", anything else an error.
 */
static bool
gateway_ask(const struct pn_query_ctx *ctx, const char *method, const char *member_name,
	    json_t *biz, const char *not_found, struct pn_query_answer *ans,
	    struct pn_qhttp_answer *h, json_t **root, json_t **resp, const char **key_id)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded;charset=utf-8",
				 "Accept: application/json", NULL};
	const char *member = member_name, *sign, *code, *sub_code;
	struct pn_err err;
	size_t	blen;
	char   *body = build_request(ctx, ctx->creds, method, biz, &blen);

	*root = NULL;
	if (body == NULL) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not sign the request with "
			     "alipay.query_private_key_file");
		return false;
	}
	if (!pn_qhttp_do(ctx->http, a, "POST", site->alipay.query_url, headers, body, blen, h,
			 &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return false;
	}
	if (!pn_query_http_ok(ctx, h, false, ans))
		return false;
	*root = pn_json_parse(h->body, h->body_len, &err);
	if (*root == NULL || !json_is_object(*root)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "Alipay answer is not a JSON object");
		goto failed;
	}
	*resp = json_object_get(*root, member);
	if (*resp == NULL) {		/* gateway-level errors (bad app_id, bad sign) */
		member = "error_response";
		*resp = json_object_get(*root, member);
	}
	if (!json_is_object(*resp)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "Alipay answer has no %s object", member_name);
		goto failed;
	}
	sign = pn_json_str(a, *root, "sign");
	code = pn_json_str(a, *resp, "code");
	sub_code = pn_json_str(a, *resp, "sub_code");
	if (sign == NULL || *sign == '\0') {
		/* Alipay leaves some error answers unsigned; they change nothing. */
		pn_query_set(ctx, ans, code && strcmp(code, "10000") == 0 ? PN_Q_REFUSED : PN_Q_ERROR,
			     "unsigned Alipay answer (code %.16s, sub_code %.64s)", code ? code : "-",
			     sub_code ? sub_code : "-");
		goto failed;
	}
	if (!verify_answer(ctx, h, member, sign, key_id)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "could not verify Alipay %s signature of the "
			     "%s answer for site %s: no key matched (%zu tried)",
			     site->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2", member,
			     site->name, site->alipay.nkeys);
		goto failed;
	}
	if (code == NULL || strcmp(code, "10000") != 0) {
		ans->psp_state = sub_code ? sub_code : code;
		pn_query_set(ctx, ans, sub_code && not_found && strcmp(sub_code, not_found) == 0
			     ? PN_Q_NOT_FOUND : PN_Q_ERROR, "Alipay answered code %.16s "
			     "sub_code %.64s: %.120s", code ? code : "-", sub_code ? sub_code : "-",
			     pn_json_str(a, *resp, "sub_msg") ? pn_json_str(a, *resp, "sub_msg") : "");
		goto failed;
	}
	return true;
failed:
	json_decref(*root);
	*root = NULL;
	return false;
}

static void
alipay_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
	   struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	struct pn_qhttp_answer h;
	json_t *root = NULL, *resp;
	const char *status, *otn, *trade_no;
	const char *total, *key_id = NULL, *trans_currency;
	struct pn_event *ev = &ans->ev;
	struct pn_alipay_fact fact;
	struct pn_alipay_amounts am;
	json_t *biz = json_pack("{s:s}", "out_trade_no", o->order_id);
	bool	ok = gateway_ask(ctx, METHOD, RESPONSE_MEMBER, biz, "ACQ.TRADE_NOT_EXIST", ans, &h,
				 &root, &resp, &key_id);

	json_decref(biz);
	if (!ok)
		return;
	status = pn_json_str(a, resp, "trade_status");
	otn = pn_json_str(a, resp, "out_trade_no");
	trade_no = pn_json_str(a, resp, "trade_no");
	total = pn_json_str(a, resp, "total_amount");
	trans_currency = pn_json_str(a, resp, "trans_currency");
	ans->psp_state = status;
	if (otn == NULL || strcmp(otn, o->order_id) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "Alipay answered for out_trade_no \"%.64s\", "
			     "not \"%s\"", otn ? otn : "", o->order_id);
		goto done;
	}
	if (status == NULL) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "Alipay answer has no trade_status");
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->key_id = key_id;
	{
		json_t *tc = json_object_get(resp, "trans_currency");

		/* a member that is there but not a string is malformed, not absent */
		if (tc != NULL && !json_is_null(tc) && !json_is_string(tc))
			trans_currency = "(not a string)";
	}
	ev->psp_time = pn_json_str(a, resp, "send_pay_date");
	/*
	 * The notification's identity for this payment (alipay/identity.c):
	 * total_amount is in trans_currency ("标价币种, total_amount 对应的币种
	 * 单位", the value passed at payment; alipay-sdk-java
	 * AlipayTradeQueryResponse), inside the signed member; absent on a
	 * domestic trade: CNY.  settle_currency / settle_amount (结算币种订单
	 * 金额) are kept in the stored answer and decide nothing.
	 */
	memset(&fact, 0, sizeof(fact));
	fact.trade_no = trade_no && *trade_no ? trade_no : NULL;
	fact.out_trade_no = otn;
	fact.trade_status = status;
	fact.trans_currency = trans_currency;
	fact.total_amount = total;
	pn_alipay_identity(a, &fact, ev, &am);
	if (ev->kind != PN_KIND_PAID && ev->kind != PN_KIND_CLOSED) {
		pn_query_set(ctx, ans, PN_Q_WAITING, "Alipay trade_status %.32s", status);
		goto done;
	}
	if (!am.currency_ok) {
		/* never guessed: no amount in an unknown currency, and a person looks */
		ev->flag = "amount_mismatch";
		ev->flag_detail = pn_arena_printf(a, "trans_currency \"%.40s\": not an ISO 4217 "
						  "currency code as Alipay writes them",
						  trans_currency ? trans_currency : "");
	} else if (!am.total_ok && ev->kind == PN_KIND_PAID) {
		ev->flag = "amount_mismatch";
		ev->flag_detail = pn_arena_printf(a, "total_amount \"%.40s\" is not an amount",
						  total ? total : "");
	}
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "Alipay trade_status %s, trade_no %s", status,
		     trade_no ? trade_no : "-");
done:
	json_decref(root);
}

bool
pn_query_alipay_call(const struct pn_query_ctx *ctx, const char *method, json_t *biz,
		     json_t **root, json_t **resp, struct pn_err *err)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded;charset=utf-8",
				 "Accept: application/json", NULL};
	struct pn_qhttp_answer h;
	const char *member, *sign, *code, *sub_code, *key_id = NULL;
	size_t	blen, i;
	char   *body = build_request(ctx, ctx->creds, method, biz, &blen), *m;

	*root = NULL;
	if (body == NULL) {
		pn_err_set(err, "could not sign the request with alipay.query_private_key_file");
		return false;
	}
	if (!pn_qhttp_do(ctx->http, a, "POST", site->alipay.query_url, headers, body, blen, &h,
			 err))
		return false;
	if (h.status < 200 || h.status > 299) {
		pn_err_set(err, "HTTP %ld from Alipay: %.200s", h.status, (const char *)h.body);
		return false;
	}
	/* alipay.data.dataservice.bill.downloadurl.query -> alipay_data_..._query_response */
	m = pn_arena_printf(a, "%s_response", method);
	for (i = 0; m[i]; i++)
		if (m[i] == '.')
			m[i] = '_';
	member = m;
	*root = pn_json_parse(h.body, h.body_len, err);
	if (*root == NULL || !json_is_object(*root)
	    || !json_is_object(*resp = json_object_get(*root, member))) {
		pn_err_set(err, "Alipay answer has no %s object: %.200s", member,
			   (const char *)h.body);
		goto failed;
	}
	sign = pn_json_str(a, *root, "sign");
	code = pn_json_str(a, *resp, "code");
	sub_code = pn_json_str(a, *resp, "sub_code");
	if (sign == NULL || *sign == '\0' || !verify_answer(ctx, &h, member, sign, &key_id)) {
		pn_err_set(err, "could not verify Alipay's signature of the %s answer for site %s "
			   "(code %.16s, sub_code %.64s)", member, site->name, code ? code : "-",
			   sub_code ? sub_code : "-");
		goto failed;
	}
	if (code == NULL || strcmp(code, "10000") != 0) {
		pn_err_set(err, "Alipay answered code %.16s sub_code %.64s: %.120s",
			   code ? code : "-", sub_code ? sub_code : "-",
			   pn_json_str(a, *resp, "sub_msg") ? pn_json_str(a, *resp, "sub_msg") : "");
		goto failed;
	}
	return true;
failed:
	json_decref(*root);
	*root = NULL;
	return false;
}

/*
 * A trade complaint (`paynotify query --complaints`): the gateway message
 * alipay.merchant.tradecomplain.changed names only complain_event_id
 * (webhooks/alipay.c); alipay.merchant.tradecomplain.query ("查询单条交易投诉
 * 详情", biz_content {"complain_event_id": ...}) answers
 * alipay_merchant_tradecomplain_query_response with complain_event_id,
 * status, trade_no, merchant_order_no, trade_amount (yuan, text),
 * complain_reason, content, gmt_create, gmt_modified, gmt_finished,
 * phone_no, target_id, target_type (alipay-sdk-java-all
 * AlipayMerchantTradecomplainQueryResponse).  Verified exactly as an
 * alipay.trade.query answer (gateway_ask).  Status: MERCHANT_PROCESSING,
 * MERCHANT_FEEDBACKED, PLATFORM_PROCESSING (open); FINISHED, CANCELLED,
 * PLATFORM_FINISH, CLOSED (closed).  The answer is kept byte for byte as
 * the event's raw body; phone_no is never read, parsed or stored apart.
 */
static void
alipay_ask_case(const struct pn_query_ctx *ctx, const char *case_id, struct pn_query_answer *ans)
{
	static const char *const closed[] = {"FINISHED", "CANCELLED", "PLATFORM_FINISH", "CLOSED",
					     NULL};
	struct pn_arena *a = ctx->arena;
	struct pn_qhttp_answer h;
	struct pn_err err;
	json_t *root = NULL, *resp;
	const char *id, *status, *trade_no, *otn, *amount, *key_id = NULL;
	struct pn_event *ev = &ans->ev;
	json_t *biz = json_pack("{s:s}", "complain_event_id", case_id);
	bool	ok = gateway_ask(ctx, "alipay.merchant.tradecomplain.query",
				 "alipay_merchant_tradecomplain_query_response", biz,
				 NULL, ans, &h, &root, &resp, &key_id);
	size_t	i;

	json_decref(biz);
	if (!ok)
		return;
	id = pn_json_str(a, resp, "complain_event_id");
	status = pn_json_str(a, resp, "status");
	trade_no = pn_json_str(a, resp, "trade_no");
	otn = pn_json_str(a, resp, "merchant_order_no");
	amount = pn_json_str(a, resp, "trade_amount");
	ans->psp_state = status;
	if (id == NULL || strcmp(id, case_id) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "Alipay answered for complain_event_id "
			     "\"%.64s\", not \"%s\"", id ? id : "", case_id);
		goto done;
	}
	if (status == NULL || *status == '\0') {
		pn_query_set(ctx, ans, PN_Q_ERROR, "Alipay complaint answer has no status");
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->kind = PN_KIND_COMPLAINT;
	ev->event_type = "alipay.merchant.tradecomplain.query";
	ev->key_id = key_id;
	ev->case_id = id;
	ev->case_status = status;
	ev->case_reason = pn_json_str(a, resp, "complain_reason");
	for (i = 0; closed[i]; i++)
		if (strcmp(status, closed[i]) == 0)
			ev->case_closed = true;
	ev->case_reopens = !ev->case_closed;	/* the answer is the complaint as it is now */
	ev->psp_txn_id = trade_no && *trade_no ? trade_no : NULL;
	ev->order_id = otn && *otn ? otn : NULL;
	ev->psp_time = pn_json_str(a, resp, "gmt_modified");
	if (amount != NULL && pn_money_parse(amount, 2, &ev->amount_minor, &err))
		ev->currency = "CNY";
	else
		ev->amount_minor = -1;
	/* per complaint and state (alipay/identity.c) */
	ev->dedup_key = pn_alipay_complaint_key(a, id, NULL, status, ev->psp_txn_id);
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "Alipay complaint %s status %s, trade_no %s", id, status,
		     ev->psp_txn_id ? ev->psp_txn_id : "-");
done:
	json_decref(root);
}

const struct pn_query_provider pn_query_alipay = {
	.name = "alipay",
	.configured = alipay_configured,
	.load = alipay_load,
	.free_creds = alipay_free,
	.describe = alipay_describe,
	.ask = alipay_ask,
	.ask_case = alipay_ask_case,
};

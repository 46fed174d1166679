/*
 * fuzz_wechatpay.c: the whole WeChat Pay entry point,
 * pn_provider_wechatpay.verify, then .answer: the API v3 headers, the
 * signed JSON envelope and the AES-256-GCM resource, and the API v2 XML
 * (signed payments and encrypted refunds), with the test keys of
 * tests/fixtures/unit and a fixed clock (FUZZ_NOW).
 *
 * Input: one mode byte (value % 5), then:
 *   0  raw: "Name: value" header lines, an empty line, the body;
 *   1  v3 envelope: the body; the harness adds Wechatpay-* headers signed
 *      with test-a.key.pem for the public key FUZZ_WX_PUBKEY_ID;
 *   2  v3 resource: an event_type line, then the plaintext resource; the
 *      harness encrypts it (first APIv3 key), wraps it in an envelope and
 *      signs that as in mode 1;
 *   3  v2 payment: an XML body without sign; the harness inserts the
 *      sign (MD5, or HMAC-SHA256 when sign_type says so) before the last
 *      "</xml>";
 *   4  v2 refund: the inner <root> XML; the harness encrypts it as
 *      req_info (AES-256-ECB, key from the first APIv2 key) in an outer
 *      <xml> with return_code SUCCESS.
 * The product's checks are unchanged.  Invariants: what the harness
 * signed or encrypted is never refused for its signature, decryption or
 * freshness; a verified event has a dedup key of at most 255 bytes, a
 * key id and sane amounts; the answer is well formed.
 */
#include "config.h"

#include <string.h>

#include <openssl/evp.h>

#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "fuzz.h"
#include "json.h"
#include "provider.h"
#include "wechatpay.h"
#include "xml.h"

#define TS "1700000100"
#define NONCE "fuzznonce0000000000000000000000"

static void
add_header(struct pn_request *req, struct pn_arena *a, const char *name, const char *value)
{
	size_t i;

	if (pn_streq_nocase(name, "Content-Type")) {
		req->content_type = pn_arena_strdup(a, value);
		return;
	}
	for (i = 0; i < req->nheaders; i++)
		if (pn_streq_nocase(req->headers[i].name, name)) {
			req->headers[i].duplicate = true;
			return;
		}
	if (req->nheaders == PN_MAX_HEADERS)
		return;
	req->headers[req->nheaders].name = pn_arena_strdup(a, name);
	req->headers[req->nheaders].value = pn_arena_strdup(a, value);
	req->nheaders++;
}

/* The v3 signature headers for body, as WeChat Pay sends them. */
static void
sign_v3(struct pn_request *req, struct pn_arena *a, const char *body, size_t len)
{
	struct pn_buf msg = {0};
	unsigned char *sig;
	size_t	siglen;

	pn_buf_printf(&msg, "%s\n%s\n", TS, NONCE);
	pn_buf_put(&msg, body, len);
	pn_buf_putc(&msg, '\n');
	fuzz_check(pn_rsa_sign(a, fuzz_alipay_privkey(), PN_MD_SHA256, msg.data, msg.len, &sig,
			       &siglen));
	pn_buf_free(&msg);
	add_header(req, a, "Wechatpay-Timestamp", TS);
	add_header(req, a, "Wechatpay-Nonce", NONCE);
	add_header(req, a, "Wechatpay-Serial", FUZZ_WX_PUBKEY_ID);
	add_header(req, a, "Wechatpay-Signature-Type", PN_WECHATPAY_SIGN_TYPE);
	add_header(req, a, "Wechatpay-Signature", pn_b64_encode(a, sig, siglen));
}

/* AEAD_AES_256_GCM: ciphertext || tag, base64. */
static char *
encrypt_gcm(struct pn_arena *a, const unsigned char *key, const char *nonce, const char *aad,
	    const uint8_t *in, size_t len)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	unsigned char *out = pn_arena_alloc(a, len + 16 + 16);
	int	n = 0, m = 0;

	fuzz_check(ctx != NULL && len < INT32_MAX);
	fuzz_check(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1);
	fuzz_check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)strlen(nonce), NULL) == 1);
	fuzz_check(EVP_EncryptInit_ex(ctx, NULL, NULL, key, (const unsigned char *)nonce) == 1);
	fuzz_check(EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad,
				     (int)strlen(aad)) == 1);
	fuzz_check(EVP_EncryptUpdate(ctx, out, &n, in, (int)len) == 1);
	fuzz_check(EVP_EncryptFinal_ex(ctx, out + n, &m) == 1);
	fuzz_check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + n + m) == 1);
	EVP_CIPHER_CTX_free(ctx);
	return pn_b64_encode(a, out, (size_t)(n + m + 16));
}

/* AES-256-ECB with PKCS#7 padding, base64. */
static char *
encrypt_ecb(struct pn_arena *a, const unsigned char key[32], const uint8_t *in, size_t len)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	unsigned char *out = pn_arena_alloc(a, len + 32);
	int	n = 0, m = 0;

	fuzz_check(ctx != NULL && len < INT32_MAX);
	fuzz_check(EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), NULL, key, NULL) == 1);
	fuzz_check(EVP_EncryptUpdate(ctx, out, &n, in, (int)len) == 1);
	fuzz_check(EVP_EncryptFinal_ex(ctx, out + n, &m) == 1);
	EVP_CIPHER_CTX_free(ctx);
	return pn_b64_encode(a, out, (size_t)(n + m));
}

/* Mode 0: header lines, an empty line, the body. */
static void
raw_request(struct pn_request *req, struct pn_arena *a, const uint8_t *data, size_t size,
	    struct pn_buf *body)
{
	const uint8_t *p = data, *end = data + size;

	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t	len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char   *line, *colon;

		if (len == 0) {
			p++;
			break;
		}
		line = pn_arena_strndup(a, (const char *)p, len);
		p += len + (nl ? 1 : 0);
		if ((colon = strchr(line, ':')) == NULL || colon == line)
			continue;
		*colon = '\0';
		add_header(req, a, line, colon[1] == ' ' ? colon + 2 : colon + 1);
	}
	pn_buf_put(body, p, (size_t)(end - p));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	const struct pn_site *site = fuzz_wechatpay_site();
	struct pn_request req;
	struct pn_verify_ctx ctx;
	struct pn_event ev;
	struct pn_response res = {0};
	struct pn_err err = {{0}};
	struct pn_buf body = {0};
	enum pn_verdict verdict;
	int	mode;
	bool	signed_here = false, encrypted_here = false;

	if (a == NULL)
		a = pn_arena_new();
	if (size < 1)
		return 0;
	mode = data[0] % 5;
	data++, size--;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.path_info = "/notify/wechatpay/wx-fuzz";

	switch (mode) {
	case 0:
		raw_request(&req, a, data, size, &body);
		break;
	case 1:
		pn_buf_put(&body, data, size);
		sign_v3(&req, a, body.data ? body.data : "", body.len);
		signed_here = true;
		break;
	case 2: {
		const uint8_t *nl = memchr(data, '\n', size);
		json_t *env, *jtype;
		char   *text, *type;

		if (nl == NULL)
			goto done;
		type = pn_arena_strndup(a, (const char *)data, (size_t)(nl - data));
		jtype = json_string(type);	/* NULL (left out) unless UTF-8 */
		env = json_pack("{s:s, s:s, s:s, s:o?, s:{s:s, s:s, s:s, s:s, s:s}}",
				"id", "EV-FUZZ", "create_time", "2023-11-14T22:15:00+08:00",
				"resource_type", "encrypt-resource", "event_type",
				jtype, "resource",
				"original_type", "transaction", "algorithm", "AEAD_AES_256_GCM",
				"ciphertext", encrypt_gcm(a, site->wechatpay.apiv3_keys[0].data,
							  "fuzznonce012", "transaction",
							  nl + 1, size - (size_t)(nl - data) - 1),
				"associated_data", "transaction", "nonce", "fuzznonce012");
		fuzz_check(env != NULL);
		text = json_dumps(env, JSON_COMPACT);
		json_decref(env);
		pn_buf_puts(&body, text);
		free(text);
		sign_v3(&req, a, body.data, body.len);
		signed_here = encrypted_here = true;
		break;
	}
	case 3: {
		struct pn_xml_flat x;
		const char *st, *sign, *close = NULL, *p;
		char   *doc = fuzz_strndup(data, size);

		pn_buf_put(&body, data, size);
		add_header(&req, a, "Content-Type", "text/xml");
		if (pn_xml_parse_flat(a, data, size, "xml", &x, &err) && x.n < PN_XML_MAX_FIELDS
		    && pn_xml_get(&x, "sign") == NULL) {
			st = pn_xml_get(&x, "sign_type");
			sign = pn_wechatpay_v2_sign(a, &x, st && strstr(st, "HMAC-SHA256")
						    ? PN_WXV2_HMAC_SHA256 : PN_WXV2_MD5,
						    &site->wechatpay.apiv2_keys[0]);
			for (p = doc; (p = strstr(p, "</xml>")) != NULL; p++)
				close = p;
			if (sign != NULL && close != NULL) {
				pn_buf_reset(&body);
				pn_buf_put(&body, doc, (size_t)(close - doc));
				pn_buf_printf(&body, "<sign>%s</sign>%s", sign, close);
				signed_here = true;
			}
		}
		free(doc);
		break;
	}
	case 4: {
		unsigned char key[32];

		fuzz_check(pn_wechatpay_v2_refund_key(&site->wechatpay.apiv2_keys[0], key));
		pn_buf_printf(&body, "<xml><return_code>SUCCESS</return_code>"
			      "<appid><![CDATA[wxd678efh567hg6787]]></appid>"
			      "<mch_id><![CDATA[1900000109]]></mch_id>"
			      "<nonce_str><![CDATA[fuzz]]></nonce_str>"
			      "<req_info><![CDATA[%s]]></req_info></xml>",
			      encrypt_ecb(a, key, data, size));
		add_header(&req, a, "Content-Type", "text/xml");
		encrypted_here = true;
		break;
	}
	}
	req.body = (const unsigned char *)fuzz_strndup((const uint8_t *)(body.data ? body.data
									  : ""), body.len);
	req.body_len = body.len;
	memset(&ctx, 0, sizeof(ctx));
	ctx.req = &req;
	ctx.site = site;
	ctx.arena = a;
	ctx.now = FUZZ_NOW;
	ctx.check_freshness = true;
	ctx.variant = pn_provider_wechatpay.variant(&req);	/* as the pipeline tells it */
	pn_event_init(&ev);
	verdict = pn_provider_wechatpay.verify(&ctx, &ev, &err);
	/* what the harness signed or encrypted fails for no key or clock reason */
	if (signed_here && verdict == PN_UNVERIFIED) {
		fuzz_check(strstr(err.msg, "could not verify") == NULL);
		fuzz_check(strstr(err.msg, "s away from now") == NULL);
	}
	if (encrypted_here && verdict == PN_UNVERIFIED)
		fuzz_check(strstr(err.msg, "could not decrypt") == NULL);
	if (verdict == PN_VERIFIED) {
		fuzz_check(ev.dedup_key != NULL && ev.dedup_key[0] != '\0');
		fuzz_check(strlen(ev.dedup_key) <= 255);
		fuzz_check(ev.key_id != NULL);
		fuzz_check(ev.kind >= PN_KIND_PAID && ev.kind <= PN_KIND_LAST);
		fuzz_check(ev.amount_minor >= -1 && ev.refund_minor >= -1);
		if (ev.currency != NULL)
			fuzz_check(strlen(ev.currency) == 3);
	}
	pn_provider_wechatpay.answer(ctx.variant, &res, verdict == PN_VERIFIED ? 200 : 400,
				     verdict == PN_VERIFIED ? NULL : err.msg);
	/* v3 success is 204 without a body; v2 answers in XML */
	fuzz_check((res.status >= 200 && res.status < 300) == (verdict == PN_VERIFIED));
	pn_buf_free(&res.body);
	free((void *)req.body);
done:
	pn_buf_free(&body);
	pn_arena_reset(a);
	return 0;
}

/*
 * fuzz_alipay.c: the whole Alipay entry point, pn_provider_alipay.verify,
 * then .answer, with the test key tests/fixtures/unit/keys/test-a.pub.pem.
 *
 * Input: one mode byte, then the raw form body.  Mode bit 0: the harness
 * signs the body itself (rule V1 content, test-a.key.pem) and appends
 * "&sign=...", so that mutated bodies reach the normaliser with a valid
 * signature; the product's checks are unchanged.  Bit 1: the site uses
 * sign_type RSA (SHA1withRSA) instead of RSA2.  Invariants: a body the
 * harness signed verifies; a verified event has a dedup key, the key's id
 * and sane amounts.
 */
#include "config.h"

#include <string.h>

#include "alipay.h"
#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "form.h"
#include "fuzz.h"
#include "provider.h"

static void
check_event(const struct pn_event *ev)
{
	fuzz_check(ev->dedup_key != NULL && ev->dedup_key[0] != '\0');
	fuzz_check(ev->key_id != NULL
		   && strcmp(ev->key_id, fuzz_alipay_site(0)->alipay.keys[0].id) == 0);
	fuzz_check(ev->kind >= PN_KIND_PAID && ev->kind <= PN_KIND_LAST);
	fuzz_check(ev->amount_minor >= -1 && ev->refund_minor >= -1);
	fuzz_check(ev->currency != NULL && strcmp(ev->currency, "CNY") == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	struct pn_request *req;
	struct pn_verify_ctx ctx;
	struct pn_event ev;
	struct pn_response res = {0};
	struct pn_err err = {{0}};
	struct pn_buf body = {0};
	struct pn_form form;
	enum pn_verdict verdict;
	int	mode, sign_type;
	bool	must_verify = false;

	if (a == NULL)
		a = pn_arena_new();
	if (size < 1)
		return 0;
	mode = data[0];
	data++, size--;
	sign_type = mode & 2 ? PN_ALIPAY_RSA : PN_ALIPAY_RSA2;
	pn_buf_put(&body, data, size);
	if ((mode & 1) && pn_form_parse(a, (const char *)data, size, &form, &err)
	    && pn_form_get(&form, "sign") == NULL) {
		size_t	len;
		char   *content = pn_alipay_sign_content(a, &form, false, false, &len);
		unsigned char *sig;
		size_t	siglen;

		fuzz_check(pn_rsa_sign(a, fuzz_alipay_privkey(),
				       sign_type == PN_ALIPAY_RSA ? PN_MD_SHA1 : PN_MD_SHA256,
				       content, len, &sig, &siglen));
		pn_buf_puts(&body, "&sign=");
		pn_buf_puts(&body, pn_form_encode(a, pn_b64_encode(a, sig, siglen)));
		must_verify = form.n < PN_FORM_MAX_FIELDS;
	}
	req = fuzz_request((const uint8_t *)(body.data ? body.data : ""), body.len, NULL, NULL);
	memset(&ctx, 0, sizeof(ctx));
	ctx.req = req;
	ctx.site = fuzz_alipay_site(sign_type);
	ctx.arena = a;
	ctx.now = FUZZ_NOW;
	ctx.check_freshness = true;
	pn_event_init(&ev);
	verdict = pn_provider_alipay.verify(&ctx, &ev, &err);
	if (must_verify)
		fuzz_check(verdict == PN_VERIFIED);
	if (verdict == PN_VERIFIED)
		check_event(&ev);
	pn_provider_alipay.answer(0, &res, verdict == PN_VERIFIED ? 200 : 400,
				  verdict == PN_VERIFIED ? NULL : err.msg);
	fuzz_check(strcmp(res.body.data, verdict == PN_VERIFIED ? "success" : "fail") == 0);
	pn_buf_free(&res.body);
	pn_buf_free(&body);
	fuzz_request_free(req);
	pn_arena_reset(a);
	return 0;
}

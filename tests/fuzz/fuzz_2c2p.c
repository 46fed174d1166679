/*
 * fuzz_2c2p.c: the whole 2C2P entry point, pn_provider_2c2p.verify, then
 * .answer, with the test secret (2c2p-sandbox) and a fixed clock.
 *
 * Input: one mode byte, then the body.  Bits 1-2 choose the site: 0 PGW v4
 * JWT, 1 legacy Redirect with HMAC-SHA1, 2 Redirect with HMAC-SHA256.  Bit
 * 0 asks the harness to sign: for the JWT site the body is taken as the
 * JWT payload JSON and wrapped as {"payload":"<HS256 JWT>"}; for the
 * Redirect sites "&hash_value=<hex HMAC>" of the fixed-order content is
 * appended.  The product's checks are unchanged.  Invariants: a verified
 * event has a dedup key and the secret's key id, sane amounts, and a
 * body the harness signed never fails the signature check.
 */
#include "config.h"

#include <string.h>

#include "2c2p.h"
#include "buf.h"
#include "crypto.h"
#include "form.h"
#include "fuzz.h"
#include "provider.h"

static void
check_event(const struct pn_event *ev)
{
	fuzz_check(ev->dedup_key != NULL && ev->dedup_key[0] != '\0');
	fuzz_check(ev->key_id != NULL
		   && strcmp(ev->key_id, fuzz_2c2p_site(0, 0)->twoc2p.secrets[0].id) == 0);
	fuzz_check(ev->kind >= PN_KIND_PAID && ev->kind <= PN_KIND_LAST);
	fuzz_check(ev->amount_minor >= -1 && ev->refund_minor >= -1);
	if (ev->currency != NULL)
		fuzz_check(strlen(ev->currency) == 3);
}

/* {"payload":"<b64url header>.<b64url body>.<b64url HMAC>"} */
static void
sign_jwt(struct pn_arena *a, const uint8_t *data, size_t size, struct pn_buf *body)
{
	static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	char   *signing = pn_arena_printf(a, "%s.%s",
					  pn_b64url_encode(a, header, sizeof(header) - 1),
					  pn_b64url_encode(a, data, size));
	struct pn_iov iov = {signing, strlen(signing)};
	unsigned char mac[64];
	size_t	maclen = 0;

	fuzz_check(pn_hmac(PN_MD_SHA256, FUZZ_2C2P_SECRET, strlen(FUZZ_2C2P_SECRET), &iov, 1,
			   mac, &maclen));
	pn_buf_printf(body, "{\"payload\":\"%s.%s\"}", signing, pn_b64url_encode(a, mac, maclen));
}

/* body || "&hash_value=<hex>", when the body is a valid form without one. */
static bool
sign_redirect(struct pn_arena *a, const uint8_t *data, size_t size, bool sha256,
	      struct pn_buf *body)
{
	struct pn_form form;
	struct pn_err err;
	struct pn_iov iov;
	unsigned char mac[64];
	size_t	maclen = 0, len;
	char   *content;

	pn_buf_put(body, data, size);
	if (!pn_form_parse(a, (const char *)data, size, &form, &err)
	    || pn_form_get(&form, "hash_value") != NULL || form.n >= PN_FORM_MAX_FIELDS)
		return false;
	content = pn_2c2p_redirect_content(a, &form, &len);
	iov = (struct pn_iov){content, len};
	fuzz_check(pn_hmac(sha256 ? PN_MD_SHA256 : PN_MD_SHA1, FUZZ_2C2P_SECRET,
			   strlen(FUZZ_2C2P_SECRET), &iov, 1, mac, &maclen));
	pn_buf_printf(body, "&hash_value=%s", pn_hex_encode(a, mac, maclen, false));
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	const struct pn_site *site;
	struct pn_request *req;
	struct pn_verify_ctx ctx;
	struct pn_event ev;
	struct pn_response res = {0};
	struct pn_err err = {{0}};
	struct pn_buf body = {0};
	enum pn_verdict verdict;
	int	mode, which;
	bool	signed_here = false;

	if (a == NULL)
		a = pn_arena_new();
	if (size < 1)
		return 0;
	mode = data[0];
	data++, size--;
	which = (mode >> 1) % 3;
	site = fuzz_2c2p_site(which == 0 ? PN_2C2P_JWT : PN_2C2P_REDIRECT,
			      which == 2 ? PN_2C2P_SHA256 : PN_2C2P_SHA1);
	if (!(mode & 1))
		pn_buf_put(&body, data, size);
	else if (which == 0) {
		sign_jwt(a, data, size, &body);
		signed_here = size > 0;	/* an empty segment is refused, rightly */
	} else
		signed_here = sign_redirect(a, data, size, which == 2, &body);
	req = fuzz_request((const uint8_t *)(body.data ? body.data : ""), body.len, NULL, NULL);
	memset(&ctx, 0, sizeof(ctx));
	ctx.req = req;
	ctx.site = site;
	ctx.arena = a;
	ctx.now = FUZZ_NOW;
	ctx.check_freshness = (mode & 8) == 0;
	pn_event_init(&ev);
	verdict = pn_provider_2c2p.verify(&ctx, &ev, &err);
	if (signed_here && verdict == PN_UNVERIFIED)
		/* only the payload's own exp/nbf may refuse a body signed here */
		fuzz_check(which == 0 && strstr(err.msg, "JWT") != NULL
			   && strstr(err.msg, "could not verify") == NULL);
	if (verdict == PN_VERIFIED)
		check_event(&ev);
	pn_provider_2c2p.answer(0, &res, verdict == PN_VERIFIED ? 200 : 400,
				verdict == PN_VERIFIED ? NULL : err.msg);
	fuzz_check(res.body.len > 0);
	pn_buf_free(&res.body);
	pn_buf_free(&body);
	fuzz_request_free(req);
	pn_arena_reset(a);
	return 0;
}

/*
 * fuzz_stripe.c: the whole Stripe entry point, pn_provider_stripe.verify,
 * then .answer, with the test secret and a fixed clock (FUZZ_NOW).
 *
 * Input: the Stripe-Signature value on the first line, the raw body after
 * it.  A first line "@<digits>" asks the harness to sign the body itself
 * ("t=<digits>,v1=HMAC-SHA256(secret, t.body)"; "@" alone uses FUZZ_NOW),
 * so that mutated bodies reach the normaliser with a valid signature; the
 * product's checks are unchanged.  Invariants: a body signed now verifies
 * or is malformed, never unverified; a verified event has a dedup key, the
 * secret's key id and sane amounts.
 */
#include "config.h"

#include <string.h>

#include "crypto.h"
#include "fuzz.h"
#include "provider.h"
#include "stripe.h"

static void
check_event(const struct pn_event *ev)
{
	fuzz_check(ev->dedup_key != NULL && ev->dedup_key[0] != '\0');
	fuzz_check(ev->key_id != NULL
		   && strcmp(ev->key_id, fuzz_stripe_site()->stripe.secrets[0].id) == 0);
	fuzz_check(ev->kind >= PN_KIND_PAID && ev->kind <= PN_KIND_LAST);
	fuzz_check(ev->amount_minor >= -1 && ev->refund_minor >= -1);
	if (ev->currency != NULL)
		fuzz_check(strlen(ev->currency) == 3);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	const uint8_t *nl = memchr(data, '\n', size);
	const struct pn_site *site = fuzz_stripe_site();
	struct pn_request *req;
	struct pn_verify_ctx ctx;
	struct pn_event ev;
	struct pn_response res = {0};
	struct pn_err err = {{0}};
	enum pn_verdict verdict;
	char   *header;
	bool	signed_now = false;

	if (a == NULL)
		a = pn_arena_new();
	if (nl == NULL)
		return 0;
	header = fuzz_strndup(data, (size_t)(nl - data));
	size -= (size_t)(nl - data) + 1;
	data = nl + 1;
	if (header[0] == '@' && strspn(header + 1, "0123456789") == strlen(header + 1)
	    && strlen(header) < 20) {
		const char *t = header[1] ? header + 1 : "1700000100";
		struct pn_iov iov[3] = {{t, strlen(t)}, {".", 1}, {data, size}};
		unsigned char mac[64];
		size_t	maclen = 0;
		char   *signed_header;

		fuzz_check(pn_hmac(PN_MD_SHA256, FUZZ_STRIPE_SECRET, strlen(FUZZ_STRIPE_SECRET),
				   iov, 3, mac, &maclen));
		signed_header = pn_xasprintf("t=%s,v1=%s", t, pn_hex_encode(a, mac, maclen, false));
		signed_now = strcmp(t, "1700000100") == 0;
		free(header);
		header = signed_header;
	}
	req = fuzz_request(data, size, "Stripe-Signature", header);
	memset(&ctx, 0, sizeof(ctx));
	ctx.req = req;
	ctx.site = site;
	ctx.arena = a;
	ctx.now = FUZZ_NOW;
	ctx.check_freshness = true;
	pn_event_init(&ev);
	verdict = pn_provider_stripe.verify(&ctx, &ev, &err);
	if (signed_now)
		fuzz_check(verdict != PN_UNVERIFIED);
	if (verdict == PN_VERIFIED)
		check_event(&ev);
	pn_provider_stripe.answer(0, &res,
				  verdict == PN_VERIFIED ? 200 : verdict == PN_MALFORMED ? 400
				  : PN_UNVERIFIED_STATUS,
				  verdict == PN_VERIFIED ? NULL : err.msg);
	fuzz_check(res.body.len > 0);
	pn_buf_free(&res.body);
	fuzz_request_free(req);
	free(header);
	pn_arena_reset(a);
	return 0;
}

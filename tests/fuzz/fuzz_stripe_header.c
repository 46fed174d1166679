/*
 * fuzz_stripe_header.c: the Stripe-Signature parser, pn_stripe_parse_header().
 *
 * Input: a header value (a NUL in the input ends it, as a C string from
 * the environment would).  On success the timestamp text must read back as
 * the timestamp and at most 16 v1 signatures are kept; the signatures are
 * then checked against a fixed body with the test secret, which must never
 * match unless the header carries the true HMAC.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "stripe.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char body[] = "{\"id\":\"evt_fuzz\",\"object\":\"event\"}";
	const struct pn_site *site = fuzz_stripe_site();
	struct pn_stripe_sig sig;
	struct pn_err err;
	const char *key_id = NULL;
	char   *header = fuzz_strndup(data, size);
	int64_t	t;

	if (pn_stripe_parse_header(header, &sig, &err)) {
		fuzz_check(sig.nv1 >= 0 && sig.nv1 <= 16);
		fuzz_check(strlen(sig.t_text) > 0 && strlen(sig.t_text) < sizeof(sig.t_text));
		fuzz_check(pn_parse_i64(sig.t_text, &t) && t == sig.t);
		/* a match names its secret; no match leaves key_id alone */
		if (pn_stripe_verify_sig(&sig, body, sizeof(body) - 1, site->stripe.secrets,
					 site->stripe.nsecrets, &key_id))
			fuzz_check(key_id != NULL);
		else
			fuzz_check(key_id == NULL);
	} else
		fuzz_check(strlen(err.msg) > 0);
	free(header);
	return 0;
}

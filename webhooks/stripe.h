/*
 * stripe.h: the parts of the Stripe adapter that tests and the admin
 * command use directly.
 */
#ifndef PN_STRIPE_H
#define PN_STRIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "provider.h"
#include "util.h"

struct pn_stripe_sig {
	int64_t	t;
	char	t_text[20];		/* the digits as received */
	unsigned char v1[16][32];	/* readable v1 signatures */
	int	nv1;
};

/* Parse a Stripe-Signature value as stripe-go does (strict elements). */
bool pn_stripe_parse_header(const char *header, struct pn_stripe_sig *out,
			    struct pn_err *err) PN_WUR;
/* True when any v1 matches an HMAC with any secret; *key_id names the secret. */
bool pn_stripe_verify_sig(const struct pn_stripe_sig *sig, const unsigned char *body,
			  size_t body_len, const struct pn_secret *secrets, size_t nsecrets,
			  const char **key_id);
/* Turn a verified event body into a pn_event. */
enum pn_verdict pn_stripe_normalise(struct pn_arena *a, const unsigned char *body,
				    size_t body_len, struct pn_event *ev, struct pn_err *err);
/*
 * The same, then the site binding: livemode against stripe.mode
 * (mode_mismatch) and stripe.site_metadata against the object's metadata
 * (merchant_mismatch).  site NULL: no binding checks.
 */
enum pn_verdict pn_stripe_normalise_site(struct pn_arena *a, const struct pn_site *site,
					 const unsigned char *body, size_t body_len,
					 struct pn_event *ev, struct pn_err *err);

#endif

/*
 * stripe.h: the parts of the Stripe adapter that tests and the admin
 * command use directly.
 */
#ifndef PN_STRIPE_H
#define PN_STRIPE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

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
			  const char **key_id) PN_WUR;
/*
 * Turn a verified event body into a pn_event (its identity:
 * stripe/identity.c), then the site binding: livemode against stripe.mode
 * (mode_mismatch) and stripe.site_metadata against the object's metadata
 * (merchant_mismatch).  site NULL: no binding checks.  Types paynotify has
 * no handling for are flagged unhandled.
 */
enum pn_verdict pn_stripe_normalise_site(struct pn_arena *a, const struct pn_site *site,
					 const unsigned char *body, size_t body_len,
					 struct pn_event *ev, struct pn_err *err) PN_WUR;
/*
 * The same, knowing every configured site (cfg, or NULL): an object
 * carrying another configured site's marker is foreign_site (a sibling's
 * event on a shared account: stored, counted, not on report) rather than
 * merchant_mismatch.
 */
enum pn_verdict pn_stripe_normalise_cfg(struct pn_arena *a, const struct pn_config *cfg,
					const struct pn_site *site, const unsigned char *body,
					size_t body_len, struct pn_event *ev,
					struct pn_err *err) PN_WUR;

/* Stripe's own minor unit of an upper-case currency: 0 (JPY ...), 3 (BHD
 * ...) or 2 (`paynotify sign` builds amounts in it). */
int pn_stripe_exponent(const char *cur);

/* Stripe amount field of obj (Stripe's unit of raw_cur) -> ISO 4217 minor
 * units and upper-case currency; false with *why when not exact. */
bool pn_stripe_amount(struct pn_arena *a, json_t *obj, const char *field, const char *raw_cur,
		      int64_t *minor, const char **currency, const char **why) PN_WUR;

/* The site binding of an event (livemode against stripe.mode, the
 * stripe.site_metadata marker): sets ev->flag when it is not the site's. */
void pn_stripe_check_site(struct pn_arena *a, const struct pn_site *site, json_t *root,
			  json_t *obj, struct pn_event *ev);

#endif

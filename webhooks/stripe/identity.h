/*
 * stripe/identity.h: the identity of a Stripe event, written once
 * (issue 27).  The receiver (webhooks/stripe.c: an event's type and
 * data.object), `paynotify query` (admin/query_stripe.c: a PaymentIntent
 * queried) and `paynotify reconcile` (admin/statement_stripe.c: a row of a
 * balance report) fill a struct pn_stripe_fact from what they have and
 * call pn_stripe_identity().
 */
#ifndef PN_STRIPE_IDENTITY_H
#define PN_STRIPE_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "arena.h"
#include "event.h"

struct pn_stripe_fact {
	const char *event_id;		/* a notification: its evt_ id; NULL: query, bill row */
	const char *type;		/* the event type (payment_intent.succeeded,
					 * charge.refunded, checkout.session.completed, ...) */
	json_t *obj;			/* data.object, or the PaymentIntent queried;
					 * NULL: a bill row, with the fields below */
	const char *payment_intent;	/* bill row: the PaymentIntent (pi_), or NULL */
	const char *refund_id;		/* bill row, refunds: the refund (re_) */
	const char *currency;		/* bill row: ISO 4217, upper case */
	int64_t	amount_minor;		/* bill row, payments: the amount */
	int64_t	refund_total_minor;	/* bill row, refunds: the order's refunded total */
};

struct pn_stripe_result {
	const char *amount_why;		/* non-NULL: the amount is not exact (amount_mismatch) */
	bool	unhandled;		/* a type paynotify has no handling for */
};

/*
 * Fills out's dedup_key, event_type, kind, psp_txn_id, order_id (from obj),
 * currency, amount_minor / refund_minor, refund_cumulative and, for a
 * dispute, its case fields; *r says what the caller flags.  Sets no flag.
 */
void pn_stripe_identity(struct pn_arena *a, const struct pn_stripe_fact *in,
			struct pn_event *out, struct pn_stripe_result *r);

#endif

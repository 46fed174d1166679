/*
 * stripe/identity.c: the identity of a Stripe event (stripe/identity.h).
 */
#include "config.h"

#include <string.h>

#include "json.h"
#include "stripe.h"
#include "stripe/identity.h"

/* The order id: metadata.order_id, else client_reference_id (Checkout). */
static const char *
order_id_of(struct pn_arena *a, json_t *obj)
{
	const char *id = pn_json_str(a, obj, "metadata.order_id");

	if (id == NULL || *id == '\0')
		id = pn_json_str(a, obj, "client_reference_id");
	return id && *id ? id : NULL;
}

/*
 * The PaymentIntent an object belongs to: its "payment_intent" member, a
 * string id or (expanded) an object with an id.  NULL when there is none
 * (a Checkout Session in setup mode, a legacy Charge): then the event
 * carries no PSP transaction rather than an id of another kind, so the SQL
 * rules that compare transactions only ever compare PaymentIntent ids.
 */
static const char *
payment_intent_of(struct pn_arena *a, json_t *obj)
{
	const char *id = pn_json_str(a, obj, "payment_intent");

	if (id == NULL)
		id = pn_json_str(a, obj, "payment_intent.id");
	return id && *id ? id : NULL;
}

/*
 * charge.dispute.created, .updated, .closed, .funds_withdrawn,
 * .funds_reinstated (Stripe API reference, "Disputes": the Dispute object;
 * stripe-go dispute.go): data.object is the Dispute (dp_...) with
 * amount and currency (the disputed amount, Stripe's minor unit), reason
 * (fraudulent, product_not_received, ...), status (warning_needs_response,
 * warning_under_review, warning_closed, needs_response, under_review, won,
 * lost, prevented), evidence_details.due_by (Unix seconds, null once
 * answered or closed), charge (ch_...) and payment_intent (pi_..., null for
 * a charge made without a PaymentIntent).  The event's own time is the
 * event's "created".
 *
 * Its own kind: recorded in its case, deduplicated per dispute, event type
 * and status ("dispute:<dp>:<type>:<status>": a second event saying the
 * same of the same dispute is a duplicate delivery), never applied to the
 * order.  The PSP transaction is the PaymentIntent (the id orders record),
 * else the charge.  Closed: won, lost, warning_closed (an inquiry that did
 * not become a chargeback), prevented.
 */
static void
stripe_dispute(struct pn_arena *a, json_t *obj, const char *type, struct pn_event *ev)
{
	const char *status = pn_json_str(a, obj, "status"), *why = NULL;
	int64_t	due;

	ev->kind = PN_KIND_DISPUTE;
	ev->case_id = pn_json_str(a, obj, "id");
	if (ev->case_id == NULL || *ev->case_id == '\0' || strlen(ev->case_id) > 255) {
		/* a dispute event we cannot tie to its dispute: kept, not a case */
		ev->kind = PN_KIND_IGNORED;
		ev->case_id = NULL;
		return;
	}
	ev->case_status = status && *status ? status : "unknown";
	ev->case_reason = pn_json_str(a, obj, "reason");
	ev->case_closed = status != NULL && (strcmp(status, "won") == 0
					     || strcmp(status, "lost") == 0
					     || strcmp(status, "warning_closed") == 0
					     || strcmp(status, "prevented") == 0);
	if (pn_json_int(obj, "evidence_details.due_by", &due) && due > 0)
		ev->case_due = due;
	ev->psp_txn_id = payment_intent_of(a, obj);
	if (ev->psp_txn_id == NULL)
		ev->psp_txn_id = pn_json_str(a, obj, "charge");
	if (ev->psp_txn_id != NULL && *ev->psp_txn_id == '\0')
		ev->psp_txn_id = NULL;
	/* The dispute's own metadata is no order id of ours unless the shop put one there. */
	ev->order_id = pn_json_str(a, obj, "metadata.order_id");
	if (ev->order_id != NULL && *ev->order_id == '\0')
		ev->order_id = NULL;
	if (!pn_stripe_amount(a, obj, "amount", pn_json_str(a, obj, "currency"), &ev->amount_minor,
			   &ev->currency, &why)) {
		ev->amount_minor = -1;	/* the case is still recorded; the report says "no amount" */
		ev->currency = NULL;
	}
	ev->dedup_key = pn_arena_printf(a, "dispute:%s:%s:%s", ev->case_id, type, ev->case_status);
}

/*
 * Stripe event types paynotify knows and deliberately does not act on:
 * each repeats a signal that is handled (charge.succeeded after
 * payment_intent.succeeded), or reports a step with nothing to apply (a
 * PaymentIntent created, processing, waiting for 3-D Secure; a refund
 * created or pending).  Stored as "ignored".  Every type not listed here
 * and not handled below is "unhandled" (stored, counted per type, listed
 * by `paynotify report --unhandled`).  The table of every type and what
 * paynotify does with it: docs/PROVIDERS.md "Every event type"; the
 * types: https://docs.stripe.com/api/events/types (payment_intent.*,
 * charge.*, checkout.session.*, refund.*; refund.* apply to every refund
 * since API version 2024-10-28, https://docs.stripe.com/changelog/acacia/
 * 2024-10-28/refund-webhook-update).
 */
static bool
stripe_ignored_type(const char *type)
{
	static const char *const known[] = {
		"payment_intent.created", "payment_intent.processing",
		"payment_intent.requires_action", "payment_intent.amount_capturable_updated",
		"payment_intent.partially_funded", "payment_intent.canceled",
		"charge.succeeded", "charge.pending", "charge.failed", "charge.captured",
		"charge.updated", "charge.expired", "charge.refund.updated",
		"refund.created", "refund.updated", NULL,
	};
	const char *const *k;

	for (k = known; *k; k++)
		if (strcmp(*k, type) == 0)
			return true;
	return false;
}

/*
 * A bill row (admin/statement_stripe.c): the identity `paynotify query`
 * gives the same PaymentIntent ("query:<pi>:succeeded"), and a refund's
 * "refund:<re_>" with charge.refunded's running total (refund_cumulative).
 */
static void
bill_row(struct pn_arena *a, const struct pn_stripe_fact *in, struct pn_event *out)
{
	out->event_type = in->type;
	out->psp_txn_id = in->payment_intent;
	out->currency = in->currency;
	if (strcmp(in->type, "payment_intent.succeeded") == 0) {
		out->kind = PN_KIND_PAID;
		out->amount_minor = in->amount_minor;
		out->dedup_key = pn_arena_printf(a, "query:%s:succeeded", in->payment_intent);
		return;
	}
	out->kind = PN_KIND_REFUND;
	out->refund_minor = in->refund_total_minor;
	out->refund_cumulative = true;
	out->dedup_key = pn_arena_printf(a, "refund:%s", in->refund_id);
}

/*
 * The dedup key: a notification is keyed by its evt_ id (Stripe's id of
 * the event, the same on every retry), a dispute by dispute, type and
 * status (stripe_dispute above).  A PaymentIntent queried (`paynotify
 * query`) or a bill row has no event id: "query:<pi>:succeeded", and a
 * bill's refund "refund:<re_>".
 *
 * Where the three copies this replaces differed (issue 27): nowhere in
 * kind or amounts; the keys differ by design, as they did: a notification
 * and a query answer (or bill row) of the same payment are two events of
 * the same PaymentIntent, and whichever comes second finds the order
 * already_applied (the payment) or adds nothing (a refund: both carry the
 * running total, refund_cumulative).  Query and bill row share their key.
 */
void
pn_stripe_identity(struct pn_arena *a, const struct pn_stripe_fact *in, struct pn_event *out,
		   struct pn_stripe_result *r)
{
	const char *type = in->type, *why = NULL;
	json_t *obj = in->obj;

	memset(r, 0, sizeof(*r));
	if (obj == NULL) {
		bill_row(a, in, out);
		return;
	}
	out->dedup_key = in->event_id != NULL ? in->event_id
	    : pn_arena_printf(a, "query:%s:succeeded", pn_json_str(a, obj, "id"));
	out->event_type = type;
	out->order_id = order_id_of(a, obj);

	if (strcmp(type, "payment_intent.succeeded") == 0) {
		out->kind = PN_KIND_PAID;
		out->psp_txn_id = pn_json_str(a, obj, "id");
		if (!pn_stripe_amount(a, obj, pn_json_path(obj, "amount_received")
				      ? "amount_received" : "amount", pn_json_str(a, obj, "currency"),
				      &out->amount_minor, &out->currency, &why))
			r->amount_why = why;
	} else if (strcmp(type, "payment_intent.payment_failed") == 0) {
		out->kind = PN_KIND_FAILED;
		out->psp_txn_id = pn_json_str(a, obj, "id");
	} else if (strncmp(type, "checkout.session.", 17) == 0) {
		const char *sub = type + 17, *ps = pn_json_str(a, obj, "payment_status");

		out->psp_txn_id = payment_intent_of(a, obj);
		if (strcmp(sub, "completed") == 0 || strcmp(sub, "async_payment_succeeded") == 0) {
			/* completed with payment_status "unpaid" is a delayed method:
			 * pending until async_payment_succeeded/_failed. */
			if (ps != NULL && (strcmp(ps, "paid") == 0
					   || strcmp(ps, "no_payment_required") == 0))
				out->kind = PN_KIND_PAID;
			else
				out->kind = PN_KIND_PENDING;
			if (out->kind == PN_KIND_PAID
			    && !pn_stripe_amount(a, obj, "amount_total",
						 pn_json_str(a, obj, "currency"), &out->amount_minor,
						 &out->currency, &why))
				r->amount_why = why;
		} else if (strcmp(sub, "async_payment_failed") == 0)
			out->kind = PN_KIND_FAILED;
		else if (strcmp(sub, "expired") == 0)
			out->kind = PN_KIND_CLOSED;
		else {
			out->kind = PN_KIND_IGNORED;
			r->unhandled = true;
		}
	} else if (strcmp(type, "charge.refunded") == 0) {
		out->kind = PN_KIND_REFUND;
		out->refund_cumulative = true;	/* amount_refunded is the running total */
		out->psp_txn_id = payment_intent_of(a, obj);
		if (!pn_stripe_amount(a, obj, "amount_refunded", pn_json_str(a, obj, "currency"),
				      &out->refund_minor, &out->currency, &why))
			r->amount_why = why;
		else if (!pn_stripe_amount(a, obj, "amount", pn_json_str(a, obj, "currency"),
					   &out->amount_minor, &out->currency, &why))
			out->amount_minor = -1;	/* the refund total alone is enough */
	} else if (strncmp(type, "charge.dispute.", 15) == 0) {
		stripe_dispute(a, obj, type, out);
	} else {
		const char *st = pn_json_str(a, obj, "status");

		out->kind = PN_KIND_IGNORED;
		/* a refund whose status says it failed is not informational: the
		 * money did not go back (no handling yet: listed for a person) */
		r->unhandled = !stripe_ignored_type(type)
		    || ((strcmp(type, "charge.refund.updated") == 0
			 || strcmp(type, "refund.updated") == 0)
			&& st != NULL
			&& (strcmp(st, "failed") == 0 || strcmp(st, "canceled") == 0));
	}
}

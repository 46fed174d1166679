/*
 * sign_stripe.c: Stripe test events (`paynotify sign stripe`): a v1 event
 * signed with the site's first secret as Stripe signs it (t=<now>,
 * v1=HMAC-SHA256 of "<t>." || body), for sites with stripe.test_signing.
 */
#include "config.h"

#include <string.h>

#include <jansson.h>

#include "crypto.h"
#include "money.h"
#include "sign.h"
#include "stripe.h"

bool
pn_sign_stripe(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	const struct pn_site *site = r->site;
	struct pn_arena *a = r->arena;
	json_t *obj, *ev;
	const char *type;
	char	cur[4];
	int64_t	amount;
	unsigned char mac[64];
	size_t	maclen, i;
	struct pn_iov iov[3];
	const char *t, *mkey;
	size_t	mklen;

	if (!site->stripe.test_signing) {
		pn_err_set(err, "site %s does not set stripe.test_signing = on: refusing to sign",
			   site->name);
		return false;
	}
	if (!pn_money_rescale(r->amount_minor, pn_money_exponent(r->currency),
			      pn_stripe_exponent(r->currency), &amount)) {
		pn_err_set(err, "amount not representable in Stripe's unit for %s", r->currency);
		return false;
	}
	for (i = 0; i < 3; i++)
		cur[i] = (char)(r->currency[i] - 'A' + 'a');
	cur[3] = '\0';
	switch (r->kind) {
	case PN_KIND_PAID:
		type = "payment_intent.succeeded";
		/* one PaymentIntent per order: its refund names the same one */
		obj = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:{s:s}}", "id",
				pn_arena_printf(a, "pi_%s", r->order_id),
				"object", "payment_intent",
				"amount", (json_int_t)amount, "amount_received", (json_int_t)amount,
				"currency", cur, "status", "succeeded", "metadata", "order_id",
				r->order_id);
		break;
	case PN_KIND_FAILED:
		type = "payment_intent.payment_failed";
		obj = json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:s}}", "id",
				pn_arena_printf(a, "pi_%s", r->order_id),
				"object", "payment_intent",
				"amount", (json_int_t)amount, "currency", cur, "status",
				"requires_payment_method", "metadata", "order_id", r->order_id);
		break;
	case PN_KIND_REFUND:
		type = "charge.refunded";
		obj = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:b, s:{s:s}}", "id",
				pn_arena_printf(a, "ch_%s", r->id), "object", "charge",
				"payment_intent", pn_arena_printf(a, "pi_%s", r->order_id),
				"amount", (json_int_t)amount, "amount_refunded",
				(json_int_t)amount, "currency", cur, "refunded", 1, "metadata",
				"order_id", r->order_id);
		break;
	case PN_KIND_CLOSED:
		type = "checkout.session.expired";
		obj = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id",
				pn_arena_printf(a, "cs_%s", r->id), "object", "checkout.session",
				"client_reference_id", r->order_id, "payment_status", "unpaid",
				"status", "expired");
		break;
	case PN_KIND_DISPUTE: {
		/* a charge.dispute.* of the order's PaymentIntent; the type follows the
		 * status (webhooks/stripe/identity.c stripe_dispute reads it back) */
		const char *st = r->case_status ? r->case_status : "needs_response";
		bool	closed = strcmp(st, "won") == 0 || strcmp(st, "lost") == 0
		    || strcmp(st, "warning_closed") == 0 || strcmp(st, "prevented") == 0;
		bool	open_ = strstr(st, "needs_response") != NULL;

		type = closed ? "charge.dispute.closed" : open_ ? "charge.dispute.created"
		    : "charge.dispute.updated";
		obj = json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:o, s:b}, s:{}, s:s, s:s, s:s}",
				"id", r->case_id ? r->case_id : pn_arena_printf(a, "dp_%s", r->id),
				"object", "dispute", "amount", (json_int_t)amount, "charge",
				pn_arena_printf(a, "ch_%s", r->id), "currency", cur,
				"evidence_details", "due_by", open_ ? json_integer((json_int_t)(r->now
				+ 7 * 86400)) : json_null(), "has_evidence", 0, "metadata",
				"payment_intent", pn_arena_printf(a, "pi_%s", r->order_id), "reason",
				"fraudulent", "status", st);
		break;
	}
	default:
		pn_err_set(err, "no Stripe test event for \"%s\"", pn_kind_name(r->kind));
		return false;
	}
	if (obj != NULL && r->kind != PN_KIND_DISPUTE && r->marker != NULL) {
		/* the marker (the site's own by default), as the shop sets it on
		 * its objects: under the site's KEY, or "site" */
		json_t *md = json_object_get(obj, "metadata");

		if (md == NULL) {
			md = json_object();
			json_object_set_new(obj, "metadata", md);
		}
		if (!pn_cfg_stripe_marker(site, &mkey, &mklen)) {
			mkey = "site";
			mklen = 4;
		}
		json_object_set_new(md, pn_arena_strndup(a, mkey, mklen), json_string(r->marker));
	}
	/* livemode as the site's stripe.mode takes it, so the site accepts it */
	ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:s, s:{s:o}}", "id",
		       pn_arena_printf(a, "evt_%s", r->id), "object", "event", "api_version",
		       "2024-06-20", "created", (json_int_t)r->now, "livemode",
		       site->stripe.mode == PN_STRIPE_LIVE, "type", type, "data", "object", obj);
	if ((out->body = pn_sign_json(a, ev)) == NULL) {
		pn_err_set(err, "could not build the event");
		return false;
	}
	out->body_len = strlen(out->body);
	t = pn_arena_printf(a, "%lld", (long long)r->now);
	iov[0].p = t;
	iov[0].len = strlen(t);
	iov[1].p = ".";
	iov[1].len = 1;
	iov[2].p = out->body;
	iov[2].len = out->body_len;
	if (!pn_hmac(PN_MD_SHA256, site->stripe.secrets[0].data, site->stripe.secrets[0].len, iov,
		     3, mac, &maclen)) {
		pn_err_set(err, "HMAC failed");
		return false;
	}
	out->content_type = "application/json; charset=utf-8";
	out->headers[0].name = "Stripe-Signature";
	out->headers[0].value = pn_arena_printf(a, "t=%s,v1=%s", t,
						pn_hex_encode(a, mac, maclen, false));
	out->nheaders = 1;
	return true;
}


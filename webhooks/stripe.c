/*
 * stripe.c: Stripe webhook events (paynotify-stripe).
 *
 * Verification follows the official SDKs (stripe-go, stripe-node,
 * stripe-python; see docs/PROVIDERS.md):
 *   Stripe-Signature = "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]"
 *   v1 = HMAC-SHA256(secret as its ASCII bytes, "<t>." || raw body)
 * Any v1 may match any configured secret (rotation); v0 and unknown schemes
 * are ignored; an element that is not exactly "key=value" makes the header
 * invalid (stripe-go); an unreadable v1 is skipped (stripe-go).  The
 * signature is checked first, then the age: now - t > stripe.tolerance_s is
 * refused.  A timestamp in the future is accepted, as stripe-go,
 * stripe-node and stripe-python accept it (only Stripe can sign one, and a
 * receiver whose clock lags must not refuse genuine events).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "crypto.h"
#include "json.h"
#include "money.h"
#include "provider.h"
#include "stripe.h"

#define MAX_V1 16

static const char *const stripe_keep_headers[] = {"Stripe-Signature", NULL};

bool
pn_stripe_parse_header(const char *header, struct pn_stripe_sig *out, struct pn_err *err)
{
	const char *p = header;
	bool	have_t = false;

	memset(out, 0, sizeof(*out));
	if (header == NULL || *header == '\0') {
		pn_err_set(err, "no Stripe-Signature header");
		return false;
	}
	if (strlen(header) > 4096) {
		pn_err_set(err, "Stripe-Signature header is too long");
		return false;
	}
	while (*p) {
		const char *end = strchr(p, ','), *eq;
		size_t	len = end ? (size_t)(end - p) : strlen(p);
		const char *k, *v;
		size_t	klen, vlen;

		/* trim ASCII blanks around the element (older stripe-dotnet) */
		k = p;
		klen = len;
		while (klen && (*k == ' ' || *k == '\t'))
			k++, klen--;
		while (klen && (k[klen - 1] == ' ' || k[klen - 1] == '\t'))
			klen--;
		eq = memchr(k, '=', klen);
		if (eq == NULL || memchr(eq + 1, '=', klen - (size_t)(eq - k) - 1) != NULL) {
			pn_err_set(err, "malformed Stripe-Signature element \"%.*s\"",
				   (int)(klen > 40 ? 40 : klen), k);
			return false;
		}
		v = eq + 1;
		vlen = klen - (size_t)(eq - k) - 1;
		klen = (size_t)(eq - k);
		if (klen == 1 && k[0] == 't') {
			char	digits[20];
			int64_t	t;

			if (have_t) {
				pn_err_set(err, "Stripe-Signature carries two timestamps");
				return false;
			}
			if (vlen == 0 || vlen > 18 || (vlen > 1 && v[0] == '0')) {
				pn_err_set(err, "invalid Stripe-Signature timestamp");
				return false;
			}
			memcpy(digits, v, vlen);
			digits[vlen] = '\0';
			if (!pn_parse_i64(digits, &t)) {
				pn_err_set(err, "invalid Stripe-Signature timestamp");
				return false;
			}
			out->t = t;
			memcpy(out->t_text, digits, vlen + 1);
			have_t = true;
		} else if (klen == 2 && k[0] == 'v' && k[1] == '1') {
			size_t n = 0;

			/* Unreadable signatures are skipped, as stripe-go does. */
			if (out->nv1 < (int)MAX_V1 && vlen == 64
			    && pn_hex_decode(v, vlen, out->v1[out->nv1], 32, &n) && n == 32)
				out->nv1++;
		}
		/* v0 (test-mode fake) and unknown schemes: ignored. */
		if (end == NULL)
			break;
		p = end + 1;
	}
	if (!have_t) {
		pn_err_set(err, "no timestamp in Stripe-Signature");
		return false;
	}
	return true;
}

bool
pn_stripe_verify_sig(const struct pn_stripe_sig *sig, const unsigned char *body,
		     size_t body_len, const struct pn_secret *secrets, size_t nsecrets,
		     const char **key_id)
{
	struct pn_iov iov[3] = {
		{sig->t_text, strlen(sig->t_text)}, {".", 1}, {body, body_len}};

	/* every secret against every v1, without stopping at the first match */
	return pn_hmac_match(PN_MD_SHA256, iov, 3, secrets, nsecrets, sig->v1[0],
			     (size_t)sig->nv1, 32, key_id);
}

/* Stripe's own minor unit: zero-decimal and three-decimal currencies. */
int
pn_stripe_exponent(const char *cur)
{
	static const char *const zero[] = {"BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW",
		"MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF", NULL};
	static const char *const three[] = {"BHD", "JOD", "KWD", "OMR", "TND", NULL};
	const char *const *p;

	for (p = zero; *p; p++)
		if (strcmp(*p, cur) == 0)
			return 0;
	for (p = three; *p; p++)
		if (strcmp(*p, cur) == 0)
			return 3;
	return 2;
}

/*
 * Stripe amount (its minor unit) -> ISO 4217 minor units.  They differ for
 * ISK (Stripe 2 decimals, ISO 0) and MGA (Stripe 0, ISO 2).  Returns false
 * with a reason when the amount cannot be represented exactly.
 */
static bool
stripe_amount(struct pn_arena *a, json_t *obj, const char *field, const char *raw_cur,
	      int64_t *minor, const char **currency, const char **why)
{
	char	cur[4];
	int64_t	v;
	int	iso;

	if (raw_cur == NULL || !pn_money_currency(raw_cur, cur)) {
		*why = pn_arena_printf(a, "unknown currency \"%.8s\"", raw_cur ? raw_cur : "");
		return false;
	}
	*currency = pn_arena_strdup(a, cur);
	if (!pn_json_int(obj, field, &v) || v < 0) {
		*why = pn_arena_printf(a, "no integer %s in the event", field);
		return false;
	}
	iso = pn_money_exponent(cur);
	if (!pn_money_rescale(v, pn_stripe_exponent(cur), iso, minor)) {
		*why = pn_arena_printf(a, "%s %lld %s is not a whole ISO 4217 amount", field,
				       (long long)v, cur);
		return false;
	}
	return true;
}

/* Shared with `paynotify query` (admin/query_stripe.c): a PaymentIntent's
 * amount is converted exactly as a notification's. */
bool
pn_stripe_amount(struct pn_arena *a, json_t *obj, const char *field, const char *raw_cur,
		 int64_t *minor, const char **currency, const char **why)
{
	return stripe_amount(a, obj, field, raw_cur, minor, currency, why);
}

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
 * Is the event this site's?  (README "Who may change an order", "Several
 * sites on one provider account".)
 *   - livemode, which Stripe signs with the rest of the body, must be the
 *     site's stripe.mode, else mode_mismatch;
 *   - with stripe.site_metadata = KEY=VALUE, an event that would move an
 *     order must carry metadata.KEY = VALUE on its object, else
 *     merchant_mismatch: Stripe sends every event of an account to every
 *     endpoint, so sites sharing an account are told apart only by what
 *     the merchant put in the object's metadata.  A refund without any
 *     marker is tied to the site through its PaymentIntent instead.
 * Both are stored and acknowledged, never applied.
 */
/*
 * The configured site, other than site, whose marker (stripe.site_metadata
 * KEY=VALUE) the object's metadata carries, or NULL.  Whole-string, byte
 * for byte, as the site's own marker is compared.
 */
static const struct pn_site *
sibling_of(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
	   json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	size_t	i;

	if (cfg == NULL || !json_is_object(md))
		return NULL;
	for (i = 0; i < cfg->nsites; i++) {
		const struct pn_site *o = &cfg->sites[i];
		const char *key, *marker;
		size_t	klen;
		json_t *v;

		if (o == site || strcmp(o->name, site->name) == 0
		    || !pn_cfg_stripe_marker(o, &key, &klen))
			continue;
		marker = key + klen + 1;
		v = json_object_get(md, pn_arena_strndup(a, key, klen));
		if (json_is_string(v) && json_string_length(v) == strlen(marker)
		    && memcmp(json_string_value(v), marker, strlen(marker)) == 0)
			return o;
	}
	return NULL;
}

static void
check_site(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
	   json_t *root, json_t *obj, struct pn_event *ev)
{
	const struct pn_site *sibling;
	json_t *live = json_object_get(root, "livemode"), *mv;
	bool	want_live = site->stripe.mode == PN_STRIPE_LIVE;
	const char *key, *got;
	size_t	klen;

	if (!json_is_boolean(live) || json_is_true(live) != want_live) {
		ev->flag = "mode_mismatch";
		ev->flag_detail = pn_arena_printf(a, "livemode is %s; site %s takes %s events "
						  "(stripe.mode = %s)",
						  !json_is_boolean(live) ? "missing"
						  : json_is_true(live) ? "true" : "false", site->name,
						  want_live ? "live" : "test", want_live ? "live" : "test");
		return;
	}
	/*
	 * A dispute moves no order, and its object carries the dispute's own
	 * metadata, not the charge's: it is tied to this site only through
	 * its PaymentIntent, which must be the recorded transaction of an
	 * order of this site (order_by_txn), else it is listed unlinked.
	 */
	if (!pn_cfg_stripe_marker(site, &key, &klen) || ev->kind == PN_KIND_IGNORED
	    || ev->kind == PN_KIND_PENDING || ev->kind == PN_KIND_DISPUTE || obj == NULL)
		return;
	mv = json_object_get(json_object_get(obj, "metadata"), pn_arena_strndup(a, key, klen));
	got = json_is_string(mv) ? pn_arena_strndup(a, json_string_value(mv), json_string_length(mv))
	    : NULL;
	if (got != NULL && json_string_length(mv) == strlen(key + klen + 1)
	    && memcmp(got, key + klen + 1, json_string_length(mv)) == 0)
		return;		/* this site's */
	/*
	 * A sibling's: another configured site's marker.  Stripe sends every
	 * event of the account to every endpoint, so that site receives this
	 * very event at its own endpoint and applies it there; here it is
	 * knowingly not ours (foreign_site: stored, counted, not on report).
	 * A marker that names no configured site, or none, stays
	 * merchant_mismatch: a person looks at it.
	 */
	if ((sibling = sibling_of(a, cfg, site, obj)) != NULL) {
		ev->flag = "foreign_site";
		ev->flag_detail = pn_arena_printf(a, "site %s's event (its marker %s is in "
						  "the metadata; stripe.site_metadata): not "
						  "applied here", sibling->name,
						  sibling->stripe.site_metadata);
		return;
	}
	if (got == NULL && ev->kind == PN_KIND_REFUND && ev->psp_txn_id != NULL) {
		/*
		 * A charge whose metadata lacks the marker (a Checkout Session's
		 * metadata is not copied to its PaymentIntent's charges unless
		 * the shop sets payment_intent_data.metadata): its PaymentIntent
		 * id is unique across Stripe, so the refund may apply to an
		 * order of this site already paid by that PaymentIntent, and to
		 * nothing else (weak identity, else txn_mismatch).
		 */
		ev->weak_identity = true;
		return;
	}
	ev->flag = "merchant_mismatch";
	ev->flag_detail = pn_arena_printf(a, "metadata.%.*s is %s%.64s%s, not site %s's "
					  "\"%s\" (stripe.site_metadata)%s", (int)klen, key,
					  got ? "\"" : "", got ? got : "absent", got ? "\"" : "",
					  site->name, key + klen + 1,
					  got ? ", nor any configured site's" : "");
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
	if (!stripe_amount(a, obj, "amount", pn_json_str(a, obj, "currency"), &ev->amount_minor,
			   &ev->currency, &why)) {
		ev->amount_minor = -1;	/* the case is still recorded; the report says "no amount" */
		ev->currency = NULL;
	}
	ev->dedup_key = pn_arena_printf(a, "dispute:%s:%s:%s", ev->case_id, type, ev->case_status);
}

/* Shared with `paynotify query`: a PaymentIntent is both root and object. */
void
pn_stripe_check_site(struct pn_arena *a, const struct pn_site *site, json_t *root, json_t *obj,
		     struct pn_event *ev)
{
	check_site(a, NULL, site, root, obj, ev);
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

enum pn_verdict
pn_stripe_normalise(struct pn_arena *a, const unsigned char *body, size_t body_len,
		    struct pn_event *ev, struct pn_err *err)
{
	return pn_stripe_normalise_cfg(a, NULL, NULL, body, body_len, ev, err);
}

enum pn_verdict
pn_stripe_normalise_site(struct pn_arena *a, const struct pn_site *site,
			 const unsigned char *body, size_t body_len, struct pn_event *ev,
			 struct pn_err *err)
{
	return pn_stripe_normalise_cfg(a, NULL, site, body, body_len, ev, err);
}

enum pn_verdict
pn_stripe_normalise_cfg(struct pn_arena *a, const struct pn_config *cfg,
			const struct pn_site *site, const unsigned char *body, size_t body_len,
			struct pn_event *ev, struct pn_err *err)
{
	json_t *root, *obj;
	const char *type, *object, *why = NULL;
	enum pn_verdict verdict = PN_VERIFIED;
	int64_t	created;
	bool	unhandled = false;

	root = pn_json_parse(body, body_len, err);
	if (root == NULL) {
		pn_err_prefix(err, "Stripe event is not valid JSON");
		return PN_MALFORMED;
	}
	object = pn_json_str(a, root, "object");
	if (object == NULL || strcmp(object, "event") != 0) {
		pn_err_set(err, "not a Stripe v1 event (object \"%.32s\"); thin v2 event "
			   "notifications are not supported", object ? object : "");
		verdict = PN_MALFORMED;
		goto done;
	}
	ev->psp_event_id = pn_json_str(a, root, "id");
	type = pn_json_str(a, root, "type");
	obj = pn_json_path(root, "data.object");
	if (ev->psp_event_id == NULL || *ev->psp_event_id == '\0'
	    || strlen(ev->psp_event_id) > 255) {
		pn_err_set(err, "Stripe event has no usable id");
		verdict = PN_MALFORMED;
		goto done;
	}
	/* A genuine event we cannot read further: no handling (unhandled). */
	if (type == NULL || !json_is_object(obj)) {
		ev->dedup_key = ev->psp_event_id;
		ev->event_type = type;
		ev->kind = PN_KIND_IGNORED;
		if (site != NULL)
			check_site(a, cfg, site, root, NULL, ev);
		pn_flag_unhandled(a, ev, "Stripe");
		goto done;
	}
	ev->dedup_key = ev->psp_event_id;
	ev->event_type = type;
	if (pn_json_int(root, "created", &created))
		ev->psp_time = pn_arena_printf(a, "%lld", (long long)created);
	ev->order_id = order_id_of(a, obj);

	if (strcmp(type, "payment_intent.succeeded") == 0) {
		ev->kind = PN_KIND_PAID;
		ev->psp_txn_id = pn_json_str(a, obj, "id");
		if (!stripe_amount(a, obj, pn_json_path(obj, "amount_received") ? "amount_received"
				   : "amount", pn_json_str(a, obj, "currency"), &ev->amount_minor,
				   &ev->currency, &why))
			pn_flag_amount(ev, why);
	} else if (strcmp(type, "payment_intent.payment_failed") == 0) {
		ev->kind = PN_KIND_FAILED;
		ev->psp_txn_id = pn_json_str(a, obj, "id");
	} else if (strncmp(type, "checkout.session.", 17) == 0) {
		const char *sub = type + 17, *ps = pn_json_str(a, obj, "payment_status");

		ev->psp_txn_id = payment_intent_of(a, obj);
		if (strcmp(sub, "completed") == 0 || strcmp(sub, "async_payment_succeeded") == 0) {
			/* completed with payment_status "unpaid" is a delayed method:
			 * pending until async_payment_succeeded/_failed. */
			if (ps != NULL && (strcmp(ps, "paid") == 0
					   || strcmp(ps, "no_payment_required") == 0))
				ev->kind = PN_KIND_PAID;
			else
				ev->kind = PN_KIND_PENDING;
			if (ev->kind == PN_KIND_PAID
			    && !stripe_amount(a, obj, "amount_total", pn_json_str(a, obj, "currency"),
					      &ev->amount_minor, &ev->currency, &why))
				pn_flag_amount(ev, why);
		} else if (strcmp(sub, "async_payment_failed") == 0)
			ev->kind = PN_KIND_FAILED;
		else if (strcmp(sub, "expired") == 0)
			ev->kind = PN_KIND_CLOSED;
		else {
			ev->kind = PN_KIND_IGNORED;
			unhandled = true;
		}
	} else if (strcmp(type, "charge.refunded") == 0) {
		ev->kind = PN_KIND_REFUND;
		ev->refund_cumulative = true;	/* amount_refunded is the running total */
		ev->psp_txn_id = payment_intent_of(a, obj);
		if (!stripe_amount(a, obj, "amount_refunded", pn_json_str(a, obj, "currency"),
				   &ev->refund_minor, &ev->currency, &why))
			pn_flag_amount(ev, why);
		else if (!stripe_amount(a, obj, "amount", pn_json_str(a, obj, "currency"),
					&ev->amount_minor, &ev->currency, &why))
			ev->amount_minor = -1;	/* the refund total alone is enough */
	} else if (strncmp(type, "charge.dispute.", 15) == 0) {
		stripe_dispute(a, obj, type, ev);
		if (ev->kind == PN_KIND_DISPUTE && pn_json_int(root, "created", &created))
			ev->case_time = created;
	} else {
		const char *st = pn_json_str(a, obj, "status");

		ev->kind = PN_KIND_IGNORED;
		/* a refund whose status says it failed is not informational: the
		 * money did not go back (no handling yet: listed for a person) */
		unhandled = !stripe_ignored_type(type)
		    || ((strcmp(type, "charge.refund.updated") == 0
			 || strcmp(type, "refund.updated") == 0)
			&& st != NULL
			&& (strcmp(st, "failed") == 0 || strcmp(st, "canceled") == 0));
	}
	if (site != NULL)
		check_site(a, cfg, site, root, obj, ev);
	if (unhandled)
		pn_flag_unhandled(a, ev, "Stripe");
done:
	json_decref(root);
	return verdict;
}

static PN_WUR enum pn_verdict
stripe_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	const struct pn_site *site = ctx->site;
	const struct pn_header *h = pn_request_header(req, "Stripe-Signature");
	struct pn_stripe_sig sig;
	const char *key_id = NULL;

	if (h == NULL) {
		pn_err_set(err, "no Stripe-Signature header");
		ev->reject = PN_REJECT_UNSIGNED;
		return PN_UNVERIFIED;
	}
	if (h->duplicate) {
		pn_err_set(err, "more than one Stripe-Signature header");
		return PN_UNVERIFIED;
	}
	if (!pn_stripe_parse_header(h->value, &sig, err))
		return PN_UNVERIFIED;
	if (sig.nv1 == 0) {
		pn_err_set(err, "no v1 signature in Stripe-Signature");
		return PN_UNVERIFIED;
	}
	if (!pn_stripe_verify_sig(&sig, req->body, req->body_len, site->stripe.secrets,
				  site->stripe.nsecrets, &key_id)) {
		pn_err_set(err, "could not verify Stripe signature for site %s: no secret matched "
			   "(%zu tried, %d signatures)", site->name, site->stripe.nsecrets, sig.nv1);
		return PN_UNVERIFIED;
	}
	if (ctx->check_freshness) {
		int64_t age = ctx->now - sig.t;

		if (age > site->stripe.tolerance_s) {
			pn_err_set(err, "Stripe-Signature timestamp %lld is %lld s old "
				   "(tolerance %lld s)", (long long)sig.t, (long long)age,
				   (long long)site->stripe.tolerance_s);
			ev->reject = PN_REJECT_STALE;
			return PN_UNVERIFIED;
		}
	}
	ev->key_id = key_id;
	ev->signed_time = sig.t;	/* HMAC'd with the body: "<t>." || body */
	return pn_stripe_normalise_cfg(ctx->arena, ctx->cfg, site, req->body, req->body_len, ev,
				       err);
}

/* Stripe reads only the status: 2xx delivered, anything else retried. */
static void
stripe_answer(int variant, struct pn_response *res, int status, const char *reason)
{
	if (status >= 200 && status < 300)
		pn_response_set(res, status, "application/json", "{\"received\":true}");
	else
		pn_answer_error(res, status, reason);
}

const struct pn_provider pn_provider_stripe = {
	.name = "stripe",
	.program = "paynotify-stripe",
	.keep_headers = stripe_keep_headers,
	.keys = &pn_stripe_cfg_keys,
	.verify = stripe_verify,
	.answer = stripe_answer,
};

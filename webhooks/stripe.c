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
#include "stripe/identity.h"

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

/* Shared with `paynotify query`: a PaymentIntent is both root and object. */
void
pn_stripe_check_site(struct pn_arena *a, const struct pn_site *site, json_t *root, json_t *obj,
		     struct pn_event *ev)
{
	check_site(a, NULL, site, root, obj, ev);
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
	const char *type, *object;
	enum pn_verdict verdict = PN_VERIFIED;
	struct pn_stripe_fact fact;
	struct pn_stripe_result r;
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
	if (pn_json_int(root, "created", &created))
		ev->psp_time = pn_arena_printf(a, "%lld", (long long)created);
	/* dedup key, kind and amounts: stripe/identity.c, shared with query and reconcile */
	memset(&fact, 0, sizeof(fact));
	fact.event_id = ev->psp_event_id;
	fact.type = type;
	fact.obj = obj;
	pn_stripe_identity(a, &fact, ev, &r);
	if (r.amount_why != NULL)
		pn_flag_amount(ev, r.amount_why);
	if (ev->kind == PN_KIND_DISPUTE && pn_json_int(root, "created", &created))
		ev->case_time = created;
	unhandled = r.unhandled;
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

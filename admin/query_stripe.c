/*
 * query_stripe.c: Stripe PaymentIntents (docs/QUERY.md "Stripe").
 *
 * GET /v1/payment_intents/{id} when the order has a stored PaymentIntent id
 * (orders.psp_txn_id "pi_..."), else GET /v1/payment_intents/search with
 * query=metadata['order_id']:'<id>' (Stripe's search query language; the
 * value quoted, ' and \ escaped with a backslash).  Authorization: Bearer
 * with a restricted key (stripe.query_key_file, rk_live_/rk_test_ with
 * PaymentIntents read).  A secret key (sk_...) is refused: it could move
 * money, and a query needs none of that.
 *
 * Stripe does not sign API answers: authenticity is the TLS connection to
 * the configured host (stripe.query_url, https only, peer and host always
 * verified by query_http.c).  Only status "succeeded" is final; canceled,
 * processing and requires_* change nothing (a shop may retry a canceled
 * PaymentIntent with a new one).  The event's dedup key is
 * "query:<pi_id>:succeeded": Stripe notifications key on the event id
 * (evt_...), which an API answer does not carry, so the two rows differ
 * and apply_event makes whichever comes second already_applied (the order
 * is paid already; same PaymentIntent) — never a second application.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "json.h"
#include "form.h"
#include "query.h"
#include "stripe.h"
#include "stripe/identity.h"

struct creds {
	char   *key;
	size_t	len;
	bool	live;
};

static bool
stripe_configured(const struct pn_site *site, const char **why)
{
	if (!site->stripe.configured) {
		*why = "Stripe is not configured";
		return false;
	}
	if (site->stripe.query_key_path == NULL) {
		*why = "stripe.query_key_file is not set";
		return false;
	}
	return true;
}

static bool
stripe_load(const struct pn_site *site, void **out, struct pn_err *err)
{
	char   *text = NULL, *k;
	size_t	len = 0, n;
	struct creds *c;

	if (!pn_cfg_secret_file_ok(site->stripe.query_key_path, err)
	    || !pn_read_file(site->stripe.query_key_path, 4096, &text, &len, err))
		return false;
	k = pn_trim(text);
	n = strcspn(k, "\r\n");
	k[n] = '\0';
	if (strncmp(k, "sk_", 3) == 0) {
		pn_err_set(err, "site %s: stripe.query_key_file holds a secret key (sk_...): refused; "
			   "create a restricted key (rk_...) with PaymentIntents read only",
			   site->name);
		goto failed;
	}
	if ((strncmp(k, "rk_live_", 8) != 0 && strncmp(k, "rk_test_", 8) != 0) || n < 12
	    || strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != n) {
		pn_err_set(err, "site %s: stripe.query_key_file does not hold a restricted key "
			   "(rk_live_... or rk_test_...)", site->name);
		goto failed;
	}
	c = pn_xcalloc(1, sizeof(*c));
	c->key = pn_xstrndup(k, n);
	c->len = n;
	c->live = strncmp(k, "rk_live_", 8) == 0;
	OPENSSL_cleanse(text, len);
	free(text);
	*out = c;
	return true;
failed:
	OPENSSL_cleanse(text, len);
	free(text);
	return false;
}

static void
stripe_free(void *p)
{
	struct creds *c = p;

	if (c == NULL)
		return;
	OPENSSL_cleanse(c->key, c->len);
	free(c->key);
	free(c);
}

static const char *
stripe_describe(const void *p)
{
	const struct creds *c = p;

	return c->live ? "rk_live_ key" : "rk_test_ key";
}

/* Does the PaymentIntent carry the site's stripe.site_metadata marker (or
 * does the site set none)? */
static bool
this_site(struct pn_arena *a, const struct pn_site *site, json_t *pi)
{
	const char *key, *marker;
	size_t	klen;
	json_t *v;

	if (!pn_cfg_stripe_marker(site, &key, &klen))
		return true;
	marker = key + klen + 1;	/* a public label, not a secret: strcmp is right */
	v = json_object_get(json_object_get(pi, "metadata"), pn_arena_strndup(a, key, klen));
	return json_is_string(v) && json_string_length(v) == strlen(marker)
	    && strcmp(json_string_value(v), marker) == 0;
}

/* metadata['order_id']:'<id>' with ' and \ escaped. */
static char *
search_query(struct pn_arena *a, const char *id)
{
	size_t	n = strlen(id), i, o = 0;
	char   *v = pn_arena_alloc(a, 2 * n + 1);

	for (i = 0; i < n; i++) {
		if (id[i] == '\'' || id[i] == '\\')
			v[o++] = '\\';
		v[o++] = id[i];
	}
	v[o] = '\0';
	return pn_arena_printf(a, "metadata['order_id']:'%s'", v);
}

static void
stripe_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
	   struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const struct creds *c = ctx->creds;
	bool	by_id = o->psp_txn_id && strncmp(o->psp_txn_id, "pi_", 3) == 0;
	const char *headers[3], *status = NULL, *ids = "";
	struct pn_stripe_fact fact;
	struct pn_stripe_result idr;
	struct pn_qhttp_answer h;
	struct pn_err err;
	json_t *root = NULL, *pi = NULL, *list;
	struct pn_event *ev = &ans->ev;
	size_t	i, nsucceeded = 0, nfound = 0;
	char   *url;

	if (by_id)
		url = pn_arena_printf(a, "%s/v1/payment_intents/%s", site->stripe.query_url,
				      pn_uri_encode(a, o->psp_txn_id));
	else
		url = pn_arena_printf(a, "%s/v1/payment_intents/search?query=%s",
				      site->stripe.query_url,
				      pn_uri_encode(a, search_query(a, o->order_id)));
	headers[0] = pn_arena_printf(a, "Authorization: Bearer %s", c->key);
	headers[1] = "Accept: application/json";
	headers[2] = NULL;
	if (!pn_qhttp_do(ctx->http, a, "GET", url, headers, NULL, 0, &h, &err)) {
		OPENSSL_cleanse((char *)headers[0], strlen(headers[0]));
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return;
	}
	OPENSSL_cleanse((char *)headers[0], strlen(headers[0]));
	if (!pn_query_http_ok(ctx, &h, by_id, ans))
		return;
	root = pn_json_parse(h.body, h.body_len, &err);
	if (root == NULL || !json_is_object(root)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "Stripe answer is not a JSON object");
		goto done;
	}
	if (by_id) {
		list = json_array();
		json_array_append(list, root);
	} else {
		list = json_incref(json_object_get(root, "data"));
		if (!json_is_array(list)) {
			json_decref(list);
			pn_query_set(ctx, ans, PN_Q_ERROR, "Stripe search answer has no data array");
			goto done;
		}
	}
	for (i = 0; i < json_array_size(list); i++) {
		json_t *p = json_array_get(list, i);
		const char *oid = pn_json_str(a, p, "metadata.order_id");
		const char *obj = pn_json_str(a, p, "object");
		const char *st = pn_json_str(a, p, "status");
		json_t *live = json_object_get(p, "livemode");

		if (obj == NULL || strcmp(obj, "payment_intent") != 0 || oid == NULL
		    || strcmp(oid, o->order_id) != 0)
			continue;	/* not this order's (search is by metadata only) */
		if (!this_site(a, site, p))
			continue;	/* another site's order of the same id (shared account) */
		if (!json_is_boolean(live) || json_is_true(live) != c->live) {
			pn_query_set(ctx, ans, PN_Q_REFUSED, "Stripe PaymentIntent %.64s has livemode "
				     "%s but the key is a %s key", pn_json_str(a, p, "id"),
				     json_is_true(live) ? "true" : "false", c->live ? "live" : "test");
			json_decref(list);
			goto done;
		}
		nfound++;
		ids = pn_arena_printf(a, "%s%s%s %s", ids, *ids ? ", " : "",
				      pn_json_str(a, p, "id"), st ? st : "?");
		if (st && strcmp(st, "succeeded") == 0) {
			nsucceeded++;
			if (pi == NULL)
				pi = p;
		} else if (status == NULL)
			status = st;
	}
	if (nfound == 0) {
		json_decref(list);
		pn_query_set(ctx, ans, PN_Q_NOT_FOUND, "no PaymentIntent with metadata.order_id %s",
			     o->order_id);
		goto done;
	}
	if (nsucceeded > 1) {
		json_decref(list);
		ans->psp_state = "succeeded";
		pn_query_set(ctx, ans, PN_Q_ATTENTION, "%zu succeeded PaymentIntents for one order "
			     "(%s): look at them by hand", nsucceeded, ids);
		goto done;
	}
	if (pi == NULL) {
		json_decref(list);
		ans->psp_state = status;
		pn_query_set(ctx, ans, PN_Q_WAITING, "Stripe: %s", ids);
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	/* the identity of a succeeded PaymentIntent (stripe/identity.c), as a bill row's */
	memset(&fact, 0, sizeof(fact));
	fact.type = "payment_intent.succeeded";
	fact.obj = pi;
	pn_stripe_identity(a, &fact, ev, &idr);
	ev->order_id = o->order_id;
	ev->key_id = "tls";
	pn_stripe_check_site(a, site, pi, pi, ev);	/* stripe.mode, as a notification */
	if (idr.amount_why != NULL) {
		ev->flag = "amount_mismatch";
		ev->flag_detail = idr.amount_why;
	}
	json_decref(list);
	ans->psp_state = "succeeded";
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	pn_query_set(ctx, ans, PN_Q_FINAL, "Stripe PaymentIntent %s succeeded", ev->psp_txn_id);
done:
	json_decref(root);
}

const struct pn_query_provider pn_query_stripe = {
	.name = "stripe",
	.configured = stripe_configured,
	.load = stripe_load,
	.free_creds = stripe_free,
	.describe = stripe_describe,
	.ask = stripe_ask,
};

/*
 * query_2c2p.c: 2C2P PGW v4 paymentInquiry (docs/QUERY.md "2C2P").
 *
 * POST <2c2p.query_url>/payment/4.3/paymentInquiry, body
 * {"payload":"<JWT>"}: a compact JWS, header {"alg":"HS256","typ":"JWT"},
 * payload {"merchantID","invoiceNo","locale"}, HMAC-SHA256 keyed with the
 * merchant secret (2c2p.secret_key_file, the first line; the receiver
 * already holds this secret, no new credential).  The answer is
 * {"payload":"<JWT>"} signed the same way: verified by the receiver's own
 * pn_2c2p_verify_jwt (every configured secret, HS256 only) and normalised
 * by pn_2c2p_normalise (merchantID checked, respCode mapped, the same
 * "<invoiceNo>:<respCode>:<tranRef>" dedup key as the backend
 * notification).  An answer without a payload is 2C2P's unsigned error
 * form ({"respCode","respDesc"}): it changes nothing (2002 "Transaction
 * not found" is reported as not found, anything else as an error).
 *
 * Legacy Redirect API sites (2c2p.api = redirect) are asked the same way,
 * with the same merchant ID and secret: a paid legacy form that does not
 * say which transaction it is (transaction_ref + approval_code + eci split
 * more than one way) is stored pending_confirmation, and this answer both
 * pays the order (with 2C2P's own tranRef) and confirms the stored form
 * when its signed segment is the answer's tranRef + approvalCode + eci
 * (twoc2p_confirms; docs/2C2P.md "Which transaction").
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "2c2p.h"
#include "crypto.h"
#include "form.h"
#include "json.h"
#include "query.h"

#define NOT_FOUND "2002"	/* respCode "Transaction not found" */

static bool
twoc2p_configured(const struct pn_site *site, const char **why)
{
	if (!site->twoc2p.configured) {
		*why = "2C2P is not configured";
		return false;
	}
	return true;
}

/* The merchant secret is loaded with the configuration already. */
static bool
twoc2p_load(const struct pn_site *site, void **out, struct pn_err *err)
{
	*out = NULL;
	if (site->twoc2p.nsecrets == 0) {
		pn_err_set(err, "site %s has no 2c2p.secret_key_file", site->name);
		return false;
	}
	return true;
}

static void
twoc2p_free(void *p)
{
	(void)p;
}

static char *
make_jwt(struct pn_arena *a, const struct pn_secret *key, const char *payload)
{
	static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	char   *h = pn_b64url_encode(a, header, strlen(header));
	char   *p = pn_b64url_encode(a, payload, strlen(payload));
	char   *signing = pn_arena_printf(a, "%s.%s", h, p);
	struct pn_iov iov = {signing, strlen(signing)};
	unsigned char mac[64];
	size_t	maclen = 0;

	if (!pn_hmac(PN_MD_SHA256, key->data, key->len, &iov, 1, mac, &maclen))
		return NULL;
	return pn_arena_printf(a, "%s.%s", signing, pn_b64url_encode(a, mac, maclen));
}

/*
 * tranRef, approvalCode and eci of the verified payload (PaymentResponse
 * Backend Parameters: tranRef C 28, approvalCode C 6, eci C 2; absent or
 * not a string: "").  Their concatenation is what a legacy form of the same
 * transaction signs between amount and transaction_datetime.
 */
static void
confirm_fields(struct pn_arena *a, const unsigned char *payload, size_t plen,
	       struct pn_query_answer *ans)
{
	struct pn_err err;
	json_t *p = pn_json_parse(payload, plen, &err);
	const char *t, *c, *e;

	if (p == NULL)
		return;
	t = pn_json_str(a, p, "tranRef");
	c = pn_json_str(a, p, "approvalCode");
	e = pn_json_str(a, p, "eci");
	t = t ? t : "";
	c = c ? c : "";
	e = e ? e : "";
	if (*t != '\0') {
		ans->confirm_segment = pn_arena_printf(a, "%s%s%s", t, c, e);
		ans->confirm_words = pn_arena_printf(a, "tranRef %.28s, approvalCode %.16s, eci "
						     "%.8s", t, *c ? c : "-", *e ? e : "-");
	}
	json_decref(p);
}

/*
 * A stored legacy form is confirmed by this answer when its signed segment
 * (transaction_ref + approval_code + eci, boundaries unsigned) is the
 * answer's tranRef + approvalCode + eci.  The caller has checked that the
 * stored form is for the same site, order, amount and currency.  The
 * posted split is only reported: when it differs, the form was re-split.
 */
static bool
twoc2p_confirms(const struct pn_query_ctx *ctx, const struct pn_query_answer *ans,
		const unsigned char *raw, size_t raw_len, const char **why)
{
	struct pn_arena *a = ctx->arena;
	struct pn_form f;
	struct pn_err err;
	const char *seg, *tref;

	if (ctx->site->twoc2p.api != PN_2C2P_REDIRECT || ans->confirm_segment == NULL
	    || !pn_form_parse(a, (const char *)raw, raw_len, &f, &err))
		return false;
	seg = pn_2c2p_redirect_segment(a, &f);
	if (strcmp(seg, ans->confirm_segment) != 0)
		return false;
	tref = pn_form_get(&f, "transaction_ref");
	*why = pn_arena_printf(a, "confirmed by 2C2P paymentInquiry (%s)%s", ans->confirm_words,
			       tref && strcmp(tref, ans->ev.psp_txn_id ? ans->ev.psp_txn_id : "")
			       == 0 ? "" : pn_arena_printf(a, "; the form was posted with "
							   "transaction_ref \"%.28s\" (re-split)",
							   tref ? tref : ""));
	return true;
}

static void
twoc2p_ask(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
	   struct pn_query_answer *ans)
{
	struct pn_arena *a = ctx->arena;
	const struct pn_site *site = ctx->site;
	const char *headers[] = {"Content-Type: application/json", "Accept: application/json",
				 NULL};
	json_t *req = json_pack("{s:s, s:s, s:s}", "merchantID", site->twoc2p.merchant_id,
				"invoiceNo", o->order_id, "locale", "en");
	char   *req_text = json_dumps(req, JSON_COMPACT), *jwt, *body, *url;
	const char *answer_jwt, *key_id = NULL, *rc;
	unsigned char *payload;
	size_t	plen;
	struct pn_qhttp_answer h;
	struct pn_err err;
	json_t *root = NULL, *body_json;
	struct pn_event *ev = &ans->ev;

	jwt = make_jwt(a, &site->twoc2p.secrets[0], req_text);
	free(req_text);
	json_decref(req);
	if (jwt == NULL) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "could not sign the paymentInquiry request");
		return;
	}
	body_json = json_pack("{s:s}", "payload", jwt);
	req_text = json_dumps(body_json, JSON_COMPACT);
	body = pn_arena_strdup(a, req_text);
	free(req_text);
	json_decref(body_json);
	url = pn_arena_printf(a, "%s/payment/4.3/paymentInquiry", site->twoc2p.query_url);
	if (!pn_qhttp_do(ctx->http, a, "POST", url, headers, body, strlen(body), &h, &err)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "%s", err.msg);
		return;
	}
	if (!pn_query_http_ok(ctx, &h, false, ans))
		return;
	root = pn_json_parse(h.body, h.body_len, &err);
	if (root == NULL || !json_is_object(root)) {
		pn_query_set(ctx, ans, PN_Q_ERROR, "2C2P answer is not a JSON object");
		goto done;
	}
	answer_jwt = pn_json_str(a, root, "payload");
	if (answer_jwt == NULL) {
		rc = pn_json_str(a, root, "respCode");
		ans->psp_state = rc;
		/* 2002 "Transaction not found" (response-code-payment); unsigned,
		 * but it changes nothing either way */
		pn_query_set(ctx, ans, rc && strcmp(rc, NOT_FOUND) == 0 ? PN_Q_NOT_FOUND : PN_Q_ERROR,
			     "2C2P answered without a payload: respCode %.16s "
			     "%.120s", rc ? rc : "-", pn_json_str(a, root, "respDesc")
			     ? pn_json_str(a, root, "respDesc") : "");
		goto done;
	}
	if (!pn_2c2p_verify_jwt(a, answer_jwt, strlen(answer_jwt), site->twoc2p.secrets,
				site->twoc2p.nsecrets, &payload, &plen, &key_id, &err)) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "2C2P answer refused for site %s: %s",
			     site->name, err.msg);
		goto done;
	}
	pn_event_init(ev);
	ev->source = "query";
	ev->key_id = key_id;
	if (pn_2c2p_normalise(a, ctx->cfg, site, payload, plen, ctx->now,
			      pn_arena_printf(a, "query:%s", o->order_id), ev, &err)
	    != PN_VERIFIED) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "2C2P answer payload refused: %s", err.msg);
		goto done;
	}
	ev->source = "query";
	ans->psp_state = ev->event_type;
	if (ev->order_id == NULL || strcmp(ev->order_id, o->order_id) != 0) {
		pn_query_set(ctx, ans, PN_Q_REFUSED, "2C2P answered for invoiceNo \"%.64s\", not "
			     "\"%s\"", ev->order_id ? ev->order_id : "", o->order_id);
		goto done;
	}
	if (ev->kind != PN_KIND_PAID && ev->kind != PN_KIND_CLOSED && ev->kind != PN_KIND_FAILED) {
		/* 0001/2001 pending, 2002 not found; 0999, 2003, 9xxx: no answer */
		pn_query_set(ctx, ans, ev->kind == PN_KIND_PENDING ? PN_Q_WAITING
			     : ev->event_type && strcmp(ev->event_type, NOT_FOUND) == 0
			     ? PN_Q_NOT_FOUND : PN_Q_ERROR,
			     "2C2P respCode %.16s: %.120s", ev->event_type ? ev->event_type : "-",
			     pn_json_str(a, root, "respDesc") ? pn_json_str(a, root, "respDesc") : "");
		goto done;
	}
	ans->raw = h.body;
	ans->raw_len = h.body_len;
	ans->raw_headers_json = h.headers_json;
	if (ev->kind == PN_KIND_PAID)
		confirm_fields(a, payload, plen, ans);
	pn_query_set(ctx, ans, PN_Q_FINAL, "2C2P respCode %s, tranRef %s", ev->event_type,
		     ev->psp_txn_id ? ev->psp_txn_id : "-");
done:
	json_decref(root);
}

const struct pn_query_provider pn_query_2c2p = {
	.name = "2c2p",
	.configured = twoc2p_configured,
	.load = twoc2p_load,
	.free_creds = twoc2p_free,
	.ask = twoc2p_ask,
	.confirms = twoc2p_confirms,
};

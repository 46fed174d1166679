/*
 * 2c2p_jwt.c: 2C2P PGW v4 backend notifications (2c2p.api = jwt, the
 * default): the JSON body {"payload":"<JWT>"}, an HS256 JWS keyed with the
 * merchant secret key string as its ASCII bytes (2C2P's agent-skills
 * handler uses node jsonwebtoken with the key as a string; the 2C2P JWT
 * guide sample only reproduces that way).  The HMAC covers the segments as
 * received; the payload is decoded only after the signature matched.  The
 * descriptor is in 2c2p.c; docs/2C2P.md gives every decision.
 */
#include "config.h"

#include <string.h>

#include "2c2p.h"
#include "2c2p_int.h"
#include "adapter.h"
#include "crypto.h"
#include "json.h"
#include "money.h"

#define SIG_B64_LEN 43		/* 32 bytes in unpadded base64url */
#define MAX_ID_LEN 255		/* invoiceNo, tranRef: longer is unusable */

/* The header must say HS256; "none", HS512, RS256 ... are refused. */
static PN_WUR bool
check_header(struct pn_arena *a, const char *seg, size_t len, struct pn_err *err)
{
	unsigned char *text;
	size_t	tlen;
	json_t *hdr;
	bool	ok;

	if (len > PN_2C2P_MAX_JWT_HEADER) {
		pn_err_set(err, "JWT header segment is too long (%zu characters)", len);
		return false;
	}
	if (!pn_b64url_decode(a, seg, len, &text, &tlen)) {
		pn_err_set(err, "JWT header segment is not base64url");
		return false;
	}
	hdr = pn_json_parse(text, tlen, err);
	if (hdr == NULL) {
		pn_err_prefix(err, "JWT header is not valid JSON");
		return false;
	}
	ok = json_is_object(hdr) && json_is_string(json_object_get(hdr, "alg"))
	    && strcmp(json_string_value(json_object_get(hdr, "alg")), "HS256") == 0
	    && json_string_length(json_object_get(hdr, "alg")) == 5;
	if (!ok)
		pn_err_set(err, "JWT header is not an object with alg \"HS256\"");
	else if (json_object_get(hdr, "crit") != NULL) {
		/* RFC 7515 4.1.11: we understand no extension */
		pn_err_set(err, "JWT header has a crit member");
		ok = false;
	}
	json_decref(hdr);
	return ok;
}

bool
pn_2c2p_verify_jwt(struct pn_arena *a, const char *jwt, size_t len,
		   const struct pn_secret *secrets, size_t nsecrets, unsigned char **payload,
		   size_t *payload_len, const char **key_id, struct pn_err *err)
{
	const char *end = jwt + len, *d1, *d2;
	unsigned char *sig;
	size_t	siglen;
	struct pn_iov iov;

	if (len == 0 || len > PN_2C2P_MAX_JWT || memchr(jwt, '\0', len) != NULL) {
		pn_err_set(err, "JWT is empty, too long or contains a NUL byte");
		return false;
	}
	d1 = memchr(jwt, '.', len);
	d2 = d1 ? memchr(d1 + 1, '.', (size_t)(end - d1 - 1)) : NULL;
	if (d2 == NULL || memchr(d2 + 1, '.', (size_t)(end - d2 - 1)) != NULL) {
		pn_err_set(err, "JWT does not have exactly three segments");
		return false;
	}
	if (d1 == jwt || d2 == d1 + 1 || d2 + 1 == end) {
		pn_err_set(err, "JWT has an empty segment");
		return false;
	}
	if (!check_header(a, jwt, (size_t)(d1 - jwt), err))
		return false;
	if ((size_t)(end - d2 - 1) != SIG_B64_LEN
	    || !pn_b64url_decode(a, d2 + 1, SIG_B64_LEN, &sig, &siglen) || siglen != 32) {
		pn_err_set(err, "JWT signature is not 32 bytes of unpadded base64url");
		return false;
	}
	iov = (struct pn_iov){jwt, (size_t)(d2 - jwt)};
	if (!pn_hmac_match(PN_MD_SHA256, &iov, 1, secrets, nsecrets, sig, 1, 32, key_id)) {
		pn_err_set(err, "no secret matched the JWT signature (%zu tried)", nsecrets);
		return false;
	}
	if (!pn_b64url_decode(a, d1 + 1, (size_t)(d2 - d1 - 1), payload, payload_len)) {
		pn_err_set(err, "JWT payload segment is not base64url");
		return false;
	}
	return true;
}

/* ---- the literal text of a JSON member ---------------------------------- */

static size_t
skip_ws(const char *s, size_t i, size_t n)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* s[i] is '"': the index after the closing quote, or 0. */
static size_t
skip_string(const char *s, size_t i, size_t n)
{
	for (i++; i < n; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	}
	return 0;
}

/* The index after the value starting at s[i], or 0 (no recursion). */
static size_t
skip_value(const char *s, size_t i, size_t n)
{
	size_t	depth = 0;

	if (i >= n)
		return 0;
	if (s[i] == '"')
		return skip_string(s, i, n);
	if (s[i] != '{' && s[i] != '[') {
		while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' '
		       && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
			i++;
		return i;
	}
	for (; i < n; i++) {
		if (s[i] == '"') {
			size_t e = skip_string(s, i, n);

			if (e == 0)
				return 0;
			i = e - 1;
		} else if (s[i] == '{' || s[i] == '[')
			depth++;
		else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
			return i + 1;
	}
	return 0;
}

bool
pn_2c2p_raw_member(const char *s, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t	i = skip_ws(s, 0, n), nlen = strlen(name);

	if (i >= n || s[i] != '{')
		return false;
	for (i++;;) {
		size_t	ks, ke, vs, ve;

		i = skip_ws(s, i, n);
		if (i >= n || s[i] != '"')
			return false;	/* '}' (not found) or not an object */
		ks = i + 1;
		ke = skip_string(s, i, n);
		if (ke == 0)
			return false;
		i = skip_ws(s, ke, n);
		if (i >= n || s[i] != ':')
			return false;
		vs = skip_ws(s, i + 1, n);
		ve = skip_value(s, vs, n);
		if (ve == 0 || ve == vs)
			return false;
		if (ke - 1 - ks == nlen && memcmp(s + ks, name, nlen) == 0) {
			*val = s + vs;
			*vlen = ve - vs;
			return true;
		}
		i = skip_ws(s, ve, n);
		if (i >= n || s[i] != ',')
			return false;
		i++;
	}
}

/* ---- normalising a v4 payload --------------------------------------------- */

/*
 * Is rc a respCode 2C2P documents (PGW v4 "Payment Response Code",
 * developer.2c2p.com/docs/response-code-payment; /work notes psp B6)?
 * 0000 success, 0001 pending, 0003 cancelled, 0004 soft decline (the
 * buyer retries after 3-D Secure), 0999 system error, 2000 "do a payment
 * inquiry", 2001 in progress, 2002 not found, 2003 failed inquiry, 4000
 * card verification, 4001-4999 issuer/host declines, 4200 tokenisation,
 * 9000-9999 request errors.  Those that move no order are stored
 * "ignored"; any other code is "unhandled" (docs/PROVIDERS.md).
 */
static bool
known_code(const char *rc)
{
	static const char *const codes[] = {"0000", "0001", "0003", "0004", "0999", "2000", "2001",
					    "2002", "2003", NULL};
	const char *const *c;
	int	i;

	if (rc == NULL || strlen(rc) != 4)
		return false;
	for (c = codes; *c; c++)
		if (strcmp(*c, rc) == 0)
			return true;
	for (i = 0; i < 4; i++)
		if (rc[i] < '0' || rc[i] > '9')
			return false;
	return rc[0] == '4' || rc[0] == '9';
}

/* A non-empty string member of at most max bytes, or NULL. */
static const char *
str_field(struct pn_arena *a, json_t *root, const char *key, size_t max)
{
	json_t *v = json_object_get(root, key);

	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max)
		return NULL;
	return pn_arena_strndup(a, json_string_value(v), json_string_length(v));
}

/*
 * The amount as decimal text: a JSON string as is, a JSON number as the
 * literal that was signed (jansson keeps only a double, and 19.99 is not
 * a double).
 */
static const char *
amount_text(struct pn_arena *a, json_t *root, const unsigned char *payload, size_t len,
	    const char **why)
{
	json_t *v = json_object_get(root, "amount");
	const char *raw;
	size_t	rlen;

	if (json_is_string(v))
		return pn_arena_strndup(a, json_string_value(v), json_string_length(v));
	if (!json_is_number(v)) {
		*why = "no amount";
		return NULL;
	}
	if (!pn_2c2p_raw_member((const char *)payload, len, "amount", &raw, &rlen)
	    || rlen > 40 || raw[0] == '"') {
		*why = "could not locate the amount literal";
		return NULL;
	}
	return pn_arena_strndup(a, raw, rlen);
}

/* Amount and currency into ev; false with *why when not exact. */
static bool
v4_amount(struct pn_arena *a, json_t *root, const unsigned char *payload, size_t len,
	  struct pn_event *ev, const char **why)
{
	const char *cur_raw = str_field(a, root, "currencyCode", 8), *text;
	char	cur[4];
	struct pn_err merr;

	if (cur_raw == NULL || !pn_money_currency(cur_raw, cur)) {
		*why = pn_arena_printf(a, "unknown currencyCode \"%.8s\"", cur_raw ? cur_raw : "");
		return false;
	}
	ev->currency = pn_arena_strdup(a, cur);
	text = amount_text(a, root, payload, len, why);
	if (text == NULL)
		return false;
	if (!pn_money_parse(text, pn_money_exponent(cur), &ev->amount_minor, &merr)) {
		ev->amount_minor = -1;
		*why = pn_arena_printf(a, "amount %.40s %s: %s", text, cur, merr.msg);
		return false;
	}
	return true;
}

/* exp / nbf, enforced when present, as jsonwebtoken does (no leeway). */
static PN_WUR bool
check_times(json_t *root, int64_t now, struct pn_err *err)
{
	json_t *exp = json_object_get(root, "exp"), *nbf = json_object_get(root, "nbf");

	if ((exp && !json_is_number(exp)) || (nbf && !json_is_number(nbf))) {
		pn_err_set(err, "JWT exp or nbf is not a number");
		return false;
	}
	if (now <= 0)
		return true;
	if (exp && (double)now >= json_number_value(exp)) {
		pn_err_set(err, "JWT expired at %.0f (now %lld)", json_number_value(exp),
			   (long long)now);
		return false;
	}
	if (nbf && (double)now < json_number_value(nbf)) {
		pn_err_set(err, "JWT not valid before %.0f (now %lld)", json_number_value(nbf),
			   (long long)now);
		return false;
	}
	return true;
}

enum pn_verdict
pn_2c2p_normalise(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
		  const unsigned char *payload, size_t len, int64_t now, const char *unkeyed,
		  struct pn_event *ev, struct pn_err *err)
{
	struct pn_cfg_marker mk;
	json_t *root = pn_json_parse(payload, len, err);
	const char *inv, *rc, *ref, *why = NULL;
	enum pn_verdict verdict = PN_VERIFIED;
	struct pn_2c2p_fact fact;

	if (root == NULL) {
		pn_err_prefix(err, "2C2P JWT payload is not valid JSON");
		return PN_MALFORMED;
	}
	if (!json_is_object(root)) {
		pn_err_set(err, "2C2P JWT payload is not a JSON object");
		verdict = PN_MALFORMED;
		goto done;
	}
	if (!check_times(root, now, err)) {
		/* exp/nbf are signed but are not a send time: no skew sample */
		ev->reject = PN_REJECT_STALE;
		verdict = PN_UNVERIFIED;
		goto done;
	}
	inv = str_field(a, root, "invoiceNo", MAX_ID_LEN);
	rc = str_field(a, root, "respCode", 16);
	ref = str_field(a, root, "tranRef", MAX_ID_LEN);
	ev->psp_txn_id = ref;
	ev->psp_time = str_field(a, root, "transactionDateTime", 64);
	/* dedup key and kind: 2c2p/identity.c (a payload without invoiceNo or
	 * respCode is genuine but not a result we can key: kept, never applied) */
	memset(&fact, 0, sizeof(fact));
	fact.invoice_no = inv;
	fact.code = rc;
	fact.tran_ref = ref;
	fact.unkeyed = unkeyed;
	pn_2c2p_identity(a, &fact, ev);
	/* the amount only gates "paid"; for other kinds it is informational */
	if (!v4_amount(a, root, payload, len, ev, &why) && ev->kind == PN_KIND_PAID)
		pn_flag_amount(ev, why);
	pn_2c2p_check_merchant(a, site, "merchantID", str_field(a, root, "merchantID", 64), ev);
	if (!known_code(rc))
		pn_flag_unhandled(a, ev, "2C2P");
	/*
	 * 2c2p.site_marker: the userDefinedN member of the signed payload
	 * (PGW v4 payment response: userDefined1 to userDefined5 are echoed
	 * from the payment token request; docs/2C2P.md "Several sites on one
	 * merchant").  Only a JSON string counts; its bytes are compared whole.
	 */
	if (pn_cfg_marker(site, &pn_twoc2p_cfg_keys, &mk)) {
		const char *field = pn_arena_strndup(a, mk.field, mk.field_len);
		json_t *v = json_object_get(root, field);

		pn_check_marker(a, cfg, site, &pn_twoc2p_cfg_keys, field,
				json_is_string(v) ? json_string_value(v) : NULL,
				json_is_string(v) ? json_string_length(v) : 0, ev);
	}
done:
	json_decref(root);
	return verdict;
}

enum pn_verdict
pn_2c2p_verify_v4(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	const struct pn_site *site = ctx->site;
	json_t *root = pn_json_parse(req->body, req->body_len, err), *p;
	const char *jwt, *key_id = NULL;
	unsigned char *payload;
	size_t	jwt_len, plen;

	if (root == NULL) {
		pn_err_prefix(err, "2C2P notification is not valid JSON");
		return PN_MALFORMED;
	}
	p = json_is_object(root) ? json_object_get(root, "payload") : NULL;
	if (!json_is_string(p)) {
		json_decref(root);
		pn_err_set(err, "2C2P notification has no string member \"payload\"");
		return PN_MALFORMED;
	}
	jwt_len = json_string_length(p);
	jwt = pn_arena_strndup(ctx->arena, json_string_value(p), jwt_len);
	json_decref(root);
	if (!pn_2c2p_verify_jwt(ctx->arena, jwt, jwt_len, site->twoc2p.secrets,
				site->twoc2p.nsecrets, &payload, &plen, &key_id, err)) {
		pn_err_prefix(err, "could not verify 2C2P JWT for site %s", site->name);
		return PN_UNVERIFIED;
	}
	ev->key_id = key_id;
	/* the signature segment names this exact notification */
	return pn_2c2p_normalise(ctx->arena, ctx->cfg, site, payload, plen,
				 ctx->check_freshness ? ctx->now : 0,
				 pn_arena_printf(ctx->arena, "jwt:%s", strrchr(jwt, '.') + 1), ev,
				 err);
}

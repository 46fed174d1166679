/*
 * 2c2p.c: 2C2P payment notifications (paynotify-2c2p).
 *
 * Two generations, chosen per site by 2c2p.api, never by the request:
 *
 * PGW v4 (jwt, the default): the backend notification is the JSON body
 *   {"payload":"<JWT>"}, an HS256 JWS keyed with the merchant secret key
 *   string as its ASCII bytes (2C2P's agent-skills handler uses node
 *   jsonwebtoken with the key as a string; the 2C2P JWT guide sample only
 *   reproduces that way).  The HMAC covers the segments as received; the
 *   payload is decoded only after the signature matched.
 *
 * Legacy Redirect API (redirect): a form POST whose hash_value is the hex
 *   HMAC-SHA1 (or SHA-256, 2c2p.redirect_hash) of the response fields in a
 *   fixed order, as 2C2P's Magento 2 and WooCommerce plugins check it
 *   (P2c2pHash::isValidHashValue, wc_2c2p_is_valid_hash): strcasecmp there,
 *   a constant-time comparison of the decoded bytes here.
 *
 * A genuine notification for another merchantID / merchant_id is stored as
 * merchant_mismatch and never applied (DESIGN: outcomes table).  See
 * docs/2C2P.md for every decision.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "2c2p.h"
#include "buf.h"
#include "crypto.h"
#include "form.h"
#include "json.h"
#include "money.h"
#include "provider.h"

#define SIG_B64_LEN 43		/* 32 bytes in unpadded base64url */
#define MAX_ID_LEN 255		/* invoiceNo, tranRef, order_id: longer is unusable */

static const char *const twoc2p_keep_headers[] = {NULL};

/* ---- JWT ----------------------------------------------------------------- */

/* The header must say HS256; "none", HS512, RS256 ... are refused. */
static bool
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

/* HMAC-SHA256 of signed[0..len) with every secret against sig. */
static bool
match_secrets(const char *signed_part, size_t len, const unsigned char sig[32],
	      const struct pn_secret *secrets, size_t nsecrets, const char **key_id)
{
	struct pn_iov iov = {signed_part, len};
	bool	matched = false;
	size_t	i;

	for (i = 0; i < nsecrets; i++) {
		unsigned char mac[64];
		size_t	maclen = 0;

		if (!pn_hmac(PN_MD_SHA256, secrets[i].data, secrets[i].len, &iov, 1, mac, &maclen)
		    || maclen != 32)
			continue;
		/* no early exit: the time taken does not tell which key matched */
		if (pn_ct_equal(mac, sig, 32) && !matched) {
			matched = true;
			*key_id = secrets[i].id;
		}
	}
	return matched;
}

bool
pn_2c2p_verify_jwt(struct pn_arena *a, const char *jwt, size_t len,
		   const struct pn_secret *secrets, size_t nsecrets, unsigned char **payload,
		   size_t *payload_len, const char **key_id, struct pn_err *err)
{
	const char *end = jwt + len, *d1, *d2;
	unsigned char *sig;
	size_t	siglen;

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
	if (!match_secrets(jwt, (size_t)(d2 - jwt), sig, secrets, nsecrets, key_id)) {
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

enum pn_kind
pn_2c2p_kind(const char *rc)
{
	if (rc == NULL || strlen(rc) != 4)
		return PN_KIND_IGNORED;
	if (strcmp(rc, "0000") == 0)
		return PN_KIND_PAID;
	if (strcmp(rc, "0001") == 0 || strcmp(rc, "2001") == 0)
		return PN_KIND_PENDING;
	if (strcmp(rc, "0003") == 0)
		return PN_KIND_CLOSED;
	/* 4001-4999 are issuer/host declines; 4000 (card verification) and
	 * 4200 (tokenisation) are successes of flows that charge nothing. */
	if (rc[0] == '4' && rc[1] >= '0' && rc[1] <= '9' && rc[2] >= '0' && rc[2] <= '9'
	    && rc[3] >= '0' && rc[3] <= '9' && strcmp(rc, "4000") != 0 && strcmp(rc, "4200") != 0)
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;
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
static bool
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

static void
check_merchant(struct pn_arena *a, const struct pn_site *site, const char *field,
	       const char *got, struct pn_event *ev)
{
	if (got != NULL && strcmp(got, site->twoc2p.merchant_id) == 0)
		return;
	ev->flag = "merchant_mismatch";
	ev->flag_detail = pn_arena_printf(a, "%s \"%.32s\" is not site %s's \"%s\"", field,
					  got ? got : "", site->name, site->twoc2p.merchant_id);
}

enum pn_verdict
pn_2c2p_normalise(struct pn_arena *a, const struct pn_site *site, const unsigned char *payload,
		  size_t len, int64_t now, const char *unkeyed, struct pn_event *ev,
		  struct pn_err *err)
{
	json_t *root = pn_json_parse(payload, len, err);
	const char *inv, *rc, *ref, *why = NULL;
	enum pn_verdict verdict = PN_VERIFIED;

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
		verdict = PN_UNVERIFIED;
		goto done;
	}
	inv = str_field(a, root, "invoiceNo", MAX_ID_LEN);
	rc = str_field(a, root, "respCode", 16);
	ref = str_field(a, root, "tranRef", MAX_ID_LEN);
	ev->event_type = rc;
	ev->order_id = inv;
	ev->psp_txn_id = ref;
	ev->psp_time = str_field(a, root, "transactionDateTime", 64);
	if (inv == NULL || rc == NULL) {
		/* genuine but not a payment result we can key: kept, never applied */
		ev->kind = PN_KIND_IGNORED;
		ev->dedup_key = unkeyed;
	} else {
		ev->kind = pn_2c2p_kind(rc);
		ev->dedup_key = pn_arena_printf(a, "%s:%s:%s", inv, rc, ref ? ref : "");
	}
	/* the amount only gates "paid"; for other kinds it is informational */
	if (!v4_amount(a, root, payload, len, ev, &why) && ev->kind == PN_KIND_PAID) {
		ev->flag = "amount_mismatch";
		ev->flag_detail = why;
	}
	check_merchant(a, site, "merchantID", str_field(a, root, "merchantID", 64), ev);
done:
	json_decref(root);
	return verdict;
}

static enum pn_verdict
verify_v4(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
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
	return pn_2c2p_normalise(ctx->arena, site, payload, plen,
				 ctx->check_freshness ? ctx->now : 0,
				 pn_arena_printf(ctx->arena, "jwt:%s", strrchr(jwt, '.') + 1), ev,
				 err);
}

/* ---- legacy Redirect API --------------------------------------------------- */

/*
 * Field formats, checked on every field BEFORE the hash is computed.
 *
 * hash_value covers the values concatenated without separators, so the
 * MAC alone does not fix where one field ends and the next begins: a
 * genuinely signed decline (payment_channel 001, payment_status 002,
 * channel_response_code 000) re-split as payment_channel 001002,
 * payment_status 000 carries the same MAC.  The formats below make the
 * split of every field that decides anything unique (docs/2C2P.md,
 * "Field formats", gives the source of each rule and the proof):
 *   - ' ' and ':' occur only in request_timestamp, transaction_datetime
 *     (both exactly "YYYY-MM-DD HH:MM:SS") and in fields after
 *     transaction_datetime, so the first two "date time" shapes of the
 *     content are those two fields, and the two fixed three-digit fields
 *     after the second one are payment_channel and payment_status;
 *   - merchant_id starts right after request_timestamp and must equal the
 *     site's, so order_id starts at a fixed place; invoice_no is empty or
 *     order_id itself (2c2p.redirect_invoice_no), never free;
 *   - currency (a known ISO 4217 numeric code) and amount (12 digits)
 *     follow; moving the order_id/currency boundary changes the currency
 *     and the amount, which the order must both match.
 * The fields between amount and transaction_datetime (transaction_ref,
 * approval_code, eci) can still trade characters with each other, so the
 * dedup key does not use them: it names the signed content (hash_value),
 * and every re-split of one signed form is the same event.
 */
enum rclass {
	RC_VERSION,		/* digits '.' digits */
	RC_DATETIME,		/* YYYY-MM-DD HH:MM:SS, a valid date and time */
	RC_ID,			/* [A-Za-z0-9_-]: no ' ', no ':' */
	RC_ALNUM,		/* [A-Za-z0-9] */
	RC_DIGITS,		/* [0-9] */
	RC_PAN,			/* masked card number: [0-9A-Za-z*] */
	RC_DECIMAL,		/* digits with at most one '.' */
	RC_ALPHA,		/* [A-Za-z] */
	RC_TEXT,		/* printable: no control character (UTF-8 kept as bytes) */
};

struct rrule {
	const char *key;
	unsigned short min, max;	/* length in bytes when present; min > 0: required */
	enum rclass cls;
};

/* In 2C2P's hash order (P2c2pHash::isValidHashValue, wc_2c2p_is_valid_hash). */
static const struct rrule redirect_rules[] = {
	{"version", 3, 5, RC_VERSION},
	{"request_timestamp", 19, 19, RC_DATETIME},
	{"merchant_id", 1, 25, RC_ID},
	{"order_id", 1, 50, RC_ID},
	{"invoice_no", 0, 50, RC_ID},
	{"currency", 3, 3, RC_DIGITS},
	{"amount", 12, 12, RC_DIGITS},
	{"transaction_ref", 0, 28, RC_ID},
	{"approval_code", 0, 6, RC_ID},
	{"eci", 0, 2, RC_DIGITS},
	{"transaction_datetime", 19, 19, RC_DATETIME},
	{"payment_channel", 3, 3, RC_DIGITS},
	{"payment_status", 3, 3, RC_DIGITS},
	{"channel_response_code", 0, 8, RC_ALNUM},
	{"channel_response_desc", 0, 255, RC_TEXT},
	{"masked_pan", 0, 19, RC_PAN},
	{"stored_card_unique_id", 0, 50, RC_ALNUM},
	{"backend_invoice", 0, 50, RC_ALNUM},
	{"paid_channel", 0, 50, RC_TEXT},
	{"paid_agent", 0, 50, RC_TEXT},
	{"recurring_unique_id", 0, 50, RC_ALNUM},
	{"user_defined_1", 0, 255, RC_TEXT},
	{"user_defined_2", 0, 255, RC_TEXT},
	{"user_defined_3", 0, 255, RC_TEXT},
	{"user_defined_4", 0, 255, RC_TEXT},
	{"user_defined_5", 0, 255, RC_TEXT},
	{"browser_info", 0, 255, RC_TEXT},
	{"ippPeriod", 0, 2, RC_DIGITS},
	{"ippInterestType", 0, 1, RC_ALPHA},
	{"ippInterestRate", 0, 8, RC_DECIMAL},
	{"ippMerchantAbsorbRate", 0, 8, RC_DECIMAL},
};

static const struct pn_form_field *
form_field(const struct pn_form *f, const char *key)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (strcmp(f->fields[i].key, key) == 0)
			return &f->fields[i];
	return NULL;
}

char *
pn_2c2p_redirect_content(struct pn_arena *a, const struct pn_form *f, size_t *len)
{
	size_t	total = 1, o = 0, i;
	char   *out;

	for (i = 0; i < PN_ARRAY_LEN(redirect_rules); i++) {
		const struct pn_form_field *fl = form_field(f, redirect_rules[i].key);

		total += fl ? fl->value_len : 0;
	}
	out = pn_arena_alloc(a, total);
	for (i = 0; i < PN_ARRAY_LEN(redirect_rules); i++) {
		const struct pn_form_field *fl = form_field(f, redirect_rules[i].key);

		if (fl) {
			memcpy(out + o, fl->value, fl->value_len);
			o += fl->value_len;
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_alnum(char c)
{
	return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int
two(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

/* "YYYY-MM-DD HH:MM:SS", a real calendar date and time (no leap second). */
static bool
valid_datetime(const char *s, size_t n)
{
	static const char shape[] = "dddd-dd-dd dd:dd:dd";
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int	y, m, d;
	size_t	i;

	if (n != sizeof(shape) - 1)
		return false;
	for (i = 0; i < n; i++)
		if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i])
			return false;
	y = two(s) * 100 + two(s + 2);
	m = two(s + 5);
	d = two(s + 8);
	if (y < 2000 || m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
		return false;
	if (m == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		return false;
	return two(s + 11) <= 23 && two(s + 14) <= 59 && two(s + 17) <= 59;
}

static bool
valid_class(enum rclass cls, const char *s, size_t n)
{
	size_t	i, dots = 0;

	switch (cls) {
	case RC_DATETIME:
		return valid_datetime(s, n);
	case RC_VERSION:
		for (i = 0; i < n; i++)
			if (s[i] == '.')
				dots++;
			else if (!is_digit(s[i]))
				return false;
		return dots == 1 && s[0] != '.' && s[n - 1] != '.';
	case RC_DECIMAL:
		for (i = 0; i < n; i++)
			if (s[i] == '.')
				dots++;
			else if (!is_digit(s[i]))
				return false;
		return dots <= 1 && (n == 0 || (s[0] != '.' && s[n - 1] != '.'));
	default:
		break;
	}
	for (i = 0; i < n; i++) {
		char	c = s[i];
		bool	ok;

		switch (cls) {
		case RC_ID:
			ok = is_alnum(c) || c == '_' || c == '-';
			break;
		case RC_ALNUM:
			ok = is_alnum(c);
			break;
		case RC_DIGITS:
			ok = is_digit(c);
			break;
		case RC_PAN:
			ok = is_alnum(c) || c == '*';
			break;
		case RC_ALPHA:
			ok = is_alnum(c) && !is_digit(c);
			break;
		default:	/* RC_TEXT */
			ok = (unsigned char)c >= 0x20 && c != 0x7f;
			break;
		}
		if (!ok)
			return false;
	}
	return true;
}

static const char *const rclass_words[] = {
	[RC_VERSION] = "a version (digits.digits)",
	[RC_DATETIME] = "a date and time YYYY-MM-DD HH:MM:SS",
	[RC_ID] = "letters, digits, '_' or '-'",
	[RC_ALNUM] = "letters and digits",
	[RC_DIGITS] = "digits",
	[RC_PAN] = "a masked card number",
	[RC_DECIMAL] = "a decimal number",
	[RC_ALPHA] = "letters",
	[RC_TEXT] = "printable text",
};

bool
pn_2c2p_redirect_check(struct pn_arena *a, const struct pn_form *f, bool invoice_is_order,
		       struct pn_err *err)
{
	const char *oid, *inv, *cur;
	size_t	i;

	(void)a;
	for (i = 0; i < PN_ARRAY_LEN(redirect_rules); i++) {
		const struct rrule *r = &redirect_rules[i];
		const struct pn_form_field *fl = form_field(f, r->key);
		size_t	n = fl ? fl->value_len : 0;
		const char *v = fl ? fl->value : "";

		if (n == 0 && r->min > 0) {
			pn_err_set(err, "2C2P field %s is %s", r->key, fl ? "empty" : "missing");
			return false;
		}
		if (n == 0)
			continue;
		if (n < r->min || n > r->max) {
			if (r->min == r->max)
				pn_err_set(err, "2C2P field %s \"%.40s\" is %zu bytes long, not %u",
					   r->key, v, n, r->min);
			else
				pn_err_set(err, "2C2P field %s \"%.40s\" is %zu bytes long, "
					   "not %u to %u", r->key, v, n, r->min ? r->min : 1,
					   r->max);
			return false;
		}
		if (memchr(v, '\0', n) != NULL || !valid_class(r->cls, v, n)) {
			pn_err_set(err, "2C2P field %s \"%.40s\" is not %s", r->key, v,
				   rclass_words[r->cls]);
			return false;
		}
	}
	cur = pn_form_get(f, "currency");
	if (pn_money_alpha_from_numeric(cur) == NULL) {
		pn_err_set(err, "2C2P field currency \"%s\" is not a known ISO 4217 numeric code",
			   cur);
		return false;
	}
	oid = pn_form_get(f, "order_id");
	inv = pn_form_get(f, "invoice_no");
	if (inv != NULL && *inv != '\0' && (!invoice_is_order || strcmp(inv, oid) != 0)) {
		pn_err_set(err, "2C2P field invoice_no \"%.40s\" is %s: only %s is accepted, "
			   "because its boundary with order_id is not signed "
			   "(2c2p.redirect_invoice_no)", inv,
			   invoice_is_order ? "not order_id" : "not empty",
			   invoice_is_order ? "an empty invoice_no or order_id itself"
			   : "an empty invoice_no");
		return false;
	}
	if (invoice_is_order && (inv == NULL || *inv == '\0')) {
		pn_err_set(err, "2C2P field invoice_no is empty: site expects order_id itself "
			   "(2c2p.redirect_invoice_no = order_id)");
		return false;
	}
	return true;
}

/*
 * payment_status (docs 3.2.6 "Payment status response code"): 000 success,
 * 001 pending, 002 rejected, 003 cancelled by the user, 999 failed.  Any
 * other code is recorded, never applied.
 */
static enum pn_kind
redirect_kind(const char *st)
{
	if (strcmp(st, "000") == 0)
		return PN_KIND_PAID;
	if (strcmp(st, "001") == 0)
		return PN_KIND_PENDING;
	if (strcmp(st, "002") == 0 || strcmp(st, "003") == 0 || strcmp(st, "999") == 0)
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;
}

/* Called only on a form pn_2c2p_redirect_check() accepted and whose MAC matched. */
static void
normalise_redirect(struct pn_arena *a, const struct pn_form *f, const struct pn_site *site,
		   const char *hash_hex, struct pn_event *ev)
{
	const char *oid = pn_form_get(f, "order_id"), *st = pn_form_get(f, "payment_status");
	const char *ref = pn_form_get(f, "transaction_ref");
	int64_t	v = -1;

	ev->event_type = st;
	ev->order_id = oid;
	ev->psp_txn_id = ref && *ref ? ref : NULL;
	ev->psp_time = pn_form_get(f, "transaction_datetime");
	ev->kind = redirect_kind(st);
	/* the signed content names the event: every split of it is one event */
	ev->dedup_key = pn_arena_printf(a, "%s:%s:%s", oid, st, hash_hex);
	/* amount: 12 digits of minor units; currency: numeric ISO 4217 (checked) */
	ev->currency = pn_money_alpha_from_numeric(pn_form_get(f, "currency"));
	if (pn_parse_i64(pn_form_get(f, "amount"), &v))
		ev->amount_minor = v;
	check_merchant(a, site, "merchant_id", pn_form_get(f, "merchant_id"), ev);
}

static enum pn_verdict
verify_redirect(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_site *site = ctx->site;
	bool	sha256 = site->twoc2p.redirect_hash == PN_2C2P_SHA256;
	size_t	mdlen = sha256 ? 32 : 20, got = 0, clen, i;
	unsigned char want[32];
	const char *hv, *key_id = NULL, *content;
	struct pn_form form;
	struct pn_iov iov;
	bool	matched = false;

	if (!pn_form_parse(ctx->arena, (const char *)ctx->req->body, ctx->req->body_len, &form,
			   err)) {
		pn_err_prefix(err, "2C2P notification is not a valid form body");
		return PN_MALFORMED;
	}
	hv = pn_form_get(&form, "hash_value");
	if (hv == NULL || strlen(hv) != 2 * mdlen || !pn_hex_decode(hv, 2 * mdlen, want,
								  sizeof(want), &got)
	    || got != mdlen) {
		pn_err_set(err, "2C2P hash_value is missing or not %zu hex digits", 2 * mdlen);
		return PN_UNVERIFIED;
	}
	/* before the MAC: a form whose fields could be re-split is refused */
	if (!pn_2c2p_redirect_check(ctx->arena, &form, site->twoc2p.redirect_invoice_no
				    == PN_2C2P_INVOICE_ORDER_ID, err)) {
		pn_err_prefix(err, "refusing 2C2P legacy form for site %s", site->name);
		return PN_MALFORMED;
	}
	content = pn_2c2p_redirect_content(ctx->arena, &form, &clen);
	iov = (struct pn_iov){content, clen};
	for (i = 0; i < site->twoc2p.nsecrets; i++) {
		const struct pn_secret *s = &site->twoc2p.secrets[i];
		unsigned char mac[64];
		size_t	maclen = 0;

		if (pn_hmac(sha256 ? PN_MD_SHA256 : PN_MD_SHA1, s->data, s->len, &iov, 1, mac,
			    &maclen) && maclen == mdlen && pn_ct_equal(mac, want, mdlen) && !matched) {
			matched = true;
			key_id = s->id;
		}
	}
	if (!matched) {
		pn_err_set(err, "could not verify 2C2P hash_value (HMAC-%s) for site %s: no secret "
			   "matched (%zu tried)", sha256 ? "SHA256" : "SHA1", site->name,
			   site->twoc2p.nsecrets);
		return PN_UNVERIFIED;
	}
	ev->key_id = key_id;
	normalise_redirect(ctx->arena, &form, site, pn_hex_encode(ctx->arena, want, mdlen, false),
			   ev);
	return PN_VERIFIED;
}

/* ---- the descriptor ----------------------------------------------------------- */

static enum pn_verdict
twoc2p_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	if (ctx->site->twoc2p.api == PN_2C2P_REDIRECT)
		return verify_redirect(ctx, ev, err);
	return verify_v4(ctx, ev, err);
}

static bool
twoc2p_configured(const struct pn_site *site)
{
	return site->twoc2p.configured;
}

/* 2C2P's own sample handler: 200 {"status":"received"}, 400 {"error":...}. */
static void
twoc2p_answer(const struct pn_request *req, struct pn_response *res, int status,
	      const char *reason)
{
	json_t *obj;
	char   *text;

	if (status >= 200 && status < 300) {
		pn_response_set(res, status, "application/json", "{\"status\":\"received\"}");
		return;
	}
	obj = json_pack("{s:s}", "error", reason ? reason : "failed");
	text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	pn_response_set(res, status, "application/json", text ? text : "{\"error\":\"failed\"}");
	free(text);
	json_decref(obj);
}

const struct pn_provider pn_provider_2c2p = {
	.name = "2c2p",
	.program = "paynotify-2c2p",
	.unverified_status = 400,
	.keep_headers = twoc2p_keep_headers,
	.configured = twoc2p_configured,
	.verify = twoc2p_verify,
	.answer = twoc2p_answer,
};

/*
 * 2c2p_redirect.c: 2C2P legacy Redirect API notifications (2c2p.api =
 * redirect): a form POST whose hash_value is the hex HMAC-SHA1 (or
 * SHA-256, 2c2p.redirect_hash) of the 31 response fields in a fixed order,
 * as 2C2P's Magento 2 and WooCommerce plugins check it
 * (P2c2pHash::isValidHashValue, wc_2c2p_is_valid_hash): strcasecmp there,
 * a constant-time comparison of the decoded bytes here.  The descriptor is
 * in 2c2p.c; docs/2C2P.md gives every decision.
 */
#include "config.h"

#include <string.h>

#include "2c2p.h"
#include "2c2p_int.h"
#include "adapter.h"
#include "crypto.h"
#include "form.h"
#include "money.h"

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
 * approval_code, eci) can still trade characters with each other, even at
 * their documented formats (approval_code empty or 6 characters, eci empty
 * or 2 digits, transaction_ref up to 28: "1234567|123456|05" is also
 * "123456712|345605|"), so the dedup key does not use them: it names the
 * signed content (hash_value), and every re-split of one signed form is the
 * same event.  And the transaction is not taken from such a form
 * (issue 23): when the signed segment transaction_ref + approval_code + eci
 * has more than one valid split, the event carries no PSP transaction, and
 * a paid one is stored pending_confirmation, never applied: `paynotify
 * query` asks 2C2P's paymentInquiry, applies the signed answer (with
 * 2C2P's tranRef) and confirms the stored form when the answer's tranRef +
 * approvalCode + eci is that segment (docs/2C2P.md "Which transaction").
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
	bool	opt;			/* min > 0 but may be empty (absent or "") */
};

/* In 2C2P's hash order (P2c2pHash::isValidHashValue, wc_2c2p_is_valid_hash). */
static const struct rrule redirect_rules[] = {
	{"version", 3, 5, RC_VERSION, false},
	{"request_timestamp", 19, 19, RC_DATETIME, false},
	{"merchant_id", 1, 25, RC_ID, false},
	{"order_id", 1, 50, RC_ID, false},
	{"invoice_no", 0, 50, RC_ID, false},
	{"currency", 3, 3, RC_DIGITS, false},
	{"amount", 12, 12, RC_DIGITS, false},
	{"transaction_ref", 0, 28, RC_ALNUM, false},
	{"approval_code", 6, 6, RC_ALNUM, true},
	{"eci", 2, 2, RC_DIGITS, true},
	{"transaction_datetime", 19, 19, RC_DATETIME, false},
	{"payment_channel", 3, 3, RC_DIGITS, false},
	{"payment_status", 3, 3, RC_DIGITS, false},
	{"channel_response_code", 0, 8, RC_ALNUM, false},
	{"channel_response_desc", 0, 255, RC_TEXT, false},
	{"masked_pan", 0, 19, RC_PAN, false},
	{"stored_card_unique_id", 0, 50, RC_ALNUM, false},
	{"backend_invoice", 0, 50, RC_ALNUM, false},
	{"paid_channel", 0, 50, RC_TEXT, false},
	{"paid_agent", 0, 50, RC_TEXT, false},
	{"recurring_unique_id", 0, 50, RC_ALNUM, false},
	{"user_defined_1", 0, 255, RC_TEXT, false},
	{"user_defined_2", 0, 255, RC_TEXT, false},
	{"user_defined_3", 0, 255, RC_TEXT, false},
	{"user_defined_4", 0, 255, RC_TEXT, false},
	{"user_defined_5", 0, 255, RC_TEXT, false},
	{"browser_info", 0, 255, RC_TEXT, false},
	{"ippPeriod", 0, 2, RC_DIGITS, false},
	{"ippInterestType", 0, 1, RC_ALPHA, false},
	{"ippInterestRate", 0, 8, RC_DECIMAL, false},
	{"ippMerchantAbsorbRate", 0, 8, RC_DECIMAL, false},
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

/* The field's value, "" when absent. */
static const char *
form_value(const struct pn_form *f, const char *key)
{
	const struct pn_form_field *fl = form_field(f, key);

	return fl ? fl->value : "";
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

/* Digits and dots only; *dots counts the dots. */
static bool
digits_dots(const char *s, size_t n, size_t *dots)
{
	size_t	i;

	*dots = 0;
	for (i = 0; i < n; i++)
		if (s[i] == '.')
			(*dots)++;
		else if (!is_digit(s[i]))
			return false;
	return true;
}

static bool
valid_class(enum rclass cls, const char *s, size_t n)
{
	size_t	i, dots = 0;

	switch (cls) {
	case RC_DATETIME:
		return valid_datetime(s, n);
	case RC_VERSION:
		return digits_dots(s, n, &dots) && dots == 1 && s[0] != '.' && s[n - 1] != '.';
	case RC_DECIMAL:
		return digits_dots(s, n, &dots) && dots <= 1
		    && (n == 0 || (s[0] != '.' && s[n - 1] != '.'));
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

		if (n == 0 && r->min > 0 && !r->opt) {
			pn_err_set(err, "2C2P field %s is %s", r->key, fl ? "empty" : "missing");
			return false;
		}
		if (n == 0)
			continue;
		if (n < r->min || n > r->max) {
			if (r->min == r->max)
				pn_err_set(err, "2C2P field %s \"%.40s\" is %zu bytes long, not %u%s",
					   r->key, v, n, r->min, r->opt ? " (or empty)" : "");
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
	/* tranRef is issued by 2C2P for every transaction (Secure Pay
	 * PaymentResponse: "tranRef Character 28 Mandatory Y ... Issued by
	 * System"): an approval code or ECI without one is no form 2C2P sends,
	 * and would let the segment below be split with an empty reference */
	if (*form_value(f, "transaction_ref") == '\0'
	    && (*form_value(f, "approval_code") != '\0' || *form_value(f, "eci") != '\0')) {
		pn_err_set(err, "2C2P field transaction_ref is empty while approval_code or eci "
			   "is not");
		return false;
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
 * The signed segment transaction_ref + approval_code + eci, as the MAC sees
 * it (no boundaries): the same for every split of one signed form.
 */
char *
pn_2c2p_redirect_segment(struct pn_arena *a, const struct pn_form *f)
{
	return pn_arena_printf(a, "%s%s%s", form_value(f, "transaction_ref"),
			       form_value(f, "approval_code"), form_value(f, "eci"));
}

/*
 * How many ways the segment can be split into fields of the formats above
 * (called on a form pn_2c2p_redirect_check accepted, so the segment is
 * letters and digits): approval_code is empty or 6, eci empty or 2 digits,
 * transaction_ref gets the rest, 1 to 28 (0 only when the whole segment is
 * empty: no reference, no code, no ECI).  1: the posted split is the only
 * one and names the transaction; more: it does not.
 */
unsigned
pn_2c2p_redirect_splits(const char *seg)
{
	static const size_t appr_len[] = {0, 6}, eci_len[] = {0, 2};
	size_t	n = strlen(seg), i, j;
	unsigned count = 0;

	if (n == 0)
		return 1;
	for (i = 0; i < PN_ARRAY_LEN(appr_len); i++)
		for (j = 0; j < PN_ARRAY_LEN(eci_len); j++) {
			size_t	a = appr_len[i], e = eci_len[j], t;

			if (a + e >= n)
				continue;		/* transaction_ref would be empty */
			t = n - a - e;
			if (t > 28)
				continue;
			if (e == 2 && !(is_digit(seg[n - 2]) && is_digit(seg[n - 1])))
				continue;
			count++;
		}
	return count;
}

/*
 * 2c2p.site_marker on the legacy form (docs/2C2P.md "Several sites on one
 * merchant").  userDefinedN is the form's user_defined_N, which the hash
 * covers (P2c2pHash::isValidHashValue, wc_2c2p_is_valid_hash: the 31
 * fields of redirect_rules, user_defined_1 to _5 among them).  But the
 * hash covers the values concatenated without separators, and
 * user_defined_N sits among free-text fields (paid_agent, the other
 * user_defined fields, browser_info, which the buyer's browser fills in):
 * a sender can move characters across those boundaries and keep the hash,
 * so the field's value alone proves nothing.  What the hash does fix is
 * the content: a result for a sibling site carries that site's marker
 * somewhere in it, whatever the split.  So the result is this site's only
 * when its user_defined_N is this site's marker and the content carries
 * no sibling's marker (siblings' markers never contain each other: the
 * loader refuses that); it is a sibling's (foreign_site) only when the
 * field is that sibling's marker, the content carries no other sibling's
 * and not this site's; anything else is for a person (merchant_mismatch).
 */
static void
redirect_marker(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
		const struct pn_form *f, const char *content, size_t clen, struct pn_event *ev)
{
	const struct pn_cfg_provider *p = &pn_twoc2p_cfg_keys;
	struct pn_cfg_marker mine, theirs;
	const struct pn_form_field *fl;
	const struct pn_site *sib = NULL;
	char	name[16], what[256];
	size_t	i, nsib = 0;
	bool	own_in;

	if (!pn_cfg_marker(site, p, &mine) || ev->kind == PN_KIND_PENDING
	    || ev->kind == PN_KIND_IGNORED
	    || (ev->flag != NULL && strcmp(ev->flag, "amount_mismatch") != 0
		&& strcmp(ev->flag, "pending_confirmation") != 0))
		return;		/* a form that waits for the inquiry is still checked */
	snprintf(name, sizeof(name), "user_defined_%c", mine.field[mine.field_len - 1]);
	fl = form_field(f, name);
	for (i = 0; cfg != NULL && i < cfg->nsites; i++) {
		const struct pn_site *o = &cfg->sites[i];

		if (strcmp(o->name, site->name) == 0 || !pn_cfg_configured(o, p)
		    || !pn_cfg_marker(o, p, &theirs) || theirs.field_len != mine.field_len
		    || memcmp(theirs.field, mine.field, mine.field_len) != 0
		    || !p->same_identity(site, o, what, sizeof(what))
		    || memmem(content, clen, theirs.value, strlen(theirs.value)) == NULL)
			continue;
		sib = o;
		nsib++;
	}
	own_in = memmem(content, clen, mine.value, strlen(mine.value)) != NULL;
	if (nsib == 0 || (nsib == 1 && !own_in && fl != NULL
			  && pn_marker_sibling(cfg, site, p, fl->value, fl->value_len) == sib)) {
		pn_check_marker(a, cfg, site, p, name, fl ? fl->value : NULL,
				fl ? fl->value_len : 0, ev);
		return;
	}
	ev->flag = "merchant_mismatch";
	ev->flag_detail = pn_arena_printf(a, "the signed content carries site %s's marker%s "
					  "(2c2p.site_marker; the legacy hash does not sign where "
					  "%s ends): cannot tell whose result this is", sib->name,
					  own_in ? " and this site's" : nsib > 1 ? " and another's"
					  : "", name);
}

/* Called only on a form pn_2c2p_redirect_check() accepted and whose MAC matched. */
static void
normalise_redirect(struct pn_arena *a, const struct pn_config *cfg, const struct pn_form *f,
		   const struct pn_site *site, const char *hash_hex, const char *content,
		   size_t clen, struct pn_event *ev)
{
	const char *oid = pn_form_get(f, "order_id"), *st = pn_form_get(f, "payment_status");
	const char *ref = pn_form_get(f, "transaction_ref");
	const char *seg = pn_2c2p_redirect_segment(a, f);
	unsigned splits = pn_2c2p_redirect_splits(seg);
	int64_t	v = -1;
	struct pn_2c2p_fact fact;

	ev->psp_time = pn_form_get(f, "transaction_datetime");
	/* dedup key and kind: 2c2p/identity.c; the signed content names the event: every
	 * split of it is one event */
	memset(&fact, 0, sizeof(fact));
	fact.redirect = true;
	fact.invoice_no = oid;
	fact.code = st;
	fact.hash_hex = hash_hex;
	pn_2c2p_identity(a, &fact, ev);
	if (splits == 1 && ref && *ref)
		ev->psp_txn_id = ref;
	else {
		/* the posted transaction_ref is one of several that carry this MAC
		 * (or there is none): not a transaction 2C2P can be said to have
		 * issued */
		ev->psp_txn_id = NULL;
		if (ev->kind == PN_KIND_PAID) {
			ev->flag = "pending_confirmation";
			ev->flag_detail = splits == 1
			    ? "no transaction_ref in the signed form: waiting for 2C2P "
			      "paymentInquiry (paynotify query --apply)"
			    : pn_arena_printf(a, "transaction_ref, approval_code and eci (\"%.64s\" "
					      "signed) split %u ways: waiting for 2C2P paymentInquiry "
					      "(paynotify query --apply)", seg, splits);
		}
	}
	/* amount: 12 digits of minor units; currency: numeric ISO 4217 (checked) */
	ev->currency = pn_money_alpha_from_numeric(pn_form_get(f, "currency"));
	if (pn_parse_i64(pn_form_get(f, "amount"), &v))
		ev->amount_minor = v;
	pn_2c2p_check_merchant(a, site, "merchant_id", pn_form_get(f, "merchant_id"), ev);
	if (ev->kind == PN_KIND_IGNORED)	/* a payment_status 2C2P does not document */
		pn_flag_unhandled(a, ev, "2C2P");
	redirect_marker(a, cfg, site, f, content, clen, ev);
}

enum pn_verdict
pn_2c2p_verify_redirect(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_site *site = ctx->site;
	bool	sha256 = site->twoc2p.redirect_hash == PN_2C2P_SHA256;
	size_t	mdlen = sha256 ? 32 : 20, got = 0, clen;
	unsigned char want[32];
	const char *hv, *key_id = NULL, *content;
	struct pn_form form;
	struct pn_iov iov;

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
	if (!pn_hmac_match(sha256 ? PN_MD_SHA256 : PN_MD_SHA1, &iov, 1, site->twoc2p.secrets,
			   site->twoc2p.nsecrets, want, 1, mdlen, &key_id)) {
		pn_err_set(err, "could not verify 2C2P hash_value (HMAC-%s) for site %s: no secret "
			   "matched (%zu tried)", sha256 ? "SHA256" : "SHA1", site->name,
			   site->twoc2p.nsecrets);
		return PN_UNVERIFIED;
	}
	ev->key_id = key_id;
	normalise_redirect(ctx->arena, ctx->cfg, &form, site,
			   pn_hex_encode(ctx->arena, want, mdlen, false), content, clen, ev);
	return PN_VERIFIED;
}

/*
 * 2c2p_cfg.c: the 2c2p.* keys of a [site] section (site->twoc2p) and what
 * only 2C2P's settings need checked.  Parsing, defaults, files and freeing:
 * common/cfg.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg.h"

#define S(field) PN_CFG_SITE_OFF(twoc2p.field)

static const struct pn_cfg_choice apis[] = {
	{"jwt", PN_2C2P_JWT}, {"redirect", PN_2C2P_REDIRECT}, {NULL, 0}};
static const struct pn_cfg_choice hashes[] = {
	{"sha1", PN_2C2P_SHA1}, {"sha256", PN_2C2P_SHA256}, {NULL, 0}};
static const struct pn_cfg_choice invoices[] = {
	{"empty", PN_2C2P_INVOICE_EMPTY}, {"order_id", PN_2C2P_INVOICE_ORDER_ID}, {NULL, 0}};

static const struct pn_cfg_keydef keys[] = {
	{"site", "2c2p.merchant_id", PN_K_STR, S(merchant_id), 0, 0, 0, NULL, NULL,
	 "merchantID notifications must carry", PN_KEY_REQUIRED, NULL},
	{"site", "2c2p.secret_key_file", PN_K_SECRETS, S(secrets), S(nsecrets), 0, 0,
	 NULL, NULL, "merchant secret key file, used as its ASCII bytes; one a line: rotation",
	 PN_KEY_REQUIRED, "secret keys"},
	{"site", "2c2p.api", PN_K_CHOICE, S(api), 0, 0, 0, apis, "jwt",
	 "jwt (PGW v4 backend notification) or redirect (legacy Redirect API)", 0, NULL},
	{"site", "2c2p.redirect_hash", PN_K_CHOICE, S(redirect_hash), 0, 0, 0, hashes,
	 "sha1", "HMAC digest of the legacy hash_value", 0, NULL},
	{"site", "2c2p.redirect_invoice_no", PN_K_CHOICE, S(redirect_invoice_no), 0, 0, 0,
	 invoices, "empty", "legacy only: what invoice_no carries, empty or order_id "
	 "itself; anything else is refused, because nothing signs where order_id ends", 0, NULL},
	{"site", "2c2p.query_url", PN_K_URL, S(query_url), 0, 0, 0, NULL,
	 "https://pgw.2c2p.com", "paynotify query: the PGW v4 API (sandbox: "
	 "https://sandbox-pgw.2c2p.com); paymentInquiry is signed with 2c2p.secret_key_file", 0,
	 NULL},
	{"site", "2c2p.site_marker", PN_K_STR, S(site_marker), 0, 0, 0, NULL, NULL,
	 "FIELD=VALUE, FIELD one of userDefined1 to userDefined5: the value every payment "
	 "request of this site sets in that field (legacy form: user_defined_1 to _5), which "
	 "2C2P signs into the result; required when several sites share one merchant_id and "
	 "secret key.  A result carrying another such site's marker is stored foreign_site, "
	 "one without this site's is stored merchant_mismatch; neither is applied", 0, NULL},
	{"site", "2c2p.test_signing", PN_K_BOOL, S(test_signing), 0, 0, 0, NULL, "off",
	 "sandbox sites only: let `paynotify sign` sign test notifications with the site's key",
	 0, NULL},
};

static bool
all_hex(const unsigned char *s, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (pn_hexval(s[i]) < 0)
			return false;
	return n > 0;
}

/* PGW v4 merchant secret keys are 64 hex digits, used as text. */
static void
secret_forms(const struct pn_cfg_check *c)
{
	const struct pn_twoc2p_cfg *t = &c->site->twoc2p;
	size_t	i;

	if (t->api != PN_2C2P_JWT)
		return;
	for (i = 0; i < t->nsecrets; i++) {
		const struct pn_secret *k = &t->secrets[i];

		if (k->len != 64 || !all_hex(k->data, k->len))
			pn_cfg_site_finding(c, PN_CFG_WARNING, "2c2p.secret_key_file %s (line %d) "
					    "%s: 2C2P's PGW v4 merchant secret keys are 64 hex "
					    "digits; check that the whole key was copied (it is used "
					    "as text, not hex-decoded)", k->id, k->line,
					    k->len != 64 ? "is not 64 characters long"
					    : "has characters that are not hex digits");
	}
}

static void
summary(const struct pn_site *s, char *buf, size_t size)
{
	snprintf(buf, size, "merchant_id %s, api %s%s", s->twoc2p.merchant_id,
		 s->twoc2p.api == PN_2C2P_REDIRECT ? "redirect" : "jwt",
		 s->twoc2p.test_signing ? ", test signing on" : "");
}

/* One merchantID and a secret key both hold: 2C2P's signature and merchantID
 * check pass at both sites. */
static bool
same_identity(const struct pn_site *a, const struct pn_site *b, char *what, size_t size)
{
	const struct pn_twoc2p_cfg *x = &a->twoc2p, *y = &b->twoc2p;

	/* the generation and the legacy digest and invoice_no rule are the
	 * site's: a JWT never parses as a legacy form, an HMAC-SHA1 hash_value
	 * never matches an HMAC-SHA256 one, and the two invoice_no rules
	 * accept disjoint forms */
	if (x->api != y->api || (x->api == PN_2C2P_REDIRECT
				 && (x->redirect_hash != y->redirect_hash
				     || x->redirect_invoice_no != y->redirect_invoice_no))
	    || x->merchant_id == NULL || y->merchant_id == NULL
	    || strcmp(x->merchant_id, y->merchant_id) != 0
	    || !pn_cfg_secrets_overlap(x->secrets, x->nsecrets, y->secrets, y->nsecrets))
		return false;
	snprintf(what, size, "merchant_id %s and a secret key", x->merchant_id);
	return true;
}

/*
 * The legacy form's hash covers the values concatenated without
 * separators, and the user_defined fields are free text beside other free
 * text (browser_info, paid_agent): their boundaries are not signed, so a
 * sender can move characters between them.  A legacy site therefore takes
 * a result as its own only when the signed content carries its marker and
 * no sibling's (2c2p_redirect.c), and two markers one of which contains the
 * other cannot be told apart.
 */
static bool
markers_distinct(const struct pn_site *a, const char *va, const struct pn_site *b,
		 const char *vb)
{
	if (a->twoc2p.api != PN_2C2P_REDIRECT && b->twoc2p.api != PN_2C2P_REDIRECT)
		return true;
	return strstr(va, vb) == NULL && strstr(vb, va) == NULL;
}

static const char *const marker_fields[] = {
	"userDefined1", "userDefined2", "userDefined3", "userDefined4", "userDefined5", NULL};

const struct pn_cfg_provider pn_twoc2p_cfg_keys = {
	.prefix = "2c2p",
	.title = "2C2P",
	.configured_off = S(configured),
	.keys = keys,
	.nkeys = PN_ARRAY_LEN(keys),
	.secret_forms = secret_forms,
	.summary = summary,
	.same_identity = same_identity,
	.marker_key = "2c2p.site_marker",
	.marker_fields = marker_fields,
	.markers_distinct = markers_distinct,
};

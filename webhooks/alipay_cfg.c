/*
 * alipay_cfg.c: the alipay.* keys of a [site] section and what only Alipay's
 * settings need checked.  Parsing, defaults, files and freeing: common/cfg.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg.h"
#include "crypto.h"

#define S(field) PN_CFG_SITE_OFF(alipay.field)

static const struct pn_cfg_choice sign_types[] = {
	{"RSA2", PN_ALIPAY_RSA2}, {"RSA", PN_ALIPAY_RSA}, {NULL, 0}};

static const struct pn_cfg_keydef keys[] = {
	{"site", "alipay.app_id", PN_K_STR, S(app_id), 0, 0, 0, NULL, NULL,
	 "the app_id notifications must carry", PN_KEY_REQUIRED, NULL},
	{"site", "alipay.seller_id", PN_K_STR, S(seller_id), 0, 0, 0, NULL, NULL,
	 "the seller_id (2088...) notifications must carry", PN_KEY_REQUIRED, NULL},
	/* 1024 bits here: the floor depends on alipay.sign_type, which may come
	 * later in the section (validate() requires 2048 for RSA2) */
	{"site", "alipay.public_key_file", PN_K_PUBKEYS, S(keys), S(nkeys), PN_RSA_LEGACY_MIN_BITS,
	 0, NULL, NULL, "Alipay public key(s): SPKI PEM, bare base64 SPKI or "
	 "alipayCertPublicKey_RSA2.crt; several files = rotation", PN_KEY_REQUIRED, "key"},
	{"site", "alipay.sign_type", PN_K_CHOICE, S(sign_type), 0, 0, 0, sign_types,
	 "RSA2", "RSA2 (SHA256withRSA) or RSA (SHA1withRSA); never taken from the payload", 0,
	 NULL},
	{"site", "alipay.test_private_key_file", PN_K_PRIVKEY, S(test_key), 0, 0, 0, NULL, NULL,
	 "sandbox sites only: private key that `paynotify sign` signs test notifications with",
	 0, NULL},
	{"site", "alipay.query_private_key_file", PN_K_PATH, S(query_key_path), 0, 0, 0, NULL,
	 NULL, "paynotify query: the app's private key (PKCS#8 or PKCS#1 PEM) that signs "
	 "alipay.trade.query; read by the query command only, never by the receiver", 0, NULL},
	{"site", "alipay.query_app_cert_file", PN_K_PATH, S(query_app_cert), 0, 0, 0, NULL,
	 NULL, "paynotify query, public-key certificate mode: the app's certificate "
	 "(appCertPublicKey_<app_id>.crt); its app_cert_sn goes with every request", 0, NULL},
	{"site", "alipay.query_root_cert_file", PN_K_PATH, S(query_root_cert), 0, 0, 0, NULL,
	 NULL, "paynotify query, public-key certificate mode: Alipay's root certificates "
	 "(alipayRootCert.crt); their alipay_root_cert_sn goes with every request", 0, NULL},
	{"site", "alipay.site_passback", PN_K_STR, S(site_passback), 0, 0, 0, NULL, NULL,
	 "the passback_params value every payment request of this site sets (1 to 64 "
	 "letters, digits, '.', '_', '~' or '-': URL-encoding leaves it as it is), which Alipay "
	 "returns signed in its notifications; required when several sites share one app_id, "
	 "seller_id and Alipay public key.  A notification carrying another such site's value "
	 "is stored foreign_site, one without this site's merchant_mismatch; neither is "
	 "applied", 0, NULL},
	{"site", "alipay.query_url", PN_K_URL, S(query_url), 0, 0, 0, NULL,
	 "https://openapi.alipay.com/gateway.do", "paynotify query: the Alipay gateway "
	 "(sandbox: https://openapi-sandbox.dl.alipaydev.com/gateway.do)", 0, NULL},
};

static void
validate(const struct pn_cfg_check *c)
{
	const struct pn_alipay_cfg *a = &c->site->alipay;
	size_t	i;

	if ((a->query_app_cert == NULL) != (a->query_root_cert == NULL))
		pn_cfg_site_finding(c, PN_CFG_ERROR, "alipay.query_app_cert_file and "
				    "alipay.query_root_cert_file go together");
	for (i = 0; i < a->nkeys; i++) {
		int	bits = EVP_PKEY_get_bits(a->keys[i].pkey);

		if (a->sign_type != PN_ALIPAY_RSA2 || bits >= PN_RSA_MIN_BITS)
			continue;
		pn_cfg_site_finding(c, PN_CFG_ERROR, "Alipay key %s has %d bits; alipay.sign_type "
				    "RSA2 needs at least %d (only the legacy RSA accepts %d)",
				    a->keys[i].id, bits, PN_RSA_MIN_BITS, PN_RSA_LEGACY_MIN_BITS);
	}
}

static void
summary(const struct pn_site *s, char *buf, size_t size)
{
	snprintf(buf, size, "app_id %s, seller_id %s, %s%s", s->alipay.app_id,
		 s->alipay.seller_id, s->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2",
		 s->alipay.test_key ? ", test signing key" : "");
}

/* Site binding (issue 11): a legacy 1024-bit key the loader accepts for RSA. */
static int
warnings(const struct pn_config *cfg, FILE *out)
{
	size_t	i, j;
	int	n = 0;

	for (i = 0; i < cfg->nsites; i++) {
		const struct pn_site *s = &cfg->sites[i];

		for (j = 0; s->alipay.configured && j < s->alipay.nkeys; j++) {
			const struct pn_pubkey *k = &s->alipay.keys[j];

			if (EVP_PKEY_get_bits(k->pkey) >= PN_RSA_MIN_BITS)
				continue;
			fprintf(out, "WARNING: site %s: Alipay key %s has %d bits (accepted for the "
				"legacy sign_type RSA only); move the app to RSA2 with a "
				"2048-bit key\n", s->name, k->id, EVP_PKEY_get_bits(k->pkey));
			n++;
		}
	}
	return n;
}

/* One app_id and seller_id, and an Alipay public key both hold. */
static bool
same_identity(const struct pn_site *a, const struct pn_site *b, char *what, size_t size)
{
	const struct pn_alipay_cfg *x = &a->alipay, *y = &b->alipay;

	/* the signature algorithm is the site's (never the payload's): RSA and
	 * RSA2 sites never verify each other's notifications */
	if (x->sign_type != y->sign_type
	    || x->app_id == NULL || y->app_id == NULL || strcmp(x->app_id, y->app_id) != 0
	    || x->seller_id == NULL || y->seller_id == NULL
	    || strcmp(x->seller_id, y->seller_id) != 0
	    || !pn_cfg_pubkeys_overlap(x->keys, x->nkeys, y->keys, y->nkeys))
		return false;
	snprintf(what, size, "app_id %s, seller_id %s and an Alipay public key", x->app_id,
		 x->seller_id);
	return true;
}

const struct pn_cfg_provider pn_alipay_cfg_keys = {
	.prefix = "alipay",
	.title = "Alipay",
	.configured_off = S(configured),
	.keys = keys,
	.nkeys = PN_ARRAY_LEN(keys),
	.private_not_public = "this is a private key (your application's private key?), not "
	    "Alipay's public key: copy the Alipay public key (支付宝公钥) or "
	    "alipayCertPublicKey_RSA2.crt from the Alipay console, and keep the private key "
	    "off the receiver",
	.validate = validate,
	.summary = summary,
	.warnings = warnings,
	.same_identity = same_identity,
	.marker_key = "alipay.site_passback",
	.marker_field = "passback_params",
};

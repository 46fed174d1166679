/*
 * wechatpay_cfg.c: the wechatpay.* keys of a [site] section and what only
 * WeChat Pay's settings need checked (API v3 and v2 keys, certificates or
 * the public key).  Parsing, defaults, files and freeing: common/cfg.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg.h"
#include "crypto.h"

#define S(field) PN_CFG_SITE_OFF(wechatpay.field)

static const struct pn_cfg_choice v2_sign_types[] = {
	{"MD5", PN_WXV2_MD5}, {"HMAC-SHA256", PN_WXV2_HMAC_SHA256}, {NULL, 0}};

static const struct pn_cfg_keydef keys[] = {
	{"site", "wechatpay.mchid", PN_K_STR, S(mchid), 0, 0, 0, NULL, NULL,
	 "merchant id (mchid / mch_id) notifications must carry", PN_KEY_REQUIRED, NULL},
	{"site", "wechatpay.appid", PN_K_STR, S(appid), 0, 0, 0, NULL, NULL,
	 "appid notifications must carry", PN_KEY_REQUIRED, NULL},
	{"site", "wechatpay.apiv3_key_file", PN_K_SECRETS, S(apiv3_keys), S(napiv3_keys), 0, 0,
	 NULL, NULL, "APIv3 key file (32 bytes) for AES-256-GCM", 0, "APIv3 keys"},
	{"site", "wechatpay.apiv2_key_file", PN_K_SECRETS, S(apiv2_keys), S(napiv2_keys), 0, 0,
	 NULL, NULL, "APIv2 key file for v2 XML notifications", 0, "APIv2 keys"},
	{"site", "wechatpay.v2_sign_type", PN_K_FLAGS, S(v2_sign_types), 0, 0, 0,
	 v2_sign_types, "MD5 HMAC-SHA256", "accepted v2 signature algorithms", 0, NULL},
	{"site", "wechatpay.platform_cert_files", PN_K_PUBKEYS, S(certs), S(ncerts), 0, 0, NULL,
	 NULL, "WeChat Pay platform certificate(s), chosen by Wechatpay-Serial; several = "
	 "rotation", 0, "platform certificate"},
	{"site", "wechatpay.platform_cert_dir", PN_K_PUBKEY_DIR, S(platform_cert_dir), S(ncerts),
	 0, (int64_t)S(certs), NULL, NULL, "a directory of platform certificates: every *.pem "
	 "in it is loaded as if listed in wechatpay.platform_cert_files; `paynotify "
	 "wechatpay-certificates --fetch` writes the downloaded, verified ones there "
	 "(wechatpay-platform-<serial>.pem), so rotation needs no manual step", 0, NULL},
	{"site", "wechatpay.public_key_id", PN_K_STR, S(public_key_id), 0, 0, 0, NULL, NULL,
	 "WeChat Pay public key id (PUB_KEY_ID_...)", PN_KEY_ID, "public key id"},
	{"site", "wechatpay.public_key_file", PN_K_PUBKEYS, S(public_keys), S(npublic_keys), 0,
	 0, NULL, NULL, "WeChat Pay public key (SPKI PEM)", 0, "public key"},
	{"site", "wechatpay.test_private_key_file", PN_K_PRIVKEY, S(test_key), 0, 0, 0, NULL,
	 NULL, "sandbox sites only: private key that `paynotify sign` signs v3 test "
	 "notifications with (it also enables signing v2 ones with the APIv2 key)", 0, NULL},
	{"site", "wechatpay.query_private_key_file", PN_K_PATH, S(query_key_path), 0, 0, 0,
	 NULL, NULL, "paynotify query: the merchant API private key (apiclient_key.pem) that "
	 "signs API v3 requests; read by the query command only, never by the receiver", 0,
	 NULL},
	{"site", "wechatpay.query_cert_serial", PN_K_STR, S(query_cert_serial), 0, 0, 0,
	 NULL, NULL, "paynotify query: serial number of the merchant API certificate "
	 "(serial_no in the Authorization header)", 0, NULL},
	{"site", "wechatpay.query_url", PN_K_URL, S(query_url), 0, 0, 0, NULL,
	 "https://api.mch.weixin.qq.com", "paynotify query: the WeChat Pay API (backup "
	 "domain: https://api2.mch.weixin.qq.com)", 0, NULL},
	{"site", "wechatpay.site_attach", PN_K_STR, S(site_attach), 0, 0, 0, NULL, NULL,
	 "the attach value every payment order of this site sets (1 to 64 letters, digits, "
	 "'.', '_', '~' or '-'), which WeChat Pay returns signed in the payment result (v3 "
	 "resource, v2 XML); required when several sites share one mchid, appid and key.  A "
	 "payment carrying another such site's attach is stored foreign_site, one without this "
	 "site's merchant_mismatch; neither is applied", 0, NULL},
	{"site", "wechatpay.tolerance_s", PN_K_INT, S(tolerance_s), 0, 1, 86400, NULL, "300",
	 "largest accepted distance of Wechatpay-Timestamp from now", 0, NULL},
};

/* "<api> key ID (line N) is LEN <unit> long; <fix>" for each of list[0..n) not 32 long. */
static void
wrong_length(const struct pn_cfg_check *c, enum pn_cfg_severity sev, const struct pn_secret *list,
	     size_t n, const char *api, const char *unit, const char *fix)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (list[i].len != 32)
			pn_cfg_site_finding(c, sev, "%s key %s (line %d) is %zu %s long; %s", api,
					    list[i].id, list[i].line, list[i].len, unit, fix);
}

/* API v3 (an APIv3 key and certificates or the public key) or API v2 (an APIv2 key). */
static void
validate(const struct pn_cfg_check *c)
{
	const struct pn_wechatpay_cfg *w = &c->site->wechatpay;
	bool	v3 = w->napiv3_keys > 0 || pn_cfg_key_failed(c, "wechatpay.apiv3_key_file");
	size_t	i;

	pn_cfg_require(c, v3 || w->napiv2_keys > 0, "wechatpay.apiv2_key_file",
		       "WeChat Pay needs wechatpay.apiv3_key_file (API v3) or "
		       "wechatpay.apiv2_key_file (API v2)");
	pn_cfg_require(c, (w->public_key_id == NULL) == (w->npublic_keys == 0)
		       || pn_cfg_key_failed(c, "wechatpay.public_key_id"),
		       "wechatpay.public_key_file",
		       "wechatpay.public_key_id and wechatpay.public_key_file go together");
	pn_cfg_require(c, !v3 || w->ncerts > 0 || w->npublic_keys > 0
		       || pn_cfg_key_failed(c, "wechatpay.public_key_file")
		       || pn_cfg_key_failed(c, "wechatpay.platform_cert_dir"),
		       "wechatpay.platform_cert_files", w->platform_cert_dir
		       ? "API v3 needs a platform certificate or wechatpay.public_key_file: "
		       "wechatpay.platform_cert_dir holds no *.pem yet (put the first certificate "
		       "there, from the merchant platform, or configure the public key: "
		       "paynotify wechatpay-certificates --fetch then keeps it current)"
		       : "API v3 needs wechatpay.platform_cert_files or wechatpay.public_key_file");
	wrong_length(c, PN_CFG_ERROR, w->apiv3_keys, w->napiv3_keys, "APIv3", "bytes",
		     "it must be exactly 32: copy the APIv3 key (32 characters) from the merchant "
		     "platform (API安全); it is not the APIv2 key");
	for (i = 0; i < w->ncerts; i++)
		if (w->certs[i].serial == NULL)
			pn_cfg_site_finding(c, PN_CFG_ERROR, "wechatpay.platform_cert_files must "
					    "name X.509 certificates (%s is a bare key: give it as "
					    "wechatpay.public_key_file with its "
					    "wechatpay.public_key_id)", w->certs[i].path);
	if ((w->query_key_path == NULL) != (w->query_cert_serial == NULL))
		pn_cfg_site_finding(c, PN_CFG_ERROR, "wechatpay.query_private_key_file and "
				    "wechatpay.query_cert_serial go together");
}

/* APIv2 keys are 32 characters; an APIv3 key is not also the APIv2 key. */
static void
secret_forms(const struct pn_cfg_check *c)
{
	const struct pn_wechatpay_cfg *w = &c->site->wechatpay;
	size_t	i, j;

	wrong_length(c, PN_CFG_SITE_ERROR, w->apiv2_keys, w->napiv2_keys, "APIv2", "characters",
		     "WeChat Pay's APIv2 keys are exactly 32: copy the whole key from the merchant "
		     "platform (API安全, API密钥)");
	for (i = 0; i < w->napiv3_keys; i++) {
		const struct pn_secret *v3 = &w->apiv3_keys[i];

		for (j = 0; j < w->napiv2_keys; j++) {
			const struct pn_secret *v2 = &w->apiv2_keys[j];

			if (v3->len == v2->len && pn_ct_equal(v3->data, v2->data, v2->len))
				pn_cfg_site_finding(c, PN_CFG_WARNING, "APIv3 key %s and APIv2 key "
						    "%s are the same key: they are two different "
						    "keys on the merchant platform; check that each "
						    "file holds its own", v3->id, v2->id);
		}
	}
}

static void
summary(const struct pn_site *s, char *buf, size_t size)
{
	snprintf(buf, size, "mchid %s, appid %s%s", s->wechatpay.mchid, s->wechatpay.appid,
		 s->wechatpay.test_key ? ", test signing key" : "");
}

/*
 * One mchid and appid, and a key both hold: API v3 (a platform certificate
 * or public key, and an APIv3 key: signature, then decryption) or API v2
 * (an APIv2 key).  A genuine notification then verifies and binds at both.
 */
static bool
same_identity(const struct pn_site *a, const struct pn_site *b, char *what, size_t size)
{
	const struct pn_wechatpay_cfg *x = &a->wechatpay, *y = &b->wechatpay;
	bool	v3, v2;

	if (x->mchid == NULL || y->mchid == NULL || strcmp(x->mchid, y->mchid) != 0
	    || x->appid == NULL || y->appid == NULL || strcmp(x->appid, y->appid) != 0)
		return false;
	v3 = (pn_cfg_pubkeys_overlap(x->certs, x->ncerts, y->certs, y->ncerts)
	      || pn_cfg_pubkeys_overlap(x->public_keys, x->npublic_keys, y->public_keys,
					y->npublic_keys))
	    && pn_cfg_secrets_overlap(x->apiv3_keys, x->napiv3_keys, y->apiv3_keys,
				      y->napiv3_keys);
	/* v2: the accepted sign types must meet (the notification's own
	 * sign_type picks within the site's set) */
	v2 = (x->v2_sign_types & y->v2_sign_types) != 0
	    && pn_cfg_secrets_overlap(x->apiv2_keys, x->napiv2_keys, y->apiv2_keys, y->napiv2_keys);
	if (!v3 && !v2)
		return false;
	snprintf(what, size, "mchid %s, appid %s and %s", x->mchid, x->appid,
		 v3 && v2 ? "their API v3 and v2 keys" : v3 ? "their API v3 keys"
		 : "an APIv2 key");
	return true;
}

const struct pn_cfg_provider pn_wechatpay_cfg_keys = {
	.prefix = "wechatpay",
	.title = "WeChat Pay",
	.configured_off = S(configured),
	.keys = keys,
	.nkeys = PN_ARRAY_LEN(keys),
	.private_not_public = "this is a private key (your merchant API key?), not WeChat Pay's "
	    "public key or platform certificate: download those from the merchant platform, and "
	    "keep the private key off the receiver",
	.validate = validate,
	.secret_forms = secret_forms,
	.summary = summary,
	.same_identity = same_identity,
	.marker_key = "wechatpay.site_attach",
	.marker_field = "attach",
};

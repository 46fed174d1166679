/*
 * cfg.h: the configuration file (contract: see README "Configuration").
 *
 * One INI file: [database], [limits], [log] and one [site NAME] per merchant
 * site with provider-prefixed keys.  Every key is declared once in the table
 * in cfg.c (name, type, bounds, documentation).  Loading validates
 * everything, reads every secret file (refusing files readable by group or
 * others) and parses every public key and certificate, so a running
 * receiver never touches the file system per request.  Errors name the file
 * and line.
 */
#ifndef PN_CFG_H
#define PN_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

#include "util.h"

/* A secret (HMAC key, API key), with the id recorded as key_id. */
struct pn_secret {
	char   *id;		/* "stripe-whsec:1": file base name and line */
	unsigned char *data;
	size_t	len;
};

/* A public key, possibly from an X.509 certificate. */
struct pn_pubkey {
	char   *id;		/* file base name */
	char   *path;
	EVP_PKEY *pkey;
	char   *serial;		/* certificate serial, upper-case hex; NULL for bare keys */
	time_t	not_after;	/* certificate expiry; 0 for bare keys */
};

enum pn_alipay_sign_type { PN_ALIPAY_RSA2 = 0, PN_ALIPAY_RSA = 1 };
enum pn_wxv2_sign { PN_WXV2_MD5 = 1, PN_WXV2_HMAC_SHA256 = 2 };
enum pn_2c2p_api { PN_2C2P_JWT = 0, PN_2C2P_REDIRECT = 1 };
enum pn_2c2p_hash { PN_2C2P_SHA1 = 0, PN_2C2P_SHA256 = 1 };
enum pn_2c2p_invoice { PN_2C2P_INVOICE_EMPTY = 0, PN_2C2P_INVOICE_ORDER_ID = 1 };
enum pn_stripe_mode { PN_STRIPE_LIVE = 0, PN_STRIPE_TEST = 1 };

struct pn_site {
	char   *name;
	const char *file;
	int	line;
	/*
	 * Loaded with PN_CFG_ISOLATE_SITES: why this site cannot serve ("file:
	 * line: reason": a key or secret file it names is unusable, or it is
	 * incomplete), else NULL.  A disabled site answers "retry later".
	 */
	char   *disabled;

	struct {
		bool	configured;
		char   *app_id;
		char   *seller_id;
		struct pn_pubkey *keys;		/* alipay.public_key_file (several: rotation) */
		size_t	nkeys;
		int	sign_type;		/* enum pn_alipay_sign_type */
		EVP_PKEY *test_key;		/* alipay.test_private_key_file (paynotify sign) */
	} alipay;

	struct {
		bool	configured;
		struct pn_secret *secrets;	/* stripe.secret_files, one per line */
		size_t	nsecrets;
		int64_t	tolerance_s;
		int	mode;			/* enum pn_stripe_mode: livemode events accepted */
		char   *site_metadata;	/* stripe.site_metadata "KEY=VALUE", or NULL */
		bool	test_signing;		/* stripe.test_signing (paynotify sign) */
	} stripe;

	struct {
		bool	configured;
		char   *mchid;
		char   *appid;
		struct pn_secret *apiv3_keys;	/* wechatpay.apiv3_key_file */
		size_t	napiv3_keys;
		struct pn_secret *apiv2_keys;	/* wechatpay.apiv2_key_file */
		size_t	napiv2_keys;
		unsigned v2_sign_types;		/* bit set of enum pn_wxv2_sign */
		struct pn_pubkey *certs;	/* wechatpay.platform_cert_files */
		size_t	ncerts;
		char   *public_key_id;		/* wechatpay.public_key_id */
		struct pn_pubkey *public_keys;	/* wechatpay.public_key_file */
		size_t	npublic_keys;
		int64_t	tolerance_s;
		EVP_PKEY *test_key;		/* wechatpay.test_private_key_file (paynotify sign) */
	} wechatpay;

	struct {
		bool	configured;
		char   *merchant_id;
		struct pn_secret *secrets;	/* 2c2p.secret_key_file */
		size_t	nsecrets;
		int	api;			/* enum pn_2c2p_api */
		int	redirect_hash;		/* enum pn_2c2p_hash */
		int	redirect_invoice_no;	/* enum pn_2c2p_invoice */
		bool	test_signing;		/* 2c2p.test_signing (paynotify sign) */
	} twoc2p;
};

struct pn_config {
	char   *path;
	/* [database] */
	char   *conninfo;
	int64_t	statement_timeout_ms;
	int64_t	connect_timeout_s;
	/* [limits] */
	int64_t	max_body_bytes;
	/* [log] */
	int64_t	log_level;		/* 0 quiet .. 2 debug */
	struct pn_site *sites;
	size_t	nsites;
};

/* Load and validate.  Returns NULL and fills err ("file:line: ...") on error. */
struct pn_config *pn_cfg_load(const char *path, struct pn_err *err) PN_WUR;

/*
 * PN_CFG_ISOLATE_SITES: an unusable key or secret file, or an incomplete
 * site, disables that site only (pn_site.disabled) instead of refusing the
 * whole file; syntax errors, unknown keys and secret files readable by
 * group or others stay fatal.  The receivers
 * load this way at start (one site's expired key must not make every site
 * answer 503); check-config, -t and reloads stay strict.
 */
#define PN_CFG_ISOLATE_SITES 0x1u
struct pn_config *pn_cfg_load_flags(const char *path, unsigned flags, struct pn_err *err) PN_WUR;
void pn_cfg_free(struct pn_config *cfg);	/* NULL-safe */

const struct pn_site *pn_cfg_site(const struct pn_config *cfg, const char *name);

/*
 * The site's stripe.site_metadata split at its first '=': *key (not
 * NUL-terminated at key_len) and the value after the '='.  false when the
 * site sets none or it is malformed (the loader refuses those).
 */
bool pn_cfg_stripe_marker(const struct pn_site *site, const char **key, size_t *key_len);

/* The path to use: -c FILE, else $PAYNOTIFY_CONFIG, else the built-in default. */
const char *pn_cfg_default_path(void);

/* Documentation of every key, for tests and `paynotify check-config`. */
struct pn_cfg_keydoc {
	const char *section;	/* "database", "limits", "log" or "site" */
	const char *key;
	const char *doc;
};
size_t pn_cfg_keydocs(const struct pn_cfg_keydoc **out);

#endif

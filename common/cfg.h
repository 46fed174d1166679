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

struct pn_site {
	char   *name;
	const char *file;
	int	line;

	struct {
		bool	configured;
		char   *app_id;
		char   *seller_id;
		struct pn_pubkey *keys;		/* alipay.public_key_file (several: rotation) */
		size_t	nkeys;
		int	sign_type;		/* enum pn_alipay_sign_type */
		EVP_PKEY *test_key;		/* alipay.test_private_key_file (paynotify sign) */
		char   *query_key_path;		/* alipay.query_private_key_file: path only */
		char   *query_url;		/* alipay.query_url (gateway) */
		char   *query_app_cert;		/* alipay.query_app_cert_file: path only */
		char   *query_root_cert;	/* alipay.query_root_cert_file: path only */
	} alipay;

	struct {
		bool	configured;
		struct pn_secret *secrets;	/* stripe.secret_files, one per line */
		size_t	nsecrets;
		int64_t	tolerance_s;
		bool	test_signing;		/* stripe.test_signing (paynotify sign) */
		char   *query_key_path;		/* stripe.query_key_file: path only */
		char   *query_url;		/* stripe.query_url */
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
		char   *query_key_path;		/* wechatpay.query_private_key_file: path only */
		char   *query_cert_serial;	/* wechatpay.query_cert_serial */
		char   *query_url;		/* wechatpay.query_url */
	} wechatpay;

	struct {
		bool	configured;
		char   *merchant_id;
		struct pn_secret *secrets;	/* 2c2p.secret_key_file */
		size_t	nsecrets;
		int	api;			/* enum pn_2c2p_api */
		int	redirect_hash;		/* enum pn_2c2p_hash */
		bool	test_signing;		/* 2c2p.test_signing (paynotify sign) */
		char   *query_url;		/* 2c2p.query_url */
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
	/* [query] (paynotify query only) */
	int64_t	query_connect_timeout_ms;
	int64_t	query_timeout_ms;
	char   *query_ca_file;		/* CA bundle for the providers' API hosts, or NULL */
	struct pn_site *sites;
	size_t	nsites;
};

/* Load and validate.  Returns NULL and fills err ("file:line: ...") on error. */
struct pn_config *pn_cfg_load(const char *path, struct pn_err *err) PN_WUR;
void pn_cfg_free(struct pn_config *cfg);	/* NULL-safe */

const struct pn_site *pn_cfg_site(const struct pn_config *cfg, const char *name);

/*
 * Is path a secret file we may read (a regular file, not accessible by
 * group or others)?  For the credentials that only `paynotify query`
 * loads: the configuration keeps their paths, never their bytes.
 */
bool pn_cfg_secret_file_ok(const char *path, struct pn_err *err) PN_WUR;

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

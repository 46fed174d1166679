/*
 * cfg.h: the configuration file (contract: see README "Configuration").
 *
 * One INI file: [database], [limits], [log], [metrics] and one [site NAME] per merchant
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

/*
 * Key ids, recorded with each notification as key_id: the file's base name
 * and the first 8 hex digits of the SHA-256 of the key material (the secret
 * bytes; a public key's DER SubjectPublicKeyInfo), e.g.
 * "stripe-whsec:3f9a1c2e".  Stable across rotations: a line added to or
 * removed from a secret file does not change what an id names.  (Ids stored
 * by earlier builds are positional: a secret's line number, "stripe-whsec:1",
 * and a public key's bare base name; see pn_cfg_site_key_state().)
 */
#define PN_KEY_FP_HEX 8

/* A secret (HMAC key, API key), with the id recorded as key_id. */
struct pn_secret {
	char   *id;		/* "stripe-whsec:3f9a1c2e": file base name and fingerprint */
	unsigned char *data;
	size_t	len;
	int	line;		/* line in its file, for messages (0: not from a file) */
};

/* A public key, possibly from an X.509 certificate. */
struct pn_pubkey {
	char   *id;		/* "alipay-public.pem:1c2d3e4f": base name and fingerprint */
	char   *path;
	EVP_PKEY *pkey;
	char   *serial;		/* certificate serial, upper-case hex; NULL for bare keys */
	time_t	not_after;	/* certificate expiry; 0 for bare keys */
};

/* An address or network of an address list ([log] trusted_proxies, [metrics] allow). */
struct pn_addr {
	int	family;			/* AF_INET or AF_INET6 */
	unsigned char bytes[16];	/* network byte order; 4 used for AF_INET */
	unsigned bits;			/* prefix length: 32 / 128 for one address */
};

enum pn_fwd_header { PN_FWD_X_FORWARDED_FOR = 0, PN_FWD_FORWARDED = 1 };

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
		int	mode;			/* enum pn_stripe_mode: livemode events accepted */
		char   *site_metadata;	/* stripe.site_metadata "KEY=VALUE", or NULL */
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
		int	redirect_invoice_no;	/* enum pn_2c2p_invoice */
		bool	test_signing;		/* 2c2p.test_signing (paynotify sign) */
		char   *query_url;		/* 2c2p.query_url */
	} twoc2p;
};

/* A file the configuration reads (itself, secrets, keys), for check-config. */
struct pn_cfg_file {
	char   *path;
	int	line;		/* the line of the configuration that names it; 0: the file itself */
	bool	secret;		/* a secret or private key (mode 0600 expected) */
};

struct pn_config {
	char   *path;
	struct pn_cfg_file *files;
	size_t	nfiles;
	/* [database] */
	char   *conninfo;
	int64_t	statement_timeout_ms;
	int64_t	connect_timeout_s;
	bool	prepared_statements;	/* off: unnamed ingest, SET LOCAL-style timeout */
	/* [limits] */
	int64_t	max_body_bytes;
	int64_t	read_timeout_ms;	/* a request's headers and body, whole */
	/* [log] */
	int64_t	log_level;		/* 0 quiet .. 2 debug */
	struct pn_addr *trusted_proxies;	/* whose forwarded-for header is logged */
	size_t	ntrusted_proxies;
	int	forwarded_header;	/* enum pn_fwd_header */
	/* [metrics] */
	char   *status_path;		/* NULL: no status path */
	struct pn_addr *status_allow;	/* REMOTE_ADDRs the status path answers */
	size_t	nstatus_allow;
	/* [query] (paynotify query only) */
	int64_t	query_connect_timeout_ms;
	int64_t	query_timeout_ms;
	char   *query_ca_file;		/* CA bundle for the providers' API hosts, or NULL */
	struct pn_site *sites;
	size_t	nsites;
};

/*
 * What loading found.  Severity:
 *   PN_CFG_ERROR       the configuration cannot be loaded (syntax, a file that
 *                      cannot be read, a key missing): receivers refuse it
 *                      (start-up exits 78, a reload keeps the old one)
 *   PN_CFG_SITE_ERROR  it loads, but one site can never verify anything (a
 *                      Stripe API key where the webhook signing secret
 *                      belongs): check-config fails; receivers log it at error
 *                      level and serve the other sites (refusing the whole
 *                      file would turn away every site's notifications)
 *   PN_CFG_WARNING     worth a look, works (an unusual key form)
 */
enum pn_cfg_severity { PN_CFG_ERROR, PN_CFG_SITE_ERROR, PN_CFG_WARNING };

struct pn_cfg_finding {
	enum pn_cfg_severity severity;
	char   *file;		/* NULL when not about a place in the file */
	int	line;
	char   *msg;		/* lower case, names the site and key, says the fix */
};

struct pn_cfg_findings {
	struct pn_cfg_finding *v;
	size_t	n;
};

void pn_cfg_finding_add(struct pn_cfg_findings *f, enum pn_cfg_severity severity,
			const char *file, int line, const char *fmt, ...) PN_PRINTF(5, 6);
size_t pn_cfg_findings_count(const struct pn_cfg_findings *f, enum pn_cfg_severity severity);
/* "file:line: msg" (or msg) into a malloc'd string. */
char *pn_cfg_finding_text(const struct pn_cfg_finding *fi);
void pn_cfg_findings_free(struct pn_cfg_findings *f);	/* the entries; f itself is the caller's */

/*
 * Load and validate, collecting every finding into out (which starts
 * zeroed; the caller frees it).  NULL when there is any PN_CFG_ERROR.
 */
struct pn_config *pn_cfg_load_all(const char *path, struct pn_cfg_findings *out) PN_WUR;

/*
 * Load for a receiver: NULL on any PN_CFG_ERROR with err = the first one
 * ("file:line: ...", and how many more); site errors are logged at error
 * level and warnings at info level, each time the file is loaded.
 */
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

/* Is the textual address (REMOTE_ADDR) in the list?  IPv4-mapped IPv6
 * addresses (::ffff:a.b.c.d) match IPv4 entries.  NULL or unparsable: no. */
bool pn_addr_match(const struct pn_addr *list, size_t n, const char *text);
/*
 * Is the key that key_id names (as stored with a notification) still among
 * the site's keys?  key_id may be composite ("sig/aes", WeChat Pay v3).
 */
enum pn_key_state {
	PN_KEY_CONFIGURED,	/* every part names a configured key */
	PN_KEY_GONE,		/* some part names a key that is no longer configured */
	PN_KEY_UNKNOWN,		/* an id from before fingerprints whose file is still
				 * configured: what it named cannot be told */
};
enum pn_key_state pn_cfg_site_key_state(const struct pn_site *s, const char *key_id);

/*
 * The site's stripe.site_metadata split at its first '=': *key (not
 * NUL-terminated at key_len) and the value after the '='.  false when the
 * site sets none or it is malformed (the loader refuses those).
 */
bool pn_cfg_stripe_marker(const struct pn_site *site, const char **key, size_t *key_len);

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
	const char *section;	/* "database", "limits", "log", "metrics" or "site" */
	const char *key;
	const char *doc;
};
size_t pn_cfg_keydocs(const struct pn_cfg_keydoc **out);

#endif

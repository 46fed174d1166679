/*
 * cfg.h: the configuration file (contract: see README "Configuration").
 *
 * One INI file: [database], [limits], [log], [metrics] and one [site NAME] per merchant
 * site with provider-prefixed keys.  Every key is declared once (name, type,
 * bounds, default, documentation, required): the sections' in cfg.c, each
 * provider's in webhooks/<provider>_cfg.c (listed in providers_cfg.h, see
 * struct pn_cfg_provider below).  Loading validates
 * everything, reads every secret file (refusing files readable by group or
 * others) and parses every public key and certificate, so a running
 * receiver never touches the file system per request.  Errors name the file
 * and line.  The loader is cfg.c with ini.c (the INI reader), cfg_keyfile.c
 * (key and secret files), cfg_check.c (the sites' checks), cfg_findings.c
 * and addr.c (address lists).
 */
#ifndef PN_CFG_H
#define PN_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <openssl/evp.h>

#include "addr.h"
#include "cfg_findings.h"
#include "cfg_keyfile.h"
#include "util.h"

enum pn_fwd_header { PN_FWD_X_FORWARDED_FOR = 0, PN_FWD_FORWARDED = 1 };

/* The providers' own settings (webhooks/<provider>_cfg.h), one member each. */
struct pn_site;
#include "providers_cfg.h"

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
	/* site->alipay, site->stripe, site->wechatpay, site->twoc2p, ... */
#define PN_CFG_SITE_MEMBER(member) struct pn_##member##_cfg member;
	PN_CFG_PROVIDERS(PN_CFG_SITE_MEMBER)
#undef PN_CFG_SITE_MEMBER
};

/* A file the configuration reads (itself, secrets, keys), for check-config. */
struct pn_cfg_file {
	char   *path;
	int	line;		/* the line of the configuration that names it; 0: the file itself */
	bool	secret;		/* a secret or private key (mode 0600, or root:paynotify 0640) */
	const char *from;	/* the configuration file that names it (a configuration
				 * file: itself) */
};

/* The include directory beside the main file: every *.conf in it is read after it. */
#define PN_CFG_INCLUDE_DIR "conf.d"

struct pn_config {
	char   *path;
	struct pn_cfg_file *files;
	size_t	nfiles;
	/* [database] */
	char   *conninfo;		/* the receivers' */
	char   *admin_conninfo;	/* the admin commands'; NULL: conninfo */
	char   *owner_conninfo;	/* migrate's; NULL: admin_conninfo, else conninfo */
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
	/* how long `query --due` follows an order up, per provider, in hours */
	int64_t	query_follow_up_alipay_h;
	int64_t	query_follow_up_wechatpay_h;
	int64_t	query_follow_up_stripe_h;
	int64_t	query_follow_up_2c2p_h;
	struct pn_site *sites;
	size_t	nsites;
};

/* What loading found: struct pn_cfg_findings (cfg_findings.h). */

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
 * whole file; syntax errors, unknown keys and secret files whose owner or
 * mode is refused (readable by others, by a group that is not the
 * receivers') stay fatal.  The receivers
 * load this way at start (one site's expired key must not make every site
 * answer 503); check-config, -t and reloads stay strict.
 */
#define PN_CFG_ISOLATE_SITES 0x1u
/* PN_CFG_NO_SITES: a configuration without any [site] is no error (paynotify
 * migrate, which needs only [database], may run before the sites are set). */
#define PN_CFG_NO_SITES 0x2u
/*
 * PN_CFG_RECEIVER: loading for a receiver.  The keys only the `paynotify`
 * command uses (PN_K_PRIVKEY: alipay. and wechatpay.test_private_key_file,
 * which `paynotify sign` signs test notifications with) are known and
 * ignored: the key is accepted where it is (a shared file validates in
 * both), and its file must still pass pn_cfg_secret_file_ok() (a private
 * key beside the receivers' secrets readable by others is refused
 * everywhere), but it is never opened: the site's EVP_PKEY stays NULL.
 */
#define PN_CFG_RECEIVER 0x4u
struct pn_config *pn_cfg_load_all_flags(const char *path, unsigned flags,
					struct pn_cfg_findings *out) PN_WUR;
struct pn_config *pn_cfg_load_flags(const char *path, unsigned flags, struct pn_err *err) PN_WUR;
void pn_cfg_free(struct pn_config *cfg);	/* NULL-safe */

const struct pn_site *pn_cfg_site(const struct pn_config *cfg, const char *name);

/* The conninfo the admin commands use (admin_conninfo, else conninfo), and
 * migrate's (owner_conninfo, else the admin commands'). */
const char *pn_cfg_admin_conninfo(const struct pn_config *cfg);
const char *pn_cfg_owner_conninfo(const struct pn_config *cfg);

/* The path to use: -c FILE, else $PAYNOTIFY_CONFIG, else the built-in default. */
const char *pn_cfg_default_path(void);

/* Documentation of every key, for tests and `paynotify check-config`. */
struct pn_cfg_keydoc {
	const char *section;	/* "database", "limits", "log", "metrics" or "site" */
	const char *key;
	const char *doc;
};
size_t pn_cfg_keydocs(const struct pn_cfg_keydoc **out);


/* ---- declaring keys ------------------------------------------------------
 * cfg.c declares [database], [limits], [log], [metrics] and [query]; each
 * provider declares its own "<prefix>.*" site keys and its checks in
 * webhooks/<provider>_cfg.c, listed once in webhooks/providers_cfg.h.
 * Everything else (parsing, defaults, files, "is required", freeing,
 * key-id lookup, documentation, check-config's listing) is done here from
 * the declarations.
 */
enum pn_cfg_type {
	PN_K_STR,	/* char * */
	PN_K_INT,	/* int64_t, bounded */
	PN_K_CHOICE,	/* int, one word of a choice list */
	PN_K_FLAGS,	/* unsigned, several words of a choice list */
	PN_K_SECRETS,	/* struct pn_secret * + size_t count: secret files, one secret a line */
	PN_K_PUBKEYS,	/* struct pn_pubkey * + size_t count: key or certificate files */
	PN_K_PRIVKEY,	/* EVP_PKEY *: a private key file (test signing only: loaded by
			 * the paynotify command, never by a receiver: PN_CFG_RECEIVER) */
	PN_K_BOOL,	/* bool: on/off */
	PN_K_ADDRS,	/* struct pn_addr * + size_t count: addresses, ADDR or ADDR/BITS */
	PN_K_URLPATH,	/* char *: an absolute URL path outside /notify/ */
	PN_K_PATH,	/* char *: a file path, resolved but never opened here (the
			 * credentials only `paynotify query` loads) */
	PN_K_URL,	/* char *: an https:// URL */
	PN_K_PUBKEY_DIR,	/* char *: a directory (kept, resolved); every "*.pem" file
				 * in it (not starting with '.', in name order) is loaded
				 * and appended to a PN_K_PUBKEYS list: max = that list's
				 * offset, count_off its count, min its fewest RSA bits.
				 * An empty directory adds nothing (wechatpay.
				 * platform_cert_dir, which `paynotify
				 * wechatpay-certificates --fetch` fills) */
};

struct pn_cfg_choice {
	const char *word;
	int	value;
};

/* pn_cfg_keydef.flags */
#define PN_KEY_REQUIRED	0x1u	/* a provider configured for a site needs it */
#define PN_KEY_ID	0x2u	/* PN_K_STR naming a key: key ids may carry it */
#define PN_KEY_WIPE	0x4u	/* PN_K_STR wiped when freed (it may hold a password) */

struct pn_cfg_keydef {
	const char *section;	/* database, limits, log, metrics, query, site */
	const char *key;
	enum pn_cfg_type type;
	size_t	off;		/* into struct pn_config, or struct pn_site for "site" */
	size_t	count_off;	/* PN_K_SECRETS, PN_K_PUBKEYS, PN_K_ADDRS: the size_t count */
	int64_t	min, max;	/* PN_K_INT; PN_K_PUBKEYS: min = fewest RSA bits (0: 2048);
				 * PN_K_PUBKEY_DIR: above */
	const struct pn_cfg_choice *choices;	/* PN_K_CHOICE, PN_K_FLAGS */
	const char *def;	/* default, as text; NULL for none */
	const char *doc;
	unsigned flags;		/* PN_KEY_* */
	const char *show;	/* check-config lists it under this label; NULL: not */
};

#define PN_CFG_SITE_OFF(field) offsetof(struct pn_site, field)

/* What a provider's checks of one site get (validate, secret_forms). */
struct pn_cfg_check {
	const struct pn_site *site;
	struct pn_cfg_findings *fd;
	const struct pn_cfg_provider *provider;
	uint64_t failed;	/* bit i: provider->keys[i] was given and refused */
};

/*
 * One provider's configuration: its keys, when it is configured (a site sets
 * any "<prefix>." key), and what only it knows.
 */
struct pn_cfg_provider {
	const char *prefix;	/* "2c2p": its keys are "2c2p.*", check-config's label */
	const char *title;	/* "2C2P": "2c2p.merchant_id is required for 2C2P" */
	size_t	configured_off;	/* the bool in struct pn_site */
	const struct pn_cfg_keydef *keys;
	size_t	nkeys;
	/* A private key given where its public keys belong: what to say. */
	const char *private_not_public;
	/* After the PN_KEY_REQUIRED checks of a configured site; NULL: none. */
	void	(*validate)(const struct pn_cfg_check *c);
	/* Secrets in a form that cannot (or should not) verify; NULL: none. */
	void	(*secret_forms)(const struct pn_cfg_check *c);
	/* check-config: the line after "  <prefix>: " (no newline). */
	void	(*summary)(const struct pn_site *s, char *buf, size_t size);
	/* check-config: "WARNING: ..." lines about every site; how many. NULL: none. */
	int	(*warnings)(const struct pn_config *cfg, FILE *out);
	/*
	 * Several sites on one identity (README "Several sites on one
	 * provider account"): would a genuine notification that verifies and
	 * binds at site a also verify and bind at site b (a key or secret both
	 * hold and the same signed identity)?  what: the shared identity, for
	 * the message ("merchant_id JT01 and a secret key").  NULL: no check.
	 */
	bool	(*same_identity)(const struct pn_site *a, const struct pn_site *b, char *what,
				 size_t size);
	/*
	 * The site marker key (a PN_K_STR of this provider): "FIELD=VALUE"
	 * when marker_fields lists the signed fields it may name (NULL-ended),
	 * else the whole VALUE of the one field marker_field.  NULL: none.
	 * Parsed by pn_cfg_marker().
	 */
	const char *marker_key;
	const char *const *marker_fields;
	const char *marker_field;
	/* Are the two markers' values told apart (the loader checks the fields
	 * are the same)?  NULL: the values differ. */
	bool	(*markers_distinct)(const struct pn_site *a, const char *va,
				    const struct pn_site *b, const char *vb);
	/* Site keys of a program, not of a provider (confirm.*): setting them
	 * does not make a site "configure a provider". */
	bool	not_a_provider;
};

/*
 * A site's marker for provider p (the value of p->marker_key): the signed
 * merchant-defined field it names and the value a notification for this
 * site carries there.  false: the site sets none (or p has no marker), or
 * it is malformed (the loader refuses those).  Strings point into the
 * configuration; field is NUL-terminated only at field_len.
 */
struct pn_cfg_marker {
	const char *field;
	size_t	field_len;
	const char *value;
};
bool pn_cfg_marker(const struct pn_site *s, const struct pn_cfg_provider *p,
		   struct pn_cfg_marker *out);
/* Marker values of the providers other than Stripe: 1 to 64 of
 * [A-Za-z0-9._~-] (URL-encoding leaves them as they are). */
#define PN_CFG_MARKER_MAX 64
/* Do the two lists share a secret (the same bytes)? */
bool pn_cfg_secrets_overlap(const struct pn_secret *a, size_t na, const struct pn_secret *b,
			    size_t nb);
/* Do the two lists share a public key? */
bool pn_cfg_pubkeys_overlap(const struct pn_pubkey *a, size_t na, const struct pn_pubkey *b,
			    size_t nb);

/* Every provider, in the order of webhooks/providers_cfg.h; NULL last. */
extern const struct pn_cfg_provider *const pn_cfg_providers[];

bool pn_cfg_configured(const struct pn_site *s, const struct pn_cfg_provider *p);
/* The value of a site's PN_K_STR, PN_K_PATH or PN_K_URL key "prefix.name"; NULL if unset. */
const char *pn_cfg_site_str(const struct pn_site *s, const char *prefix, const char *name);
/* A site key's field, and its count (PN_K_SECRETS, PN_K_PUBKEYS). */
const void *pn_cfg_site_field(const struct pn_site *s, const struct pn_cfg_keydef *kd);
size_t pn_cfg_site_count(const struct pn_site *s, const struct pn_cfg_keydef *kd);

/* For the provider checks: was key (its full name) given and refused? */
bool pn_cfg_key_failed(const struct pn_cfg_check *c, const char *key);
/* A finding at the site's [site] line: "site \"NAME\": ...". */
void pn_cfg_site_finding(const struct pn_cfg_check *c, enum pn_cfg_severity sev,
			 const char *fmt, ...) PN_PRINTF(3, 4);
/* Unless ok or key was refused (its own error said why): an error saying what. */
void pn_cfg_require(const struct pn_cfg_check *c, bool ok, const char *key, const char *what);

#endif

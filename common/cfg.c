/*
 * cfg.c: the configuration, declared once in a table: the keys of the
 * sections and the providers' site keys, each value assigned to its
 * setting, defaults, conf.d/, freeing, lookups.  The INI reader is ini.c,
 * the key and secret files cfg_keyfile.c, the checks of the sites
 * cfg_check.c, the findings cfg_findings.c, address lists addr.c.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cfg.h"
#include "cfg_check.h"
#include "cfg_keyfile.h"
#include "crypto.h"
#include "ini.h"

#ifndef PN_DEFAULT_CONFIG
#define PN_DEFAULT_CONFIG "/etc/paynotify/paynotify.conf"
#endif

#define CFG_MAX_FILE (1024 * 1024)
#define HTTPS_PREFIX "https:/" "/"	/* split: the source checks strip // comments */

static const struct pn_cfg_choice fwd_headers[] = {
	{"X-Forwarded-For", PN_FWD_X_FORWARDED_FOR}, {"Forwarded", PN_FWD_FORWARDED}, {NULL, 0}};

#define C(field) offsetof(struct pn_config, field)

/* The sections other than [site]; the site keys are the providers' (providers_cfg.h). */
static const struct pn_cfg_keydef keydefs[] = {
	{"database", "conninfo", PN_K_STR, C(conninfo), 0, 0, 0, NULL, NULL,
	 "libpq connection string; PGHOST, PGPORT, PGUSER, ... fill what it leaves out",
	 PN_KEY_WIPE, NULL},
	{"database", "admin_conninfo", PN_K_STR, C(admin_conninfo), 0, 0, 0, NULL, NULL,
	 "libpq connection string of the admin commands (paynotify check-config, replay, report, "
	 "resolve, stats, purge, query, reconcile), e.g. user=paynotify_ops; unset: conninfo",
	 PN_KEY_WIPE, NULL},
	{"database", "owner_conninfo", PN_K_STR, C(owner_conninfo), 0, 0, 0, NULL, NULL,
	 "libpq connection string of paynotify migrate (the schema's owner, e.g. "
	 "user=paynotify_owner); unset: admin_conninfo, else conninfo", PN_KEY_WIPE, NULL},
	{"database", "statement_timeout_ms", PN_K_INT, C(statement_timeout_ms), 0, 100, 60000, NULL,
	 "3000", "statement_timeout for the ingest transaction; keep it well inside the "
	 "providers' deadlines (WeChat Pay gives up after 5 s)", 0, NULL},
	{"database", "connect_timeout_s", PN_K_INT, C(connect_timeout_s), 0, 1, 60, NULL, "2",
	 "libpq connect_timeout", 0, NULL},
	{"database", "prepared_statements", PN_K_BOOL, C(prepared_statements), 0, 0, 0, NULL, "on",
	 "on: ingest is a named prepared statement and statement_timeout a session setting; "
	 "off: an unnamed statement with statement_timeout set per transaction (pgbouncer "
	 "pool_mode = transaction)", 0, NULL},
	{"limits", "max_body_bytes", PN_K_INT, C(max_body_bytes), 0, 1024, 16 * 1024 * 1024, NULL,
	 "1048576", "largest request body accepted; larger bodies get 413", 0, NULL},
	{"limits", "read_timeout_ms", PN_K_INT, C(read_timeout_ms), 0, 100, 20000, NULL, "2000",
	 "a request's FastCGI records (parameters and body) or CGI body must arrive whole within "
	 "this; a slower one is dropped (408 when an answer can still be written), so slow "
	 "clients cannot hold the workers; stays well under the providers' 5 s and the 30 s "
	 "stop grace", 0, NULL},
	{"log", "level", PN_K_INT, C(log_level), 0, 0, 2, NULL, "1",
	 "0: errors and rejected requests only, 1: one line per request, 2: debug", 0, NULL},
	{"log", "trusted_proxies", PN_K_ADDRS, C(trusted_proxies), C(ntrusted_proxies), 0, 0, NULL,
	 NULL, "proxies (ADDR or ADDR/BITS) whose forwarded-for header is logged as forwarded_for; "
	 "unset: never logged", 0, NULL},
	{"log", "forwarded_header", PN_K_CHOICE, C(forwarded_header), 0, 0, 0, fwd_headers,
	 "X-Forwarded-For", "the header a trusted proxy sets: X-Forwarded-For or Forwarded", 0, NULL},
	{"metrics", "status_path", PN_K_URLPATH, C(status_path), 0, 0, 0, NULL, NULL,
	 "GET path (or path/<provider>) answered with live counters in Prometheus text format by "
	 "FastCGI receivers; unset: no status path", 0, NULL},
	{"metrics", "allow", PN_K_ADDRS, C(status_allow), C(nstatus_allow), 0, 0, NULL,
	 "127.0.0.1 ::1", "REMOTE_ADDRs (ADDR or ADDR/BITS) the status path answers; others get 403",
	 0, NULL},
	{"query", "connect_timeout_ms", PN_K_INT, C(query_connect_timeout_ms), 0, 100, 60000, NULL,
	 "3000", "paynotify query: largest time to connect to a provider's API (TCP and TLS)", 0, NULL},
	{"query", "timeout_ms", PN_K_INT, C(query_timeout_ms), 0, 100, 120000, NULL, "10000",
	 "paynotify query: largest time for one whole request to a provider's API", 0, NULL},
	{"query", "ca_file", PN_K_PATH, C(query_ca_file), 0, 0, 0, NULL, NULL,
	 "paynotify query: CA bundle (PEM) the providers' API certificates are verified "
	 "against, instead of the system's; peer and host are always verified", 0, NULL},
	{"query", "follow_up_alipay_hours", PN_K_INT, C(query_follow_up_alipay_h), 0, 1, 2160, NULL,
	 "25", "paynotify query --due: how long after an Alipay order was created it is still "
	 "asked about (at least the orders' timeout_express)", 0, NULL},
	{"query", "follow_up_wechatpay_hours", PN_K_INT, C(query_follow_up_wechatpay_h), 0, 1, 2160,
	 NULL, "25", "paynotify query --due: the same for WeChat Pay (at least the orders' "
	 "time_expire; also a refund waiting for its confirmation)", 0, NULL},
	{"query", "follow_up_stripe_hours", PN_K_INT, C(query_follow_up_stripe_h), 0, 1, 2160, NULL,
	 "72", "paynotify query --due: the same for Stripe", 0, NULL},
	{"query", "follow_up_2c2p_hours", PN_K_INT, C(query_follow_up_2c2p_h), 0, 1, 2160, NULL,
	 "72", "paynotify query --due: the same for 2C2P (at least the orders' paymentExpiry)",
	 0, NULL},
};
/* A section holds at most CFG_MAX_KEYS keys: parser.seen; the site keys of every
 * provider together, too: one bit each in parser.failed (pn_cfg_pn_cfg_site_key_bit()). */
#define CFG_MAX_KEYS PN_CFG_MAX_KEYS
_Static_assert(PN_ARRAY_LEN(keydefs) <= CFG_MAX_KEYS, "parser.seen holds 64 keys");

#define CFG_PROVIDER_DECL(member) &pn_##member##_cfg_keys,
const struct pn_cfg_provider *const pn_cfg_providers[] = {
	PN_CFG_PROVIDERS(CFG_PROVIDER_DECL)
	NULL,
};
#undef CFG_PROVIDER_DECL

/* ---- the providers' declarations ----------------------------------------- */

/* The provider whose "<prefix>." starts key; NULL if none. */
static const struct pn_cfg_provider *
provider_of(const char *key)
{
	const struct pn_cfg_provider *const *p;

	for (p = pn_cfg_providers; *p; p++) {
		size_t	n = strlen((*p)->prefix);

		if (strncmp(key, (*p)->prefix, n) == 0 && key[n] == '.')
			return *p;
	}
	return NULL;
}

/* The key named key of section; *prov: its provider (site keys), else NULL. */
static const struct pn_cfg_keydef *
find_key(const char *section, const char *key, const struct pn_cfg_provider **prov)
{
	const struct pn_cfg_keydef *kd, *end;

	*prov = NULL;
	if (strcmp(section, "site") == 0) {
		if ((*prov = provider_of(key)) == NULL)
			return NULL;
		kd = (*prov)->keys;
		end = kd + (*prov)->nkeys;
	} else {
		kd = keydefs;
		end = keydefs + PN_ARRAY_LEN(keydefs);
	}
	for (; kd < end; kd++)
		if (strcmp(kd->section, section) == 0 && strcmp(kd->key, key) == 0)
			return kd;
	return NULL;
}

bool
pn_cfg_configured(const struct pn_site *s, const struct pn_cfg_provider *p)
{
	return *(const bool *)((const char *)s + p->configured_off);
}

const void *
pn_cfg_site_field(const struct pn_site *s, const struct pn_cfg_keydef *kd)
{
	return (const char *)s + kd->off;
}

size_t
pn_cfg_site_count(const struct pn_site *s, const struct pn_cfg_keydef *kd)
{
	if (kd->type != PN_K_SECRETS && kd->type != PN_K_PUBKEYS)
		return 0;
	return *(const size_t *)((const char *)s + kd->count_off);
}

const char *
pn_cfg_site_str(const struct pn_site *s, const char *prefix, const char *name)
{
	const struct pn_cfg_provider *prov;
	const struct pn_cfg_keydef *kd;
	char	key[128];

	snprintf(key, sizeof(key), "%s.%s", prefix, name);
	kd = find_key("site", key, &prov);
	if (kd == NULL || !(kd->type == PN_K_STR || kd->type == PN_K_PATH || kd->type == PN_K_URL))
		return NULL;
	return *(char *const *)pn_cfg_site_field(s, kd);
}

/* ---- helpers ------------------------------------------------------------- */

struct parser {
	const char *path;
	char   *dir;		/* directory of the config file, for relative paths */
	int	line;
	struct pn_config *cfg;
	struct pn_cfg_findings *fd;
	struct pn_site *site;	/* current [site] section, or NULL */
	const char *section;	/* current section kind (the INI reader skips the keys of
				 * a refused header) */
	/* keys seen in the current [site] section, to refuse duplicates */
	const char *seen[CFG_MAX_KEYS];
	size_t	nseen;
	/* where each key of the other sections was set (keydefs index), in any
	 * file: a key set twice is refused, naming both places */
	const char *set_file[CFG_MAX_KEYS];
	int	set_line[CFG_MAX_KEYS];
	uint64_t *failed;	/* per site (same index): site keys whose value was refused,
				 * one bit each (pn_cfg_site_key_bit()) */
	bool	isolate;	/* a site's key-material error disables that site only */
	bool	receiver;	/* PN_CFG_RECEIVER: the paynotify command's keys are not loaded */
};

static char *
resolve_path(const struct parser *p, const char *file)
{
	if (file[0] == '/')
		return pn_xstrdup(file);
	return pn_xasprintf("%s/%s", p->dir, file);
}

/* Record a file the configuration reads; returns its stored path (which lives
 * as long as the configuration). */
static const char *
add_file(struct parser *p, const char *path, bool secret)
{
	struct pn_config *cfg = p->cfg;
	struct pn_cfg_file *f;

	cfg->files = pn_xrealloc(cfg->files, (cfg->nfiles + 1) * sizeof(*cfg->files));
	f = &cfg->files[cfg->nfiles++];
	f->path = pn_xstrdup(path);
	f->line = p->line;
	f->secret = secret;
	f->from = p->path;	/* the configuration file naming it (itself: its own path) */
	return f->path;
}

/* What to say when a public key's file holds a private key: the provider's sentence. */
static const char *
private_not_public(const struct pn_cfg_keydef *kd)
{
	const struct pn_cfg_provider *prov = provider_of(kd->key);

	return prov ? prov->private_not_public : NULL;
}

/* pn_cfg_load_pubkey_dir()'s record: a public key file of the directory. */
static void
record_pubkey_file(void *ctx, const char *path)
{
	add_file(ctx, path, false);
}

/* PN_K_PUBKEY_DIR: every *.pem of dir, in name order, onto the list at kd->max. */
static bool
load_pubkey_dir(struct parser *p, const struct pn_cfg_keydef *kd, void *base, const char *dir,
		struct pn_err *err)
{
	struct pn_pubkey **list = (struct pn_pubkey **)((char *)base + kd->max);
	size_t *count = (size_t *)((char *)base + kd->count_off);
	int	min_bits = kd->min > 0 ? (int)kd->min : PN_RSA_MIN_BITS;

	return pn_cfg_load_pubkey_dir(dir, kd->key, min_bits, private_not_public(kd), list, count,
				      p ? record_pubkey_file : NULL, p, err);
}

static bool
choice_value(const struct pn_cfg_choice *c, const char *word, int *out)
{
	for (; c->word; c++)
		if (strcmp(c->word, word) == 0) {
			*out = c->value;
			return true;
		}
	return false;
}

static void
choice_list(const struct pn_cfg_choice *c, char *buf, size_t sz)
{
	size_t used = 0;

	buf[0] = '\0';
	for (; c->word; c++) {
		int n = snprintf(buf + used, sz - used, "%s%s", used ? ", " : "", c->word);

		if (n < 0 || (size_t)n >= sz - used)
			break;
		used += (size_t)n;
	}
}

/*
 * Assigning a value to a key: one function per type (the key's field is
 * base + kd->off).  p is NULL for a built-in default (apply_defaults()):
 * paths then stay as they are and key files cannot be named.
 */
#define FIELD(kd, base) ((char *)(base) + (kd)->off)

static bool
empty_value(const struct pn_cfg_keydef *kd, const char *value, struct pn_err *err)
{
	if (*value != '\0')
		return false;
	pn_err_set(err, "empty value for \"%s\"", kd->key);
	return true;
}

/* Replace the string in *field with copy (malloc'd: the field owns it). */
static void
set_string(char *field, char *copy)
{
	free(*(char **)field);
	*(char **)field = copy;
}

/* PN_K_STR */
static bool
assign_str(const struct pn_cfg_keydef *kd, void *base, char *value, struct pn_err *err)
{
	if (empty_value(kd, value, err))
		return false;
	set_string(FIELD(kd, base), pn_xstrdup(value));
	return true;
}

/* PN_K_INT: within [min, max] */
static bool
assign_int(const struct pn_cfg_keydef *kd, void *base, const char *value, struct pn_err *err)
{
	int64_t v;

	if (!pn_parse_i64(value, &v) || v < kd->min || v > kd->max) {
		pn_err_set(err, "invalid value \"%s\" for \"%s\": expected an integer from "
			   "%lld to %lld", value, kd->key, (long long)kd->min, (long long)kd->max);
		return false;
	}
	*(int64_t *)FIELD(kd, base) = v;
	return true;
}

/* PN_K_CHOICE: one word of the choices */
static bool
assign_choice(const struct pn_cfg_keydef *kd, void *base, const char *value, struct pn_err *err)
{
	char	opts[128];

	if (choice_value(kd->choices, value, (int *)FIELD(kd, base)))
		return true;
	choice_list(kd->choices, opts, sizeof(opts));
	pn_err_set(err, "invalid value \"%s\" for \"%s\": expected one of %s", value, kd->key,
		   opts);
	return false;
}

/* PN_K_FLAGS: some words of the choices, at least one */
static bool
assign_flags(const struct pn_cfg_keydef *kd, void *base, char *value, struct pn_err *err)
{
	unsigned flags = 0;
	char   *w, *save = NULL;
	char	opts[128];

	for (w = strtok_r(value, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
		int v;

		if (!choice_value(kd->choices, w, &v)) {
			choice_list(kd->choices, opts, sizeof(opts));
			pn_err_set(err, "invalid word \"%s\" for \"%s\": expected some of %s", w,
				   kd->key, opts);
			return false;
		}
		flags |= (unsigned)v;
	}
	if (flags == 0) {
		pn_err_set(err, "empty value for \"%s\"", kd->key);
		return false;
	}
	*(unsigned *)FIELD(kd, base) = flags;
	return true;
}

/* PN_K_BOOL: on/yes/true or off/no/false */
static bool
assign_bool(const struct pn_cfg_keydef *kd, void *base, const char *value, struct pn_err *err)
{
	bool   *field = (bool *)FIELD(kd, base);

	if (strcmp(value, "on") == 0 || strcmp(value, "yes") == 0 || strcmp(value, "true") == 0)
		*field = true;
	else if (strcmp(value, "off") == 0 || strcmp(value, "no") == 0
		 || strcmp(value, "false") == 0)
		*field = false;
	else {
		pn_err_set(err, "invalid value \"%s\" for \"%s\": expected on or off", value,
			   kd->key);
		return false;
	}
	return true;
}

/* PN_K_ADDRS: addresses (pn_addr_parse()), blank- or comma-separated, at least one */
static bool
assign_addrs(const struct pn_cfg_keydef *kd, void *base, char *value, struct pn_err *err)
{
	struct pn_addr **list = (struct pn_addr **)FIELD(kd, base);
	size_t *count = (size_t *)((char *)base + kd->count_off);
	char   *w, *save = NULL;

	free(*list);
	*list = NULL;
	*count = 0;
	for (w = strtok_r(value, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
		struct pn_addr a;

		if (!pn_addr_parse(w, &a)) {
			pn_err_set(err, "invalid address \"%s\" in \"%s\": expected an IPv4 or "
				   "IPv6 address, optionally /BITS (127.0.0.1, ::1, 10.0.0.0/8)", w,
				   kd->key);
			return false;
		}
		*list = pn_xrealloc(*list, (*count + 1) * sizeof(**list));
		(*list)[(*count)++] = a;
	}
	if (*count == 0) {
		pn_err_set(err, "empty value for \"%s\"", kd->key);
		return false;
	}
	return true;
}

/* PN_K_URLPATH: an absolute path of a few safe characters, outside /notify/ */
static bool
assign_urlpath(const struct pn_cfg_keydef *kd, void *base, const char *value,
	       struct pn_err *err)
{
	const char *c;

	if (value[0] != '/' || strlen(value) > 128 || strstr(value, "//") != NULL
	    || strstr(value, "/.") != NULL) {
		pn_err_set(err, "invalid value \"%s\" for \"%s\": expected an absolute path "
			   "such as /paynotify-status (at most 128 bytes, no // or /.)", value,
			   kd->key);
		return false;
	}
	for (c = value; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
		      || (*c >= '0' && *c <= '9') || *c == '/' || *c == '-' || *c == '_'
		      || *c == '.')) {
			pn_err_set(err, "invalid character '%c' in \"%s\": use letters, digits, "
				   "'/', '-', '_' and '.'", *c, kd->key);
			return false;
		}
	/* The shipped web-server snippets pass everything under /notify/
	 * to the receivers from anywhere: the status path must not be
	 * reachable through them. */
	if (strncmp(value, "/notify/", 8) == 0 || strcmp(value, "/notify") == 0) {
		pn_err_set(err, "\"%s\" must not be under /notify/: the public notify "
			   "locations would expose it (use e.g. /paynotify-status)", kd->key);
		return false;
	}
	set_string(FIELD(kd, base), pn_xstrdup(value));
	return true;
}

/* PN_K_PATH, PN_K_PUBKEY_DIR: resolved against the main file's directory; a
 * directory's keys are loaded too */
static bool
assign_path(struct parser *p, const struct pn_cfg_keydef *kd, void *base, char *value,
	    struct pn_err *err)
{
	char   *field = FIELD(kd, base);

	if (empty_value(kd, value, err))
		return false;
	set_string(field, p ? resolve_path(p, value) : pn_xstrdup(value));
	if (kd->type == PN_K_PUBKEY_DIR)
		return load_pubkey_dir(p, kd, base, *(char **)field, err);
	return true;
}

/* PN_K_URL: https://, no query or fragment; trailing slashes dropped */
static bool
assign_url(const struct pn_cfg_keydef *kd, void *base, char *value, struct pn_err *err)
{
	size_t	n = strlen(value);

	/* https only: some query answers are trusted for their TLS alone */
	if (strncmp(value, HTTPS_PREFIX, 8) != 0 || n == 8 || n > 512
	    || strpbrk(value, " \t?#") != NULL) {
		pn_err_set(err, "invalid value \"%s\" for \"%s\": expected an https:// URL "
			   "without query or fragment", value, kd->key);
		return false;
	}
	while (n > 8 && value[n - 1] == '/')
		value[--n] = '\0';
	set_string(FIELD(kd, base), pn_xstrdup(value));
	return true;
}

/* PN_K_PRIVKEY: a test signing key, in a secret file; a receiver checks the
 * file's mode and leaves the key unread (PN_CFG_RECEIVER) */
static bool
assign_privkey(struct parser *p, const struct pn_cfg_keydef *kd, void *base, const char *value,
	       struct pn_err *err)
{
	char   *path = resolve_path(p, value);
	EVP_PKEY *k = NULL;
	bool	ok = false;

	if (pn_cfg_secret_file_ok(path, err)) {
		add_file(p, path, true);
		ok = p->receiver;
		if (!ok)
			k = pn_cfg_load_privkey(path, kd->key, err);
	}
	free(path);
	if (ok)
		return true;
	if (k == NULL)
		return false;
	EVP_PKEY_free(*(EVP_PKEY **)FIELD(kd, base));
	*(EVP_PKEY **)FIELD(kd, base) = k;
	return true;
}

/* PN_K_SECRETS, PN_K_PUBKEYS: blank-separated files, each onto the list */
static bool
assign_key_files(struct parser *p, const struct pn_cfg_keydef *kd, void *base, char *value,
		 struct pn_err *err)
{
	char   *field = FIELD(kd, base);
	size_t *count = (size_t *)((char *)base + kd->count_off);
	char   *w, *save = NULL;
	int	min_bits = kd->min > 0 ? (int)kd->min : PN_RSA_MIN_BITS;

	if (p == NULL) {
		pn_err_set(err, "\"%s\" has no default", kd->key);
		return false;
	}
	for (w = strtok_r(value, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char   *path = resolve_path(p, w);
		bool	ok;

		add_file(p, path, kd->type == PN_K_SECRETS);
		if (kd->type == PN_K_SECRETS)
			ok = pn_cfg_load_secrets(path, (struct pn_secret **)field, count, err);
		else
			ok = pn_cfg_load_pubkey(path, kd->key, min_bits, private_not_public(kd),
						(struct pn_pubkey **)field, count, err);
		free(path);
		if (!ok)
			return false;
	}
	if (*count == 0) {
		pn_err_set(err, "\"%s\" names no usable %s", kd->key,
			   kd->type == PN_K_SECRETS ? "secret" : "key");
		return false;
	}
	return true;
}

/* Assign value (NUL-terminated, trimmed; it may be split in place) to key kd of base. */
static bool
assign(struct parser *p, const struct pn_cfg_keydef *kd, void *base, char *value,
       struct pn_err *err)
{
	switch (kd->type) {
	case PN_K_STR:
		return assign_str(kd, base, value, err);
	case PN_K_INT:
		return assign_int(kd, base, value, err);
	case PN_K_CHOICE:
		return assign_choice(kd, base, value, err);
	case PN_K_FLAGS:
		return assign_flags(kd, base, value, err);
	case PN_K_BOOL:
		return assign_bool(kd, base, value, err);
	case PN_K_ADDRS:
		return assign_addrs(kd, base, value, err);
	case PN_K_URLPATH:
		return assign_urlpath(kd, base, value, err);
	case PN_K_PATH:
	case PN_K_PUBKEY_DIR:
		return assign_path(p, kd, base, value, err);
	case PN_K_URL:
		return assign_url(kd, base, value, err);
	case PN_K_PRIVKEY:
		return assign_privkey(p, kd, base, value, err);
	case PN_K_SECRETS:
	case PN_K_PUBKEYS:
		return assign_key_files(p, kd, base, value, err);
	}
	return false;
}

/* The defaults of the keys kd[0..n) of section into base. */
static void
apply_defaults(const struct pn_cfg_keydef *kd, size_t n, const char *section, void *base)
{
	const struct pn_cfg_keydef *end = kd + n;

	for (; kd < end; kd++) {
		char	tmp[128];
		struct pn_err err;

		if (strcmp(kd->section, section) != 0 || kd->def == NULL)
			continue;
		snprintf(tmp, sizeof(tmp), "%s", kd->def);
		if (!assign(NULL, kd, base, tmp, &err))
			pn_fatal("bad built-in default for %s: %s", kd->key, err.msg);
	}
}

static bool
valid_site_name(const char *s)
{
	if (*s == '\0' || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
		      || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static bool
begin_section(struct parser *p, char *name, struct pn_err *err)
{
	const struct pn_cfg_provider *const *prov;
	char   *sp;
	size_t	i;

	p->nseen = 0;
	p->site = NULL;
	p->section = NULL;
	name = pn_trim(name);
	if (strncmp(name, "site", 4) == 0 && (name[4] == ' ' || name[4] == '\t')) {
		char   *site = pn_trim(name + 5);
		struct pn_site *s;

		if (!valid_site_name(site)) {
			pn_err_set(err, "invalid site name \"%s\": use letters, digits, '-', '_' "
				   "and '.' (at most 64)", site);
			return false;
		}
		for (i = 0; i < p->cfg->nsites; i++)
			if (strcmp(p->cfg->sites[i].name, site) == 0) {
				if (p->cfg->sites[i].file == p->path)
					pn_err_set(err, "site \"%s\" is defined twice (first at "
						   "line %d)", site, p->cfg->sites[i].line);
				else
					pn_err_set(err, "site \"%s\" is defined twice (first at "
						   "%s:%d)", site, p->cfg->sites[i].file,
						   p->cfg->sites[i].line);
				return false;
			}
		p->cfg->sites = pn_xrealloc(p->cfg->sites, (p->cfg->nsites + 1) * sizeof(*s));
		p->failed = pn_xrealloc(p->failed, (p->cfg->nsites + 1) * sizeof(*p->failed));
		p->failed[p->cfg->nsites] = 0;
		s = &p->cfg->sites[p->cfg->nsites++];
		memset(s, 0, sizeof(*s));
		s->name = pn_xstrdup(site);
		s->file = p->path;
		s->line = p->line;
		for (prov = pn_cfg_providers; *prov; prov++)
			apply_defaults((*prov)->keys, (*prov)->nkeys, "site", s);
		p->site = s;
		p->section = "site";
		return true;
	}
	sp = name;
	if (strcmp(sp, "database") == 0 || strcmp(sp, "limits") == 0 || strcmp(sp, "log") == 0
	    || strcmp(sp, "metrics") == 0 || strcmp(sp, "query") == 0) {
		for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
			if (strcmp(keydefs[i].section, sp) == 0) {
				p->section = keydefs[i].section;
				return true;
			}
	}
	pn_err_set(err, "unknown section \"[%s]\" (expected [database], [limits], [log], "
		   "[metrics], [query] or [site NAME])", name);
	return false;
}

/* Does a secret file named in value exist with an owner, group or mode refused? */
static bool
loose_secret(const struct parser *p, const struct pn_cfg_keydef *kd, char *value)
{
	char   *w, *save = NULL;
	bool	loose = false;

	if (kd->type == PN_K_PUBKEYS || kd->type == PN_K_PUBKEY_DIR)
		return false;
	for (w = strtok_r(value, " \t", &save); w && !loose; w = strtok_r(NULL, " \t", &save)) {
		char   *path = resolve_path(p, w);

		loose = pn_cfg_secret_file_loose(path);
		free(path);
	}
	return loose;
}

static bool
set_key(struct parser *p, char *key, char *value, struct pn_err *err)
{
	const struct pn_cfg_provider *prov;
	const struct pn_cfg_keydef *kd;
	size_t	i;
	bool	files, isolated;
	char   *copy;

	if (p->section == NULL) {
		pn_err_set(err, "key \"%s\" outside of any section", key);
		return false;
	}
	kd = find_key(p->section, key, &prov);
	if (kd == NULL) {
		pn_err_set(err, "unknown key \"%s\" in section [%s]", key, p->section);
		return false;
	}
	if (p->site != NULL) {
		for (i = 0; i < p->nseen; i++)
			if (p->seen[i] == kd->key) {
				pn_err_set(err, "key \"%s\" is set twice in this section", key);
				return false;
			}
		p->seen[p->nseen++] = kd->key;
	} else {
		i = (size_t)(kd - keydefs);
		if (p->set_file[i] == p->path) {
			pn_err_set(err, "key \"%s\" of [%s] is set twice (first at line %d)", key,
				   p->section, p->set_line[i]);
			return false;
		}
		if (p->set_file[i] != NULL) {
			pn_err_set(err, "key \"%s\" of [%s] is set twice (first at %s:%d)", key,
				   p->section, p->set_file[i], p->set_line[i]);
			return false;
		}
		p->set_file[i] = p->path;
		p->set_line[i] = p->line;
	}
	if (prov != NULL)	/* any "<prefix>." key configures the provider */
		*(bool *)((char *)p->site + prov->configured_off) = true;
	files = kd->type == PN_K_SECRETS || kd->type == PN_K_PUBKEYS || kd->type == PN_K_PRIVKEY
	    || kd->type == PN_K_PUBKEY_DIR;
	copy = p->isolate && files ? pn_xstrdup(value) : NULL;	/* assign() splits value */
	if (assign(p, kd, p->site ? (void *)p->site : (void *)p->cfg, value, err)) {
		free(copy);
		return true;
	}
	if (prov != NULL)
		p->failed[p->cfg->nsites - 1] |= UINT64_C(1)
		    << pn_cfg_site_key_bit(prov, (size_t)(kd - prov->keys));
	/*
	 * A key or secret file that cannot be used (missing, unparsable, too
	 * short a key) is the site's own problem: when loading for a
	 * receiver, that site is disabled (it answers "retry later"), the
	 * reason is logged, and every other site keeps working.  Mistakes in
	 * the file itself (unknown key, bad value) stay fatal, and so does a
	 * secret file readable by group or others: that is a security
	 * policy, and the receivers refuse to start until it is fixed
	 * (docs/RELIABILITY.md).
	 */
	isolated = copy != NULL && p->site != NULL && !loose_secret(p, kd, copy);
	free(copy);
	if (isolated) {
		if (p->site->disabled == NULL)
			p->site->disabled = pn_xasprintf("%s:%d: %s", p->path, p->line, err->msg);
		pn_cfg_finding_add(p->fd, PN_CFG_SITE_ERROR, p->path, p->line,
				   "site \"%s\" disabled: %s", p->site->name, err->msg);
		return true;
	}
	return false;
}

/*
 * A configuration file (the main one or one of conf.d) writable by others is
 * refused: whoever can write it chooses the keys and the database.  One its
 * group may write is a warning (the group's members can do the same; with a
 * user-private group and umask 002 that is its owner alone).  Its read access
 * is check-config's business (--user).
 */
static void
check_config_file_mode(struct pn_cfg_findings *fd, const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return;
	if (st.st_mode & S_IWOTH)
		pn_cfg_finding_add(fd, PN_CFG_ERROR, path, 0,
				   "configuration file has mode %04o: it must not be writable by "
				   "others (chmod go-w \"%s\")", (unsigned)(st.st_mode & 07777), path);
	else if (st.st_mode & S_IWGRP)
		pn_cfg_finding_add(fd, PN_CFG_WARNING, path, 0,
				   "configuration file has mode %04o: its group may change the keys "
				   "and the database (chmod g-w \"%s\")", (unsigned)(st.st_mode & 07777),
				   path);
}

/* The INI reader's hooks (ini.h): ctx is the struct parser. */
static bool
ini_section(void *ctx, int line, char *name, struct pn_err *err)
{
	struct parser *p = ctx;

	p->line = line;
	return begin_section(p, name, err);
}

static bool
ini_key(void *ctx, int line, char *key, char *value, struct pn_err *err)
{
	struct parser *p = ctx;

	p->line = line;
	return set_key(p, key, value, err);
}

static void
ini_error(void *ctx, int line, const char *msg)
{
	struct parser *p = ctx;

	pn_cfg_finding_add(p->fd, PN_CFG_ERROR, p->path, line, "%s", msg);
}

static const struct pn_ini_handler ini_handler = {
	.section = ini_section, .key = ini_key, .error = ini_error,
};

/* Parse one configuration file into p (each file starts outside any section). */
static void
parse_file(struct parser *p, const char *path)
{
	char   *text = NULL;
	size_t	len = 0;
	struct pn_err e;

	p->line = 0;
	p->site = NULL;
	p->section = NULL;
	p->nseen = 0;
	if (!pn_read_file(path, CFG_MAX_FILE, &text, &len, &e)) {
		pn_cfg_finding_add(p->fd, PN_CFG_ERROR, NULL, 0, "%s", e.msg);
		return;
	}
	p->path = add_file(p, path, false);
	p->cfg->files[p->cfg->nfiles - 1].from = p->path;
	check_config_file_mode(p->fd, path);
	pn_ini_parse(text, &ini_handler, p);
	free(text);
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);	/* bytes: the C locale */
}

/*
 * conf.d/ beside the main file: every NAME.conf in it (not starting with a
 * dot), in the C locale's order, after the main file.  No conf.d is fine.
 */
#define CFG_MAX_INCLUDES 256

static void
parse_includes(struct parser *p)
{
	char   *dpath = pn_xasprintf("%s/%s", p->dir, PN_CFG_INCLUDE_DIR);
	char  **names = NULL;
	size_t	n = 0, i;
	struct dirent *de;
	struct stat st;
	DIR    *d;

	if (stat(dpath, &st) != 0 && errno == ENOENT) {
		free(dpath);
		return;
	}
	if ((d = opendir(dpath)) == NULL) {
		pn_cfg_finding_add(p->fd, PN_CFG_ERROR, NULL, 0, "could not open directory \"%s\": %s",
				   dpath, strerror(errno));
		free(dpath);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		size_t	len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".conf") != 0)
			continue;
		if (n == CFG_MAX_INCLUDES) {
			pn_cfg_finding_add(p->fd, PN_CFG_ERROR, NULL, 0, "directory \"%s\" holds "
					   "more than %d .conf files", dpath, CFG_MAX_INCLUDES);
			break;
		}
		names = pn_xrealloc(names, (n + 1) * sizeof(*names));
		names[n++] = pn_xasprintf("%s/%s", dpath, de->d_name);
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_names);
	for (i = 0; i < n; i++) {
		if (stat(names[i], &st) == 0 && !S_ISREG(st.st_mode))
			pn_cfg_finding_add(p->fd, PN_CFG_ERROR, names[i], 0, "not a regular file");
		else
			parse_file(p, names[i]);
		free(names[i]);
	}
	free(names);
	free(dpath);
}

static struct pn_config *
load(const char *path, unsigned flags, struct pn_cfg_findings *fd)
{
	struct parser p;
	char   *dircopy;
	size_t	i;
	struct pn_config *cfg = pn_xcalloc(1, sizeof(*cfg));

	memset(&p, 0, sizeof(p));
	p.isolate = (flags & PN_CFG_ISOLATE_SITES) != 0;
	p.receiver = (flags & PN_CFG_RECEIVER) != 0;
	cfg->path = pn_xstrdup(path);
	p.path = cfg->path;
	p.cfg = cfg;
	p.fd = fd;
	dircopy = pn_xstrdup(path);
	p.dir = pn_xstrdup(dirname(dircopy));
	free(dircopy);
	apply_defaults(keydefs, PN_ARRAY_LEN(keydefs), "database", cfg);
	apply_defaults(keydefs, PN_ARRAY_LEN(keydefs), "limits", cfg);
	apply_defaults(keydefs, PN_ARRAY_LEN(keydefs), "log", cfg);
	apply_defaults(keydefs, PN_ARRAY_LEN(keydefs), "metrics", cfg);
	apply_defaults(keydefs, PN_ARRAY_LEN(keydefs), "query", cfg);

	/* the main file, then conf.d/ (relative paths in every file are
	 * relative to the main file's directory) */
	parse_file(&p, cfg->path);
	if (cfg->nfiles > 0)
		parse_includes(&p);
	if (pn_cfg_findings_count(fd, PN_CFG_ERROR) > 0 && cfg->nfiles == 0)
		goto failed;
	for (i = 0; i < cfg->nsites; i++) {
		struct pn_site *site = &cfg->sites[i];
		size_t	before = fd->n, j;

		pn_cfg_check_site(site, p.failed[i], fd);
		if (!p.isolate)
			continue;
		/* loading for a receiver: what is wrong with one site disables it */
		for (j = before; j < fd->n; j++) {
			if (fd->v[j].severity != PN_CFG_ERROR)
				continue;
			fd->v[j].severity = PN_CFG_SITE_ERROR;
			if (site->disabled == NULL)
				site->disabled = pn_cfg_finding_text(&fd->v[j]);
		}
	}
	pn_cfg_check_shared_identities(cfg, fd);
	if (cfg->nsites == 0 && !(flags & PN_CFG_NO_SITES)
	    && pn_cfg_findings_count(fd, PN_CFG_ERROR) == 0)
		pn_cfg_finding_add(fd, PN_CFG_ERROR, path, 0,
				   "no [site NAME] section here or in %s/" PN_CFG_INCLUDE_DIR
				   "/*.conf: nothing to serve", p.dir);
	if (pn_cfg_findings_count(fd, PN_CFG_ERROR) > 0)
		goto failed;
	free(p.dir);
	free(p.failed);
	return cfg;

failed:
	free(p.dir);
	free(p.failed);
	pn_cfg_free(cfg);
	return NULL;
}

struct pn_config *
pn_cfg_load_all(const char *path, struct pn_cfg_findings *fd)
{
	return load(path, 0, fd);
}

struct pn_config *
pn_cfg_load_all_flags(const char *path, unsigned flags, struct pn_cfg_findings *fd)
{
	return load(path, flags, fd);
}

struct pn_config *
pn_cfg_load(const char *path, struct pn_err *err)
{
	return pn_cfg_load_flags(path, 0, err);
}

struct pn_config *
pn_cfg_load_flags(const char *path, unsigned flags, struct pn_err *err)
{
	struct pn_cfg_findings fd = {.v = NULL, .n = 0};
	struct pn_config *cfg = load(path, flags, &fd);

	pn_cfg_findings_report(&fd, cfg != NULL, err);
	pn_cfg_findings_free(&fd);
	return cfg;
}

/* Free what the keys kd[0..n) hold in base (the text of PN_KEY_WIPE ones wiped first). */
static void
free_keys(const struct pn_cfg_keydef *kd, size_t n, void *base)
{
	const struct pn_cfg_keydef *end = kd + n;

	for (; kd < end; kd++) {
		char   *field = (char *)base + kd->off;
		size_t	count = kd->count_off ? *(size_t *)((char *)base + kd->count_off) : 0;

		switch (kd->type) {
		case PN_K_STR:
		case PN_K_URLPATH:
		case PN_K_PATH:
		case PN_K_URL:
		case PN_K_PUBKEY_DIR:	/* its keys are freed with their list */
			if (*(char **)field && (kd->flags & PN_KEY_WIPE))
				OPENSSL_cleanse(*(char **)field, strlen(*(char **)field));
			free(*(char **)field);
			break;
		case PN_K_SECRETS:
			pn_cfg_secrets_free(*(struct pn_secret **)field, count);
			break;
		case PN_K_PUBKEYS:
			pn_cfg_pubkeys_free(*(struct pn_pubkey **)field, count);
			break;
		case PN_K_PRIVKEY:
			EVP_PKEY_free(*(EVP_PKEY **)field);
			break;
		case PN_K_ADDRS:
			free(*(struct pn_addr **)field);
			break;
		case PN_K_INT:
		case PN_K_CHOICE:
		case PN_K_FLAGS:
		case PN_K_BOOL:
			break;
		}
	}
}

void
pn_cfg_free(struct pn_config *cfg)
{
	const struct pn_cfg_provider *const *prov;
	size_t i;

	if (cfg == NULL)
		return;
	for (i = 0; i < cfg->nsites; i++) {
		struct pn_site *s = &cfg->sites[i];

		free(s->name);
		free(s->disabled);
		for (prov = pn_cfg_providers; *prov; prov++)
			free_keys((*prov)->keys, (*prov)->nkeys, s);
	}
	for (i = 0; i < cfg->nfiles; i++)
		free(cfg->files[i].path);
	free(cfg->files);
	free(cfg->sites);
	free_keys(keydefs, PN_ARRAY_LEN(keydefs), cfg);
	free(cfg->path);
	free(cfg);
}

const struct pn_site *
pn_cfg_site(const struct pn_config *cfg, const char *name)
{
	size_t i;

	if (name == NULL)
		return NULL;
	for (i = 0; i < cfg->nsites; i++)
		if (strcmp(cfg->sites[i].name, name) == 0)
			return &cfg->sites[i];
	return NULL;
}

const char *
pn_cfg_admin_conninfo(const struct pn_config *cfg)
{
	return cfg->admin_conninfo ? cfg->admin_conninfo : cfg->conninfo;
}

const char *
pn_cfg_owner_conninfo(const struct pn_config *cfg)
{
	return cfg->owner_conninfo ? cfg->owner_conninfo : pn_cfg_admin_conninfo(cfg);
}

const char *
pn_cfg_default_path(void)
{
	const char *env = getenv("PAYNOTIFY_CONFIG");

	return env && *env ? env : PN_DEFAULT_CONFIG;
}

size_t
pn_cfg_keydocs(const struct pn_cfg_keydoc **out)
{
	static struct pn_cfg_keydoc docs[2 * CFG_MAX_KEYS];
	const struct pn_cfg_provider *const *prov;
	size_t	i, n = 0;

	for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
		docs[n++] = (struct pn_cfg_keydoc){.section = keydefs[i].section,
						   .key = keydefs[i].key, .doc = keydefs[i].doc};
	for (prov = pn_cfg_providers; *prov; prov++)
		for (i = 0; i < (*prov)->nkeys && n < PN_ARRAY_LEN(docs); i++)
			docs[n++] = (struct pn_cfg_keydoc){.section = (*prov)->keys[i].section,
							   .key = (*prov)->keys[i].key,
							   .doc = (*prov)->keys[i].doc};
	*out = docs;
	return n;
}

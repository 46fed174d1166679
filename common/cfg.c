/*
 * cfg.c: the INI configuration, declared once in a table.
 */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg.h"
#include "crypto.h"

#ifndef PN_DEFAULT_CONFIG
#define PN_DEFAULT_CONFIG "/etc/paynotify/paynotify.conf"
#endif

#define CFG_MAX_FILE (1024 * 1024)
#define CFG_MAX_SECRET_FILE 65536
#define HTTPS_PREFIX "https:/" "/"	/* split: the source checks strip // comments */

enum ktype {
	K_STR,		/* char * */
	K_INT,		/* int64_t, bounded */
	K_CHOICE,	/* int, one word of a choice list */
	K_FLAGS,	/* unsigned, several words of a choice list */
	K_SECRETS,	/* struct pn_secret * + size_t count: secret files, one secret a line */
	K_PUBKEYS,	/* struct pn_pubkey * + size_t count: key or certificate files */
	K_PRIVKEY,	/* EVP_PKEY *: a private key file (test signing only) */
	K_BOOL,		/* bool: on/off */
	K_PATH,		/* char *: a file path, resolved but never opened here (the
			 * credentials only `paynotify query` loads) */
	K_URL,		/* char *: an https:// URL */
};

struct choice {
	const char *word;
	int	value;
};

static const struct choice alipay_sign_types[] = {
	{"RSA2", PN_ALIPAY_RSA2}, {"RSA", PN_ALIPAY_RSA}, {NULL, 0}};
static const struct choice wxv2_sign_types[] = {
	{"MD5", PN_WXV2_MD5}, {"HMAC-SHA256", PN_WXV2_HMAC_SHA256}, {NULL, 0}};
static const struct choice twoc2p_apis[] = {
	{"jwt", PN_2C2P_JWT}, {"redirect", PN_2C2P_REDIRECT}, {NULL, 0}};
static const struct choice twoc2p_hashes[] = {
	{"sha1", PN_2C2P_SHA1}, {"sha256", PN_2C2P_SHA256}, {NULL, 0}};

struct keydef {
	const char *section;	/* database, limits, log, site */
	const char *key;
	enum ktype type;
	size_t	off;		/* into struct pn_config, or struct pn_site for "site" */
	size_t	count_off;	/* K_SECRETS, K_PUBKEYS: the size_t count */
	int64_t	min, max;	/* K_INT */
	const struct choice *choices;	/* K_CHOICE, K_FLAGS */
	const char *def;	/* default, as text; NULL for none */
	const char *doc;
};

#define C(field) offsetof(struct pn_config, field)
#define S(field) offsetof(struct pn_site, field)

static const struct keydef keydefs[] = {
	{"database", "conninfo", K_STR, C(conninfo), 0, 0, 0, NULL, NULL,
	 "libpq connection string; PGHOST, PGPORT, PGUSER, ... fill what it leaves out"},
	{"database", "statement_timeout_ms", K_INT, C(statement_timeout_ms), 0, 100, 60000, NULL,
	 "3000", "statement_timeout for the ingest transaction; keep it well inside the "
	 "providers' deadlines (WeChat Pay gives up after 5 s)"},
	{"database", "connect_timeout_s", K_INT, C(connect_timeout_s), 0, 1, 60, NULL, "2",
	 "libpq connect_timeout"},
	{"limits", "max_body_bytes", K_INT, C(max_body_bytes), 0, 1024, 16 * 1024 * 1024, NULL,
	 "1048576", "largest request body accepted; larger bodies get 413"},
	{"log", "level", K_INT, C(log_level), 0, 0, 2, NULL, "1",
	 "0: errors and rejected requests only, 1: one line per request, 2: debug"},
	{"query", "connect_timeout_ms", K_INT, C(query_connect_timeout_ms), 0, 100, 60000, NULL,
	 "3000", "paynotify query: largest time to connect to a provider's API (TCP and TLS)"},
	{"query", "timeout_ms", K_INT, C(query_timeout_ms), 0, 100, 120000, NULL, "10000",
	 "paynotify query: largest time for one whole request to a provider's API"},
	{"query", "ca_file", K_PATH, C(query_ca_file), 0, 0, 0, NULL, NULL,
	 "paynotify query: CA bundle (PEM) the providers' API certificates are verified "
	 "against, instead of the system's; peer and host are always verified"},

	{"site", "alipay.app_id", K_STR, S(alipay.app_id), 0, 0, 0, NULL, NULL,
	 "the app_id notifications must carry"},
	{"site", "alipay.seller_id", K_STR, S(alipay.seller_id), 0, 0, 0, NULL, NULL,
	 "the seller_id (2088...) notifications must carry"},
	{"site", "alipay.public_key_file", K_PUBKEYS, S(alipay.keys), S(alipay.nkeys), 0, 0, NULL,
	 NULL, "Alipay public key(s): SPKI PEM, bare base64 SPKI or alipayCertPublicKey_RSA2.crt; "
	 "several files = rotation"},
	{"site", "alipay.sign_type", K_CHOICE, S(alipay.sign_type), 0, 0, 0, alipay_sign_types,
	 "RSA2", "RSA2 (SHA256withRSA) or RSA (SHA1withRSA); never taken from the payload"},
	{"site", "alipay.test_private_key_file", K_PRIVKEY, S(alipay.test_key), 0, 0, 0, NULL, NULL,
	 "sandbox sites only: private key that `paynotify sign` signs test notifications with"},
	{"site", "alipay.query_private_key_file", K_PATH, S(alipay.query_key_path), 0, 0, 0, NULL,
	 NULL, "paynotify query: the app's private key (PKCS#8 or PKCS#1 PEM) that signs "
	 "alipay.trade.query; read by the query command only, never by the receiver"},
	{"site", "alipay.query_app_cert_file", K_PATH, S(alipay.query_app_cert), 0, 0, 0, NULL,
	 NULL, "paynotify query, public-key certificate mode: the app's certificate "
	 "(appCertPublicKey_<app_id>.crt); its app_cert_sn goes with every request"},
	{"site", "alipay.query_root_cert_file", K_PATH, S(alipay.query_root_cert), 0, 0, 0, NULL,
	 NULL, "paynotify query, public-key certificate mode: Alipay's root certificates "
	 "(alipayRootCert.crt); their alipay_root_cert_sn goes with every request"},
	{"site", "alipay.query_url", K_URL, S(alipay.query_url), 0, 0, 0, NULL,
	 "https://openapi.alipay.com/gateway.do", "paynotify query: the Alipay gateway "
	 "(sandbox: https://openapi-sandbox.dl.alipaydev.com/gateway.do)"},

	{"site", "stripe.secret_files", K_SECRETS, S(stripe.secrets), S(stripe.nsecrets), 0, 0,
	 NULL, NULL, "endpoint signing secret file(s) (whsec_...), one secret a line: rotation"},
	{"site", "stripe.test_signing", K_BOOL, S(stripe.test_signing), 0, 0, 0, NULL, "off",
	 "sandbox sites only: let `paynotify sign` sign test events with the site's secret"},
	{"site", "stripe.query_key_file", K_PATH, S(stripe.query_key_path), 0, 0, 0, NULL, NULL,
	 "paynotify query: a restricted key (rk_..., PaymentIntents read) in a file; read by the "
	 "query command only, never by the receiver"},
	{"site", "stripe.query_url", K_URL, S(stripe.query_url), 0, 0, 0, NULL,
	 "https://api.stripe.com", "paynotify query: the Stripe API (test mode uses the same "
	 "host with an rk_test_ key)"},
	{"site", "stripe.tolerance_s", K_INT, S(stripe.tolerance_s), 0, 1, 86400, NULL, "300",
	 "largest accepted age of the Stripe-Signature timestamp (future ones pass, as in the SDKs)"},

	{"site", "wechatpay.mchid", K_STR, S(wechatpay.mchid), 0, 0, 0, NULL, NULL,
	 "merchant id (mchid / mch_id) notifications must carry"},
	{"site", "wechatpay.appid", K_STR, S(wechatpay.appid), 0, 0, 0, NULL, NULL,
	 "appid notifications must carry"},
	{"site", "wechatpay.apiv3_key_file", K_SECRETS, S(wechatpay.apiv3_keys),
	 S(wechatpay.napiv3_keys), 0, 0, NULL, NULL, "APIv3 key file (32 bytes) for AES-256-GCM"},
	{"site", "wechatpay.apiv2_key_file", K_SECRETS, S(wechatpay.apiv2_keys),
	 S(wechatpay.napiv2_keys), 0, 0, NULL, NULL, "APIv2 key file for v2 XML notifications"},
	{"site", "wechatpay.v2_sign_type", K_FLAGS, S(wechatpay.v2_sign_types), 0, 0, 0,
	 wxv2_sign_types, "MD5 HMAC-SHA256", "accepted v2 signature algorithms"},
	{"site", "wechatpay.platform_cert_files", K_PUBKEYS, S(wechatpay.certs),
	 S(wechatpay.ncerts), 0, 0, NULL, NULL,
	 "WeChat Pay platform certificate(s), chosen by Wechatpay-Serial; several = rotation"},
	{"site", "wechatpay.public_key_id", K_STR, S(wechatpay.public_key_id), 0, 0, 0, NULL, NULL,
	 "WeChat Pay public key id (PUB_KEY_ID_...)"},
	{"site", "wechatpay.public_key_file", K_PUBKEYS, S(wechatpay.public_keys),
	 S(wechatpay.npublic_keys), 0, 0, NULL, NULL, "WeChat Pay public key (SPKI PEM)"},
	{"site", "wechatpay.test_private_key_file", K_PRIVKEY, S(wechatpay.test_key), 0, 0, 0, NULL,
	 NULL, "sandbox sites only: private key that `paynotify sign` signs v3 test notifications "
	 "with (it also enables signing v2 ones with the APIv2 key)"},
	{"site", "wechatpay.query_private_key_file", K_PATH, S(wechatpay.query_key_path), 0, 0, 0,
	 NULL, NULL, "paynotify query: the merchant API private key (apiclient_key.pem) that "
	 "signs API v3 requests; read by the query command only, never by the receiver"},
	{"site", "wechatpay.query_cert_serial", K_STR, S(wechatpay.query_cert_serial), 0, 0, 0,
	 NULL, NULL, "paynotify query: serial number of the merchant API certificate "
	 "(serial_no in the Authorization header)"},
	{"site", "wechatpay.query_url", K_URL, S(wechatpay.query_url), 0, 0, 0, NULL,
	 "https://api.mch.weixin.qq.com", "paynotify query: the WeChat Pay API (backup "
	 "domain: https://api2.mch.weixin.qq.com)"},
	{"site", "wechatpay.tolerance_s", K_INT, S(wechatpay.tolerance_s), 0, 1, 86400, NULL, "300",
	 "largest accepted distance of Wechatpay-Timestamp from now"},

	{"site", "2c2p.merchant_id", K_STR, S(twoc2p.merchant_id), 0, 0, 0, NULL, NULL,
	 "merchantID notifications must carry"},
	{"site", "2c2p.secret_key_file", K_SECRETS, S(twoc2p.secrets), S(twoc2p.nsecrets), 0, 0,
	 NULL, NULL, "merchant secret key file, used as its ASCII bytes; one a line: rotation"},
	{"site", "2c2p.api", K_CHOICE, S(twoc2p.api), 0, 0, 0, twoc2p_apis, "jwt",
	 "jwt (PGW v4 backend notification) or redirect (legacy Redirect API)"},
	{"site", "2c2p.redirect_hash", K_CHOICE, S(twoc2p.redirect_hash), 0, 0, 0, twoc2p_hashes,
	 "sha1", "HMAC digest of the legacy hash_value"},
	{"site", "2c2p.query_url", K_URL, S(twoc2p.query_url), 0, 0, 0, NULL,
	 "https://pgw.2c2p.com", "paynotify query: the PGW v4 API (sandbox: "
	 "https://sandbox-pgw.2c2p.com); paymentInquiry is signed with 2c2p.secret_key_file"},
	{"site", "2c2p.test_signing", K_BOOL, S(twoc2p.test_signing), 0, 0, 0, NULL, "off",
	 "sandbox sites only: let `paynotify sign` sign test notifications with the site's key"},
};

/* ---- helpers ------------------------------------------------------------- */

struct parser {
	const char *path;
	char   *dir;		/* directory of the config file, for relative paths */
	int	line;
	struct pn_config *cfg;
	struct pn_site *site;	/* current [site] section, or NULL */
	const char *section;	/* current section kind */
	/* keys seen in the current section, to refuse duplicates */
	const char *seen[PN_ARRAY_LEN(keydefs)];
	size_t	nseen;
};

static char *
resolve_path(const struct parser *p, const char *file)
{
	if (file[0] == '/')
		return pn_xstrdup(file);
	return pn_xasprintf("%s/%s", p->dir, file);
}

static const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static bool
check_secret_perms(const char *path, struct pn_err *err)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		pn_err_set(err, "could not stat secret file \"%s\": %s", path, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		pn_err_set(err, "secret file \"%s\" is not a regular file", path);
		return false;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		pn_err_set(err, "secret file \"%s\" has mode %04o: it must not be accessible by "
			   "group or others (chmod 600 \"%s\")",
			   path, (unsigned)(st.st_mode & 07777), path);
		return false;
	}
	return true;
}

static void
secrets_free(struct pn_secret *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(s[i].id);
		if (s[i].data) {
			OPENSSL_cleanse(s[i].data, s[i].len);
			free(s[i].data);
		}
	}
	free(s);
}

static void
pubkeys_free(struct pn_pubkey *k, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(k[i].id);
		free(k[i].path);
		free(k[i].serial);
		EVP_PKEY_free(k[i].pkey);
	}
	free(k);
}

/* Read one secret file: every non-empty line (trailing blanks removed) is a secret. */
static bool
load_secrets(const char *path, struct pn_secret **list, size_t *n, struct pn_err *err)
{
	char   *text = NULL, *line, *next;
	size_t	len = 0;
	int	lineno = 0;

	if (!check_secret_perms(path, err))
		return false;
	if (!pn_read_file(path, CFG_MAX_SECRET_FILE, &text, &len, err))
		return false;
	if (memchr(text, '\0', len) != NULL) {
		pn_err_set(err, "secret file \"%s\" contains a NUL byte", path);
		goto failed;
	}
	for (line = text; line != NULL; line = next) {
		size_t l;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		l = strlen(line);
		while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
			line[--l] = '\0';
		if (l == 0)
			continue;
		*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
		(*list)[*n].id = pn_xasprintf("%s:%d", base_name(path), lineno);
		(*list)[*n].data = (unsigned char *)pn_xstrndup(line, l);
		(*list)[*n].len = l;
		(*n)++;
	}
	OPENSSL_cleanse(text, len);
	free(text);
	return true;
failed:
	OPENSSL_cleanse(text, len);
	free(text);
	return false;
}

static bool
load_pubkey(const char *path, struct pn_pubkey **list, size_t *n, struct pn_err *err)
{
	struct pn_pubkey k;

	memset(&k, 0, sizeof(k));
	k.pkey = pn_pubkey_load(path, &k.serial, &k.not_after, err);
	if (k.pkey == NULL) {
		pn_err_prefix(err, "could not load key \"%s\"", path);
		return false;
	}
	k.path = pn_xstrdup(path);
	k.id = pn_xstrdup(base_name(path));
	*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = k;
	return true;
}

static bool
choice_value(const struct choice *c, const char *word, int *out)
{
	for (; c->word; c++)
		if (strcmp(c->word, word) == 0) {
			*out = c->value;
			return true;
		}
	return false;
}

static void
choice_list(const struct choice *c, char *buf, size_t sz)
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

/* Assign value (NUL-terminated, trimmed) to key kd of base. */
static bool
assign(struct parser *p, const struct keydef *kd, void *base, char *value,
       struct pn_err *err)
{
	char   *field = (char *)base + kd->off;
	char	opts[128];

	switch (kd->type) {
	case K_STR:
		if (*value == '\0') {
			pn_err_set(err, "empty value for \"%s\"", kd->key);
			return false;
		}
		free(*(char **)field);
		*(char **)field = pn_xstrdup(value);
		return true;
	case K_INT: {
		int64_t v;

		if (!pn_parse_i64(value, &v) || v < kd->min || v > kd->max) {
			pn_err_set(err, "invalid value \"%s\" for \"%s\": expected an integer from "
				   "%lld to %lld", value, kd->key, (long long)kd->min,
				   (long long)kd->max);
			return false;
		}
		*(int64_t *)field = v;
		return true;
	}
	case K_CHOICE:
		if (!choice_value(kd->choices, value, (int *)field)) {
			choice_list(kd->choices, opts, sizeof(opts));
			pn_err_set(err, "invalid value \"%s\" for \"%s\": expected one of %s",
				   value, kd->key, opts);
			return false;
		}
		return true;
	case K_FLAGS: {
		unsigned flags = 0;
		char   *w, *save = NULL;

		for (w = strtok_r(value, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
			int v;

			if (!choice_value(kd->choices, w, &v)) {
				choice_list(kd->choices, opts, sizeof(opts));
				pn_err_set(err, "invalid word \"%s\" for \"%s\": expected some of %s",
					   w, kd->key, opts);
				return false;
			}
			flags |= (unsigned)v;
		}
		if (flags == 0) {
			pn_err_set(err, "empty value for \"%s\"", kd->key);
			return false;
		}
		*(unsigned *)field = flags;
		return true;
	}
	case K_BOOL:
		if (strcmp(value, "on") == 0 || strcmp(value, "yes") == 0 || strcmp(value, "true") == 0)
			*(bool *)field = true;
		else if (strcmp(value, "off") == 0 || strcmp(value, "no") == 0
			 || strcmp(value, "false") == 0)
			*(bool *)field = false;
		else {
			pn_err_set(err, "invalid value \"%s\" for \"%s\": expected on or off", value,
				   kd->key);
			return false;
		}
		return true;
	case K_PATH:
		if (*value == '\0') {
			pn_err_set(err, "empty value for \"%s\"", kd->key);
			return false;
		}
		free(*(char **)field);
		*(char **)field = p ? resolve_path(p, value) : pn_xstrdup(value);
		return true;
	case K_URL: {
		size_t	n = strlen(value);

		/* https only: query answers are trusted for their TLS (Stripe) */
		if (strncmp(value, HTTPS_PREFIX, 8) != 0 || n == 8 || n > 512
		    || strpbrk(value, " \t?#") != NULL) {
			pn_err_set(err, "invalid value \"%s\" for \"%s\": expected an https:// URL "
				   "without query or fragment", value, kd->key);
			return false;
		}
		while (n > 8 && value[n - 1] == '/')
			value[--n] = '\0';
		free(*(char **)field);
		*(char **)field = pn_xstrdup(value);
		return true;
	}
	case K_PRIVKEY: {
		char   *path = resolve_path(p, value);
		EVP_PKEY *k = NULL;

		if (check_secret_perms(path, err))
			k = pn_privkey_load(path, err);
		free(path);
		if (k == NULL)
			return false;
		EVP_PKEY_free(*(EVP_PKEY **)field);
		*(EVP_PKEY **)field = k;
		return true;
	}
	case K_SECRETS:
	case K_PUBKEYS: {
		size_t *count = (size_t *)((char *)base + kd->count_off);
		char   *w, *save = NULL;

		if (p == NULL) {
			pn_err_set(err, "\"%s\" has no default", kd->key);
			return false;
		}
		for (w = strtok_r(value, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			char   *path = resolve_path(p, w);
			bool	ok;

			if (kd->type == K_SECRETS)
				ok = load_secrets(path, (struct pn_secret **)field, count, err);
			else
				ok = load_pubkey(path, (struct pn_pubkey **)field, count, err);
			free(path);
			if (!ok)
				return false;
		}
		if (*count == 0) {
			pn_err_set(err, "\"%s\" names no usable %s", kd->key,
				   kd->type == K_SECRETS ? "secret" : "key");
			return false;
		}
		return true;
	}
	}
	return false;
}

static void
apply_defaults(const char *section, void *base)
{
	size_t i;

	for (i = 0; i < PN_ARRAY_LEN(keydefs); i++) {
		const struct keydef *kd = &keydefs[i];
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
	char   *sp;
	size_t	i;

	p->nseen = 0;
	p->site = NULL;
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
				pn_err_set(err, "site \"%s\" is defined twice (first at line %d)", site,
					   p->cfg->sites[i].line);
				return false;
			}
		p->cfg->sites = pn_xrealloc(p->cfg->sites, (p->cfg->nsites + 1) * sizeof(*s));
		s = &p->cfg->sites[p->cfg->nsites++];
		memset(s, 0, sizeof(*s));
		s->name = pn_xstrdup(site);
		s->file = p->cfg->path;
		s->line = p->line;
		apply_defaults("site", s);
		p->site = s;
		p->section = "site";
		return true;
	}
	sp = name;
	if (strcmp(sp, "database") == 0 || strcmp(sp, "limits") == 0 || strcmp(sp, "log") == 0
	    || strcmp(sp, "query") == 0) {
		for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
			if (strcmp(keydefs[i].section, sp) == 0) {
				p->section = keydefs[i].section;
				return true;
			}
	}
	pn_err_set(err, "unknown section \"[%s]\" (expected [database], [limits], [log], "
		   "[query] or [site NAME])", name);
	return false;
}

static bool
set_key(struct parser *p, char *key, char *value, struct pn_err *err)
{
	const struct keydef *kd = NULL;
	size_t	i;

	if (p->section == NULL) {
		pn_err_set(err, "key \"%s\" outside of any section", key);
		return false;
	}
	for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
		if (strcmp(keydefs[i].section, p->section) == 0 && strcmp(keydefs[i].key, key) == 0) {
			kd = &keydefs[i];
			break;
		}
	if (kd == NULL) {
		pn_err_set(err, "unknown key \"%s\" in section [%s]", key, p->section);
		return false;
	}
	for (i = 0; i < p->nseen; i++)
		if (p->seen[i] == kd->key) {
			pn_err_set(err, "key \"%s\" is set twice in this section", key);
			return false;
		}
	p->seen[p->nseen++] = kd->key;
	if (p->site != NULL) {
		if (strncmp(key, "alipay.", 7) == 0)
			p->site->alipay.configured = true;
		else if (strncmp(key, "stripe.", 7) == 0)
			p->site->stripe.configured = true;
		else if (strncmp(key, "wechatpay.", 10) == 0)
			p->site->wechatpay.configured = true;
		else if (strncmp(key, "2c2p.", 5) == 0)
			p->site->twoc2p.configured = true;
	}
	return assign(p, kd, p->site ? (void *)p->site : (void *)p->cfg, value, err);
}

/* Strip an inline comment: ';' or '#' at the start or after a blank. */
static void
strip_comment(char *s)
{
	char *c;

	for (c = s; *c; c++)
		if ((*c == ';' || *c == '#') && (c == s || c[-1] == ' ' || c[-1] == '\t')) {
			*c = '\0';
			return;
		}
}

/* Per-provider completeness of one site. */
static bool
validate_site(const struct pn_site *s, struct pn_err *err)
{
#define REQUIRE(cond, what) \
	do { \
		if (!(cond)) { \
			pn_err_set(err, "site \"%s\": %s", s->name, what); \
			return false; \
		} \
	} while (0)
	size_t i;

	if (!s->alipay.configured && !s->stripe.configured && !s->wechatpay.configured
	    && !s->twoc2p.configured)
		REQUIRE(false, "no provider is configured (set alipay.*, stripe.*, wechatpay.* "
			"or 2c2p.* keys)");
	if (s->alipay.configured) {
		REQUIRE(s->alipay.app_id, "alipay.app_id is required for Alipay");
		REQUIRE(s->alipay.seller_id, "alipay.seller_id is required for Alipay");
		REQUIRE(s->alipay.nkeys > 0, "alipay.public_key_file is required for Alipay");
		REQUIRE((s->alipay.query_app_cert == NULL) == (s->alipay.query_root_cert == NULL),
			"alipay.query_app_cert_file and alipay.query_root_cert_file go together");
	}
	if (s->stripe.configured)
		REQUIRE(s->stripe.nsecrets > 0, "stripe.secret_files is required for Stripe");
	if (s->wechatpay.configured) {
		bool v3 = s->wechatpay.napiv3_keys > 0;

		REQUIRE(s->wechatpay.mchid, "wechatpay.mchid is required for WeChat Pay");
		REQUIRE(s->wechatpay.appid, "wechatpay.appid is required for WeChat Pay");
		REQUIRE(v3 || s->wechatpay.napiv2_keys > 0,
			"WeChat Pay needs wechatpay.apiv3_key_file (API v3) or "
			"wechatpay.apiv2_key_file (API v2)");
		REQUIRE((s->wechatpay.public_key_id == NULL) == (s->wechatpay.npublic_keys == 0),
			"wechatpay.public_key_id and wechatpay.public_key_file go together");
		REQUIRE(!v3 || s->wechatpay.ncerts > 0 || s->wechatpay.npublic_keys > 0,
			"API v3 needs wechatpay.platform_cert_files or wechatpay.public_key_file");
		for (i = 0; i < s->wechatpay.napiv3_keys; i++)
			if (s->wechatpay.apiv3_keys[i].len != 32) {
				pn_err_set(err, "site \"%s\": APIv3 key %s is %zu bytes long; it must be "
					   "exactly 32", s->name, s->wechatpay.apiv3_keys[i].id,
					   s->wechatpay.apiv3_keys[i].len);
				return false;
			}
		for (i = 0; i < s->wechatpay.ncerts; i++)
			REQUIRE(s->wechatpay.certs[i].serial,
				"wechatpay.platform_cert_files must name X.509 certificates");
		REQUIRE((s->wechatpay.query_key_path == NULL)
			== (s->wechatpay.query_cert_serial == NULL),
			"wechatpay.query_private_key_file and wechatpay.query_cert_serial go "
			"together");
	}
	if (s->twoc2p.configured) {
		REQUIRE(s->twoc2p.merchant_id, "2c2p.merchant_id is required for 2C2P");
		REQUIRE(s->twoc2p.nsecrets > 0, "2c2p.secret_key_file is required for 2C2P");
	}
	return true;
#undef REQUIRE
}

struct pn_config *
pn_cfg_load(const char *path, struct pn_err *err)
{
	struct parser p;
	char   *text = NULL, *line, *next, *dircopy;
	size_t	len = 0, i;
	struct pn_config *cfg = pn_xcalloc(1, sizeof(*cfg));
	struct pn_err e;

	memset(&p, 0, sizeof(p));
	cfg->path = pn_xstrdup(path);
	p.path = cfg->path;
	p.cfg = cfg;
	dircopy = pn_xstrdup(path);
	p.dir = pn_xstrdup(dirname(dircopy));
	free(dircopy);
	apply_defaults("database", cfg);
	apply_defaults("limits", cfg);
	apply_defaults("log", cfg);
	apply_defaults("query", cfg);

	if (!pn_read_file(path, CFG_MAX_FILE, &text, &len, &e)) {
		pn_err_set(err, "%s", e.msg);
		goto failed;
	}
	for (line = text; line; line = next) {
		char *eq, *key, *value;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		p.line++;
		strip_comment(line);
		line = pn_trim(line);
		if (*line == '\0')
			continue;
		if (*line == '[') {
			char *close = strchr(line, ']');

			if (close == NULL || close[1] != '\0') {
				pn_err_set(&e, "malformed section header \"%s\"", line);
				goto line_error;
			}
			*close = '\0';
			if (!begin_section(&p, line + 1, &e))
				goto line_error;
			continue;
		}
		eq = strchr(line, '=');
		if (eq == NULL) {
			pn_err_set(&e, "expected \"key = value\", got \"%s\"", line);
			goto line_error;
		}
		*eq = '\0';
		key = pn_trim(line);
		value = pn_trim(eq + 1);
		if (!set_key(&p, key, value, &e))
			goto line_error;
	}
	for (i = 0; i < cfg->nsites; i++)
		if (!validate_site(&cfg->sites[i], &e)) {
			pn_err_set(err, "%s:%d: %s", path, cfg->sites[i].line, e.msg);
			goto failed;
		}
	if (cfg->nsites == 0) {
		pn_err_set(err, "%s: no [site NAME] section: nothing to serve", path);
		goto failed;
	}
	free(text);
	free(p.dir);
	return cfg;

line_error:
	pn_err_set(err, "%s:%d: %s", path, p.line, e.msg);
failed:
	free(text);
	free(p.dir);
	pn_cfg_free(cfg);
	return NULL;
}

void
pn_cfg_free(struct pn_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	for (i = 0; i < cfg->nsites; i++) {
		struct pn_site *s = &cfg->sites[i];

		free(s->name);
		free(s->alipay.app_id);
		free(s->alipay.seller_id);
		free(s->alipay.query_key_path);
		free(s->alipay.query_url);
		free(s->alipay.query_app_cert);
		free(s->alipay.query_root_cert);
		free(s->stripe.query_key_path);
		free(s->stripe.query_url);
		free(s->wechatpay.query_key_path);
		free(s->wechatpay.query_cert_serial);
		free(s->wechatpay.query_url);
		free(s->twoc2p.query_url);
		pubkeys_free(s->alipay.keys, s->alipay.nkeys);
		EVP_PKEY_free(s->alipay.test_key);
		EVP_PKEY_free(s->wechatpay.test_key);
		secrets_free(s->stripe.secrets, s->stripe.nsecrets);
		free(s->wechatpay.mchid);
		free(s->wechatpay.appid);
		free(s->wechatpay.public_key_id);
		secrets_free(s->wechatpay.apiv3_keys, s->wechatpay.napiv3_keys);
		secrets_free(s->wechatpay.apiv2_keys, s->wechatpay.napiv2_keys);
		pubkeys_free(s->wechatpay.certs, s->wechatpay.ncerts);
		pubkeys_free(s->wechatpay.public_keys, s->wechatpay.npublic_keys);
		free(s->twoc2p.merchant_id);
		secrets_free(s->twoc2p.secrets, s->twoc2p.nsecrets);
	}
	free(cfg->sites);
	free(cfg->query_ca_file);
	free(cfg->conninfo);
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

bool
pn_cfg_secret_file_ok(const char *path, struct pn_err *err)
{
	return check_secret_perms(path, err);
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
	static struct pn_cfg_keydoc docs[PN_ARRAY_LEN(keydefs)];
	size_t i;

	for (i = 0; i < PN_ARRAY_LEN(keydefs); i++) {
		docs[i].section = keydefs[i].section;
		docs[i].key = keydefs[i].key;
		docs[i].doc = keydefs[i].doc;
	}
	*out = docs;
	return PN_ARRAY_LEN(keydefs);
}

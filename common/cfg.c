/*
 * cfg.c: the INI configuration, declared once in a table.
 */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "cfg.h"
#include "crypto.h"
#include "log.h"

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
	K_ADDRS,	/* struct pn_addr * + size_t count: addresses, ADDR or ADDR/BITS */
	K_URLPATH,	/* char *: an absolute URL path outside /notify/ */
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
static const struct choice fwd_headers[] = {
	{"X-Forwarded-For", PN_FWD_X_FORWARDED_FOR}, {"Forwarded", PN_FWD_FORWARDED}, {NULL, 0}};
static const struct choice twoc2p_hashes[] = {
	{"sha1", PN_2C2P_SHA1}, {"sha256", PN_2C2P_SHA256}, {NULL, 0}};
static const struct choice twoc2p_invoices[] = {
	{"empty", PN_2C2P_INVOICE_EMPTY}, {"order_id", PN_2C2P_INVOICE_ORDER_ID}, {NULL, 0}};
static const struct choice stripe_modes[] = {
	{"live", PN_STRIPE_LIVE}, {"test", PN_STRIPE_TEST}, {NULL, 0}};

struct keydef {
	const char *section;	/* database, limits, log, metrics, site */
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
	{"database", "prepared_statements", K_BOOL, C(prepared_statements), 0, 0, 0, NULL, "on",
	 "on: ingest is a named prepared statement and statement_timeout a session setting; "
	 "off: an unnamed statement with statement_timeout set per transaction (pgbouncer "
	 "pool_mode = transaction)"},
	{"limits", "max_body_bytes", K_INT, C(max_body_bytes), 0, 1024, 16 * 1024 * 1024, NULL,
	 "1048576", "largest request body accepted; larger bodies get 413"},
	{"limits", "read_timeout_ms", K_INT, C(read_timeout_ms), 0, 100, 20000, NULL, "2000",
	 "a request's FastCGI records (parameters and body) or CGI body must arrive whole within "
	 "this; a slower one is dropped (408 when an answer can still be written), so slow "
	 "clients cannot hold the workers; stays well under the providers' 5 s and the 30 s "
	 "stop grace"},
	{"log", "level", K_INT, C(log_level), 0, 0, 2, NULL, "1",
	 "0: errors and rejected requests only, 1: one line per request, 2: debug"},
	{"log", "trusted_proxies", K_ADDRS, C(trusted_proxies), C(ntrusted_proxies), 0, 0, NULL,
	 NULL, "proxies (ADDR or ADDR/BITS) whose forwarded-for header is logged as forwarded_for; "
	 "unset: never logged"},
	{"log", "forwarded_header", K_CHOICE, C(forwarded_header), 0, 0, 0, fwd_headers,
	 "X-Forwarded-For", "the header a trusted proxy sets: X-Forwarded-For or Forwarded"},
	{"metrics", "status_path", K_URLPATH, C(status_path), 0, 0, 0, NULL, NULL,
	 "GET path (or path/<provider>) answered with live counters in Prometheus text format by "
	 "FastCGI receivers; unset: no status path"},
	{"metrics", "allow", K_ADDRS, C(status_allow), C(nstatus_allow), 0, 0, NULL,
	 "127.0.0.1 ::1", "REMOTE_ADDRs (ADDR or ADDR/BITS) the status path answers; others get 403"},
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
	{"site", "stripe.mode", K_CHOICE, S(stripe.mode), 0, 0, 0, stripe_modes, "live",
	 "live or test: an event whose livemode is the other mode is stored mode_mismatch, "
	 "acknowledged, never applied"},
	{"site", "stripe.site_metadata", K_STR, S(stripe.site_metadata), 0, 0, 0, NULL, NULL,
	 "KEY=VALUE that the event object's metadata must carry (metadata.KEY = VALUE); "
	 "required in practice when several sites share one Stripe account, which sends every "
	 "event to every endpoint: an event without it is stored merchant_mismatch"},
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
	{"site", "2c2p.redirect_invoice_no", K_CHOICE, S(twoc2p.redirect_invoice_no), 0, 0, 0,
	 twoc2p_invoices, "empty", "legacy only: what invoice_no carries, empty or order_id "
	 "itself; anything else is refused, because nothing signs where order_id ends"},
	{"site", "2c2p.query_url", K_URL, S(twoc2p.query_url), 0, 0, 0, NULL,
	 "https://pgw.2c2p.com", "paynotify query: the PGW v4 API (sandbox: "
	 "https://sandbox-pgw.2c2p.com); paymentInquiry is signed with 2c2p.secret_key_file"},
	{"site", "2c2p.test_signing", K_BOOL, S(twoc2p.test_signing), 0, 0, 0, NULL, "off",
	 "sandbox sites only: let `paynotify sign` sign test notifications with the site's key"},
};
/* parser.failed keeps one bit per key of this table */
_Static_assert(PN_ARRAY_LEN(keydefs) <= 64, "parser.failed needs more than 64 bits");

/* ---- helpers ------------------------------------------------------------- */

/* One bit per keydef in the per-site mask of keys whose value was refused. */
_Static_assert(PN_ARRAY_LEN(keydefs) <= 64, "the failed-key mask holds 64 keys");

struct parser {
	const char *path;
	char   *dir;		/* directory of the config file, for relative paths */
	int	line;
	struct pn_config *cfg;
	struct pn_cfg_findings *fd;
	struct pn_site *site;	/* current [site] section, or NULL */
	const char *section;	/* current section kind */
	bool	skip;		/* the current section header was refused: ignore its keys */
	/* keys seen in the current section, to refuse duplicates */
	const char *seen[PN_ARRAY_LEN(keydefs)];
	size_t	nseen;
	uint64_t *failed;	/* per site (same index): keys whose value was refused */
	bool	isolate;	/* a site's key-material error disables that site only */
};

/* ---- findings ------------------------------------------------------------ */

void
pn_cfg_finding_add(struct pn_cfg_findings *f, enum pn_cfg_severity severity, const char *file,
		   int line, const char *fmt, ...)
{
	struct pn_cfg_finding *fi;
	va_list ap;
	char	buf[1024];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	f->v = pn_xrealloc(f->v, (f->n + 1) * sizeof(*f->v));
	fi = &f->v[f->n++];
	fi->severity = severity;
	fi->file = file ? pn_xstrdup(file) : NULL;
	fi->line = line;
	fi->msg = pn_xstrdup(buf);
}

size_t
pn_cfg_findings_count(const struct pn_cfg_findings *f, enum pn_cfg_severity severity)
{
	size_t	i, n = 0;

	for (i = 0; i < f->n; i++)
		if (f->v[i].severity == severity)
			n++;
	return n;
}

char *
pn_cfg_finding_text(const struct pn_cfg_finding *fi)
{
	if (fi->file && fi->line > 0)
		return pn_xasprintf("%s:%d: %s", fi->file, fi->line, fi->msg);
	if (fi->file)
		return pn_xasprintf("%s: %s", fi->file, fi->msg);
	return pn_xstrdup(fi->msg);
}

void
pn_cfg_findings_free(struct pn_cfg_findings *f)
{
	size_t i;

	if (f == NULL)
		return;
	for (i = 0; i < f->n; i++) {
		free(f->v[i].file);
		free(f->v[i].msg);
	}
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

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

/* "name:3f9a1c2e": base name and the first PN_KEY_FP_HEX hex digits of SHA-256(data). */
static char *
make_key_id(const char *path, const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char	hex[PN_KEY_FP_HEX + 1];
	int	i;

	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < PN_KEY_FP_HEX / 2)
		pn_fatal("could not compute SHA-256");
	for (i = 0; i < PN_KEY_FP_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return pn_xasprintf("%s:%s", base_name(path), hex);
}

static void
add_file(struct parser *p, const char *path, bool secret)
{
	struct pn_config *cfg = p->cfg;

	cfg->files = pn_xrealloc(cfg->files, (cfg->nfiles + 1) * sizeof(*cfg->files));
	cfg->files[cfg->nfiles].path = pn_xstrdup(path);
	cfg->files[cfg->nfiles].line = p->line;
	cfg->files[cfg->nfiles].secret = secret;
	cfg->nfiles++;
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
		(*list)[*n].id = make_key_id(path, line, l);
		(*list)[*n].line = lineno;
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

/*
 * What the file at path holds, when it is the wrong kind of key for key (a
 * private key where a public one belongs, or the reverse): a sentence saying
 * so and what belongs there; NULL when it is not that mistake.
 */
static const char *
wrong_kind(const char *path, const char *key, bool want_private)
{
	char   *text = NULL;
	size_t	len = 0;
	enum pn_key_kind kind;
	struct pn_err e;

	if (!pn_read_file(path, 65536, &text, &len, &e))
		return NULL;
	kind = pn_key_text_kind(text, len);
	OPENSSL_cleanse(text, len);
	free(text);
	if (!want_private && kind == PN_KEY_KIND_PRIVATE) {
		if (strncmp(key, "alipay.", 7) == 0)
			return "this is a private key (your application's private key?), not Alipay's "
			       "public key: copy the Alipay public key (支付宝公钥) or "
			       "alipayCertPublicKey_RSA2.crt from the Alipay console, and keep the "
			       "private key off the receiver";
		return "this is a private key (your merchant API key?), not WeChat Pay's public key "
		       "or platform certificate: download those from the merchant platform, and keep "
		       "the private key off the receiver";
	}
	if (want_private && (kind == PN_KEY_KIND_PUBLIC || kind == PN_KEY_KIND_CERTIFICATE))
		return kind == PN_KEY_KIND_PUBLIC
		       ? "this is a public key: test signing needs the matching private key (PEM)"
		       : "this is a certificate: test signing needs the matching private key (PEM)";
	return NULL;
}

/*
 * min_bits: 2048 for every key, except Alipay's (1024), whose floor depends
 * on alipay.sign_type, which may come later in the section: validate_site
 * then requires 2048 for RSA2 and accepts 1024 for the legacy RSA.
 */
static bool
load_pubkey(const char *path, const char *key, int min_bits, struct pn_pubkey **list,
	    size_t *n,
	    struct pn_err *err)
{
	struct pn_pubkey k;
	unsigned char *der = NULL;
	const char *why;
	int	derlen;

	memset(&k, 0, sizeof(k));
	k.pkey = pn_pubkey_load_bits(path, min_bits, &k.serial, &k.not_after, err);
	if (k.pkey == NULL) {
		if ((why = wrong_kind(path, key, false)) != NULL)
			pn_err_set(err, "could not load key \"%s\" for \"%s\": %s", path, key, why);
		else
			pn_err_prefix(err, "could not load key \"%s\"", path);
		return false;
	}
	derlen = i2d_PUBKEY(k.pkey, &der);
	if (derlen <= 0)
		pn_fatal("could not encode the public key of \"%s\"", path);
	k.path = pn_xstrdup(path);
	k.id = make_key_id(path, der, (size_t)derlen);
	OPENSSL_free(der);
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

/* "ADDR" or "ADDR/BITS", IPv4 or IPv6; host bits beyond the prefix must be 0. */
static bool
parse_addr(const char *word, struct pn_addr *a)
{
	char	buf[INET6_ADDRSTRLEN + 8], *slash;
	int64_t	bits;
	unsigned max, i;

	if (strlen(word) >= sizeof(buf))
		return false;
	memset(a, 0, sizeof(*a));
	snprintf(buf, sizeof(buf), "%s", word);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, a->bytes) == 1)
		a->family = AF_INET, max = 32;
	else if (inet_pton(AF_INET6, buf, a->bytes) == 1)
		a->family = AF_INET6, max = 128;
	else
		return false;
	a->bits = max;
	if (slash) {
		if (!pn_parse_i64(slash, &bits) || bits < 0 || bits > max)
			return false;
		a->bits = (unsigned)bits;
	}
	for (i = a->bits; i < max; i++)
		if (a->bytes[i / 8] & (0x80 >> (i % 8)))
			return false;	/* 10.0.0.1/8: a typo for 10.0.0.0/8? */
	return true;
}

bool
pn_addr_match(const struct pn_addr *list, size_t n, const char *text)
{
	unsigned char b[16];
	int	family;
	size_t	i;

	if (text == NULL || strlen(text) > INET6_ADDRSTRLEN)
		return false;
	if (inet_pton(AF_INET, text, b) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, text, b) == 1) {
		static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		family = AF_INET6;
		if (memcmp(b, mapped, 12) == 0) {
			memmove(b, b + 12, 4);
			family = AF_INET;
		}
	} else
		return false;
	for (i = 0; i < n; i++) {
		const struct pn_addr *a = &list[i];
		unsigned full = a->bits / 8, rest = a->bits % 8;

		if (a->family != family || memcmp(a->bytes, b, full) != 0)
			continue;
		if (rest && ((a->bytes[full] ^ b[full]) & (0xff << (8 - rest)) & 0xff))
			continue;
		return true;
	}
	return false;
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
	case K_ADDRS: {
		struct pn_addr **list = (struct pn_addr **)field;
		size_t *count = (size_t *)((char *)base + kd->count_off);
		char   *w, *save = NULL;

		free(*list);
		*list = NULL;
		*count = 0;
		for (w = strtok_r(value, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
			struct pn_addr a;

			if (!parse_addr(w, &a)) {
				pn_err_set(err, "invalid address \"%s\" in \"%s\": expected an IPv4 or "
					   "IPv6 address, optionally /BITS (127.0.0.1, ::1, 10.0.0.0/8)",
					   w, kd->key);
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
	case K_URLPATH: {
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
		free(*(char **)field);
		*(char **)field = pn_xstrdup(value);
		return true;
	}
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

		const char *why;

		if (check_secret_perms(path, err)) {
			add_file(p, path, true);
			k = pn_privkey_load(path, err);
			if (k == NULL && (why = wrong_kind(path, kd->key, true)) != NULL)
				pn_err_set(err, "could not load \"%s\" for \"%s\": %s", path, kd->key,
					   why);
		}
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
		int	min_bits = strcmp(kd->key, "alipay.public_key_file") == 0
		    ? PN_RSA_LEGACY_MIN_BITS : PN_RSA_MIN_BITS;

		if (p == NULL) {
			pn_err_set(err, "\"%s\" has no default", kd->key);
			return false;
		}
		for (w = strtok_r(value, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			char   *path = resolve_path(p, w);
			bool	ok;

			add_file(p, path, kd->type == K_SECRETS);
			if (kd->type == K_SECRETS)
				ok = load_secrets(path, (struct pn_secret **)field, count, err);
			else
				ok = load_pubkey(path, kd->key, min_bits, (struct pn_pubkey **)field,
						 count, err);
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
	p->section = NULL;
	p->skip = true;		/* until the header is accepted */
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
		p->failed = pn_xrealloc(p->failed, (p->cfg->nsites + 1) * sizeof(*p->failed));
		p->failed[p->cfg->nsites] = 0;
		s = &p->cfg->sites[p->cfg->nsites++];
		memset(s, 0, sizeof(*s));
		s->name = pn_xstrdup(site);
		s->file = p->cfg->path;
		s->line = p->line;
		apply_defaults("site", s);
		p->site = s;
		p->section = "site";
		p->skip = false;
		return true;
	}
	sp = name;
	if (strcmp(sp, "database") == 0 || strcmp(sp, "limits") == 0 || strcmp(sp, "log") == 0
	    || strcmp(sp, "metrics") == 0 || strcmp(sp, "query") == 0) {
		for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
			if (strcmp(keydefs[i].section, sp) == 0) {
				p->section = keydefs[i].section;
				p->skip = false;
				return true;
			}
	}
	pn_err_set(err, "unknown section \"[%s]\" (expected [database], [limits], [log], "
		   "[metrics], [query] or [site NAME])", name);
	return false;
}

/* Does a secret file named in value exist with group or other access? */
static bool
loose_secret(const struct parser *p, const struct keydef *kd, char *value)
{
	char   *w, *save = NULL;
	bool	loose = false;

	if (kd->type == K_PUBKEYS)
		return false;
	for (w = strtok_r(value, " \t", &save); w && !loose; w = strtok_r(NULL, " \t", &save)) {
		char   *path = resolve_path(p, w);
		struct stat st;

		loose = stat(path, &st) == 0 && (st.st_mode & 077) != 0;
		free(path);
	}
	return loose;
}

static bool
set_key(struct parser *p, char *key, char *value, struct pn_err *err)
{
	const struct keydef *kd = NULL;
	size_t	i;
	bool	files, isolated;
	char   *copy;

	if (p->skip)
		return true;	/* its section header was refused (and said so) */
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
	files = kd->type == K_SECRETS || kd->type == K_PUBKEYS || kd->type == K_PRIVKEY;
	copy = p->isolate && files ? pn_xstrdup(value) : NULL;	/* assign() splits value */
	if (assign(p, kd, p->site ? (void *)p->site : (void *)p->cfg, value, err)) {
		free(copy);
		return true;
	}
	if (p->site != NULL)
		p->failed[p->cfg->nsites - 1] |= UINT64_C(1) << (kd - keydefs);
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

/* Was a value for site key `key` given and refused (so "is required" would mislead)? */
static bool
key_failed(uint64_t failed, const char *key)
{
	size_t i;

	for (i = 0; i < PN_ARRAY_LEN(keydefs); i++)
		if (strcmp(keydefs[i].section, "site") == 0 && strcmp(keydefs[i].key, key) == 0)
			return (failed & (UINT64_C(1) << i)) != 0;
	pn_fatal("no site key \"%s\"", key);
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

/* A finding about site s, at its [site] line: "site \"NAME\": ...". */
static void site_finding(struct pn_cfg_findings *fd, enum pn_cfg_severity sev,
			 const struct pn_site *s, const char *fmt, ...) PN_PRINTF(4, 5);

static void
site_finding(struct pn_cfg_findings *fd, enum pn_cfg_severity sev, const struct pn_site *s,
	     const char *fmt, ...)
{
	va_list ap;
	char	buf[1024];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pn_cfg_finding_add(fd, sev, s->file, s->line, "site \"%s\": %s", s->name, buf);
}

/* Per-provider completeness of one site: every problem into fd. */
static void
validate_site(const struct pn_site *s, uint64_t failed, struct pn_cfg_findings *fd)
{
#define REQUIRE(cond, key, what) \
	do { \
		if (!(cond) && !key_failed(failed, key)) \
			site_finding(fd, PN_CFG_ERROR, s, "%s", what); \
	} while (0)
	size_t i;

	if (!s->alipay.configured && !s->stripe.configured && !s->wechatpay.configured
	    && !s->twoc2p.configured && failed == 0)
		site_finding(fd, PN_CFG_ERROR, s, "no provider is configured (set alipay.*, "
			     "stripe.*, wechatpay.* or 2c2p.* keys)");
	if (s->alipay.configured) {
		REQUIRE(s->alipay.app_id, "alipay.app_id", "alipay.app_id is required for Alipay");
		REQUIRE(s->alipay.seller_id, "alipay.seller_id",
			"alipay.seller_id is required for Alipay");
		REQUIRE(s->alipay.nkeys > 0, "alipay.public_key_file",
			"alipay.public_key_file is required for Alipay");
		if ((s->alipay.query_app_cert == NULL) != (s->alipay.query_root_cert == NULL))
			site_finding(fd, PN_CFG_ERROR, s, "alipay.query_app_cert_file and "
				     "alipay.query_root_cert_file go together");
		for (i = 0; i < s->alipay.nkeys; i++) {
			int bits = EVP_PKEY_get_bits(s->alipay.keys[i].pkey);

			if (s->alipay.sign_type != PN_ALIPAY_RSA2 || bits >= PN_RSA_MIN_BITS)
				continue;
			site_finding(fd, PN_CFG_ERROR, s, "Alipay key %s has %d bits; alipay.sign_type "
				     "RSA2 needs at least %d (only the legacy RSA accepts %d)",
				     s->alipay.keys[i].id, bits, PN_RSA_MIN_BITS,
				     PN_RSA_LEGACY_MIN_BITS);
		}
	}
	if (s->stripe.configured) {
		REQUIRE(s->stripe.nsecrets > 0, "stripe.secret_files",
			"stripe.secret_files is required for Stripe");
		if (s->stripe.site_metadata != NULL && !pn_cfg_stripe_marker(s, NULL, NULL)) {
			site_finding(fd, PN_CFG_ERROR, s, "invalid stripe.site_metadata \"%s\": "
				     "expected KEY=VALUE, KEY at most 40 letters, digits, '_' or '-', "
				     "VALUE 1 to 500 characters", s->stripe.site_metadata);
		}
	}
	if (s->wechatpay.configured) {
		bool v3 = s->wechatpay.napiv3_keys > 0 || key_failed(failed, "wechatpay.apiv3_key_file");

		REQUIRE(s->wechatpay.mchid, "wechatpay.mchid",
			"wechatpay.mchid is required for WeChat Pay");
		REQUIRE(s->wechatpay.appid, "wechatpay.appid",
			"wechatpay.appid is required for WeChat Pay");
		REQUIRE(v3 || s->wechatpay.napiv2_keys > 0, "wechatpay.apiv2_key_file",
			"WeChat Pay needs wechatpay.apiv3_key_file (API v3) or "
			"wechatpay.apiv2_key_file (API v2)");
		REQUIRE((s->wechatpay.public_key_id == NULL) == (s->wechatpay.npublic_keys == 0)
			|| key_failed(failed, "wechatpay.public_key_id"), "wechatpay.public_key_file",
			"wechatpay.public_key_id and wechatpay.public_key_file go together");
		REQUIRE(!v3 || s->wechatpay.ncerts > 0 || s->wechatpay.npublic_keys > 0
			|| key_failed(failed, "wechatpay.public_key_file"),
			"wechatpay.platform_cert_files",
			"API v3 needs wechatpay.platform_cert_files or wechatpay.public_key_file");
		for (i = 0; i < s->wechatpay.napiv3_keys; i++) {
			const struct pn_secret *k = &s->wechatpay.apiv3_keys[i];

			if (k->len != 32)
				site_finding(fd, PN_CFG_ERROR, s, "APIv3 key %s (line %d) is %zu bytes "
					     "long; it must be exactly 32: copy the APIv3 key (32 "
					     "characters) from the merchant platform (API安全); it is "
					     "not the APIv2 key", k->id, k->line, k->len);
		}
		for (i = 0; i < s->wechatpay.ncerts; i++)
			if (s->wechatpay.certs[i].serial == NULL)
				site_finding(fd, PN_CFG_ERROR, s, "wechatpay.platform_cert_files must "
					     "name X.509 certificates (%s is a bare key: give it as "
					     "wechatpay.public_key_file with its "
					     "wechatpay.public_key_id)", s->wechatpay.certs[i].path);
		if ((s->wechatpay.query_key_path == NULL) != (s->wechatpay.query_cert_serial == NULL))
			site_finding(fd, PN_CFG_ERROR, s, "wechatpay.query_private_key_file and "
				     "wechatpay.query_cert_serial go together");
	}
	if (s->twoc2p.configured) {
		REQUIRE(s->twoc2p.merchant_id, "2c2p.merchant_id",
			"2c2p.merchant_id is required for 2C2P");
		REQUIRE(s->twoc2p.nsecrets > 0, "2c2p.secret_key_file",
			"2c2p.secret_key_file is required for 2C2P");
	}
#undef REQUIRE
}

static bool
all_hex(const unsigned char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (pn_hexval(s[i]) < 0)
			return false;
	return n > 0;
}

/*
 * The forms the providers give their secrets, checked so that a secret
 * pasted into the wrong place is caught before the first notification
 * fails.  Only what can never verify is a site error; a form that is merely
 * unusual is a warning.  Never quote secret bytes: ids, lengths, prefixes
 * of published forms (sk_, whsec_) only.
 */
static void
check_secret_forms(const struct pn_site *s, struct pn_cfg_findings *fd)
{
	size_t i;

	for (i = 0; i < s->stripe.nsecrets; i++) {
		const struct pn_secret *k = &s->stripe.secrets[i];
		const char *d = (const char *)k->data;
		const char *what = NULL;

		if (k->len >= 6 && memcmp(d, "whsec_", 6) == 0)
			continue;
		if (k->len >= 3 && (memcmp(d, "sk_", 3) == 0 || memcmp(d, "rk_", 3) == 0))
			what = memcmp(d, "sk_", 3) == 0 ? "a Stripe secret API key (sk_...)"
			       : "a Stripe restricted API key (rk_...)";
		else if (k->len >= 3 && memcmp(d, "pk_", 3) == 0)
			what = "a Stripe publishable API key (pk_...)";
		if (what)
			site_finding(fd, PN_CFG_SITE_ERROR, s, "stripe.secret_files %s (line %d) is "
				     "%s, not a webhook signing secret: every event would fail to "
				     "verify; copy the endpoint's signing secret (whsec_...) from the "
				     "dashboard (Developers, Webhooks, the endpoint, Signing secret)",
				     k->id, k->line, what);
		else
			site_finding(fd, PN_CFG_SITE_ERROR, s, "stripe.secret_files %s (line %d) does "
				     "not start with \"whsec_\": Stripe's endpoint signing secrets "
				     "do, and the prefix is part of the key; copy the whole signing "
				     "secret (whsec_...) from the dashboard", k->id, k->line);
	}
	for (i = 0; i < s->wechatpay.napiv2_keys; i++) {
		const struct pn_secret *k = &s->wechatpay.apiv2_keys[i];

		if (k->len != 32)
			site_finding(fd, PN_CFG_SITE_ERROR, s, "APIv2 key %s (line %d) is %zu "
				     "characters long; WeChat Pay's APIv2 keys are exactly 32: copy "
				     "the whole key from the merchant platform (API安全, API密钥)",
				     k->id, k->line, k->len);
	}
	for (i = 0; i < s->wechatpay.napiv3_keys; i++) {
		const struct pn_secret *v3 = &s->wechatpay.apiv3_keys[i];
		size_t j;

		for (j = 0; j < s->wechatpay.napiv2_keys; j++) {
			const struct pn_secret *v2 = &s->wechatpay.apiv2_keys[j];

			if (v3->len == v2->len && pn_ct_equal(v3->data, v2->data, v2->len))
				site_finding(fd, PN_CFG_WARNING, s, "APIv3 key %s and APIv2 key %s "
					     "are the same key: they are two different keys on the "
					     "merchant platform; check that each file holds its own",
					     v3->id, v2->id);
		}
	}
	if (s->twoc2p.api == PN_2C2P_JWT)
		for (i = 0; i < s->twoc2p.nsecrets; i++) {
			const struct pn_secret *k = &s->twoc2p.secrets[i];

			if (k->len != 64 || !all_hex(k->data, k->len))
				site_finding(fd, PN_CFG_WARNING, s, "2c2p.secret_key_file %s (line "
					     "%d) %s: 2C2P's PGW v4 merchant secret keys are 64 hex "
					     "digits; check that the whole key was copied (it is used "
					     "as text, not hex-decoded)", k->id, k->line,
					     k->len != 64 ? "is not 64 characters long"
					     : "has characters that are not hex digits");
		}
}

static struct pn_config *
load(const char *path, unsigned flags, struct pn_cfg_findings *fd)
{
	struct parser p;
	char   *text = NULL, *line, *next, *dircopy;
	size_t	len = 0, i;
	struct pn_config *cfg = pn_xcalloc(1, sizeof(*cfg));
	struct pn_err e;

	memset(&p, 0, sizeof(p));
	p.isolate = (flags & PN_CFG_ISOLATE_SITES) != 0;
	cfg->path = pn_xstrdup(path);
	p.path = cfg->path;
	p.cfg = cfg;
	p.fd = fd;
	dircopy = pn_xstrdup(path);
	p.dir = pn_xstrdup(dirname(dircopy));
	free(dircopy);
	apply_defaults("database", cfg);
	apply_defaults("limits", cfg);
	apply_defaults("log", cfg);
	apply_defaults("metrics", cfg);
	apply_defaults("query", cfg);

	if (!pn_read_file(path, CFG_MAX_FILE, &text, &len, &e)) {
		pn_cfg_finding_add(fd, PN_CFG_ERROR, NULL, 0, "%s", e.msg);
		goto failed;
	}
	add_file(&p, path, false);
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
				p.skip = true;
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
		if (set_key(&p, key, value, &e))
			continue;
line_error:
		pn_cfg_finding_add(fd, PN_CFG_ERROR, path, p.line, "%s", e.msg);
	}
	for (i = 0; i < cfg->nsites; i++) {
		struct pn_site *site = &cfg->sites[i];
		size_t	before = fd->n, j;

		validate_site(site, p.failed[i], fd);
		check_secret_forms(site, fd);
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
	if (cfg->nsites == 0 && pn_cfg_findings_count(fd, PN_CFG_ERROR) == 0)
		pn_cfg_finding_add(fd, PN_CFG_ERROR, path, 0,
				   "no [site NAME] section: nothing to serve");
	if (pn_cfg_findings_count(fd, PN_CFG_ERROR) > 0)
		goto failed;
	free(text);
	free(p.dir);
	free(p.failed);
	return cfg;

failed:
	free(text);
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
pn_cfg_load(const char *path, struct pn_err *err)
{
	return pn_cfg_load_flags(path, 0, err);
}

struct pn_config *
pn_cfg_load_flags(const char *path, unsigned flags, struct pn_err *err)
{
	struct pn_cfg_findings fd = {NULL, 0};
	struct pn_config *cfg = load(path, flags, &fd);
	size_t	i, nerr = pn_cfg_findings_count(&fd, PN_CFG_ERROR);

	for (i = 0; i < fd.n; i++) {
		char   *t = pn_cfg_finding_text(&fd.v[i]);

		if (cfg == NULL && fd.v[i].severity == PN_CFG_ERROR) {
			if (nerr > 1)
				pn_err_set(err, "%s (and %zu more error%s: `paynotify check-config` "
					   "lists them all)", t, nerr - 1, nerr == 2 ? "" : "s");
			else
				pn_err_set(err, "%s", t);
			free(t);
			break;
		}
		if (cfg != NULL && fd.v[i].severity == PN_CFG_SITE_ERROR)
			pn_log(PN_LOG_ERROR, "%s", t);
		else if (cfg != NULL && fd.v[i].severity == PN_CFG_WARNING)
			pn_log(PN_LOG_INFO, "configuration warning: %s", t);
		free(t);
	}
	pn_cfg_findings_free(&fd);
	return cfg;
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
		free(s->disabled);
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
		free(s->stripe.site_metadata);
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
	for (i = 0; i < cfg->nfiles; i++)
		free(cfg->files[i].path);
	free(cfg->files);
	free(cfg->sites);
	free(cfg->trusted_proxies);
	free(cfg->status_path);
	free(cfg->status_allow);
	free(cfg->query_ca_file);
	free(cfg->conninfo);
	free(cfg->path);
	free(cfg);
}

bool
pn_cfg_stripe_marker(const struct pn_site *site, const char **key, size_t *key_len)
{
	const char *m = site->stripe.site_metadata, *eq, *p;

	if (m == NULL || (eq = strchr(m, '=')) == NULL || eq == m || eq - m > 40
	    || eq[1] == '\0' || strlen(eq + 1) > 500)
		return false;
	for (p = m; p < eq; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
		      || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	if (key)
		*key = m;
	if (key_len)
		*key_len = (size_t)(eq - m);
	return true;
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

/* Does a key id of the site equal id[0..idlen) (base_only: have that base name)? */
static bool
site_has_id(const struct pn_site *s, const char *id, size_t idlen, bool base_only)
{
	const struct pn_secret *sec[] = {s->stripe.secrets, s->wechatpay.apiv3_keys,
					 s->wechatpay.apiv2_keys, s->twoc2p.secrets};
	const size_t nsec[] = {s->stripe.nsecrets, s->wechatpay.napiv3_keys,
			       s->wechatpay.napiv2_keys, s->twoc2p.nsecrets};
	const struct pn_pubkey *pub[] = {s->alipay.keys, s->wechatpay.certs,
					 s->wechatpay.public_keys};
	const size_t npub[] = {s->alipay.nkeys, s->wechatpay.ncerts, s->wechatpay.npublic_keys};
	size_t	i, j;

#define SAME(cand) \
	(base_only ? (strchr(cand, ':') && (size_t)(strrchr(cand, ':') - (cand)) == idlen \
		      && strncmp(cand, id, idlen) == 0) \
	 : (strlen(cand) == idlen && strncmp(cand, id, idlen) == 0))
	for (i = 0; i < PN_ARRAY_LEN(sec); i++)
		for (j = 0; j < nsec[i]; j++)
			if (SAME(sec[i][j].id))
				return true;
	for (i = 0; i < PN_ARRAY_LEN(pub); i++)
		for (j = 0; j < npub[i]; j++)
			if (SAME(pub[i][j].id) || (!base_only && pub[i][j].serial
						   && SAME(pub[i][j].serial)))
				return true;
	if (!base_only && s->wechatpay.public_key_id && SAME(s->wechatpay.public_key_id))
		return true;
#undef SAME
	return false;
}

/* "name:" followed by exactly PN_KEY_FP_HEX lower-case hex digits. */
static bool
is_fingerprint_id(const char *id, size_t n)
{
	size_t i;

	if (n < PN_KEY_FP_HEX + 2 || id[n - PN_KEY_FP_HEX - 1] != ':')
		return false;
	for (i = n - PN_KEY_FP_HEX; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

enum pn_key_state
pn_cfg_site_key_state(const struct pn_site *s, const char *key_id)
{
	enum pn_key_state state = PN_KEY_CONFIGURED;
	const char *part = key_id, *end;

	if (s == NULL || key_id == NULL || *key_id == '\0')
		return PN_KEY_UNKNOWN;
	for (; part; part = *end ? end + 1 : NULL) {
		size_t	n, base;
		const char *colon;

		end = strchr(part, '/');	/* WeChat Pay v3: "signing key/APIv3 key" */
		if (end == NULL)
			end = part + strlen(part);
		n = (size_t)(end - part);
		if (site_has_id(s, part, n, false))
			continue;
		if (is_fingerprint_id(part, n))
			return PN_KEY_GONE;
		/* An id from an earlier build: "file:LINE" (a secret) or "file" (a public
		 * key).  Gone if no key comes from that file any more; otherwise that
		 * file's keys may or may not include the one it named. */
		colon = memchr(part, ':', n);
		base = colon ? (size_t)(colon - part) : n;
		if (!site_has_id(s, part, base, true))
			return PN_KEY_GONE;
		state = PN_KEY_UNKNOWN;
	}
	return state;
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

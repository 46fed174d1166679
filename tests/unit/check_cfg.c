/*
 * check_cfg.c: configuration loading, validation and error messages.
 */
#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "cfg.h"
#include "fixture.h"
#include "suites.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/pn-cfg-XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static const char *
write_file(const char *name, const char *text, mode_t mode)
{
	static char path[256];
	FILE   *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert(f != NULL);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
	return path;
}

/* Load text as a config; returns the error message ("" on success). */
static const char *
load(const char *text)
{
	static struct pn_err err;
	struct pn_config *cfg;

	cfg = pn_cfg_load(write_file("pn.conf", text, 0644), &err);
	if (cfg == NULL)
		return err.msg;
	pn_cfg_free(cfg);
	return "";
}

START_TEST(test_good_config)
{
	struct pn_err err;
	struct pn_config *cfg;
	const struct pn_site *s;
	char	keypath[512];

	write_file("whsec", "whsec_one\n\nwhsec_two\n", 0600);
	snprintf(keypath, sizeof(keypath), "%s", fixture_path("unit/keys/test-a.pub.pem"));
	{
		char text[2048];

		snprintf(text, sizeof(text),
			 "; comment\n# another\n[database]\nconninfo = host=/tmp dbname=x ; inline\n"
			 "statement_timeout_ms = 2500\n\n[limits]\nmax_body_bytes = 65536\n"
			 "[site shop-a]\nstripe.secret_files = whsec\n"
			 "alipay.app_id = 2021\nalipay.seller_id = 2088\nalipay.public_key_file = %s\n"
			 "alipay.sign_type = RSA\n", keypath);
		cfg = pn_cfg_load(write_file("pn.conf", text, 0644), &err);
	}
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert_str_eq(cfg->conninfo, "host=/tmp dbname=x");
	ck_assert_int_eq(cfg->statement_timeout_ms, 2500);
	ck_assert_int_eq(cfg->connect_timeout_s, 2);
	ck_assert_int_eq(cfg->max_body_bytes, 65536);
	ck_assert_int_eq(cfg->read_timeout_ms, 2000);
	s = pn_cfg_site(cfg, "shop-a");
	ck_assert(s != NULL);
	ck_assert(s->stripe.configured && s->alipay.configured);
	ck_assert(!s->wechatpay.configured && !s->twoc2p.configured);
	ck_assert_uint_eq(s->stripe.nsecrets, 2);
	/* base name and the first 8 hex of SHA-256("whsec_two"): not the line */
	ck_assert_str_eq(s->stripe.secrets[1].id, "whsec:78488485");
	ck_assert_int_eq(s->stripe.secrets[1].line, 3);
	ck_assert_uint_eq(cfg->nfiles, 3);	/* the file itself, the secret, the key */
	ck_assert(!cfg->files[0].secret && cfg->files[1].secret && !cfg->files[2].secret);
	ck_assert_int_eq(s->stripe.tolerance_s, 300);
	ck_assert_int_eq(s->alipay.sign_type, PN_ALIPAY_RSA);
	ck_assert(pn_cfg_site(cfg, "shop-b") == NULL);
	pn_cfg_free(cfg);
}
END_TEST

static const struct {
	const char *text;
	const char *error;	/* substring of the message */
} bad[] = {
	{"[site a]\nstripe.secret_files = loose\n", "only the receivers' group (paynotify) may read it"},
	{"[site a]\nstripe.secret_files = missing\n", "could not stat secret file"},
	{"[database]\nconninfo = x\n", "no [site NAME] section"},
	{"[site a]\nstripe.tolerance_s = 5\n", "stripe.secret_files is required"},
	{"[site a]\nstripe.secret_files = ok\nstripe.secret_files = ok\n", "pn.conf:3: key \"stripe.secret_files\" is set twice"},
	{"[site a]\nstripe.secret_file = ok\n", "pn.conf:2: unknown key \"stripe.secret_file\""},
	{"[databse]\n", "pn.conf:1: unknown section"},
	{"conninfo = x\n", "pn.conf:1: key \"conninfo\" outside of any section"},
	{"[site a]\nno equals sign\n", "pn.conf:2: expected \"key = value\""},
	{"[site a\n", "pn.conf:1: malformed section header"},
	{"[site a/b]\n", "invalid site name"},
	{"[site a]\nstripe.secret_files = ok\n[site a]\n", "pn.conf:3: site \"a\" is defined twice"},
	{"[limits]\nmax_body_bytes = 12\n", "pn.conf:2: invalid value \"12\" for \"max_body_bytes\""},
	{"[database]\nstatement_timeout_ms = soon\n", "expected an integer"},
	{"[limits]\nread_timeout_ms = 50\n", "pn.conf:2: invalid value \"50\" for \"read_timeout_ms\""},
	{"[limits]\nread_timeout_ms = 30000\n", "pn.conf:2: invalid value \"30000\" for \"read_timeout_ms\""},
	{"[limits]\nread_timeout_ms = 2s\n", "expected an integer"},
	{"[site a]\nalipay.sign_type = MD5\n", "expected one of RSA2, RSA"},
	{"[site a]\nalipay.app_id = 1\n", "pn.conf:1: site \"a\": alipay.seller_id is required"},
	{"[site a]\nwechatpay.v2_sign_type = SHA1\n", "expected some of MD5, HMAC-SHA256"},
	{"[site a]\n2c2p.api = soap\n", "expected one of jwt, redirect"},
	{"[site a]\nstripe.secret_files = empty\n", "names no usable secret"},
	{"[site a]\nalipay.public_key_file = ok\n", "could not load key"},
	{"[log]\ntrusted_proxies = 10.0.0.300\n", "pn.conf:2: invalid address \"10.0.0.300\""},
	{"[log]\ntrusted_proxies = nginx.local\n", "expected an IPv4 or IPv6 address"},
	{"[log]\ntrusted_proxies = 10.0.0.1/8\n", "invalid address \"10.0.0.1/8\""},
	{"[log]\ntrusted_proxies = ::1/129\n", "invalid address \"::1/129\""},
	{"[log]\ntrusted_proxies = ,\n", "empty value for \"trusted_proxies\""},
	{"[log]\nforwarded_header = X-Real-IP\n", "expected one of X-Forwarded-For, Forwarded"},
	{"[metrics]\nstatus_path = status\n", "expected an absolute path"},
	{"[metrics]\nstatus_path = /notify/stripe/status\n", "must not be under /notify/"},
	{"[metrics]\nstatus_path = /a/../notify/x\n", "no // or /."},
	{"[metrics]\nstatus_path = /st atus\n", "invalid character ' '"},
	{"[metrics]\nallow = 127.0.0.1 localhost\n", "invalid address \"localhost\" in \"allow\""},
	{"[metric]\n", "unknown section"},
	{"[site a]\nstripe.secret_files = ok\nstripe.mode = sandbox\n", "expected one of live, test"},
	{"[site a]\nstripe.secret_files = ok\nstripe.site_metadata = shop-a\n",
	 "invalid stripe.site_metadata \"shop-a\""},
	{"[site a]\nstripe.secret_files = ok\nstripe.site_metadata = =shop-a\n",
	 "invalid stripe.site_metadata"},
	{"[site a]\nstripe.secret_files = ok\nstripe.site_metadata = site=\n",
	 "invalid stripe.site_metadata"},
	{"[site a]\nstripe.secret_files = ok\nstripe.site_metadata = a.b=shop\n",
	 "invalid stripe.site_metadata"},
	{"[site a]\n2c2p.redirect_invoice_no = invoice\n", "expected one of empty, order_id"},
	{"[site a]\nstripe.query_url = http://api.stripe.com\n", "expected an https:// URL"},
	{"[site a]\nstripe.query_url = https://\n", "expected an https:// URL"},
	{"[site a]\n2c2p.query_url = https://pgw.2c2p.com/?x=1\n", "without query or fragment"},
	{"[query]\ntimeout_ms = 10\n", "pn.conf:2: invalid value \"10\" for \"timeout_ms\""},
	{"[site a]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\nwechatpay.apiv2_key_file = ok\n"
	 "wechatpay.query_cert_serial = 5157F0\n", "go together"},
	{"[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = pub\n"
	 "alipay.query_root_cert_file = r.crt\n", "go together"},
};

START_TEST(test_bad_configs)
{
	const char *msg;

	write_file("loose", "whsec_x\n", 0640);
	write_file("ok", "whsec_x\n", 0600);
	write_file("empty", "\n\n", 0600);
	{
		char   *pem = NULL;
		size_t	len = 0;
		struct pn_err e;

		if (pn_read_file(fixture_path("unit/keys/test-a.pub.pem"), 1 << 16, &pem, &len, &e)) {
			write_file("pub", pem, 0644);
			free(pem);
		}
	}
	msg = load(bad[_i].text);
	ck_assert_msg(strstr(msg, bad[_i].error) != NULL, "case %d: expected \"%s\" in \"%s\"", _i,
		      bad[_i].error, msg);
	/* every error names the file */
	ck_assert_msg(strstr(msg, "pn.conf") != NULL || strstr(msg, dir) != NULL, "%s", msg);
}
END_TEST

START_TEST(test_stripe_binding_keys)
{
	struct pn_err err;
	struct pn_config *cfg;
	const struct pn_site *s;
	const char *key;
	size_t	klen;

	write_file("ok", "whsec_x\n", 0600);
	cfg = pn_cfg_load(write_file("pn.conf", "[site a]\nstripe.secret_files = ok\n"
				     "stripe.site_metadata = site=shop=a\n"
				     "[site b]\nstripe.secret_files = ok\nstripe.mode = test\n", 0644),
			  &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	s = pn_cfg_site(cfg, "a");
	ck_assert_int_eq(s->stripe.mode, PN_STRIPE_LIVE);	/* the default */
	ck_assert(pn_cfg_stripe_marker(s, &key, &klen));
	ck_assert_uint_eq(klen, 4);
	ck_assert(strncmp(key, "site", 4) == 0);
	ck_assert_str_eq(key + klen + 1, "shop=a");	/* split at the first '=' */
	s = pn_cfg_site(cfg, "b");
	ck_assert_int_eq(s->stripe.mode, PN_STRIPE_TEST);
	ck_assert(!pn_cfg_stripe_marker(s, NULL, NULL));
	pn_cfg_free(cfg);
}
END_TEST

/* Alipay's legacy RSA accepts a 1024-bit key; RSA2 and WeChat Pay need 2048. */
START_TEST(test_rsa_key_sizes)
{
	char	text[1024];
	const char *weak = fixture_path("unit/keys/weak-1024.pub.pem"), *msg;

	snprintf(text, sizeof(text), "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\n"
		 "alipay.public_key_file = %s\nalipay.sign_type = RSA\n", weak);
	msg = load(text);
	ck_assert_msg(*msg == '\0', "%s", msg);
	snprintf(text, sizeof(text), "[site a]\nalipay.sign_type = RSA\nalipay.app_id = 1\n"
		 "alipay.seller_id = 2\nalipay.public_key_file = %s\n", weak);
	msg = load(text);
	ck_assert_msg(*msg == '\0', "sign_type before the key: %s", msg);
	snprintf(text, sizeof(text), "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\n"
		 "alipay.public_key_file = %s\n", weak);
	msg = load(text);
	ck_assert_msg(strstr(msg, "site \"a\": Alipay key weak-1024.pub.pem:") != NULL
		      && strstr(msg, " has 1024 bits; alipay.sign_type RSA2 needs at least 2048")
		      != NULL, "%s", msg);
	snprintf(text, sizeof(text), "[site w]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\n"
		 "wechatpay.apiv2_key_file = ok\nwechatpay.public_key_id = PUB_KEY_ID_1\n"
		 "wechatpay.public_key_file = %s\n", weak);
	write_file("ok", "k\n", 0600);
	msg = load(text);
	ck_assert_msg(strstr(msg, "RSA key has 1024 bits; at least 2048 are required") != NULL, "%s",
		      msg);
}
END_TEST

/* PN_CFG_ISOLATE_SITES: a site's unusable key disables that site only. */
START_TEST(test_isolate_sites)
{
	char	text[1024];
	struct pn_err err;
	struct pn_config *cfg;
	const char *path;

	write_file("ok", "whsec_x\n", 0600);
	write_file("loose", "whsec_x\n", 0644);
	snprintf(text, sizeof(text),
		 "[site good]\nstripe.secret_files = ok\n"
		 "[site missing]\nstripe.secret_files = nosuchfile\n"
		 "[site weak]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = %s\n"
		 "[site incomplete]\nalipay.app_id = 1\n",
		 fixture_path("unit/keys/weak-1024.pub.pem"));
	path = write_file("pn.conf", text, 0644);
	ck_assert(pn_cfg_load(path, &err) == NULL);	/* strict: the whole file */
	ck_assert_msg(strstr(err.msg, "nosuchfile") != NULL, "%s", err.msg);
	cfg = pn_cfg_load_flags(path, PN_CFG_ISOLATE_SITES, &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert(pn_cfg_site(cfg, "good")->disabled == NULL);
	ck_assert_msg(strstr(pn_cfg_site(cfg, "missing")->disabled, "pn.conf:4: could not stat "
			     "secret file") != NULL, "%s", pn_cfg_site(cfg, "missing")->disabled);
	ck_assert_msg(strstr(pn_cfg_site(cfg, "weak")->disabled, "1024 bits") != NULL, "%s",
		      pn_cfg_site(cfg, "weak")->disabled);
	ck_assert(strstr(pn_cfg_site(cfg, "incomplete")->disabled, "alipay.seller_id is "
			 "required") != NULL);
	pn_cfg_free(cfg);
	/* a secret readable by group or others stays fatal (security policy) */
	path = write_file("pn.conf", "[site good]\nstripe.secret_files = ok\n[site b]\n"
			  "stripe.secret_files = ok loose\n", 0644);
	ck_assert(pn_cfg_load_flags(path, PN_CFG_ISOLATE_SITES, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "must not be accessible by others") != NULL, "%s", err.msg);
	/* a mistake in the file itself stays fatal */
	path = write_file("pn.conf", "[site good]\nstripe.secret_files = ok\n[site b]\n"
			  "stripe.secret_file = ok\n", 0644);
	ck_assert(pn_cfg_load_flags(path, PN_CFG_ISOLATE_SITES, &err) == NULL);
	ck_assert(strstr(err.msg, "unknown key") != NULL);
}
END_TEST

START_TEST(test_wechat_key_length)
{
	char	text[1024];
	const char *msg;

	write_file("v3", "short\n", 0600);
	snprintf(text, sizeof(text),
		 "[site w]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\n"
		 "wechatpay.apiv3_key_file = v3\nwechatpay.public_key_id = PUB_KEY_ID_1\n"
		 "wechatpay.public_key_file = %s\n", fixture_path("unit/keys/test-a.pub.pem"));
	msg = load(text);
	ck_assert_msg(strstr(msg, "must be exactly 32") != NULL, "%s", msg);
	ck_assert(strstr(msg, "short") == NULL);	/* never echo a secret */
}
END_TEST

/* wechatpay.platform_cert_dir: every *.pem (not hidden) appended to the certificates. */
START_TEST(test_platform_cert_dir)
{
	char	text[1024], sub[128], cmd[1024];
	struct pn_config *cfg;
	struct pn_err err;
	const struct pn_wechatpay_cfg *w;

	write_file("v3", "RelAPIv3Key0123456789abcdefWXYZ0\n", 0600);
	snprintf(sub, sizeof(sub), "%s/plat", dir);
	ck_assert(mkdir(sub, 0755) == 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/b.pem' && cp '%s' '%s/a.pem' && cp '%s' "
		 "'%s/.c.pem.tmp' && cp '%s' '%s/d.pem' && echo x > '%s/notes.txt'",
		 fixture_path("unit/keys/wxp-cert-b.pem"), sub,
		 fixture_path("unit/keys/wxp-cert-a.pem"), sub,
		 fixture_path("unit/keys/wxp-cert-a.pem"), sub,
		 fixture_path("unit/keys/wxp-cert-a.pem"), sub, sub);
	ck_assert(system(cmd) == 0);
	snprintf(cmd, sizeof(cmd), "rm '%s/d.pem' && cp '%s' '%s/d.pem'", sub,
		 fixture_path("unit/keys/test-a.crt"), sub);
	ck_assert(system(cmd) == 0);
	snprintf(text, sizeof(text),
		 "[site w]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\n"
		 "wechatpay.apiv3_key_file = v3\nwechatpay.platform_cert_dir = plat\n");
	cfg = pn_cfg_load(write_file("pn.conf", text, 0644), &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	w = &cfg->sites[0].wechatpay;
	/* a.pem, b.pem, d.pem in name order; .c.pem.tmp and notes.txt skipped */
	ck_assert_uint_eq(w->ncerts, 3);
	ck_assert(strstr(w->certs[0].path, "/plat/a.pem") != NULL);
	ck_assert(strstr(w->certs[1].path, "/plat/b.pem") != NULL);
	ck_assert(strstr(w->certs[2].path, "/plat/d.pem") != NULL);
	ck_assert(w->certs[0].serial != NULL);
	ck_assert(strstr(w->platform_cert_dir, "/plat") != NULL);
	pn_cfg_free(cfg);
	/* an empty directory adds nothing: with nothing else, the site cannot verify */
	snprintf(cmd, sizeof(cmd), "rm -f '%s'/*.pem", sub);
	ck_assert(system(cmd) == 0);
	ck_assert(strstr(load(text), "holds no *.pem yet") != NULL);
	/* a missing directory is named */
	snprintf(text, sizeof(text),
		 "[site w]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\n"
		 "wechatpay.apiv3_key_file = v3\nwechatpay.platform_cert_dir = nosuch\n");
	ck_assert(strstr(load(text), "could not read directory") != NULL);
}
END_TEST

/* [log] and [metrics]: defaults, address lists, matching. */
START_TEST(test_address_lists)
{
	struct pn_err err;
	struct pn_config *cfg;

	write_file("ok", "whsec_x\n", 0600);
	cfg = pn_cfg_load(write_file("pn.conf", "[site a]\nstripe.secret_files = ok\n", 0644), &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert(cfg->status_path == NULL);
	ck_assert_uint_eq(cfg->ntrusted_proxies, 0);
	ck_assert_int_eq(cfg->forwarded_header, PN_FWD_X_FORWARDED_FOR);
	ck_assert_uint_eq(cfg->nstatus_allow, 2);	/* 127.0.0.1 ::1 */
	ck_assert(pn_addr_match(cfg->status_allow, cfg->nstatus_allow, "127.0.0.1"));
	ck_assert(pn_addr_match(cfg->status_allow, cfg->nstatus_allow, "::1"));
	ck_assert(pn_addr_match(cfg->status_allow, cfg->nstatus_allow, "::ffff:127.0.0.1"));
	ck_assert(!pn_addr_match(cfg->status_allow, cfg->nstatus_allow, "127.0.0.2"));
	ck_assert(!pn_addr_match(cfg->status_allow, cfg->nstatus_allow, NULL));
	ck_assert(!pn_addr_match(cfg->status_allow, cfg->nstatus_allow, "127.0.0.1 "));
	pn_cfg_free(cfg);

	cfg = pn_cfg_load(write_file("pn.conf", "[log]\ntrusted_proxies = 10.0.0.0/8, "
				     "192.168.1.5 2001:db8::/32\nforwarded_header = Forwarded\n"
				     "[metrics]\nstatus_path = /paynotify-status\nallow = 10.1.0.0/17\n"
				     "[site a]\nstripe.secret_files = ok\n", 0644), &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert_str_eq(cfg->status_path, "/paynotify-status");
	ck_assert_int_eq(cfg->forwarded_header, PN_FWD_FORWARDED);
	ck_assert_uint_eq(cfg->ntrusted_proxies, 3);
	ck_assert(pn_addr_match(cfg->trusted_proxies, 3, "10.255.0.1"));
	ck_assert(!pn_addr_match(cfg->trusted_proxies, 3, "11.0.0.1"));
	ck_assert(pn_addr_match(cfg->trusted_proxies, 3, "192.168.1.5"));
	ck_assert(!pn_addr_match(cfg->trusted_proxies, 3, "192.168.1.6"));
	ck_assert(pn_addr_match(cfg->trusted_proxies, 3, "2001:db8:1::7"));
	ck_assert(!pn_addr_match(cfg->trusted_proxies, 3, "2001:db9::7"));
	/* a list given replaces the default: 127.0.0.1 is no longer allowed */
	ck_assert_uint_eq(cfg->nstatus_allow, 1);
	ck_assert(pn_addr_match(cfg->status_allow, 1, "10.1.127.255"));
	ck_assert(!pn_addr_match(cfg->status_allow, 1, "10.1.128.0"));
	ck_assert(!pn_addr_match(cfg->status_allow, 1, "127.0.0.1"));
	pn_cfg_free(cfg);
}
END_TEST

/* Load text into findings; returns the configuration (NULL on errors). */
static struct pn_config *
load_all(const char *text, struct pn_cfg_findings *fd)
{
	memset(fd, 0, sizeof(*fd));
	return pn_cfg_load_all(write_file("pn.conf", text, 0644), fd);
}

/* "PUB_KEY_ID_1/<id>", valid until the next call. */
static const char *
wx_key_id(const char *aes_id)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "PUB_KEY_ID_1/%s", aes_id);
	return buf;
}

static const struct pn_cfg_finding *
finding(const struct pn_cfg_findings *fd, const char *needle)
{
	size_t i;

	for (i = 0; i < fd->n; i++)
		if (strstr(fd->v[i].msg, needle) != NULL)
			return &fd->v[i];
	return NULL;
}

/* Every error is reported, each with its line, not just the first. */
START_TEST(test_all_errors_reported)
{
	struct pn_cfg_findings fd;
	const struct pn_cfg_finding *f;
	struct pn_err err;
	struct pn_config *cfg;

	write_file("loose", "whsec_x\n", 0640);
	cfg = load_all("[site a]\nstripe.tolerance_s = soon\nstripe.secret_files = loose\n"
		       "[databse]\nconninfo = x\n[site b]\nalipay.app_id = 1\nbogus = 2\n", &fd);
	ck_assert(cfg == NULL);
	ck_assert_uint_eq(pn_cfg_findings_count(&fd, PN_CFG_ERROR), 6);
	ck_assert((f = finding(&fd, "invalid value \"soon\"")) != NULL && f->line == 2);
	ck_assert((f = finding(&fd, "group (paynotify) may read it")) != NULL && f->line == 3);
	ck_assert((f = finding(&fd, "unknown section")) != NULL && f->line == 4);
	ck_assert((f = finding(&fd, "unknown key \"bogus\"")) != NULL && f->line == 8);
	ck_assert((f = finding(&fd, "alipay.seller_id is required")) != NULL && f->line == 6);
	ck_assert(finding(&fd, "alipay.public_key_file is required") != NULL);
	/* the refused secret file is not also "required"; conninfo in the bad section is ignored */
	ck_assert(finding(&fd, "stripe.secret_files is required") == NULL);
	ck_assert(finding(&fd, "outside of any section") == NULL);
	pn_cfg_findings_free(&fd);
	/* the receivers' form: the first error and how many more */
	cfg = pn_cfg_load(write_file("pn.conf", "[site a]\nx = 1\ny = 2\n", 0644), &err);
	ck_assert(cfg == NULL);
	ck_assert_msg(strstr(err.msg, "pn.conf:2: unknown key \"x\" in section [site] (and 2 more "
			     "errors: `paynotify check-config` lists them all)") != NULL, "%s", err.msg);
}
END_TEST

/* The secret file rule: 0600 owned by the reader or root, or 0640 whose group
 * is the receivers' (paynotify) or the reader's own (unless it is root's);
 * never other-readable, never group-writable. */
static const char *
secret_file(const char *name, uid_t uid, gid_t gid, mode_t mode)
{
	const char *path = write_file(name, "whsec_x\n", mode);

	ck_assert_int_eq(chown(path, uid, gid), 0);
	ck_assert_int_eq(chmod(path, mode), 0);	/* chown may clear bits */
	return path;
}

/* NULL if path is accepted, else the error (static). */
static const char *
secret_refused(const char *name)
{
	static struct pn_err err;
	char	path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (pn_cfg_secret_file_ok(path, &err))
		return NULL;
	if (strstr(err.msg, "chmod 600") == NULL)	/* every refusal says the fix */
		return "no fix in the message";
	return err.msg;
}

#define REFUSED(name, why) \
	do { \
		const char *m_ = secret_refused(name); \
		ck_assert_msg(m_ != NULL && strstr(m_, why) != NULL, "%s: %s", name, \
			      m_ ? m_ : "accepted"); \
	} while (0)
#define ACCEPTED(name) \
	do { \
		const char *m_ = secret_refused(name); \
		ck_assert_msg(m_ == NULL, "%s: %s", name, m_); \
	} while (0)

START_TEST(test_secret_perms)
{
	const struct passwd *nobody = getpwnam("nobody");
	const struct group *rg = getgrnam("paynotify");
	pid_t	pid;
	int	status;

	if (geteuid() != 0) {	/* not root: as the receivers' user, on its own files */
		secret_file("self600", geteuid(), getegid(), 0600);
		secret_file("self640", geteuid(), getegid(), 0640);
		secret_file("self660", geteuid(), getegid(), 0660);
		secret_file("self604", geteuid(), getegid(), 0604);
		ACCEPTED("self600");
		ACCEPTED("self640");	/* its own group */
		REFUSED("self660", "at most read");
		REFUSED("self604", "by others");
		return;
	}
	ck_assert(nobody != NULL);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	secret_file("r600", 0, 0, 0600);
	secret_file("r400", 0, 0, 0400);
	secret_file("theirs600", nobody->pw_uid, nobody->pw_gid, 0600);
	secret_file("rootgroup640", 0, 0, 0640);
	secret_file("othergroup640", 0, 54321, 0640);
	secret_file("others604", 0, 0, 0604);
	secret_file("gwrite620", 0, 0, 0620);
	secret_file("nogroup640", 0, nobody->pw_gid, 0640);
	secret_file("nogroup660", 0, nobody->pw_gid, 0660);
	secret_file("nogroup644", 0, nobody->pw_gid, 0644);
	secret_file("stranger640", 54321, nobody->pw_gid, 0640);
	secret_file("stranger600", 54321, 54321, 0600);
	/* read by root */
	ACCEPTED("r600");
	ACCEPTED("r400");
	ACCEPTED("theirs600");	/* the receivers' own file */
	REFUSED("rootgroup640", "only the receivers' group (paynotify) may read it");
	REFUSED("othergroup640", "only the receivers' group");
	REFUSED("nogroup640", "only the receivers' group");	/* root's own group does not count */
	REFUSED("others604", "must not be accessible by others");
	REFUSED("gwrite620", "its group may at most read it");
	if (rg != NULL) {	/* the package's root:paynotify 0640, where it is installed */
		secret_file("pkg640", 0, rg->gr_gid, 0640);
		secret_file("pkg660", 0, rg->gr_gid, 0660);
		ACCEPTED("pkg640");
		REFUSED("pkg660", "at most read");
	}
	/* read by a receiver running as nobody:nogroup (a child dropped to it) */
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(nobody->pw_gid) != 0
		    || setuid(nobody->pw_uid) != 0)
			_exit(2);
		ACCEPTED("theirs600");
		ACCEPTED("nogroup640");		/* root:<its own group> 0640 */
		ACCEPTED("r400") /* not readable by it, but allowed: reading says why */;
		REFUSED("nogroup660", "at most read");
		REFUSED("nogroup644", "by others");
		REFUSED("othergroup640", "only the receivers' group");
		REFUSED("stranger640", "must belong to root or to the user that reads it");
		REFUSED("stranger600", "must belong to root");
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child (as nobody) "
		      "failed: status %d", status);
}
END_TEST

/* conf.d/ beside the main file: read after it, in C-locale order; a key set
 * twice names both places; relative paths are the main file's directory's. */
START_TEST(test_conf_d)
{
	struct pn_cfg_findings fd = {NULL, 0};
	struct pn_config *cfg;
	struct pn_err err;
	char	sub[256], main_path[256];
	const struct pn_cfg_finding *f;
	size_t	i;

	write_file("ok", "whsec_x\n", 0600);
	write_file("ok2", "whsec_y\n", 0600);
	snprintf(sub, sizeof(sub), "%s/conf.d", dir);
	ck_assert_int_eq(mkdir(sub, 0750), 0);
	snprintf(main_path, sizeof(main_path), "%s",
		 write_file("pn.conf", "; the example: nothing set here\n[database]\n"
			    "conninfo = dbname=shop user=paynotify\n", 0640));
	write_file("conf.d/20-sites.conf", "[site b]\nstripe.secret_files = ok2\n", 0640);
	write_file("conf.d/10-db.conf", "[database]\nadmin_conninfo = dbname=shop "
		   "user=paynotify_ops\n[site a]\nstripe.secret_files = ok\n", 0600);
	write_file("conf.d/README", "not a configuration\n", 0644);
	write_file("conf.d/30-old.conf.dpkg-old", "[site old]\nbogus = 1\n", 0644);
	write_file("conf.d/.hidden.conf", "bogus\n", 0644);
	cfg = pn_cfg_load(main_path, &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert_uint_eq(cfg->nsites, 2);
	ck_assert_str_eq(cfg->sites[0].name, "a");	/* 10-db.conf before 20-sites.conf */
	ck_assert_str_eq(cfg->sites[1].name, "b");
	ck_assert(strstr(cfg->sites[0].file, "conf.d/10-db.conf") != NULL);
	ck_assert_int_eq(cfg->sites[1].line, 1);
	ck_assert_str_eq(pn_cfg_admin_conninfo(cfg), "dbname=shop user=paynotify_ops");
	ck_assert_str_eq(pn_cfg_owner_conninfo(cfg), "dbname=shop user=paynotify_ops");
	ck_assert_str_eq(cfg->conninfo, "dbname=shop user=paynotify");
	/* the files read: the main one, then conf.d's, each once */
	ck_assert_str_eq(cfg->files[0].path, main_path);
	ck_assert(cfg->files[0].from == cfg->files[0].path);
	{
		size_t	nconf = 0;

		for (i = 0; i < cfg->nfiles; i++)
			nconf += cfg->files[i].from == cfg->files[i].path;
		ck_assert_uint_eq(nconf, 3);
	}
	/* the secret named in conf.d/: relative to the main file's directory */
	ck_assert(strncmp(cfg->sites[0].stripe.secrets[0].id, "ok:", 3) == 0);
	/* dir/ok, not dir/conf.d/ok; named by 10-db.conf */
	ck_assert(cfg->files[2].secret && strstr(cfg->files[2].path, "conf.d") == NULL);
	ck_assert(strstr(cfg->files[2].from, "10-db.conf") != NULL);
	pn_cfg_free(cfg);

	/* a key set in two files, and a site defined in two: both places named */
	write_file("conf.d/30-again.conf", "[database]\nconninfo = dbname=other\n"
		   "[site a]\nstripe.secret_files = ok\n", 0600);
	cfg = pn_cfg_load_all(main_path, &fd);
	ck_assert(cfg == NULL);
	ck_assert((f = finding(&fd, "key \"conninfo\" of [database] is set twice (first at "))
		  != NULL);
	ck_assert(strstr(f->msg, "pn.conf:3)") != NULL && strstr(f->file, "30-again.conf")
		  && f->line == 2);
	ck_assert((f = finding(&fd, "site \"a\" is defined twice (first at ")) != NULL);
	ck_assert(strstr(f->msg, "10-db.conf:3)") != NULL && f->line == 3);
	pn_cfg_findings_free(&fd);
	unlink(write_file("conf.d/30-again.conf", "", 0600));

	/* a conf.d file others may write is refused like the main file; one its
	 * group may write is a warning */
	write_file("conf.d/40-loose.conf", "[log]\nlevel = 2\n", 0666);
	cfg = pn_cfg_load_all(main_path, &fd);
	ck_assert(cfg == NULL);
	ck_assert((f = finding(&fd, "must not be writable by others")) != NULL);
	ck_assert(strstr(f->file, "40-loose.conf") != NULL && f->severity == PN_CFG_ERROR);
	pn_cfg_findings_free(&fd);
	chmod(write_file("conf.d/40-loose.conf", "[log]\nlevel = 2\n", 0660), 0660);
	cfg = pn_cfg_load_all(main_path, &fd);
	ck_assert(cfg != NULL);
	ck_assert((f = finding(&fd, "its group may change the keys")) != NULL);
	ck_assert(f->severity == PN_CFG_WARNING);
	pn_cfg_free(cfg);
	pn_cfg_findings_free(&fd);
	chmod(write_file("conf.d/40-loose.conf", "[log]\nlevel = 2\n", 0600), 0600);
	/* the same key twice in one file, two sections apart */
	chmod(write_file("pn.conf", "[database]\nconninfo = a\n[log]\nlevel = 1\n[database]\n"
			 "conninfo = b\n", 0600), 0600);
	cfg = pn_cfg_load_all(main_path, &fd);
	ck_assert(cfg == NULL);
	ck_assert((f = finding(&fd, "is set twice (first at line 2)")) != NULL && f->line == 6);
	pn_cfg_findings_free(&fd);
}
END_TEST

/* Secrets in the wrong form: API keys for webhook secrets, lengths, private keys. */
START_TEST(test_secret_forms)
{
	struct pn_cfg_findings fd;
	const struct pn_cfg_finding *f;
	struct pn_config *cfg;
	char	text[2048];

	write_file("api", "whsec_good\nsk_live_0123456789abcdef\n", 0600);
	write_file("noprefix", "0123456789abcdef\n", 0600);
	write_file("v2", "ShortAPIv2Key\n", 0600);
	write_file("v3", "TestAPIv3Key0123456789abcdefABCD\n", 0600);
	write_file("2c2p", "NOTHEX\n", 0600);
	snprintf(text, sizeof(text),
		 "[site s]\nstripe.secret_files = api\n[site n]\nstripe.secret_files = noprefix\n"
		 "[site w]\nwechatpay.mchid = 1\nwechatpay.appid = wx1\nwechatpay.apiv2_key_file = v2\n"
		 "wechatpay.apiv3_key_file = v3\nwechatpay.public_key_id = PUB_KEY_ID_1\n"
		 "wechatpay.public_key_file = %s\n"
		 "[site c]\n2c2p.merchant_id = JT01\n2c2p.secret_key_file = 2c2p\n",
		 fixture_path("unit/keys/test-a.pub.pem"));
	cfg = load_all(text, &fd);
	/* site errors and warnings: the configuration still loads for the receivers */
	ck_assert_msg(cfg != NULL, "%s", fd.n ? fd.v[0].msg : "");
	ck_assert_uint_eq(pn_cfg_findings_count(&fd, PN_CFG_SITE_ERROR), 3);
	f = finding(&fd, "is a Stripe secret API key (sk_...), not a webhook signing secret");
	ck_assert(f != NULL && f->severity == PN_CFG_SITE_ERROR && f->line == 1);
	ck_assert(strstr(f->msg, "(line 2)") && strstr(f->msg, "copy the endpoint's signing secret"));
	ck_assert(strstr(f->msg, "0123456789") == NULL);	/* never the secret's bytes */
	f = finding(&fd, "does not start with \"whsec_\"");
	ck_assert(f != NULL && f->severity == PN_CFG_SITE_ERROR && f->line == 3);
	f = finding(&fd, "APIv2 key v2:");
	ck_assert(f != NULL && f->severity == PN_CFG_SITE_ERROR && strstr(f->msg, "exactly 32"));
	f = finding(&fd, "is not 64 characters long");
	ck_assert(f != NULL && f->severity == PN_CFG_WARNING && strstr(f->msg, "2c2p.secret_key_file"));
	pn_cfg_findings_free(&fd);
	pn_cfg_free(cfg);

	/* a private key where a public key belongs, and the reverse */
	snprintf(text, sizeof(text),
		 "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = %s\n",
		 fixture_path("unit/keys/test-a.key.pem"));
	cfg = load_all(text, &fd);
	ck_assert(cfg == NULL);
	f = finding(&fd, "this is a private key");
	ck_assert(f != NULL && f->line == 4 && strstr(f->msg, "Alipay public key"));
	ck_assert(finding(&fd, "is required") == NULL);
	pn_cfg_findings_free(&fd);
	{
		char   *pem = NULL;
		struct pn_err err;

		ck_assert(pn_read_file(fixture_path("unit/keys/test-a.pub.pem"), 65536, &pem, NULL,
				       &err));
		write_file("pub-as-priv", pem, 0600);
		free(pem);
	}
	snprintf(text, sizeof(text),
		 "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = %s\n"
		 "alipay.test_private_key_file = pub-as-priv\n",
		 fixture_path("unit/keys/test-a.pub.pem"));
	cfg = load_all(text, &fd);
	ck_assert(cfg == NULL);
	ck_assert((f = finding(&fd, "this is a public key: test signing needs")) != NULL);
	ck_assert_int_eq(f->line, 5);
	pn_cfg_findings_free(&fd);
}
END_TEST

/*
 * The test signing keys are the paynotify command's: a receiver
 * (PN_CFG_RECEIVER) accepts the key, checks its file's mode, never opens it.
 */
START_TEST(test_receiver_skips_test_keys)
{
	struct pn_err err;
	struct pn_config *cfg;
	char	path[256], text[1024];

	write_file("not-a-key", "not a private key\n", 0600);
	snprintf(text, sizeof(text),
		 "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = %s\n"
		 "alipay.test_private_key_file = not-a-key\n",
		 fixture_path("unit/keys/test-a.pub.pem"));
	snprintf(path, sizeof(path), "%s", write_file("pn.conf", text, 0644));
	ck_assert(pn_cfg_load(path, &err) == NULL);	/* the command reads it */
	cfg = pn_cfg_load_flags(path, PN_CFG_RECEIVER, &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert(pn_cfg_site(cfg, "a")->alipay.test_key == NULL);
	pn_cfg_free(cfg);
	/* its mode is still checked: a private key readable by others is refused */
	write_file("not-a-key", "not a private key\n", 0604);
	ck_assert(pn_cfg_load_flags(path, PN_CFG_RECEIVER, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "must not be accessible by others") != NULL, "%s", err.msg);
	/* a key the command loads stays unloaded by a receiver */
	{
		char   *pem = NULL;

		ck_assert(pn_read_file(fixture_path("unit/keys/test-a.key.pem"), 65536, &pem, NULL,
				       &err));
		write_file("priv", pem, 0600);
		free(pem);
	}
	snprintf(text, sizeof(text),
		 "[site a]\nalipay.app_id = 1\nalipay.seller_id = 2\nalipay.public_key_file = %s\n"
		 "alipay.test_private_key_file = priv\n", fixture_path("unit/keys/test-a.pub.pem"));
	snprintf(path, sizeof(path), "%s", write_file("pn.conf", text, 0644));
	cfg = pn_cfg_load(path, &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert(pn_cfg_site(cfg, "a")->alipay.test_key != NULL);
	pn_cfg_free(cfg);
	cfg = pn_cfg_load_flags(path, PN_CFG_RECEIVER, &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	ck_assert(pn_cfg_site(cfg, "a")->alipay.test_key == NULL);
	pn_cfg_free(cfg);
}
END_TEST

/* Stored key ids against the configured keys: present, gone, or an old positional id. */
START_TEST(test_key_state)
{
	struct pn_err err;
	struct pn_config *cfg;
	const struct pn_site *s;
	char	text[1024];

	write_file("whsec", "whsec_one\nwhsec_two\n", 0600);
	snprintf(text, sizeof(text), "[site a]\nstripe.secret_files = whsec\n"
		 "wechatpay.mchid = 1\nwechatpay.appid = wx1\nwechatpay.apiv3_key_file = v3\n"
		 "wechatpay.public_key_id = PUB_KEY_ID_1\nwechatpay.public_key_file = %s\n",
		 fixture_path("unit/keys/test-a.pub.pem"));
	write_file("v3", "TestAPIv3Key0123456789abcdefABCD\n", 0600);
	cfg = pn_cfg_load(write_file("pn.conf", text, 0644), &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	s = pn_cfg_site(cfg, "a");
	ck_assert_int_eq(pn_cfg_site_key_state(s, s->stripe.secrets[0].id), PN_KEY_CONFIGURED);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "whsec:00000000"), PN_KEY_GONE);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "old-whsec:00000000"), PN_KEY_GONE);
	/* positional ids of earlier builds: the file is still there, or not */
	ck_assert_int_eq(pn_cfg_site_key_state(s, "whsec:1"), PN_KEY_UNKNOWN);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "retired-whsec:1"), PN_KEY_GONE);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "test-a.pub.pem"), PN_KEY_UNKNOWN);
	/* WeChat Pay v3: signing key / APIv3 key */
	ck_assert_int_eq(pn_cfg_site_key_state(s, wx_key_id(s->wechatpay.apiv3_keys[0].id)),
			 PN_KEY_CONFIGURED);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "PUB_KEY_ID_2/v3:1"), PN_KEY_GONE);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "PUB_KEY_ID_1/v3:1"), PN_KEY_UNKNOWN);
	ck_assert_int_eq(pn_cfg_site_key_state(s, "5157F09EFDC096DE/v3:1"), PN_KEY_GONE);
	pn_cfg_free(cfg);
}
END_TEST

/* Every key in the table is documented in conf/paynotify.conf.example. */
START_TEST(test_keys_documented)
{
	const struct pn_cfg_keydoc *docs;
	size_t	n = pn_cfg_keydocs(&docs), i;
	char   *example = NULL;
	struct pn_err err;

	ck_assert_msg(pn_read_file(fixture_path("../../conf/paynotify.conf.example"), 1 << 20, &example,
				   NULL, &err), "%s", err.msg);
	for (i = 0; i < n; i++) {
		char needle[128];

		ck_assert(docs[i].doc != NULL && *docs[i].doc);
		snprintf(needle, sizeof(needle), "%s =", docs[i].key);
		ck_assert_msg(strstr(example, needle) != NULL,
			      "key %s is not documented in conf/paynotify.conf.example", docs[i].key);
	}
	free(example);
}
END_TEST

/* Every key in the table has its own entry (".TP" then ".B key") in
 * paynotify.conf(5). */
START_TEST(test_keys_in_man_page)
{
	const struct pn_cfg_keydoc *docs;
	size_t	n = pn_cfg_keydocs(&docs), i;
	char   *man = NULL;
	struct pn_err err;

	ck_assert_msg(pn_read_file(fixture_path("../../doc/man/paynotify.conf.5.in"), 1 << 20, &man,
				   NULL, &err), "%s", err.msg);
	for (i = 0; i < n; i++) {
		char needle[160], section[64];
		const char *at;

		snprintf(needle, sizeof(needle), "\n.TP\n.B %s\n", docs[i].key);
		ck_assert_msg(strstr(man, needle) != NULL,
			      "key %s is not documented in doc/man/paynotify.conf.5.in", docs[i].key);
		snprintf(section, sizeof(section), "\n.SH %s[%s", strcmp(docs[i].section, "site") == 0
			 ? "\"" : "", docs[i].section);
		at = strstr(man, section);
		ck_assert_msg(at != NULL && at < strstr(man, needle),
			      "key %s is not under a [%s] section in doc/man/paynotify.conf.5.in",
			      docs[i].key, docs[i].section);
	}
	free(man);
}
END_TEST

/* The providers' declarations are what the loader, check-config and the docs rely on. */
START_TEST(test_provider_declarations)
{
	const struct pn_cfg_provider *const *prov;
	const struct pn_cfg_keydoc *docs;
	size_t	ndocs = pn_cfg_keydocs(&docs), nsite = 0, i, j;

	for (prov = pn_cfg_providers; *prov; prov++) {
		size_t	plen = strlen((*prov)->prefix);

		ck_assert((*prov)->title != NULL && (*prov)->summary != NULL && (*prov)->nkeys > 0);
		for (i = 0; i < (*prov)->nkeys; i++) {
			const struct pn_cfg_keydef *kd = &(*prov)->keys[i];

			ck_assert_str_eq(kd->section, "site");
			ck_assert_msg(strncmp(kd->key, (*prov)->prefix, plen) == 0 && kd->key[plen] == '.',
				      "%s is declared by %s", kd->key, (*prov)->prefix);
			ck_assert_msg(!(kd->flags & PN_KEY_REQUIRED) || kd->type == PN_K_STR
				      || kd->type == PN_K_PATH || kd->type == PN_K_SECRETS
				      || kd->type == PN_K_PUBKEYS,
				      "%s: required is for strings, paths and key lists", kd->key);
			ck_assert_msg(kd->show == NULL || kd->type == PN_K_STR
				      || kd->type == PN_K_SECRETS || kd->type == PN_K_PUBKEYS,
				      "%s: check-config lists strings and key lists", kd->key);
			for (j = 0; j < ndocs; j++)
				if (strcmp(docs[j].key, kd->key) == 0)
					break;
			ck_assert_msg(j < ndocs, "%s has no keydoc", kd->key);
			nsite++;
		}
		for (j = 0; pn_cfg_providers[j] != *prov; j++)
			ck_assert_str_ne(pn_cfg_providers[j]->prefix, (*prov)->prefix);
	}
	ck_assert_uint_le(nsite, 64);	/* the loader's failed-key mask */
}
END_TEST

/* Any "<prefix>." key configures its provider, whose required keys are then named. */
START_TEST(test_configured_from_prefix)
{
	struct pn_cfg_findings fd;
	const struct pn_cfg_provider *const *prov;
	char	text[512], want[160];

	for (prov = pn_cfg_providers; *prov; prov++) {
		const struct pn_cfg_keydef *kd = NULL;
		size_t	i, nreq = 0;

		for (i = 0; i < (*prov)->nkeys; i++) {
			if ((*prov)->keys[i].flags & PN_KEY_REQUIRED)
				nreq++;
			else if (kd == NULL && ((*prov)->keys[i].type == PN_K_URL
						|| (*prov)->keys[i].type == PN_K_INT))
				kd = &(*prov)->keys[i];
		}
		ck_assert_msg(kd != NULL && nreq > 0, "%s", (*prov)->prefix);
		if (kd->type == PN_K_URL)
			snprintf(text, sizeof(text), "[site a]\n%s = https://example.test/x\n", kd->key);
		else
			snprintf(text, sizeof(text), "[site a]\n%s = %lld\n", kd->key,
				 (long long)kd->min);
		ck_assert(load_all(text, &fd) == NULL);
		for (i = 0; i < (*prov)->nkeys; i++) {
			if (!((*prov)->keys[i].flags & PN_KEY_REQUIRED))
				continue;
			snprintf(want, sizeof(want), "site \"a\": %s is required for %s",
				 (*prov)->keys[i].key, (*prov)->title);
			ck_assert_msg(finding(&fd, want) != NULL, "no \"%s\"", want);
		}
		/* the confirm keys alone configure no provider */
		ck_assert((finding(&fd, "no provider is configured") == NULL)
			  == !(*prov)->not_a_provider);
		pn_cfg_findings_free(&fd);
	}
	ck_assert(load_all("[site a]\n", &fd) == NULL);
	ck_assert(finding(&fd, "site \"a\": no provider is configured (set alipay.*, stripe.*, "
			  "wechatpay.* or 2c2p.* keys)") != NULL);
	pn_cfg_findings_free(&fd);
}
END_TEST

/* pn_cfg_site_str: a provider's string keys by name, defaults included. */
START_TEST(test_site_str)
{
	struct pn_config *cfg;
	struct pn_err err;
	const struct pn_site *s;

	write_file("ok", "whsec_x\n", 0600);
	cfg = pn_cfg_load(write_file("pn.conf", "[site a]\nstripe.secret_files = ok\n"
				     "stripe.query_url = https://stripe.test/\n", 0644), &err);
	ck_assert_msg(cfg != NULL, "%s", err.msg);
	s = pn_cfg_site(cfg, "a");
	ck_assert_str_eq(pn_cfg_site_str(s, "stripe", "query_url"), "https://stripe.test");
	ck_assert_str_eq(pn_cfg_site_str(s, "2c2p", "query_url"), "https://pgw.2c2p.com");
	ck_assert(pn_cfg_site_str(s, "stripe", "site_metadata") == NULL);
	ck_assert(pn_cfg_site_str(s, "stripe", "tolerance_s") == NULL);	/* not a string */
	ck_assert(pn_cfg_site_str(s, "nosuch", "query_url") == NULL);
	ck_assert(s->stripe.configured && !s->alipay.configured && !s->twoc2p.configured);
	pn_cfg_free(cfg);
}
END_TEST

Suite *
suite_cfg(void)
{
	Suite  *s = suite_create("cfg");
	TCase  *tc = tcase_create("cfg");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_good_config);
	tcase_add_loop_test(tc, test_bad_configs, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_wechat_key_length);
	tcase_add_test(tc, test_platform_cert_dir);
	tcase_add_test(tc, test_stripe_binding_keys);
	tcase_add_test(tc, test_rsa_key_sizes);
	tcase_add_test(tc, test_isolate_sites);
	tcase_add_test(tc, test_keys_documented);
	tcase_add_test(tc, test_address_lists);
	tcase_add_test(tc, test_all_errors_reported);
	tcase_add_test(tc, test_secret_forms);
	tcase_add_test(tc, test_secret_perms);
	tcase_add_test(tc, test_conf_d);
	tcase_add_test(tc, test_receiver_skips_test_keys);
	tcase_add_test(tc, test_key_state);
	tcase_add_test(tc, test_keys_in_man_page);
	tcase_add_test(tc, test_provider_declarations);
	tcase_add_test(tc, test_configured_from_prefix);
	tcase_add_test(tc, test_site_str);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_cfg.c: configuration loading, validation and error messages.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	s = pn_cfg_site(cfg, "shop-a");
	ck_assert(s != NULL);
	ck_assert(s->stripe.configured && s->alipay.configured);
	ck_assert(!s->wechatpay.configured && !s->twoc2p.configured);
	ck_assert_uint_eq(s->stripe.nsecrets, 2);
	ck_assert_str_eq(s->stripe.secrets[1].id, "whsec:3");
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
	{"[site a]\nstripe.secret_files = loose\n", "must not be accessible by group or others"},
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
	{"[site a]\nalipay.sign_type = MD5\n", "expected one of RSA2, RSA"},
	{"[site a]\nalipay.app_id = 1\n", "pn.conf:1: site \"a\": alipay.seller_id is required"},
	{"[site a]\nwechatpay.v2_sign_type = SHA1\n", "expected some of MD5, HMAC-SHA256"},
	{"[site a]\n2c2p.api = soap\n", "expected one of jwt, redirect"},
	{"[site a]\nstripe.secret_files = empty\n", "names no usable secret"},
	{"[site a]\nalipay.public_key_file = ok\n", "could not load key"},
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

Suite *
suite_cfg(void)
{
	Suite  *s = suite_create("cfg");
	TCase  *tc = tcase_create("cfg");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_good_config);
	tcase_add_loop_test(tc, test_bad_configs, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_wechat_key_length);
	tcase_add_test(tc, test_keys_documented);
	suite_add_tcase(s, tc);
	return s;
}

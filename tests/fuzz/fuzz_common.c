/*
 * fuzz_common.c: fixtures and sites shared by the fuzz targets.
 *
 * The provider targets' sites are loaded by the real loader, pn_cfg_load(),
 * from a configuration written into a private temporary directory that
 * holds 0600 copies of the fixture secrets (git does not keep the 0600 the
 * loader insists on) and a link to the fixture keys; it is removed at exit.
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto.h"
#include "fuzz.h"
#include "http.h"

#ifndef PN_FIXTURES
#error "PN_FIXTURES must name tests/fixtures"
#endif

const char *
fuzz_fixture(const char *rel)
{
	static char buf[4096];
	const char *dir = getenv("PN_FIXTURES");

	snprintf(buf, sizeof(buf), "%s/%s", dir && *dir ? dir : PN_FIXTURES, rel);
	return buf;
}

/* ---- a private directory: the fixtures' keys and 0600 copies of the secrets ---- */

static char tmpdir[256];

/* Copied into <dir>/secrets with mode 0600 (git keeps no file modes). */
static const char *const private_files[] = {
	"unit/secrets/stripe-old", "unit/secrets/stripe-new", "unit/secrets/stripe-both",
	"unit/secrets/stripe-dotnet", "unit/secrets/2c2p-sandbox", "unit/secrets/2c2p-guide",
	"unit/secrets/2c2p-rotated", "unit/secrets/2c2p-legacy", "unit/secrets/wx-apiv3",
	"unit/secrets/wx-apiv3-rotated", "unit/secrets/wx-apiv2", "unit/secrets/wx-apiv2-refund",
	"unit/keys/test-a.key.pem", NULL};
/* What else may be written there (removed at exit). */
static const char *const scratch_files[] = {"fuzz.conf", "sites.conf", "keys", NULL};

static void
tmpdir_cleanup(void)
{
	char	path[512];
	size_t	i;

	for (i = 0; scratch_files[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, scratch_files[i]);
		unlink(path);
	}
	for (i = 0; private_files[i]; i++) {
		snprintf(path, sizeof(path), "%s/secrets/%s", tmpdir,
			 strrchr(private_files[i], '/') + 1);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/secrets", tmpdir);
	rmdir(path);
	rmdir(tmpdir);
}

const char *
fuzz_tmpdir(void)
{
	const char *tmp = getenv("TMPDIR");
	char	path[512], keys[4096];
	size_t	i;

	if (tmpdir[0] != '\0')
		return tmpdir;
	snprintf(tmpdir, sizeof(tmpdir), "%s/pn-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("fuzz: mkdtemp");
		abort();
	}
	atexit(tmpdir_cleanup);
	snprintf(keys, sizeof(keys), "%s", fuzz_fixture("unit/keys"));
	snprintf(path, sizeof(path), "%s/keys", tmpdir);
	if (symlink(keys, path) != 0) {
		perror("fuzz: symlink");
		abort();
	}
	snprintf(path, sizeof(path), "%s/secrets", tmpdir);
	if (mkdir(path, 0700) != 0) {
		perror("fuzz: mkdir");
		abort();
	}
	for (i = 0; private_files[i]; i++) {
		char   *text = NULL;
		size_t	len = 0;
		struct pn_err err;
		FILE   *f;

		if (!pn_read_file(fuzz_fixture(private_files[i]), 65536, &text, &len, &err)) {
			fprintf(stderr, "fuzz: %s\n", err.msg);
			abort();
		}
		snprintf(path, sizeof(path), "%s/secrets/%s", tmpdir,
			 strrchr(private_files[i], '/') + 1);
		if ((f = fopen(path, "w")) == NULL || fwrite(text, 1, len, f) != len
		    || fclose(f) != 0 || chmod(path, 0600) != 0) {
			perror("fuzz: writing a secret file");
			abort();
		}
		free(text);
	}
	return tmpdir;
}

/* ---- the provider targets' sites, loaded by pn_cfg_load() ------------------ */

static const char sites_conf[] =
	"[site stripe-fuzz]\n"
	"stripe.secret_files = secrets/stripe-old\n"
	"\n"
	"[site alipay-fuzz]\n"
	"alipay.app_id = 2021000000000001\n"
	"alipay.seller_id = 2088000000000001\n"
	"alipay.public_key_file = keys/test-a.pub.pem\n"
	"\n"
	"[site alipay-fuzz-rsa]\n"
	"alipay.app_id = 2021000000000001\n"
	"alipay.seller_id = 2088000000000001\n"
	"alipay.public_key_file = keys/test-a.pub.pem\n"
	"alipay.sign_type = RSA\n"
	"\n"
	"[site 2c2p-fuzz]\n"
	"2c2p.merchant_id = JT01\n"
	"2c2p.secret_key_file = secrets/2c2p-sandbox\n"
	"\n"
	"[site 2c2p-fuzz-sha1]\n"
	"2c2p.merchant_id = JT01\n"
	"2c2p.secret_key_file = secrets/2c2p-sandbox\n"
	"2c2p.api = redirect\n"
	"\n"
	"[site 2c2p-fuzz-sha256]\n"
	"2c2p.merchant_id = JT01\n"
	"2c2p.secret_key_file = secrets/2c2p-sandbox\n"
	"2c2p.api = redirect\n"
	"2c2p.redirect_hash = sha256\n"
	"\n"
	"[site wx-fuzz]\n"
	"wechatpay.mchid = 1900000109\n"
	"wechatpay.appid = wxd678efh567hg6787\n"
	"wechatpay.apiv3_key_file = secrets/wx-apiv3 secrets/wx-apiv3-rotated\n"
	"wechatpay.apiv2_key_file = secrets/wx-apiv2 secrets/wx-apiv2-refund\n"
	"wechatpay.platform_cert_files = keys/wxp-cert-a.pem keys/wxp-cert-b.pem\n"
	"wechatpay.public_key_id = " FUZZ_WX_PUBKEY_ID "\n"
	"wechatpay.public_key_file = keys/test-a.pub.pem\n";

/* The site called name of sites_conf (loaded once, kept until exit). */
static const struct pn_site *
fuzz_site(const char *name)
{
	static struct pn_config *cfg;
	const struct pn_site *s;

	if (cfg == NULL) {
		char	path[512];
		struct pn_err err;
		FILE   *f;

		snprintf(path, sizeof(path), "%s/sites.conf", fuzz_tmpdir());
		if ((f = fopen(path, "w")) == NULL
		    || fwrite(sites_conf, 1, sizeof(sites_conf) - 1, f) != sizeof(sites_conf) - 1
		    || fclose(f) != 0) {
			perror("fuzz: writing the sites");
			abort();
		}
		if ((cfg = pn_cfg_load(path, &err)) == NULL) {
			fprintf(stderr, "fuzz: cannot load the sites: %s\n", err.msg);
			abort();
		}
	}
	if ((s = pn_cfg_site(cfg, name)) == NULL) {
		fprintf(stderr, "fuzz: no site %s\n", name);
		abort();
	}
	return s;
}

const struct pn_site *
fuzz_stripe_site(void)
{
	return fuzz_site("stripe-fuzz");
}

const struct pn_site *
fuzz_alipay_site(int sign_type)
{
	return fuzz_site(sign_type == PN_ALIPAY_RSA ? "alipay-fuzz-rsa" : "alipay-fuzz");
}

const struct pn_site *
fuzz_2c2p_site(int api, int redirect_hash)
{
	if (api != PN_2C2P_REDIRECT)
		return fuzz_site("2c2p-fuzz");
	return fuzz_site(redirect_hash == PN_2C2P_SHA256 ? "2c2p-fuzz-sha256" : "2c2p-fuzz-sha1");
}

const struct pn_site *
fuzz_wechatpay_site(void)
{
	return fuzz_site("wx-fuzz");
}

EVP_PKEY *
fuzz_alipay_privkey(void)
{
	static EVP_PKEY *pkey;

	if (pkey == NULL) {
		struct pn_err err;

		pkey = pn_privkey_load(fuzz_fixture("unit/keys/test-a.key.pem"), &err);
		if (pkey == NULL) {
			fprintf(stderr, "fuzz: cannot load the Alipay test private key: %s\n",
				err.msg);
			abort();
		}
	}
	return pkey;
}

char *
fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = pn_xmalloc(size + 1);

	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

struct pn_request *
fuzz_request(const uint8_t *body, size_t size, const char *hname, const char *hvalue)
{
	struct pn_request *req = pn_xcalloc(1, sizeof(*req));

	req->method = "POST";
	req->path_info = "/fuzz";
	req->content_type = NULL;
	req->body = (const unsigned char *)fuzz_strndup(body, size);
	req->body_len = size;
	if (hname != NULL) {
		req->headers[0].name = hname;
		req->headers[0].value = hvalue;
		req->nheaders = 1;
	}
	return req;
}

void
fuzz_request_free(struct pn_request *req)
{
	if (req == NULL)
		return;
	free((void *)req->body);
	free(req);
}

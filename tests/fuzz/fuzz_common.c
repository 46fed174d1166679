/*
 * fuzz_common.c: fixtures and sites shared by the fuzz targets.
 *
 * The sites are built in memory, the way pn_cfg_load() would fill them, so
 * that the provider targets depend on no configuration file and on no file
 * mode (git does not keep the 0600 the loader insists on for secrets).
 */
#include "config.h"

#include <string.h>

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

const struct pn_site *
fuzz_stripe_site(void)
{
	static struct pn_site site;
	static struct pn_secret secret;

	if (site.name == NULL) {
		secret.id = "stripe-old:1";
		secret.data = (unsigned char *)FUZZ_STRIPE_SECRET;
		secret.len = strlen(FUZZ_STRIPE_SECRET);
		site.name = "stripe-fuzz";
		site.stripe.configured = true;
		site.stripe.secrets = &secret;
		site.stripe.nsecrets = 1;
		site.stripe.tolerance_s = 300;
	}
	return &site;
}

const struct pn_site *
fuzz_alipay_site(int sign_type)
{
	static struct pn_site sites[2];
	static struct pn_pubkey key;
	struct pn_site *s = &sites[sign_type == PN_ALIPAY_RSA];

	if (key.pkey == NULL) {
		struct pn_err err;

		key.path = (char *)"test-a.pub.pem";
		key.id = key.path;
		key.pkey = pn_pubkey_load(fuzz_fixture("unit/keys/test-a.pub.pem"), NULL, NULL,
					  &err);
		if (key.pkey == NULL) {
			fprintf(stderr, "fuzz: cannot load the Alipay test key: %s\n", err.msg);
			abort();
		}
	}
	if (s->name == NULL) {
		s->name = "alipay-fuzz";
		s->alipay.configured = true;
		s->alipay.app_id = (char *)"2021000000000001";
		s->alipay.seller_id = (char *)"2088000000000001";
		s->alipay.keys = &key;
		s->alipay.nkeys = 1;
		s->alipay.sign_type = sign_type == PN_ALIPAY_RSA ? PN_ALIPAY_RSA : PN_ALIPAY_RSA2;
	}
	return s;
}

const struct pn_site *
fuzz_2c2p_site(int api, int redirect_hash)
{
	static struct pn_site sites[3];
	static struct pn_secret secret;
	struct pn_site *s;

	if (secret.id == NULL) {
		secret.id = "2c2p-sandbox:1";
		secret.data = (unsigned char *)FUZZ_2C2P_SECRET;
		secret.len = strlen(FUZZ_2C2P_SECRET);
	}
	s = &sites[api != PN_2C2P_REDIRECT ? 0 : redirect_hash == PN_2C2P_SHA256 ? 2 : 1];
	if (s->name == NULL) {
		s->name = "2c2p-fuzz";
		s->twoc2p.configured = true;
		s->twoc2p.merchant_id = (char *)"JT01";
		s->twoc2p.secrets = &secret;
		s->twoc2p.nsecrets = 1;
		s->twoc2p.api = api == PN_2C2P_REDIRECT ? PN_2C2P_REDIRECT : PN_2C2P_JWT;
		s->twoc2p.redirect_hash = redirect_hash == PN_2C2P_SHA256 ? PN_2C2P_SHA256
		    : PN_2C2P_SHA1;
	}
	return s;
}

/* Append the secrets of a fixture file, one a line, as pn_cfg_load reads them. */
static void
add_secrets(const char *rel, struct pn_secret **list, size_t *n)
{
	char   *text = NULL, *line, *next;
	size_t	len = 0;
	int	lineno = 0;
	struct pn_err err;

	if (!pn_read_file(fuzz_fixture(rel), 65536, &text, &len, &err)) {
		fprintf(stderr, "fuzz: %s\n", err.msg);
		abort();
	}
	for (line = text; line != NULL; line = next) {
		size_t l;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		l = strlen(line);
		while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == ' '))
			l--;
		if (l == 0)
			continue;
		*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
		(*list)[*n].id = pn_xasprintf("%s:%d", strrchr(rel, '/') + 1, lineno);
		(*list)[*n].data = (unsigned char *)pn_xstrndup(line, l);
		(*list)[*n].len = l;
		(*n)++;
	}
	free(text);
}

static void
add_pubkey(const char *rel, struct pn_pubkey **list, size_t *n)
{
	struct pn_pubkey k;
	struct pn_err err;

	memset(&k, 0, sizeof(k));
	k.pkey = pn_pubkey_load(fuzz_fixture(rel), &k.serial, &k.not_after, &err);
	if (k.pkey == NULL) {
		fprintf(stderr, "fuzz: cannot load %s: %s\n", rel, err.msg);
		abort();
	}
	k.path = pn_xstrdup(rel);
	k.id = pn_xstrdup(strrchr(rel, '/') + 1);
	*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = k;
}

const struct pn_site *
fuzz_wechatpay_site(void)
{
	static struct pn_site site;

	if (site.name == NULL) {
		site.name = "wx-fuzz";
		site.wechatpay.configured = true;
		site.wechatpay.mchid = (char *)"1900000109";
		site.wechatpay.appid = (char *)"wxd678efh567hg6787";
		add_secrets("unit/secrets/wx-apiv3", &site.wechatpay.apiv3_keys,
			    &site.wechatpay.napiv3_keys);
		add_secrets("unit/secrets/wx-apiv3-rotated", &site.wechatpay.apiv3_keys,
			    &site.wechatpay.napiv3_keys);
		add_secrets("unit/secrets/wx-apiv2", &site.wechatpay.apiv2_keys,
			    &site.wechatpay.napiv2_keys);
		add_secrets("unit/secrets/wx-apiv2-refund", &site.wechatpay.apiv2_keys,
			    &site.wechatpay.napiv2_keys);
		site.wechatpay.v2_sign_types = PN_WXV2_MD5 | PN_WXV2_HMAC_SHA256;
		add_pubkey("unit/keys/wxp-cert-a.pem", &site.wechatpay.certs, &site.wechatpay.ncerts);
		add_pubkey("unit/keys/wxp-cert-b.pem", &site.wechatpay.certs, &site.wechatpay.ncerts);
		site.wechatpay.public_key_id = (char *)FUZZ_WX_PUBKEY_ID;
		add_pubkey("unit/keys/test-a.pub.pem", &site.wechatpay.public_keys,
			   &site.wechatpay.npublic_keys);
		site.wechatpay.tolerance_s = 300;
	}
	return &site;
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

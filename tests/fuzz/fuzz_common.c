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

/*
 * fuzz.h: what the libFuzzer targets in tests/fuzz/ share.
 *
 * Every fuzz_<target>.c defines LLVMFuzzerTestOneInput() and nothing else
 * global.  It is linked either with -fsanitize=fuzzer (--enable-fuzzing,
 * libFuzzer supplies main()) or with replay.c (a plain main() that feeds
 * corpus files, for ASan/UBSan builds with gcc or clang).  Targets set
 * themselves up lazily on the first call, so both drivers behave the same.
 * A target aborts (fuzz_check) when an invariant of the code under test
 * does not hold; that is a finding, like a sanitizer report.
 */
#ifndef PN_FUZZ_H
#define PN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with a message when an invariant does not hold. */
#define fuzz_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond); \
			abort(); \
		} \
	} while (0)

/* Path of a file under tests/fixtures ($PN_FIXTURES overrides the built-in
 * source directory); static buffer. */
const char *fuzz_fixture(const char *rel);

/*
 * A private temporary directory (removed at exit) with keys/ (a link to
 * tests/fixtures/unit/keys) and secrets/ (mode 0600 copies of the fixture
 * secrets and of test-a.key.pem); "fuzz.conf" and "sites.conf" there are
 * the targets' to write.
 */
const char *fuzz_tmpdir(void);

/* The fixed clock of the provider targets (Unix seconds). */
#define FUZZ_NOW 1700000100

/* The Stripe site: one secret, "whsec_test_secret" (tests/fixtures/unit/
 * secrets/stripe-old), tolerance 300 s.  The provider sites are loaded once
 * by pn_cfg_load() from a configuration in fuzz_tmpdir(). */
const struct pn_site *fuzz_stripe_site(void);
#define FUZZ_STRIPE_SECRET "whsec_test_secret"

/* The Alipay site: app_id 2021000000000001, seller_id 2088000000000001,
 * key tests/fixtures/unit/keys/test-a.pub.pem (sign_type RSA2 or RSA). */
const struct pn_site *fuzz_alipay_site(int sign_type);
/* The matching private key (test-a.key.pem), to sign mutated bodies. */
EVP_PKEY *fuzz_alipay_privkey(void);

/* The 2C2P site: merchant JT01, one secret (tests/fixtures/unit/secrets/
 * 2c2p-sandbox, as its ASCII bytes), api jwt or redirect (SHA1 / SHA256). */
const struct pn_site *fuzz_2c2p_site(int api, int redirect_hash);
#define FUZZ_2C2P_SECRET "ECC4E54DBA738857B84A7EBC6B5DC7187B8DA68750E88AB53AAA41F548D6F2D9"

/* The WeChat Pay site (as wx-both/wx-certs in tests/fixtures/unit/unit.conf):
 * mchid 1900000109, appid wxd678efh567hg6787; APIv3 keys wx-apiv3 and
 * wx-apiv3-rotated; APIv2 keys wx-apiv2 and wx-apiv2-refund, MD5 and
 * HMAC-SHA256; public key FUZZ_WX_PUBKEY_ID = test-a.pub.pem and the
 * platform certificates wxp-cert-a.pem and wxp-cert-b.pem. */
const struct pn_site *fuzz_wechatpay_site(void);
#define FUZZ_WX_PUBKEY_ID "PUB_KEY_ID_0000000000000024101100397200000006"

/* A request with the given body and up to one header (name may be NULL);
 * the body is copied into malloc'd memory of exactly size + 1 bytes (NUL
 * last) so that ASan sees any read past it.  Free with fuzz_request_free. */
struct pn_request;
struct pn_request *fuzz_request(const uint8_t *body, size_t size, const char *hname,
				const char *hvalue);
void fuzz_request_free(struct pn_request *req);

/* Exactly size bytes + NUL, malloc'd (caller frees). */
char *fuzz_strndup(const uint8_t *data, size_t size);

#endif

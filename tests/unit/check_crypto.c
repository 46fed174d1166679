/*
 * check_crypto.c: codecs, HMAC/digest known answers, RSA verification,
 * AES-GCM/ECB and key loading.
 */
#include "config.h"

#include <string.h>

#include <check.h>

#include "crypto.h"
#include "crypto_sign.h"
#include "fixture.h"
#include "suites.h"

static struct pn_arena *A;

static void
setup(void)
{
	A = pn_arena_new();
}

static void
teardown(void)
{
	pn_arena_free(A);
}

START_TEST(test_b64_roundtrip)
{
	static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	size_t	i, n;
	unsigned char *out;

	for (i = 0; i < 7; i++) {
		ck_assert_str_eq(pn_b64_encode(A, plain[i], strlen(plain[i])), enc[i]);
		ck_assert(pn_b64_decode(A, enc[i], strlen(enc[i]), &out, &n));
		ck_assert_uint_eq(n, strlen(plain[i]));
		ck_assert(memcmp(out, plain[i], n) == 0);
	}
}
END_TEST

START_TEST(test_b64_strict)
{
	unsigned char *out;
	size_t	n;

	ck_assert(!pn_b64_decode(A, "Zg=", 3, &out, &n));	/* bad length */
	ck_assert(!pn_b64_decode(A, "Zh==", 4, &out, &n));	/* non-zero pad bits */
	ck_assert(!pn_b64_decode(A, "Z g=", 4, &out, &n));	/* blank */
	ck_assert(!pn_b64_decode(A, "Zm-v", 4, &out, &n));	/* url alphabet */
	ck_assert(!pn_b64_decode(A, "=Zm9", 4, &out, &n));
	ck_assert(pn_b64url_decode(A, "Zm8", 3, &out, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert(!pn_b64url_decode(A, "Zm8=", 4, &out, &n));	/* no padding in base64url */
	ck_assert(!pn_b64url_decode(A, "Zm+v", 4, &out, &n));
	ck_assert(!pn_b64url_decode(A, "Z", 1, &out, &n));
	ck_assert_str_eq(pn_b64url_encode(A, "\xfb\xff", 2), "-_8");
}
END_TEST

START_TEST(test_hex)
{
	unsigned char out[4];
	size_t	n;

	ck_assert_str_eq(pn_hex_encode(A, "\x01\xab", 2, false), "01ab");
	ck_assert_str_eq(pn_hex_encode(A, "\x01\xab", 2, true), "01AB");
	ck_assert(pn_hex_decode("01aB", 4, out, sizeof(out), &n));
	ck_assert_uint_eq(n, 2);
	ck_assert(out[1] == 0xab);
	ck_assert(!pn_hex_decode("0g", 2, out, sizeof(out), &n));
	ck_assert(!pn_hex_decode("012", 3, out, sizeof(out), &n));
	ck_assert(!pn_hex_decode("0102030405", 10, out, sizeof(out), &n));
}
END_TEST

/* stripe-node test/crypto/helpers.ts known answers (psp §A14). */
START_TEST(test_hmac_known_answers)
{
	static const struct {
		const char *msg;
		const char *hex;
	} v[] = {
		{"", "f7f9bd47fb987337b5796fdc1fdb9ba221d0d5396814bfcaf9521f43fd8927fd"},
		{"{\"obj1\":\"hello\",\"obj2\":\"world\"}",
		 "bebb1a643997f419b315ddba19e6f5411e1ce7f810ba6d3617ce72823092f363"},
		{"\xf0\x9f\x98\x80", "837da296d05c4fe31f61d5d7ead035099d9585a5bcde87de952012a78f0b0c43"},
	};
	size_t	i, n;
	unsigned char mac[64];

	for (i = 0; i < 3; i++) {
		struct pn_iov iov = {v[i].msg, strlen(v[i].msg)};

		ck_assert(pn_hmac(PN_MD_SHA256, "test_secret", 11, &iov, 1, mac, &n));
		ck_assert_str_eq(pn_hex_encode(A, mac, n, false), v[i].hex);
	}
}
END_TEST

/* WeChat Pay v2 official vector (psp §3.4.A): MD5 and HMAC-SHA256. */
START_TEST(test_digest_wechat_v2)
{
	const char *s = "appid=wxd930ea5d5a258f4f&body=test&device_info=1000&mch_id=10000100&"
	    "nonce_str=ibuaiVcKdpRxkhJA&key=192006250b4c09247ec02edce69f6a2d";
	struct pn_iov iov = {s, strlen(s)};
	unsigned char md[64];
	size_t	n;

	ck_assert(pn_digest(PN_MD_MD5, &iov, 1, md, &n));
	ck_assert_str_eq(pn_hex_encode(A, md, n, true), "9A0A8659F005D6984697E2CA0A9CF3B7");
	ck_assert(pn_hmac(PN_MD_SHA256, "192006250b4c09247ec02edce69f6a2d", 32, &iov, 1, md, &n));
	ck_assert_str_eq(pn_hex_encode(A, md, n, true),
			 "6A9AE1657590FD6257D693A078E1C3E4BB6BA4DC30B23E0EE2496E54170DACD6");
}
END_TEST

START_TEST(test_ct_equal)
{
	ck_assert(pn_ct_equal("abc", "abc", 3));
	ck_assert(!pn_ct_equal("abc", "abd", 3));
	ck_assert(pn_ct_equal("", "", 0));
}
END_TEST

START_TEST(test_key_forms)
{
	struct pn_err err;
	char   *serial = NULL;
	time_t	not_after = 0;
	EVP_PKEY *k;

	k = pn_pubkey_load(fixture_path("unit/keys/test-a.pub.pem"), &serial, &not_after, &err);
	ck_assert_msg(k != NULL, "%s", err.msg);
	ck_assert(serial == NULL);
	EVP_PKEY_free(k);
	k = pn_pubkey_load(fixture_path("unit/keys/test-a.b64"), &serial, &not_after, &err);
	ck_assert_msg(k != NULL, "%s", err.msg);
	EVP_PKEY_free(k);
	k = pn_pubkey_load(fixture_path("unit/keys/test-a.crt"), &serial, &not_after, &err);
	ck_assert_msg(k != NULL, "%s", err.msg);
	ck_assert_str_eq(serial, "20200514E63C2FE04D538716FE21358B");
	ck_assert(not_after > 1900000000);
	free(serial);
	EVP_PKEY_free(k);
	/* PKCS#1, private keys, short keys and garbage are refused */
	ck_assert(pn_pubkey_load(fixture_path("unit/keys/test-a.pkcs1.pem"), NULL, NULL, &err) == NULL);
	ck_assert(strstr(err.msg, "unsupported PEM type") != NULL);
	ck_assert(pn_pubkey_load(fixture_path("unit/keys/test-a.key.pem"), NULL, NULL, &err) == NULL);
	ck_assert(pn_pubkey_load(fixture_path("unit/keys/weak-1024.pub.pem"), NULL, NULL, &err) == NULL);
	ck_assert(strstr(err.msg, "2048") != NULL);
	ck_assert(pn_pubkey_parse("not base64!", 11, NULL, NULL, &err) == NULL);
	ck_assert(pn_pubkey_load("/nonexistent/key.pem", NULL, NULL, &err) == NULL);
}
END_TEST

START_TEST(test_rsa_sign_verify)
{
	struct pn_err err;
	EVP_PKEY *priv = pn_privkey_load(fixture_path("unit/keys/test-a.key.pem"), &err);
	EVP_PKEY *pub = pn_pubkey_load(fixture_path("unit/keys/test-a.pub.pem"), NULL, NULL, &err);
	EVP_PKEY *other = pn_pubkey_load(fixture_path("unit/keys/test-b.pub.pem"), NULL, NULL, &err);
	unsigned char *sig;
	size_t	siglen;
	struct pn_iov iov[2] = {{"hello ", 6}, {"world", 5}};

	ck_assert(priv && pub && other);
	ck_assert(pn_rsa_sign(A, priv, PN_MD_SHA256, "hello world", 11, &sig, &siglen));
	ck_assert(pn_rsa_verify(pub, PN_MD_SHA256, iov, 2, sig, siglen));
	ck_assert(!pn_rsa_verify(pub, PN_MD_SHA1, iov, 2, sig, siglen));
	ck_assert(!pn_rsa_verify(other, PN_MD_SHA256, iov, 2, sig, siglen));
	ck_assert(!pn_rsa_verify(pub, PN_MD_SHA256, iov, 2, sig, siglen - 1));
	sig[10] ^= 1;
	ck_assert(!pn_rsa_verify(pub, PN_MD_SHA256, iov, 2, sig, siglen));
	EVP_PKEY_free(priv);
	EVP_PKEY_free(pub);
	EVP_PKEY_free(other);
}
END_TEST

/* psp §2.10.B: AES-256-GCM of the synthetic WeChat Pay v3 resource. */
START_TEST(test_gcm_vector)
{
	const char *ct_b64 =
	    "m1PwEwAXFEYbqsFIyOtsUT3b1MNyWov09oQar9g6VSXu6lPDY75OP1zSYrqJhllqJITOAvtf35w6H/bfnmM0yipJpZghNRSHmnykXd0wi8Gch3WfRxgGcUalbcp7Y6gINCsYsOl+mvial1tUBn97LhrtmASMRj70Ou5DD5z2CgzfiUU6jBJeNUI+0PK0KE6KIEl6tHY+NfUxi0YKE/FwcOh0xn8T4kJlpSUiUKOmsUIq/Lkx3GUWAYX+Ti/kuUxww4CGaGezqcxILncJBxU5Uq7uSrtX2asJiiGWQuqyDReWWoaXGI7/lJdf+09ey3beLBLn4dR8WooB62CVQm8DYJPQchoSE15DlFt1jYYi0Qv+zf3NUgVx9Ijcxfr3KUefaaCNTPEwyIiev6DOFrxlZ9V510Hd/6hzXESkpOdZl0fHdXtcw4/bmOG7kkW4lLSpjJZBVVCBodZw1pNOfHM7NnwKp1Yqf3qtaI9hM5yrzudUeSATpqXl2f2awCD9ilxgw6XHboAhcd3mz0N1GBX6HHCUsvrRDerQOTK2QgV3LxleZqqJ8LmMLyTv+TUVocxsZpOnb3POTZE=";
	const unsigned char *key = (const unsigned char *)"TestAPIv3Key0123456789abcdefABCD";
	unsigned char *ct, *pt;
	size_t	ctlen, ptlen;

	ck_assert(pn_b64_decode(A, ct_b64, strlen(ct_b64), &ct, &ctlen));
	ck_assert(pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "transaction", 11, ct, ctlen,
				       &pt, &ptlen));
	ck_assert(strncmp((char *)pt, "{\"mchid\":\"1900000109\",\"appid\":\"wxd678efh567hg6787\"", 50) == 0);
	ck_assert(strstr((char *)pt, "\"total\":8888") != NULL);
	/* wrong AAD, wrong key, flipped tag bit: all refused */
	ck_assert(!pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "refund", 6, ct, ctlen, &pt, &ptlen));
	ck_assert(!pn_aes256gcm_decrypt(A, (const unsigned char *)"TestAPIv3Key0123456789abcdefABCE",
					"fdasflkja484", 12, "transaction", 11, ct, ctlen, &pt, &ptlen));
	ct[ctlen - 1] ^= 1;
	ck_assert(!pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "transaction", 11, ct, ctlen,
					&pt, &ptlen));
	ck_assert(!pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "", 0, ct, 16, &pt, &ptlen));
}
END_TEST

Suite *
suite_crypto(void)
{
	Suite  *s = suite_create("crypto");
	TCase  *tc = tcase_create("crypto");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_b64_roundtrip);
	tcase_add_test(tc, test_b64_strict);
	tcase_add_test(tc, test_hex);
	tcase_add_test(tc, test_hmac_known_answers);
	tcase_add_test(tc, test_digest_wechat_v2);
	tcase_add_test(tc, test_ct_equal);
	tcase_add_test(tc, test_key_forms);
	tcase_add_test(tc, test_rsa_sign_verify);
	tcase_add_test(tc, test_gcm_vector);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_2c2p.c: the 2C2P adapter: psp §B14 known answers (the JWT guide
 * sample verifies only with the key's ASCII bytes; the legacy SHA1
 * vector), the literal-amount scanner, the respCode table, the answers,
 * and the data-driven cases in tests/fixtures/2c2p (psp §B15 and ours).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "2c2p.h"
#include "crypto.h"
#include "fixture.h"
#include "suites.h"

#define GUIDE_KEY "1F4EDB965BBB3094F791A83750FBDCDA3852131CB5218E21E4F42929A1975E60"
#define GUIDE_JWT                                                                                 \
	"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJtZXJjaGFudElEIjoiSlQwMSIsImludm9pY2VObyI6IjE1Mj" \
	"M5NTM2NjEiLCJkZXNjcmlwdGlvbiI6Iml0ZW0gMSIsImFtb3VudCI6MTAwMCwiY3VycmVuY3lDb2RlIjoiU0dE" \
	"In0.ElmhOULUdK63FnriSs2XyhH1LxULoTVIopTUuQ77DvA"
#define GUIDE_PAYLOAD                                                                              \
	"{\"merchantID\":\"JT01\",\"invoiceNo\":\"1523953661\",\"description\":\"item 1\","        \
	"\"amount\":1000,\"currencyCode\":\"SGD\"}"

static char **cases;
static size_t ncases;

START_TEST(test_2c2p_case)
{
	fixture_run_case(&pn_provider_2c2p, "2c2p", cases[_i]);
}
END_TEST

static bool
verify_with(struct pn_arena *a, const void *key, size_t keylen, const char *jwt,
	    unsigned char **payload, size_t *plen, struct pn_err *err)
{
	struct pn_secret s = {"k:1", (unsigned char *)key, keylen, 1};
	const char *key_id = NULL;

	return pn_2c2p_verify_jwt(a, jwt, strlen(jwt), &s, 1, payload, plen, &key_id, err);
}

/* psp §B14.1 / §B15.1-2: ASCII key verifies; hex-decoded and lower-case do not. */
START_TEST(test_guide_key_is_ascii)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char raw[32], *payload = NULL;
	char	lower[65];
	size_t	n = 0, plen = 0, i;
	struct pn_err err;

	ck_assert_msg(verify_with(a, GUIDE_KEY, 64, GUIDE_JWT, &payload, &plen, &err), "%s",
		      err.msg);
	ck_assert_uint_eq(plen, strlen(GUIDE_PAYLOAD));
	ck_assert_str_eq((const char *)payload, GUIDE_PAYLOAD);

	ck_assert(pn_hex_decode(GUIDE_KEY, 64, raw, sizeof(raw), &n) && n == 32);
	ck_assert(!verify_with(a, raw, 32, GUIDE_JWT, &payload, &plen, &err));
	for (i = 0; i < 64; i++)
		lower[i] = (char)(GUIDE_KEY[i] >= 'A' && GUIDE_KEY[i] <= 'F' ? GUIDE_KEY[i] + 32
								     : GUIDE_KEY[i]);
	lower[64] = '\0';
	ck_assert(!verify_with(a, lower, 64, GUIDE_JWT, &payload, &plen, &err));
	pn_arena_free(a);
}
END_TEST

START_TEST(test_jwt_bounds)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char *payload;
	size_t	plen, big = PN_2C2P_MAX_JWT + 1;
	char   *huge = malloc(big + 1);
	struct pn_err err;

	memset(huge, 'A', big);
	huge[10] = huge[20] = '.';
	huge[big] = '\0';
	ck_assert(!verify_with(a, GUIDE_KEY, 64, huge, &payload, &plen, &err));
	ck_assert(strstr(err.msg, "too long") != NULL);
	ck_assert(!verify_with(a, GUIDE_KEY, 64, "", &payload, &plen, &err));
	ck_assert(!verify_with(a, GUIDE_KEY, 64, "..", &payload, &plen, &err));
	ck_assert(!verify_with(a, GUIDE_KEY, 64, GUIDE_JWT ".", &payload, &plen, &err));
	/* an embedded NUL never reaches the HMAC */
	{
		const char *key_id;
		struct pn_secret s = {"k:1", (unsigned char *)GUIDE_KEY, 64, 1};
		char	buf[sizeof(GUIDE_JWT)];

		memcpy(buf, GUIDE_JWT, sizeof(buf));
		buf[5] = '\0';
		ck_assert(!pn_2c2p_verify_jwt(a, buf, sizeof(buf) - 1, &s, 1, &payload, &plen,
					      &key_id, &err));
	}
	free(huge);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_raw_member)
{
	const char *v;
	size_t	n;
	static const char doc[] =
	    " { \"a\" : {\"amount\": 1, \"x\": [1, {\"y\": \"}\"}]}, \"s\": \"q\\\"}\", "
	    "\"amount\" : 19.990 , \"t\":true}";

	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "amount", &v, &n));
	ck_assert_uint_eq(n, 6);
	ck_assert(memcmp(v, "19.990", 6) == 0);
	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "t", &v, &n) && n == 4);
	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "s", &v, &n) && n == 6);
	ck_assert(!pn_2c2p_raw_member(doc, strlen(doc), "y", &v, &n));
	ck_assert(!pn_2c2p_raw_member(doc, strlen(doc), "am", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"\\u0061mount\":1}", strlen("{\"\\u0061mount\":1}"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("[1]", strlen("[1]"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{}", strlen("{}"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"amount\"", strlen("{\"amount\""), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"amount\":", strlen("{\"amount\":"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"a\":\"unterminated", strlen("{\"a\":\"unterminated"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"a\":[1,2", strlen("{\"a\":[1,2"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("", strlen(""), "amount", &v, &n));
	/* only the given length is read */
	ck_assert(!pn_2c2p_raw_member("{\"amount\":1}", 8, "amount", &v, &n));
}
END_TEST

static const struct {
	const char *code;
	enum pn_kind kind;
} kinds[] = {
	{"0000", PN_KIND_PAID},	   {"0001", PN_KIND_PENDING}, {"2001", PN_KIND_PENDING},
	{"0003", PN_KIND_CLOSED},  {"4001", PN_KIND_FAILED},  {"4051", PN_KIND_FAILED},
	{"4999", PN_KIND_FAILED},  {"4000", PN_KIND_IGNORED}, {"4200", PN_KIND_IGNORED},
	{"0004", PN_KIND_IGNORED}, {"0999", PN_KIND_IGNORED}, {"2000", PN_KIND_IGNORED},
	{"2002", PN_KIND_IGNORED}, {"9015", PN_KIND_IGNORED}, {"5xyz", PN_KIND_IGNORED},
	{"4x51", PN_KIND_IGNORED}, {"000", PN_KIND_IGNORED},  {"00000", PN_KIND_IGNORED},
	{"", PN_KIND_IGNORED},	   {" 000", PN_KIND_IGNORED}, {NULL, PN_KIND_IGNORED},
};

START_TEST(test_resp_code_table)
{
	ck_assert_msg(pn_2c2p_kind(kinds[_i].code) == kinds[_i].kind, "respCode \"%s\"",
		      kinds[_i].code ? kinds[_i].code : "(null)");
}
END_TEST

/* psp §B14.3: the legacy content string and its HMAC-SHA1. */
START_TEST(test_legacy_vector)
{
	static const char body[] =
	    "version=7.0&request_timestamp=2024-01-01+12%3A00%3A00&merchant_id=JT01&order_id=ORDER42"
	    "&invoice_no=&currency=702&amount=000000001999&transaction_ref=1234567&approval_code="
	    "123456&eci=05&transaction_datetime=2024-01-01+12%3A00%3A05&payment_channel=001"
	    "&payment_status=000&channel_response_code=00&channel_response_desc=success"
	    "&masked_pan=411111XXXXXX1111&hash_value=ignored&not_signed=x";
	struct pn_arena *a = pn_arena_new();
	struct pn_form f;
	struct pn_err err;
	unsigned char mac[64];
	size_t	len, maclen;
	char   *content;
	struct pn_iov iov;

	ck_assert(pn_form_parse(a, body, strlen(body), &f, &err));
	content = pn_2c2p_redirect_content(a, &f, &len);
	ck_assert_str_eq(content, "7.02024-01-01 12:00:00JT01ORDER42702000000001999123456712345605"
				  "2024-01-01 12:00:0500100000success411111XXXXXX1111");
	ck_assert_uint_eq(len, strlen(content));
	iov = (struct pn_iov){content, len};
	ck_assert(pn_hmac(PN_MD_SHA1, "TESTSECRET", 10, &iov, 1, mac, &maclen));
	ck_assert_str_eq(pn_hex_encode(a, mac, maclen, false),
			 "e6057e5c42fa46942495a4758719ba36f16dd58f");
	pn_arena_free(a);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_2c2p.answer(&req, &res, 200, NULL);
	ck_assert_int_eq(res.status, 200);
	ck_assert_str_eq(res.content_type, "application/json");
	ck_assert_str_eq(res.body.data, "{\"status\":\"received\"}");
	pn_provider_2c2p.answer(&req, &res, 400, "signature verification failed");
	ck_assert_int_eq(res.status, 400);
	ck_assert_str_eq(res.body.data, "{\"error\":\"signature verification failed\"}");
	pn_provider_2c2p.answer(&req, &res, 503, NULL);
	ck_assert_int_eq(res.status, 503);
	ck_assert_str_eq(res.body.data, "{\"error\":\"failed\"}");
	pn_buf_free(&res.body);
	ck_assert_str_eq(pn_provider_2c2p.name, "2c2p");
	ck_assert_str_eq(pn_provider_2c2p.program, "paynotify-2c2p");
	ck_assert_int_eq(pn_provider_2c2p.unverified_status, 400);
	ck_assert_ptr_eq(pn_provider_find("2c2p"), &pn_provider_2c2p);
}
END_TEST

/* A site that is not configured for 2C2P is not served. */
START_TEST(test_configured)
{
	const struct pn_config *cfg = fixture_config();

	ck_assert(pn_provider_2c2p.configured(pn_cfg_site(cfg, "2c2p-jt01")));
	ck_assert(!pn_provider_2c2p.configured(pn_cfg_site(cfg, "stripe-old")));
	ck_assert_int_eq(pn_cfg_site(cfg, "2c2p-jt01")->twoc2p.api, PN_2C2P_JWT);
	ck_assert_int_eq(pn_cfg_site(cfg, "2c2p-legacy")->twoc2p.api, PN_2C2P_REDIRECT);
}
END_TEST

Suite *
suite_2c2p(void)
{
	Suite  *s = suite_create("2c2p");
	TCase  *tc = tcase_create("2c2p");

	ncases = fixture_cases("2c2p", &cases);
	tcase_add_test(tc, test_guide_key_is_ascii);
	tcase_add_test(tc, test_jwt_bounds);
	tcase_add_test(tc, test_raw_member);
	tcase_add_loop_test(tc, test_resp_code_table, 0, (int)PN_ARRAY_LEN(kinds));
	tcase_add_test(tc, test_legacy_vector);
	tcase_add_test(tc, test_answers);
	tcase_add_test(tc, test_configured);
	tcase_add_loop_test(tc, test_2c2p_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	return s;
}

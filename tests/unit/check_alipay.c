/*
 * check_alipay.c: the signed-content rules and the data-driven Alipay cases
 * in tests/fixtures/alipay (real SDK vectors and our own).
 */
#include "config.h"

#include <string.h>

#include <check.h>
#include <openssl/sha.h>

#include "alipay.h"
#include "crypto.h"
#include "fixture.h"
#include "suites.h"

static char **cases;
static size_t ncases;

START_TEST(test_alipay_case)
{
	fixture_run_case(&pn_provider_alipay, "alipay", cases[_i]);
}
END_TEST

static char *
content_of(struct pn_arena *a, const char *body, bool v2)
{
	struct pn_form f;
	struct pn_err err;
	size_t	len;

	ck_assert_msg(pn_form_parse(a, body, strlen(body), &f, &err), "%s", err.msg);
	return pn_alipay_sign_content(a, &f, v2, false, &len);
}

/* psp §1.9.C: the exact V1 content, byte for byte. */
START_TEST(test_v1_content_synthetic)
{
	struct pn_arena *a = pn_arena_new();
	char   *body = NULL, *c;
	size_t	len;
	struct pn_err err;
	unsigned char md[64];
	size_t	mdlen;
	struct pn_iov iov;

	ck_assert(pn_read_file(fixture_path("alipay/synthetic-pem.body"), 65536, &body, &len, &err));
	c = content_of(a, body, false);
	ck_assert_str_eq(c,
	    "app_id=2021000000000001&auth_app_id=2021000000000001&buyer_id=2088102177846880&"
	    "buyer_logon_id=tes***@example.com&buyer_pay_amount=88.88&charset=utf-8&"
	    "fund_bill_list=[{\"amount\":\"88.88\",\"fundChannel\":\"ALIPAYACCOUNT\"}]&"
	    "gmt_create=2024-05-20 10:00:01&gmt_payment=2024-05-20 10:00:05&invoice_amount=88.88&"
	    "notify_id=2024052001222100002000000000000001&notify_time=2024-05-20 10:00:06&"
	    "notify_type=trade_status_sync&out_trade_no=ORDER-20240520-0001&"
	    "passback_params=order%3D42&point_amount=0.00&receipt_amount=88.88&"
	    "seller_email=merchant@example.com&seller_id=2088000000000001&"
	    "subject=\xe4\xbc\x9a\xe5\x91\x98+\xe5\xb9\xb4\xe5\x8d\xa1 (test)&total_amount=88.88&"
	    "trade_no=2024052022001400000000000001&trade_status=TRADE_SUCCESS&version=1.0");
	iov.p = c;
	iov.len = strlen(c);
	ck_assert(pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen));
	ck_assert_str_eq(pn_hex_encode(a, md, mdlen, false),
			 "eb933f0498ed926ffb2038ca87bff1123b42e15317fda0a4f9aede2ba21dda70");
	free(body);
	pn_arena_free(a);
}
END_TEST

/* psp §1.9.A: the real notification's V1 content hashes to the known value. */
START_TEST(test_v1_content_yuque)
{
	struct pn_arena *a = pn_arena_new();
	char   *body = NULL, *c;
	size_t	len, mdlen;
	struct pn_err err;
	unsigned char md[64];
	struct pn_iov iov;

	ck_assert(pn_read_file(fixture_path("alipay/yuque-v1.body"), 65536, &body, &len, &err));
	c = content_of(a, body, false);
	iov.p = c;
	iov.len = strlen(c);
	ck_assert(pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen));
	ck_assert_str_eq(pn_hex_encode(a, md, mdlen, false),
			 "f7ddd6b8ed65cde03339b71735ad29e044d8f3ed0e2659c5156d9ed2acaf1f57");
	/* V2 keeps sign_type */
	ck_assert(strstr(content_of(a, body, true), "&sign_type=RSA2&") != NULL);
	ck_assert(strstr(c, "sign_type") == NULL);
	free(body);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_content_rules)
{
	struct pn_arena *a = pn_arena_new();

	/* empty values dropped, byte order ('_' before letters; prefix first) */
	ck_assert_str_eq(content_of(a, "b=2&a_b=3&a=1&empty=&sign=x&sign_type=RSA2&ab=4", false),
			 "a=1&a_b=3&ab=4&b=2");
	ck_assert_str_eq(content_of(a, "b=2&sign_type=RSA2&sign=x", true), "b=2&sign_type=RSA2");
	{
		struct pn_form f;
		struct pn_err err;
		size_t	len;

		ck_assert(pn_form_parse(a, "b=&a=1&sign=x", 13, &f, &err));
		ck_assert_str_eq(pn_alipay_sign_content(a, &f, false, true, &len), "a=1&b=");
	}
	pn_arena_free(a);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_alipay.answer(0, &res, 200, NULL);
	ck_assert_int_eq(res.body.len, 7);
	ck_assert_str_eq(res.body.data, "success");
	ck_assert_str_eq(res.content_type, "text/plain");
	pn_provider_alipay.answer(0, &res, 503, "db down");
	ck_assert_str_eq(res.body.data, "fail");
	ck_assert_int_eq(res.status, 503);
	pn_buf_free(&res.body);
}
END_TEST

Suite *
suite_alipay(void)
{
	Suite  *s = suite_create("alipay");
	TCase  *tc = tcase_create("alipay");

	ncases = fixture_cases("alipay", &cases);
	tcase_add_test(tc, test_v1_content_synthetic);
	tcase_add_test(tc, test_v1_content_yuque);
	tcase_add_test(tc, test_content_rules);
	tcase_add_test(tc, test_answers);
	tcase_add_loop_test(tc, test_alipay_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	return s;
}

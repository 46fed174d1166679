/*
 * check_stripe.c: Stripe-Signature parsing and the data-driven Stripe
 * cases in tests/fixtures/stripe (SDK known answers and our own).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "fixture.h"
#include "stripe.h"
#include "suites.h"

static char **cases;
static size_t ncases;

START_TEST(test_stripe_case)
{
	fixture_run_case(&pn_provider_stripe, "stripe", cases[_i]);
}
END_TEST

START_TEST(test_header_elements)
{
	struct pn_stripe_sig sig;
	struct pn_err err;

	ck_assert(pn_stripe_parse_header(" t=12 , v1=" "2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7 ,v0=ab,x=y",
					 &sig, &err));
	ck_assert_int_eq(sig.t, 12);
	ck_assert_str_eq(sig.t_text, "12");
	ck_assert_int_eq(sig.nv1, 1);
	/* upper-case hex decodes to the same bytes (stripe-go compares bytes) */
	ck_assert(pn_stripe_parse_header("t=1,v1=2220F87EF101A04665F11CDF770523143F875572008577FA0F20882DDB9CC3C7",
					 &sig, &err));
	ck_assert_int_eq(sig.nv1, 1);
	ck_assert(!pn_stripe_parse_header("", &sig, &err));
	ck_assert(!pn_stripe_parse_header("v1=aa", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=1,v1=a=b", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=-1", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=1234567890123456789", &sig, &err));
}
END_TEST

START_TEST(test_many_v1_bounded)
{
	struct pn_buf b = PN_BUF_INIT;
	struct pn_stripe_sig sig;
	struct pn_err err;
	int	i;

	pn_buf_puts(&b, "t=1");
	for (i = 0; i < 40; i++)
		pn_buf_puts(&b, ",v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7");
	ck_assert(pn_stripe_parse_header(b.data, &sig, &err));
	ck_assert_int_eq(sig.nv1, 16);
	pn_buf_free(&b);
}
END_TEST

START_TEST(test_duplicate_header_refused)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_event ev;
	struct pn_err err;
	const struct pn_site *site = pn_cfg_site(fixture_config(), "stripe-old");
	struct pn_verify_ctx vc = {&req, site, a, 0, false, 0, NULL};

	memset(&req, 0, sizeof(req));
	req.body = (const unsigned char *)"{}";
	req.body_len = 2;
	req.headers[0].name = "Stripe-Signature";
	req.headers[0].value = "t=1,v1=00";
	req.headers[0].duplicate = true;
	req.nheaders = 1;
	pn_event_init(&ev);
	ck_assert_int_eq(pn_provider_stripe.verify(&vc, &ev, &err), PN_UNVERIFIED);
	ck_assert(strstr(err.msg, "more than one") != NULL);
	req.nheaders = 0;
	ck_assert_int_eq(pn_provider_stripe.verify(&vc, &ev, &err), PN_UNVERIFIED);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_stripe.answer(0, &res, 200, NULL);
	ck_assert_int_eq(res.status, 200);
	pn_provider_stripe.answer(0, &res, 400, "bad \"quoted\" reason");
	ck_assert_int_eq(res.status, 400);
	ck_assert_str_eq(res.body.data, "{\"error\":\"bad \\\"quoted\\\" reason\"}");
	pn_buf_free(&res.body);
}
END_TEST

Suite *
suite_stripe(void)
{
	Suite  *s = suite_create("stripe");
	TCase  *tc = tcase_create("stripe");

	ncases = fixture_cases("stripe", &cases);
	tcase_add_test(tc, test_header_elements);
	tcase_add_test(tc, test_many_v1_bounded);
	tcase_add_test(tc, test_duplicate_header_refused);
	tcase_add_test(tc, test_answers);
	tcase_add_loop_test(tc, test_stripe_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	return s;
}

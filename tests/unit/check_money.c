/*
 * check_money.c: exact decimal amounts and ISO 4217 exponents.
 */
#include "config.h"

#include <string.h>

#include <check.h>

#include "money.h"
#include "suites.h"

static const struct {
	const char *s;
	int	exp;
	bool	ok;
	int64_t	minor;
} cases[] = {
	{"88.88", 2, true, 8888},
	{"0.10", 2, true, 10},
	{"19.99", 2, true, 1999},
	{"19.990", 2, true, 1999},
	{"000000002500.90000", 2, true, 250090},
	{"1000", 2, true, 100000},
	{"1000", 0, true, 1000},
	{"1.5", 3, true, 1500},
	{"0.001", 3, true, 1},
	{"7", 0, true, 7},
	{"7.0", 0, true, 7},
	{"19.995", 2, false, 0},
	{"7.5", 0, false, 0},
	{"-1.00", 2, false, 0},
	{"+1.00", 2, false, 0},
	{"1e3", 2, false, 0},
	{" 1.00", 2, false, 0},
	{"1.00 ", 2, false, 0},
	{"1,00", 2, false, 0},
	{".5", 2, false, 0},
	{"5.", 2, false, 0},
	{"1.2.3", 2, false, 0},
	{"", 2, false, 0},
	{"0x10", 2, false, 0},
	{"10000000000000.01", 2, false, 0},	/* above 10^15 minor units */
	{"10000000000000.00", 2, true, 1000000000000000},
	{"99999999999999999999999", 0, false, 0},
	{"9999999999999.99", 2, true, 999999999999999},
};

START_TEST(test_parse_table)
{
	int64_t	v = -1;
	struct pn_err err;
	bool	ok = pn_money_parse(cases[_i].s, cases[_i].exp, &v, &err);

	ck_assert_msg(ok == cases[_i].ok, "\"%s\" exp %d: %s", cases[_i].s, cases[_i].exp,
		      ok ? "accepted" : err.msg);
	if (ok)
		ck_assert_int_eq(v, cases[_i].minor);
}
END_TEST

START_TEST(test_exponents)
{
	char	c[4];

	ck_assert_int_eq(pn_money_exponent("JPY"), 0);
	ck_assert_int_eq(pn_money_exponent("jpy"), 0);
	ck_assert_int_eq(pn_money_exponent("CNY"), 2);
	ck_assert_int_eq(pn_money_exponent("KWD"), 3);
	ck_assert_int_eq(pn_money_exponent("BHD"), 3);
	ck_assert_int_eq(pn_money_exponent("ISK"), 0);
	ck_assert_int_eq(pn_money_exponent("CLF"), 4);
	ck_assert_int_eq(pn_money_exponent("XXX"), -1);
	ck_assert_int_eq(pn_money_exponent("US"), -1);
	ck_assert(pn_money_currency("usd", c));
	ck_assert_str_eq(c, "USD");
	ck_assert(!pn_money_currency("u1d", c));
	ck_assert_str_eq(pn_money_alpha_from_numeric("702"), "SGD");
	ck_assert_str_eq(pn_money_alpha_from_numeric("764"), "THB");
	ck_assert_str_eq(pn_money_alpha_from_numeric("156"), "CNY");
	ck_assert(pn_money_alpha_from_numeric("999") == NULL);
}
END_TEST

START_TEST(test_rescale_format)
{
	int64_t	v;
	char	buf[32];

	ck_assert(pn_money_rescale(12300, 2, 0, &v));
	ck_assert_int_eq(v, 123);
	ck_assert(!pn_money_rescale(12345, 2, 0, &v));
	ck_assert(pn_money_rescale(5, 0, 2, &v));
	ck_assert_int_eq(v, 500);
	ck_assert(!pn_money_rescale(-1, 2, 2, &v));
	pn_money_format(8888, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "88.88");
	pn_money_format(5, 3, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0.005");
	pn_money_format(500, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "500");
	/* negative amounts (a bill's refund total): the sign once, in front */
	pn_money_format(-4, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "-0.04");
	pn_money_format(-300000, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "-3000.00");
	pn_money_format(-7, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "-7");
	pn_money_format(INT64_MIN, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "-92233720368547758.08");
}
END_TEST

Suite *
suite_money(void)
{
	Suite  *s = suite_create("money");
	TCase  *tc = tcase_create("money");

	tcase_add_loop_test(tc, test_parse_table, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, test_exponents);
	tcase_add_test(tc, test_rescale_format);
	suite_add_tcase(s, tc);
	return s;
}

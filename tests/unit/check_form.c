/*
 * check_form.c: the form decoder decodes exactly once and refuses
 * malformed escapes, NUL bytes and duplicate keys.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "buf.h"
#include "form.h"
#include "suites.h"

static const struct {
	const char *body;
	bool	ok;
	const char *key;
	const char *value;
} cases[] = {
	{"a=1&b=2", true, "b", "2"},
	{"subject=%E4%BC%9A%E5%91%98%2B%E5%B9%B4", true, "subject", "\xe4\xbc\x9a\xe5\x91\x98+\xe5\xb9\xb4"},
	{"s=a+b%20c", true, "s", "a b c"},
	{"p=order%253D42", true, "p", "order%3D42"},	/* decoded once only */
	{"e=&f=1", true, "e", ""},
	{"x=a=b", true, "x", "a=b"},			/* split at the first '=' */
	{"a=1&&b=2&", true, "a", "1"},
	{"k%5Fa=v", true, "k_a", "v"},
	{"a=%zz", false, NULL, NULL},
	{"a=%4", false, NULL, NULL},
	{"a=%", false, NULL, NULL},
	{"a=%00", false, NULL, NULL},
	{"a=1&a=2", false, NULL, NULL},
	{"a%3D=1&a%3D=2", false, NULL, NULL},
	{"novalue", false, NULL, NULL},
	{"=v", false, NULL, NULL},
};

START_TEST(test_form_table)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_form f;
	struct pn_err err;
	bool	ok = pn_form_parse(a, cases[_i].body, strlen(cases[_i].body), &f, &err);

	ck_assert_msg(ok == cases[_i].ok, "case %d \"%s\": %s", _i, cases[_i].body,
		      ok ? "accepted" : err.msg);
	if (ok)
		ck_assert_str_eq(pn_form_get(&f, cases[_i].key), cases[_i].value);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_form_binary_nul)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_form f;
	struct pn_err err;

	ck_assert(!pn_form_parse(a, "a=1\0b", 5, &f, &err));
	pn_arena_free(a);
}
END_TEST

START_TEST(test_form_limits)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_buf b = PN_BUF_INIT;
	struct pn_form f;
	struct pn_err err;
	int	i;

	for (i = 0; i < PN_FORM_MAX_FIELDS; i++)
		pn_buf_printf(&b, "%sk%d=v", i ? "&" : "", i);
	ck_assert(pn_form_parse(a, b.data, b.len, &f, &err));
	ck_assert_uint_eq(f.n, PN_FORM_MAX_FIELDS);
	pn_buf_puts(&b, "&one=more");
	ck_assert(!pn_form_parse(a, b.data, b.len, &f, &err));
	pn_buf_free(&b);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_form_encode)
{
	struct pn_arena *a = pn_arena_new();

	ck_assert_str_eq(pn_form_encode(a, "a b+c/=\xe4"), "a+b%2Bc%2F%3D%E4");
	pn_arena_free(a);
}
END_TEST

/* UTF-8 validation and the deterministic \xNN escape used before storing. */
START_TEST(test_utf8_escape)
{
	static const struct {
		const char *in, *out;
	} v[] = {
		{"plain", "plain"},
		{"\xe4\xbc\x9a\xe5\x91\x98 \xf0\x9f\x98\x80", "\xe4\xbc\x9a\xe5\x91\x98 \xf0\x9f\x98\x80"},
		{"\xb6\xa9\xb5\xa5", "\\xb6\\xa9\\xb5\\xa5"},		/* GBK */
		{"a\xc3", "a\\xc3"},					/* cut sequence */
		{"\xc0\xaf", "\\xc0\\xaf"},				/* overlong */
		{"\xed\xa0\x80", "\\xed\\xa0\\x80"},			/* surrogate */
		{"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},	/* above U+10FFFF */
	};
	size_t	i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *e = pn_utf8_escape(v[i].in);

		ck_assert_str_eq(e, v[i].out);
		ck_assert(pn_utf8_valid(e, strlen(e)));
		ck_assert((e == v[i].in) == (strcmp(v[i].in, v[i].out) == 0));
		if (e != v[i].in)
			free(e);
	}
}
END_TEST

Suite *
suite_form(void)
{
	Suite  *s = suite_create("form");
	TCase  *tc = tcase_create("form");

	tcase_add_loop_test(tc, test_form_table, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, test_form_binary_nul);
	tcase_add_test(tc, test_form_limits);
	tcase_add_test(tc, test_form_encode);
	tcase_add_test(tc, test_utf8_escape);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_json.c: strict JSON parsing and path lookups.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "json.h"
#include "suites.h"

static json_t *
parse(const char *s)
{
	struct pn_err err;

	return pn_json_parse(s, strlen(s), &err);
}

static const struct {
	const char *s;
	size_t	len;		/* 0: strlen */
	const char *why;	/* NULL: accepted; else a substring of the error */
} inputs[] = {
	{"{}", 0, NULL},
	{"[]", 0, NULL},
	{" \n{\"a\":1}\n ", 0, NULL},
	{"{\"a\":\"\xe5\x95\x86\"}", 0, NULL},
	{"{\"a\":\"\\u00e9\\ud83d\\ude00\"}", 0, NULL},
	{"", 0, "invalid JSON at line"},
	{"   ", 0, "invalid JSON"},
	{"{\"id\":1,\"id\":2}", 0, "duplicate object key"},
	{"{\"o\":{\"k\":1,\"k\":1}}", 0, "duplicate object key"},
	{"{} {}", 0, "end of file expected"},
	{"{}x", 0, "end of file expected"},
	{"\"text\"", 0, "'[' or '{' expected"},	/* one object or array, not a bare value */
	{"1", 0, "'[' or '{' expected"},
	{"{\"a\":1,}", 0, "invalid JSON"},
	{"{'a':1}", 0, "invalid JSON"},
	{"{\"a\":NaN}", 0, "invalid JSON"},
	{"{\"a\":01}", 0, "invalid JSON"},
	{"{\"a\":\"\\u0000\"}", 0, "invalid JSON"},	/* NUL inside a string */
	{"{\"a\":1}\0", 8, "invalid JSON"},		/* a NUL after the value */
	{"{\"a\":\"\\ud800\"}", 0, "invalid JSON"},	/* lone surrogate escape */
	{"{\"a\":99999999999999999999}", 0, "too big integer"},
	{"{\"a\":\"\x80\"}", 0, "invalid JSON"},		/* stray continuation byte */
	{"{\"a\":\"\xc0\x80\"}", 0, "invalid JSON"},	/* overlong NUL */
	{"{\"a\":\"\xc1\xbf\"}", 0, "invalid JSON"},
	{"{\"a\":\"\xe0\x80\x80\"}", 0, "invalid JSON"},
	{"{\"a\":\"\xf0\x80\x80\x80\"}", 0, "invalid JSON"},
	{"{\"a\":\"\xed\xa0\x80\"}", 0, "invalid JSON"},	/* UTF-8-encoded surrogate */
	{"{\"a\":\"\xf4\x90\x80\x80\"}", 0, "invalid JSON"},	/* above U+10FFFF */
	{"{\"a\":\"\xe5\x95\"}", 0, "invalid JSON"},	/* truncated sequence */
	{"{\"\xc0\xaf\":1}", 0, "invalid JSON"},		/* overlong in a key */
};

START_TEST(test_parse)
{
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(inputs); i++) {
		struct pn_err err = {""};
		size_t	len = inputs[i].len ? inputs[i].len : strlen(inputs[i].s);
		json_t *j = pn_json_parse(inputs[i].s, len, &err);

		if (inputs[i].why == NULL) {
			ck_assert_msg(j != NULL, "input %zu refused: %s", i, err.msg);
			json_decref(j);
			continue;
		}
		ck_assert_msg(j == NULL, "input %zu accepted", i);
		ck_assert_msg(strstr(err.msg, inputs[i].why) != NULL,
			      "input %zu: \"%s\" does not say \"%s\"", i, err.msg, inputs[i].why);
	}
}
END_TEST

/* Nesting is bounded (jansson's 2048): deep input is an error, not a crash. */
START_TEST(test_depth)
{
	struct pn_err err;
	size_t	n = 5000, i;
	char   *s = malloc(2 * n + 1);
	json_t *j;

	for (i = 0; i < n; i++) {
		s[i] = '[';
		s[n + i] = ']';
	}
	s[2 * n] = '\0';
	j = pn_json_parse(s, 2 * n, &err);
	ck_assert_ptr_null(j);
	ck_assert_msg(strstr(err.msg, "maximum parsing depth") != NULL, "%s", err.msg);
	/* 1000 levels are fine */
	j = pn_json_parse(s + n - 1000, 2000, &err);
	ck_assert_ptr_nonnull(j);
	json_decref(j);
	free(s);
}
END_TEST

START_TEST(test_len_bounds)
{
	struct pn_err err;
	json_t *j;

	/* only len bytes are read: a valid prefix */
	j = pn_json_parse("{\"a\":1}garbage", 7, &err);
	ck_assert_ptr_nonnull(j);
	json_decref(j);
	/* and a value cut by len is refused */
	ck_assert_ptr_null(pn_json_parse("{\"a\":1}", 6, &err));
}
END_TEST

START_TEST(test_path)
{
	json_t *j = parse("{\"data\":{\"object\":{\"id\":\"pi_1\",\"amount\":1999,\"big\":"
			  "9223372036854775807,\"neg\":-5,\"f\":1.5,\"s\":\"7\",\"n\":null,"
			  "\"metadata\":{\"order_id\":\"O-1\"},\"arr\":[1]}},"
			  "\"a.b\":\"dotted\",\"\":{\"x\":\"empty key\"}}");
	struct pn_arena *a = pn_arena_new();
	int64_t	v = 42;
	char	longkey[200];

	ck_assert_ptr_nonnull(j);
	ck_assert_ptr_eq(pn_json_path(j, ""), j);
	ck_assert_str_eq(pn_json_str(a, j, "data.object.id"), "pi_1");
	ck_assert_str_eq(pn_json_str(a, j, "data.object.metadata.order_id"), "O-1");
	ck_assert_ptr_null(pn_json_str(a, j, "data.object.missing"));
	ck_assert_ptr_null(pn_json_str(a, j, "data.object.amount"));	/* not a string */
	ck_assert_ptr_null(pn_json_str(a, j, "data.object.n"));
	ck_assert_ptr_null(pn_json_str(a, j, "data.object.id.deeper"));	/* through a string */
	ck_assert_ptr_null(pn_json_str(a, j, "data.object.arr.0"));	/* arrays are not walked */
	/* a dot always separates: a key containing one cannot be reached */
	ck_assert_ptr_null(pn_json_str(a, j, "a.b"));
	ck_assert_str_eq(pn_json_str(a, j, ".x"), "empty key");
	ck_assert(pn_json_int(j, "data.object.amount", &v) && v == 1999);
	ck_assert(pn_json_int(j, "data.object.big", &v) && v == INT64_MAX);
	ck_assert(pn_json_int(j, "data.object.neg", &v) && v == -5);
	v = 42;
	ck_assert(!pn_json_int(j, "data.object.f", &v));	/* a real is not an integer */
	ck_assert(!pn_json_int(j, "data.object.s", &v));	/* nor is a string of digits */
	ck_assert(!pn_json_int(j, "data.object.missing", &v));
	ck_assert(!pn_json_int(j, "data", &v));
	ck_assert_int_eq(v, 42);
	/* a path segment longer than the key buffer (63) finds nothing */
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	ck_assert_ptr_null(pn_json_path(j, longkey));
	/* NULL root (a failed lookup) is safe */
	ck_assert_ptr_null(pn_json_path(NULL, "a"));
	ck_assert_ptr_null(pn_json_str(a, NULL, "a"));
	ck_assert(!pn_json_int(NULL, "a", &v));
	json_decref(j);
	pn_arena_free(a);
}
END_TEST

/* The copy outlives the json_t (json.h: "the json_t can be released at
 * once"). */
START_TEST(test_str_copy)
{
	json_t *j = parse("{\"k\":\"\xe5\x95\x86 value\"}");
	struct pn_arena *a = pn_arena_new();
	const char *s = pn_json_str(a, j, "k");

	json_decref(j);
	ck_assert_str_eq(s, "\xe5\x95\x86 value");
	pn_arena_free(a);
}
END_TEST

Suite *
suite_json(void)
{
	Suite  *s = suite_create("json");
	TCase  *tc = tcase_create("json");

	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_len_bounds);
	tcase_add_test(tc, test_path);
	tcase_add_test(tc, test_str_copy);
	suite_add_tcase(s, tc);
	return s;
}

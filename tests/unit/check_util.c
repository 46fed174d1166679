/*
 * check_util.c: errors, allocation, ASCII helpers, UTF-8, numbers, files.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "suites.h"
#include "unit.h"
#include "util.h"

START_TEST(test_err_set)
{
	struct pn_err err;
	char	big[1024];

	pn_err_set(NULL, "ignored %d", 1);	/* NULL-safe, as util.h says */
	pn_err_set(&err, "field %s is %d bytes", "x", 3);
	ck_assert_str_eq(err.msg, "field x is 3 bytes");
	/* a message longer than the buffer is cut, still terminated */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pn_err_set(&err, "%s", big);
	ck_assert_uint_eq(strlen(err.msg), sizeof(err.msg) - 1);
}
END_TEST

START_TEST(test_err_prefix)
{
	struct pn_err err;
	char	big[1024];

	pn_err_prefix(NULL, "ignored");
	pn_err_set(&err, "no key matched");
	pn_err_prefix(&err, "site %s", "shop-a");
	ck_assert_str_eq(err.msg, "site shop-a: no key matched");
	pn_err_set(&err, "%s", "");
	pn_err_prefix(&err, "what");
	ck_assert_str_eq(err.msg, "what: ");
	/* a full message loses its end, never the prefix */
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pn_err_set(&err, "%s", big);
	pn_err_prefix(&err, "reading %s", "conf");
	ck_assert_uint_eq(strlen(err.msg), sizeof(err.msg) - 1);
	ck_assert(strncmp(err.msg, "reading conf: bbb", 17) == 0);
	/* a prefix longer than its buffer (255) is cut too */
	memset(big, 'p', 400);
	big[400] = '\0';
	pn_err_set(&err, "tail");
	pn_err_prefix(&err, "%s", big);
	ck_assert_uint_eq(strspn(err.msg, "p"), 255);
	ck_assert_str_eq(err.msg + 255, ": tail");
}
END_TEST

START_TEST(test_alloc)
{
	char   *p = pn_xmalloc(0), *q;
	unsigned char *z;
	size_t	i;

	ck_assert_ptr_nonnull(p);	/* zero bytes is still a pointer to free */
	free(p);
	z = pn_xcalloc(0, 0);
	ck_assert_ptr_nonnull(z);
	free(z);
	z = pn_xcalloc(16, 4);
	for (i = 0; i < 64; i++)
		ck_assert_uint_eq(z[i], 0);
	z = pn_xrealloc(z, 128);
	ck_assert_uint_eq(z[63], 0);
	free(z);
	p = pn_xstrdup("notify");
	ck_assert_str_eq(p, "notify");
	free(p);
	p = pn_xstrndup("notify", 3);
	ck_assert_str_eq(p, "not");
	free(p);
	p = pn_xstrndup("ab\0cd", 5);	/* copies n bytes, NUL included */
	ck_assert_int_eq(memcmp(p, "ab\0cd", 6), 0);
	free(p);
	q = pn_xasprintf("%s=%d", "amount", 1999);
	ck_assert_str_eq(q, "amount=1999");
	free(q);
	q = pn_xasprintf("%s", "");
	ck_assert_str_eq(q, "");
	free(q);
}
END_TEST

START_TEST(test_streq_nocase)
{
	ck_assert(pn_streq_nocase("Stripe-Signature", "stripe-signature"));
	ck_assert(pn_streq_nocase("", ""));
	ck_assert(!pn_streq_nocase("abc", "abcd"));
	ck_assert(!pn_streq_nocase("abcd", "abc"));
	ck_assert(!pn_streq_nocase("a", ""));
	/* ASCII only: no locale folding of bytes >= 0x80 */
	ck_assert(!pn_streq_nocase("\xc3\xa9", "\xc3\x89"));
	ck_assert(pn_streq_nocase("\xc3\xa9", "\xc3\xa9"));
	/* '@' and '[' sit next to 'A' and 'Z': not letters */
	ck_assert(!pn_streq_nocase("@", "`"));
	ck_assert(!pn_streq_nocase("[", "{"));
}
END_TEST

START_TEST(test_trim)
{
	char	a[] = " \t\r\n value \t\r\n", b[] = "", c[] = " \t ", d[] = "x", e[] = "a b";

	ck_assert_str_eq(pn_trim(a), "value");
	ck_assert_str_eq(pn_trim(b), "");
	ck_assert_str_eq(pn_trim(c), "");
	ck_assert_str_eq(pn_trim(d), "x");
	ck_assert_str_eq(pn_trim(e), "a b");	/* inner blanks kept */
}
END_TEST

/* Well-formed UTF-8 per RFC 3629 section 4 (the Unicode 3.2+ table). */
static const struct {
	const char *s;
	size_t	len;
	bool	ok;
	const char *what;
} utf8[] = {
	{"", 0, true, "empty"},
	{"plain ASCII", 11, true, "ASCII"},
	{"\x00", 1, true, "NUL is a character"},
	{"\x7f", 1, true, "U+007F"},
	{"\xc2\x80", 2, true, "U+0080, the smallest 2-byte"},
	{"\xdf\xbf", 2, true, "U+07FF, the largest 2-byte"},
	{"\xe0\xa0\x80", 3, true, "U+0800, the smallest 3-byte"},
	{"\xed\x9f\xbf", 3, true, "U+D7FF, just below the surrogates"},
	{"\xee\x80\x80", 3, true, "U+E000, just above the surrogates"},
	{"\xef\xbf\xbd", 3, true, "U+FFFD"},
	{"\xef\xbf\xbf", 3, true, "U+FFFF (a noncharacter, still well-formed)"},
	{"\xf0\x90\x80\x80", 4, true, "U+10000, the smallest 4-byte"},
	{"\xf4\x8f\xbf\xbf", 4, true, "U+10FFFF, the largest code point"},
	{"\xe5\x95\x86\xe5\x93\x81", 6, true, "Chinese text"},
	{"\xc0\x80", 2, false, "overlong NUL (C0 80)"},
	{"\xc1\xbf", 2, false, "overlong U+007F (C1 BF)"},
	{"\xc0\xaf", 2, false, "overlong '/' (C0 AF)"},
	{"\xe0\x80\x80", 3, false, "overlong NUL in 3 bytes (E0 80 80)"},
	{"\xe0\x80\xaf", 3, false, "overlong '/' in 3 bytes"},
	{"\xe0\x9f\xbf", 3, false, "overlong U+07FF in 3 bytes"},
	{"\xf0\x80\x80\x80", 4, false, "overlong NUL in 4 bytes (F0 80 80 80)"},
	{"\xf0\x8f\xbf\xbf", 4, false, "overlong U+FFFF in 4 bytes"},
	{"\xf8\x88\x80\x80\x80", 5, false, "5-byte form"},
	{"\xfc\x84\x80\x80\x80\x80", 6, false, "6-byte form"},
	{"\xed\xa0\x80", 3, false, "surrogate U+D800 (ED A0 80)"},
	{"\xed\xbf\xbf", 3, false, "surrogate U+DFFF"},
	{"\xed\xa0\xbd\xed\xb8\x80", 6, false, "CESU-8 surrogate pair"},
	{"\xf4\x90\x80\x80", 4, false, "U+110000 (F4 90 80 80)"},
	{"\xf5\x80\x80\x80", 4, false, "lead byte F5"},
	{"\xf7\xbf\xbf\xbf", 4, false, "lead byte F7"},
	{"\xfe", 1, false, "byte FE"},
	{"\xff", 1, false, "byte FF"},
	{"\x80", 1, false, "stray continuation byte"},
	{"\xbf", 1, false, "stray continuation byte BF"},
	{"a\x80" "b", 3, false, "stray continuation between ASCII"},
	{"\xc2\x80\x80", 3, false, "continuation after a complete sequence"},
	{"\xc2", 1, false, "truncated 2-byte"},
	{"\xe0\xa0", 2, false, "truncated 3-byte"},
	{"\xf0\x90\x80", 3, false, "truncated 4-byte"},
	{"\xe5\x95\x86\xe5\x93", 5, false, "text cut inside its last character"},
	{"\xc2" "A", 2, false, "lead byte followed by ASCII"},
	{"\xe0\xa0" "A", 3, false, "3-byte sequence broken by ASCII"},
	{"\xf0\x90\x80" "A", 4, false, "4-byte sequence broken by ASCII"},
	{"\xe0\xa0\xc0", 3, false, "3-byte sequence broken by a lead byte"},
};

START_TEST(test_utf8_valid)
{
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(utf8); i++)
		ck_assert_msg(pn_utf8_valid(utf8[i].s, utf8[i].len) == utf8[i].ok,
			      "%s: expected %s", utf8[i].what, utf8[i].ok ? "valid" : "invalid");
	/* the length bounds the check: a valid prefix of invalid bytes */
	ck_assert(pn_utf8_valid("ab\xff", 2));
	/* ... and a sequence cut by the length is truncated, not read past */
	ck_assert(!pn_utf8_valid("\xe5\x95\x86", 2));
}
END_TEST

/* Every code point encodes to well-formed UTF-8 and each of its shorter
 * (overlong) encodings is refused. */
static size_t
encode(uint32_t cp, unsigned len, unsigned char *out)
{
	static const unsigned char lead[] = {0, 0, 0xc0, 0xe0, 0xf0};
	unsigned i;

	if (len == 1) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	for (i = len - 1; i > 0; i--) {
		out[i] = (unsigned char)(0x80 | (cp & 0x3f));
		cp >>= 6;
	}
	out[0] = (unsigned char)(lead[len] | cp);
	return len;
}

START_TEST(test_utf8_exhaustive)
{
	unsigned char b[4];
	uint32_t cp;

	for (cp = 0; cp <= 0x10ffff; cp++) {
		unsigned need = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4, len;
		bool	surrogate = cp >= 0xd800 && cp <= 0xdfff;

		/* plain if: ck_assert marks a point per call, too slow here */
		if (pn_utf8_valid((char *)b, encode(cp, need, b)) == surrogate)
			ck_abort_msg("U+%04X in %u bytes", (unsigned)cp, need);
		for (len = need + 1; len <= 4; len++)
			if (pn_utf8_valid((char *)b, encode(cp, len, b)))
				ck_abort_msg("overlong U+%04X in %u bytes accepted", (unsigned)cp,
					     len);
	}
}
END_TEST

static const struct {
	const char *in, *out;
} escapes[] = {
	{"a\xff" "b", "a\\xffb"},
	/* an overlong sequence, a surrogate, a code point too large: byte by byte */
	{"\xc0\x80", "\\xc0\\x80"},
	{"x\xed\xa0\x80y", "x\\xed\\xa0\\x80y"},
	{"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
	/* a good sequence after a bad byte is kept; a truncated one at the end escaped */
	{"\x80\xc3\xa9\xe5\x95", "\\x80\xc3\xa9\\xe5\\x95"},
};

START_TEST(test_utf8_escape)
{
	const char *valid = "\xe5\x95\x86 ok";
	char   *e;
	size_t	i;

	/* valid text is returned as is, not copied */
	ck_assert_ptr_eq(pn_utf8_escape(valid), valid);
	for (i = 0; i < PN_ARRAY_LEN(escapes); i++) {
		e = pn_utf8_escape(escapes[i].in);
		ck_assert_str_eq(e, escapes[i].out);
		free(e);
	}
	/* the worst case (every byte escaped) fits, and the result is valid */
	{
		char	bad[257];

		for (i = 0; i < 256; i++)
			bad[i] = (char)(0x80 | (i & 0x3f));
		bad[256] = '\0';
		e = pn_utf8_escape(bad);
		ck_assert_uint_eq(strlen(e), 256 * 4);
		ck_assert(pn_utf8_valid(e, strlen(e)));
		free(e);
	}
	/* every invalid case of the table escapes to valid UTF-8, deterministically */
	for (i = 0; i < PN_ARRAY_LEN(utf8); i++) {
		char   *s, *e2;

		if (utf8[i].ok || memchr(utf8[i].s, '\0', utf8[i].len))
			continue;
		s = pn_xstrndup(utf8[i].s, utf8[i].len);
		e = pn_utf8_escape(s);
		e2 = pn_utf8_escape(s);
		ck_assert_msg(e != s, "%s: not escaped", utf8[i].what);
		ck_assert_msg(pn_utf8_valid(e, strlen(e)), "%s: escape is invalid", utf8[i].what);
		ck_assert_str_eq(e, e2);
		free(e);
		free(e2);
		free(s);
	}
}
END_TEST

START_TEST(test_hexval)
{
	int	c, n = 0;

	for (c = 0; c < 256; c++) {
		int v = pn_hexval((unsigned char)c);

		if (v >= 0)
			n++;
		if (c >= '0' && c <= '9')
			ck_assert_int_eq(v, c - '0');
		else if (c >= 'a' && c <= 'f')
			ck_assert_int_eq(v, c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			ck_assert_int_eq(v, c - 'A' + 10);
		else
			ck_assert_int_eq(v, -1);
	}
	ck_assert_int_eq(n, 22);
}
END_TEST

START_TEST(test_parse_i64)
{
	static const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1.0", "0x10", "1e3", "12a",
				    "9223372036854775808", "99999999999999999999",
				    "18446744073709551616", NULL};
	int64_t	v = 42;
	size_t	i;

	ck_assert(pn_parse_i64("0", &v) && v == 0);
	ck_assert(pn_parse_i64("007", &v) && v == 7);
	ck_assert(pn_parse_i64("1700000000", &v) && v == 1700000000);
	ck_assert(pn_parse_i64("9223372036854775807", &v) && v == INT64_MAX);
	ck_assert(pn_parse_i64("9223372036854775806", &v) && v == INT64_MAX - 1);
	for (i = 0; bad[i]; i++) {
		v = 42;
		ck_assert_msg(!pn_parse_i64(bad[i], &v), "\"%s\" accepted", bad[i]);
		ck_assert_msg(v == 42, "\"%s\" wrote the output", bad[i]);
	}
	ck_assert(!pn_parse_i64(NULL, &v));
}
END_TEST

START_TEST(test_read_file)
{
	struct pn_err err;
	char   *out = NULL, big[10000];
	size_t	len = 0;
	const char *path;

	memset(big, 'z', sizeof(big));
	path = unit_scratch_file(big, sizeof(big));
	/* exactly max bytes is fine, one more is refused; larger than the
	 * first 4096-byte buffer on purpose */
	ck_assert(pn_read_file(path, sizeof(big), &out, &len, &err));
	ck_assert_uint_eq(len, sizeof(big));
	ck_assert_int_eq(out[len], '\0');
	ck_assert_int_eq(memcmp(out, big, len), 0);
	free(out);
	out = NULL;
	ck_assert(!pn_read_file(path, sizeof(big) - 1, &out, &len, &err));
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(strstr(err.msg, "is larger than 9999 bytes"));
	/* len may be NULL; an empty file is an empty string */
	path = unit_scratch_file("", 0);
	ck_assert(pn_read_file(path, 0, &out, NULL, &err));
	ck_assert_str_eq(out, "");
	free(out);
	/* NUL bytes are kept, len says how many */
	path = unit_scratch_file("a\0b", 3);
	ck_assert(pn_read_file(path, 3, &out, &len, &err));
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(memcmp(out, "a\0b", 4), 0);
	free(out);
	unit_scratch_done();
	ck_assert(!pn_read_file(path, 100, &out, &len, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "could not open"));
	ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
	/* a directory opens but cannot be read */
	ck_assert(!pn_read_file("/", 100, &out, &len, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "could not read \"/\""));
}
END_TEST

START_TEST(test_now_us)
{
	int64_t	a = pn_now_us(), b = pn_now_us();

	ck_assert(a > 0);
	ck_assert(b >= a);	/* monotonic */
}
END_TEST

Suite *
suite_util(void)
{
	Suite  *s = suite_create("util");
	TCase  *tc = tcase_create("util");

	tcase_add_test(tc, test_err_set);
	tcase_add_test(tc, test_err_prefix);
	tcase_add_test(tc, test_alloc);
	tcase_add_test(tc, test_streq_nocase);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_utf8_valid);
	tcase_add_test(tc, test_utf8_exhaustive);
	tcase_add_test(tc, test_utf8_escape);
	tcase_add_test(tc, test_hexval);
	tcase_add_test(tc, test_parse_i64);
	tcase_add_test(tc, test_read_file);
	tcase_add_test(tc, test_now_us);
	suite_add_tcase(s, tc);
	return s;
}

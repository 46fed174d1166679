/*
 * check_admin.c: the admin command's tables (width, wrapping, 100 columns,
 * --wide) and option values (durations, times).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "admin.h"
#include "suites.h"

/* t printed as a table into a malloc'd string. */
static char *
render(const struct pn_table *t)
{
	char   *buf = NULL;
	size_t	len = 0;
	FILE   *f = open_memstream(&buf, &len);

	ck_assert(f != NULL);
	pn_table_print(t, PN_FMT_TABLE, f);
	fclose(f);
	return buf;
}

/* Widest line of text, in terminal columns (CJK 2). */
static size_t
widest(const char *text)
{
	size_t	best = 0, w = 0;
	const unsigned char *s = (const unsigned char *)text;

	for (; *s; s++) {
		if (*s == '\n') {
			if (w > best)
				best = w;
			w = 0;
		} else if ((*s & 0xc0) != 0x80)
			w += (*s & 0xf0) == 0xe0 ? 2 : 1;
	}
	return w > best ? w : best;
}

/*
 * Issue 14: a cell ending inside a UTF-8 sequence made width() step over
 * its NUL and read past the cell (ASan).  Each cell here is its own
 * allocation of exactly its length, so ASan and valgrind see any overread.
 */
START_TEST(test_truncated_utf8_stays_inside_the_cell)
{
	static const char *cols[] = {"a", "b"};
	static const char *const cells[] = {"\xe4", "\xe4\xb8", "\xf0\x9f", "ok\xc3", "\x80\x80", "x"};
	struct pn_table t;
	size_t	i;
	char   *out;

	pn_table_init(&t, 2, cols);
	for (i = 0; i < PN_ARRAY_LEN(cells); i += 2) {
		const char *row[2] = {cells[i], cells[i + 1]};

		pn_table_add(&t, row);
	}
	out = render(&t);
	ck_assert(strstr(out, "ok") != NULL);
	free(out);
	pn_table_free(&t);
}
END_TEST

START_TEST(test_fits_100_columns_and_wide)
{
	static const char *cols[] = {"id", "key", "outcome", "note"};
	struct pn_table t;
	char   *out, note[400], key[80];
	size_t	i;

	pn_table_init(&t, 4, cols);
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	note[0] = '\0';
	for (i = 0; i < 30; i++)
		strcat(note, "word 订单 ");
	{
		const char *row[4] = {"1", key, "pending_without_notification", note};

		pn_table_add(&t, row);
	}
	out = render(&t);
	ck_assert_msg(widest(out) <= 100, "%zu columns:\n%s", widest(out), out);
	/* the identifier broke after its '_', not in a word */
	ck_assert_msg(strstr(out, "pending_without_") != NULL, "%s", out);
	free(out);
	pn_table_set_wide(true);
	out = render(&t);
	ck_assert(widest(out) > 300);
	ck_assert(strstr(out, "pending_without_notification") != NULL);
	free(out);
	pn_table_set_wide(false);
	/* an optional column goes first, and the table says so */
	pn_table_optional(&t, "outcome");
	out = render(&t);
	ck_assert(strstr(out, "pending_without") == NULL);
	ck_assert(strstr(out, "(not shown: outcome; --wide shows every column)\n") != NULL);
	free(out);
	pn_table_free(&t);
}
END_TEST

/* The lines of column `col` (0-based, `width` wide, after col * (width + 2) bytes) of a
 * table whose columns are all `width` wide and ASCII, trailing blanks cut, joined by '|'. */
static char *
column_lines(const char *out, size_t col, size_t width)
{
	size_t	len = strlen(out), o = 0;
	char   *res = calloc(1, len + 1);
	const char *line = strchr(out, '\n') + 1;	/* skip the header */

	ck_assert(res != NULL);
	line = strchr(line, '\n') + 1;			/* and the dashes */
	while (*line) {
		const char *end = strchr(line, '\n');
		size_t	from = col * (width + 2), n = (size_t)(end - line), k;

		if (o > 0)
			res[o++] = '|';
		if (n > from) {
			k = n - from < width ? n - from : width;
			while (k > 0 && line[from + k - 1] == ' ')
				k--;
			memcpy(res + o, line + from, k);
			o += k;
		}
		line = end + 1;
	}
	res[o] = '\0';
	return res;
}

/*
 * The lines of cell as a table of 100 columns shows it in a column `width`
 * wide (beside a column of 98 - width 'y's, and a row "x y" that makes it a
 * column of prose), joined by '|'; *out gets the whole table.
 */
static char *
wrapped(const char *cell, size_t width, char **out)
{
	static const char *cols[] = {"c", "d"};
	struct pn_table t;
	char	big[100];
	char   *lines;
	const char *row[2];
	size_t	n;

	pn_table_set_wide(false);
	memset(big, 'y', 98 - width);
	big[98 - width] = '\0';
	row[0] = cell;
	row[1] = big;
	pn_table_init(&t, 2, cols);
	pn_table_add(&t, row);
	row[0] = "x y";		/* a blank in the column: prose, it gives way first */
	row[1] = "";
	pn_table_add(&t, row);
	*out = render(&t);
	pn_table_free(&t);
	lines = column_lines(*out, 0, width);
	n = strlen(lines);
	ck_assert_msg(n > 4 && strcmp(lines + n - 4, "|x y") == 0, "%s", *out);
	lines[n - 4] = '\0';
	return lines;
}

/*
 * Issue 14: a cell wraps at blanks when the next word fits a line of its own
 * (not in the middle of it), a word longer than the column breaks after an
 * '_' or between characters, and no wrapped line starts or ends with a blank.
 */
START_TEST(test_wrap_at_words_no_leading_blanks)
{
	static const char *cells[] = {
		/* the blank is in the first half of the line: still the break */
		("the key that verified this notification (stripe-whsec:32ab6128) is no longer "
		 "configured and more words to make it wrap"),
		"ab verylongwordthatdoesnotfitanywhereatallintheline_and_keeps_going_on_and_on end",
		"one    two",
	};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cells); i++) {
		char   *out, *lines = wrapped(cells[i], 49, &out), *p;

		for (p = strtok(lines, "|"); p != NULL; p = strtok(NULL, "|")) {
			size_t	n = strlen(p);

			ck_assert_msg(n <= 49, "%s", out);
			ck_assert_msg(p[0] != ' ' && p[n - 1] != ' ', "blank: \"%s\"\n%s", p, out);
		}
		free(lines);
		free(out);
	}
}
END_TEST

/* Exact lines: a short column (12) wrapping prose and an identifier. */
START_TEST(test_wrap_exact_lines)
{
	static const struct {
		const char *cell, *want;
	} cases[] = {
		/* words whole: "verified" fits a line of its own, so it is not cut */
		{"the key that verified this notification", "the key that|verified|this|notification"},
		/* a word longer than the column: after its '_', else between characters */
		{"pending_without_notification", "pending_|without_|notification"},
		{"abcdefghijklmnopqrstuvwxyz", "abcdefghijkl|mnopqrstuvwx|yz"},
		/* runs of blanks: none at the start or end of a wrapped line */
		{"could    not    verify    it", "could    not|verify    it"},
		{"a (stripe-whsec: 32ab6128)", "a (stripe-|whsec:|32ab6128)"},
		{"tried, 1 signatures); the key", "tried, 1|signatures);|the key"},
	};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		char   *out, *lines = wrapped(cases[i].cell, 12, &out);

		ck_assert_msg(strcmp(lines, cases[i].want) == 0, "\"%s\": got \"%s\"\n%s",
			      cases[i].cell, lines, out);
		free(lines);
		free(out);
	}
}
END_TEST

static const struct {
	const char *text;
	int64_t	seconds;	/* -1: refused */
} durations[] = {
	{"30m", 1800}, {"2h", 7200}, {"1d", 86400}, {"1w", 604800}, {"90 seconds", 90},
	{"1h30m", 5400}, {"1 day 2 hours", 93600}, {"45 min", 2700}, {"1x", -1}, {"", -1},
	{"h", -1}, {"-5m", -1}, {"5", -1}, {"0s", -1}, {"1 fortnight", -1}, {"1.5h", -1},
};

START_TEST(test_durations)
{
	int64_t	s = 0;
	bool	ok = pn_opt_duration("--x", durations[_i].text, &s);

	ck_assert_msg(ok == (durations[_i].seconds >= 0), "%s", durations[_i].text);
	if (ok)
		ck_assert_int_eq(s, durations[_i].seconds);
}
END_TEST

static const struct {
	const char *text;
	bool	ok;
} times[] = {
	{"2026-11-30", true}, {"2026-11-30 08:00", true}, {"2026-11-30 08:00+08", true},
	{"2026-11-30T08:00:00Z", true}, {"2026-11-30 08:00:00.5-05:30", true},
	{"2024-02-29", true}, {"yesterday", true}, {"2h", true},
	{"2026-13-01", false}, {"2026-02-29", false}, {"2026-11-31", false},
	{"2026-11-30 24:00", false}, {"30/11/2026", false}, {"not a time", false},
	{"2026-11-30 08:00 +08 junk", false}, {"2026-11-30'; DROP", false},
};

START_TEST(test_times)
{
	char   *out = NULL;
	bool	ok = pn_opt_time("--since", times[_i].text, &out);

	ck_assert_msg(ok == times[_i].ok, "%s", times[_i].text);
	free(out);
}
END_TEST

Suite *
suite_admin(void)
{
	Suite  *s = suite_create("admin");
	TCase  *tc = tcase_create("admin");

	tcase_add_test(tc, test_truncated_utf8_stays_inside_the_cell);
	tcase_add_test(tc, test_fits_100_columns_and_wide);
	tcase_add_test(tc, test_wrap_at_words_no_leading_blanks);
	tcase_add_test(tc, test_wrap_exact_lines);
	tcase_add_loop_test(tc, test_durations, 0, (int)PN_ARRAY_LEN(durations));
	tcase_add_loop_test(tc, test_times, 0, (int)PN_ARRAY_LEN(times));
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_log.c: diagnostic and per-request lines (logfmt on stderr).
 */
#include "config.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "log.h"
#include "suites.h"
#include "unit.h"

static void
setup(void)
{
	pn_log_init("pn-test", PN_LOG_INFO);
}

/* Back to log.c's defaults for the suites after this one (CK_FORK=no). */
static void
teardown(void)
{
	pn_log_init("paynotify", PN_LOG_INFO);
}

static bool
matches(const char *s, const char *re)
{
	regex_t	r;
	bool	ok;

	ck_assert_int_eq(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
	ok = regexec(&r, s, 0, NULL, 0) == 0;
	regfree(&r);
	return ok;
}

/* The part of a request line after its timestamp and program. */
static char *
request_line(const struct pn_reqlog *rl)
{
	char   *out, *p;

	unit_stderr_begin();
	pn_log_request(rl);
	out = unit_stderr_end();
	p = strstr(out, "]: request");
	if (p == NULL)
		return out;
	memmove(out, p + 3, strlen(p + 3) + 1);
	return out;
}

START_TEST(test_log_levels)
{
	char   *out;

	unit_stderr_begin();
	pn_log(PN_LOG_ERROR, "cannot %s", "connect");
	pn_log(PN_LOG_INFO, "listening");
	pn_log(PN_LOG_DEBUG, "not shown at info");
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
			      "pn-test\\[[0-9]+\\]: error: cannot connect\n"
			      "[0-9T:.Z-]+ pn-test\\[[0-9]+\\]: info: listening\n$"), "%s", out);
	free(out);
	pn_log_set_level(PN_LOG_DEBUG);
	unit_stderr_begin();
	pn_log(PN_LOG_DEBUG, "shown");
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "\\]: debug: shown\n$"), "%s", out);
	free(out);
	pn_log_set_level(PN_LOG_ERROR);
	unit_stderr_begin();
	pn_log(PN_LOG_INFO, "hidden");
	pn_log(PN_LOG_ERROR, "kept");
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "^[^\n]*error: kept\n$"), "%s", out);
	free(out);
}
END_TEST

/* A message longer than the line buffer is cut, still one line. */
START_TEST(test_log_long)
{
	char   *big = malloc(5000), *out;

	memset(big, 'm', 4999);
	big[4999] = '\0';
	unit_stderr_begin();
	pn_log(PN_LOG_ERROR, "%s", big);
	out = unit_stderr_end();
	ck_assert_uint_eq(strspn(strstr(out, "error: ") + 7, "m"), 2047);
	ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
	free(out);
	free(big);
}
END_TEST

START_TEST(test_request_line)
{
	struct pn_reqlog rl = {"127.0.0.1", NULL, "shop-a", "stripe", "evt_1", "O-1", "applied",
			       "stripe-old:7a200eb8", NULL, 200, 17, 1234};
	char   *out = request_line(&rl);

	ck_assert_str_eq(out, "request site=shop-a provider=stripe client=127.0.0.1 dedup_key=evt_1 "
			 "order=O-1 outcome=applied key=stripe-old:7a200eb8 id=17 status=200 us=1234\n");
	free(out);
	/* absent fields are left out; site and client say "-" */
	rl = (struct pn_reqlog){NULL, "10.0.0.9", NULL, "alipay", NULL, NULL, "rejected", NULL,
				"no sign field", 400, 0, 5};
	out = request_line(&rl);
	ck_assert_str_eq(out, "request site=- provider=alipay client=- forwarded_for=10.0.0.9 "
			 "outcome=rejected status=400 us=5 reason=\"no sign field\"\n");
	free(out);
}
END_TEST

/* Values that could forge a field or a line are quoted and escaped. */
START_TEST(test_request_quoting)
{
	static const struct {
		const char *value, *logged;
	} cases[] = {
		{"plain", "reason=plain"},
		{"", "reason=\"\""},
		{"two words", "reason=\"two words\""},
		{"a=b", "reason=\"a=b\""},
		{"say \"hi\"", "reason=\"say \\\"hi\\\"\""},
		{"back\\slash", "reason=\"back\\\\slash\""},
		{"line\nstatus=200", "reason=\"line\\x0astatus=200\""},
		{"cr\rx", "reason=\"cr\\x0dx\""},
		{"tab\tx", "reason=\"tab\\x09x\""},
		{"esc\x1b[31m", "reason=\"esc\\x1b[31m\""},
		{"del\x7f", "reason=\"del\\x7f\""},
		{"\xe5\x95\x86", "reason=\xe5\x95\x86"},	/* UTF-8 passes as is */
	};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		struct pn_reqlog rl = {"c", NULL, "s", "p", NULL, NULL, "rejected", NULL,
				       cases[i].value, 400, 0, 0};
		char   *out = request_line(&rl), *want;

		want = pn_xasprintf("request site=s provider=p client=c outcome=rejected status=400 "
				    "us=0 %s\n", cases[i].logged);
		ck_assert_str_eq(out, want);
		free(want);
		free(out);
	}
}
END_TEST

/* A value is cut at 512 bytes (quoted), and the line stays one line. */
START_TEST(test_request_long_value)
{
	char   *big = malloc(3000), *out, *q;
	struct pn_reqlog rl = {"c", NULL, "s", "p", NULL, NULL, "rejected", NULL, NULL, 400, 0, 0};

	memset(big, 'r', 2999);
	big[2999] = '\0';
	rl.reason = big;
	out = request_line(&rl);
	q = strstr(out, "reason=\"");
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(strspn(q + 8, "r"), 512);
	ck_assert_str_eq(q + 8 + 512, "\"\n");
	free(out);
	memset(big, 'r', 512);
	big[512] = '\0';
	out = request_line(&rl);
	ck_assert_ptr_nonnull(strstr(out, " reason=rrrr"));	/* 512 needs no quoting */
	free(out);
	free(big);
}
END_TEST

/* At level error only failed requests are logged. */
START_TEST(test_request_level)
{
	struct pn_reqlog ok = {"c", NULL, "s", "p", NULL, NULL, "applied", NULL, NULL, 200, 1, 0};
	struct pn_reqlog bad = {"c", NULL, "s", "p", NULL, NULL, "rejected", NULL, "x", 400, 0, 0};
	char   *out;

	pn_log_set_level(PN_LOG_ERROR);
	unit_stderr_begin();
	pn_log_request(&ok);
	pn_log_request(&bad);
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "^[^\n]*request [^\n]*outcome=rejected[^\n]*\n$"), "%s", out);
	free(out);
}
END_TEST

/* JOURNAL_STREAM naming fd 2 (after unit_stderr_begin), or off by one inode. */
static void
set_journal_stream(long long ino_delta)
{
	struct stat st;
	char	v[64];

	ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + (unsigned long long)ino_delta);
	ck_assert_int_eq(setenv("JOURNAL_STREAM", v, 1), 0);
}

/* stderr is the journal: "<N>[pid] " and no timestamp or program. */
START_TEST(test_journal_form)
{
	struct pn_reqlog ok = {"c", NULL, "s", "p", NULL, NULL, "applied", NULL, NULL, 200, 1, 0};
	struct pn_reqlog bad = {"c", NULL, "s", "p", NULL, NULL, "rejected", NULL, "x", 401, 0, 0};
	struct pn_reqlog down = {"c", NULL, "s", "p", NULL, NULL, "retry", NULL, "db", 503, 0, 0};
	char   *out, re[512];

	unit_stderr_begin();
	set_journal_stream(0);
	pn_log_init("pn-test", PN_LOG_DEBUG);
	ck_assert(pn_log_stderr_is_journal());
	pn_log(PN_LOG_ERROR, "database down");
	pn_log(PN_LOG_WARNING, "configuration warning: w");
	pn_log(PN_LOG_INFO, "listening");
	pn_log(PN_LOG_DEBUG, "detail");
	pn_log_request(&ok);
	pn_log_request(&bad);
	pn_log_request(&down);
	out = unit_stderr_end();
	unsetenv("JOURNAL_STREAM");
	snprintf(re, sizeof(re), "^<3>\\[%ld\\] error: database down\n"
		 "<4>\\[%ld\\] warning: configuration warning: w\n"
		 "<6>\\[%ld\\] info: listening\n"
		 "<7>\\[%ld\\] debug: detail\n"
		 "<6>\\[%ld\\] request site=s [^\n]*status=200[^\n]*\n"
		 "<4>\\[%ld\\] request site=s [^\n]*status=401[^\n]*\n"
		 "<3>\\[%ld\\] request site=s [^\n]*status=503[^\n]*\n$",
		 (long)getpid(), (long)getpid(), (long)getpid(), (long)getpid(),
		 (long)getpid(), (long)getpid(), (long)getpid());
	ck_assert_msg(matches(out, re), "%s", out);
	free(out);
}
END_TEST

/* A JOURNAL_STREAM that is not fd 2 (inherited, stderr redirected): ordinary. */
START_TEST(test_journal_mismatch)
{
	static const char *bad[] = {"", "x", "1", "1:", ":1", "1:2x", "-1:2"};
	char   *out;
	size_t	i;

	unit_stderr_begin();
	set_journal_stream(1);
	pn_log_init("pn-test", PN_LOG_INFO);
	ck_assert(!pn_log_stderr_is_journal());
	pn_log(PN_LOG_WARNING, "w");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(setenv("JOURNAL_STREAM", bad[i], 1), 0);
		ck_assert_msg(!pn_log_stderr_is_journal(), "%s", bad[i]);
	}
	unsetenv("JOURNAL_STREAM");
	ck_assert(!pn_log_stderr_is_journal());
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z "
			      "pn-test\\[[0-9]+\\]: warning: w\n$"), "%s", out);
	free(out);
}
END_TEST

/* Warnings are written at every level, like errors; priorities by status. */
START_TEST(test_warning_level)
{
	char   *out;

	pn_log_set_level(PN_LOG_ERROR);
	unit_stderr_begin();
	pn_log(PN_LOG_WARNING, "kept");
	pn_log(PN_LOG_INFO, "hidden");
	out = unit_stderr_end();
	ck_assert_msg(matches(out, "^[^\n]*\\]: warning: kept\n$"), "%s", out);
	free(out);
	ck_assert_int_eq(pn_log_request_level(200), PN_LOG_INFO);
	ck_assert_int_eq(pn_log_request_level(399), PN_LOG_INFO);
	ck_assert_int_eq(pn_log_request_level(400), PN_LOG_WARNING);
	ck_assert_int_eq(pn_log_request_level(499), PN_LOG_WARNING);
	ck_assert_int_eq(pn_log_request_level(500), PN_LOG_ERROR);
	ck_assert_int_eq(pn_log_request_level(503), PN_LOG_ERROR);
}
END_TEST

Suite *
suite_log(void)
{
	Suite  *s = suite_create("log");
	TCase  *tc = tcase_create("log");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_log_levels);
	tcase_add_test(tc, test_log_long);
	tcase_add_test(tc, test_request_line);
	tcase_add_test(tc, test_request_quoting);
	tcase_add_test(tc, test_request_long_value);
	tcase_add_test(tc, test_request_level);
	tcase_add_test(tc, test_journal_form);
	tcase_add_test(tc, test_journal_mismatch);
	tcase_add_test(tc, test_warning_level);
	suite_add_tcase(s, tc);
	return s;
}

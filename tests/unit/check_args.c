/*
 * check_args.c: the option parser of `paynotify` and its subcommands
 * (admin/args.c): values of each kind, --help and -h, an unknown option, a
 * missing argument, a wrong value, the arguments left after the options,
 * and that the first of these to come decides.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "admin.h"
#include "args.h"
#include "suites.h"
#include "unit.h"

/* Where the help and the action option printed (stdout or stderr), how often. */
static FILE *help_to;
static int helps;
static int shows;

static void
help(FILE *f)
{
	help_to = f;
	helps++;
	if (f != stdout)	/* stdout is the test log's */
		fprintf(f, "usage: test [options]\n");
}

static void
show(FILE *f)
{
	ck_assert_ptr_eq(f, stdout);
	shows++;
}

/* A callback: accepts "good" only; counts its calls. */
static int calls;

static bool
good_only(const struct pn_arg *arg, const char *value)
{
	calls++;
	if (value == NULL) {		/* no_argument */
		(*(int *)arg->dest)++;
		return true;
	}
	if (strcmp(value, "good") != 0) {
		fprintf(stderr, "paynotify: --%s \"%s\": not good\n", arg->name, value);
		return false;
	}
	*(const char **)arg->dest = value;
	return true;
}

/* The values a parse fills, fresh for each test. */
struct vals {
	const char *str, *cfg, *call;
	bool	flag, str_seen;
	enum pn_format fmt, pfmt;
	int64_t	num, secs;
	int	nflag;
};

/* Parse argv (NULL-terminated) with the test table; stderr captured into *err. */
static int
parse(struct vals *v, const struct pn_args *shape, char **err, int *first,
      const char *const *args)
{
	const struct pn_arg options[] = {
		{"str", required_argument, 0, PN_ARG_STR, .str = &v->str, .seen = &v->str_seen},
		{"config", required_argument, 'c', PN_ARG_STR, .str = &v->cfg},
		{"flag", no_argument, 'f', PN_ARG_FLAG, .flag = &v->flag},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &v->fmt},
		{"pformat", required_argument, 0, PN_ARG_FORMAT_PROM, .fmt = &v->pfmt},
		{"num", required_argument, 'n', PN_ARG_INT, .num = &v->num, .min = 1, .max = 10},
		{"secs", required_argument, 0, PN_ARG_DURATION, .num = &v->secs},
		{"call", required_argument, 0, PN_ARG_CALL, .dest = &v->call, .set = good_only},
		{"count", no_argument, 0, PN_ARG_CALL, .dest = &v->nflag, .set = good_only},
		{"version", no_argument, 'V', PN_ARG_ACTION, .show = show},
		PN_ARGS_END,
	};
	struct pn_args a = *shape;
	char   *argv[32];
	int	argc = 0, rc;

	a.help = help;
	a.opts = options;
	argv[argc++] = (char *)"test";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	memset(v, 0, sizeof(*v));
	v->fmt = v->pfmt = PN_FMT_TABLE;
	help_to = NULL;
	helps = shows = calls = 0;
	unit_stderr_begin();
	rc = pn_args_parse(&a, argc, argv, first);
	*err = unit_stderr_end();
	return rc;
}

static const struct pn_args no_rest = {.cmd = "test", .rest = PN_REST_NAMED};

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_values_of_each_kind)
{
	struct vals v;
	char   *err;
	int	first = -1;

	ck_assert_int_eq(parse(&v, &no_rest, &err, &first,
			       ARGS("--str", "a b", "-c", "x.conf", "--flag", "--format", "json",
				    "--pformat=prometheus", "-n", "7", "--secs", "1h30m", "--call",
				    "good", "--count", "--count")), PN_ARGS_RUN);
	ck_assert_str_eq(err, "");
	ck_assert_str_eq(v.str, "a b");
	ck_assert(v.str_seen);
	ck_assert_str_eq(v.cfg, "x.conf");
	ck_assert(v.flag);
	ck_assert_int_eq(v.fmt, PN_FMT_JSON);
	ck_assert_int_eq(v.pfmt, PN_FMT_PROMETHEUS);
	ck_assert_int_eq(v.num, 7);
	ck_assert_int_eq(v.secs, 5400);
	ck_assert_str_eq(v.call, "good");
	ck_assert_int_eq(v.nflag, 2);
	ck_assert_int_eq(calls, 3);
	ck_assert_int_eq(first, 17);
	ck_assert_int_eq(helps, 0);
	free(err);

	/* short forms, attached values, an unambiguous prefix; the last value wins */
	ck_assert_int_eq(parse(&v, &no_rest, &err, NULL,
			   ARGS("-fcone", "-n3", "--st=s1", "--str", "s2", "--for", "csv")),
			 PN_ARGS_RUN);
	ck_assert_str_eq(err, "");
	ck_assert(v.flag);
	ck_assert_str_eq(v.cfg, "one");
	ck_assert_int_eq(v.num, 3);
	ck_assert_str_eq(v.str, "s2");
	ck_assert_int_eq(v.fmt, PN_FMT_CSV);
	free(err);

	/* nothing given: nothing touched */
	ck_assert_int_eq(parse(&v, &no_rest, &err, &first, ARGS(NULL)), PN_ARGS_RUN);
	ck_assert(v.str == NULL && !v.str_seen && !v.flag && v.num == 0);
	ck_assert_int_eq(first, 1);
	free(err);
}
END_TEST

START_TEST(test_help_and_action)
{
	const char *const *const cases[] = {
		ARGS("--help"), ARGS("-h"), ARGS("--he"), ARGS("--flag", "-h", "--bogus"),
		ARGS("-h", "extra", "--num", "99"),
	};
	struct vals v;
	char   *err;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, cases[i]), PN_EXIT_OK);
		ck_assert_int_eq(helps, 1);
		ck_assert_ptr_eq(help_to, stdout);
		ck_assert_str_eq(err, "");
		free(err);
	}
	/* --version and -V: shown on stdout, exit 0, nothing after them looked at */
	ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, ARGS("-V", "--bogus")), PN_EXIT_OK);
	ck_assert_int_eq(shows, 1);
	ck_assert_int_eq(helps, 0);
	free(err);
	ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, ARGS("--version", "-h")), PN_EXIT_OK);
	ck_assert_int_eq(shows, 1);
	ck_assert_int_eq(helps, 0);
	free(err);
}
END_TEST

START_TEST(test_unknown_option_and_missing_argument)
{
	const struct {
		const char *const *argv;
		const char *getopt_says;
	} cases[] = {
		{ARGS("--bogus"), "test: unrecognized option '--bogus'\n"},
		{ARGS("-x"), "test: invalid option -- 'x'\n"},
		{ARGS("--flag=1"), "test: option '--flag' doesn't allow an argument\n"},
		{ARGS("--str"), "test: option '--str' requires an argument\n"},
		{ARGS("-c"), "test: option requires an argument -- 'c'\n"},
		{ARGS("--co"), "test: option '--co' is ambiguous; possibilities: '--config' "
		 "'--count'\n"},
		/* the unknown option comes first: the wrong value after it is not looked at */
		{ARGS("--bogus", "--num", "99"), "test: unrecognized option '--bogus'\n"},
	};
	struct vals v;
	char   *err, *want;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, cases[i].argv), PN_EXIT_USAGE);
		ck_assert_int_eq(helps, 1);
		ck_assert_ptr_eq(help_to, stderr);
		want = pn_xasprintf("%susage: test [options]\n", cases[i].getopt_says);
		ck_assert_str_eq(err, want);
		free(want);
		free(err);
	}
}
END_TEST

START_TEST(test_wrong_values)
{
	const struct {
		const char *const *argv;
		const char *says;
	} cases[] = {
		{ARGS("--num", "11"),
		 "paynotify: --num \"11\": expected a whole number from 1 to 10\n"},
		{ARGS("-n", "x"), "paynotify: --num \"x\": expected a whole number from 1 to 10\n"},
		{ARGS("--format", "prometheus"),
		 "paynotify: --format must be table, csv or json\n"},
		{ARGS("--pformat", "xml"),
		 "paynotify: --format must be table, csv, json or prometheus\n"},
		{ARGS("--call", "bad"), "paynotify: --call \"bad\": not good\n"},
		/* the wrong value comes first: the unknown option and --help after it are not */
		{ARGS("--num", "0", "--bogus"),
		 "paynotify: --num \"0\": expected a whole number from 1 to 10\n"},
		{ARGS("--call", "bad", "--help"), "paynotify: --call \"bad\": not good\n"},
		{ARGS("--call", "bad", "extra"), "paynotify: --call \"bad\": not good\n"},
	};
	struct vals v;
	char   *err;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, cases[i].argv), PN_EXIT_USAGE);
		ck_assert_str_eq(err, cases[i].says);
		ck_assert_int_eq(helps, 0);
		free(err);
	}
	ck_assert_int_eq(parse(&v, &no_rest, &err, NULL, ARGS("--secs", "soon")), PN_EXIT_USAGE);
	ck_assert(strncmp(err, "paynotify: --secs \"soon\": expected a duration", 45) == 0);
	free(err);
}
END_TEST

START_TEST(test_arguments_left)
{
	const struct pn_args named = {.cmd = "test", .rest = PN_REST_NAMED};
	const struct pn_args unnamed = {.cmd = "test", .rest = PN_REST_UNNAMED};
	const struct pn_args by_help = {.cmd = "test", .rest = PN_REST_HELP};
	const struct pn_args one = {.cmd = "test", .min_rest = 1, .max_rest = 1,
				    .rest = PN_REST_NAMED};
	const struct pn_args any = {.cmd = "test", .max_rest = -1};
	const struct pn_args in_order = {.cmd = "test", .min_rest = 1, .max_rest = -1,
					 .in_order = true};
	struct vals v;
	char   *err;
	int	first;

	ck_assert_int_eq(parse(&v, &named, &err, NULL, ARGS("--flag", "x", "y")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "paynotify: test: unexpected argument \"x\"\n");
	ck_assert_int_eq(helps, 0);
	free(err);
	ck_assert_int_eq(parse(&v, &unnamed, &err, NULL, ARGS("x")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "paynotify: test: unexpected argument\n");
	free(err);
	ck_assert_int_eq(parse(&v, &by_help, &err, NULL, ARGS("x")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "usage: test [options]\n");
	ck_assert_ptr_eq(help_to, stderr);
	free(err);
	/* "--" ends the options: what follows is an argument */
	ck_assert_int_eq(parse(&v, &named, &err, NULL, ARGS("--", "--flag")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "paynotify: test: unexpected argument \"--flag\"\n");
	ck_assert(!v.flag);
	free(err);

	/* exactly one: options around it (getopt moves it to the end) */
	ck_assert_int_eq(parse(&v, &one, &err, &first, ARGS("--flag", "p", "-n", "2")),
			 PN_ARGS_RUN);
	ck_assert_int_eq(first, 4);
	ck_assert(v.flag && v.num == 2);
	free(err);
	ck_assert_int_eq(parse(&v, &one, &err, NULL, ARGS("p", "q")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "paynotify: test: unexpected argument \"q\"\n");
	free(err);
	ck_assert_int_eq(parse(&v, &one, &err, NULL, ARGS("--flag")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "usage: test [options]\n");	/* too few: the help */
	free(err);

	/* any number */
	ck_assert_int_eq(parse(&v, &any, &err, &first, ARGS("1", "--flag", "2", "3")),
			 PN_ARGS_RUN);
	ck_assert_int_eq(first, 2);
	ck_assert(v.flag);
	free(err);

	/* in order: the options end at the first argument, the rest is left as it is */
	ck_assert_int_eq(parse(&v, &in_order, &err, &first,
			       ARGS("-c", "x", "cmd", "--flag", "--bogus")), PN_ARGS_RUN);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(first, 3);
	ck_assert(!v.flag);
	ck_assert_str_eq(v.cfg, "x");
	free(err);
	ck_assert_int_eq(parse(&v, &in_order, &err, NULL, ARGS("-c", "x")), PN_EXIT_USAGE);
	ck_assert_str_eq(err, "usage: test [options]\n");
	free(err);
}
END_TEST

/* getopt's state starts again on every parse (main() parses before the command) */
START_TEST(test_parses_again)
{
	struct vals v;
	char   *err;
	int	first, i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(parse(&v, &no_rest, &err, &first, ARGS("-f", "-n", "4")),
				 PN_ARGS_RUN);
		ck_assert(v.flag && v.num == 4);
		ck_assert_int_eq(first, 4);
		free(err);
	}
}
END_TEST

Suite *
suite_args(void)
{
	Suite  *s = suite_create("args");
	TCase  *tc = tcase_create("core");

	tcase_add_test(tc, test_values_of_each_kind);
	tcase_add_test(tc, test_help_and_action);
	tcase_add_test(tc, test_unknown_option_and_missing_argument);
	tcase_add_test(tc, test_wrong_values);
	tcase_add_test(tc, test_arguments_left);
	tcase_add_test(tc, test_parses_again);
	suite_add_tcase(s, tc);
	return s;
}

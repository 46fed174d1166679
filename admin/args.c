/*
 * args.c: the one option parser of `paynotify` and its subcommands
 * (args.h).  Every command used to carry its own getopt_long loop, help
 * and leftover check; each now declares a table and this file does the
 * rest, with the messages and exit statuses the commands had.
 *
 * (Not named cmd_*.c: those are the subcommands, one each, and
 * tests/integration/test_install.py reads them as such.)
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "args.h"

/* The most options one table has; getopt's arrays are this size. */
#define MAX_OPTS 32
/* getopt_long's return for an option with no short letter: LONG_ONLY + its index. */
#define LONG_ONLY 256

/* What getopt_long returns for the option a, entry i of its table. */
static int
val(const struct pn_arg *a, size_t i)
{
	return a->letter ? a->letter : LONG_ONLY + (int)i;
}

/* A table that contradicts itself is the program's bug, found by its first run. */
static void
check_entry(const struct pn_arg *a)
{
	bool	needs_arg;

	switch (a->kind) {
	case PN_ARG_FLAG:
	case PN_ARG_ACTION:
		needs_arg = false;
		break;
	case PN_ARG_CALL:
		needs_arg = a->has_arg == required_argument;
		break;
	default:
		needs_arg = true;
		break;
	}
	if ((a->has_arg != no_argument && a->has_arg != required_argument)
	    || (a->has_arg == required_argument) != needs_arg || a->letter == 'h'
	    || strcmp(a->name, "help") == 0 || (a->kind == PN_ARG_CALL && a->set == NULL)
	    || (a->kind == PN_ARG_ACTION && a->show == NULL)
	    || (a->kind != PN_ARG_CALL && a->kind != PN_ARG_ACTION && a->dest == NULL)
	    || (a->letter != 0 && !((a->letter >= 'a' && a->letter <= 'z')
				    || (a->letter >= 'A' && a->letter <= 'Z')
				    || (a->letter >= '0' && a->letter <= '9')))) {
		fprintf(stderr, "paynotify: option table: bad entry --%s\n", a->name);
		abort();
	}
}

/* One option's value into its dest; false after saying why on stderr. */
static bool
take(const struct pn_arg *a, const char *value)
{
	char	opt[64];

	snprintf(opt, sizeof(opt), "--%s", a->name);
	switch (a->kind) {
	case PN_ARG_FLAG:
		*a->flag = true;
		return true;
	case PN_ARG_STR:
		*a->str = value;
		return true;
	case PN_ARG_FORMAT:
		return pn_format_parse(value, false, a->fmt);
	case PN_ARG_FORMAT_PROM:
		return pn_format_parse(value, true, a->fmt);
	case PN_ARG_INT:
		return pn_opt_int(opt, value, a->min, a->max, a->num);
	case PN_ARG_DURATION:
		return pn_opt_duration(opt, value, a->num);
	case PN_ARG_CALL:
		return a->set(a, value);
	case PN_ARG_ACTION:
		break;
	}
	abort();
}

int
pn_args_parse(const struct pn_args *args, int argc, char **argv, int *first)
{
	struct option longopts[MAX_OPTS + 2];
	char	shortopts[2 * MAX_OPTS + 3];
	size_t	n, k = 0;
	int	opt, nrest;

	if (args->in_order)
		shortopts[k++] = '+';	/* stop at the first argument */
	for (n = 0; args->opts[n].name != NULL; n++) {
		const struct pn_arg *a = &args->opts[n];

		if (n == MAX_OPTS) {
			fprintf(stderr, "paynotify: option table: more than %d options\n",
				MAX_OPTS);
			abort();
		}
		check_entry(a);
		longopts[n] = (struct option){a->name, a->has_arg, NULL, val(a, n)};
		if (a->letter) {
			shortopts[k++] = (char)a->letter;
			if (a->has_arg == required_argument)
				shortopts[k++] = ':';
		}
	}
	longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[n + 1] = (struct option){NULL, 0, NULL, 0};
	shortopts[k++] = 'h';
	shortopts[k] = '\0';

	optind = 0;	/* glibc: 0 re-initialises getopt (main() used it before the command) */
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct pn_arg *a = NULL;
		size_t	i;

		if (opt == 'h') {
			args->help(stdout);
			return PN_EXIT_OK;
		}
		for (i = 0; i < n && a == NULL; i++)
			if (opt == val(&args->opts[i], i))
				a = &args->opts[i];
		if (a == NULL) {	/* '?': getopt said which option and why */
			args->help(stderr);
			return PN_EXIT_USAGE;
		}
		if (a->kind == PN_ARG_ACTION) {
			a->show(stdout);
			return PN_EXIT_OK;
		}
		if (a->seen != NULL)
			*a->seen = true;
		if (!take(a, optarg))
			return PN_EXIT_USAGE;
	}
	nrest = argc - optind;
	if (nrest < args->min_rest || (args->max_rest >= 0 && nrest > args->max_rest)) {
		if (args->rest == PN_REST_HELP || nrest < args->min_rest)
			args->help(stderr);
		else if (args->rest == PN_REST_NAMED)
			fprintf(stderr, "paynotify: %s: unexpected argument \"%s\"\n", args->cmd,
				argv[optind + args->max_rest]);
		else
			fprintf(stderr, "paynotify: %s: unexpected argument\n", args->cmd);
		return PN_EXIT_USAGE;
	}
	if (first != NULL)
		*first = optind;
	return PN_ARGS_RUN;
}

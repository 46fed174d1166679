/*
 * args.h: the options of a subcommand (and of `paynotify` itself),
 * declared in one table and parsed in one place, as tmux's cmd_entry.args.
 *
 * A command lists its options, each with where its value goes, and calls
 * pn_args_parse() once: getopt_long, --help and -h (the command's help on
 * stdout, exit 0), an unknown option or a missing argument (getopt's
 * message, then the help on stderr, exit 64), each value checked as it
 * comes, in order (a wrong one: its message, exit 64), and the arguments
 * left after the options (too many or too few: exit 64, in the command's
 * words, pn_args_rest).  What is left is the command's: options that
 * exclude or need each other, values checked against the configuration.
 *
 *	const char *site = NULL;
 *	bool	apply = false;
 *	enum pn_format fmt = pn_format_default();
 *	int64_t	workers = 2;
 *	const struct pn_arg options[] = {
 *		{"site", required_argument, 0, PN_ARG_STR, .str = &site},
 *		{"apply", no_argument, 0, PN_ARG_FLAG, .flag = &apply},
 *		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
 *		{"workers", required_argument, 'w', PN_ARG_INT, .num = &workers,
 *		 .min = 0, .max = 64},
 *		PN_ARGS_END,
 *	};
 *	const struct pn_args args = {.cmd = "query", .help = help, .opts = options,
 *				     .rest = PN_REST_NAMED};
 *
 *	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
 *		return rc;
 *
 * The table is a local of the command's exec function (its values are the
 * function's variables).  Each entry begins {"name", no_argument or
 * required_argument: tests/integration/test_install.py finds the options
 * by that text and checks that paynotify(1) has an entry for each.  The
 * rest of an entry is designated (.str = ...): -Wextra wants every field
 * of a positional initialiser.
 */
#ifndef PN_ARGS_H
#define PN_ARGS_H

#include <getopt.h>		/* no_argument, required_argument */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "admin.h"		/* enum pn_format */
#include "util.h"		/* PN_WUR */

/* What an option's value is and where it goes. */
enum pn_arg_kind {
	PN_ARG_FLAG = 1,	/* no_argument: *.flag = true */
	PN_ARG_STR,		/* required_argument: *.str = the value, as given */
	PN_ARG_FORMAT,		/* table, csv or json (pn_format_parse): *.fmt */
	PN_ARG_FORMAT_PROM,	/* the same, or prometheus */
	PN_ARG_INT,		/* a whole number from .min to .max (pn_opt_int): *.num */
	PN_ARG_DURATION,	/* a duration (pn_opt_duration): *.num, seconds */
	PN_ARG_CALL,		/* .set(arg, value) (value NULL with no_argument), which puts it
				 * in arg->dest; false: it said why on stderr, exit 64 */
	PN_ARG_ACTION,		/* no_argument: .show(stdout), exit 0 (as --help; --version) */
};

struct pn_arg {
	const char *name;	/* the long option, without "--"; NULL ends the table */
	int	has_arg;	/* no_argument or required_argument */
	int	letter;		/* its short option ('c' for -c), 0 if none; never 'h' */
	enum pn_arg_kind kind;
	union {			/* the kind's (the compiler checks the pointer's type) */
		bool   *flag;
		const char **str;
		enum pn_format *fmt;
		int64_t *num;
		void   *dest;	/* PN_ARG_CALL's */
	};
	bool	(*set)(const struct pn_arg *arg, const char *value);	/* PN_ARG_CALL */
	void	(*show)(FILE *f);				/* PN_ARG_ACTION */
	int64_t	min, max;	/* PN_ARG_INT's range (a .set may use them too) */
	bool   *seen;		/* if not NULL: true once the option is given */
};

/* The end of a table. */
#define PN_ARGS_END {.name = NULL}

/* What a wrong number of arguments after the options says (exit 64). */
enum pn_args_rest {
	PN_REST_HELP,		/* the command's help, on stderr */
	PN_REST_NAMED,		/* paynotify: CMD: unexpected argument "ARG" (too few: the help) */
	PN_REST_UNNAMED,	/* paynotify: CMD: unexpected argument (too few: the help) */
};

struct pn_args {
	const char *cmd;	/* the command's name, for PN_REST_NAMED and _UNNAMED */
	void	(*help)(FILE *f);
	const struct pn_arg *opts;
	int	min_rest, max_rest;	/* arguments after the options; max_rest -1: any number */
	enum pn_args_rest rest;
	bool	in_order;	/* the options end at the first argument (`paynotify`'s own,
				 * before the command); otherwise getopt's order (options and
				 * arguments mixed, "--" ends the options) */
};

/* pn_args_parse(): go on and run the command. */
#define PN_ARGS_RUN (-1)

/*
 * Parse argv[1..argc-1] (argv[0], the command's name, is getopt's prefix
 * of its messages) as args says, filling each option's dest.  Returns
 * PN_ARGS_RUN with *first (may be NULL) the index in argv of the first
 * argument left after the options, or the status to exit with now:
 * PN_EXIT_OK after --help (or an action option), PN_EXIT_USAGE after
 * saying why on stderr.
 */
int pn_args_parse(const struct pn_args *args, int argc, char **argv, int *first) PN_WUR;

#endif

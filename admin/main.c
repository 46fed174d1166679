/*
 * main.c: `paynotify`, the operators' command.  Dispatches to one
 * subcommand per cmd_*.c file.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "log.h"

static const struct pn_cmd *const commands[] = {
	&pn_cmd_migrate,
	&pn_cmd_check_config,
	&pn_cmd_replay,
	&pn_cmd_report,
	&pn_cmd_resolve,
	&pn_cmd_purge,
	&pn_cmd_sign,
	&pn_cmd_stats,
	&pn_cmd_query,
	&pn_cmd_confirm,
	&pn_cmd_reconcile,
	&pn_cmd_wechatpay_certificates,
	NULL,
};

static void
usage(FILE *f)
{
	const struct pn_cmd *const *c;

	fprintf(f, "usage: paynotify [-c FILE] COMMAND [ARGS]\n\n"
		"Operate paynotify: schema, configuration, replay and reconciliation.\n\n"
		"Commands:\n");
	for (c = commands; *c; c++)
		fprintf(f, "  %-13s %s\n", (*c)->name, (*c)->summary);
	fprintf(f, "\nOptions:\n"
		"  -c, --config FILE  configuration (default: $PAYNOTIFY_CONFIG, else\n"
		"                     " PN_DEFAULT_CONFIG "), then\n"
		"                     conf.d/*.conf beside it\n"
		"  -h, --help         this help; `paynotify COMMAND --help` for a command\n"
		"  -V, --version      the version\n\n"
		"Exit status (docs/OPERATIONS.md, \"Exit statuses\"): 0 all well, 1 something\n"
		"needs a human, 2 a stored notification does not verify (replay), 3 could\n"
		"not do the job (database unavailable, a query failed, I/O error), 4 the\n"
		"key that verified one is no longer configured (replay), 64 usage error (an\n"
		"option or its value), 78 configuration error.\n");
}

struct pn_config *
pn_admin_config(const char *path)
{
	return pn_admin_config_flags(path, 0);
}

struct pn_config *
pn_admin_config_flags(const char *path, unsigned flags)
{
	struct pn_cfg_findings fd = {NULL, 0};
	struct pn_config *cfg = pn_cfg_load_all_flags(path, flags, &fd);
	size_t	i;

	/* Every error, each with its file and line; site errors and warnings are
	 * check-config's (and the receivers' log's) business. */
	for (i = 0; cfg == NULL && i < fd.n; i++)
		if (fd.v[i].severity == PN_CFG_ERROR) {
			char   *t = pn_cfg_finding_text(&fd.v[i]);

			fprintf(stderr, "paynotify: %s\n", t);
			free(t);
		}
	pn_cfg_findings_free(&fd);
	return cfg;
}

bool
pn_admin_query_cfg(const struct pn_config *cfg, struct pn_sql sql, int nparams,
		   const char *const *params, struct pn_table *out)
{
	struct pn_err err;
	PGconn *conn = NULL;
	bool	ok = false;

	conn = pn_db_connect(cfg, &err);
	if (conn != NULL && pn_db_query(conn, sql, nparams, params, out, &err))
		ok = true;
	else
		fprintf(stderr, "paynotify: %s\n", err.msg);
	PQfinish(conn);
	return ok;
}

bool
pn_admin_query(const char *config_path, struct pn_sql sql, int nparams,
	       const char *const *params,
	       struct pn_table *out)
{
	struct pn_config *cfg = pn_admin_config(config_path);
	bool	ok;

	if (cfg == NULL)
		return false;
	ok = pn_admin_query_cfg(cfg, sql, nparams, params, out);
	pn_cfg_free(cfg);
	return ok;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *config_path = NULL;
	const struct pn_cmd *const *c;
	int	opt;

	/* Options before the command only; the command parses the rest. */
	while ((opt = getopt_long(argc, argv, "+c:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("paynotify %s (schema version %d)\n", PACKAGE_VERSION, PN_SCHEMA_VERSION);
			return 0;
		default:
			usage(stderr);
			return PN_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return PN_EXIT_USAGE;
	}
	if (config_path == NULL)
		config_path = pn_cfg_default_path();
	pn_log_init("paynotify", PN_LOG_ERROR);
	signal(SIGPIPE, SIG_IGN);
	for (c = commands; *c; c++)
		if (strcmp((*c)->name, argv[optind]) == 0) {
			optind++;
			return (*c)->exec(argc - optind + 1, argv + optind - 1, config_path);
		}
	fprintf(stderr, "paynotify: unknown command \"%s\"\n\n", argv[optind]);
	usage(stderr);
	return PN_EXIT_USAGE;
}

/*
 * main.c: `paynotify`, the operators' command.  Dispatches to one
 * subcommand per cmd_*.c file.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "args.h"
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

static void
version(FILE *f)
{
	fprintf(f, "paynotify %s (schema version %d)\n", PACKAGE_VERSION, PN_SCHEMA_VERSION);
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
	const char *config_path = NULL;
	const struct pn_cmd *const *c;
	const struct pn_arg options[] = {
		{"config", required_argument, 'c', PN_ARG_STR, .str = &config_path},
		{"version", no_argument, 'V', PN_ARG_ACTION, .show = version},
		PN_ARGS_END,
	};
	/* options before the command only (the command parses the rest) */
	const struct pn_args args = {.cmd = "paynotify", .help = usage, .opts = options,
				     .min_rest = 1, .max_rest = -1, .rest = PN_REST_HELP,
				     .in_order = true};
	int	cmd, rc;

	if ((rc = pn_args_parse(&args, argc, argv, &cmd)) != PN_ARGS_RUN)
		return rc;
	if (config_path == NULL)
		config_path = pn_cfg_default_path();
	pn_log_init("paynotify", PN_LOG_ERROR);
	signal(SIGPIPE, SIG_IGN);
	for (c = commands; *c; c++)
		if (strcmp((*c)->name, argv[cmd]) == 0)
			return (*c)->exec(argc - cmd, argv + cmd, config_path);
	fprintf(stderr, "paynotify: unknown command \"%s\"\n\n", argv[cmd]);
	usage(stderr);
	return PN_EXIT_USAGE;
}

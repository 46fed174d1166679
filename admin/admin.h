/*
 * admin.h: the `paynotify` admin command.
 *
 * One file per subcommand (cmd_<name>.c), each exporting one const struct
 * pn_cmd (tmux style); main.c dispatches.  db.c is the only file that sees
 * libpq results; table.c prints rows as a table, CSV or JSON.
 */
#ifndef PN_ADMIN_H
#define PN_ADMIN_H

#include <stdbool.h>
#include <stdio.h>

#include <libpq-fe.h>

#include "cfg.h"
#include "util.h"

/* The schema version this build expects (the highest sql/NNN_*.sql). */
#define PN_SCHEMA_VERSION 6

/* Exit codes shared by the subcommands. */
#define PN_EXIT_OK 0
#define PN_EXIT_ATTENTION 1	/* something needs a human (report, replay flags) */
#define PN_EXIT_UNVERIFIED 2	/* replay: a stored notification no longer verifies */
#define PN_EXIT_FAILURE 3	/* could not do the job: config, database, I/O */
#define PN_EXIT_USAGE 64

struct pn_cmd {
	const char *name;
	const char *synopsis;	/* one line: arguments */
	const char *summary;	/* one line: what it does */
	int	(*exec)(int argc, char **argv, const char *config_path);
	void	(*help)(FILE *f);
};

extern const struct pn_cmd pn_cmd_migrate;
extern const struct pn_cmd pn_cmd_check_config;
extern const struct pn_cmd pn_cmd_replay;
extern const struct pn_cmd pn_cmd_report;
extern const struct pn_cmd pn_cmd_sign;
extern const struct pn_cmd pn_cmd_stats;
extern const struct pn_cmd pn_cmd_query;
extern const struct pn_cmd pn_cmd_reconcile;

/* ---- rows (table.c) ------------------------------------------------------ */

enum pn_format { PN_FMT_TABLE, PN_FMT_CSV, PN_FMT_JSON, PN_FMT_PROMETHEUS };

struct pn_table {
	size_t	ncols;
	size_t	nrows;
	char  **cols;		/* column names */
	char  **cells;		/* nrows * ncols strings; NULL is SQL NULL */
};

void pn_table_init(struct pn_table *t, size_t ncols, const char *const *cols);
void pn_table_add(struct pn_table *t, const char *const *cells);	/* copies ncols cells */
const char *pn_table_get(const struct pn_table *t, size_t row, const char *col);
void pn_table_print(const struct pn_table *t, enum pn_format fmt, FILE *f);
void pn_table_free(struct pn_table *t);
/* "table", "csv", "json" (and "prometheus" when allowed); says why not on stderr */
bool pn_format_parse(const char *s, bool allow_prometheus, enum pn_format *out);
/* The default: a table on a terminal, CSV otherwise. */
enum pn_format pn_format_default(void);

/* ---- database (db.c) ------------------------------------------------------ */

PGconn *pn_db_connect(const struct pn_config *cfg, struct pn_err *err) PN_WUR;
/* Run sql with text parameters (NULL = SQL NULL); rows into out (may be NULL). */
bool pn_db_query(PGconn *conn, const char *sql, int nparams, const char *const *params,
		 struct pn_table *out, struct pn_err *err) PN_WUR;
/* Run a script of several statements (migrations). */
bool pn_db_script(PGconn *conn, const char *sql, struct pn_err *err) PN_WUR;
/* The schema version recorded in the database, 0 if none. */
bool pn_db_schema_version(PGconn *conn, int *version, struct pn_err *err) PN_WUR;

/* Load the configuration or print why not. */
struct pn_config *pn_admin_config(const char *path);
/* Load the configuration, connect and run one query into out; false after
 * printing why not on stderr. */
bool pn_admin_query(const char *config_path, const char *sql, int nparams,
		    const char *const *params, struct pn_table *out) PN_WUR;

#endif

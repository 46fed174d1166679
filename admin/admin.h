/*
 * admin.h: the `paynotify` admin command.
 *
 * One file per subcommand (cmd_<name>.c), each exporting one const struct
 * pn_cmd (tmux style); main.c dispatches.  Each declares its options in a
 * table that args.c parses (args.h).  db.c is the only file that sees
 * libpq results; table.c prints rows as a table, CSV or JSON.
 */
#ifndef PN_ADMIN_H
#define PN_ADMIN_H

#include <stdbool.h>
#include <stdio.h>

#include "sql.h"		/* <libpq-fe.h>, SQL text only as literals */

#include "cfg.h"
#include "exit.h"
#include "util.h"

/* The schema version this build expects (the highest sql/NNN_*.sql). */
#define PN_SCHEMA_VERSION 18

/* Exit statuses: common/exit.h, one table for every program. */

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
extern const struct pn_cmd pn_cmd_purge;
extern const struct pn_cmd pn_cmd_resolve;
extern const struct pn_cmd pn_cmd_sign;
extern const struct pn_cmd pn_cmd_stats;
extern const struct pn_cmd pn_cmd_query;
extern const struct pn_cmd pn_cmd_confirm;
extern const struct pn_cmd pn_cmd_reconcile;
extern const struct pn_cmd pn_cmd_wechatpay_certificates;

/* ---- rows (table.c) ------------------------------------------------------ */

enum pn_format { PN_FMT_TABLE, PN_FMT_CSV, PN_FMT_JSON, PN_FMT_PROMETHEUS };

struct pn_table {
	size_t	ncols;
	size_t	nrows;
	char  **cols;		/* column names */
	char  **cells;		/* nrows * ncols strings; NULL is SQL NULL */
	uint64_t optional;	/* columns a table may leave out (pn_table_optional) */
};

void pn_table_init(struct pn_table *t, size_t ncols, const char *const *cols);
void pn_table_add(struct pn_table *t, const char *const *cells);	/* copies ncols cells */
const char *pn_table_get(const struct pn_table *t, size_t row, const char *col);
/* A table fits 100 columns (wide cells wrap onto more lines) unless
 * pn_table_set_wide(true) (--wide); CSV and JSON are never cut. */
void pn_table_print(const struct pn_table *t, enum pn_format fmt, FILE *f);
void pn_table_set_wide(bool wide);
/* Column col is of low value in a terminal: a table that does not fit 100
 * columns leaves it out (and says so); --wide, CSV and JSON keep it. */
void pn_table_optional(struct pn_table *t, const char *col);
void pn_table_free(struct pn_table *t);
/* "table", "csv", "json" (and "prometheus" when allowed); says why not on stderr */
bool pn_format_parse(const char *s, bool allow_prometheus, enum pn_format *out);
/* The default: a table on a terminal, CSV otherwise. */
enum pn_format pn_format_default(void);

/* ---- database (db.c) ------------------------------------------------------ */

/* The admin commands' connection: [database] admin_conninfo, else conninfo. */
PGconn *pn_db_connect(const struct pn_config *cfg, struct pn_err *err) PN_WUR;
/* migrate's: owner_conninfo, else admin_conninfo, else conninfo. */
PGconn *pn_db_connect_owner(const struct pn_config *cfg, struct pn_err *err) PN_WUR;
/* The receivers' (conninfo): check-config's look at what they may do. */
PGconn *pn_db_connect_receivers(const struct pn_config *cfg, struct pn_err *err) PN_WUR;
/* Run sql (PN_SQL("...") or PN_SQL_CONST(name), common/sql.h) with text parameters
 * (NULL = SQL NULL); rows into out (may be NULL). */
bool pn_db_query(PGconn *conn, struct pn_sql sql, int nparams, const char *const *params,
		 struct pn_table *out, struct pn_err *err) PN_WUR;
/* Run a script of several statements: the text of the sql/ files (migrations),
 * the one SQL text that is not a literal (common/sql.h). */
bool pn_db_script(PGconn *conn, const char *sql, struct pn_err *err) PN_WUR;
/* Run a COPY ... TO STDOUT statement (constant SQL), writing its output to f;
 * *bytes grows by what was written. */
bool pn_db_copy_out(PGconn *conn, struct pn_sql sql, FILE *f, int64_t *bytes,
		    struct pn_err *err) PN_WUR;
/* The schema version recorded in the database, 0 if none. */
bool pn_db_schema_version(PGconn *conn, int *version, struct pn_err *err) PN_WUR;

/* check-config's replication checks (check_ha.c): prints its lines, counts
 * errors into *problems, returns the number of warnings. */
int pn_check_replication(PGconn *conn, const struct pn_config *cfg, int *problems);

/* Load the configuration or print why not (every error, file:line). */
struct pn_config *pn_admin_config(const char *path);
/* The same with pn_cfg_load_all_flags() flags (PN_CFG_NO_SITES: migrate). */
struct pn_config *pn_admin_config_flags(const char *path, unsigned flags);
/* Connect and run one query into out with a loaded configuration; false
 * after printing why not on stderr. */
bool pn_admin_query_cfg(const struct pn_config *cfg, struct pn_sql sql, int nparams,
			const char *const *params, struct pn_table *out) PN_WUR;
/* Load the configuration, connect and run one query into out; false after
 * printing why not on stderr. */
bool pn_admin_query(const char *config_path, struct pn_sql sql, int nparams,
		    const char *const *params, struct pn_table *out) PN_WUR;

/* ---- option values (opts.c) ---------------------------------------------
 * Each checks one option's value before anything runs and, when it is not
 * valid, says so on stderr with the valid values; the caller exits
 * PN_EXIT_USAGE.  A filter that matches nothing because of a typo is a
 * silent wrong answer: these make it a loud one.
 */
bool pn_opt_site(const struct pn_config *cfg, const char *opt, const char *value) PN_WUR;
bool pn_opt_provider(const char *opt, const char *value) PN_WUR;
bool pn_opt_outcome(const char *opt, const char *value) PN_WUR;
/* A positive integer (row ids). */
bool pn_opt_id(const char *opt, const char *value) PN_WUR;
/* A whole number from min to max (counts, rates): *out. */
bool pn_opt_int(const char *opt, const char *value, int64_t min, int64_t max,
		int64_t *out) PN_WUR;
/* A duration ("30m", "2h", "1 day", "90 seconds"): *seconds. */
bool pn_opt_duration(const char *opt, const char *value, int64_t *seconds) PN_WUR;
/* A point in time: an ISO 8601 date or date and time, with an optional zone
 * ("2026-11-30", "2026-11-30 08:00+08", "2026-11-30T00:00:00Z"), one of
 * PostgreSQL's words now, today, yesterday, tomorrow, or a duration meaning
 * that long ago ("2h").  *out: text PostgreSQL reads as
 * timestamptz (owned by the caller). */
bool pn_opt_time(const char *opt, const char *value, char **out) PN_WUR;
/* An http:// or https:// URL with a host. */
bool pn_opt_url(const char *opt, const char *value) PN_WUR;
/* Every outcome the schema records (for help texts and tests). */
extern const char *const pn_outcomes[];

#endif

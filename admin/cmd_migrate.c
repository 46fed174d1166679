/*
 * cmd_migrate.c: paynotify migrate — apply the numbered sql/ files in order,
 * then sql/functions.sql.
 *
 * Each file NNN_name.sql holds tables and data changes, in one transaction
 * that ends by recording version NNN in paynotify.schema_version.  migrate
 * applies, in order, the files above the recorded version, then re-applies
 * functions.sql (every function's one current definition, CREATE OR
 * REPLACE), every run, under an advisory lock so that two runs cannot
 * interleave; then grants.sql (what each role may do, one list), when the
 * roles of roles.sql exist.  Running it again changes nothing.
 */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "args.h"

#ifndef PN_SQLDIR
#define PN_SQLDIR "/usr/local/share/paynotify/sql"
#endif

#define FUNCTIONS_FILE "functions.sql"
#define GRANTS_FILE "grants.sql"
#define MIGRATE_LOCK "SELECT pg_advisory_lock(hashtext('paynotify migrate'))"
#define MIGRATE_UNLOCK "SELECT pg_advisory_unlock(hashtext('paynotify migrate'))"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify migrate [--sql-dir DIR]\n\n"
		"Apply the numbered schema files (NNN_*.sql) above the version recorded in\n"
		"paynotify.schema_version, in order, each in its own transaction; then\n"
		"(re)define every function from " FUNCTIONS_FILE " and apply " GRANTS_FILE " (the\n"
		"rights of paynotify_receiver, paynotify_admin and paynotify_consumer), once\n"
		"those roles exist (roles.sql, run once by a superuser).  Connects with\n"
		"[database] owner_conninfo, else admin_conninfo, else conninfo.  Safe to run\n"
		"twice and on an existing database.\n\n"
		"  --sql-dir DIR  where the files are (default: $PAYNOTIFY_SQL_DIR, else\n"
		"                 " PN_SQLDIR ")\n\n"
		"Exit status: 0 (also when there is nothing to do), 64 usage (an argument,\n"
		"or a --sql-dir without NNN_*.sql files), 3 database error or the installed\n"
		"files are missing, 78 configuration error.\n");
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* NNN_*.sql files, sorted; returns the count. */
static size_t
list_files(const char *dir, char ***out)
{
	DIR    *d = opendir(dir);
	struct dirent *de;
	size_t	n = 0;

	*out = NULL;
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		const char *s = de->d_name;
		size_t	len = strlen(s);

		if (len > 8 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9'
		    && s[2] >= '0' && s[2] <= '9' && s[3] == '_' && strcmp(s + len - 4, ".sql") == 0) {
			*out = pn_xrealloc(*out, (n + 1) * sizeof(char *));
			(*out)[n++] = pn_xstrdup(s);
		}
	}
	closedir(d);
	if (n > 1)	/* none found: *out is NULL, which qsort() must not get */
		qsort(*out, n, sizeof(char *), cmp_str);
	return n;
}

/* The roles grants.sql grants to (sql/roles.sql creates them). */
static const char roles_sql[] =
	"SELECT count(*) FILTER (WHERE r.rolname IS NOT NULL) AS present,"
	"       string_agg(w.name, ', ' ORDER BY w.name) FILTER (WHERE r.rolname IS NULL)"
	"         AS missing"
	"  FROM unnest(ARRAY['paynotify_receiver', 'paynotify_admin', 'paynotify_consumer'])"
	"       AS w(name) LEFT JOIN pg_roles r ON r.rolname = w.name";

/*
 * Apply grants.sql when the three roles exist.  None of them: a database
 * run without them (the receivers log in as its owner, or grants by hand):
 * left alone, with a warning.  Some: an error (roles.sql was not run
 * whole).
 */
static bool
apply_grants(PGconn *conn, const char *dir, struct pn_err *err)
{
	struct pn_table t;
	const char *present, *missing;
	char   *path, *sql = NULL;
	bool	ok;

	if (!pn_db_query(conn, PN_SQL_CONST(roles_sql), 0, NULL, &t, err))
		return false;
	present = pn_table_get(&t, 0, "present");
	missing = pn_table_get(&t, 0, "missing");
	if (present != NULL && strcmp(present, "0") == 0) {
		fprintf(stderr, "paynotify: warning: roles %s do not exist: %s not applied (create "
			"them with roles.sql as a superuser, then run migrate again; "
			"docs/DATABASE.md)\n", missing ? missing : "?", GRANTS_FILE);
		pn_table_free(&t);
		return true;
	}
	if (missing != NULL) {
		pn_err_set(err, "role%s %s do%s not exist: run roles.sql as a superuser",
			   strchr(missing, ',') ? "s" : "", missing, strchr(missing, ',') ? "" : "es");
		pn_table_free(&t);
		return false;
	}
	pn_table_free(&t);
	path = pn_xasprintf("%s/%s", dir, GRANTS_FILE);
	ok = pn_read_file(path, 1024 * 1024, &sql, NULL, err) && pn_db_script(conn, sql, err);
	free(sql);
	free(path);
	if (ok)
		printf("applied %s\n", GRANTS_FILE);
	return ok;
}

static int
migrate_exec(int argc, char **argv, const char *config_path)
{
	const char *dir = getenv("PAYNOTIFY_SQL_DIR");
	struct pn_config *cfg = NULL;
	struct pn_err err;
	PGconn *conn = NULL;
	char  **files = NULL;
	size_t	nfiles, i, applied = 0;
	int	version = 0, rc;
	bool	given = true;	/* --sql-dir or $PAYNOTIFY_SQL_DIR */
	const struct pn_arg options[] = {
		{"sql-dir", required_argument, 'd', PN_ARG_STR, .str = &dir},
		PN_ARGS_END,
	};
	/* no arguments after the options: until issue 27 they were ignored, so
	 * `paynotify migrate sql/` ran against the installed files */
	const struct pn_args args = {.cmd = "migrate", .help = help, .opts = options,
				     .max_rest = 0, .rest = PN_REST_NAMED};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_UNAVAILABLE;
	if (dir == NULL || *dir == '\0') {
		dir = PN_SQLDIR;
		given = false;
	}
	nfiles = list_files(dir, &files);
	if (nfiles == 0) {
		/* a directory the operator named is a mistyped option; the
		 * built-in one missing is a broken installation */
		fprintf(stderr, "paynotify: no NNN_*.sql files in \"%s\"%s\n", dir,
			given ? "" : " (the installed schema files; use --sql-dir)");
		return given ? PN_EXIT_USAGE : PN_EXIT_IOERR;
	}
	/* only [database] matters here: the sites may come later */
	if ((cfg = pn_admin_config_flags(config_path, PN_CFG_NO_SITES)) == NULL) {
		rc = PN_EXIT_CONFIG;
		goto done;
	}
	if ((conn = pn_db_connect_owner(cfg, &err)) == NULL
	    /* the files' "DROP FUNCTION IF EXISTS … skipping" notices are noise to an
	     * operator; warnings and errors still show */
	    || !pn_db_query(conn, PN_SQL("SET client_min_messages = warning"), 0, NULL, NULL, &err)
	    || !pn_db_query(conn, PN_SQL(MIGRATE_LOCK), 0, NULL, NULL, &err)
	    || !pn_db_schema_version(conn, &version, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		goto done;
	}
	for (i = 0; i < nfiles; i++) {
		int	num = atoi(files[i]), now = 0;
		char   *path = pn_xasprintf("%s/%s", dir, files[i]), *sql = NULL;
		bool	ok;

		if (num <= version) {
			free(path);
			continue;
		}
		ok = pn_read_file(path, 16 * 1024 * 1024, &sql, NULL, &err)
		    && pn_db_script(conn, sql, &err) && pn_db_schema_version(conn, &now, &err);
		free(sql);
		free(path);
		if (!ok) {
			fprintf(stderr, "paynotify: %s: %s\n", files[i], err.msg);
			goto done;
		}
		if (now < num) {
			fprintf(stderr, "paynotify: %s did not record schema version %d\n", files[i], num);
			goto done;
		}
		printf("applied %s (schema version %d)\n", files[i], now);
		version = now;
		applied++;
	}
	if (applied == 0)
		printf("schema is at version %d: nothing to do\n", version);
	/* The functions of this build belong to its schema version, exactly. */
	if (version != PN_SCHEMA_VERSION) {
		fprintf(stderr, "paynotify: this build expects schema version %d but the "
			"database is at %d (files in %s): not applying %s\n", PN_SCHEMA_VERSION,
			version, dir, FUNCTIONS_FILE);
		goto done;
	}
	{
		char   *path = pn_xasprintf("%s/%s", dir, FUNCTIONS_FILE), *sql = NULL;
		bool	ok;

		ok = pn_read_file(path, 16 * 1024 * 1024, &sql, NULL, &err)
		    && pn_db_script(conn, sql, &err);
		free(sql);
		free(path);
		if (!ok) {
			fprintf(stderr, "paynotify: %s: %s\n", FUNCTIONS_FILE, err.msg);
			goto done;
		}
		printf("applied %s\n", FUNCTIONS_FILE);
	}
	if (!apply_grants(conn, dir, &err)) {
		fprintf(stderr, "paynotify: %s: %s\n", GRANTS_FILE, err.msg);
		goto done;
	}
	rc = PN_EXIT_OK;
done:
	if (conn) {
		if (!pn_db_query(conn, PN_SQL(MIGRATE_UNLOCK), 0, NULL, NULL, &err))
			fprintf(stderr, "paynotify: %s\n", err.msg);
		PQfinish(conn);
	}
	for (i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	pn_cfg_free(cfg);
	return rc;
}

const struct pn_cmd pn_cmd_migrate = {
	"migrate", "[--sql-dir DIR]", "create or upgrade the database schema", migrate_exec, help,
};

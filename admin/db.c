/*
 * db.c: libpq for the admin command.  The only admin file that sees a
 * PGresult; every value goes through parameters, every SQL text is a
 * literal (struct pn_sql, common/sql.h) but the sql/ files' in pn_db_script().
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "pqhosts.h"

static void
set_pq_error(struct pn_err *err, const char *what, const char *msg)
{
	size_t n = strcspn(msg, "\n");

	pn_err_set(err, "%s: %.*s", what, (int)n, msg);
}

/*
 * Several hosts: one pooler per node (target_session_attrs=any,
 * docs/DEPLOYMENT.md "Failover through poolers") accepts the connection
 * for a server that is down or a standby.  Start at each host in turn and
 * keep the first connection whose server answers and is not in recovery;
 * else the first that answered (check-config then says it is a standby);
 * else the last error.
 */
static PGconn *
connect_hosts(struct pn_pqhosts *hosts, const char *const *fb_keys,
	      const char *const *fb_vals, struct pn_err *err)
{
	PGconn *standby = NULL;
	size_t	i;

	for (i = 0; i < pn_pqhosts_count(hosts); i++) {
		const char *const *keys, *const *vals;
		PGconn *conn;
		PGresult *res;

		pn_pqhosts_params(hosts, i, fb_keys, fb_vals, 2, &keys, &vals);
		conn = PQconnectdbParams(keys, vals, 0);
		if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
			/* libpq tried every host from i on: none will do */
			set_pq_error(err, "could not connect to the database",
				     conn ? PQerrorMessage(conn) : "out of memory");
			PQfinish(conn);
			break;
		}
		res = PQexec(conn, "SELECT pg_is_in_recovery()");
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
		    && strcmp(PQgetvalue(res, 0, 0), "f") == 0) {
			PQclear(res);
			PQfinish(standby);
			return conn;
		}
		if (PQresultStatus(res) == PGRES_TUPLES_OK && standby == NULL)
			standby = conn;
		else {
			set_pq_error(err, "could not connect to the database", PQstatus(conn)
				     == CONNECTION_OK ? PQresultErrorMessage(res) : PQerrorMessage(conn));
			PQfinish(conn);
		}
		PQclear(res);
	}
	return standby;
}

static PGconn *
connect_with(const struct pn_config *cfg, const char *conninfo, struct pn_err *err)
{
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	char	timeout[16];
	const char *vals[] = {"paynotify", timeout, conninfo ? conninfo : "", NULL};
	struct pn_pqhosts *hosts = pn_pqhosts_new(conninfo);
	PGconn *conn;

	snprintf(timeout, sizeof(timeout), "%lld", (long long)cfg->connect_timeout_s);
	if (hosts != NULL) {
		conn = connect_hosts(hosts, keys, vals, err);
		pn_pqhosts_free(hosts);
		return conn;
	}
	conn = PQconnectdbParams(keys, vals, 1);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
		set_pq_error(err, "could not connect to the database",
			     conn ? PQerrorMessage(conn) : "out of memory");
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

PGconn *
pn_db_connect(const struct pn_config *cfg, struct pn_err *err)
{
	return connect_with(cfg, pn_cfg_admin_conninfo(cfg), err);
}

PGconn *
pn_db_connect_owner(const struct pn_config *cfg, struct pn_err *err)
{
	return connect_with(cfg, pn_cfg_owner_conninfo(cfg), err);
}

PGconn *
pn_db_connect_receivers(const struct pn_config *cfg, struct pn_err *err)
{
	return connect_with(cfg, cfg->conninfo, err);
}

bool
pn_db_query(PGconn *conn, struct pn_sql sql, int nparams, const char *const *params,
	    struct pn_table *out, struct pn_err *err)
{
	/* (PQexecParams): the text was checked where the struct pn_sql was made */
	PGresult *res = (PQexecParams)(conn, sql.text, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);
	int	r, c, ncols;

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		set_pq_error(err, "query failed", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	if (out != NULL) {
		const char **names, **cells;

		ncols = PQnfields(res);
		names = pn_xcalloc((size_t)ncols + 1, sizeof(char *));
		cells = pn_xcalloc((size_t)ncols + 1, sizeof(char *));
		for (c = 0; c < ncols; c++)
			names[c] = PQfname(res, c);
		pn_table_init(out, (size_t)ncols, names);
		for (r = 0; r < PQntuples(res); r++) {
			for (c = 0; c < ncols; c++)
				cells[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
			pn_table_add(out, cells);
		}
		free(names);
		free(cells);
	}
	PQclear(res);
	return true;
}

bool
pn_db_script(PGconn *conn, const char *sql, struct pn_err *err)
{
	/* (PQexec): the one text that is not a literal, the sql/ files (sql.h) */
	PGresult *res = (PQexec)(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		set_pq_error(err, "script failed", PQresultErrorMessage(res));
		PQclear(res);
		/* A failed script leaves an aborted transaction behind. */
		res = PQexec(conn, "ROLLBACK");
		PQclear(res);
		return false;
	}
	PQclear(res);
	return true;
}

bool
pn_db_schema_version(PGconn *conn, int *version, struct pn_err *err)
{
	struct pn_table t;
	const char *v;

	bool	exists;

	/* Two steps: the table may not exist yet, and SQL resolves names first. */
	if (!pn_db_query(conn,
			 PN_SQL("SELECT to_regclass('paynotify.schema_version') IS NOT NULL"), 0,
			 NULL, &t, err))
		return false;
	exists = t.nrows == 1 && t.cells[0] && strcmp(t.cells[0], "t") == 0;
	pn_table_free(&t);
	*version = 0;
	if (!exists)
		return true;
	if (!pn_db_query(conn,
			 PN_SQL("SELECT coalesce(max(version), 0) FROM paynotify.schema_version"), 0,
			 NULL, &t, err))
		return false;
	v = t.nrows == 1 ? t.cells[0] : NULL;
	*version = v ? atoi(v) : 0;
	pn_table_free(&t);
	return true;
}

bool
pn_db_copy_out(PGconn *conn, struct pn_sql sql, FILE *f, int64_t *bytes, struct pn_err *err)
{
	PGresult *res = (PQexec)(conn, sql.text);	/* checked where sql was made */
	char   *buf = NULL;
	int	n;
	bool	ok = true;

	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		set_pq_error(err, "copy failed", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	PQclear(res);
	while ((n = PQgetCopyData(conn, &buf, 0)) > 0) {
		if (ok && fwrite(buf, 1, (size_t)n, f) != (size_t)n) {
			pn_err_set(err, "could not write the archive: %s", strerror(errno));
			ok = false;	/* keep reading: the connection must get back in sync */
		}
		*bytes += n;
		PQfreemem(buf);
		buf = NULL;
	}
	if (n == -2) {
		set_pq_error(err, "copy failed", PQerrorMessage(conn));
		return false;
	}
	while ((res = PQgetResult(conn)) != NULL) {
		if (ok && PQresultStatus(res) != PGRES_COMMAND_OK) {
			set_pq_error(err, "copy failed", PQresultErrorMessage(res));
			ok = false;
		}
		PQclear(res);
	}
	return ok;
}

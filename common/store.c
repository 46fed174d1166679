/*
 * store.c: the PostgreSQL store (libpq).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "arena.h"
#include "log.h"
#include "pqhosts.h"
#include "sql.h"		/* <libpq-fe.h>, SQL text only as literals */
#include "store.h"

/*
 * The ingest statements, each written once as a table from which both the
 * SQL text and the values handed to libpq are made: a parameter cannot be
 * added to the one and not the other.
 *
 * X(n, name, cast, kind, when, value): parameter $n is the function's
 * argument p_<name> (sql/functions.sql), written "$n<cast>" in the call.
 * kind says how value, an expression over `a` (struct ingest_args), is
 * passed: text (a const char *, NULL: SQL NULL), i64 (an int64_t, in
 * decimal; negative: NULL), boolean (a bool: "true"/"false"), bytes (a
 * struct bytes, in binary format).  When `when` is false the parameter is
 * NULL whatever value says.  n is the row's position, checked at compile
 * time (PARAM_ASSERT); tests/unit/check_store.c checks the text against the
 * table and the names against sql/functions.sql.
 */
#define INGEST_PARAMS(X) \
	X(1,  site,              "",          text,    true,       a->site) \
	X(2,  provider,          "",          text,    true,       a->provider) \
	X(3,  dedup_key,         "",          text,    true,       a->ev->dedup_key) \
	X(4,  event_kind,        "",          text,    true,       pn_kind_name(a->ev->kind)) \
	X(5,  event_type,        "",          text,    true,       a->ev->event_type) \
	X(6,  order_id,          "",          text,    true,       a->ev->order_id) \
	X(7,  psp_txn_id,        "",          text,    true,       a->ev->psp_txn_id) \
	X(8,  psp_event_id,      "",          text,    true,       a->ev->psp_event_id) \
	X(9,  amount_minor,      "::bigint",  i64,     true,       a->ev->amount_minor) \
	X(10, currency,          "",          text,    true,       a->ev->currency) \
	X(11, refund_minor,      "::bigint",  i64,     true,       a->ev->refund_minor) \
	X(12, refund_cumulative, "::boolean", boolean, true,       a->ev->refund_cumulative) \
	X(13, psp_time,          "",          text,    true,       a->ev->psp_time) \
	X(14, key_id,            "",          text,    true,       a->ev->key_id) \
	X(15, flag,              "",          text,    true,       a->ev->flag) \
	X(16, flag_detail,       "",          text,    true,       a->ev->flag_detail) \
	X(17, raw_headers,       "::jsonb",   text,    true,       a->raw_headers_json) \
	X(18, raw_body,          "::bytea",   bytes,   true,       a->body) \
	X(19, weak_identity,     "::boolean", boolean, true,       a->ev->weak_identity) \
	X(20, source,            "",          text,    true,       a->ev->source) \
	/* a dispute or complaint: its case (sql/functions.sql case_record) */ \
	X(21, case_id,           "",          text,    a->is_case, a->ev->case_id) \
	X(22, case_status,       "",          text,    a->is_case, a->ev->case_status) \
	X(23, case_reason,       "",          text,    a->is_case, a->ev->case_reason) \
	X(24, case_due,          "::bigint",  i64,     a->is_case, a->ev->case_due) \
	X(25, case_time,         "::bigint",  i64,     a->is_case, a->ev->case_time) \
	X(26, case_closed,       "::boolean", boolean, a->is_case, a->ev->case_closed) \
	X(27, case_reopens,      "::boolean", boolean, a->is_case, a->ev->case_reopens)

/* A combine payment: the envelope and every sub-order in one statement
 * (one transaction), sql/functions.sql ingest_combined(). */
#define COMBINED_PARAMS(X) \
	X(1,  site,              "",          text,    true,       a->site) \
	X(2,  provider,          "",          text,    true,       a->provider) \
	X(3,  dedup_key,         "",          text,    true,       a->ev->dedup_key) \
	X(4,  event_type,        "",          text,    true,       a->ev->event_type) \
	X(5,  psp_event_id,      "",          text,    true,       a->ev->psp_event_id) \
	X(6,  psp_time,          "",          text,    true,       a->ev->psp_time) \
	X(7,  key_id,            "",          text,    true,       a->ev->key_id) \
	X(8,  detail,            "",          text,    true,       a->ev->flag_detail) \
	X(9,  raw_headers,       "::jsonb",   text,    true,       a->raw_headers_json) \
	X(10, raw_body,          "::bytea",   bytes,   true,       a->body) \
	X(11, source,            "",          text,    true,       a->ev->source) \
	X(12, subs,              "::jsonb",   text,    true,       a->subs)

/*
 * The columns both statements return for each row (ingest_combined: after
 * its `ord`), read by their COL_<name> (read_result).  C(n, name): the
 * n-th column of the SELECT list, checked like the parameters.
 */
#define RESULT_COLUMNS(C) \
	C(1, notification_id) \
	C(2, outcome) \
	C(3, duplicate) \
	C(4, deliveries) \
	C(5, order_status) \
	C(6, event_id) \
	C(7, wakeup) \
	C(8, detail)

/*
 * The separator before item n of a list: "" before the first, ", " before
 * every other (SQL_FIRST_1 adds an argument, shifting "" into sep's place).
 */
#define SQL_SEP(n) SQL_SEP_(SQL_FIRST_##n, ", ", ~)
#define SQL_SEP_(...) SQL_SEP__(__VA_ARGS__)
#define SQL_SEP__(probe, sep, ...) sep
#define SQL_FIRST_1 ~, "",

#define PARAM_SQL(n, name, cast, kind, when, value) SQL_SEP(n) "$" #n cast
#define COLUMN_SQL(n, name) SQL_SEP(n) #name

#define INGEST_STMT "pn_ingest"
#define INGEST_SQL \
	"SELECT " RESULT_COLUMNS(COLUMN_SQL) " FROM paynotify.ingest(" \
	INGEST_PARAMS(PARAM_SQL) ")"
#define COMBINED_SQL \
	"SELECT ord, " RESULT_COLUMNS(COLUMN_SQL) " FROM paynotify.ingest_combined(" \
	COMBINED_PARAMS(PARAM_SQL) ") ORDER BY ord"

/* INGEST_NPARAMS, COMBINED_NPARAMS, NCOLUMNS and the COL_<name> indexes. */
#define PARAM_ENUM(n, name, cast, kind, when, value) INGEST_P_##name,
enum { INGEST_PARAMS(PARAM_ENUM) INGEST_NPARAMS };
#undef PARAM_ENUM
#define PARAM_ENUM(n, name, cast, kind, when, value) COMBINED_P_##name,
enum { COMBINED_PARAMS(PARAM_ENUM) COMBINED_NPARAMS };
#undef PARAM_ENUM
#define COLUMN_ENUM(n, name) COL_##name,
enum { RESULT_COLUMNS(COLUMN_ENUM) NCOLUMNS };
#undef COLUMN_ENUM

/* Each row's n is its position: "$n" in the text is values[n - 1]. */
#define PARAM_ASSERT_INGEST(n, name, cast, kind, when, value) \
	_Static_assert(INGEST_P_##name == (n) - 1, "ingest parameter " #name " is not $" #n);
#define PARAM_ASSERT_COMBINED(n, name, cast, kind, when, value) \
	_Static_assert(COMBINED_P_##name == (n) - 1, "ingest_combined parameter " #name \
		       " is not $" #n);
#define COLUMN_ASSERT(n, name) \
	_Static_assert(COL_##name == (n) - 1, "result column " #name " is not column " #n);
INGEST_PARAMS(PARAM_ASSERT_INGEST)
COMBINED_PARAMS(PARAM_ASSERT_COMBINED)
RESULT_COLUMNS(COLUMN_ASSERT)

#define MAX_NPARAMS \
	((int)INGEST_NPARAMS > (int)COMBINED_NPARAMS ? (int)INGEST_NPARAMS : (int)COMBINED_NPARAMS)

/* The text and the names of both statements, for tests/unit/check_store.c. */
#define PARAM_INFO(n, name, cast, kind, when, value) {#name, cast},
#define COLUMN_INFO(n, name) #name,
static const struct pn_store_param ingest_params_info[] = {INGEST_PARAMS(PARAM_INFO)};
static const struct pn_store_param combined_params_info[] = {COMBINED_PARAMS(PARAM_INFO)};
static const char *const columns_info[] = {RESULT_COLUMNS(COLUMN_INFO)};
#undef PARAM_INFO
#undef COLUMN_INFO
static const struct pn_store_stmt ingest_stmt_info = {
	.sql = INGEST_SQL, .params = ingest_params_info, .nparams = INGEST_NPARAMS,
	.columns = columns_info, .ncolumns = NCOLUMNS,
};
static const struct pn_store_stmt combined_stmt_info = {
	.sql = COMBINED_SQL, .params = combined_params_info, .nparams = COMBINED_NPARAMS,
	.columns = columns_info, .ncolumns = NCOLUMNS, .first_column = 1,
};

/* The wake-up: its own statement, after the answer (README "Event feed");
 * prepared with the ingest statement, so that a new notification costs the
 * server no parse and plan of it (docs/PERFORMANCE.md, round 3). */
/* The settings of our ingest statements: on the session (prepared
 * statements) or local to each ingest's transaction (exec_unnamed). */
#define SESSION_SQL(local) \
	"SELECT set_config('statement_timeout', $1, " #local "), " \
	"set_config('paynotify.async_duplicates', 'on', " #local ")"
#define WAKEUP_STMT "pn_wakeup"
#define WAKEUP_SQL "SELECT pg_notify('paynotify', $1)"

struct pn_store {
	PGconn *conn;
	char   *conninfo;
	char	timeout_ms[24];
	char	connect_timeout[24];
	char   *application_name;
	bool	prepared;		/* the named statement exists on this connection */
	bool	use_prepared;		/* [database] prepared_statements */
	bool	warned;			/* a WARNING arrived during the statement */
	char  **wakeups;		/* payloads of the last ingest's wake-ups */
	size_t	nwakeups;
	char   *detail;		/* the last ingest's detail, or NULL */
	/*
	 * A multi-host conninfo: the host the next connection tries first
	 * (pn_pqhosts.h).  After a host failed, the next connection starts at
	 * the host after it, so a pooler that accepts connections for a dead
	 * or read-only server is not chosen again first.
	 */
	struct pn_pqhosts *hosts;	/* NULL: one host */
	size_t	first;
	int	at;			/* the host of the connection (-1: unknown) */
	bool	host_failed;		/* connect_db: connected, then the session failed */
};

static void disconnect(struct pn_store *s);

static void
clear_wakeups(struct pn_store *s)
{
	size_t	i;

	for (i = 0; i < s->nwakeups; i++)
		free(s->wakeups[i]);
	free(s->wakeups);
	s->wakeups = NULL;
	s->nwakeups = 0;
}

static void
add_wakeup(struct pn_store *s, const char *payload)
{
	s->wakeups = pn_xrealloc(s->wakeups, (s->nwakeups + 1) * sizeof(*s->wakeups));
	s->wakeups[s->nwakeups++] = pn_xstrdup(payload);
}

struct pn_store *
pn_store_new(const char *conninfo, int64_t statement_timeout_ms, int64_t connect_timeout_s,
	     const char *application_name)
{
	struct pn_store *s = pn_xcalloc(1, sizeof(*s));

	s->conninfo = pn_xstrdup(conninfo ? conninfo : "");
	snprintf(s->timeout_ms, sizeof(s->timeout_ms), "%lld", (long long)statement_timeout_ms);
	snprintf(s->connect_timeout, sizeof(s->connect_timeout), "%lld",
		 (long long)connect_timeout_s);
	s->application_name = pn_xstrdup(application_name);
	s->use_prepared = true;
	s->hosts = pn_pqhosts_new(s->conninfo);
	s->at = -1;
	return s;
}

void
pn_store_set_prepared(struct pn_store *s, bool on)
{
	if (s->use_prepared != on)
		disconnect(s);
	s->use_prepared = on;
}

void
pn_store_free(struct pn_store *s)
{
	if (s == NULL)
		return;
	if (s->conn)
		PQfinish(s->conn);
	free(s->conninfo);
	free(s->application_name);
	pn_pqhosts_free(s->hosts);
	clear_wakeups(s);
	free(s->detail);
	free(s);
}

static void
disconnect(struct pn_store *s)
{
	if (s->conn)
		PQfinish(s->conn);
	s->conn = NULL;
	s->prepared = false;
}

/* First line of a libpq message, without the trailing newline. */
static void
set_pq_error(struct pn_err *err, const char *what, const char *msg)
{
	size_t n = strcspn(msg, "\n");

	pn_err_set(err, "%s: %.*s", what, (int)n, msg);
}

/*
 * Server notices go to our log, one line, instead of libpq's raw stderr.
 * A WARNING also marks the statement in flight: the one PostgreSQL sends
 * while committing is "canceling wait for synchronous replication ... The
 * transaction has already committed locally, but might not have been
 * replicated to the standby" (someone cancelled the backend while it waited
 * for the synchronous standby), and the commit is then reported as a
 * success.  ingest() raises no warnings of its own, so any WARNING makes
 * the outcome not certain (see pn_store_ingest).
 */
static void
notice_to_log(void *arg, const PGresult *res)
{
	struct pn_store *s = arg;
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorMessage(res);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	enum pn_log_level level;

	if (sev && strcmp(sev, "WARNING") == 0)
		s->warned = true;
	/* PostgreSQL's own severity: WARNING a warning, NOTICE/INFO/LOG info. */
	level = sev && strcmp(sev, "WARNING") == 0 ? PN_LOG_WARNING
		: sev && strcmp(sev, "DEBUG") == 0 ? PN_LOG_DEBUG : PN_LOG_INFO;
	if (detail)
		pn_log(level, "database notice: %.*s (%.*s)", (int)strcspn(msg, "\n"), msg,
		       (int)strcspn(detail, "\n"), detail);
	else
		pn_log(level, "database notice: %.*s", (int)strcspn(msg, "\n"), msg);
}

/* Was the failure a lost connection (worth one retry on a new one)? */
static bool
connection_lost(const struct pn_store *s)
{
	return s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK;
}

/*
 * Is this server, or this session, unusable for writes although the
 * connection is up?  The statement failed, so nothing was committed, and
 * only a new connection can help: a read-only server (a standby, or a
 * primary demoted under us: 25006 read_only_sql_transaction), a server
 * shutting down or starting (57P0x: admin_shutdown, crash_shutdown,
 * cannot_connect_now, idle_session_timeout), a broken link (class 08).
 * With a multi-host conninfo the new connection starts at the next host
 * (drop_host); libpq, with target_session_attrs=read-write, also skips the
 * servers that say they are read-only at startup.  A pooler in front of a
 * node answers the startup itself (pgbouncer: with the parameters it
 * cached, never refreshed after a promotion), so through poolers only this
 * error tells (docs/DEPLOYMENT.md "Failover through poolers").
 */
static bool
session_unusable(const char *sqlstate)
{
	if (sqlstate == NULL)
		return false;
	return strcmp(sqlstate, "25006") == 0 || strncmp(sqlstate, "57P0", 4) == 0
	    || strncmp(sqlstate, "08", 2) == 0;
}

/*
 * The host of the connection failed (the connection broke, or its session
 * cannot write, or a pooler there could not reach its server): drop the
 * connection and start the next one at the host after it.  Returns that
 * host's name for the log line, or NULL (one host).
 */
static const char *
drop_host(struct pn_store *s)
{
	disconnect(s);
	if (s->hosts == NULL)
		return NULL;
	s->first = (s->at >= 0 ? (size_t)s->at + 1 : s->first + 1) % pn_pqhosts_count(s->hosts);
	s->at = -1;
	return pn_pqhosts_name(s->hosts, s->first);
}

/* One session set-up statement's result: true if it has status want; else
 * err says what failed and the connection is dropped (host_failed: a
 * reason to start the next one at the next host).  Clears res. */
static bool
session_step(struct pn_store *s, PGresult *res, ExecStatusType want, const char *what,
	     struct pn_err *err)
{
	bool	ok = PQresultStatus(res) == want;

	if (!ok) {
		set_pq_error(err, what, PQerrorMessage(s->conn));
		s->host_failed = session_unusable(PQresultErrorField(res, PG_DIAG_SQLSTATE))
			|| connection_lost(s);
		disconnect(s);
	}
	PQclear(res);
	return ok;
}

static bool
connect_db(struct pn_store *s, struct pn_err *err)
{
	/* Our fallbacks come first: whatever the connection string sets wins. */
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	const char *vals[] = {s->application_name, s->connect_timeout, s->conninfo, NULL};
	const char *timeout;
	PGresult *res;

	disconnect(s);
	s->host_failed = false;
	s->at = -1;
	if (s->hosts != NULL) {
		const char *const *hkeys, *const *hvals;

		/* the same fallbacks first, then the conninfo's own parameters */
		pn_pqhosts_params(s->hosts, s->first, keys, vals, 2, &hkeys, &hvals);
		s->conn = PQconnectdbParams(hkeys, hvals, 0);
	} else
		s->conn = PQconnectdbParams(keys, vals, 1);
	if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
		set_pq_error(err, "could not connect to the database",
			     s->conn ? PQerrorMessage(s->conn) : "out of memory");
		disconnect(s);
		return false;
	}
	PQsetNoticeReceiver(s->conn, notice_to_log, s);
	if (s->hosts != NULL)
		s->at = pn_pqhosts_find(s->hosts, PQhost(s->conn), PQport(s->conn));
	/*
	 * Without prepared statements (a transaction pooler) nothing may
	 * depend on the server session: the timeout goes with each ingest
	 * (exec_unnamed) and the statement is parsed each time.
	 */
	if (!s->use_prepared)
		return true;
	/*
	 * Session settings (is_local false: SET), so that they also work
	 * through a session pooler; the value as a parameter, as for
	 * exec_unnamed.  paynotify.async_duplicates: ingest() may commit a
	 * re-delivery without waiting for its flush (sql/functions.sql): every
	 * ingest of ours is its transaction's only statement.
	 */
	timeout = s->timeout_ms;
	if (!session_step(s, PQexecParams(s->conn, SESSION_SQL(false), 1, NULL, &timeout, NULL,
					  NULL, 0),
			  PGRES_TUPLES_OK, "could not set statement_timeout", err))
		return false;
	res = PQprepare(s->conn, INGEST_STMT, INGEST_SQL, INGEST_NPARAMS, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		if (st && strcmp(st, "42P05") == 0)	/* duplicate_prepared_statement */
			set_pq_error(err, "could not prepare the ingest statement (this server "
				     "session already has one: a transaction pooler? set [database] "
				     "prepared_statements = off)", PQerrorMessage(s->conn));
		else
			set_pq_error(err, "could not prepare the ingest statement (is the schema "
				     "loaded? run `paynotify migrate`)", PQerrorMessage(s->conn));
		s->host_failed = session_unusable(st) || connection_lost(s);
		PQclear(res);
		disconnect(s);
		return false;
	}
	PQclear(res);
	if (!session_step(s, PQprepare(s->conn, WAKEUP_STMT, WAKEUP_SQL, 1, NULL),
			  PGRES_COMMAND_OK, "could not prepare the wake-up statement", err))
		return false;
	s->prepared = true;
	return true;
}

static bool
ensure_connected(struct pn_store *s, struct pn_err *err)
{
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK
	    && (s->prepared || !s->use_prepared))
		return true;
	return connect_db(s, err);
}

static const char *
i64_param(char *buf, size_t sz, int64_t v)
{
	if (v < 0)
		return NULL;
	snprintf(buf, sz, "%" PRId64, v);
	return buf;
}

/* The bytes of a binary parameter. */
struct bytes {
	const unsigned char *data;
	size_t	len;
};

/* What the values of INGEST_PARAMS and COMBINED_PARAMS are taken from (a->). */
struct ingest_args {
	const char *site;
	const char *provider;
	const struct pn_event *ev;	/* canonical */
	const char *raw_headers_json;
	struct bytes body;		/* as it arrived */
	bool	is_case;		/* ingest: a dispute or complaint with its case id */
	const char *subs;		/* ingest_combined: the sub-orders, as jsonb */
};

/* One statement's parameters as libpq takes them. */
struct params {
	const char *values[MAX_NPARAMS];
	int	lengths[MAX_NPARAMS];	/* binary parameters only */
	int	formats[MAX_NPARAMS];	/* 0 text, 1 binary */
	char	num[MAX_NPARAMS][24];	/* the i64 parameters' text */
};

/* Parameter i of each kind (INGEST_PARAMS); NULL unless when. */
static void
param_text(struct params *p, int i, bool when, const char *v)
{
	p->values[i] = when ? v : NULL;
}

static void
param_i64(struct params *p, int i, bool when, int64_t v)
{
	p->values[i] = when ? i64_param(p->num[i], sizeof(p->num[i]), v) : NULL;
}

static void
param_boolean(struct params *p, int i, bool when, bool v)
{
	p->values[i] = when ? (v ? "true" : "false") : NULL;
}

static void
param_bytes(struct params *p, int i, bool when, struct bytes v)
{
	p->values[i] = when ? (const char *)v.data : NULL;
	p->lengths[i] = (int)v.len;
	p->formats[i] = 1;
}

#define PARAM_SET(n, name, cast, kind, when, value) param_##kind(p, (n) - 1, (when), (value));

/* The values of paynotify.ingest()'s parameters, from INGEST_PARAMS. */
static void
ingest_params(const struct ingest_args *a, struct params *p)
{
	memset(p, 0, sizeof(*p));
	INGEST_PARAMS(PARAM_SET)
}

/* The values of paynotify.ingest_combined()'s parameters, from COMBINED_PARAMS. */
static void
combined_params(const struct ingest_args *a, struct params *p)
{
	memset(p, 0, sizeof(*p));
	COMBINED_PARAMS(PARAM_SET)
}

#undef PARAM_SET

/* Send the ingest statement; the result, or NULL.  Success (PGRES_TUPLES_OK)
 * is only returned once the server said ReadyForQuery, i.e. after the
 * commit: a connection lost before that is an error result. */
static PGresult *
exec_unnamed(struct pn_store *s, bool combined, const struct params *p)
{
	const char *tvals[1] = {s->timeout_ms};
	PGresult *res, *out = NULL, *err = NULL;
	int	nresults = 0;

	/*
	 * One round trip, one implicit transaction: set_config(..., true) is
	 * local to the transaction that the pipeline's single Sync ends, so
	 * the ingest statement runs under our statement_timeout and nothing
	 * stays behind on a pooled server connection.  The commit happens at
	 * the Sync: only a PGRES_PIPELINE_SYNC proves it.
	 */
	if (!PQenterPipelineMode(s->conn))
		return NULL;
	if (!PQsendQueryParams(s->conn, SESSION_SQL(true), 1, NULL, tvals, NULL, NULL, 0)
	    || !(combined ? PQsendQueryParams(s->conn, COMBINED_SQL, COMBINED_NPARAMS, NULL,
					      p->values, p->lengths, p->formats, 0)
		 : PQsendQueryParams(s->conn, INGEST_SQL, INGEST_NPARAMS, NULL, p->values,
				     p->lengths, p->formats, 0))
	    || !PQpipelineSync(s->conn))
		goto done;
	for (;;) {
		res = PQgetResult(s->conn);
		if (res == NULL) {
			/* end of one query's results; a dead connection ends here too */
			if (connection_lost(s))
				break;
			continue;
		}
		switch (PQresultStatus(res)) {
		case PGRES_PIPELINE_SYNC:
			PQclear(res);
			goto synced;
		case PGRES_TUPLES_OK:
			nresults++;
			if (nresults == 2) {
				PQclear(out);
				out = res;
			} else
				PQclear(res);
			break;
		default:
			if (err == NULL)
				err = res;
			else
				PQclear(res);
			if (connection_lost(s))
				goto done;
			break;
		}
	}
	goto done;
synced:
	if (err == NULL && out != NULL) {
		(void)PQexitPipelineMode(s->conn);
		return out;
	}
done:
	PQclear(out);
	if (connection_lost(s)) {
		/* PQexitPipelineMode refuses a broken connection; it is dropped anyway */
		return err;
	}
	if (!PQexitPipelineMode(s->conn)) {
		PQclear(err);
		disconnect(s);
		return NULL;
	}
	return err;
}

/*
 * Run one ingest statement (ingest, or ingest_combined when combined) with
 * the reasoned retry below; the result (PGRES_TUPLES_OK, at least one row),
 * or NULL with err set when nothing is known to be committed.
 */
static PGresult *
run_ingest(struct pn_store *s, bool combined, const struct params *p, struct pn_err *err)
{
	int	attempt;
	bool	unusable, host_level;
	const char *sqlstate, *next;

	for (attempt = 0; attempt < 2; attempt++) {
		PGresult *res;

		if (!ensure_connected(s, err)) {
			/* connected, then the session failed: the next host may do */
			next = s->host_failed ? drop_host(s) : NULL;
			if (attempt == 0 && next != NULL) {
				pn_log(PN_LOG_WARNING, "%s; retrying once on a new connection, from "
				       "database host %s", err->msg, next);
				continue;
			}
			break;
		}
		s->warned = false;
		if (s->use_prepared && !combined)
			res = PQexecPrepared(s->conn, INGEST_STMT, INGEST_NPARAMS, p->values,
					     p->lengths, p->formats, 0);
		else if (s->use_prepared)
			/* rare (a combine payment): unnamed, under the session's timeout */
			res = PQexecParams(s->conn, COMBINED_SQL, COMBINED_NPARAMS, NULL, p->values,
					   p->lengths, p->formats, 0);
		else
			res = exec_unnamed(s, combined, p);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) >= 1 && s->warned) {
			/*
			 * Committed, but PostgreSQL warned while it did (see
			 * notice_to_log): the synchronous standby may not have
			 * it.  Not a success to pass on.  The same retry as for a
			 * lost connection: its own commit comes later in the WAL,
			 * so once the standby confirms it, it has the first one
			 * too; the retry counts a duplicate delivery.
			 */
			PQclear(res);
			pn_err_set(err, "could not store notification: the database warned during the "
				   "commit (outcome not certain: not acknowledged)");
			if (attempt == 0)
				pn_log(PN_LOG_WARNING, "%s; retrying once", err->msg);
			continue;
		}
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) >= 1)
			return res;
		set_pq_error(err, "could not store notification", res && PQresultErrorMessage(res)[0]
			     ? PQresultErrorMessage(res)
			     : s->conn ? PQerrorMessage(s->conn) : "connection lost");
		sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		unusable = session_unusable(sqlstate);
		host_level = unusable || connection_lost(s);
		if (sqlstate && strcmp(sqlstate, "26000") == 0 && s->use_prepared && !combined) {
			/*
			 * Our named statement is not on the server session we
			 * reached: a transaction (or statement) pooler hands out
			 * server connections per transaction.  The statement did
			 * not run; re-prepare once on a new connection, and say
			 * what to configure.
			 */
			pn_log(PN_LOG_ERROR, "the prepared ingest statement is missing on this server "
			       "session (a transaction pooler?): set [database] prepared_statements = "
			       "off");
			unusable = true;
		}
		PQclear(res);
		/*
		 * A lost connection is an unknown outcome: the statement may or
		 * may not have committed (the connection can break after the
		 * commit record and before ReadyForQuery).  Nothing is answered
		 * from it.  It is retried once on a new connection, and only
		 * that retry's own, complete result decides: if the first
		 * attempt committed, the retry finds the stored event and
		 * counts a duplicate delivery (proof of the commit, on the
		 * server we can now reach); if it did not, the retry applies
		 * it.  Either way the success ack then follows a commit we saw.
		 * If the retry fails too, the caller answers "retry later" and
		 * the provider's own retry resolves it the same way.
		 *
		 * A read-only or shutting-down server (see session_unusable)
		 * failed the statement, so nothing committed: the same one
		 * retry on a new connection, which finds the new primary.
		 * Anything else (timeout, constraint) fails on this connection.
		 *
		 * With several hosts, a failure of the host (not the missing
		 * prepared statement) makes the new connection start at the next
		 * host: a pooler in front of a dead or read-only server accepts
		 * the connection itself, so libpq alone would pick it again.
		 */
		if (!connection_lost(s) && !unusable)
			break;
		next = host_level ? drop_host(s) : NULL;
		disconnect(s);
		if (attempt == 0)
			pn_log(PN_LOG_WARNING, "%s; retrying once on a new connection%s%s", err->msg,
			       next ? ", from database host " : "", next ? next : "");
	}
	return NULL;
}

/* Row `row` of an ingest result whose RESULT_COLUMNS start at column first
 * (ingest_combined: after its ord), each read by its name; the callers copy
 * the detail (COL_detail) where it has to live. */
static void
read_result(struct pn_store *s, PGresult *res, int row, int first, struct pn_ingest_result *out)
{
#define VALUE(c) PQgetvalue(res, row, first + COL_##c)
#define ISNULL(c) PQgetisnull(res, row, first + COL_##c)
	int64_t id = 0;
	const char *v;

	memset(out, 0, sizeof(*out));
	if (!pn_parse_i64(VALUE(notification_id), &id))
		id = 0;
	out->notification_id = id;
	snprintf(out->outcome, sizeof(out->outcome), "%s", VALUE(outcome));
	out->duplicate = strcmp(VALUE(duplicate), "t") == 0;
	out->deliveries = atoi(VALUE(deliveries));
	v = ISNULL(order_status) ? "" : VALUE(order_status);
	snprintf(out->order_status, sizeof(out->order_status), "%s", v);
	if (ISNULL(event_id) || !pn_parse_i64(VALUE(event_id), &out->event_id))
		out->event_id = 0;
	if (!ISNULL(wakeup))
		add_wakeup(s, VALUE(wakeup));
	out->wakeup = !ISNULL(wakeup);
#undef VALUE
#undef ISNULL
}

/* A dispute or complaint with its case id: ingest() records its case. */
static bool
event_is_case(const struct pn_event *ev)
{
	return (ev->kind == PN_KIND_DISPUTE || ev->kind == PN_KIND_COMPLAINT) && ev->case_id != NULL;
}

static void
reset_last(struct pn_store *s)
{
	clear_wakeups(s);
	free(s->detail);
	s->detail = NULL;
}

bool
pn_store_ingest(struct pn_store *s, const char *site, const char *provider,
		const struct pn_event *ev, const char *raw_headers_json,
		const unsigned char *body, size_t body_len, struct pn_ingest_result *out,
		struct pn_err *err)
{
	struct params p;
	struct pn_event canon;
	struct pn_arena *ca = NULL;
	PGresult *res;

	/*
	 * Only canonical events are stored (pn_event_canonicalise: text that is
	 * not valid UTF-8 escaped, as PostgreSQL would refuse it on every retry).
	 * This is the one place every source's events pass (the receivers, a
	 * query answer, a statement line): a copy of an event that is not
	 * canonical is canonicalised here; valid text is only checked, never
	 * copied.  Replay re-derives with the same step before it compares.
	 */
	if (!pn_event_is_canonical(ev)) {
		canon = *ev;
		canon.subs = NULL;	/* a single event: its sub-orders are not stored here */
		canon.nsubs = 0;
		ca = pn_arena_new();
		pn_event_canonicalise(&canon, ca);
		ev = &canon;
	}
	ingest_params(&(const struct ingest_args){
			.site = site, .provider = provider, .ev = ev,
			.raw_headers_json = raw_headers_json,
			.body = {.data = body, .len = body_len},
			.is_case = event_is_case(ev),
		}, &p);

	memset(out, 0, sizeof(*out));
	reset_last(s);
	res = run_ingest(s, false, &p, err);
	pn_arena_free(ca);
	if (res == NULL)
		return false;
	/* ingest() returns one row of RESULT_COLUMNS (INGEST_SQL) */
	read_result(s, res, 0, 0, out);
	if (!PQgetisnull(res, 0, COL_detail))
		s->detail = pn_xstrdup(PQgetvalue(res, 0, COL_detail));
	out->detail = s->detail;
	PQclear(res);
	return true;
}

/* jansson's string of v, or JSON null (v is canonical: valid UTF-8). */
static json_t *
jstr_or_null(const char *v)
{
	json_t *j = v ? json_string(v) : NULL;

	return j ? j : json_null();
}

/* The sub-orders as the jsonb array ingest_combined() reads. */
static char *
subs_json(const char *site, const struct pn_event *ev)
{
	json_t *arr = json_array();
	char   *out;
	size_t	i;

	for (i = 0; i < ev->nsubs; i++) {
		const struct pn_event *e = &ev->subs[i];
		json_t *o = json_object();

		json_object_set_new(o, "site", jstr_or_null(e->site ? e->site : site));
		json_object_set_new(o, "dedup_key", jstr_or_null(e->dedup_key));
		json_object_set_new(o, "event_kind", jstr_or_null(pn_kind_name(e->kind)));
		json_object_set_new(o, "event_type", jstr_or_null(e->event_type));
		json_object_set_new(o, "order_id", jstr_or_null(e->order_id));
		json_object_set_new(o, "psp_txn_id", jstr_or_null(e->psp_txn_id));
		json_object_set_new(o, "psp_event_id", jstr_or_null(e->psp_event_id));
		json_object_set_new(o, "amount_minor", e->amount_minor >= 0
				    ? json_integer(e->amount_minor) : json_null());
		json_object_set_new(o, "currency", jstr_or_null(e->currency));
		json_object_set_new(o, "refund_minor", e->refund_minor >= 0
				    ? json_integer(e->refund_minor) : json_null());
		json_object_set_new(o, "refund_cumulative", json_boolean(e->refund_cumulative));
		json_object_set_new(o, "psp_time", jstr_or_null(e->psp_time));
		json_object_set_new(o, "key_id", jstr_or_null(e->key_id));
		json_object_set_new(o, "flag", jstr_or_null(e->flag));
		json_object_set_new(o, "flag_detail", jstr_or_null(e->flag_detail));
		json_object_set_new(o, "weak_identity", json_boolean(e->weak_identity));
		/* ingest()'s p_case_* (absent: NULL), as pn_store_ingest passes them */
		if (event_is_case(e)) {
			json_object_set_new(o, "case_id", jstr_or_null(e->case_id));
			json_object_set_new(o, "case_status", jstr_or_null(e->case_status));
			json_object_set_new(o, "case_reason", jstr_or_null(e->case_reason));
			json_object_set_new(o, "case_due", e->case_due >= 0
					    ? json_integer(e->case_due) : json_null());
			json_object_set_new(o, "case_time", e->case_time >= 0
					    ? json_integer(e->case_time) : json_null());
			json_object_set_new(o, "case_closed", json_boolean(e->case_closed));
			json_object_set_new(o, "case_reopens", json_boolean(e->case_reopens));
		}
		json_array_append_new(arr, o);
	}
	out = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return out;
}

bool
pn_store_ingest_combined(struct pn_store *s, const char *site, const char *provider,
			 const struct pn_event *ev, const char *raw_headers_json,
			 const unsigned char *body, size_t body_len, struct pn_arena *a,
			 struct pn_ingest_result *out, struct pn_err *err)
{
	struct params p;
	struct pn_event canon;
	struct pn_arena *ca = NULL;
	char   *subs = NULL;
	PGresult *res;
	size_t	i;
	int	row;

	if (!pn_event_is_canonical(ev)) {
		/* a deep copy: the caller's event and sub-orders stay as they are */
		canon = *ev;
		ca = pn_arena_new();
		canon.subs = pn_arena_alloc(ca, ev->nsubs * sizeof(*canon.subs));
		memcpy(canon.subs, ev->subs, ev->nsubs * sizeof(*canon.subs));
		pn_event_canonicalise(&canon, ca);
		ev = &canon;
	}
	subs = subs_json(site, ev);
	combined_params(&(const struct ingest_args){
			.site = site, .provider = provider, .ev = ev,
			.raw_headers_json = raw_headers_json,
			.body = {.data = body, .len = body_len},
			.subs = subs,
		}, &p);

	for (i = 0; i <= ev->nsubs; i++)
		memset(&out[i], 0, sizeof(out[i]));
	reset_last(s);
	res = subs ? run_ingest(s, true, &p, err) : NULL;
	if (subs == NULL)
		pn_err_set(err, "could not store notification: its sub-orders cannot be encoded");
	free(subs);
	pn_arena_free(ca);
	if (res == NULL)
		return false;
	if ((size_t)PQntuples(res) != ev->nsubs + 1) {
		pn_err_set(err, "could not store notification: ingest_combined returned %d rows for "
			   "%zu sub-orders", PQntuples(res), ev->nsubs);
		PQclear(res);
		return false;	/* committed, but not as asked: never acknowledged */
	}
	for (row = 0; row < PQntuples(res); row++) {
		/* ord, then RESULT_COLUMNS (COMBINED_SQL) */
		read_result(s, res, row, 1, &out[row]);
		out[row].detail = PQgetisnull(res, row, 1 + COL_detail) ? NULL
		    : pn_arena_strdup(a, PQgetvalue(res, row, 1 + COL_detail));
	}
	PQclear(res);
	return true;
}

bool
pn_store_send_wakeup(struct pn_store *s, struct pn_err *err)
{
	const char *values[1];
	PGresult *res;
	bool	ok = true;
	size_t	i;

	/*
	 * No retry and no reconnect: the wake-up is a hint to listeners, the
	 * feed row committed with the payment is what counts.  Its own
	 * transaction holds the NOTIFY queue lock only for itself, and writes
	 * no WAL to wait for.  A combine payment has one per sub-order applied.
	 */
	for (i = 0; i < s->nwakeups && ok; i++) {
		values[0] = s->wakeups[i];
		if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
			pn_err_set(err, "wake-up not sent: no database connection");
			ok = false;
			break;
		}
		res = s->use_prepared && s->prepared
		    ? PQexecPrepared(s->conn, WAKEUP_STMT, 1, values, NULL, NULL, 0)
		    : PQexecParams(s->conn, WAKEUP_SQL, 1, NULL, values, NULL, NULL, 0);
		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		if (!ok)
			set_pq_error(err, "wake-up not sent", PQresultErrorMessage(res)[0]
				     ? PQresultErrorMessage(res) : PQerrorMessage(s->conn));
		PQclear(res);
	}
	clear_wakeups(s);
	return ok;
}

bool
pn_store_ping(struct pn_store *s, struct pn_err *err)
{
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		PGresult *res;

		if (!ensure_connected(s, err)) {
			if (attempt == 0 && s->host_failed && drop_host(s) != NULL)
				continue;
			return false;
		}
		res = PQexec(s->conn, "SELECT 1");
		if (PQresultStatus(res) == PGRES_TUPLES_OK) {
			PQclear(res);
			return true;
		}
		set_pq_error(err, "database ping failed", PQerrorMessage(s->conn));
		PQclear(res);
		if (!connection_lost(s))
			return false;
		(void)drop_host(s);
	}
	return false;
}

const struct pn_store_stmt *
pn_store_stmt(bool combined)
{
	return combined ? &combined_stmt_info : &ingest_stmt_info;
}

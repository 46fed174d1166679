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

#define INGEST_STMT "pn_ingest"
#define INGEST_SQL \
	"SELECT notification_id, outcome, duplicate, deliveries, order_status, event_id, " \
	"wakeup, detail FROM paynotify.ingest($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10, " \
	"$11::bigint, $12::boolean, $13, $14, $15, $16, $17::jsonb, $18::bytea, " \
	"$19::boolean, $20, $21, $22, $23, $24::bigint, $25::bigint, $26::boolean, $27::boolean)"
#define INGEST_NPARAMS 27

/* A combine payment: the envelope and every sub-order in one statement
 * (one transaction), sql/functions.sql ingest_combined(). */
#define COMBINED_SQL \
	"SELECT ord, notification_id, outcome, duplicate, deliveries, order_status, event_id, " \
	"wakeup, detail FROM paynotify.ingest_combined($1, $2, $3, $4, $5, $6, $7, $8, " \
	"$9::jsonb, $10::bytea, $11, $12::jsonb) ORDER BY ord"
#define COMBINED_NPARAMS 12

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

/* Send the ingest statement; the result, or NULL.  Success (PGRES_TUPLES_OK)
 * is only returned once the server said ReadyForQuery, i.e. after the
 * commit: a connection lost before that is an error result. */
static PGresult *
exec_unnamed(struct pn_store *s, bool combined, const char *const *values, const int *lengths,
	     const int *formats)
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
	    || !(combined ? PQsendQueryParams(s->conn, COMBINED_SQL, COMBINED_NPARAMS, NULL, values,
					      lengths, formats, 0)
		 : PQsendQueryParams(s->conn, INGEST_SQL, INGEST_NPARAMS, NULL, values, lengths,
				     formats, 0))
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

static const char *
i64_param(char *buf, size_t sz, int64_t v)
{
	if (v < 0)
		return NULL;
	snprintf(buf, sz, "%" PRId64, v);
	return buf;
}

/*
 * Run one ingest statement (ingest, or ingest_combined when combined) with
 * the reasoned retry below; the result (PGRES_TUPLES_OK, at least one row),
 * or NULL with err set when nothing is known to be committed.
 */
static PGresult *
run_ingest(struct pn_store *s, bool combined, const char *const *values, const int *lengths,
	   const int *formats, struct pn_err *err)
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
			res = PQexecPrepared(s->conn, INGEST_STMT, INGEST_NPARAMS, values, lengths,
					     formats, 0);
		else if (s->use_prepared)
			/* rare (a combine payment): unnamed, under the session's timeout */
			res = PQexecParams(s->conn, COMBINED_SQL, COMBINED_NPARAMS, NULL, values,
					   lengths, formats, 0);
		else
			res = exec_unnamed(s, combined, values, lengths, formats);
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

/* Row `row` of an ingest result, columns from `col` on: notification_id,
 * outcome, duplicate, deliveries, order_status, event_id, wakeup, detail. */
static void
read_result(struct pn_store *s, PGresult *res, int row, int col, struct pn_ingest_result *out)
{
	int64_t id = 0;
	const char *v;

	memset(out, 0, sizeof(*out));
	if (!pn_parse_i64(PQgetvalue(res, row, col), &id))
		id = 0;
	out->notification_id = id;
	snprintf(out->outcome, sizeof(out->outcome), "%s", PQgetvalue(res, row, col + 1));
	out->duplicate = strcmp(PQgetvalue(res, row, col + 2), "t") == 0;
	out->deliveries = atoi(PQgetvalue(res, row, col + 3));
	v = PQgetisnull(res, row, col + 4) ? "" : PQgetvalue(res, row, col + 4);
	snprintf(out->order_status, sizeof(out->order_status), "%s", v);
	if (PQgetisnull(res, row, col + 5) || !pn_parse_i64(PQgetvalue(res, row, col + 5),
							     &out->event_id))
		out->event_id = 0;
	if (!PQgetisnull(res, row, col + 6))
		add_wakeup(s, PQgetvalue(res, row, col + 6));
	out->wakeup = !PQgetisnull(res, row, col + 6);
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
	char	amount[24], refund[24], due[24], ctime[24];
	bool	is_case;
	const char *values[INGEST_NPARAMS];
	int	lengths[INGEST_NPARAMS] = {0};
	int	formats[INGEST_NPARAMS] = {0};
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
	values[0] = site;
	values[1] = provider;
	values[2] = ev->dedup_key;
	values[3] = pn_kind_name(ev->kind);
	values[4] = ev->event_type;
	values[5] = ev->order_id;
	values[6] = ev->psp_txn_id;
	values[7] = ev->psp_event_id;
	values[8] = i64_param(amount, sizeof(amount), ev->amount_minor);
	values[9] = ev->currency;
	values[10] = i64_param(refund, sizeof(refund), ev->refund_minor);
	values[11] = ev->refund_cumulative ? "true" : "false";
	values[12] = ev->psp_time;
	values[13] = ev->key_id;
	values[14] = ev->flag;
	values[15] = ev->flag_detail;
	values[16] = raw_headers_json;
	values[17] = (const char *)body;	/* binary: bytes as they arrived */
	lengths[17] = (int)body_len;
	formats[17] = 1;
	values[18] = ev->weak_identity ? "true" : "false";
	values[19] = ev->source;		/* NULL: "notification" */
	/* a dispute or complaint: its case (sql/functions.sql case_record) */
	is_case = event_is_case(ev);
	values[20] = is_case ? ev->case_id : NULL;
	values[21] = is_case ? ev->case_status : NULL;
	values[22] = is_case ? ev->case_reason : NULL;
	values[23] = is_case ? i64_param(due, sizeof(due), ev->case_due) : NULL;
	values[24] = is_case ? i64_param(ctime, sizeof(ctime), ev->case_time) : NULL;
	values[25] = is_case ? (ev->case_closed ? "true" : "false") : NULL;
	values[26] = is_case ? (ev->case_reopens ? "true" : "false") : NULL;

	memset(out, 0, sizeof(*out));
	reset_last(s);
	res = run_ingest(s, false, values, lengths, formats, err);
	pn_arena_free(ca);
	if (res == NULL)
		return false;
	/* ingest() returns: id, outcome, duplicate, deliveries, order_status, event_id,
	 * wakeup, detail (INGEST_SQL) */
	read_result(s, res, 0, 0, out);
	if (!PQgetisnull(res, 0, 7))
		s->detail = pn_xstrdup(PQgetvalue(res, 0, 7));
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
	const char *values[COMBINED_NPARAMS];
	int	lengths[COMBINED_NPARAMS] = {0};
	int	formats[COMBINED_NPARAMS] = {0};
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
	values[0] = site;
	values[1] = provider;
	values[2] = ev->dedup_key;
	values[3] = ev->event_type;
	values[4] = ev->psp_event_id;
	values[5] = ev->psp_time;
	values[6] = ev->key_id;
	values[7] = ev->flag_detail;
	values[8] = raw_headers_json;
	values[9] = (const char *)body;
	lengths[9] = (int)body_len;
	formats[9] = 1;
	values[10] = ev->source;
	values[11] = subs;

	for (i = 0; i <= ev->nsubs; i++)
		memset(&out[i], 0, sizeof(out[i]));
	reset_last(s);
	res = subs ? run_ingest(s, true, values, lengths, formats, err) : NULL;
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
		read_result(s, res, row, 1, &out[row]);
		out[row].detail = PQgetisnull(res, row, 8) ? NULL
		    : pn_arena_strdup(a, PQgetvalue(res, row, 8));
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

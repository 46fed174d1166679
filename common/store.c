/*
 * store.c: the PostgreSQL store (libpq).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "store.h"

#define INGEST_STMT "pn_ingest"
#define INGEST_SQL \
	"SELECT notification_id, outcome, duplicate, deliveries, order_status, event_id, " \
	"wakeup FROM paynotify.ingest($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10, " \
	"$11::bigint, $12::boolean, $13, $14, $15, $16, $17::jsonb, $18::bytea, " \
	"$19::boolean, $20)"
#define INGEST_NPARAMS 20
#define INGEST_NTEXT 16		/* parameters 0..15 are text that may need escaping */

/* The wake-up: its own statement, after the answer (README "Event feed"). */
#define WAKEUP_SQL "SELECT pg_notify('paynotify', $1)"

struct pn_store {
	PGconn *conn;
	char   *conninfo;
	char	timeout_ms[24];
	char	connect_timeout[24];
	char   *application_name;
	bool	prepared;
	char   *wakeup;		/* payload of the last ingest's wake-up, or NULL */
};

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
	return s;
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
	free(s->wakeup);
	free(s);
}

bool
pn_store_connected(const struct pn_store *s)
{
	return s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK;
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

static bool
connect_db(struct pn_store *s, struct pn_err *err)
{
	/* Our fallbacks come first: whatever the connection string sets wins. */
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	const char *vals[] = {s->application_name, s->connect_timeout, s->conninfo, NULL};
	char	sql[64];
	PGresult *res;

	disconnect(s);
	s->conn = PQconnectdbParams(keys, vals, 1);
	if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
		set_pq_error(err, "could not connect to the database",
			     s->conn ? PQerrorMessage(s->conn) : "out of memory");
		disconnect(s);
		return false;
	}
	/* A session setting, so that it also works through a session pooler. */
	snprintf(sql, sizeof(sql), "SET statement_timeout = %s", s->timeout_ms);
	res = PQexec(s->conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		set_pq_error(err, "could not set statement_timeout", PQerrorMessage(s->conn));
		PQclear(res);
		disconnect(s);
		return false;
	}
	PQclear(res);
	res = PQprepare(s->conn, INGEST_STMT, INGEST_SQL, INGEST_NPARAMS, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		set_pq_error(err, "could not prepare the ingest statement (is the schema loaded? "
			     "run `paynotify migrate`)", PQerrorMessage(s->conn));
		PQclear(res);
		disconnect(s);
		return false;
	}
	PQclear(res);
	s->prepared = true;
	return true;
}

static bool
ensure_connected(struct pn_store *s, struct pn_err *err)
{
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK && s->prepared)
		return true;
	return connect_db(s, err);
}

/* Was the failure a lost connection (worth one retry on a new one)? */
static bool
connection_lost(const struct pn_store *s)
{
	return s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK;
}

static const char *
i64_param(char *buf, size_t sz, int64_t v)
{
	if (v < 0)
		return NULL;
	snprintf(buf, sz, "%" PRId64, v);
	return buf;
}

bool
pn_store_ingest(struct pn_store *s, const char *site, const char *provider,
		const struct pn_event *ev, const char *raw_headers_json,
		const unsigned char *body, size_t body_len, struct pn_ingest_result *out,
		struct pn_err *err)
{
	char	amount[24], refund[24];
	const char *values[INGEST_NPARAMS];
	int	lengths[INGEST_NPARAMS] = {0};
	int	formats[INGEST_NPARAMS] = {0};
	char   *escaped[INGEST_NPARAMS] = {NULL};
	const char *orig[INGEST_NPARAMS];
	int	attempt, i;
	bool	ok;

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

	/*
	 * PostgreSQL refuses text that is not valid UTF-8, and would refuse it
	 * on every retry: a genuine notification whose ids carry other bytes
	 * (Alipay charset=gbk) would never be stored.  Such text is escaped
	 * (\xNN, deterministically, so dedup keys stay stable); the raw body
	 * keeps every byte.
	 */
	for (i = 0; i < INGEST_NTEXT; i++) {
		orig[i] = values[i];
		escaped[i] = values[i] ? pn_utf8_escape(values[i]) : NULL;
		values[i] = escaped[i];
	}
	memset(out, 0, sizeof(*out));
	free(s->wakeup);
	s->wakeup = NULL;
	ok = false;
	for (attempt = 0; attempt < 2 && !ok; attempt++) {
		PGresult *res;
		const char *v;

		if (!ensure_connected(s, err))
			break;
		res = PQexecPrepared(s->conn, INGEST_STMT, INGEST_NPARAMS, values, lengths,
				     formats, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
			int64_t id = 0;

			if (!pn_parse_i64(PQgetvalue(res, 0, 0), &id))
				id = 0;
			out->notification_id = id;
			snprintf(out->outcome, sizeof(out->outcome), "%s", PQgetvalue(res, 0, 1));
			out->duplicate = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
			out->deliveries = atoi(PQgetvalue(res, 0, 3));
			v = PQgetisnull(res, 0, 4) ? "" : PQgetvalue(res, 0, 4);
			snprintf(out->order_status, sizeof(out->order_status), "%s", v);
			if (PQgetisnull(res, 0, 5) || !pn_parse_i64(PQgetvalue(res, 0, 5),
								   &out->event_id))
				out->event_id = 0;
			if (!PQgetisnull(res, 0, 6))
				s->wakeup = pn_xstrdup(PQgetvalue(res, 0, 6));
			out->wakeup = s->wakeup != NULL;
			PQclear(res);
			ok = true;
			break;
		}
		set_pq_error(err, "could not store notification", PQresultErrorMessage(res)[0]
			     ? PQresultErrorMessage(res) : PQerrorMessage(s->conn));
		PQclear(res);
		/*
		 * A lost connection is retried once on a new one: if the first
		 * attempt did commit, the retry finds the event and counts a
		 * duplicate delivery, which is exactly what the provider's own
		 * retry would do.  Anything else (timeout, constraint) fails.
		 */
		if (!connection_lost(s))
			break;
		disconnect(s);
	}
	for (i = 0; i < INGEST_NTEXT; i++)
		if (escaped[i] != orig[i])
			free(escaped[i]);
	return ok;
}

bool
pn_store_send_wakeup(struct pn_store *s, struct pn_err *err)
{
	const char *values[1];
	PGresult *res;
	bool	ok;

	if (s->wakeup == NULL)
		return true;
	values[0] = s->wakeup;
	/*
	 * No retry and no reconnect: the wake-up is a hint to listeners, the
	 * feed row committed with the payment is what counts.  Its own
	 * transaction holds the NOTIFY queue lock only for itself, and writes
	 * no WAL to wait for.
	 */
	if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
		pn_err_set(err, "wake-up not sent: no database connection");
		ok = false;
	} else {
		res = PQexecParams(s->conn, WAKEUP_SQL, 1, NULL, values, NULL, NULL, 0);
		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		if (!ok)
			set_pq_error(err, "wake-up not sent", PQresultErrorMessage(res)[0]
				     ? PQresultErrorMessage(res) : PQerrorMessage(s->conn));
		PQclear(res);
	}
	free(s->wakeup);
	s->wakeup = NULL;
	return ok;
}

bool
pn_store_ping(struct pn_store *s, struct pn_err *err)
{
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		PGresult *res;

		if (!ensure_connected(s, err))
			return false;
		res = PQexec(s->conn, "SELECT 1");
		if (PQresultStatus(res) == PGRES_TUPLES_OK) {
			PQclear(res);
			return true;
		}
		set_pq_error(err, "database ping failed", PQerrorMessage(s->conn));
		PQclear(res);
		if (!connection_lost(s))
			return false;
		disconnect(s);
	}
	return false;
}

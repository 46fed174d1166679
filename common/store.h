/*
 * store.h: the PostgreSQL store.  One persistent connection per process,
 * re-established on failure; every value goes through parameters of a
 * prepared statement; PGresult never leaves this module.
 *
 * Ingest is one round trip: SELECT * FROM paynotify.ingest(...) runs the
 * dedup, the order transition and the feed event in one transaction (see
 * sql/functions.sql).  A false return means nothing is known to be
 * committed: the receiver must answer the provider's failure form.
 *
 * The LISTEN wake-up is not part of that transaction: ingest returns its
 * payload, and the receiver calls pn_store_send_wakeup() once the answer
 * is written (README "Event feed").
 */
#ifndef PN_STORE_H
#define PN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "event.h"
#include "util.h"

struct pn_store;

struct pn_ingest_result {
	int64_t	notification_id;
	char	outcome[32];		/* applied, already_applied, unknown_order, ... */
	bool	duplicate;		/* the event was stored before: delivery counted */
	int	deliveries;
	char	order_status[32];	/* after this event; "" for duplicates, flagged events
					 * and unknown orders (the order is not read) */
	int64_t	event_id;		/* feed event written (0: none) */
	bool	wakeup;			/* a wake-up is pending: pn_store_send_wakeup() */
	const char *detail;		/* why (the row's outcome_detail), or NULL; owned by the
					 * store, valid until its next ingest */
};

/* Never fails: connects lazily.  conninfo is a libpq connection string
 * (PGHOST, PGPORT, ... fill what it leaves out).  With several hosts, a
 * connection that broke or whose session could not write makes the next
 * one start at the host after it (common/pqhosts.h). */
struct pn_store *pn_store_new(const char *conninfo, int64_t statement_timeout_ms,
			      int64_t connect_timeout_s, const char *application_name);
void pn_store_free(struct pn_store *s);		/* NULL-safe */

/* [database] prepared_statements: on (default) prepares ingest once per
 * connection and sets statement_timeout for the session; off sends it
 * unnamed with the timeout local to its transaction (transaction pooler). */
void pn_store_set_prepared(struct pn_store *s, bool on);

bool pn_store_ingest(struct pn_store *s, const char *site, const char *provider,
		     const struct pn_event *ev, const char *raw_headers_json,
		     const unsigned char *body, size_t body_len,
		     struct pn_ingest_result *out, struct pn_err *err) PN_WUR;

/*
 * A combine payment (ev->nsubs > 0): the envelope (ev, with the raw bytes;
 * stored once, outcome "combined", never applied) and every sub-order
 * (ev->subs[i], under its own site, ev->subs[i].site or site), in ONE
 * transaction: sql/functions.sql ingest_combined().  out has 1 + nsubs
 * entries: out[0] the envelope, out[1 + i] sub-order i; their details are
 * copied into a.  False: nothing is known to be committed.
 */
bool pn_store_ingest_combined(struct pn_store *s, const char *site, const char *provider,
			      const struct pn_event *ev, const char *raw_headers_json,
			      const unsigned char *body, size_t body_len, struct pn_arena *a,
			      struct pn_ingest_result *out, struct pn_err *err) PN_WUR;

/*
 * Send the wake-up of the last ingest, if any (SELECT pg_notify(...) as its
 * own statement).  Call after the answer is written.  Best effort: false
 * (err set) when it could not be sent; never retried.
 */
bool pn_store_send_wakeup(struct pn_store *s, struct pn_err *err) PN_WUR;

/* SELECT 1 (health check); connects if needed. */
bool pn_store_ping(struct pn_store *s, struct pn_err *err) PN_WUR;

/*
 * What an ingest statement is made of, from the one table in store.c that
 * both writes its SQL text and fills its values (ingest_combined when
 * combined): tests/unit/check_store.c checks the text against it and the
 * names against sql/functions.sql.  Static; never freed.
 */
struct pn_store_param {
	const char *name;		/* the function's argument, without its p_ */
	const char *cast;		/* "::bigint", ..., or "" */
};

struct pn_store_stmt {
	const char *sql;		/* as sent: SELECT ... FROM paynotify.ingest($1, ...) */
	const struct pn_store_param *params;	/* $1 first */
	size_t	nparams;
	const char *const *columns;	/* the result columns read by name, in order */
	size_t	ncolumns;
	int	first_column;		/* columns before them (ingest_combined: ord) */
};

const struct pn_store_stmt *pn_store_stmt(bool combined);

#endif

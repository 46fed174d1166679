/*
 * reconcile.h: what the parts of `paynotify reconcile` share (internal to
 * the command; docs/RECONCILE.md):
 *   cmd_reconcile.c       the command: options, checks, the run's steps, loading
 *   bill_fetch.c          --fetch: the Alipay and WeChat Pay bill downloads
 *   reconcile_byquery.c   --by-query: 2C2P's paymentInquiry answers as statement rows
 *   reconcile_compare.c   the comparison, the discrepancy classes, --apply, the summary
 *   statement_<provider>.c  the statement parsers (statement.h)
 */
#ifndef PN_RECONCILE_H
#define PN_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "admin.h"
#include "arena.h"
#include "query.h"
#include "statement.h"
#include "store.h"
#include "strmap.h"

#define CUTOFF_NEAR_S                                                                              \
	900 /* "paid here, not in the statement" within 15 min after the day's                     \
	     * start: probably on the previous day's statement; within 15 min                      \
	     * before its end: perhaps on the next day's */

/* What a line of the report says. */
enum cls {
	K_MATCHED,                 /* statement and here agree */
	K_MISSING_PAYMENT,         /* paid at the provider, not here: a lost notification */
	K_MISSING_REFUND,          /* refunded at the provider, not here */
	K_NOT_IN_STATEMENT,        /* paid here, absent from the statement */
	K_REFUND_NOT_IN_STATEMENT, /* refunded here that day, absent from the statement */
	K_AMOUNT_MISMATCH,         /* the amounts differ */
	K_CURRENCY_MISMATCH,       /* the currencies differ */
	K_STATUS_MISMATCH,         /* --by-query: paid here, the provider says pending,
	                            * failed or cancelled */
	K_REFUND_TOTAL_MISMATCH,   /* the statement's refunds exceed what was paid, or a
	                            * refund is stored but did not move the order */
	K_DUPLICATE_PAYMENT,       /* two provider transactions for one order */
	K_UNKNOWN_ORDER,           /* the statement names an order we do not have */
	K_DISPUTE,                 /* a chargeback (Stripe) */
	K_FEE,                     /* a fee of its own: counted in the totals */
	K_OTHER,                   /* payouts, revoked trades...: listed, not compared */
	NCLS
};

struct order {
	const char *order_id, *currency, *status, *psp, *psp_txn_id;
	int64_t amount, refunded, paid_at; /* paid_at: -1 when never paid */
	bool stmt_paid;                    /* a statement payment row names it */
	const char *stmt_txn;              /* that row's transaction */
	int64_t stmt_refunds;              /* statement refunds seen so far */
	int64_t refunded_now;              /* refunded here, after our own applies */
	bool by_statement;                 /* paid by a statement row (an earlier run) */
};

struct notif {
	const char *dedup_key, *event_kind, *order_id, *outcome, *source;
	int64_t received;
};

struct totals {
	char cur[4];
	int nrows, npay, nref;
	int nfee, nnet; /* rows that give a fee, a net amount */
	int64_t pay, ref, fee, net;
	int nabsent; /* orders paid here that day, not on the statement */
	int64_t absent;
};

struct run {
	const struct pn_stmt_adapter *ad;
	const struct pn_site *site;
	struct pn_config *cfg;
	struct pn_arena *a;
	struct pn_statement st;
	const char *path;
	const char *day;
	int64_t from, to; /* the day, Unix seconds, [from, to) */
	bool apply;
	PGconn *conn;
	struct pn_store *store;
	struct order *orders;
	size_t norders;
	struct pn_strmap by_order, by_txn, by_key, stmt_keys, refunded_orders;
	struct notif *notifs;
	size_t nnotifs;
	struct pn_table out;
	int count[NCLS];
	int human, applied, errors;
	struct totals *tot; /* one per currency, in the order first seen (arena) */
	size_t ntot, captot;
	/* --by-query: what was asked and answered, in the order asked */
	bool by_query;
	struct byq *byq;
	size_t nbyq;
	const char *row_order; /* the order a row names when it has no order here */
	char *data;            /* the statement file as read (malloc) */
	size_t len;
};

/* One inquiry of --by-query and its verified answer (arena). */
struct byq {
	const char *order_id;
	struct pn_query_answer ans;
	bool row; /* a paid answer: a payment row of r->st, compared as one */
};

/* ---- reconcile_compare.c ---- */

/* Compare every statement row (and --by-query answer) with what load()
 * found, apply with --apply, and add the report's rows to r->out. */
void pn_rec_compare(struct run *r);
/* The one summary line (counts per class, totals per currency) on f. */
void pn_rec_summary(struct run *r, FILE *f);
/* Both identities an Alipay refund may carry (part or whole refunded); one for the rest. */
void pn_rec_refund_keys(struct run *r, const struct pn_stmt_txn *t, const char **k1,
                        const char **k2);
/* j as compact JSON in r->a; j is released. */
const char *pn_rec_dumps(struct run *r, json_t *j);

/* ---- bill_fetch.c ---- */

/* What both --fetch paths hold: the query module's credentials and client. */
struct pn_rec_fetch {
	const struct pn_query_provider *qp;
	void   *creds;
	struct pn_qhttp http;
	struct pn_query_ctx ctx;	/* ctx.http points at http: f stays put */
};

/* Load qp's credentials for r->site (those of `paynotify query`) and set up
 * the HTTP client for a bill-sized answer; pn_rec_fetch_close() when true. */
bool pn_rec_fetch_open(struct run *r, const struct pn_query_provider *qp,
                       struct pn_rec_fetch *f, struct pn_err *err);
void pn_rec_fetch_close(struct pn_rec_fetch *f);
/* The day's (r->day) bill downloaded into path. */
bool pn_rec_fetch_alipay(struct run *r, const char *path, struct pn_err *err);
bool pn_rec_fetch_wechatpay(struct run *r, const char *path, struct pn_err *err);

/* ---- reconcile_byquery.c ---- */

#define BYQ_MAX_DEFAULT 1000
#define BYQ_RATE_DEFAULT 5

/* The adapter of --by-query's rows (2C2P's day: UTC+7; no parse). */
extern const struct pn_stmt_adapter pn_rec_byq_2c2p;
/* Ask 2C2P about the day's candidates; paid answers become rows of r->st. */
bool pn_rec_byq_ask(struct run *r, int64_t max, int64_t rate, struct pn_err *err);

#endif

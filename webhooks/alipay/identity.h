/*
 * alipay/identity.h: the identity of an Alipay trade event, written once
 * (issue 27).  The receiver (webhooks/alipay.c, a notification's form
 * fields), `paynotify query` (admin/query_alipay.c, an alipay.trade.query
 * answer) and `paynotify reconcile` (admin/statement_alipay.c, a row of
 * the business detail bill) each fill a struct pn_alipay_fact from what
 * they have and call pn_alipay_identity(): the same payment or refund
 * seen any of the three ways gets the same dedup key, kind and amounts,
 * so whichever arrives second is a duplicate, never a second application.
 */
#ifndef PN_ALIPAY_IDENTITY_H
#define PN_ALIPAY_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "event.h"
#include "util.h"

/* What a trade event says about itself (strings as Alipay writes them). */
struct pn_alipay_fact {
	const char *trade_no;		/* Alipay's trade id; NULL when absent */
	const char *out_trade_no;	/* the seller's order id (required) */
	const char *trade_status;	/* TRADE_SUCCESS, TRADE_FINISHED, TRADE_CLOSED,
					 * WAIT_BUYER_PAY, ... (required) */
	bool	refund;			/* a refund's notification (out_biz_no, refund_fee
					 * or gmt_refund present) */
	const char *out_biz_no;		/* refunds: the refund's request id, or NULL */
	const char *refund_fee;		/* refunds: the running total refunded, or NULL */
	const char *notify_id;		/* refunds without both: notify_id, or NULL */
	const char *sign;		/* ... and without notify_id either: the sign */
	const char *trans_currency;	/* NULL or empty: CNY (pn_alipay_currency) */
	const char *total_amount;	/* the trade's amount in trans_currency, or NULL */
	/*
	 * A bill row has its amounts in fen already (CNY): minor_known, and
	 * total_minor (-1: not known) and refund_total_minor (refunds: the
	 * running total refunded) instead of the three text fields above.
	 */
	bool	minor_known;
	int64_t	total_minor;
	int64_t	refund_total_minor;
};

/* How the amounts read: each caller words its own flag from this. */
struct pn_alipay_amounts {
	bool	currency_ok;		/* trans_currency known; else no amount is read */
	bool	total_ok;		/* total_amount present and read */
	bool	refund_ok;		/* refunds: refund_fee present and read */
	struct pn_err total_err;	/* total_amount present but unreadable: why */
	struct pn_err refund_err;	/* refund_fee present but unreadable: why */
};

/*
 * Fills out's event_type (trade_status), order_id, psp_txn_id, dedup_key,
 * kind, refund_cumulative, currency (NULL when unknown), amount_minor (-1
 * when unknown currency or unreadable total_amount; untouched when
 * total_amount is absent) and, for a refund, refund_minor; *am says how the
 * amounts read (minor_known: all read).  Sets no flag.  Everything new
 * lives in a.
 */
void pn_alipay_identity(struct pn_arena *a, const struct pn_alipay_fact *in,
			struct pn_event *out, struct pn_alipay_amounts *am);

/*
 * A trade complaint's dedup key (交易投诉, a case, never applied to an order):
 * a message about it (the receiver: message the notify_id, else the
 * message's time or sign; status NULL), "complaint:<id>:changed:<message>",
 * or its state as `paynotify query --complaints` reads it (message NULL),
 * "complaint:<id>:state:<status>:<trade_no or ->".  Two messages, or two
 * asks finding the same state, are one event; a message and an answer never
 * are (the message says only "changed").  In a.
 */
const char *pn_alipay_complaint_key(struct pn_arena *a, const char *complaint_id,
				    const char *message, const char *status,
				    const char *trade_no);

#endif

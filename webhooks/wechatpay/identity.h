/*
 * wechatpay/identity.h: the identity of a WeChat Pay payment or refund,
 * API v3 and v2, written once (issue 27).  The receiver
 * (webhooks/wechatpay_v3.c, wechatpay_v2.c: a decrypted resource, a
 * combine sub-order, a signed XML result), `paynotify query`
 * (admin/query_wechatpay.c: an order query's answer, through the
 * receiver's code or directly) and `paynotify reconcile`
 * (admin/statement_wechatpay.c: a trade bill row) fill a struct
 * pn_wechatpay_fact and call pn_wechatpay_identity().
 */
#ifndef PN_WECHATPAY_IDENTITY_H
#define PN_WECHATPAY_IDENTITY_H

#include <stdbool.h>

#include "arena.h"
#include "event.h"

/* The key of the signed content, for an event no provider id names ("noid:..."). */
typedef const char *(*pn_wechatpay_content_key_fn)(struct pn_arena *a, void *arg);

struct pn_wechatpay_fact {
	bool	v2;			/* API v2's words (XML results); else API v3's */
	bool	refund;			/* a refund result; else a payment-like resource */
	const char *event_type;		/* v3: the notification's event_type, or "QUERY" (an
					 * order query's answer that is not a payment);
					 * v2: unused (v2.pay.<result_code>, v2.refund.<status>) */
	const char *state;		/* v3: trade_state / refund_status; v2: result_code /
					 * refund_status */
	const char *transaction_id, *out_trade_no;	/* non-empty or NULL */
	const char *refund_id, *out_refund_no;		/* refunds: non-empty or NULL */
	const char *event_id;		/* v3: the notification's id, or NULL */
	bool	other_product;		/* v2: a contract change (contract_code): not money */
	bool	sub_order;		/* v2: a combine payment's sub-order (its event_type
					 * and kind stay the caller's result_code's) */
	pn_wechatpay_content_key_fn content_key;	/* NULL only where an id is sure
							 * (a query answer, a bill row) */
	void   *content_arg;
};

/*
 * Fills out's dedup_key (not yet bounded: pn_wechatpay_bound_key), kind,
 * event_type (v2 only) and refund_cumulative; *missing_id is NULL or the
 * detail of the missing_id flag the caller sets (pn_wechatpay_flag_missing_id)
 * when no id names the event and its content keys it.  Amounts stay with
 * the callers (each reads its own form of them).  Sets no flag.
 */
void pn_wechatpay_identity(struct pn_arena *a, const struct pn_wechatpay_fact *in,
			   struct pn_event *out, const char **missing_id);

/*
 * A complaint's dedup key (消费者投诉 2.0, a case, never applied): a
 * COMPLAINT.* notification's action (the receiver; state NULL),
 * "complaint:<id>:<action or ->", or its state as `paynotify query
 * --complaints` reads it (action NULL), "complaint:<id>:state:<state>:
 * <transaction_id or ->".  In a.
 */
const char *pn_wechatpay_complaint_key(struct pn_arena *a, const char *complaint_id,
				       const char *action, const char *state,
				       const char *transaction_id);

/* An API v3 trade_state that is not a payment: pending, closed, failed or ignored. */
enum pn_kind pn_wechatpay_trade_state_kind(const char *state);

#endif

/*
 * wechatpay/identity.c: the identity of a WeChat Pay payment or refund
 * (wechatpay/identity.h).
 */
#include "config.h"

#include <string.h>

#include "util.h"
#include "wechatpay/identity.h"

static bool
same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* The signed content's key; only an event that may lack every id needs one. */
static const char *
content_key(struct pn_arena *a, const struct pn_wechatpay_fact *in)
{
	if (in->content_key == NULL)
		pn_fatal("a WeChat Pay event without any id and no content to key it by");
	return in->content_key(a, in->content_arg);
}

enum pn_kind
pn_wechatpay_trade_state_kind(const char *state)
{
	if (same(state, "NOTPAY") || same(state, "USERPAYING"))
		return PN_KIND_PENDING;
	if (same(state, "CLOSED") || same(state, "REVOKED"))
		return PN_KIND_CLOSED;
	if (same(state, "PAYERROR"))
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;	/* REFUND (refunds have their own events), unknown */
}

/*
 * API v3, a payment-like resource (a transaction, a combine sub-order, a
 * query answer): "<transaction_id>:<event_type>" (a non-SUCCESS state
 * appended, so that a later SUCCESS is not swallowed).  Without a
 * transaction_id, a state that is not a payment falls back to the seller's
 * out_trade_no ("otn:", as before), then the notification's id ("event:");
 * a payment without one, or anything with no id at all, is keyed by its
 * signed content and flagged missing_id: a placeholder would make a second,
 * different payment look like a retry of the first.
 */
static void
v3_payment(struct pn_arena *a, const struct pn_wechatpay_fact *in, struct pn_event *out,
	   const char **missing_id)
{
	const char *base = in->transaction_id, *state = in->state;

	if (same(in->event_type, "TRANSACTION.SUCCESS") && same(state, "SUCCESS"))
		out->kind = PN_KIND_PAID;
	else
		out->kind = pn_wechatpay_trade_state_kind(state);
	if (base == NULL && out->kind != PN_KIND_PAID)
		base = in->out_trade_no ? pn_arena_printf(a, "otn:%s", in->out_trade_no)
		    : in->event_id ? pn_arena_printf(a, "event:%s", in->event_id) : NULL;
	if (base == NULL) {
		out->dedup_key = content_key(a, in);
		*missing_id = out->kind == PN_KIND_PAID
		    ? "a payment without transaction_id: keyed by its signed content, not applied"
		    : "no transaction_id, out_trade_no or notification id: keyed by its signed "
		      "content, not applied";
		return;
	}
	out->dedup_key = state == NULL || same(state, "SUCCESS")
	    ? pn_arena_printf(a, "%s:%s", base, in->event_type)
	    : pn_arena_printf(a, "%s:%s:%s", base, in->event_type, state);
}

/* API v3, a refund: "refund:<refund_id, out:<out_refund_no> or event:<id>>:<event_type>". */
static void
v3_refund(struct pn_arena *a, const struct pn_wechatpay_fact *in, struct pn_event *out,
	  const char **missing_id)
{
	const char *base = in->refund_id ? in->refund_id
	    : in->out_refund_no ? pn_arena_printf(a, "out:%s", in->out_refund_no)
	    : in->event_id ? pn_arena_printf(a, "event:%s", in->event_id) : NULL;

	if (base != NULL)
		out->dedup_key = pn_arena_printf(a, "refund:%s:%s", base, in->event_type);
	else {
		out->dedup_key = content_key(a, in);
		*missing_id = "a refund without refund_id, out_refund_no or notification id: "
		    "keyed by its signed content, not applied";
	}
	/* ABNORMAL and CLOSED: the receiver records them for a person (refund_failed) */
	if (same(in->event_type, "REFUND.SUCCESS") && same(in->state, "SUCCESS")) {
		out->kind = PN_KIND_REFUND;
		out->refund_cumulative = false;	/* amount.refund is this refund alone */
	}
}

/*
 * API v2, a payment result: "<transaction_id>:<result_code>"; a result
 * that is not a payment falls back to the seller's out_trade_no ("otn:").
 * A payment without transaction_id, or anything with neither id, is keyed
 * by its signed content: the placeholder "-" this once was made every such
 * notification (a combine payment's: issue 22) a duplicate of the first.
 * Flagged missing_id (for a person: it may be money), except a contract
 * change (another product's, no money here).  A combine payment's
 * sub-order has the key a single v2 payment of its transaction has; one
 * without any id keeps its result_code's kind (flagged missing_id: never
 * applied).
 */
static void
v2_payment(struct pn_arena *a, const struct pn_wechatpay_fact *in, struct pn_event *out,
	   const char **missing_id)
{
	const char *result = in->state, *txn = in->transaction_id, *otn = in->out_trade_no;
	const char *base;

	if (!in->sub_order)
		out->event_type = pn_arena_printf(a, "v2.pay.%s", result ? result : "-");
	out->kind = same(result, "SUCCESS") ? PN_KIND_PAID
	    : same(result, "FAIL") ? PN_KIND_FAILED : PN_KIND_IGNORED;
	if (txn == NULL && otn == NULL && !in->sub_order)
		out->kind = PN_KIND_IGNORED;	/* not a payment result (the caller types it) */
	base = txn ? txn : otn && out->kind != PN_KIND_PAID ? pn_arena_printf(a, "otn:%s", otn)
	    : NULL;
	if (base != NULL) {
		out->dedup_key = pn_arena_printf(a, "%s:%s", base, result ? result : "-");
		return;
	}
	out->dedup_key = content_key(a, in);
	if (in->sub_order)
		*missing_id = "a sub-order without transaction_id: keyed by its signed content, "
		    "not applied";
	else if (out->kind == PN_KIND_PAID)
		*missing_id = "a payment without transaction_id: keyed by its signed content, "
		    "not applied";
	else if (!in->other_product)
		*missing_id = "no transaction_id or out_trade_no: keyed by its signed content, "
		    "not applied";
}

/* API v2, a refund result: "refund:<refund_id or out:<out_refund_no>>:<refund_status>". */
static void
v2_refund(struct pn_arena *a, const struct pn_wechatpay_fact *in, struct pn_event *out,
	  const char **missing_id)
{
	const char *status = in->state;
	const char *base = in->refund_id ? in->refund_id
	    : in->out_refund_no ? pn_arena_printf(a, "out:%s", in->out_refund_no) : NULL;

	out->event_type = pn_arena_printf(a, "v2.refund.%s", status ? status : "-");
	if (base != NULL)
		out->dedup_key = pn_arena_printf(a, "refund:%s:%s", base, status ? status : "-");
	else {
		/* the decrypted req_info names it: no "-" shared by every such refund */
		out->dedup_key = content_key(a, in);
		*missing_id = "a refund result without refund_id or out_refund_no: keyed by its "
		    "content, not applied";
	}
	/* CHANGE and REFUNDCLOSE: refunds that did not happen (the receiver flags them) */
	if (same(status, "SUCCESS") || same(status, "CHANGE") || same(status, "REFUNDCLOSE"))
		out->kind = PN_KIND_REFUND;
	if (same(status, "SUCCESS"))
		out->refund_cumulative = false;	/* refund_fee is this refund alone */
}

/*
 * Where the copies this replaces differed (issue 27), kept as they were:
 *   - a v2 order query's answer that is not SUCCESS is keyed as a v3 one,
 *     "<transaction_id or otn:...>:QUERY:<trade_state>" (v2 notifications
 *     have no such states to meet); its own copy said ":QUERY:-" for an
 *     answer without trade_state and took an unknown state for pending,
 *     where this says ":QUERY" and ignored: such answers are "waiting" in
 *     either case and never ingested, and admin/query_wechatpay.c keeps its
 *     v2.query.<state> event type;
 *   - the bill row's keys are not bounded (pn_wechatpay_bound_key) as the
 *     receiver's are: its ids are at most 64 bytes, far below the bound.
 */
void
pn_wechatpay_identity(struct pn_arena *a, const struct pn_wechatpay_fact *in,
		      struct pn_event *out, const char **missing_id)
{
	*missing_id = NULL;
	if (in->v2 && in->refund)
		v2_refund(a, in, out, missing_id);
	else if (in->v2)
		v2_payment(a, in, out, missing_id);
	else if (in->refund)
		v3_refund(a, in, out, missing_id);
	else
		v3_payment(a, in, out, missing_id);
}

const char *
pn_wechatpay_complaint_key(struct pn_arena *a, const char *complaint_id, const char *action,
			   const char *state, const char *transaction_id)
{
	if (state == NULL)
		return pn_arena_printf(a, "complaint:%s:%s", complaint_id, action ? action : "-");
	/* per complaint and state; short enough (ids <= 64) for the key column */
	return pn_arena_printf(a, "complaint:%s:state:%.32s:%.64s", complaint_id, state,
			       transaction_id ? transaction_id : "-");
}

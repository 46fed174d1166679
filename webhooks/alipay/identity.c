/*
 * alipay/identity.c: the identity of an Alipay trade event (alipay/identity.h).
 */
#include "config.h"

#include <string.h>

#include "alipay.h"
#include "alipay/identity.h"
#include "money.h"

static void
key_and_kind(struct pn_arena *a, const struct pn_alipay_fact *in, const char *trade,
	     const char *fee, struct pn_event *out)
{
	const char *status = in->trade_status, *biz = in->out_biz_no;

	if (in->refund) {
		out->kind = PN_KIND_REFUND;
		out->refund_cumulative = true;	/* refund_fee is the total refunded so far */
		out->dedup_key = pn_arena_printf(a, "%s:%s:refund:%s%s", trade, status,
						 biz || fee || !in->notify_id ? "" : "notify:",
						 biz ? biz : fee ? fee
						 : in->notify_id ? in->notify_id : in->sign);
		return;
	}
	out->dedup_key = pn_arena_printf(a, "%s:%s", trade, status);
	if (strcmp(status, "TRADE_SUCCESS") == 0 || strcmp(status, "TRADE_FINISHED") == 0)
		out->kind = PN_KIND_PAID;
	else if (strcmp(status, "TRADE_CLOSED") == 0)
		out->kind = PN_KIND_CLOSED;
	else if (strcmp(status, "WAIT_BUYER_PAY") == 0)
		out->kind = PN_KIND_PENDING;
	else
		out->kind = PN_KIND_IGNORED;
}

/*
 * The dedup key names the event by Alipay's own trade id (trade_no is
 * unique across every merchant of Alipay; out_trade_no is only unique
 * within one seller, and two sellers on one app may both have order 42).
 * Payments and closes: <trade_no>:<trade_status>; refunds add
 * :refund:<out_biz_no or refund_fee>.  Alipay documents trade_no as always
 * present in a trade notification; one without it cannot be keyed by the
 * trade, so it falls back to the seller's order id under the prefix
 * "otn:", deterministic (retries share it) and disjoint from trade_no keys
 * (trade_no is digits only).  A refund without out_biz_no keys on
 * refund_fee (the running total: each refund its own); without both, on
 * notify_id (stable across Alipay's resends), never a "-" that every such
 * refund of the trade would share (issue 22); without notify_id too, on
 * the sign.
 *
 * Kinds: TRADE_SUCCESS and TRADE_FINISHED paid, TRADE_CLOSED closed,
 * WAIT_BUYER_PAY pending, any other status ignored (the receiver flags it
 * unhandled); a refund is a refund whatever its status, its refund_fee the
 * running total (refund_cumulative).
 *
 * Where the three copies this replaces differed (issue 27), kept as they
 * were, none of them changing an outcome:
 *   - the bill has no trade_status: a 交易 row is TRADE_SUCCESS (a
 *     TRADE_FINISHED notification of the same trade is another event, and
 *     the order then says already_applied); a 退款 row is TRADE_CLOSED once
 *     the whole order is refunded, else TRADE_SUCCESS (statement_alipay.c
 *     decides, from the order);
 *   - the bill's refund_fee is the refunded total as paynotify writes it
 *     (pn_money_format, "10.00"), the notification's the text Alipay sent;
 *     it is only in the key when the row has no 退款批次号 (out_biz_no), and
 *     Alipay writes two decimals;
 *   - `query` took WAIT_BUYER_PAY and unknown statuses for "waiting"
 *     without giving them a kind; they are pending / ignored here, and
 *     query still answers waiting and ingests nothing for them.
 */
void
pn_alipay_identity(struct pn_arena *a, const struct pn_alipay_fact *in, struct pn_event *out,
		   struct pn_alipay_amounts *am)
{
	const char *status = in->trade_status;
	const char *trade = in->trade_no != NULL ? in->trade_no
	    : pn_arena_printf(a, "otn:%s", in->out_trade_no);
	const char *fee = in->refund_fee;
	char	fee_text[32];
	int	exp = 2;

	memset(am, 0, sizeof(*am));
	out->event_type = status;
	out->order_id = in->out_trade_no;
	out->psp_txn_id = in->trade_no;
	if (in->minor_known) {
		/* a bill row: CNY, amounts read; the key's refund_fee as Alipay writes it */
		am->currency_ok = am->total_ok = am->refund_ok = true;
		out->currency = "CNY";
		out->amount_minor = in->total_minor;
		if (in->refund) {
			out->refund_minor = in->refund_total_minor;
			pn_money_format(in->refund_total_minor, 2, fee_text, sizeof(fee_text));
			fee = fee_text;
		}
		key_and_kind(a, in, trade, fee, out);
		return;
	}
	/*
	 * total_amount and refund_fee are in trans_currency (标价币种), absent
	 * on a domestic trade: CNY (pn_alipay_currency).  settle_currency /
	 * settle_amount never decide anything.
	 */
	am->currency_ok = pn_alipay_currency(a, in->trans_currency, &out->currency, &exp);
	if (!am->currency_ok)
		out->currency = NULL;
	key_and_kind(a, in, trade, fee, out);
	if (in->refund && am->currency_ok && fee != NULL)
		am->refund_ok = pn_money_parse(fee, exp, &out->refund_minor, &am->refund_err);
	if (!am->currency_ok)
		out->amount_minor = -1;	/* never guessed: no amount in an unknown currency */
	else if (in->total_amount != NULL) {
		am->total_ok = pn_money_parse(in->total_amount, exp, &out->amount_minor,
					      &am->total_err);
		if (!am->total_ok)
			out->amount_minor = -1;
	}
}

const char *
pn_alipay_complaint_key(struct pn_arena *a, const char *complaint_id, const char *message,
			const char *status, const char *trade_no)
{
	if (message != NULL)
		return pn_arena_printf(a, "complaint:%s:changed:%.96s", complaint_id, message);
	/* per complaint and state: asking again about an unchanged complaint is a duplicate */
	return pn_arena_printf(a, "complaint:%s:state:%s:%s", complaint_id, status,
			       trade_no ? trade_no : "-");
}

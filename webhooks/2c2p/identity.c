/*
 * 2c2p/identity.c: the identity of a 2C2P payment result (2c2p/identity.h).
 */
#include "config.h"

#include <string.h>

#include "2c2p/identity.h"

enum pn_kind
pn_2c2p_kind(const char *rc)
{
	if (rc == NULL || strlen(rc) != 4)
		return PN_KIND_IGNORED;
	if (strcmp(rc, "0000") == 0)
		return PN_KIND_PAID;
	if (strcmp(rc, "0001") == 0 || strcmp(rc, "2001") == 0)
		return PN_KIND_PENDING;
	if (strcmp(rc, "0003") == 0)
		return PN_KIND_CLOSED;
	/* 4001-4999 are issuer/host declines; 4000 (card verification) and
	 * 4200 (tokenisation) are successes of flows that charge nothing. */
	if (rc[0] == '4' && rc[1] >= '0' && rc[1] <= '9' && rc[2] >= '0' && rc[2] <= '9'
	    && rc[3] >= '0' && rc[3] <= '9' && strcmp(rc, "4000") != 0 && strcmp(rc, "4200") != 0)
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;
}

/*
 * The legacy redirect API's payment_status (docs 3.2.6 "Payment status
 * response code"): 000 success, 001 pending, 002 rejected, 003 cancelled
 * by the user, 999 failed.  Any other code is recorded, never applied.
 */
enum pn_kind
pn_2c2p_redirect_kind(const char *st)
{
	if (strcmp(st, "000") == 0)
		return PN_KIND_PAID;
	if (strcmp(st, "001") == 0)
		return PN_KIND_PENDING;
	if (strcmp(st, "002") == 0 || strcmp(st, "003") == 0 || strcmp(st, "999") == 0)
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;
}

/*
 * PGW v4: "<invoiceNo>:<respCode>:<tranRef>" (tranRef empty when absent);
 * a payload without invoiceNo or respCode is genuine but not a result we
 * can key: ignored, under the caller's unkeyed key (the receiver: the
 * JWT's signature segment, "jwt:<sig>", which names that exact
 * notification; `query`: "query:<order asked about>").
 * Legacy redirect: "<order_id>:<payment_status>:<hash_value hex>": the
 * signed content names the event, so every re-split of it (the hash does
 * not sign where transaction_ref, approval_code and eci end) is one event.
 *
 * Where the copies differed (issue 27): `query` and `reconcile --by-query`
 * already went through the receiver's pn_2c2p_normalise(), so the v4 key
 * had one writer; only the unkeyed key differs by caller, as above, and a
 * legacy form and a v4 payload of the same payment have different keys by
 * design (the form waits in pending_confirmation for the inquiry, docs/2C2P.md).
 */
void
pn_2c2p_identity(struct pn_arena *a, const struct pn_2c2p_fact *in, struct pn_event *out)
{
	out->event_type = in->code;
	out->order_id = in->invoice_no;
	if (in->redirect) {
		out->kind = pn_2c2p_redirect_kind(in->code);
		out->dedup_key = pn_arena_printf(a, "%s:%s:%s", in->invoice_no, in->code,
						 in->hash_hex);
		return;
	}
	if (in->invoice_no == NULL || in->code == NULL) {
		out->kind = PN_KIND_IGNORED;
		out->dedup_key = in->unkeyed;
		return;
	}
	out->kind = pn_2c2p_kind(in->code);
	out->dedup_key = pn_arena_printf(a, "%s:%s:%s", in->invoice_no, in->code,
					 in->tran_ref ? in->tran_ref : "");
}

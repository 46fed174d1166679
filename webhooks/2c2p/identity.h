/*
 * 2c2p/identity.h: the identity of a 2C2P payment result, written once
 * (issue 27).  The receiver (webhooks/2c2p_jwt.c: a PGW v4 payload;
 * webhooks/2c2p_redirect.c: a legacy redirect form), `paynotify query`
 * (admin/query_2c2p.c: a paymentInquiry answer's payload, through the
 * receiver's pn_2c2p_normalise) and `paynotify reconcile --by-query` (the
 * same answers: 2C2P has no statement file) all come here.
 */
#ifndef PN_2C2P_IDENTITY_H
#define PN_2C2P_IDENTITY_H

#include <stdbool.h>

#include "arena.h"
#include "event.h"

struct pn_2c2p_fact {
	bool	redirect;		/* a legacy redirect form; else a PGW v4 payload */
	const char *invoice_no;		/* v4 invoiceNo; legacy order_id */
	const char *code;		/* v4 respCode; legacy payment_status */
	const char *tran_ref;		/* v4 tranRef, or NULL */
	const char *hash_hex;		/* legacy: the hash_value that matched (hex) */
	const char *unkeyed;		/* v4: the key of a payload without invoiceNo or
					 * respCode (the JWT's signature, the order asked about) */
};

/* Fills out's event_type, order_id, kind and dedup_key.  Sets no flag. */
void pn_2c2p_identity(struct pn_arena *a, const struct pn_2c2p_fact *in, struct pn_event *out);

/* The respCode mapping (4-character codes only). */
enum pn_kind pn_2c2p_kind(const char *resp_code);

/* The legacy payment_status mapping (000 paid, 001 pending, 002/003/999 failed). */
enum pn_kind pn_2c2p_redirect_kind(const char *payment_status);

#endif

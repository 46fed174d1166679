/*
 * adapter.h: what every provider adapter (webhooks/<provider>.c) needs
 * the same way, written once (webhooks/adapter.c): the event flags a
 * verified notification can carry, JSON failure answers, and "try every
 * key, no early exit" for MACs.
 */
#ifndef PN_ADAPTER_H
#define PN_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "arena.h"
#include "cfg.h"
#include "crypto.h"
#include "event.h"
#include "http.h"

/* Stored, acknowledged, never applied: the amount cannot be read exactly. */
void pn_flag_amount(struct pn_event *ev, const char *why);

/*
 * Stored, acknowledged, never applied: field (at most width bytes of got
 * are shown) names another merchant than want, site's own.  The detail
 * reads: field "got" is not site S's "want".
 */
void pn_flag_merchant(struct pn_arena *a, struct pn_event *ev, const char *field, int width,
		      const char *got, const struct pn_site *site, const char *want);

/*
 * Stored, acknowledged, never applied, counted per type (`paynotify stats`,
 * paynotify_events_total) and listed by `paynotify report --unhandled`: a
 * genuine event of a type paynotify has no handling for (docs/PROVIDERS.md
 * "Every event type").  ev->event_type names the type (stored as
 * notifications.event_type).  A flag already set (merchant_mismatch, ...)
 * is kept: it says more.
 */
void pn_flag_unhandled(struct pn_arena *a, struct pn_event *ev, const char *provider);

/*
 * Stored, acknowledged, never applied, on `paynotify report`: a refund
 * result saying the refund did not happen (WeChat Pay refund_status
 * CHANGE/REFUNDCLOSE, REFUND.ABNORMAL/CLOSED); detail says what to do.
 * A flag already set is kept.
 */
void pn_flag_refund_failed(struct pn_event *ev, const char *detail);

/*
 * Several sites on one provider identity (README "Several sites on one
 * provider account"): the configured site other than site, of the same
 * identity for provider p (p->same_identity), whose marker is on the same
 * field and has the value got[0..got_len), or NULL.  cfg NULL: none.
 */
const struct pn_site *pn_marker_sibling(const struct pn_config *cfg, const struct pn_site *site,
					const struct pn_cfg_provider *p, const char *got,
					size_t got_len);

/*
 * The site marker of a verified event: got[0..got_len) is the value of the
 * signed merchant-defined field the site's marker names (got NULL: the
 * field is absent).  Nothing when the site has no marker for p, when the
 * event moves no order (pending, ignored) or when it is already flagged for
 * a merchant or mode (an event that waits for a confirmation,
 * pending_confirmation, is checked: a sibling's is foreign, never waiting).  Otherwise the event is the site's only when got is
 * its marker value, byte for byte; else it is
 *   foreign_site       got is a sibling's marker (pn_marker_sibling): that
 *                      site's event, stored, counted, not on report;
 *   weak_identity      a refund without the field (refund results do not
 *                      echo it) that names its PSP transaction: it may
 *                      refund only a payment of this site with that
 *                      transaction (the store's rule, else txn_mismatch);
 *   merchant_mismatch  no marker, or one that names no site: on report.
 * field names the field in the detail ("attach", "userDefined1").
 */
void pn_check_marker(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
		     const struct pn_cfg_provider *p, const char *field, const char *got,
		     size_t got_len, struct pn_event *ev);

/* An application/json answer: obj (consumed) compact, or fallback when it
 * could not be built. */
void pn_answer_json(struct pn_response *res, int status, json_t *obj, const char *fallback);
/* The failure answer {"error":"<reason>"} (Stripe, 2C2P). */
void pn_answer_error(struct pn_response *res, int status, const char *reason);

/*
 * The MAC of one message under one key, into out (64 bytes); msg is the
 * caller's description of the message.  pn_mac_match() computes it under
 * every key and compares it in constant time with each of the nwant
 * expected MACs of wantlen bytes (want[0 .. nwant * wantlen)), without
 * stopping at the first match: the time taken does not tell which key
 * matched.  *key_id (when key_id is not NULL) names the first key that
 * matched.
 */
typedef bool (*pn_mac_fn)(const void *msg, const struct pn_secret *key, unsigned char *out,
			  size_t *outlen);
bool pn_mac_match(pn_mac_fn mac, const void *msg, const struct pn_secret *keys, size_t nkeys,
		  const unsigned char *want, size_t nwant, size_t wantlen,
		  const char **key_id) PN_WUR;
/* The same with HMAC (md, keyed with each key's bytes) over iov[0 .. n). */
bool pn_hmac_match(enum pn_md md, const struct pn_iov *iov, size_t n,
		   const struct pn_secret *keys, size_t nkeys, const unsigned char *want,
		   size_t nwant, size_t wantlen, const char **key_id) PN_WUR;

#endif

/*
 * event.h: the normalised event every provider adapter produces.
 *
 * A verified notification becomes one pn_event; the store records it under
 * (site, provider, dedup_key) and applies its order transition once.  All
 * strings are owned by the request arena.
 */
#ifndef PN_EVENT_H
#define PN_EVENT_H

#include <stdbool.h>
#include <stdint.h>

enum pn_kind {
	PN_KIND_PAID,		/* money arrived: pending/failed/closed -> paid */
	PN_KIND_REFUND,		/* money returned: paid -> (partially_)refunded */
	PN_KIND_CLOSED,		/* unpaid order closed: pending -> closed */
	PN_KIND_FAILED,		/* payment attempt failed: pending -> failed */
	PN_KIND_PENDING,	/* informational: payment still in progress */
	PN_KIND_IGNORED,	/* verified, but not an order event we act on */
	PN_KIND_DISPUTE,	/* a chargeback / dispute: recorded in its case, never moves an
				 * order (Stripe charge.dispute.*) */
	PN_KIND_COMPLAINT,	/* a buyer's complaint: recorded in its case, never moves an
				 * order (WeChat Pay COMPLAINT.*, Alipay tradecomplain) */
};
#define PN_KIND_LAST PN_KIND_COMPLAINT

/*
 * Why a request was refused: the reason label of
 * paynotify_rejections_total (common/metrics.c names them, in this order).
 * An adapter sets pn_event.reject to one of the first group when it knows
 * more than its verdict says; the pipeline decides the rest.
 */
enum pn_reject {
	PN_REJECT_DEFAULT = 0,	/* by the verdict: PN_MALFORMED malformed, else bad_signature */
	PN_REJECT_STALE,	/* signed timestamp outside the tolerance (JWT exp/nbf) */
	PN_REJECT_UNKNOWN_KEY,	/* signed with a key id/serial this site does not have */
	PN_REJECT_UNSIGNED,	/* no signature at all (header or field missing) */
	PN_REJECT_PROBE,	/* a provider's deliberate bad-signature probe (WeChat Pay) */
	/* set by the pipeline */
	PN_REJECT_MALFORMED,
	PN_REJECT_BAD_SIGNATURE,
	PN_REJECT_UNKNOWN_SITE,	/* no site, an unknown one, or the provider not configured */
	PN_REJECT_METHOD,
	PN_REJECT_TOO_LARGE,	/* body or headers over the limits */
	PN_REJECT_TIMEOUT,	/* the body did not arrive within [limits] read_timeout_ms */
	PN_REJECT_BAD_REQUEST,	/* any other unreadable request */
};
#define PN_REJECT_N (PN_REJECT_BAD_REQUEST + 1)

/* "paid", "refund", ... as stored in notifications.event_kind. */
const char *pn_kind_name(enum pn_kind kind);

struct pn_event {
	enum pn_kind kind;
	const char *dedup_key;		/* required: names the event, not the order */
	const char *event_type;		/* the provider's own word: TRADE_SUCCESS, charge.refunded */
	const char *order_id;		/* merchant order id, or NULL */
	const char *psp_txn_id;		/* provider's transaction id, or NULL */
	const char *psp_event_id;	/* provider's notification id (notify_id, evt_...), or NULL */
	int64_t amount_minor;		/* order/payment amount in minor units, -1 if absent */
	const char *currency;		/* ISO 4217 alpha-3, upper case, or NULL */
	int64_t refund_minor;		/* refund amount, -1 if not a refund */
	bool refund_cumulative;		/* refund_minor is the running total, not this refund */
	const char *psp_time;		/* provider's event time as sent, or NULL */
	const char *key_id;		/* which configured key/secret verified it */
	const char *flag;		/* set by the adapter: the event is stored under this
					 * outcome and never applied (merchant_mismatch,
					 * mode_mismatch, amount_mismatch); or
					 * PN_FLAG_PENDING_CONFIRMATION: stored under its own
					 * key, applied only by a signed confirmation
					 * (paynotify query, paynotify.confirm_refund) */
	const char *flag_detail;	/* human detail for the flag */
	/*
	 * Nothing signed ties this event to the site (WeChat Pay v2 refund
	 * results: the outer mch_id/sub_mch_id are unsigned).  It may change
	 * an order only when it matches a payment this site verified: the
	 * order is paid with the same psp_txn_id and the refund does not
	 * exceed what was paid; otherwise it is stored as txn_mismatch.
	 */
	bool weak_identity;
	const char *source;		/* where the event came from: "notification" (NULL
					 * means this), "query", "statement" */
	/*
	 * PN_KIND_DISPUTE and PN_KIND_COMPLAINT: the case the event is about
	 * (paynotify.cases, sql/010_cases.sql).  case_id is required for them
	 * (without it the event is stored as it is and not recorded in a case).
	 */
	const char *case_id;		/* dp_..., WeChat complaint_id, Alipay complain_event_id */
	const char *case_status;	/* the provider's word: needs_response, won, PROCESSED, ... */
	const char *case_reason;	/* fraudulent, REFUND, the buyer's reason, or NULL */
	int64_t	case_due;		/* evidence / answer due, Unix seconds; -1 if none */
	int64_t	case_time;		/* provider time of this status, Unix seconds; -1 if none */
	bool	case_closed;		/* the provider closed the case (won, lost, PROCESSED) */
	bool	case_reopens;		/* this event reopens a closed case (a complaint continued) */
	/*
	 * A combine payment (WeChat Pay 合单支付): this event is the envelope,
	 * stored once with the raw bytes (outcome "combined", never applied);
	 * its sub-orders are subs[0 .. nsubs), each an event of its own (its
	 * own dedup key, flag and site) stored in the same transaction, each
	 * row linked to the envelope's (notifications.parent_id).
	 */
	struct pn_event *subs;
	size_t	nsubs;
	const char *site;		/* a sub-order's site; NULL: the request's */
	/*
	 * For the receiver's metrics (common/metrics.h), set by the adapter:
	 * signed_time is the send time the provider signed and the freshness
	 * check read (Stripe-Signature t=, Wechatpay-Timestamp), Unix
	 * seconds, 0 when the form signs none; set only once the signature
	 * verified, read only from a verified notification (the clock-skew
	 * gauge).  reject: why it was refused, when the verdict says too
	 * little (PN_REJECT_DEFAULT otherwise).
	 */
	int64_t	signed_time;
	enum pn_reject reject;
};

/* The flag of an event that nothing signs as a whole (WeChat Pay v2 refund
 * results): the store keeps it, the order waits for the provider's signed
 * answer (docs/WECHATPAY.md "Refund confirmation"). */
#define PN_FLAG_PENDING_CONFIRMATION "pending_confirmation"

/* At most this many sub-orders in one combine payment (WeChat Pay documents 50). */
#define PN_EVENT_MAX_SUBS 50

/* The missing-id flag: no provider id names the event; keyed by a hash of
 * its signed content ("noid:<sha256>"), stored, never applied, reported. */
#define PN_FLAG_MISSING_ID "missing_id"

struct pn_arena;

void pn_event_init(struct pn_event *ev);

/*
 * The canonical form of a verified event, the one that is stored and the one
 * `paynotify replay` re-derives and compares: every text field valid UTF-8.
 * PostgreSQL refuses text that is not, and would refuse it on every retry: a
 * genuine notification whose ids carry other bytes (Alipay charset=gbk) would
 * never be stored.  A field that is not valid UTF-8 is replaced by an arena
 * copy in which every byte outside a well-formed sequence is the four
 * characters \xNN (pn_utf8_escape): deterministic, so dedup keys stay stable.
 * Idempotent; valid fields are left as they are (no copy).  The raw body
 * keeps every byte.
 */
void pn_event_canonicalise(struct pn_event *ev, struct pn_arena *a);
/* Is every text field of ev already valid UTF-8 (canonicalising changes nothing)? */
bool pn_event_is_canonical(const struct pn_event *ev);

#endif

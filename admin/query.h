/*
 * query.h: `paynotify query`, asking a provider about an order whose
 * notification never came (docs/QUERY.md).
 *
 * cmd_query.c picks the orders and feeds final answers through the same
 * ingest as a notification (pn_store_ingest, source "query").  Each
 * provider has one small module, admin/query_<provider>.c, exporting one
 * const struct pn_query_provider: it loads the site's API credentials (only
 * this command ever reads them), builds and signs the request, sends it
 * through query_http.c (libcurl, TLS peer and host always verified,
 * bounded times and sizes), verifies the answer on its raw bytes and turns
 * a final one into a pn_event with the same dedup identity as the
 * provider's notification for that payment.
 */
#ifndef PN_QUERY_H
#define PN_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "http.h"
#include "util.h"
#include "admin.h"

#define PN_QUERY_MAX_ANSWER (1024 * 1024)	/* bytes of one answer body */

/* ---- HTTP (query_http.c) -------------------------------------------------- */

struct pn_qhttp {
	const struct pn_config *cfg;	/* timeouts and CA bundle */
	void   *curl;			/* CURL *, reused for every request of a run */
	size_t	max_answer;		/* bytes of one answer body; 0: PN_QUERY_MAX_ANSWER
					 * (reconcile --fetch: a day's bill) */
	int64_t	deadline_us;		/* pn_now_us() by which every request of the
					 * ask has ended; 0: [query]'s bounds only
					 * (paynotify confirm: confirm.timeout_ms) */
};

struct pn_qhttp_answer {
	long	status;			/* HTTP status; 0 when no answer came */
	unsigned char *body;		/* arena, NUL-terminated */
	size_t	body_len;
	struct pn_request headers;	/* the answer's headers (and body), as a
					 * receiver would see a request: the
					 * receivers' verification code reads it */
	const char *headers_json;	/* {"Name": "value", ...} of the answer (arena) */
};

bool pn_qhttp_init(struct pn_qhttp *h, const struct pn_config *cfg, struct pn_err *err) PN_WUR;
void pn_qhttp_destroy(struct pn_qhttp *h);

/* One request; false (err says why) on transport errors, timeouts and
 * answers larger than PN_QUERY_MAX_ANSWER.  Any HTTP status is true. */
bool pn_qhttp_do(struct pn_qhttp *h, struct pn_arena *a, const char *method, const char *url,
		 const char *const *headers, const char *body, size_t body_len,
		 struct pn_qhttp_answer *out, struct pn_err *err) PN_WUR;


/* ---- providers ------------------------------------------------------------ */

/* The order as the database has it. */
struct pn_query_order {
	const char *site;
	const char *order_id;
	const char *status;
	int64_t	amount_minor;
	const char *currency;
	const char *psp_txn_id;		/* NULL when none is stored */
};

enum pn_query_state {
	PN_Q_FINAL,		/* ev is filled: paid, closed or failed; ingest it */
	PN_Q_WAITING,		/* the provider knows it, not final (unpaid, processing) */
	PN_Q_NOT_FOUND,		/* the provider does not know the order */
	PN_Q_REFUSED,		/* the answer did not verify: nothing changes */
	PN_Q_ATTENTION,		/* verified, but a human must look (paid and refunded) */
	PN_Q_ERROR,		/* transport error, timeout, 5xx, unreadable answer */
};

/* One sub-order of a combine order's answer (pn_query_wechatpay_combine). */
struct pn_query_sub {
	const char *order_id;
	const char *psp_state;		/* its trade_state */
	int64_t	amount_minor;		/* -1 if absent */
	const char *currency;
	int	ingest;			/* index in ans->ev.subs, or -1: not ingested */
	const char *result;		/* when not ingested: waiting, other_merchant */
	const char *detail;
};

struct pn_query_answer {
	enum pn_query_state state;
	const char *psp_state;		/* the provider's word: TRADE_SUCCESS, NOTPAY, ... */
	const char *detail;		/* for the operator (arena) */
	struct pn_event ev;		/* PN_Q_FINAL only */
	const struct pn_query_sub *subs;	/* a combine order: each sub-order */
	size_t	nsubs;
	const unsigned char *raw;	/* the verified answer as received (PN_Q_FINAL) */
	size_t	raw_len;
	const char *raw_headers_json;
	/* A final paid answer that can confirm stored pending_confirmation
	 * notifications of the order (provider.confirms below); NULL: none.
	 * 2C2P: tranRef + approvalCode + eci as the answer signs them. */
	const char *confirm_segment;
	const char *confirm_words;	/* the same for the operator: "tranRef 1, ..." */
};

/*
 * A stored event that waits for the provider's signed confirmation
 * (outcome pending_confirmation: WeChat Pay v2 refund results), and what
 * the provider's answer says about it (docs/WECHATPAY.md "Refund
 * confirmation").
 */
enum pn_confirm_state {
	PN_C_CONFIRMED,		/* the answer has this refund: same ids, transaction,
				 * order and amounts, status SUCCESS */
	PN_C_CONTRADICTED,	/* the answer differs: outcome says how; never applied */
	PN_C_WAITING,		/* not final (PROCESSING, not known yet): ask again */
	PN_C_REFUSED,		/* the answer did not verify */
	PN_C_ERROR,		/* transport error, unusable answer or stored bytes */
};

struct pn_query_confirmation {
	enum pn_confirm_state state;
	const char *outcome;		/* PN_C_CONTRADICTED: txn_mismatch, amount_mismatch,
					 * refund_failed */
	const char *psp_state;		/* the provider's word: SUCCESS, PROCESSING, ... */
	const char *detail;		/* for the operator and the stored row (arena) */
	struct pn_event ev;		/* the stored event, re-derived from its raw bytes */
};

struct pn_query_ctx {
	const struct pn_config *cfg;
	const struct pn_site *site;
	struct pn_qhttp *http;
	struct pn_arena *arena;		/* per order */
	int64_t	now;			/* Unix seconds */
	void   *creds;			/* the provider's loaded credentials for the site */
};

struct pn_query_provider {
	const char *name;		/* "alipay": as orders.psp and the adapters */
	/* Can the site be queried (credentials configured)?  why: what is missing. */
	bool	(*configured)(const struct pn_site *site, const char **why);
	/* Load and check the site's API credentials (secret file modes, key
	 * types); *creds is freed with free_creds. */
	bool	(*load)(const struct pn_site *site, void **creds, struct pn_err *err);
	void	(*free_creds)(void *creds);
	/* Optional: a word about the loaded credentials for check-config. */
	const char *(*describe)(const void *creds);
	/* Ask about one order: one request (two for Stripe without a stored
	 * PaymentIntent id: search, never retried). */
	void	(*ask)(const struct pn_query_ctx *ctx, const struct pn_query_order *o,
		       struct pn_query_answer *ans);
	/* Optional: confirm a stored event that waits for a signed
	 * confirmation (raw: its stored body), one request. */
	void	(*confirm)(const struct pn_query_ctx *ctx, const unsigned char *raw,
			   size_t raw_len, struct pn_query_confirmation *c);
	/* Optional: does the final answer confirm a stored pending_confirmation
	 * notification (its raw body)?  *why: what the operator reads on the
	 * confirmed row (arena). */
	bool	(*confirms)(const struct pn_query_ctx *ctx, const struct pn_query_answer *ans,
			    const unsigned char *raw, size_t raw_len, const char **why);
	/* Optional: ask about one complaint (case_id as its notification named it),
	 * for `query --complaints`; a final answer is a PN_KIND_COMPLAINT event
	 * carrying the complaint's transaction and state. */
	void	(*ask_case)(const struct pn_query_ctx *ctx, const char *case_id,
			    struct pn_query_answer *ans);
};

/*
 * WeChat Pay API v3: a GET of url signed with the site's query key
 * (ctx->creds from pn_query_wechatpay.load); a non-2xx answer is an error.
 * With verify, the answer's Wechatpay-* signature is checked exactly as a
 * notification's (a bill file download carries none: its hash is checked
 * by the caller).  Shared by `paynotify reconcile --fetch`.
 */
bool pn_query_wechatpay_get(const struct pn_query_ctx *ctx, const char *url, bool verify,
			    struct pn_qhttp_answer *out, struct pn_err *err) PN_WUR;

/*
 * Alipay: one signed gateway call (method, biz_content) with the site's
 * query key; the answer's <method>_response member verified on its raw
 * bytes and its code 10000.  *root is the parsed answer (json_decref it),
 * *resp the member inside it.  Shared by `paynotify reconcile --fetch`
 * (alipay.data.dataservice.bill.downloadurl.query).
 */
bool pn_query_alipay_call(const struct pn_query_ctx *ctx, const char *method, json_t *biz,
			  json_t **root, json_t **resp, struct pn_err *err) PN_WUR;

/*
 * WeChat Pay API v3 combine order (合单支付): GET /v3/combine-transactions/
 * out-trade-no/{combine_out_trade_no}, signed and verified as every v3
 * query.  ans->subs says what each sub-order is; PN_Q_FINAL when at least
 * one sub-order of ctx->site is final (paid, closed, failed): ans->ev is
 * then the envelope with those sub-orders as ev.subs (the answer's raw
 * bytes stored once, pn_store_ingest_combined).  Sub-orders of another
 * merchant are not this site's (never ingested here).
 */
void pn_query_wechatpay_combine(const struct pn_query_ctx *ctx, const char *combine_out_trade_no,
				struct pn_query_answer *ans);

extern const struct pn_query_provider pn_query_alipay;
extern const struct pn_query_provider pn_query_wechatpay;
extern const struct pn_query_provider pn_query_stripe;
extern const struct pn_query_provider pn_query_2c2p;
extern const struct pn_query_provider *const pn_query_providers[];

const struct pn_query_provider *pn_query_provider_find(const char *name);

/* ---- one run: asking about orders (cmd_query.c) ---------------------------
 *
 * `paynotify query` (--order, the --pending-older-than window, --due) and
 * `paynotify confirm` ask about an order the same way: one call of
 * pn_query_order_row() per order, which asks its provider, verifies the
 * answer and (apply) ingests a final one.  There is no second copy of that
 * path.
 */

/* A site's loaded API credentials for one provider, cached for the run. */
struct pn_query_creds {
	const struct pn_site *site;
	const struct pn_query_provider *qp;
	void   *creds;
	bool	failed;
	char	why[512];
};

struct pn_query_run {
	struct pn_config *cfg;
	PGconn *conn;			/* reads orders and stored notifications */
	struct pn_store *store;		/* ingests final answers (apply) */
	struct pn_qhttp http;
	bool	apply;
	struct pn_table out;		/* one row per answer: site, provider, order_id,
					 * amount, answer, result, detail */
	struct pn_query_creds *cache;
	size_t	ncache;
	/* counts, for the summary and paynotify.query_runs */
	int	orders, asked, final, applied, waiting, not_found, refused, errors, attention;
	/* --due: the last row's answer and result (what the schedule records),
	 * and what became of the items */
	char	last_answer[128], last_result[64];
	bool	last_kept;	/* a final answer's words are in last_*: kept */
	int	fu_done, fu_again, fu_expired, fu_lost;
};

/* The columns of r->out, and how many. */
extern const char *const pn_query_columns[];
#define PN_QUERY_NCOLUMNS 7

/*
 * Ask about row i of orders (columns site, order_id, status, amount_minor,
 * currency, psp, psp_txn_id: paynotify.orders' own): its provider
 * (orders.psp), else only, else every provider the site can be queried
 * with; with r->apply a final answer is ingested through r->store exactly
 * as a notification (source "query").  One row (or more) in r->out, and
 * the counts.  Memory of the answer: a (reset it after the call).
 */
void pn_query_order_row(struct pn_query_run *r, struct pn_arena *a, const struct pn_table *orders,
			size_t i, const struct pn_query_provider *only);

/* Free the credentials r->cache holds (and the cache). */
void pn_query_run_release_creds(struct pn_query_run *r);

/* Shared by the modules: set state and a printf detail. */
void pn_query_set(const struct pn_query_ctx *ctx, struct pn_query_answer *ans,
		  enum pn_query_state state, const char *fmt, ...) PN_PRINTF(4, 5);
/* Classify an HTTP answer that is not 2xx (5xx -> ERROR, 404 -> NOT_FOUND
 * when not_found_404, anything else ERROR); true when it was 2xx. */
bool pn_query_http_ok(const struct pn_query_ctx *ctx, const struct pn_qhttp_answer *h,
		      bool not_found_404, struct pn_query_answer *ans);

#endif

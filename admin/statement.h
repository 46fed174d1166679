/*
 * statement.h: the providers' daily statements for `paynotify reconcile`
 * (docs/RECONCILE.md).
 *
 * Each provider has one small adapter, admin/statement_<provider>.c,
 * exporting one const struct pn_stmt_adapter: it parses the provider's
 * documented statement file into struct pn_stmt_txn rows (strictly: every
 * line bounded, every field checked, the file's own totals checked against
 * its rows; an error names the line), and turns a row into the pn_event
 * that the provider's notification (or `paynotify query`) would have
 * produced for the same payment or refund, so that whichever arrives second
 * is a duplicate or already_applied, never a second application: through
 * the provider's one identity function, webhooks/<provider>/identity.c,
 * which the receiver and the query module call too.
 *
 * Everything a parse returns lives in the arena it was given.
 */
#ifndef PN_STATEMENT_H
#define PN_STATEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "util.h"

#define PN_STMT_MAX_FILE (64 * 1024 * 1024) /* bytes of one statement file */
#define PN_STMT_MAX_LINE 8192               /* bytes of one line */
#define PN_STMT_MAX_FIELDS 128              /* fields of one line */
#define PN_STMT_MAX_ROWS 1000000            /* transactions of one file */

enum pn_stmt_kind {
	PN_STMT_PAYMENT, /* money collected for an order */
	PN_STMT_REFUND,  /* money returned for an order */
	PN_STMT_DISPUTE, /* a chargeback (Stripe): always a human's */
	PN_STMT_FEE,     /* a fee line of its own (not tied to an order) */
	PN_STMT_OTHER,   /* payouts, transfers, revoked trades: listed, not compared */
};

struct pn_stmt_txn {
	int line; /* 1-based line number in the file */
	enum pn_stmt_kind kind;
	const char *type;       /* the provider's word: 交易, SUCCESS, charge, ... (UTF-8) */
	const char *order_id;   /* merchant order id, or NULL */
	const char *psp_txn_id; /* the payment's provider id (trade_no, transaction_id,
	                         * PaymentIntent), or NULL */
	const char *refund_id;  /* refunds: the refund's id (out_biz_no, refund_id, re_) */
	const char *mch_id;     /* merchant identity the row names (WeChat mchid), or NULL */
	const char *app_id;     /* WeChat appid, or NULL */
	const char *time;       /* the provider's time as written */
	int64_t epoch;          /* that time in Unix seconds (provider's zone applied) */
	int64_t amount_minor;   /* gross, always >= 0 (a refund's amount is positive) */
	char currency[4];       /* ISO 4217 alpha-3, upper case */
	bool has_fee;
	int64_t fee_minor; /* fee charged (positive), or returned (negative) */
	bool has_net;
	int64_t net_minor; /* what the merchant keeps: signed */
	const char *raw;   /* the line (UTF-8: Alipay lines after GBK conversion) */
	size_t raw_len;
	/* reconcile --by-query: the row is a verified inquiry answer, not a line
	 * of a file; its event and headers are what `paynotify query` would
	 * ingest (raw: the answer's body).  NULL for a statement row. */
	const struct pn_event *ev;
	const char *headers_json;
};

struct pn_statement {
	const char *date;         /* YYYY-MM-DD the file says it covers, or NULL */
	const char *account;      /* the account the file names (Alipay 账号), or NULL */
	struct pn_stmt_txn *txns; /* arena */
	size_t ntxns;
	size_t cap;
};

struct pn_stmt_adapter {
	const char *provider; /* as the receivers: "alipay", "wechatpay", ... */
	const char *format;   /* the format's name, for messages */
	int utc_offset_s;     /* the statement day's zone (Alipay, WeChat: +8 h) */
	/* Parse a whole file.  false: err says what and where ("line 7: ..."). */
	bool (*parse)(struct pn_arena *a, const unsigned char *data, size_t len,
	              struct pn_statement *st, struct pn_err *err);
	/* Is the file for this site (account, merchant ids)?  false: err says why. */
	bool (*check_site)(const struct pn_site *site, const struct pn_statement *st,
	                   struct pn_err *err);
	/* The event of a payment or refund row, with the notification's identity.
	 * refunded_after: the order's refunded total once this refund is applied
	 * (Alipay names a full refund's event differently). */
	void (*event)(struct pn_arena *a, const struct pn_site *site, const struct pn_stmt_txn *t,
	              int64_t order_amount, int64_t refunded_after, struct pn_event *ev);
};

extern const struct pn_stmt_adapter pn_stmt_alipay;
extern const struct pn_stmt_adapter pn_stmt_wechatpay;
extern const struct pn_stmt_adapter pn_stmt_stripe;

const struct pn_stmt_adapter *pn_stmt_adapter_find(const char *provider);

/* ---- shared by the adapters (statement.c) -------------------------------- */

/* Lines of a buffer: the next line into *line (NUL-terminated copy in the
 * arena, CR LF or LF stripped); false at the end.  A line longer than
 * PN_STMT_MAX_LINE or holding a NUL byte fails with err set. */
struct pn_lines {
	const unsigned char *p, *end;
	int lineno;
	const unsigned char *raw; /* the current line as in the buffer */
	size_t raw_len;
};
void pn_lines_init(struct pn_lines *l, const unsigned char *data, size_t len);
bool pn_lines_next(struct pn_lines *l, struct pn_arena *a, char **line, bool *eof,
                   struct pn_err *err) PN_WUR;

/* Split a CSV line in place (RFC 4180 double quotes honoured); at most
 * PN_STMT_MAX_FIELDS fields. */
bool pn_csv_split(char *line, char **fields, size_t *n, struct pn_err *err) PN_WUR;
/* Index of the column named name in a header row, or -1. */
int pn_csv_col(char *const *fields, size_t n, const char *name);

/* Is a whole file text (not empty, no NUL byte, no UTF-16 byte order mark)?
 * false: err says what is wrong with it ("not text: NUL bytes at offset 0 ..."). */
bool pn_stmt_text_check(const unsigned char *data, size_t len, struct pn_err *err) PN_WUR;

/* GBK (read as GB18030, its superset) to UTF-8, into the arena. */
bool pn_stmt_from_gbk(struct pn_arena *a, const char *in, size_t len, char **out,
                      struct pn_err *err) PN_WUR;

/* A signed decimal amount ("-35.80") in minor units of the exponent. */
bool pn_stmt_amount(const char *s, int exponent, int64_t *minor, struct pn_err *err) PN_WUR;
/* "YYYY-MM-DD HH:MM:SS" at utc_offset_s into Unix seconds. */
bool pn_stmt_time(const char *s, int utc_offset_s, int64_t *epoch) PN_WUR;
/* "YYYY-MM-DD" at utc_offset_s: the day's first second in Unix seconds. */
bool pn_stmt_day(const char *s, int utc_offset_s, int64_t *epoch) PN_WUR;

/* A new row at the end of st (zeroed; line set). */
struct pn_stmt_txn *pn_stmt_add(struct pn_arena *a, struct pn_statement *st, int line,
                                struct pn_err *err);

#endif

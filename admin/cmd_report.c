/*
 * cmd_report.c: paynotify report — what needs a human.  Non-zero exit when
 * the report is not empty, so that cron can alert.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "args.h"
#include "money.h"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify report [--site S] [--pending-older-than 30m]\n"
		"                        [--closed-within 7d] [--format table|csv|json] [--wide]\n"
		"       paynotify report --unhandled [--days 7] [--site S] [--format ...]\n\n"
		"List what needs a human:\n"
		"  - open disputes (dispute_open: amount, reason, evidence due date) and open\n"
		"    complaints (complaint_open), until the provider closes them; then, for\n"
		"    --closed-within (default 7d, 0 for none), how each ended: dispute_won,\n"
		"    dispute_lost, dispute_closed, complaint_closed\n"
		"  - notifications stored as unknown_order, amount_mismatch, merchant_mismatch,\n"
		"    mode_mismatch, txn_mismatch (not applied), duplicate_payment (a second\n"
		"    real charge: money to refund), paid_after_close (applied to a closed\n"
		"    order: check the goods), refund_failed (a refund that did not happen),\n"
		"    conflicting_duplicate (same event key, different content: the first stays\n"
		"    authoritative), missing_id (no provider id names it: keyed by its signed\n"
		"    content, not applied), pending_confirmation still unconfirmed an hour\n"
		"    after it came (a WeChat Pay v2 refund result the signed refundquery answer\n"
		"    has not confirmed, a legacy 2C2P form that does not say which transaction\n"
		"    it is: paynotify query confirms both); \"(from query)\" when paynotify\n"
		"    query stored it\n"
		"  - orders still pending after the threshold with no notification at all\n"
		"  - orders paid or refunded without a stored notification that applied it\n"
		"Not listed (counted by paynotify stats): applied, already_applied, ignored,\n"
		"foreign_site (a sibling site's event: another site's marker), unhandled,\n"
		"combined (a combine payment's envelope: each sub-order is a row of its own,\n"
		"listed as its outcome says), and notifications a person resolved\n"
		"(`paynotify resolve`) while they keep the outcome that was resolved.\n\n"
		"--unhandled: instead, the event types received in the last --days N days\n"
		"(default 7, 1..3650) that paynotify has no handling for (outcome unhandled),\n"
		"by site and provider, with counts and when first and last seen: a provider\n"
		"sending something new, or an endpoint subscribed to more than it needs.\n"
		"Exit status 1 when the list is not empty, 0 when it is; 64 a bad option\n"
		"(a site not in the configuration, a threshold that is not a duration),\n"
		"3 database error, 78 configuration error.\n"
		"Amounts in major units with their currency (66.00 CNY).\n"
		"The threshold is a duration: 30m, 2h, 1d, 1h30m, \"90 minutes\", \"1 day\".\n");
}

/* How long a stored event may wait for its signed confirmation before it
 * is reported (docs/WECHATPAY.md "Refund confirmation"). */
#define PN_PENDING_CONFIRMATION_REPORT "1 hour"

/*
 * One query, one row per finding.  Orders are read only through
 * paynotify.order_rows() (sql/functions.sql), which a site that keeps its
 * orders elsewhere replaces.  Amounts come as minor units and are written
 * here in major units (common/money.c's exponents).
 */
static const char report_sql[] =
	"SELECT kind, site, provider, order_id, notification_id, event_kind, amount_minor,"
	"       currency, note, order_amount_minor, order_currency, order_status, since FROM ("
	" SELECT n.outcome AS kind, n.site, n.provider, n.order_id, n.id::text AS notification_id,"
	"        n.event_kind,"
	"        CASE WHEN n.event_kind = 'refund' THEN n.refund_minor ELSE n.amount_minor END"
	"            AS amount_minor, n.currency,"
	"        nullif(concat_ws(' ', CASE WHEN n.outcome = 'conflicting_duplicate' THEN"
	"                 coalesce('same event key as notification ' || f.id || ' ('"
	"                          || f.event_kind || ', ' || f.outcome || '), different content',"
	"                          n.outcome_detail)"
	"             ELSE n.outcome_detail END,"
	"             CASE WHEN n.source <> 'notification' THEN '(from ' || n.source || ')' END),"
	"             '') AS note,"
	"        o.amount_minor AS order_amount_minor, o.currency AS order_currency,"
	"        o.status AS order_status, n.received_at AS since"
	"   FROM paynotify.notifications n"
	"   LEFT JOIN paynotify.order_rows($1::text) o"
	"          ON o.site = n.site AND o.order_id = n.order_id"
	"   LEFT JOIN paynotify.notifications f"
	"          ON n.outcome = 'conflicting_duplicate' AND f.site = n.site"
	"         AND f.provider = n.provider"
	"         AND f.dedup_key = substr(n.dedup_key, 24, greatest(length(n.dedup_key) - 56, 0))"
	"  WHERE n.outcome NOT IN ('applied', 'already_applied', 'ignored', 'foreign_site',"
	"                          'unhandled', 'dispute', 'complaint', 'combined')"
	/* a refund that waits for its signed confirmation: `paynotify query`
	 * confirms it within minutes; still waiting after an hour, a person looks */
	"    AND (n.outcome <> 'pending_confirmation'"
	"         OR n.received_at < now() - interval '" PN_PENDING_CONFIRMATION_REPORT "')"
	"    AND ($1::text IS NULL OR n.site = $1)"
	/* acknowledged by a person (paynotify resolve, schema 14), as long as
	 * the row still has the outcome that person looked at */
	"    AND n.resolved_outcome IS DISTINCT FROM n.outcome"
	/*
	 * Disputes and complaints: one line per case (paynotify.cases), open
	 * ones always, closed ones for $3 after they closed, with how they
	 * ended.  The order is linked, never read for a rule: its status is
	 * shown as it is now.
	 */
	" UNION ALL"
	" SELECT c.case_kind || CASE"
	"          WHEN c.closed_at IS NULL THEN '_open'"
	"          WHEN c.case_kind = 'dispute' AND c.status IN ('won', 'lost') THEN '_' || c.status"
	"          ELSE '_closed' END,"
	"        c.site, c.provider, c.linked_order, c.notification_id::text, c.case_kind,"
	"        c.amount_minor, c.currency,"
	"        concat_ws('; ', c.case_id || ' ' || c.status,"
	"                  'reason ' || c.reason,"
	"                  CASE WHEN c.closed_at IS NULL THEN 'evidence due '"
	"                       || to_char(c.due_by AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI \"UTC\"')"
	"                  END,"
	"                  CASE WHEN c.closed_at IS NOT NULL THEN 'closed '"
	"                       || to_char(c.closed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI \"UTC\"')"
	"                  END,"
	"                  'order ' || o.status,"
	"                  CASE WHEN c.linked_order IS NULL AND c.psp_txn_id IS NOT NULL"
	"                       THEN 'no order of this site has transaction ' || c.psp_txn_id"
	"                       WHEN c.linked_order IS NULL"
	"                       THEN 'not linked to an order yet (paynotify query --complaints)'"
	"                  END),"
	"        o.amount_minor, o.currency, o.status, coalesce(c.closed_at, c.opened_at)"
	/* a case recorded before its payment's notification: linked now, if it can be */
	"   FROM (SELECT x.*, coalesce(x.order_id, CASE WHEN x.psp_txn_id IS NOT NULL THEN"
	"                paynotify.order_by_txn(x.site, x.psp_txn_id) END) AS linked_order"
	"           FROM paynotify.cases x) c"
	"   LEFT JOIN paynotify.order_rows($1::text) o"
	"          ON o.site = c.site AND o.order_id = c.linked_order"
	"  WHERE ($1::text IS NULL OR c.site = $1)"
	"    AND (c.closed_at IS NULL OR c.closed_at > now() - $3::interval)"
	" UNION ALL"
	" SELECT 'pending_without_notification', o.site, NULL, o.order_id, NULL, NULL, NULL, NULL,"
	"        'pending since ' || o.created_at::text, o.amount_minor, o.currency, o.status,"
	"        o.created_at"
	"   FROM paynotify.order_rows($1::text) o"
	"  WHERE o.status = 'pending' AND o.created_at < now() - $2::interval"
	"    AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n"
	"                     WHERE n.site = o.site AND n.order_id = o.order_id)"
	" UNION ALL"
	" SELECT 'paid_without_notification', o.site, o.psp, o.order_id, NULL, NULL, NULL, NULL,"
	"        'status ' || o.status || ' but no stored notification applied it',"
	"        o.amount_minor, o.currency, o.status, o.updated_at"
	"   FROM paynotify.order_rows($1::text) o"
	"  WHERE o.status IN ('paid', 'partially_refunded', 'refunded')"
	"    AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n"
	"                     WHERE n.site = o.site AND n.order_id = o.order_id"
	"                       AND n.outcome IN ('applied', 'paid_after_close'))"
	") r ORDER BY since, site, order_id";

/*
 * report --unhandled: the types with no handling received in the last $2
 * days (outcome unhandled; the type is notifications.event_type, the
 * provider's own word).  Through notifications_unhandled_idx (sql/011).
 */
static const char unhandled_sql[] =
	"SELECT site, provider, coalesce(event_type, '(none)') AS event_type,"
	"       count(*) AS notifications, sum(deliveries) AS deliveries,"
	"       min(received_at) AS first_seen, max(last_delivery_at) AS last_seen,"
	"       max(id)::text AS last_id"
	"  FROM paynotify.notifications"
	" WHERE outcome = 'unhandled'"
	"   AND received_at >= now() - make_interval(days => $2::int)"
	"   AND ($1::text IS NULL OR site = $1)"
	" GROUP BY site, provider, coalesce(event_type, '(none)')"
	" ORDER BY site, provider, event_type";

/* "66.00 CNY" from minor units; NULL when there is no amount. */
static char *
major(const char *minor, const char *currency)
{
	int64_t	v;
	int	exp;
	char	buf[48];

	if (minor == NULL || !pn_parse_i64(minor, &v))
		return NULL;
	exp = currency ? pn_money_exponent(currency) : -1;
	if (exp < 0)
		return pn_xasprintf("%s minor units%s%s", minor, currency ? " " : "",
				    currency ? currency : "");
	if (v < 0)
		return pn_xasprintf("-%s", major(minor + 1, currency));
	pn_money_format(v, exp, buf, sizeof(buf));
	return pn_xasprintf("%s %s", buf, currency);
}

/*
 * Is the note apply_event()'s amount_mismatch detail ("paid 1.00 CNY, order
 * 9.99 CNY pending", as of the event's arrival)?  The report then writes the
 * same sentence with the order as it is now.
 */
static bool
note_is_mismatch(const char *note, const char *ev, const char *amount)
{
	size_t	n = strlen(ev);

	if (amount == NULL || strncmp(note, ev, n) != 0 || note[n] != ' ')
		return false;
	note += n + 1;
	n = strlen(amount);
	return strncmp(note, amount, n) == 0 && strncmp(note + n, ", order ", 8) == 0;
}

/* The printed row: kind site provider order_id notification_id amount detail since. */
static void
add_finding(struct pn_table *out, const struct pn_table *t, size_t r)
{
	const char *kind = pn_table_get(t, r, "kind");
	const char *ev = pn_table_get(t, r, "event_kind");
	const char *note = pn_table_get(t, r, "note");
	const char *ostatus = pn_table_get(t, r, "order_status");
	char   *amount, *oamount, *detail;
	const char *cells[8];

	amount = major(pn_table_get(t, r, "amount_minor"), pn_table_get(t, r, "currency"));
	oamount = major(pn_table_get(t, r, "order_amount_minor"),
			pn_table_get(t, r, "order_currency"));
	if (ev == NULL) {	/* an order finding */
		detail = pn_xasprintf("%s %s", oamount ? oamount : "?", note ? note : "");
		free(amount);
		amount = oamount ? pn_xstrdup(oamount) : NULL;
	} else if (note != NULL && !(ostatus != NULL && note_is_mismatch(note, ev, amount)))
		detail = pn_xasprintf("%s %s: %s", ev, amount ? amount : "(no amount)", note);
	else if (ostatus != NULL)
		detail = pn_xasprintf("%s %s, order %s %s", ev, amount ? amount : "(no amount)",
				      oamount ? oamount : "?", ostatus);
	else
		detail = pn_xasprintf("%s %s, no such order", ev, amount ? amount : "(no amount)");
	cells[0] = kind;
	cells[1] = pn_table_get(t, r, "site");
	cells[2] = pn_table_get(t, r, "provider");
	cells[3] = pn_table_get(t, r, "order_id");
	cells[4] = pn_table_get(t, r, "notification_id");
	cells[5] = amount;
	cells[6] = detail;
	cells[7] = pn_table_get(t, r, "since");
	pn_table_add(out, cells);
	free(amount);
	free(oamount);
	free(detail);
}

/* report --unhandled: the table, "N event types ... with no handling"; cfg consumed. */
static int
report_unhandled(struct pn_config *cfg, const char *params[2], enum pn_format fmt)
{
	struct pn_table t;
	int	rc;

	if (!pn_admin_query_cfg(cfg, PN_SQL_CONST(unhandled_sql), 2, params, &t)) {
		pn_cfg_free(cfg);
		return PN_EXIT_UNAVAILABLE;
	}
	pn_cfg_free(cfg);
	pn_table_print(&t, fmt, stdout);
	fprintf(fmt == PN_FMT_TABLE ? stdout : stderr, "%zu event type%s with no handling in the "
		"last %s day%s\n", t.nrows, t.nrows == 1 ? "" : "s", params[1],
		strcmp(params[1], "1") == 0 ? "" : "s");
	rc = t.nrows ? PN_EXIT_ATTENTION : PN_EXIT_OK;
	pn_table_free(&t);
	return rc;
}

/* --days: a whole number of days, 1..3650 */
static bool
days_arg(const struct pn_arg *arg, const char *value)
{
	char   *end = NULL;
	long	n = strtol(value, &end, 10);

	if (*value < '0' || *value > '9' || end == NULL || *end != '\0' || n < 1 || n > 3650) {
		fprintf(stderr, "paynotify: report: invalid --days \"%s\" "
			"(a whole number of days, 1..3650)\n", value);
		return false;
	}
	*(int64_t *)arg->dest = n;
	return true;
}

/* --closed-within: a duration, or 0 */
static bool
closed_within_arg(const struct pn_arg *arg, const char *value)
{
	if (strcmp(value, "0") == 0) {
		*(int64_t *)arg->dest = 0;
		return true;
	}
	return pn_opt_duration("--closed-within", value, arg->dest);
}

static int
report_exec(int argc, char **argv, const char *config_path)
{
	const char *params[3] = {NULL, "30 minutes", "7 days"};
	enum pn_format fmt = pn_format_default();
	static const char *cols[] = {"kind", "site", "provider", "order_id", "notification_id",
				     "amount", "detail", "since"};
	struct pn_table t, out;
	size_t	r;
	struct pn_config *cfg;
	char	threshold[32], days_text[16] = "7", closed_within[32];
	int64_t	pending_s = 0, closed_s = 0, days_n = 0;
	int	rc;
	bool	unhandled = false, days = false, pending = false, closed = false, wide = false;
	const struct pn_arg options[] = {
		{"site", required_argument, 0, PN_ARG_STR, .str = &params[0]},
		{"pending-older-than", required_argument, 0, PN_ARG_DURATION, .num = &pending_s,
		 .seen = &pending},
		{"closed-within", required_argument, 0, PN_ARG_CALL, .dest = &closed_s,
		 .set = closed_within_arg, .seen = &closed},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
		{"wide", no_argument, 0, PN_ARG_FLAG, .flag = &wide},
		{"unhandled", no_argument, 0, PN_ARG_FLAG, .flag = &unhandled},
		{"days", required_argument, 0, PN_ARG_CALL, .dest = &days_n, .set = days_arg,
		 .seen = &days},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "report", .help = help, .opts = options,
				     .rest = PN_REST_HELP};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	if (wide)
		pn_table_set_wide(true);
	if (days)
		snprintf(days_text, sizeof(days_text), "%" PRId64, days_n);
	if (pending) {
		snprintf(threshold, sizeof(threshold), "%" PRId64 " seconds", pending_s);
		params[1] = threshold;
	}
	if (closed) {	/* 0: closed cases are not listed at all */
		snprintf(closed_within, sizeof(closed_within), "%" PRId64 " seconds", closed_s);
		params[2] = closed_within;
	}
	if (days && !unhandled) {
		fprintf(stderr, "paynotify: report: --days goes with --unhandled\n");
		return PN_EXIT_USAGE;
	}
	if (pending && unhandled) {
		fprintf(stderr, "paynotify: report: --pending-older-than does not go with "
			"--unhandled\n");
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (params[0] != NULL && !pn_opt_site(cfg, "--site", params[0])) {
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	if (unhandled) {
		params[1] = days_text;
		return report_unhandled(cfg, params, fmt);
	}
	if (!pn_admin_query_cfg(cfg, PN_SQL_CONST(report_sql), 3, params, &t)) {
		pn_cfg_free(cfg);
		return PN_EXIT_UNAVAILABLE;
	}
	pn_cfg_free(cfg);
	pn_table_init(&out, PN_ARRAY_LEN(cols), cols);
	for (r = 0; r < t.nrows; r++)
		add_finding(&out, &t, r);
	pn_table_free(&t);
	pn_table_print(&out, fmt, stdout);
	fprintf(fmt == PN_FMT_TABLE ? stdout : stderr, "%zu item%s need%s a human\n", out.nrows,
		out.nrows == 1 ? "" : "s", out.nrows == 1 ? "s" : "");
	rc = out.nrows ? PN_EXIT_ATTENTION : PN_EXIT_OK;
	pn_table_free(&out);
	return rc;
}

const struct pn_cmd pn_cmd_report = {
	"report", "[--site S] [--pending-older-than 30m] [--closed-within 7d] | --unhandled [--days 7]",
	"list what needs a human (for cron)",
	report_exec, help,
};

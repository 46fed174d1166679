/*
 * cmd_report.c: paynotify report — what needs a human.  Non-zero exit when
 * the report is not empty, so that cron can alert.
 */
#include "config.h"

#include <getopt.h>
#include <string.h>

#include "admin.h"
#include "money.h"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify report [--site S] [--pending-older-than 30m]\n"
		"                        [--format table|csv|json] [--wide]\n\n"
		"List what needs a human:\n"
		"  - notifications stored as unknown_order, amount_mismatch, merchant_mismatch,\n"
		"    mode_mismatch, txn_mismatch (not applied), duplicate_payment (a second\n"
		"    real charge: money to refund), paid_after_close (applied to a closed or\n"
		"    failed order: check the goods), conflicting_duplicate (same event key,\n"
		"    different content: the first stays authoritative), missing_id (no provider\n"
		"    id names it: keyed by its signed content, not applied); \"(from query)\"\n"
		"    when paynotify query stored it\n"
		"  - orders still pending after the threshold with no notification at all\n"
		"  - orders paid or refunded without a stored notification that applied it\n"
		"Exit status 1 when the list is not empty, 0 when it is; 64 a bad option\n"
		"(a site not in the configuration, a threshold that is not a duration),\n"
		"3 database error, 78 configuration error.\n"
		"Amounts in major units with their currency (66.00 CNY).\n"
		"The threshold is a duration: 30m, 2h, 1d, 1h30m, \"90 minutes\", \"1 day\".\n");
}

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
	"  WHERE n.outcome NOT IN ('applied', 'already_applied', 'ignored', 'combined')"
	"    AND ($1::text IS NULL OR n.site = $1)"
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

static int
report_exec(int argc, char **argv, const char *config_path)
{
	static const struct option longopts[] = {
		{"site", required_argument, NULL, 's'},
		{"pending-older-than", required_argument, NULL, 'p'},
		{"format", required_argument, NULL, 'f'},
		{"wide", no_argument, NULL, 'W'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *params[2] = {NULL, "30 minutes"};
	enum pn_format fmt = pn_format_default();
	static const char *cols[] = {"kind", "site", "provider", "order_id", "notification_id",
				     "amount", "detail", "since"};
	struct pn_table t, out;
	size_t	r;
	struct pn_config *cfg;
	char	threshold[32];
	int64_t	secs;
	int	opt, rc;

	optind = 0;	/* glibc: 0 re-initialises getopt after main() used it */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': params[0] = optarg; break;
		case 'p':
			if (!pn_opt_duration("--pending-older-than", optarg, &secs))
				return PN_EXIT_USAGE;
			snprintf(threshold, sizeof(threshold), "%lld seconds", (long long)secs);
			params[1] = threshold;
			break;
		case 'W': pn_table_set_wide(true); break;
		case 'f':
			if (!pn_format_parse(optarg, false, &fmt))
				return PN_EXIT_USAGE;
			break;
		case 'h':
			help(stdout);
			return 0;
		default:
			help(stderr);
			return PN_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		help(stderr);
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (params[0] != NULL && !pn_opt_site(cfg, "--site", params[0])) {
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	if (!pn_admin_query_cfg(cfg, PN_SQL_CONST(report_sql), 2, params, &t)) {
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
	"report", "[--site S] [--pending-older-than 30m]", "list what needs a human (for cron)",
	report_exec, help,
};

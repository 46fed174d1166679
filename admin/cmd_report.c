/*
 * cmd_report.c: paynotify report — what needs a human.  Non-zero exit when
 * the report is not empty, so that cron can alert.
 */
#include "config.h"

#include <getopt.h>
#include <string.h>

#include "admin.h"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify report [--site S] [--pending-older-than 30m]\n"
		"                        [--format table|csv|json]\n\n"
		"List what needs a human:\n"
		"  - notifications stored as unknown_order, amount_mismatch, merchant_mismatch,\n"
		"    mode_mismatch, txn_mismatch, duplicate_payment, paid_after_close,\n"
		"    conflicting_duplicate (\"(from query)\" when paynotify query stored it)\n"
		"  - orders still pending after the threshold with no notification at all\n"
		"  - orders paid or refunded without a stored notification that applied it\n"
		"Exit status 1 when the list is not empty, 0 when it is, 3 on error.\n"
		"The threshold is a PostgreSQL interval: 30m, 2h, 1 day.\n");
}

/* One query, one row per finding: kind, site, provider, order, id, detail, since. */
static const char report_sql[] =
	"SELECT kind, site, provider, order_id, notification_id, detail, since FROM ("
	" SELECT n.outcome AS kind, n.site, n.provider, n.order_id, n.id::text AS notification_id,"
	"        coalesce(n.outcome_detail, n.event_kind || ' ' || coalesce(n.amount_minor::text, '?')"
	"                 || ' ' || coalesce(n.currency, '')"
	"                 || coalesce(', order ' || o.amount_minor || ' ' || o.currency || ' '"
	"                             || o.status, ', no such order'))"
	"        || CASE WHEN n.source <> 'notification' THEN ' (from ' || n.source || ')'"
	"                ELSE '' END AS detail,"
	"        n.received_at AS since"
	"   FROM paynotify.notifications n"
	"   LEFT JOIN paynotify.orders o ON o.site = n.site AND o.order_id = n.order_id"
	"  WHERE n.outcome IN ('unknown_order', 'amount_mismatch', 'merchant_mismatch',"
	"                      'mode_mismatch', 'txn_mismatch', 'duplicate_payment',"
	"                      'paid_after_close', 'conflicting_duplicate')"
	"    AND ($1::text IS NULL OR n.site = $1)"
	" UNION ALL"
	" SELECT 'pending_without_notification', o.site, NULL, o.order_id, NULL,"
	"        o.amount_minor || ' ' || o.currency || ' pending since ' || o.created_at::text,"
	"        o.created_at"
	"   FROM paynotify.orders o"
	"  WHERE o.status = 'pending' AND o.created_at < now() - $2::interval"
	"    AND ($1::text IS NULL OR o.site = $1)"
	"    AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n"
	"                     WHERE n.site = o.site AND n.order_id = o.order_id)"
	" UNION ALL"
	" SELECT 'paid_without_notification', o.site, o.psp, o.order_id, NULL,"
	"        'status ' || o.status || ' but no stored notification applied it', o.updated_at"
	"   FROM paynotify.orders o"
	"  WHERE o.status IN ('paid', 'partially_refunded', 'refunded')"
	"    AND ($1::text IS NULL OR o.site = $1)"
	"    AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n"
	"                     WHERE n.site = o.site AND n.order_id = o.order_id"
	"                       AND n.outcome IN ('applied', 'paid_after_close'))"
	") r ORDER BY since, site, order_id";

static int
report_exec(int argc, char **argv, const char *config_path)
{
	static const struct option longopts[] = {
		{"site", required_argument, NULL, 's'},
		{"pending-older-than", required_argument, NULL, 'p'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *params[2] = {NULL, "30 minutes"};
	enum pn_format fmt = pn_format_default();
	struct pn_table t;
	int	opt, rc;

	optind = 0;	/* glibc: 0 re-initialises getopt after main() used it */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': params[0] = optarg; break;
		case 'p': params[1] = optarg; break;
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
	if (!pn_admin_query(config_path, report_sql, 2, params, &t))
		return PN_EXIT_FAILURE;
	pn_table_print(&t, fmt, stdout);
	fprintf(fmt == PN_FMT_TABLE ? stdout : stderr, "%zu item%s need%s a human\n", t.nrows,
		t.nrows == 1 ? "" : "s", t.nrows == 1 ? "s" : "");
	rc = t.nrows ? PN_EXIT_ATTENTION : PN_EXIT_OK;
	pn_table_free(&t);
	return rc;
}

const struct pn_cmd pn_cmd_report = {
	"report", "[--site S] [--pending-older-than 30m]", "list what needs a human (for cron)",
	report_exec, help,
};

/*
 * cmd_stats.c: paynotify stats — counters by site, provider, event kind and
 * outcome; deliveries and duplicates; the last notification per site and
 * provider.  --format prometheus writes the text exposition format for
 * node_exporter's textfile collector.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify stats [--site S] [--format table|csv|json|prometheus]\n"
		"                       [--output FILE] [--wide] [--follow-up]\n\n"
		"Counts of stored notifications by site, provider, event kind and outcome,\n"
		"with deliveries, duplicate deliveries and the last notification time; the\n"
		"outcome unhandled (an event type paynotify has no handling for) is counted\n"
		"per event_type (paynotify report --unhandled lists the recent ones).\n"
		"--output FILE (with --format prometheus) replaces FILE atomically, for\n"
		"node_exporter's textfile collector; when the database cannot be read FILE\n"
		"holds only paynotify_stats_up 0 (never stale counters) and the exit is 3:\n"
		"  paynotify stats --format prometheus --output "
		"/var/lib/prometheus/node-exporter/paynotify.prom\n"
		"--follow-up shows the backlog of the follow-up schedule (paynotify query\n"
		"--due) instead, per site: items due now, scheduled later, claimed by a run,\n"
		"done, expired, and the age of the oldest due one; the Prometheus format\n"
		"always has it (paynotify_follow_up_items,\n"
		"paynotify_follow_up_oldest_due_seconds).\n"
		"Exit status: 0, or 3 database error, 64 a bad option (a site not in the\n"
		"configuration), 78 configuration error.\n");
}

/*
 * The table (and csv, json): the same counts, the rows of outcome unhandled
 * split by event type (the provider's word: what paynotify has no handling
 * for, docs/PROVIDERS.md "Every event type"); event_type is empty on the
 * others.
 */
static const char stats_typed_sql[] =
	"SELECT site, provider, event_kind, outcome,"
	"       CASE WHEN outcome = 'unhandled' THEN coalesce(event_type, '(none)') END"
	"           AS event_type,"
	"       count(*) AS notifications,"
	"       sum(deliveries) AS deliveries, sum(deliveries - 1) AS duplicates,"
	"       max(last_delivery_at) AS last_delivery,"
	"       extract(epoch FROM max(last_delivery_at))::bigint AS last_delivery_epoch"
	"  FROM paynotify.notifications"
	" WHERE ($1::text IS NULL OR site = $1)"
	" GROUP BY site, provider, event_kind, outcome, 5"
	" ORDER BY site, provider, event_kind, outcome, 5";

/* Prometheus: one series per (site, provider, kind, outcome), as before. */
static const char stats_sql[] =
	"SELECT site, provider, event_kind, outcome, count(*) AS notifications,"
	"       sum(deliveries) AS deliveries, sum(deliveries - 1) AS duplicates,"
	"       max(last_delivery_at) AS last_delivery,"
	"       extract(epoch FROM max(last_delivery_at))::bigint AS last_delivery_epoch"
	"  FROM paynotify.notifications"
	" WHERE ($1::text IS NULL OR site = $1)"
	" GROUP BY site, provider, event_kind, outcome"
	" ORDER BY site, provider, event_kind, outcome";

/* Prometheus label values: escape \, " and newline. */
static void
label(FILE *f, const char *name, const char *v, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static bool
same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static void
print_prometheus(const struct pn_table *t, FILE *f)
{
	static const struct {
		const char *metric, *col, *type, *help;
	} m[] = {
		{"paynotify_notifications_total", "notifications", "counter",
		 "Distinct notifications stored."},
		{"paynotify_deliveries_total", "deliveries", "counter",
		 "Deliveries received for stored notifications (duplicates included)."},
		{"paynotify_duplicate_deliveries_total", "duplicates", "counter",
		 "Deliveries of notifications already stored."},
	};
	static const char last[] = "paynotify_last_notification_timestamp_seconds";
	size_t	i, r, first;

	for (i = 0; i < PN_ARRAY_LEN(m); i++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m[i].metric, m[i].help, m[i].metric,
			m[i].type);
		for (r = 0; r < t->nrows; r++) {
			fprintf(f, "%s{", m[i].metric);
			label(f, "site", pn_table_get(t, r, "site"), true);
			label(f, "provider", pn_table_get(t, r, "provider"), false);
			label(f, "event_kind", pn_table_get(t, r, "event_kind"), false);
			label(f, "outcome", pn_table_get(t, r, "outcome"), false);
			fprintf(f, "} %s\n", pn_table_get(t, r, m[i].col));
		}
	}
	/* Per site and provider: the rows come ordered by site, provider. */
	fprintf(f, "# HELP %s Time of the last delivery received, per site and provider.\n"
		"# TYPE %s gauge\n", last, last);
	for (first = 0; first < t->nrows; first = r) {
		const char *site = pn_table_get(t, first, "site");
		const char *prov = pn_table_get(t, first, "provider");
		long long max = 0;

		for (r = first; r < t->nrows && same(pn_table_get(t, r, "site"), site)
		     && same(pn_table_get(t, r, "provider"), prov); r++) {
			const char *v = pn_table_get(t, r, "last_delivery_epoch");
			long long e = v ? strtoll(v, NULL, 10) : 0;

			if (e > max)
				max = e;
		}
		fprintf(f, "%s{", last);
		label(f, "site", site, true);
		label(f, "provider", prov, false);
		fprintf(f, "} %lld\n", max);
	}
}

#define STATS_UP_HELP "# HELP paynotify_stats_up The last `paynotify stats` read the database " \
	"(1) or could not (0: the other series are absent).\n# TYPE paynotify_stats_up gauge\n"

/*
 * Write the exposition to a temporary file next to path, then rename it
 * over path: a reader (node_exporter) sees the old file or the new one,
 * never a partial or empty one.  t == NULL: the database could not be
 * read; the file then holds paynotify_stats_up 0 and nothing else, so that
 * old counters do not linger as if current.
 */
static void print_sources(const char *config_path, const char *site, FILE *f);
static void print_unhandled(const char *config_path, const char *site, FILE *f);
static void print_query_run(const char *config_path, FILE *f);
static void print_feed(const char *config_path, FILE *f);
static void print_follow_up(const char *config_path, const char *site, FILE *f);

static bool
write_textfile(const char *path, const struct pn_table *t, const char *config_path,
	       const char *site)
{
	char   *tmp, *slash;
	FILE   *f = NULL;
	int	fd;
	bool	ok = false;

	slash = strrchr(path, '/');
	tmp = slash ? pn_xasprintf("%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
	    : pn_xasprintf(".%s.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "paynotify: could not create a temporary file for \"%s\": %s\n",
			path, strerror(errno));
		free(tmp);
		return false;
	}
	f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		goto failed;
	}
	if (t != NULL) {
		print_prometheus(t, f);
		print_sources(config_path, site, f);
		print_unhandled(config_path, site, f);
		print_query_run(config_path, f);
		print_feed(config_path, f);
		print_follow_up(config_path, site, f);
	}
	fprintf(f, STATS_UP_HELP "paynotify_stats_up %d\n", t != NULL);
	if (fflush(f) != 0 || fchmod(fd, 0644) != 0 || fsync(fd) != 0)
		goto failed;
	if (fclose(f) != 0) {
		f = NULL;
		goto failed;
	}
	f = NULL;
	if (rename(tmp, path) != 0)
		goto failed;
	ok = true;
	goto done;
failed:
	fprintf(stderr, "paynotify: could not write \"%s\": %s\n", path, strerror(errno));
	if (f != NULL)
		fclose(f);
	unlink(tmp);
done:
	free(tmp);
	return ok;
}

/* Unhandled notifications by type (Prometheus). */
static const char unhandled_sql[] =
	"SELECT site, provider, coalesce(event_type, '(none)') AS event_type, count(*) AS events"
	"  FROM paynotify.notifications"
	" WHERE outcome = 'unhandled' AND ($1::text IS NULL OR site = $1)"
	" GROUP BY 1, 2, 3 ORDER BY 1, 2, 3";

static void
print_unhandled(const char *config_path, const char *site, FILE *f)
{
	const char *params[1] = {site};
	struct pn_table t;
	size_t	r;

	if (!pn_admin_query(config_path, PN_SQL_CONST(unhandled_sql), 1, params, &t))
		return;
	fprintf(f, "# HELP paynotify_unhandled_notifications_total Distinct notifications stored "
		"of an event type paynotify has no handling for, by type (paynotify report "
		"--unhandled).\n"
		"# TYPE paynotify_unhandled_notifications_total counter\n");
	for (r = 0; r < t.nrows; r++) {
		fprintf(f, "paynotify_unhandled_notifications_total{");
		label(f, "site", pn_table_get(&t, r, "site"), true);
		label(f, "provider", pn_table_get(&t, r, "provider"), false);
		label(f, "type", pn_table_get(&t, r, "event_type"), false);
		fprintf(f, "} %s\n", pn_table_get(&t, r, "events"));
	}
	pn_table_free(&t);
}

/* Where the events came from: notification, query (sql/005 source). */
static const char source_sql[] =
	"SELECT site, provider, source, count(*) AS events FROM paynotify.notifications"
	" WHERE ($1::text IS NULL OR site = $1)"
	" GROUP BY site, provider, source ORDER BY site, provider, source";

static void
print_sources(const char *config_path, const char *site, FILE *f)
{
	const char *params[1] = {site};
	struct pn_table t;
	size_t	r;

	if (!pn_admin_query(config_path, PN_SQL_CONST(source_sql), 1, params, &t))
		return;
	fprintf(f, "# HELP paynotify_events_by_source_total Distinct events stored, by where they "
		"came from (notification, query).\n"
		"# TYPE paynotify_events_by_source_total counter\n");
	for (r = 0; r < t.nrows; r++) {
		fprintf(f, "paynotify_events_by_source_total{");
		label(f, "site", pn_table_get(&t, r, "site"), true);
		label(f, "provider", pn_table_get(&t, r, "provider"), false);
		label(f, "source", pn_table_get(&t, r, "source"), false);
		fprintf(f, "} %s\n", pn_table_get(&t, r, "events"));
	}
	pn_table_free(&t);
}

/*
 * The event feed, per consumer group (README "Event feed"): events not
 * yet acknowledged, and acknowledgements refused because the events were
 * no longer held under the caller's lease (sql/012: stale_acks).  Before
 * schema 12 the column does not exist: nothing is printed.
 */
/* One series of metric a row of t, labelled with its column key, valued
 * with its column value. */
static void
series(FILE *f, const char *metric, const char *type, const char *help_text,
       const struct pn_table *t, const char *key, const char *value)
{
	size_t	r;

	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metric, help_text, metric, type);
	for (r = 0; r < t->nrows; r++) {
		fprintf(f, "%s{", metric);
		label(f, key, pn_table_get(t, r, key), true);
		fprintf(f, "} %s\n", pn_table_get(t, r, value));
	}
}

static const char feed_sql[] =
	"SELECT c.consumer, c.stale_acks,"
	"       (SELECT count(*) FROM paynotify.feed f WHERE f.consumer = c.consumer) AS events"
	"  FROM paynotify.feed_consumers c ORDER BY c.consumer";

static void
print_feed(const char *config_path, FILE *f)
{
	struct pn_table t;

	if (!pn_admin_query(config_path,
			    PN_SQL("SELECT count(*) FROM pg_attribute WHERE attrelid ="
				   " to_regclass('paynotify.feed_consumers')"
				   " AND attname = 'stale_acks' AND NOT attisdropped"), 0, NULL, &t))
		return;
	if (t.nrows != 1 || !t.cells[0] || strcmp(t.cells[0], "1") != 0) {
		pn_table_free(&t);
		return;
	}
	pn_table_free(&t);
	if (!pn_admin_query(config_path, PN_SQL_CONST(feed_sql), 0, NULL, &t))
		return;
	series(f, "paynotify_feed_events", "gauge", "Events in the feed not yet acknowledged, per "
	       "consumer group.", &t, "consumer", "events");
	series(f, "paynotify_feed_stale_acks_total", "counter", "Acknowledgements refused because "
	       "the event was no longer held under the caller's lease token (claimed again after "
	       "its lease ran out), per consumer group.", &t, "consumer", "stale_acks");
	pn_table_free(&t);
}

/* Does the one-value query sql answer true (a table exists)? */
static bool
answers_true(const char *config_path, struct pn_sql sql)
{
	struct pn_table t;
	bool	yes;

	if (!pn_admin_query(config_path, sql, 0, NULL, &t))
		return false;
	yes = t.nrows == 1 && t.cells[0] && strcmp(t.cells[0], "t") == 0;
	pn_table_free(&t);
	return yes;
}

/* The last `paynotify query` run (sql/006), when the table exists. */
static const char query_run_sql[] =
	"SELECT extract(epoch FROM finished_at)::bigint AS finished, exit_code, dry_run::text,"
	"       orders, asked, final, applied, waiting, not_found, refused, errors, attention"
	"  FROM paynotify.query_runs"
	" WHERE to_regclass('paynotify.query_runs') IS NOT NULL"
	" ORDER BY id DESC LIMIT 1";

static void
print_query_run(const char *config_path, FILE *f)
{
	static const char *const results[] = {"orders", "asked", "final", "applied", "waiting",
					      "not_found", "refused", "errors", "attention"};
	struct pn_table t;
	size_t	i;

	if (!answers_true(config_path, PN_SQL("SELECT to_regclass('paynotify.query_runs') "
					      "IS NOT NULL")))
		return;
	if (!pn_admin_query(config_path, PN_SQL_CONST(query_run_sql), 0, NULL, &t))
		return;
	if (t.nrows == 1) {
		fprintf(f, "# HELP paynotify_query_last_run_timestamp_seconds End of the last "
			"`paynotify query` run.\n"
			"# TYPE paynotify_query_last_run_timestamp_seconds gauge\n"
			"paynotify_query_last_run_timestamp_seconds %s\n",
			pn_table_get(&t, 0, "finished"));
		fprintf(f, "# HELP paynotify_query_last_run_exit_code Exit status of the last run "
			"(0 nothing to do, 1 needs a human, 3 could not do the job).\n"
			"# TYPE paynotify_query_last_run_exit_code gauge\n"
			"paynotify_query_last_run_exit_code %s\n", pn_table_get(&t, 0, "exit_code"));
		fprintf(f, "# HELP paynotify_query_last_run_orders Orders of the last run, by "
			"result.\n# TYPE paynotify_query_last_run_orders gauge\n");
		for (i = 0; i < PN_ARRAY_LEN(results); i++)
			fprintf(f, "paynotify_query_last_run_orders{result=\"%s\"} %s\n", results[i],
				pn_table_get(&t, 0, results[i]));
	}
	pn_table_free(&t);
}

/*
 * The follow-up schedule of `paynotify query --due` (sql/017), per site:
 * due (scheduled, the time has come, no run holds it), later, claimed (a
 * run holds it under a lease), done, expired; the oldest due item's age
 * (claimed ones included: not answered yet), 0 when none is due.  Before
 * schema 17 the table does not exist: nothing is printed.
 */
static const char follow_up_sql[] =
	"SELECT site,"
	"       count(*) FILTER (WHERE state = 'scheduled' AND next_ask_at <= now()"
	"                          AND (claimed_until IS NULL OR claimed_until <= now())) AS due,"
	"       count(*) FILTER (WHERE state = 'scheduled' AND next_ask_at > now()"
	"                          AND (claimed_until IS NULL OR claimed_until <= now())) AS later,"
	"       count(*) FILTER (WHERE state = 'scheduled' AND claimed_until > now()) AS claimed,"
	"       count(*) FILTER (WHERE state = 'done') AS done,"
	"       count(*) FILTER (WHERE state = 'expired') AS expired,"
	"       coalesce(floor(extract(epoch FROM now() - min(next_ask_at)"
	"                FILTER (WHERE state = 'scheduled' AND next_ask_at <= now())))::bigint, 0)"
	"           AS oldest_due_seconds"
	"  FROM paynotify.follow_ups"
	" WHERE ($1::text IS NULL OR site = $1)"
	" GROUP BY site ORDER BY site";

static bool
follow_up_query(const char *config_path, const char *site, struct pn_table *t)
{
	const char *params[1] = {site};

	return answers_true(config_path, PN_SQL("SELECT to_regclass('paynotify.follow_ups') "
						"IS NOT NULL"))
	    && pn_admin_query(config_path, PN_SQL_CONST(follow_up_sql), 1, params, t);
}

static void
print_follow_up(const char *config_path, const char *site, FILE *f)
{
	static const char *const states[] = {"due", "later", "claimed", "done", "expired"};
	struct pn_table t;
	size_t	r, i;

	if (!follow_up_query(config_path, site, &t))
		return;
	fprintf(f, "# HELP paynotify_follow_up_items Items of the follow-up schedule (paynotify "
		"query --due), by state: due now, scheduled later, claimed by a run, done, "
		"expired.\n# TYPE paynotify_follow_up_items gauge\n");
	for (r = 0; r < t.nrows; r++)
		for (i = 0; i < PN_ARRAY_LEN(states); i++) {
			fprintf(f, "paynotify_follow_up_items{");
			label(f, "site", pn_table_get(&t, r, "site"), true);
			label(f, "state", states[i], false);
			fprintf(f, "} %s\n", pn_table_get(&t, r, states[i]));
		}
	series(f, "paynotify_follow_up_oldest_due_seconds", "gauge", "How long the oldest due item "
	       "of the follow-up schedule has been due (0: none is due).", &t, "site",
	       "oldest_due_seconds");
	pn_table_free(&t);
}

static int
stats_exec(int argc, char **argv, const char *config_path)
{
	const char *params[1] = {NULL}, *output = NULL;
	enum pn_format fmt = pn_format_default();
	struct pn_config *cfg;
	struct pn_table t;
	bool	follow_up = false, wide = false;
	int	rc;
	const struct pn_arg options[] = {
		{"site", required_argument, 0, PN_ARG_STR, .str = &params[0]},
		{"format", required_argument, 0, PN_ARG_FORMAT_PROM, .fmt = &fmt},
		{"output", required_argument, 0, PN_ARG_STR, .str = &output},
		{"wide", no_argument, 0, PN_ARG_FLAG, .flag = &wide},
		{"follow-up", no_argument, 0, PN_ARG_FLAG, .flag = &follow_up},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "stats", .help = help, .opts = options,
				     .rest = PN_REST_HELP};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	if (wide)
		pn_table_set_wide(true);
	if (output != NULL && (fmt != PN_FMT_PROMETHEUS || *output == '\0')) {
		fprintf(stderr, "paynotify: --output FILE needs --format prometheus\n");
		return PN_EXIT_USAGE;
	}
	if (follow_up && (fmt == PN_FMT_PROMETHEUS || output != NULL)) {
		fprintf(stderr, "paynotify: --follow-up is a table (table, csv, json); the "
			"prometheus format always has the follow-up series\n");
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (params[0] != NULL && !pn_opt_site(cfg, "--site", params[0])) {
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	if (follow_up) {
		pn_cfg_free(cfg);
		if (!follow_up_query(config_path, params[0], &t)) {
			fprintf(stderr, "paynotify: stats: the follow-up schedule could not be "
				"read (schema 17: paynotify migrate)\n");
			return PN_EXIT_UNAVAILABLE;
		}
		pn_table_print(&t, fmt, stdout);
		pn_table_free(&t);
		return PN_EXIT_OK;
	}
	if (!pn_admin_query_cfg(cfg, fmt == PN_FMT_PROMETHEUS ? PN_SQL_CONST(stats_sql)
				: PN_SQL_CONST(stats_typed_sql), 1, params, &t)) {
		pn_cfg_free(cfg);
		if (output != NULL)
			(void)write_textfile(output, NULL, NULL, NULL);
		return PN_EXIT_UNAVAILABLE;
	}
	pn_cfg_free(cfg);
	if (output != NULL) {
		bool ok = write_textfile(output, &t, config_path, params[0]);

		pn_table_free(&t);
		return ok ? PN_EXIT_OK : PN_EXIT_IOERR;
	}
	if (fmt == PN_FMT_PROMETHEUS) {
		print_prometheus(&t, stdout);
		print_sources(config_path, params[0], stdout);
		print_unhandled(config_path, params[0], stdout);
		print_query_run(config_path, stdout);
		print_feed(config_path, stdout);
		print_follow_up(config_path, params[0], stdout);
	} else {
		size_t	r;
		bool	typed = false;

		pn_table_optional(&t, "last_delivery_epoch");	/* for machines; last_delivery says it */
		for (r = 0; r < t.nrows; r++)
			typed = typed || pn_table_get(&t, r, "event_type") != NULL;
		if (!typed)	/* no unhandled rows: an empty column may go */
			pn_table_optional(&t, "event_type");
		pn_table_print(&t, fmt, stdout);
	}
	pn_table_free(&t);
	return PN_EXIT_OK;
}

const struct pn_cmd pn_cmd_stats = {
	"stats", "[--site S] [--format prometheus [--output FILE]]", "counters, for dashboards and Prometheus",
	stats_exec, help,
};

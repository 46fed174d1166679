/*
 * cmd_purge.c: paynotify purge — archive old, resolved notifications to a
 * file (every column, raw bytes included, in PostgreSQL's CSV COPY format)
 * and delete them, in small transactions.
 *
 * What is never deleted:
 *   - anything received or redelivered within the redelivery horizon
 *     (--keep-days, default 90, never less than 30: Stripe lets a merchant
 *     resend any event of the last 30 days, and a redelivered event whose
 *     row is gone would be stored and applied again);
 *   - anything whose outcome is not resolved: only applied, already_applied,
 *     ignored, foreign_site (a sibling site's event) and unhandled rows (a
 *     type paynotify has no handling for, listed by `report --unhandled`
 *     for days before it is this old) go; unknown_order, every mismatch,
 *     refund_failed, duplicates that need a refund and any outcome this
 *     build does not know are kept, until a person resolves the row
 *     (`paynotify resolve`, schema 14) and as long as it keeps the outcome
 *     that was resolved and belongs to no open case;
 *   - an event of a dispute or complaint whose case (paynotify.cases) is
 *     still open: it goes only once the provider closed the case.
 *
 * Each batch is one transaction: lock up to --batch rows (FOR UPDATE SKIP
 * LOCKED: a row a receiver is touching is left for the next run), COPY
 * them to the archive, fsync the archive, delete them, commit.  Ingest
 * never waits for it: new notifications never touch old rows, and the rows
 * purge locks are beyond the horizon.  The archive holds every row before
 * its delete commits; a failure after the fsync leaves rows in the archive
 * that are still in the table, which the documented restore skips (ON
 * CONFLICT DO NOTHING).  Restore: docs/OPERATIONS.md "Retention".
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"


#define MIN_KEEP_DAYS 30
#define DEFAULT_KEEP_DAYS 90

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify purge --archive FILE [--keep-days N] [--before YYYY-MM-DD]\n"
		"                       [--batch N] [--pause-ms N] [--dry-run] [-c FILE]\n\n"
		"Archive resolved notifications (applied, already_applied, ignored,\n"
		"foreign_site, unhandled, and the events of disputes and complaints that are\n"
		"closed) whose first and last delivery are both older than the horizon, then\n"
		"delete them in batches.  Unresolved ones (unknown_order, mismatches,\n"
		"refund_failed, duplicates needing a refund, every event of a dispute or\n"
		"complaint still open, ...) are never deleted unless a person resolved them\n"
		"(`paynotify resolve`); purge exits 1 when old unresolved ones are waiting.\n\n"
		"  --archive FILE    where the rows go (PostgreSQL CSV COPY format with a header,\n"
		"                    raw_body as \\\\x hex); created mode 0600, never over an\n"
		"                    existing file: if FILE exists, the first free FILE with\n"
		"                    .1, .2, ... before its extension (a.csv: a.1.csv)\n"
		"  --keep-days N     the redelivery horizon in days (default %d, at least %d:\n"
		"                    Stripe resends events up to 30 days old)\n"
		"  --before DATE     purge only rows older than DATE (UTC midnight); it must lie\n"
		"                    beyond the horizon\n"
		"  --batch N         rows per transaction (1..10000, default 500)\n"
		"  --pause-ms N      pause between batches (0..60000, default 20)\n"
		"  --dry-run         count what would go; change nothing, write no archive\n"
		"  -c, --config FILE the configuration (its [database] admin_conninfo)\n\n"
		"Restore an archive: see docs/OPERATIONS.md \"Retention\".\n"
		"Exit: 0 done, 1 done but unresolved old notifications need a human, 3 database or\n"
		"I/O failure, 64 usage, 78 configuration.\n", DEFAULT_KEEP_DAYS, MIN_KEEP_DAYS);
}

/* Resolved outcomes: a whitelist, so that an outcome added later is kept. */
#define RESOLVED "ARRAY['applied', 'already_applied', 'ignored', 'foreign_site', 'unhandled']"
/*
 * A row that may go: a resolved outcome; a row a person resolved
 * (`paynotify resolve`, schema 14) that still has the outcome they resolved
 * and belongs to no open case; or an event of a dispute or complaint whose
 * case is closed (schema 10).  A row of a case that is
 * still open (or has no case row) is never purged: it is evidence a
 * person is working with.
 */
#define OPEN_CASE \
	" EXISTS (SELECT 1 FROM paynotify.cases c WHERE c.site = notifications.site" \
	"         AND c.provider = notifications.provider" \
	"         AND c.case_id = notifications.case_id AND c.closed_at IS NULL) "
#define PURGEABLE \
	" (outcome = ANY (" RESOLVED ")" \
	"  OR (resolved_outcome IS NOT DISTINCT FROM outcome" \
	"      AND outcome NOT IN ('dispute', 'complaint') AND NOT" OPEN_CASE ")" \
	"  OR (outcome IN ('dispute', 'complaint')" \
	"  AND EXISTS (SELECT 1 FROM paynotify.cases c WHERE c.site = notifications.site" \
	"              AND c.provider = notifications.provider" \
	"              AND c.case_id = notifications.case_id AND c.closed_at IS NOT NULL))) "
#define ELIGIBLE \
	" received_at < $1::timestamptz AND last_delivery_at < $1::timestamptz "

static const char cutoff_sql[] =
	"SELECT CASE WHEN $1::date IS NULL THEN now() - make_interval(days => $2::int)"
	"            ELSE ($1::date::timestamp AT TIME ZONE 'UTC') END AS cutoff,"
	"       coalesce($1::date::timestamp AT TIME ZONE 'UTC'"
	"                > now() - make_interval(days => $2::int), false) AS too_young";

static const char plan_sql[] =
	"SELECT count(*) FILTER (WHERE" PURGEABLE ") AS purge,"
	"       coalesce(sum(octet_length(raw_body)) FILTER (WHERE" PURGEABLE "), 0)"
	"         AS raw_bytes,"
	"       count(*) FILTER (WHERE NOT" PURGEABLE ") AS unresolved,"
	"       min(received_at) FILTER (WHERE" PURGEABLE ") AS oldest,"
	"       max(received_at) FILTER (WHERE" PURGEABLE ") AS newest"
	"  FROM paynotify.notifications WHERE" ELIGIBLE;

static const char batch_table_sql[] =
	"CREATE TEMP TABLE IF NOT EXISTS pn_purge_batch (id bigint PRIMARY KEY) "
	"ON COMMIT DELETE ROWS";

static const char pick_sql[] =
	"INSERT INTO pn_purge_batch "
	"SELECT id FROM paynotify.notifications WHERE" ELIGIBLE
	"   AND" PURGEABLE "AND id > $2::bigint "
	" ORDER BY id LIMIT $3::int FOR UPDATE SKIP LOCKED";

static const char picked_sql[] =
	"SELECT count(*) AS n, coalesce(max(id), 0) AS last FROM pn_purge_batch";

#define COPY_SELECT \
	"COPY (SELECT n.* FROM paynotify.notifications n JOIN pn_purge_batch b ON b.id = n.id " \
	"ORDER BY n.id) TO STDOUT WITH (FORMAT csv"
static const char copy_first_sql[] = COPY_SELECT ", HEADER)";
static const char copy_sql[] = COPY_SELECT ")";

static const char delete_sql[] =
	"WITH d AS (DELETE FROM paynotify.notifications n USING pn_purge_batch b "
	"WHERE n.id = b.id RETURNING 1) SELECT count(*) AS n FROM d";

static const char confirm_asks_sql[] =
	"WITH d AS (DELETE FROM paynotify.confirm_asks"
	"            WHERE asked_at < now() - interval '1 day' RETURNING 1)"
	" SELECT count(*) AS n FROM d";

static bool
parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	return pn_parse_i64(s, out) && *out >= lo && *out <= hi;
}

/* YYYY-MM-DD, a real calendar date. */
static bool
valid_date(const char *s)
{
	struct tm tm = {0};
	int	y, m, d;
	char	extra;

	if (strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &extra) != 3
	    || s[4] != '-' || s[7] != '-')
		return false;
	if (y < 2000 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
		return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = m - 1;
	tm.tm_mday = d;
	tm.tm_hour = 12;
	if (timegm(&tm) == (time_t)-1)
		return false;
	return tm.tm_mday == d && tm.tm_mon == m - 1;	/* 2026-02-30 normalises away */
}

/* --keep-days: days, MIN_KEEP_DAYS or more */
static bool
keep_days_arg(const struct pn_arg *arg, const char *value)
{
	int64_t *keep_days = arg->dest;

	if (!parse_int(value, 0, 36500, keep_days)) {
		fprintf(stderr, "paynotify: purge: invalid --keep-days \"%s\" "
			"(days, %d..36500)\n", value, MIN_KEEP_DAYS);
		return false;
	}
	if (*keep_days < MIN_KEEP_DAYS) {
		fprintf(stderr, "paynotify: purge: refusing --keep-days %" PRId64 ": "
			"providers redeliver for longer (Stripe resends events up to "
			"30 days old); the minimum is %d\n", *keep_days, MIN_KEEP_DAYS);
		return false;
	}
	return true;
}

/* --before: YYYY-MM-DD */
static bool
before_arg(const struct pn_arg *arg, const char *value)
{
	if (!valid_date(value)) {
		fprintf(stderr, "paynotify: purge: invalid --before \"%s\" "
			"(expected YYYY-MM-DD)\n", value);
		return false;
	}
	*(const char **)arg->dest = value;
	return true;
}

/* --batch, --pause-ms: a whole number from arg->min to arg->max */
static bool
range_arg(const struct pn_arg *arg, const char *value)
{
	if (!parse_int(value, arg->min, arg->max, arg->dest)) {
		fprintf(stderr, "paynotify: purge: invalid --%s \"%s\" (%" PRId64 "..%" PRId64
			")\n", arg->name, value, arg->min, arg->max);
		return false;
	}
	return true;
}

static bool
query1(PGconn *conn, struct pn_sql sql, int n, const char *const *params, struct pn_table *t,
       struct pn_err *err)
{
	if (!pn_db_query(conn, sql, n, params, t, err))
		return false;
	if (t->nrows != 1) {
		pn_err_set(err, "unexpected result (%zu rows)", t->nrows);
		pn_table_free(t);
		return false;
	}
	return true;
}

/*
 * Create the archive, never over an existing file: FILE if it does not
 * exist, else the first free FILE with ".1", ".2", ... before its
 * extension (notifications-2026-12-01.csv, then notifications-2026-12-01.1.csv),
 * each tried with O_EXCL, so that two purges on one day (cron's
 * `$(date +%F)` names) both succeed and neither touches the other's rows.
 * *used: the name created (owned by the caller).
 */
#define MAX_ARCHIVE_SUFFIX 9999

static int
open_archive(const char *path, char **used)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	const char *dot = strrchr(base, '.');
	size_t	stem;
	int	fd, n;

	*used = pn_xstrdup(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0 || errno != EEXIST)
		return fd;
	/* a dot that starts the name (".csv") is no extension */
	stem = (dot != NULL && dot != base) ? (size_t)(dot - path) : strlen(path);
	for (n = 1; n <= MAX_ARCHIVE_SUFFIX; n++) {
		free(*used);
		*used = pn_xasprintf("%.*s.%d%s", (int)stem, path, n, path + stem);
		fd = open(*used, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

static void
rollback(PGconn *conn)
{
	struct pn_err e;

	if (!pn_db_query(conn, PN_SQL("ROLLBACK"), 0, NULL, NULL, &e))
		fprintf(stderr, "paynotify: purge: %s\n", e.msg);
}

static int
purge_exec(int argc, char **argv, const char *config_path)
{
	const char *archive = NULL, *before = NULL;
	int64_t	keep_days = DEFAULT_KEEP_DAYS, batch = 500, pause_ms = 20;
	bool	dry_run = false;
	struct pn_config *cfg = NULL;
	PGconn *conn = NULL;
	struct pn_table t;
	struct pn_err err;
	FILE   *out = NULL;
	char   *archive_used = NULL;
	char	cutoff[64], keep_txt[24], batch_txt[24], last_txt[24] = "0";
	int64_t	purge_n = 0, unresolved = 0, done = 0, bytes = 0, nb, asks = 0;
	int	rc, fd;
	bool	first = true;
	const struct pn_arg options[] = {
		{"archive", required_argument, 0, PN_ARG_STR, .str = &archive},
		{"keep-days", required_argument, 0, PN_ARG_CALL, .dest = &keep_days,
		 .set = keep_days_arg},
		{"before", required_argument, 0, PN_ARG_CALL, .dest = &before, .set = before_arg},
		{"batch", required_argument, 0, PN_ARG_CALL, .dest = &batch, .set = range_arg,
		 .min = 1, .max = 10000},
		{"pause-ms", required_argument, 0, PN_ARG_CALL, .dest = &pause_ms, .set = range_arg,
		 .min = 0, .max = 60000},
		{"dry-run", no_argument, 0, PN_ARG_FLAG, .flag = &dry_run},
		{"config", required_argument, 'c', PN_ARG_STR, .str = &config_path},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "purge", .help = help, .opts = options,
				     .rest = PN_REST_NAMED};

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_FAILED;
	if (archive == NULL && !dry_run) {
		fprintf(stderr, "paynotify: purge: --archive FILE is required (or --dry-run): "
			"nothing is deleted without a copy\n");
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if ((conn = pn_db_connect(cfg, &err)) == NULL)
		goto failed;

	snprintf(keep_txt, sizeof(keep_txt), "%" PRId64, keep_days);
	snprintf(batch_txt, sizeof(batch_txt), "%" PRId64, batch);
	{
		const char *p[2] = {before, keep_txt};

		if (!query1(conn, PN_SQL_CONST(cutoff_sql), 2, p, &t, &err))
			goto failed;
		if (strcmp(pn_table_get(&t, 0, "too_young"), "t") == 0) {
			fprintf(stderr, "paynotify: purge: refusing --before %s: it is inside the "
				"%" PRId64 "-day redelivery horizon\n", before, keep_days);
			pn_table_free(&t);
			rc = PN_EXIT_USAGE;
			goto done;
		}
		snprintf(cutoff, sizeof(cutoff), "%s", pn_table_get(&t, 0, "cutoff"));
		pn_table_free(&t);
	}
	{
		const char *p[1] = {cutoff};
		const char *v;

		if (!query1(conn, PN_SQL_CONST(plan_sql), 1, p, &t, &err))
			goto failed;
		if (!pn_parse_i64(pn_table_get(&t, 0, "purge"), &purge_n)
		    || !pn_parse_i64(pn_table_get(&t, 0, "unresolved"), &unresolved)) {
			pn_table_free(&t);
			pn_err_set(&err, "unexpected counts");
			goto failed;
		}
		printf("cutoff %s (horizon %" PRId64 " days): %" PRId64 " resolved notification%s "
		       "to %s, %s bytes of raw bodies", cutoff, keep_days, purge_n,
		       purge_n == 1 ? "" : "s", dry_run ? "purge (dry run)" : "archive and delete",
		       pn_table_get(&t, 0, "raw_bytes"));
		if ((v = pn_table_get(&t, 0, "oldest")) != NULL)
			printf(", received %s .. %s", v, pn_table_get(&t, 0, "newest"));
		printf("\n");
		pn_table_free(&t);
		if (unresolved > 0)
			printf("kept: %" PRId64 " unresolved notification%s older than the cutoff "
			       "(unknown_order, mismatches, duplicates to refund...): resolve them "
			       "(`paynotify report`, then `paynotify replay --apply` or\n"
			       "`paynotify resolve`)\n", unresolved,
			       unresolved == 1 ? "" : "s");
	}
	if (dry_run) {
		rc = unresolved > 0 ? PN_EXIT_ATTENTION : PN_EXIT_OK;
		goto done;
	}

	fd = open_archive(archive, &archive_used);
	if (fd < 0 || (out = fdopen(fd, "w")) == NULL) {
		pn_err_set(&err, "could not create the archive %s: %s", archive_used,
			   strerror(errno));
		if (fd >= 0)
			close(fd);
		goto failed;
	}
	archive = archive_used;
	if (!pn_db_query(conn, PN_SQL_CONST(batch_table_sql), 0, NULL, NULL, &err))
		goto failed;
	for (;;) {
		const char *p[3] = {cutoff, last_txt, batch_txt};
		int64_t	n = 0, deleted = 0;

		if (!pn_db_query(conn, PN_SQL("BEGIN"), 0, NULL, NULL, &err))
			goto failed;
		if (!pn_db_query(conn, PN_SQL_CONST(pick_sql), 3, p, NULL, &err)
		    || !query1(conn, PN_SQL_CONST(picked_sql), 0, NULL, &t, &err)) {
			rollback(conn);
			goto failed;
		}
		if (!pn_parse_i64(pn_table_get(&t, 0, "n"), &n))
			n = 0;
		snprintf(last_txt, sizeof(last_txt), "%s", pn_table_get(&t, 0, "last"));
		pn_table_free(&t);
		if (n == 0) {
			rollback(conn);
			break;
		}
		nb = 0;
		if (first ? !pn_db_copy_out(conn, PN_SQL_CONST(copy_first_sql), out, &nb, &err)
			  : !pn_db_copy_out(conn, PN_SQL_CONST(copy_sql), out, &nb, &err)) {
			rollback(conn);
			goto failed;
		}
		/* the rows are on disk before their delete commits */
		if (fflush(out) != 0 || fsync(fileno(out)) != 0) {
			pn_err_set(&err, "could not write the archive %s: %s", archive,
				   strerror(errno));
			rollback(conn);
			goto failed;
		}
		first = false;
		bytes += nb;
		if (!query1(conn, PN_SQL_CONST(delete_sql), 0, NULL, &t, &err)) {
			rollback(conn);
			goto failed;
		}
		if (!pn_parse_i64(pn_table_get(&t, 0, "n"), &deleted))
			deleted = -1;
		pn_table_free(&t);
		if (deleted != n) {
			pn_err_set(&err, "deleted %" PRId64 " rows of a batch of %" PRId64, deleted, n);
			rollback(conn);
			goto failed;
		}
		if (!pn_db_query(conn, PN_SQL("COMMIT"), 0, NULL, NULL, &err))
			goto failed;
		done += n;
		if (pause_ms > 0) {
			struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};

			nanosleep(&ts, NULL);
		}
	}
	if (fclose(out) != 0) {
		out = NULL;
		pn_err_set(&err, "could not close the archive %s: %s", archive, strerror(errno));
		goto failed;
	}
	out = NULL;
	printf("purged %" PRId64 " notification%s; archive %s (%" PRId64 " bytes)\n", done,
	       done == 1 ? "" : "s", archive, bytes);
	/* confirm's rate-limit rows: no use after confirm.min_interval_s (at
	 * most an hour); kept a day for a look at who asked */
	if (!query1(conn, PN_SQL_CONST(confirm_asks_sql), 0, NULL, &t, &err))
		goto failed;
	if (pn_parse_i64(pn_table_get(&t, 0, "n"), &asks) && asks > 0)
		printf("deleted %" PRId64 " confirm ask record%s older than a day\n", asks,
		       asks == 1 ? "" : "s");
	pn_table_free(&t);
	rc = unresolved > 0 ? PN_EXIT_ATTENTION : PN_EXIT_OK;
	goto done;

failed:
	fprintf(stderr, "paynotify: purge: %s", err.msg);
	if (done > 0)
		fprintf(stderr, " (after %" PRId64 " rows purged and archived)", done);
	fprintf(stderr, "\n");
	rc = PN_EXIT_FAILED;
done:
	if (out != NULL)
		fclose(out);
	PQfinish(conn);
	pn_cfg_free(cfg);
	free(archive_used);
	return rc;
}

const struct pn_cmd pn_cmd_purge = {
	"purge", "--archive FILE [--keep-days N] [--before DATE] [--dry-run]",
	"archive and delete old resolved notifications (never inside the redelivery horizon)",
	purge_exec, help,
};

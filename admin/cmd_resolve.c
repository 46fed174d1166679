/*
 * cmd_resolve.c: paynotify resolve — a person acknowledges what `paynotify
 * report` lists, so that report (and purge) can return 0 again.
 *
 * The expected case: a Stripe account or Alipay app shared with another
 * merchant stores that merchant's genuine events as merchant_mismatch.
 * Each is shown once on `report`; after a person has looked, `resolve`
 * records on the row who (the database role, and the login that ran the
 * command), when (the database's now()) and why (--note), and the outcome
 * the person looked at (schema 14, sql/014_resolutions.sql).  A resolved
 * row leaves `report`, and `purge` may archive and delete it beyond the
 * redelivery horizon.  A resolution holds only while the row keeps that
 * outcome: a row that `replay --apply` or `query` moves on is listed again.
 *
 * Only outcomes that `report` lists can be resolved (a whitelist: an
 * outcome added later is not resolvable until someone decides it may be).
 * Final outcomes (applied, already_applied, ignored, foreign_site,
 * unhandled, combined) have nothing to resolve; disputes and complaints end
 * when the provider closes the case (paynotify.cases), never by hand.
 *
 * By id, all or nothing: one id that does not exist or is not resolvable
 * and nothing is resolved (exit 64), so the command can simply be re-run
 * once the list is right.  An id already resolved (with its outcome
 * unchanged) is left as it is and said so.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "args.h"

#define MAX_IDS 1000
#define MAX_NOTE 1000		/* bytes, as the CHECK of sql/014 */
#define MAX_LOGIN 64

/* The outcomes `paynotify report` lists, each of which a person may resolve. */
static const char *const resolvable[] = {
	"unknown_order", "amount_mismatch", "merchant_mismatch", "mode_mismatch",
	"duplicate_payment", "paid_after_close", "conflicting_duplicate", "txn_mismatch",
	"missing_id", "refund_failed", "pending_confirmation", NULL,
};
/* As a PostgreSQL array literal, the parameter of the statements below. */
static const char resolvable_array[] =
	"{unknown_order,amount_mismatch,merchant_mismatch,mode_mismatch,duplicate_payment,"
	"paid_after_close,conflicting_duplicate,txn_mismatch,missing_id,refund_failed,"
	"pending_confirmation}";

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify resolve ID... --note TEXT [--dry-run] [--format F]\n"
		"       paynotify resolve --outcome O [--site S] [--provider P] [--older-than D]\n"
		"                         --note TEXT [--dry-run] [--format table|csv|json]\n\n"
		"Acknowledge notifications that `paynotify report` lists: record on each who\n"
		"(the database role, and $SUDO_USER or else $USER), when and why (--note).\n"
		"A resolved notification leaves `report`, and `purge` may remove it once it\n"
		"is beyond the redelivery horizon.  It is listed again if its outcome changes\n"
		"later (replay --apply, query).\n\n"
		"  ID...             notification ids (report's notification_id column); all or\n"
		"                    nothing: an unknown id or one with nothing to resolve and\n"
		"                    nothing is resolved\n"
		"  --outcome O       instead of ids: every unresolved notification with outcome O\n"
		"                    (one of: unknown_order, amount_mismatch, merchant_mismatch,\n"
		"                    mode_mismatch, duplicate_payment, paid_after_close,\n"
		"                    conflicting_duplicate, txn_mismatch, missing_id,\n"
		"                    refund_failed, pending_confirmation)\n"
		"  --site S          with --outcome: only site S\n"
		"  --provider P      with --outcome: only provider P\n"
		"  --older-than D    with --outcome: only those received more than D ago (2h, 7d)\n"
		"  --note TEXT       why (required; 1..%d bytes of UTF-8, no control characters)\n"
		"  --dry-run         show what would be resolved; change nothing\n"
		"  --format F        table, csv or json (default: a table on a terminal, else CSV)\n"
		"  -c, --config FILE the configuration (its [database] admin_conninfo)\n\n"
		"Applied, already_applied, ignored, foreign_site, unhandled and combined are\n"
		"final (nothing to resolve); disputes and complaints end when the provider\n"
		"closes the case.\n"
		"Exit: 0 resolved (or nothing matched), 3 database error, 64 usage (an option,\n"
		"an unknown id, a notification with nothing to resolve), 78 configuration.\n",
		MAX_NOTE);
}

#define RETURNING \
	" RETURNING id::text AS id, site, provider, outcome, order_id, received_at," \
	"           resolved_at, resolved_by, resolution_note AS note"
#define RESOLVED_BY " current_user || coalesce(' (' || $2::text || ')', '')"
/* not resolved yet, or resolved when it had another outcome */
#define OPEN " (resolved_at IS NULL OR resolved_outcome IS DISTINCT FROM outcome)"

static const char lock_sql[] =
	"SELECT id::text AS id, outcome, resolved_at, resolved_by,"
	"       resolved_outcome IS NOT DISTINCT FROM outcome AS still_resolved"
	"  FROM paynotify.notifications WHERE id = ANY ($1::bigint[]) ORDER BY id FOR UPDATE";

static const char by_id_sql[] =
	"UPDATE paynotify.notifications SET resolved_at = now(), resolved_by =" RESOLVED_BY ","
	"       resolution_note = $3::text, resolved_outcome = outcome"
	" WHERE id = ANY ($1::bigint[]) AND outcome = ANY ($4::text[]) AND" OPEN
	RETURNING;

static const char by_class_sql[] =
	"WITH r AS (UPDATE paynotify.notifications SET resolved_at = now(), resolved_by ="
	RESOLVED_BY ", resolution_note = $3::text, resolved_outcome = outcome"
	" WHERE outcome = $1::text AND outcome = ANY ($4::text[]) AND" OPEN
	"   AND ($5::text IS NULL OR site = $5::text)"
	"   AND ($6::text IS NULL OR provider = $6::text)"
	"   AND ($7::interval IS NULL OR received_at < now() - $7::interval)"
	RETURNING ") SELECT * FROM r ORDER BY id::bigint";

static bool
is_resolvable(const char *outcome)
{
	for (const char *const *o = resolvable; *o; o++)
		if (strcmp(*o, outcome) == 0)
			return true;
	return false;
}

/* --note: 1..MAX_NOTE bytes of UTF-8 without control characters. */
static bool
valid_note(const char *s)
{
	size_t	n = strlen(s);

	if (n == 0 || n > MAX_NOTE) {
		fprintf(stderr, "paynotify: resolve: --note must be 1..%d bytes (got %zu)\n",
			MAX_NOTE, n);
		return false;
	}
	if (!pn_utf8_valid(s, n)) {
		fprintf(stderr, "paynotify: resolve: --note is not valid UTF-8\n");
		return false;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f) {
			fprintf(stderr, "paynotify: resolve: --note may not contain control "
				"characters (newlines, tabs, ...)\n");
			return false;
		}
	return true;
}

/*
 * Who ran the command, as the environment says ($SUDO_USER for `sudo -u
 * paynotify paynotify resolve`, else $USER): self-reported, recorded beside
 * the database role that authenticated; NULL when unset or not a plain
 * login name.
 */
static const char *
login_name(void)
{
	const char *v = getenv("SUDO_USER");

	if (v == NULL || *v == '\0')
		v = getenv("USER");
	if (v == NULL || *v == '\0' || strlen(v) > MAX_LOGIN)
		return NULL;
	for (const char *p = v; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
		      || *p == '.' || *p == '_' || *p == '-' || *p == '@' || *p == '$'))
			return NULL;
	return v;
}

static void
rollback(PGconn *conn)
{
	struct pn_err e;

	if (!pn_db_query(conn, PN_SQL("ROLLBACK"), 0, NULL, NULL, &e))
		fprintf(stderr, "paynotify: resolve: %s\n", e.msg);
}

/*
 * By id: lock the rows, check every id (all or nothing), resolve the open
 * ones.  *refused: the check failed (nothing was changed).
 */
static bool
resolve_ids(PGconn *conn, char **ids, int nids, const char *params[4], struct pn_table *out,
	    bool *refused, struct pn_err *err)
{
	struct pn_table t;
	char   *array;
	size_t	len = 3;
	int	i;
	bool	ok;

	for (i = 0; i < nids; i++)
		len += strlen(ids[i]) + 1;
	array = pn_xmalloc(len);
	strcpy(array, "{");
	for (i = 0; i < nids; i++) {
		if (i)
			strcat(array, ",");
		strcat(array, ids[i]);
	}
	strcat(array, "}");
	params[0] = array;
	if (!pn_db_query(conn, PN_SQL_CONST(lock_sql), 1, params, &t, err)) {
		free(array);
		return false;
	}
	*refused = false;
	for (i = 0; i < nids; i++) {
		int64_t	want;
		size_t	r;
		const char *outcome;

		if (!pn_parse_i64(ids[i], &want))
			continue;	/* checked by pn_opt_id */
		for (r = 0; r < t.nrows; r++) {
			int64_t	id;

			if (pn_parse_i64(pn_table_get(&t, r, "id"), &id) && id == want)
				break;
		}
		if (r == t.nrows) {
			fprintf(stderr, "paynotify: resolve: no notification %s\n", ids[i]);
			*refused = true;
			continue;
		}
		outcome = pn_table_get(&t, r, "outcome");
		if (outcome == NULL || !is_resolvable(outcome)) {
			fprintf(stderr, "paynotify: resolve: notification %s is %s: nothing to "
				"resolve (%s)\n", ids[i], outcome ? outcome : "(none)",
				outcome && (strcmp(outcome, "dispute") == 0
					    || strcmp(outcome, "complaint") == 0)
				? "a case ends when the provider closes it"
				: "final: it is not on report");
			*refused = true;
			continue;
		}
		if (pn_table_get(&t, r, "resolved_at") != NULL
		    && strcmp(pn_table_get(&t, r, "still_resolved"), "t") == 0) {
			fprintf(stderr, "paynotify: resolve: notification %s was resolved at %s by %s; "
				"left as it is\n", ids[i], pn_table_get(&t, r, "resolved_at"),
				pn_table_get(&t, r, "resolved_by"));
		}
	}
	pn_table_free(&t);
	if (*refused) {
		free(array);
		return true;
	}
	ok = pn_db_query(conn, PN_SQL_CONST(by_id_sql), 4, params, out, err);
	free(array);
	return ok;
}

static bool
note_arg(const struct pn_arg *arg, const char *value)
{
	if (!valid_note(value))
		return false;
	*(const char **)arg->dest = value;
	return true;
}

/* --outcome: one that a person resolves */
static bool
outcome_arg(const struct pn_arg *arg, const char *value)
{
	if (!pn_opt_outcome("--outcome", value))
		return false;
	if (!is_resolvable(value)) {
		fprintf(stderr, "paynotify: resolve: --outcome \"%s\": nothing to "
			"resolve (%s); the outcomes a person resolves are:", value,
			strcmp(value, "dispute") == 0 || strcmp(value, "complaint") == 0
			? "a case ends when the provider closes it" : "final");
		for (const char *const *o = resolvable; *o; o++)
			fprintf(stderr, "%s %s", o == resolvable ? "" : ",", *o);
		fputc('\n', stderr);
		return false;
	}
	*(const char **)arg->dest = value;
	return true;
}

static bool
provider_arg(const struct pn_arg *arg, const char *value)
{
	if (!pn_opt_provider("--provider", value))
		return false;
	*(const char **)arg->dest = value;
	return true;
}

static int
resolve_exec(int argc, char **argv, const char *config_path)
{
	const char *note = NULL, *outcome = NULL, *site = NULL, *provider = NULL;
	const char *older = NULL;
	char	older_txt[32];
	enum pn_format fmt = pn_format_default();
	bool	dry_run = false, refused = false, ok;
	struct pn_config *cfg = NULL;
	PGconn *conn = NULL;
	struct pn_table out;
	struct pn_err err;
	int64_t	older_s = 0;
	int	i, first, nids, rc;
	bool	older_given = false;
	const struct pn_arg options[] = {
		{"note", required_argument, 0, PN_ARG_CALL, .dest = &note, .set = note_arg},
		{"outcome", required_argument, 0, PN_ARG_CALL, .dest = &outcome,
		 .set = outcome_arg},
		{"site", required_argument, 0, PN_ARG_STR, .str = &site},	/* checked below */
		{"provider", required_argument, 0, PN_ARG_CALL, .dest = &provider,
		 .set = provider_arg},
		{"older-than", required_argument, 0, PN_ARG_DURATION, .num = &older_s,
		 .seen = &older_given},
		{"dry-run", no_argument, 0, PN_ARG_FLAG, .flag = &dry_run},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
		{"config", required_argument, 'c', PN_ARG_STR, .str = &config_path},
		PN_ARGS_END,
	};
	/* the arguments left are notification ids */
	const struct pn_args args = {.cmd = "resolve", .help = help, .opts = options,
				     .max_rest = -1};

	if ((rc = pn_args_parse(&args, argc, argv, &first)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_FAILED;
	if (older_given) {
		snprintf(older_txt, sizeof(older_txt), "%lld seconds", (long long)older_s);
		older = older_txt;
	}
	nids = argc - first;
	for (i = first; i < argc; i++)
		if (!pn_opt_id("resolve", argv[i]))
			return PN_EXIT_USAGE;
	if (nids > MAX_IDS) {
		fprintf(stderr, "paynotify: resolve: at most %d ids at a time (got %d)\n", MAX_IDS,
			nids);
		return PN_EXIT_USAGE;
	}
	if (nids > 0 && outcome != NULL) {
		fprintf(stderr, "paynotify: resolve: give notification ids or --outcome, not both\n");
		return PN_EXIT_USAGE;
	}
	if (nids > 0 && (site || provider || older)) {
		fprintf(stderr, "paynotify: resolve: --site, --provider and --older-than select "
			"by --outcome; with ids they do not apply\n");
		return PN_EXIT_USAGE;
	}
	if (nids == 0 && outcome == NULL) {
		fprintf(stderr, "paynotify: resolve: which notifications? give their ids "
			"(report's notification_id) or --outcome O [--site S]\n");
		return PN_EXIT_USAGE;
	}
	if (note == NULL) {
		fprintf(stderr, "paynotify: resolve: --note TEXT is required: say why, for the "
			"next person\n");
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (site != NULL && !pn_opt_site(cfg, "--site", site)) {
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	if ((conn = pn_db_connect(cfg, &err)) == NULL)
		goto failed;
	if (!pn_db_query(conn, PN_SQL("BEGIN"), 0, NULL, NULL, &err))
		goto failed;
	{
		const char *params[7] = {outcome, login_name(), note, resolvable_array, site,
					 provider, older};

		if (nids > 0)
			ok = resolve_ids(conn, argv + first, nids, params, &out, &refused, &err);
		else
			ok = pn_db_query(conn, PN_SQL_CONST(by_class_sql), 7, params, &out, &err);
	}
	if (!ok) {
		rollback(conn);
		goto failed;
	}
	if (refused) {
		rollback(conn);
		fprintf(stderr, "paynotify: resolve: nothing resolved\n");
		rc = PN_EXIT_USAGE;
		goto done;
	}
	if (dry_run)
		rollback(conn);
	else if (!pn_db_query(conn, PN_SQL("COMMIT"), 0, NULL, NULL, &err)) {
		pn_table_free(&out);
		goto failed;
	}
	pn_table_print(&out, fmt, stdout);
	fprintf(fmt == PN_FMT_TABLE ? stdout : stderr, "%s %zu notification%s%s\n",
		dry_run ? "would resolve" : "resolved", out.nrows, out.nrows == 1 ? "" : "s",
		dry_run ? " (dry run: nothing changed)" : "");
	pn_table_free(&out);
	rc = PN_EXIT_OK;
	goto done;

failed:
	fprintf(stderr, "paynotify: resolve: %s\n", err.msg);
	rc = PN_EXIT_FAILED;
done:
	PQfinish(conn);
	pn_cfg_free(cfg);
	return rc;
}

const struct pn_cmd pn_cmd_resolve = {
	"resolve", "ID... --note TEXT | --outcome O [--site S] [--older-than D] --note TEXT",
	"acknowledge what report lists: who, when and why, on each notification",
	resolve_exec, help,
};

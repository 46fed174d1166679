/*
 * cmd_check_config.c: paynotify check-config — load the configuration as
 * the receivers would and say what is configured, what expires, whether
 * the receivers' user can read every file, and whether the database and
 * its schema are there.
 *
 * Everything found goes into one list of findings with a severity (see
 * enum pn_cfg_severity in cfg.h): what loading found (cfg.c), then what is
 * checked here (certificate dates, file access as the receivers' user).
 * A new check adds findings to that list; the list is printed once, at the
 * end, and decides the exit status.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"
#include "crypto.h"
#include "query.h"

#define EXPIRY_WARN_DAYS 30
#define MAX_GROUPS 256

/* Where the shipped unit (conf/systemd/paynotify@.service) may be installed. */
static const char *const unit_paths[] = {
	"/etc/systemd/system/paynotify@.service",
	"/usr/local/lib/systemd/system/paynotify@.service",
	"/lib/systemd/system/paynotify@.service",
	"/usr/lib/systemd/system/paynotify@.service",
	NULL,
};

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify check-config [-c FILE] [--user NAME]\n\n"
		"Load the configuration as the receivers do (every key and certificate,\n"
		"secret-file permissions) and report every problem, not just the first:\n"
		"each site's providers and key ids, certificate serials and expiry dates\n"
		"(a warning within %d days, and once expired: the receivers still accept\n"
		"an expired certificate's key, as the providers' SDKs do), secrets in the\n"
		"wrong form (a Stripe API key where the webhook signing secret belongs, an\n"
		"APIv2 key of the wrong length, a private key where a public one belongs),\n"
		"whether the receivers' user can read every file, and the database and its\n"
		"schema version.\n\n"
		"  -c, --config FILE  the configuration to check (default: the one given\n"
		"                     before the command, $PAYNOTIFY_CONFIG, else the default)\n"
		"  -u, --user NAME    check that user NAME (the receivers' user) can read\n"
		"                     every file; default: the User= of an installed\n"
		"                     paynotify@.service when run as root, else yourself\n\n"
		"Exit status: 0 no error (warnings allowed), 78 a configuration error (the\n"
		"file, a site that can never verify, a file the receivers cannot read),\n"
		"3 the database is unreachable or its schema is not this build's, 64 usage.\n",
		EXPIRY_WARN_DAYS);
}

struct check {
	struct pn_config *cfg;
	struct pn_cfg_findings fd;
	time_t	now;
};

static void
print_secrets(const char *what, const struct pn_secret *s, size_t n)
{
	size_t i;

	printf("    %s:", what);
	for (i = 0; i < n; i++)
		printf(" %s", s[i].id);	/* ids only, never the bytes */
	printf("\n");
}

static void
print_keys(struct check *c, const struct pn_site *s, const char *key, const char *what,
	   const struct pn_pubkey *k, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		printf("    %s: %s (RSA-%d)", what, k[i].id, EVP_PKEY_get_bits(k[i].pkey));
		if (k[i].serial) {
			char	date[32];
			struct tm tm;
			double	days = difftime(k[i].not_after, c->now) / 86400.0;

			gmtime_r(&k[i].not_after, &tm);
			strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%SZ", &tm);
			printf(" certificate serial %s, expires %s", k[i].serial, date);
			if (days < 0)
				pn_cfg_finding_add(&c->fd, PN_CFG_WARNING, s->file, s->line,
						   "site \"%s\": %s %s: certificate serial %s expired on "
						   "%s; the receivers still accept its key (as the "
						   "providers' SDKs do): install the provider's current "
						   "certificate", s->name, key, k[i].id, k[i].serial, date);
			else if (days < EXPIRY_WARN_DAYS) {
				long	whole = (long)(days + 0.5);

				pn_cfg_finding_add(&c->fd, PN_CFG_WARNING, s->file, s->line,
						   "site \"%s\": %s %s: certificate serial %s expires in "
						   "%ld day%s (%s)", s->name, key, k[i].id, k[i].serial,
						   whole, whole == 1 ? "" : "s", date);
			}
		}
		printf("\n");
	}
}

/* A problem printed in the report and, unless stdout and stderr are one
 * terminal, on stderr too (what a script shows its operator). */
static void report_error(const char *fmt, ...) PN_PRINTF(1, 2);

static void
report_error(const char *fmt, ...)
{
	char	buf[2048];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printf("%s\n", buf);
	if (!(isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)))
		fprintf(stderr, "paynotify: %s\n", buf);
}

/* The credentials only `paynotify query` loads: load them here too. */
static int
check_query(const struct pn_site *s)
{
	const struct pn_query_provider *const *qp;
	int	problems = 0;

	for (qp = pn_query_providers; *qp; qp++) {
		const char *why = NULL, *url = NULL;
		struct pn_err err;
		void   *creds = NULL;

		if (!(*qp)->configured(s, &why))
			continue;
		url = pn_cfg_site_str(s, (*qp)->name, "query_url");
		if (!(*qp)->load(s, &creds, &err)) {
			report_error("  query %s: ERROR: %s", (*qp)->name, err.msg);
			problems++;
			continue;
		}
		printf("  query %s: ok%s%s%s, %s\n", (*qp)->name,
		       (*qp)->describe ? " (" : "", (*qp)->describe ? (*qp)->describe(creds) : "",
		       (*qp)->describe ? ")" : "", url);
		(*qp)->free_creds(creds);
	}
	return problems;
}

/* Site binding (issue 11): what the loader accepts but an operator should
 * know, from each provider.  Returns the number of warnings printed. */
static int
binding_warnings(const struct pn_config *cfg)
{
	const struct pn_cfg_provider *const *prov;
	int	warnings = 0;

	for (prov = pn_cfg_providers; *prov; prov++)
		if ((*prov)->warnings)
			warnings += (*prov)->warnings(cfg, stdout);
	return warnings;
}

/* What a configured provider of site s holds: its summary, then every key it
 * declares with a label (key ids, never secret bytes). */
static void
print_provider(struct check *c, const struct pn_site *s, const struct pn_cfg_provider *prov)
{
	char	line[512];
	size_t	i;

	prov->summary(s, line, sizeof(line));
	printf("  %s: %s\n", prov->prefix, line);
	for (i = 0; i < prov->nkeys; i++) {
		const struct pn_cfg_keydef *kd = &prov->keys[i];
		const void *field = pn_cfg_site_field(s, kd);
		size_t	n = pn_cfg_site_count(s, kd);

		if (kd->show == NULL)
			continue;
		if (kd->type == PN_K_PUBKEYS)
			print_keys(c, s, kd->key, kd->show, *(struct pn_pubkey *const *)field, n);
		else if (kd->type == PN_K_SECRETS && n > 0)
			print_secrets(kd->show, *(struct pn_secret *const *)field, n);
		else if (kd->type == PN_K_STR && *(char *const *)field != NULL)
			printf("    %s %s\n", kd->show, *(char *const *)field);
	}
}

/* Prints every site; returns the number of query credentials that do not load. */
static int
print_sites(struct check *c)
{
	const struct pn_cfg_provider *const *prov;
	size_t	i;
	int	problems = 0;

	for (i = 0; i < c->cfg->nsites; i++) {
		const struct pn_site *s = &c->cfg->sites[i];

		if (strcmp(s->file, c->cfg->path) == 0)
			printf("site %s (line %d)\n", s->name, s->line);
		else
			printf("site %s (%s:%d)\n", s->name, s->file, s->line);
		for (prov = pn_cfg_providers; *prov; prov++)
			if (pn_cfg_configured(s, *prov))
				print_provider(c, s, *prov);
		problems += check_query(s);
	}
	return problems;
}

/* ---- file access as the receivers' user ----------------------------------- */

struct user {
	char   *name;
	uid_t	uid;
	gid_t	groups[MAX_GROUPS];
	int	ngroups;
	char   *source;		/* how it was chosen, for the report */
};

static bool
user_lookup(const char *name, struct user *u)
{
	struct passwd *pw = getpwnam(name);

	if (pw == NULL)
		return false;
	u->name = pn_xstrdup(pw->pw_name);
	u->uid = pw->pw_uid;
	u->ngroups = MAX_GROUPS;
	if (getgrouplist(pw->pw_name, pw->pw_gid, u->groups, &u->ngroups) < 0) {
		u->groups[0] = pw->pw_gid;
		u->ngroups = 1;
	}
	return true;
}

/*
 * User= of the first installed paynotify@.service, when the configuration
 * it runs with (its Environment=PAYNOTIFY_CONFIG=, else the built-in
 * default) is the one being checked; else NULL.  (malloc'd)
 */
static char *
unit_user(const char *config_path, const char **unit)
{
	size_t	i;

	for (i = 0; unit_paths[i]; i++) {
		FILE   *f = fopen(unit_paths[i], "r");
		char	line[1024];
		char   *user = NULL, *conf = NULL, *a = NULL, *b = NULL;
		bool	same;

		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char   *v = pn_trim(line);

			if (strncmp(v, "User=", 5) == 0) {
				free(user);
				user = pn_xstrdup(pn_trim(v + 5));
			} else if (strncmp(v, "Environment=PAYNOTIFY_CONFIG=", 29) == 0) {
				free(conf);
				conf = pn_xstrdup(pn_trim(v + 29));
			}
		}
		fclose(f);
		a = realpath(config_path, NULL);
		b = realpath(conf ? conf : PN_DEFAULT_CONFIG, NULL);
		same = a && b && strcmp(a, b) == 0;
		free(a);
		free(b);
		free(conf);
		if (user && same) {
			*unit = unit_paths[i];
			return user;
		}
		free(user);
	}
	return NULL;
}

/* May u do `want` (4 read, 1 search) on what st describes?  Mode bits only (no ACLs). */
static bool
may(const struct user *u, const struct stat *st, unsigned want)
{
	int	i;

	if (u->uid == 0)
		return true;
	if (st->st_uid == u->uid)
		return ((st->st_mode >> 6) & want) == want;
	for (i = 0; i < u->ngroups; i++)
		if (st->st_gid == u->groups[i])
			return ((st->st_mode >> 3) & want) == want;
	return (st->st_mode & want) == want;
}

static const char *
owner_name(uid_t uid, char *buf, size_t sz)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, sz, "%s", pw->pw_name);
	else
		snprintf(buf, sz, "uid %ld", (long)uid);
	return buf;
}

static void
check_file_access(struct check *c, const struct user *u, const struct pn_cfg_file *f)
{
	char   *path = realpath(f->path, NULL), *slash;
	struct stat st;
	char	owner[64];
	const char *cfgfile = f->from ? f->from : c->cfg->path;	/* the file naming it */

	if (path == NULL)
		return;	/* loading read it a moment ago; nothing more to say */
	/* every directory on the way must be searchable */
	for (slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (stat(path, &st) == 0 && !may(u, &st, 1)) {
			pn_cfg_finding_add(&c->fd, PN_CFG_ERROR, cfgfile, f->line,
					   "user %s cannot reach \"%s\": directory \"%s\" (owner %s, "
					   "mode %04o) is not searchable by it: chmod o+x, or give "
					   "the directory to the receivers' group", u->name, f->path, path,
					   owner_name(st.st_uid, owner, sizeof(owner)),
					   (unsigned)(st.st_mode & 07777));
			free(path);
			return;
		}
		*slash = '/';
	}
	if (stat(path, &st) == 0 && !may(u, &st, 4)) {
		char	fix[600];

		if (f->secret)	/* it must stay 0600 (or root:paynotify 0640): give it to the user */
			snprintf(fix, sizeof(fix), "chown %s \"%s\" (secrets stay mode 0600), or "
				 "chown root:paynotify and chmod 640 when %s is in group paynotify",
				 u->name, f->path, u->name);
		else
			snprintf(fix, sizeof(fix), "make it readable by that user");
		pn_cfg_finding_add(&c->fd, PN_CFG_ERROR, cfgfile, f->line,
				   "user %s cannot read \"%s\" (owner %s, mode %04o): the receivers "
				   "would refuse the configuration, and a reload would keep the old "
				   "one: %s", u->name, f->path,
				   owner_name(st.st_uid, owner, sizeof(owner)),
				   (unsigned)(st.st_mode & 07777), fix);
	}
	free(path);
}

/* Choose the user (--user, the unit's User= when root, else ourselves) and check. */
static bool
check_access(struct check *c, const char *user_opt)
{
	struct user u;
	const char *unit = NULL;
	char   *name = NULL;
	size_t	i;

	memset(&u, 0, sizeof(u));
	if (user_opt != NULL) {
		if (!user_lookup(user_opt, &u)) {
			fprintf(stderr, "paynotify: --user \"%s\": no such user\n", user_opt);
			return false;
		}
		u.source = pn_xstrdup("--user");
	} else if (geteuid() == 0 && (name = unit_user(c->cfg->path, &unit)) != NULL
		   && user_lookup(name, &u)) {
		u.source = pn_xasprintf("User= of %s", unit);
	} else if (geteuid() == 0) {
		pn_cfg_finding_add(&c->fd, PN_CFG_WARNING, NULL, 0,
				   "run as root, which can read every file: whether the receivers' "
				   "user can read them was not checked (%s); give --user NAME, the "
				   "User= of the receivers' unit",
				   name ? "the unit's User= is not a user here"
				   : "no installed paynotify@.service runs with this configuration");
	} else {
		struct passwd *pw = getpwuid(geteuid());

		/* loading as ourselves already proved it */
		printf("files: readable by %s (yourself; --user NAME checks another user)\n",
		       pw ? pw->pw_name : "this user");
	}
	free(name);
	if (u.name) {
		size_t	before = pn_cfg_findings_count(&c->fd, PN_CFG_ERROR);

		size_t	n = 0, j;

		for (i = 0; i < c->cfg->nfiles; i++) {
			for (j = 0; j < i; j++)	/* a file several sites share: once */
				if (strcmp(c->cfg->files[j].path, c->cfg->files[i].path) == 0)
					break;
			if (j < i)
				continue;
			check_file_access(c, &u, &c->cfg->files[i]);
			n++;
		}
		printf("files: %zu checked as user %s (%s)%s\n", n, u.name, u.source,
		       pn_cfg_findings_count(&c->fd, PN_CFG_ERROR) > before ? ": NOT all readable"
		       : ", all readable");
		free(u.name);
		free(u.source);
	}
	return true;
}

/* The configuration files read, in order (the main file, then conf.d/). */
static void
print_config_files(const struct pn_config *cfg)
{
	size_t	i, n = 0;

	for (i = 0; i < cfg->nfiles; i++)
		if (cfg->files[i].from == cfg->files[i].path)
			printf("  %s %s\n", n++ == 0 ? "read" : "then", cfg->files[i].path);
	if (n == 1) {
		char   *d = pn_xstrdup(cfg->path), *slash = strrchr(d, '/');

		printf("  (no %s/" PN_CFG_INCLUDE_DIR "/*.conf)\n", slash ? (*slash = '\0', d) : ".");
		free(d);
	}
}

/*
 * What the receivers' role may do (conninfo), when the admin commands use
 * another (admin_conninfo): a role without its grants answers every
 * notification 503.  Returns false after reporting a problem.
 */
static const char receivers_sql[] =
	"SELECT current_user AS role,"
	"       has_schema_privilege('paynotify', 'USAGE')"
	"   AND has_table_privilege('paynotify.notifications', 'SELECT, INSERT, UPDATE')"
	"   AND has_table_privilege('paynotify.orders', 'SELECT, UPDATE')"
	"   AND has_table_privilege('paynotify.feed', 'INSERT')"
	"   AND has_sequence_privilege('paynotify.feed_event_seq', 'USAGE')"
	"   AND (SELECT coalesce(bool_and(has_function_privilege(oid, 'EXECUTE')), false)"
	"          FROM pg_proc WHERE pronamespace = 'paynotify'::regnamespace"
	"           AND proname IN ('ingest', 'ingest_combined')) AS ok";

static bool
check_receivers_role(const struct pn_config *cfg)
{
	struct pn_table t;
	struct pn_err err;
	PGconn *conn = pn_db_connect_receivers(cfg, &err);
	bool	ok = false;

	if (conn == NULL)
		report_error("database (receivers, conninfo): ERROR: %s", err.msg);
	else if (!pn_db_query(conn, PN_SQL_CONST(receivers_sql), 0, NULL, &t, &err))
		report_error("database (receivers, conninfo): ERROR: %s", err.msg);
	else {
		const char *role = pn_table_get(&t, 0, "role"), *v = pn_table_get(&t, 0, "ok");

		ok = v != NULL && strcmp(v, "t") == 0;
		if (ok)
			printf("database (receivers, conninfo): reachable as %s, may ingest\n", role);
		else
			report_error("database (receivers, conninfo): ERROR: role \"%s\" lacks the "
				     "receivers' grants (docs/DATABASE.md \"Roles and grants\": "
				     "make it a member of paynotify_receiver and run `paynotify "
				     "migrate`)", role ? role : "?");
		pn_table_free(&t);
	}
	PQfinish(conn);
	return ok;
}

static void
print_findings(const struct pn_cfg_findings *fd)
{
	static const char *const label[] = {"ERROR", "ERROR", "WARNING"};
	bool	one_terminal = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
	size_t	i;

	for (i = 0; i < fd->n; i++) {
		char   *t = pn_cfg_finding_text(&fd->v[i]);

		/* errors on stderr too (what a script shows its operator), unless
		 * both go to the same terminal */
		printf("%s: %s\n", label[fd->v[i].severity], t);
		if (fd->v[i].severity != PN_CFG_WARNING && !one_terminal)
			fprintf(stderr, "paynotify: %s\n", t);
		free(t);
	}
}

static int
check_config_exec(int argc, char **argv, const char *config_path)
{
	struct check c;
	struct pn_err err;
	PGconn *conn;
	const char *user = NULL;
	const struct pn_arg options[] = {
		{"config", required_argument, 'c', PN_ARG_STR, .str = &config_path},
		{"user", required_argument, 'u', PN_ARG_STR, .str = &user},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "check-config", .help = help, .opts = options,
				     .rest = PN_REST_HELP};
	int	version = 0, rc;
	size_t	errors, warnings;
	bool	db_ok = false;
	int	repl_problems = 0, repl_warnings = 0, binding_warns = 0, query_problems = 0;

	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	if (user != NULL && getpwnam(user) == NULL) {
		fprintf(stderr, "paynotify: --user \"%s\": no such user\n", user);
		return PN_EXIT_USAGE;
	}
	memset(&c, 0, sizeof(c));
	c.now = time(NULL);
	c.cfg = pn_cfg_load_all(config_path, &c.fd);
	if (c.cfg != NULL) {
		printf("configuration %s: loaded, %zu site%s\n", c.cfg->path, c.cfg->nsites,
		       c.cfg->nsites == 1 ? "" : "s");
		print_config_files(c.cfg);
		printf("  statement_timeout_ms %lld, max_body_bytes %lld, read_timeout_ms %lld\n",
		       (long long)c.cfg->statement_timeout_ms, (long long)c.cfg->max_body_bytes,
		       (long long)c.cfg->read_timeout_ms);
		query_problems = print_sites(&c);
		binding_warns = binding_warnings(c.cfg);
		if (!check_access(&c, user)) {
			pn_cfg_findings_free(&c.fd);
			pn_cfg_free(c.cfg);
			return PN_EXIT_USAGE;
		}
		conn = pn_db_connect(c.cfg, &err);
		if (conn == NULL || !pn_db_schema_version(conn, &version, &err))
			report_error("database: ERROR: %s", err.msg);
		else if (version != PN_SCHEMA_VERSION)
			report_error("database: ERROR: schema version %d, this build needs %d: run "
				     "`paynotify migrate`", version, PN_SCHEMA_VERSION);
		else {
			printf("database: reachable, schema version %d (as %s, %s)\n", version,
			       PQuser(conn), c.cfg->admin_conninfo ? "admin_conninfo" : "conninfo");
			db_ok = true;
		}
		if (db_ok && c.cfg->admin_conninfo != NULL && !check_receivers_role(c.cfg))
			db_ok = false;
		if (conn != NULL && PQstatus(conn) == CONNECTION_OK)
			repl_warnings = pn_check_replication(conn, c.cfg, &repl_problems);
		PQfinish(conn);
	} else
		printf("configuration %s: NOT loaded\n", config_path);
	print_findings(&c.fd);
	errors = c.fd.n - pn_cfg_findings_count(&c.fd, PN_CFG_WARNING) + (size_t)query_problems;
	warnings = pn_cfg_findings_count(&c.fd, PN_CFG_WARNING) + (size_t)repl_warnings
	    + (size_t)binding_warns;
	if (repl_problems > 0)		/* connected only to a standby: cannot ingest */
		db_ok = false;
	printf("%zu problem%s, %zu warning%s\n", errors + !(db_ok || c.cfg == NULL),
	       errors + !(db_ok || c.cfg == NULL) == 1 ? "" : "s", warnings,
	       warnings == 1 ? "" : "s");
	rc = errors ? PN_EXIT_CONFIG : !db_ok ? PN_EXIT_UNAVAILABLE : PN_EXIT_OK;
	pn_cfg_findings_free(&c.fd);
	pn_cfg_free(c.cfg);
	return rc;
}

const struct pn_cmd pn_cmd_check_config = {
	"check-config", "[-c FILE] [--user NAME]",
	"load and check the configuration, keys, file access and database",
	check_config_exec, help,
};

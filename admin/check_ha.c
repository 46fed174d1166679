/*
 * check_ha.c: the high-availability part of `paynotify check-config`.
 *
 * An acknowledged notification is one the provider will never send again.
 * If the database that committed it fails over to an asynchronous standby,
 * whatever the standby had not received is gone (tests/faults/test_ha.py
 * shows it).  So: warn when the server has standbys but none is
 * synchronous, when this role's synchronous_commit does not wait for them,
 * and when a multi-host conninfo does not insist on a writable server.
 */
#include "config.h"

#include <string.h>

#include "admin.h"

/* A multi-host conninfo without target_session_attrs=read-write|primary can
 * land on a standby: every ingest then fails (and is retried) until the
 * connection moves.  An explicit target_session_attrs=any is the recipe for
 * one pooler per node (docs/DEPLOYMENT.md "Failover through poolers": a
 * pooler answers libpq's startup check with stale parameters, and the
 * receivers move to the next host when a session cannot write): said, not
 * warned about.  Returns 1 when it warned. */
static int
check_conninfo(const struct pn_config *cfg)
{
	PQconninfoOption *opts, *o;
	const char *host = NULL, *hostaddr = NULL, *tsa = NULL;
	char   *errmsg = NULL;
	int	warned = 0;
	bool	multi;

	opts = PQconninfoParse(cfg->conninfo ? cfg->conninfo : "", &errmsg);
	if (opts == NULL) {
		PQfreemem(errmsg);
		return 0;	/* the connection attempt says why */
	}
	for (o = opts; o->keyword; o++) {
		if (o->val == NULL)
			continue;
		if (strcmp(o->keyword, "host") == 0)
			host = o->val;
		else if (strcmp(o->keyword, "hostaddr") == 0)
			hostaddr = o->val;
		else if (strcmp(o->keyword, "target_session_attrs") == 0)
			tsa = o->val;
	}
	multi = (host && strchr(host, ',')) || (hostaddr && strchr(hostaddr, ','));
	if (multi && tsa != NULL && strcmp(tsa, "any") == 0)
		printf("replication: conninfo lists several hosts with target_session_attrs=any: a "
		       "receiver whose session cannot write moves to the next host (one pooler per "
		       "node; a direct standby costs a retry)\n");
	else if (multi && (tsa == NULL || (strcmp(tsa, "read-write") != 0
					   && strcmp(tsa, "primary") != 0))) {
		printf("replication: WARNING: conninfo lists several hosts but target_session_attrs "
		       "is %s: a receiver may connect to a standby (add "
		       "target_session_attrs=read-write)\n", tsa ? tsa : "not set");
		warned = 1;
	}
	PQconninfoFree(opts);
	return warned;
}

int
pn_check_replication(PGconn *conn, const struct pn_config *cfg, int *problems)
{
	struct pn_table t;
	struct pn_err err;
	const char *recovery, *standbys, *sync_names, *sync_commit, *sync_now;
	int	warnings = check_conninfo(cfg);

	if (!pn_db_query(conn,
			 PN_SQL("SELECT pg_is_in_recovery()::text AS recovery, "
			 "(SELECT count(*) FROM pg_stat_replication)::text AS standbys, "
			 "current_setting('synchronous_standby_names') AS sync_names, "
			 "current_setting('synchronous_commit') AS sync_commit, "
			 "(SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) "
			 "FROM pg_stat_replication)::text AS sync_now"),
			 0, NULL, &t, &err)) {
		printf("replication: ERROR: %s\n", err.msg);
		(*problems)++;
		return warnings;
	}
	recovery = pn_table_get(&t, 0, "recovery");
	standbys = pn_table_get(&t, 0, "standbys");
	sync_names = pn_table_get(&t, 0, "sync_names");
	sync_commit = pn_table_get(&t, 0, "sync_commit");
	sync_now = pn_table_get(&t, 0, "sync_now");
	if (recovery && strcmp(recovery, "true") == 0) {
		printf("replication: ERROR: the database is a standby (in recovery, read-only): "
		       "every notification would be answered \"retry later\"\n");
		(*problems)++;
	} else if (standbys && strcmp(standbys, "0") == 0) {
		printf("replication: no standby connected%s\n",
		       sync_names && *sync_names ? " although synchronous_standby_names is set: "
		       "commits wait until one connects" : "");
	} else if (sync_names == NULL || *sync_names == '\0') {
		printf("replication: WARNING: %s standby(s) connected but synchronous_standby_names "
		       "is empty: a failover can lose notifications already acknowledged to the "
		       "providers (see docs/DEPLOYMENT.md \"High availability\")\n", standbys);
		warnings++;
	} else {
		printf("replication: %s standby(s), synchronous_standby_names = '%s', %s "
		       "synchronous now\n", standbys, sync_names, sync_now ? sync_now : "?");
	}
	if (sync_names && *sync_names && sync_commit
	    && (strcmp(sync_commit, "off") == 0 || strcmp(sync_commit, "local") == 0)) {
		printf("replication: WARNING: synchronous_commit is %s for this role and database: "
		       "commits do not wait for the synchronous standby\n", sync_commit);
		warnings++;
	}
	pn_table_free(&t);
	return warnings;
}

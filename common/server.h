/*
 * server.h: the FastCGI process model.
 *
 *   - a listening socket: fd 0 handed over by a web server, spawn-fcgi or a
 *     systemd socket unit, or our own (--listen unix:PATH | HOST:PORT);
 *   - workers == 0: this process serves the socket itself;
 *   - workers  > 0: a supervisor pre-forks that many workers, restarts one
 *     that dies (with back-off), and on SIGHUP loads the configuration again
 *     and replaces the workers by a new generation (old workers finish their
 *     request first); a configuration that does not load is refused with a
 *     log line and the old workers keep serving;
 *   - SIGTERM/SIGINT: stop accepting, finish in-flight requests, exit.
 *
 * Signals are blocked while a request is served and delivered only while a
 * worker waits for a connection, so a request is never interrupted.
 */
#ifndef PN_SERVER_H
#define PN_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

#include "cfg.h"
#include "provider.h"
#include "util.h"

struct pn_server_opts {
	const char *config_path;
	const char *listen;		/* NULL: use fd 0 */
	int	workers;		/* 0: serve in this process */
	mode_t	socket_mode;		/* unix sockets */
	const char *socket_owner;	/* "user[:group]" for unix sockets, or NULL */
};

#define PN_LISTEN_FAILED (-1)
#define PN_LISTEN_IN_USE (-2)	/* another process serves that address */

/*
 * Open the listening socket described by spec ("unix:/path", "host:port",
 * ":port"); returns the fd, or PN_LISTEN_FAILED / PN_LISTEN_IN_USE with err
 * set.  A unix socket path that answers a connect is another receiver's and
 * is never taken over; a stale one (nothing answers) is replaced.
 */
int pn_server_listen(const char *spec, mode_t mode, const char *owner, struct pn_err *err) PN_WUR;

/* Remove the unix socket pn_server_listen() created, if the path still
 * names it (a clean stop); nothing for TCP or an inherited fd 0. */
void pn_server_unlink_socket(void);

/*
 * --user/--group: the identity the receiver serves as.  Resolved (and the
 * names validated) before anything is opened; applied by
 * pn_server_drop_privileges() once the socket is bound and chowned and the
 * pid file written, before the configuration is read for serving and before
 * any worker is forked.
 */
struct pn_identity {
	bool	set;			/* --user given */
	uid_t	uid;
	gid_t	gid;			/* --group, else the user's primary group */
	char	user[64];
	char	group[64];
};

/* Look up user (and group, or NULL: the user's primary group).  false
 * with err naming the unknown user or group (a usage error). */
bool pn_server_identity(const char *user, const char *group, struct pn_identity *id,
			struct pn_err *err) PN_WUR;

/*
 * Become id for good: the supplementary groups become the user's own
 * (initgroups(3): what /etc/group gives the user, plus the group), then
 * setgid, then setuid (real, effective and saved ids).  Verified: the ids
 * are id's, and neither setuid(0) nor setgid(0) succeeds afterwards.
 * false with err: the process must not serve.
 */
bool pn_server_drop_privileges(const struct pn_identity *id, struct pn_err *err) PN_WUR;

/* Serve FastCGI on listen_fd until told to stop.  Takes ownership of cfg.
 * Returns the process exit status. */
int pn_server_run(const struct pn_provider *p, const struct pn_server_opts *o, int listen_fd,
		  struct pn_config *cfg);

#endif

/*
 * server.c: listening socket, pre-forked workers, supervisor, reload.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "exit.h"
#include "log.h"
#include "metrics.h"
#include "pipeline.h"
#include "proctitle.h"
#include "server.h"

#define LISTEN_BACKLOG 1024
#define MAX_WORKERS 256
#define STOP_GRACE_S 30		/* then SIGKILL what is left */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_AFTER_S 10	/* a worker that lived this long resets the back-off */

static volatile sig_atomic_t got_term;
static volatile sig_atomic_t got_hup;

static void
on_term(int sig)
{
	got_term = 1;
}

static void
on_hup(int sig)
{
	got_hup = 1;
}

static int64_t
mono_ms(void)
{
	return pn_now_us() / 1000;
}

/* ---- the listening socket ------------------------------------------------ */

static bool
apply_owner(const char *path, const char *owner, struct pn_err *err)
{
	char	buf[256], *colon;
	uid_t	uid = (uid_t)-1;
	gid_t	gid = (gid_t)-1;

	snprintf(buf, sizeof(buf), "%s", owner);
	colon = strchr(buf, ':');
	if (colon)
		*colon++ = '\0';
	if (*buf) {
		struct passwd *pw = getpwnam(buf);

		if (pw == NULL) {
			pn_err_set(err, "unknown user \"%s\" in --socket-owner", buf);
			return false;
		}
		uid = pw->pw_uid;
		if (colon == NULL)
			gid = pw->pw_gid;
	}
	if (colon && *colon) {
		struct group *gr = getgrnam(colon);

		if (gr == NULL) {
			pn_err_set(err, "unknown group \"%s\" in --socket-owner", colon);
			return false;
		}
		gid = gr->gr_gid;
	}
	if (chown(path, uid, gid) != 0) {
		int	e = errno;

		if (e == EPERM && geteuid() != 0) {
			/* what an operator without systemd ran into (issue 24) */
			pn_err_set(err, "could not chown socket \"%s\" to \"%s\": %s: only root may "
				   "give a socket to another owner; start the receiver as root with "
				   "--socket-owner and --user (it binds, then serves as that user), "
				   "or let systemd create the socket (paynotify-*.socket)",
				   path, owner, strerror(e));
		} else
			pn_err_set(err, "could not chown socket \"%s\" to \"%s\": %s", path, owner,
				   strerror(e));
		return false;
	}
	return true;
}

/* ---- --user / --group ---------------------------------------------------- */

bool
pn_server_identity(const char *user, const char *group, struct pn_identity *id,
		   struct pn_err *err)
{
	struct passwd *pw;

	memset(id, 0, sizeof(*id));
	if (user == NULL || *user == '\0' || strlen(user) >= sizeof(id->user)) {
		pn_err_set(err, "invalid --user \"%s\"", user ? user : "");
		return false;
	}
	errno = 0;
	pw = getpwnam(user);
	if (pw == NULL) {
		pn_err_set(err, "unknown user \"%s\" in --user%s%s", user, errno ? ": " : "",
			   errno ? strerror(errno) : "");
		return false;
	}
	id->uid = pw->pw_uid;
	id->gid = pw->pw_gid;
	snprintf(id->user, sizeof(id->user), "%s", pw->pw_name);
	if (group != NULL) {
		struct group *gr;

		if (*group == '\0' || strlen(group) >= sizeof(id->group)) {
			pn_err_set(err, "invalid --group \"%s\"", group);
			return false;
		}
		errno = 0;
		gr = getgrnam(group);
		if (gr == NULL) {
			pn_err_set(err, "unknown group \"%s\" in --group%s%s", group,
				   errno ? ": " : "", errno ? strerror(errno) : "");
			return false;
		}
		id->gid = gr->gr_gid;
		snprintf(id->group, sizeof(id->group), "%s", gr->gr_name);
	} else {
		struct group *gr = getgrgid(id->gid);

		if (gr != NULL)
			snprintf(id->group, sizeof(id->group), "%s", gr->gr_name);
		else
			snprintf(id->group, sizeof(id->group), "%ld", (long)id->gid);
	}
	id->set = true;
	return true;
}

bool
pn_server_drop_privileges(const struct pn_identity *id, struct pn_err *err)
{
	uid_t	ru, eu, su;
	gid_t	rg, eg, sg;

	/* Supplementary groups: the user's own (initgroups), so that a key
	 * file group-readable by one of them (root:paynotify 0640, or
	 * ssl-cert) stays readable, and root's (group 0 and others) are
	 * gone.  Groups first: once the uid is not 0, they cannot change. */
	if (initgroups(id->user, id->gid) != 0) {
		pn_err_set(err, "--user %s: could not set the supplementary groups: %s", id->user,
			   strerror(errno));
		return false;
	}
	if (setresgid(id->gid, id->gid, id->gid) != 0) {
		pn_err_set(err, "--group %s: could not set group id %ld: %s", id->group,
			   (long)id->gid, strerror(errno));
		return false;
	}
	if (setresuid(id->uid, id->uid, id->uid) != 0) {
		pn_err_set(err, "--user %s: could not set user id %ld: %s", id->user,
			   (long)id->uid, strerror(errno));
		return false;
	}
	/* Verify, rather than trust: every id is the new one, and root's
	 * cannot be taken back (it would if only the effective ids had
	 * changed). */
	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0
	    || ru != id->uid || eu != id->uid || su != id->uid
	    || rg != id->gid || eg != id->gid || sg != id->gid) {
		pn_err_set(err, "--user %s: the user and group ids did not all change", id->user);
		return false;
	}
	if (id->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		pn_err_set(err, "--user %s: root's user id could be taken back after the drop",
			   id->user);
		return false;
	}
	if (id->gid != 0 && id->uid != 0 && (setgid(0) == 0 || setegid(0) == 0)) {
		pn_err_set(err, "--user %s: group 0 could be taken back after the drop", id->user);
		return false;
	}
	return true;
}

/* The unix socket this process created (--listen unix:PATH), removed on a
 * clean stop if the path still names it. */
static char own_socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static dev_t own_socket_dev;
static ino_t own_socket_ino;

/*
 * Is something accepting connections on the unix socket at path?  0: yes
 * (a full backlog too: alive, only busy); ECONNREFUSED: the socket file's
 * server is gone, it is stale; any other errno: cannot tell (a socket we
 * may not connect to is not ours to remove).
 */
static int
socket_probe(const struct sockaddr_un *sun)
{
	int	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int	rc = 0;

	if (fd < 0)
		return errno;
	if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) != 0 && errno != EAGAIN)
		rc = errno;
	close(fd);
	return rc;
}

static int
listen_unix(const char *path, mode_t mode, const char *owner, struct pn_err *err)
{
	struct sockaddr_un sun;
	struct stat st;
	int	fd = -1, dirfd = -1;
	char	dir[sizeof(sun.sun_path)], *slash;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		pn_err_set(err, "socket path \"%s\" is too long", path);
		return PN_LISTEN_FAILED;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path) + 1);

	/* Two receivers started at once on one stale path take turns here,
	 * so that neither removes the socket the other has just bound. */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd >= 0)
		(void)flock(dirfd, LOCK_EX);

	/* A socket left by a previous run is replaced; a socket that answers
	 * is another receiver's (as php-fpm, never take it over); anything
	 * else is not ours to remove. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			pn_err_set(err, "\"%s\" exists and is not a socket", path);
			goto failed;
		}
		int	probe = socket_probe(&sun);

		if (probe == 0) {
			pn_err_set(err, "socket \"%s\" is in use: another process accepts connections "
				   "on it; stop it first or choose another --listen path", path);
			if (dirfd >= 0)
				close(dirfd);
			return PN_LISTEN_IN_USE;
		}
		if (probe != ECONNREFUSED && probe != ENOENT) {
			pn_err_set(err, "could not tell whether socket \"%s\" is in use (connect: %s); "
				   "not replacing it", path, strerror(probe));
			goto failed;
		}
		pn_log(PN_LOG_WARNING, "replacing stale socket \"%s\" (nothing answers on it)", path);
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		pn_err_set(err, "could not bind unix socket \"%s\": %s", path, strerror(errno));
		goto failed;
	}
	if (stat(path, &st) == 0) {
		snprintf(own_socket_path, sizeof(own_socket_path), "%s", path);
		own_socket_dev = st.st_dev;
		own_socket_ino = st.st_ino;
	}
	if (chmod(path, mode) != 0) {
		pn_err_set(err, "could not chmod socket \"%s\": %s", path, strerror(errno));
		goto failed;
	}
	if (owner && !apply_owner(path, owner, err))
		goto failed;
	if (listen(fd, LISTEN_BACKLOG) != 0) {
		pn_err_set(err, "could not listen on \"%s\": %s", path, strerror(errno));
		goto failed;
	}
	if (dirfd >= 0)
		close(dirfd);	/* releases the lock */
	return fd;
failed:
	pn_server_unlink_socket();
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	return PN_LISTEN_FAILED;
}

void
pn_server_unlink_socket(void)
{
	struct stat st;

	if (own_socket_path[0] == '\0')
		return;
	/* Only if the path is still our socket: never another's. */
	if (lstat(own_socket_path, &st) == 0 && S_ISSOCK(st.st_mode)
	    && st.st_dev == own_socket_dev && st.st_ino == own_socket_ino)
		unlink(own_socket_path);
	own_socket_path[0] = '\0';
}

static int
listen_tcp(const char *spec, struct pn_err *err)
{
	char	host[256], *port;
	struct addrinfo hints, *res = NULL, *ai;
	int	fd = -1, one = 1, rc;

	snprintf(host, sizeof(host), "%s", spec);
	port = strrchr(host, ':');
	if (port == NULL || port[1] == '\0') {
		pn_err_set(err, "invalid listen address \"%s\" (expected unix:PATH or HOST:PORT)", spec);
		return PN_LISTEN_FAILED;
	}
	*port++ = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		pn_err_set(err, "could not resolve \"%s\": %s", spec, gai_strerror(rc));
		return PN_LISTEN_FAILED;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		bool in_use = errno == EADDRINUSE;

		pn_err_set(err, "could not listen on \"%s\": %s%s", spec, strerror(errno),
			   in_use ? " (another process listens there)" : "");
		fd = in_use ? PN_LISTEN_IN_USE : PN_LISTEN_FAILED;
	}
	freeaddrinfo(res);
	return fd;
}

int
pn_server_listen(const char *spec, mode_t mode, const char *owner, struct pn_err *err)
{
	if (strncmp(spec, "unix:", 5) == 0)
		return listen_unix(spec + 5, mode, owner, err);
	return listen_tcp(spec, err);
}

/* ---- FastCGI request I/O ------------------------------------------------ */

static const char *
fcgi_param(void *ctx, const char *name)
{
	FCGX_Request *r = ctx;

	return FCGX_GetParam(name, r->envp);
}

static void
fcgi_each_param(void *ctx, void (*fn)(void *, const char *), void *arg)
{
	FCGX_Request *r = ctx;
	char  **e;

	for (e = r->envp; e && *e; e++)
		fn(arg, *e);
}

/* ---- the read deadline ---------------------------------------------------
 *
 * A request must arrive whole (its FastCGI records: parameters and body)
 * within [limits] read_timeout_ms of its connection being accepted, or of
 * its first byte on a kept connection; otherwise one slow or stalled peer
 * per worker stops every answer, and a stopping worker waits on it.
 * libfcgi reads with blocking read(2) calls deep inside FCGX_Accept_r() and
 * FCGX_GetStr(), so the deadline is an interval timer (ITIMER_REAL): its
 * SIGALRM handler shuts the connection down for reading.  The read in
 * progress returns (EINTR, the handler has no SA_RESTART) and every later
 * one returns end-of-file at once, whatever libfcgi was waiting for, so it
 * gives the request up as broken; deadline_passed says why.  The timer runs
 * only while a request is being read, never while it is processed
 * (libpq), and is re-armed for the close, where libfcgi reads what the
 * peer still sends.
 */
static volatile sig_atomic_t deadline_fd = -1;
static volatile sig_atomic_t deadline_passed;

static void
on_deadline(int sig)
{
	int	saved = errno;

	deadline_passed = 1;
	if (deadline_fd >= 0)
		(void)shutdown(deadline_fd, SHUT_RD);
	errno = saved;
}

static void
deadline_arm(int fd, int64_t ms)
{
	struct itimerval it;

	memset(&it, 0, sizeof(it));
	it.it_value.tv_sec = (time_t)(ms / 1000);
	it.it_value.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	deadline_passed = 0;
	deadline_fd = fd;
	setitimer(ITIMER_REAL, &it, NULL);
}

static void
deadline_disarm(void)
{
	struct itimerval it;

	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	deadline_fd = -1;
}

static long
fcgi_read(void *ctx, void *buf, size_t n)
{
	FCGX_Request *r = ctx;
	int	want = n > 65536 ? 65536 : (int)n;
	int	got = FCGX_GetStr(buf, want, r->in);

	if (got <= 0 && deadline_passed)
		return PN_IO_TIMEOUT;
	return got;
}

static void
fcgi_read_end(void *ctx)
{
	deadline_disarm();
}

static bool
fcgi_write(void *ctx, const void *buf, size_t n)
{
	FCGX_Request *r = ctx;

	return FCGX_PutStr(buf, (int)n, r->out) == (int)n;
}

/* ---- a worker ------------------------------------------------------------ */

static void
install(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: ppoll() must return */
	sigaction(sig, &sa, NULL);
}

/* Block the signals we handle; *set (if given) receives them. */
static void
block_signals(sigset_t *set)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGQUIT);
	sigaddset(&s, SIGHUP);
	sigaddset(&s, SIGCHLD);
	sigprocmask(SIG_BLOCK, &s, NULL);
	if (set)
		*set = s;
}

/*
 * How a reload loads the configuration: as the program did at start, a
 * receiver without the paynotify command's keys (PN_CFG_RECEIVER), `paynotify
 * confirm` (a handle hook: no receiver) as that command.
 */
static unsigned
reload_flags(const struct pn_provider *p)
{
	return p->handle == NULL ? PN_CFG_RECEIVER : 0;
}

/* Reload in this process (single-process mode). */
static void
reload_in_place(struct pn_receiver *rcv, const char *path)
{
	const struct pn_provider *p = rcv->provider;
	struct pn_config *old = rcv->cfg, *cfg;
	struct pn_err err;

	cfg = pn_cfg_load_flags(path, reload_flags(p), &err);
	if (cfg == NULL) {
		pn_log(PN_LOG_ERROR, "configuration reload refused, the old one keeps serving: %s",
		       err.msg);
		pn_metrics_reload(false);
		return;
	}
	pn_metrics_sites(cfg);
	pn_metrics_reload(true);
	pn_receiver_destroy(rcv);
	pn_cfg_free(old);
	pn_receiver_init(rcv, p, cfg);
	pn_log_set_level((int)cfg->log_level);
	pn_log(PN_LOG_INFO, "configuration reloaded from %s (%zu sites)", path, cfg->nsites);
}

/*
 * libfcgi's FCGI_WEB_SERVER_ADDRS, kept now that the worker accepts: when
 * set, an IPv4 peer must be one of its comma-separated addresses.
 */
static bool
peer_allowed(const struct sockaddr_in *in)
{
	const char *list = getenv("FCGI_WEB_SERVER_ADDRS");
	char	buf[1024], *cur, *next;

	if (list == NULL || *list == '\0')
		return true;
	snprintf(buf, sizeof(buf), "%s", list);
	for (cur = buf; cur != NULL; cur = next) {
		struct in_addr a;

		next = strchr(cur, ',');
		if (next != NULL)
			*next++ = '\0';
		if (inet_pton(AF_INET, cur, &a) == 1 && a.s_addr == in->sin_addr.s_addr)
			return true;
	}
	return false;
}

/*
 * Accept one connection on the (non-blocking) listening socket; the peer's
 * address goes to peer for log lines.  -1 when another worker took it (or
 * the peer is refused).
 */
static int
accept_conn(int listen_fd, char *peer, size_t peersz)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int	fd, one = 1;

	memset(&ss, 0, sizeof(ss));	/* a unix peer may fill in less than ss_family */
	fd = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
	if (fd < 0)
		return -1;
	snprintf(peer, peersz, "unix socket peer");
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
		char	host[INET6_ADDRSTRLEN] = "?";
		unsigned port;

		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
			if (!peer_allowed(in)) {
				pn_log(PN_LOG_WARNING, "refused a FastCGI connection from %s: not in "
				       "FCGI_WEB_SERVER_ADDRS", host);
				close(fd);
				return -1;
			}
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
			port = ntohs(in6->sin6_port);
		}
		snprintf(peer, peersz, "%s port %u", host, port);
		/* answers are small and whole: no Nagle delay (as libfcgi) */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	return fd;
}

/*
 * Serve requests until SIGTERM/SIGINT/SIGQUIT.  Handled signals are blocked
 * all along and let through only inside ppoll(), while no request is being
 * served (waiting for a connection, or for the next request on a kept one).
 * reload_path: reload on SIGHUP (single-process mode); NULL in a pre-forked
 * worker, which the supervisor replaces instead.
 *
 * The worker accepts connections itself and hands each to libfcgi as if it
 * were a kept connection (libfcgi's own listening socket is -1, so it never
 * accepts): that gives the read deadline the connection's fd from its first
 * byte, and the peer's address to the log.
 */
static void
worker_loop(struct pn_receiver *rcv, int listen_fd, const char *reload_path)
{
	FCGX_Request req;
	sigset_t waitmask;
	char	peer[96] = "";

	install(SIGTERM, on_term);
	install(SIGINT, on_term);
	install(SIGQUIT, on_term);
	install(SIGHUP, reload_path ? on_hup : SIG_IGN);
	install(SIGALRM, on_deadline);
	block_signals(NULL);
	sigprocmask(SIG_SETMASK, NULL, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGQUIT);
	sigdelset(&waitmask, SIGHUP);

	/* Non-blocking accept: several workers wait on one socket. */
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
	FCGX_InitRequest(&req, -1, 0);
	while (!got_term) {
		int64_t	timeout_ms = rcv->cfg->read_timeout_ms;
		bool	fresh = false;

		if (got_hup) {
			got_hup = 0;
			reload_in_place(rcv, reload_path);
			timeout_ms = rcv->cfg->read_timeout_ms;
		}
		/* Wait for a new connection or, with FCGI_KEEP_CONN, for the
		 * next request on the web server's open connection; either way
		 * with the signals let in. */
		{
			struct pollfd pfd = {.fd = req.ipcFd >= 0 ? req.ipcFd : listen_fd,
					     .events = POLLIN};

			if (ppoll(&pfd, 1, NULL, &waitmask) <= 0)
				continue;	/* a signal: look at the flags */
		}
		/* A ppoll() that finds a connection ready returns without
		 * delivering a pending signal: under a steady stream a stopping
		 * or retiring worker would accept for ever.  Let pending
		 * signals in, look. */
		{
			sigset_t blocked;

			sigprocmask(SIG_SETMASK, &waitmask, &blocked);
			sigprocmask(SIG_SETMASK, &blocked, NULL);
		}
		if (got_term || got_hup)
			continue;
		if (req.ipcFd < 0) {
			req.ipcFd = accept_conn(listen_fd, peer, sizeof(peer));
			if (req.ipcFd < 0)
				continue;	/* another worker took the connection */
			req.keepConnection = 1;	/* read it, do not close it first */
			fresh = true;
		}
		deadline_arm(req.ipcFd, timeout_ms);
		if (FCGX_Accept_r(&req) < 0) {
			/* libfcgi closed the connection: the peer went away, broke
			 * the protocol, or missed the deadline */
			deadline_disarm();
			if (deadline_passed) {
				pn_log(PN_LOG_WARNING, "dropped a FastCGI connection (%s): request "
				       "parameters not received within [limits] read_timeout_ms "
				       "(%lld ms)%s", peer, (long long)timeout_ms,
				       fresh ? "" : " on a kept connection");
				pn_metrics_dropped();
			}
			continue;
		}
		{
			struct pn_io io = {.ctx = &req, .param = fcgi_param,
					   .each_param = fcgi_each_param, .read = fcgi_read,
					   .write = fcgi_write, .read_end = fcgi_read_end};

			if (rcv->provider->handle != NULL)
				rcv->provider->handle(rcv, &io);	/* paynotify confirm */
			else
				pn_pipeline_handle(rcv, &io);
		}
		deadline_disarm();
		/* Closing, libfcgi reads what the peer still sends: bounded too. */
		deadline_arm(req.ipcFd, timeout_ms);
		FCGX_Finish_r(&req);
		deadline_disarm();
		pn_pipeline_after_answer(rcv);
	}
	/* a kept connection, closed: libfcgi drains it, bounded as above */
	if (req.ipcFd >= 0)
		deadline_arm(req.ipcFd, rcv->cfg->read_timeout_ms);
	FCGX_Free(&req, 1);
	deadline_disarm();
}

static int
serve_here(const struct pn_provider *p, const struct pn_server_opts *o, int listen_fd,
	   struct pn_config *cfg)
{
	struct pn_receiver rcv;

	pn_receiver_init(&rcv, p, cfg);
	pn_metrics_workers(1, 1);	/* this process */
	pn_proctitle_set("%s: server", p->program);
	pn_log(PN_LOG_INFO, "serving FastCGI (%zu sites)", cfg->nsites);
	worker_loop(&rcv, listen_fd, o->config_path);
	pn_log(PN_LOG_INFO, "stopped");
	cfg = rcv.cfg;
	pn_receiver_destroy(&rcv);
	pn_cfg_free(cfg);
	return 0;
}

/* ---- the supervisor ------------------------------------------------------ */

struct slot {
	pid_t	pid;		/* 0: not running */
	int64_t	started_ms;
	int64_t	respawn_ms;	/* when to start it again (0: now) */
	int64_t	backoff_ms;
};

struct supervisor {
	const struct pn_provider *p;
	const struct pn_server_opts *o;
	int	listen_fd;
	struct pn_config *cfg;
	struct slot slots[MAX_WORKERS];
	pid_t	retiring[MAX_WORKERS * 4];	/* old generation, finishing their requests */
	size_t	nretiring;
};

static pid_t
spawn(struct supervisor *sv, struct slot *sl)
{
	pid_t pid = fork();

	if (pid < 0) {
		pn_log(PN_LOG_ERROR, "could not fork a worker: %s", strerror(errno));
		sl->respawn_ms = mono_ms() + BACKOFF_MAX_MS;
		return -1;
	}
	if (pid == 0) {
		struct pn_receiver rcv;
		size_t	n = (size_t)(sl - sv->slots) + 1;
		char	name[32];

		signal(SIGCHLD, SIG_DFL);
		pn_proctitle_set("%s: worker %zu", sv->p->program, n);
		snprintf(name, sizeof(name), "pn-%s.%zu", sv->p->name, n);
		pn_proctitle_set_name(strlen(name) < 16 ? name : sv->p->program);
		pn_receiver_init(&rcv, sv->p, sv->cfg);
		worker_loop(&rcv, sv->listen_fd, NULL);
		pn_receiver_destroy(&rcv);
		pn_cfg_free(sv->cfg);
		_exit(0);
	}
	sl->pid = pid;
	sl->started_ms = mono_ms();
	sl->respawn_ms = 0;
	return pid;
}

static void
describe_exit(int status, char *buf, size_t sz)
{
	if (WIFSIGNALED(status))
		snprintf(buf, sz, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, sz, "exited with status %d", WEXITSTATUS(status));
}

static void
reap(struct supervisor *sv, bool stopping)
{
	int	status;
	pid_t	pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		char	how[64];
		size_t	i;
		bool	found = false;

		describe_exit(status, how, sizeof(how));
		for (i = 0; i < sv->nretiring; i++)
			if (sv->retiring[i] == pid) {
				sv->retiring[i] = sv->retiring[--sv->nretiring];
				found = true;
				break;
			}
		for (i = 0; !found && i < (size_t)sv->o->workers; i++) {
			struct slot *sl = &sv->slots[i];
			int64_t lived;

			if (sl->pid != pid)
				continue;
			found = true;
			sl->pid = 0;
			if (stopping)
				break;
			pn_metrics_worker_died();
			lived = mono_ms() - sl->started_ms;
			if (lived >= HEALTHY_AFTER_S * 1000)
				sl->backoff_ms = BACKOFF_MIN_MS;
			else
				sl->backoff_ms = sl->backoff_ms ? sl->backoff_ms * 2 : BACKOFF_MIN_MS;
			if (sl->backoff_ms > BACKOFF_MAX_MS)
				sl->backoff_ms = BACKOFF_MAX_MS;
			sl->respawn_ms = mono_ms() + (lived >= HEALTHY_AFTER_S * 1000 ? 0 : sl->backoff_ms);
			pn_log(PN_LOG_ERROR, "worker %ld %s after %lld ms; restarting it in %lld ms",
			       (long)pid, how, (long long)lived,
			       (long long)(sl->respawn_ms - mono_ms()));
		}
		if (!found)
			pn_log(PN_LOG_DEBUG, "process %ld %s", (long)pid, how);
	}
}

static void
reload(struct supervisor *sv)
{
	struct pn_err err;
	struct pn_config *cfg = pn_cfg_load_flags(sv->o->config_path, reload_flags(sv->p), &err);
	size_t	i;

	if (cfg == NULL) {
		pn_log(PN_LOG_ERROR, "configuration reload refused, the old one keeps serving: %s",
		       err.msg);
		pn_metrics_reload(false);
		return;
	}
	pn_metrics_sites(cfg);		/* before the new workers start */
	pn_metrics_reload(true);
	pn_cfg_free(sv->cfg);
	sv->cfg = cfg;
	pn_log_set_level((int)cfg->log_level);
	/* New generation first, so the socket is never without a worker;
	 * then the old one stops after its current request. */
	for (i = 0; i < (size_t)sv->o->workers; i++) {
		struct slot *sl = &sv->slots[i];
		pid_t	old = sl->pid;

		if (old > 0 && sv->nretiring < PN_ARRAY_LEN(sv->retiring))
			sv->retiring[sv->nretiring++] = old;
		sl->pid = 0;
		sl->backoff_ms = 0;
		spawn(sv, sl);
		if (old > 0)
			kill(old, SIGTERM);
	}
	pn_log(PN_LOG_INFO, "configuration reloaded from %s (%zu sites); workers replaced",
	       sv->o->config_path, cfg->nsites);
}

static bool
any_alive(const struct supervisor *sv)
{
	size_t i;

	if (sv->nretiring > 0)
		return true;
	for (i = 0; i < (size_t)sv->o->workers; i++)
		if (sv->slots[i].pid > 0)
			return true;
	return false;
}

static void
signal_all(const struct supervisor *sv, int sig)
{
	size_t i;

	for (i = 0; i < (size_t)sv->o->workers; i++)
		if (sv->slots[i].pid > 0)
			kill(sv->slots[i].pid, sig);
	for (i = 0; i < sv->nretiring; i++)
		kill(sv->retiring[i], sig);
}

static int
supervise(const struct pn_provider *p, const struct pn_server_opts *o, int listen_fd,
	  struct pn_config *cfg)
{
	struct supervisor sv;
	sigset_t set;
	int64_t	stop_deadline = 0;
	bool	stopping = false;
	size_t	i;

	memset(&sv, 0, sizeof(sv));
	sv.p = p;
	sv.o = o;
	sv.listen_fd = listen_fd;
	sv.cfg = cfg;
	block_signals(&set);

	pn_proctitle_set("%s: supervisor", p->program);
	for (i = 0; i < (size_t)o->workers; i++)
		spawn(&sv, &sv.slots[i]);
	pn_log(PN_LOG_INFO, "supervising %d workers (%zu sites)", o->workers, cfg->nsites);

	while (!stopping || any_alive(&sv)) {
		struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
		int64_t	now = mono_ms(), next = now + 1000;
		int	sig, alive = 0;

		for (i = 0; !stopping && i < (size_t)o->workers; i++) {
			struct slot *sl = &sv.slots[i];

			if (sl->pid == 0 && sl->respawn_ms <= now)
				spawn(&sv, sl);
			if (sl->pid == 0 && sl->respawn_ms < next)
				next = sl->respawn_ms;
		}
		for (i = 0; i < (size_t)o->workers; i++)
			alive += sv.slots[i].pid > 0;
		pn_metrics_workers(o->workers, alive);
		if (next > now) {
			ts.tv_sec = (next - now) / 1000;
			ts.tv_nsec = ((next - now) % 1000) * 1000000;
		} else
			ts.tv_sec = 0, ts.tv_nsec = 1000000;
		sig = sigtimedwait(&set, NULL, &ts);
		switch (sig) {
		case SIGCHLD:
			reap(&sv, stopping);
			break;
		case SIGHUP:
			if (!stopping)
				reload(&sv);
			break;
		case SIGTERM:
		case SIGINT:
		case SIGQUIT:
			if (!stopping) {
				pn_log(PN_LOG_INFO, "stopping: workers finish their requests");
				pn_proctitle_set("%s: supervisor (stopping)", p->program);
				stopping = true;
				stop_deadline = mono_ms() + STOP_GRACE_S * 1000;
				signal_all(&sv, SIGTERM);
			}
			break;
		default:
			break;
		}
		if (stopping && mono_ms() > stop_deadline) {
			pn_log(PN_LOG_ERROR, "workers did not stop in %d s: killing them", STOP_GRACE_S);
			signal_all(&sv, SIGKILL);
			stop_deadline = mono_ms() + 60000;
		}
	}
	pn_log(PN_LOG_INFO, "stopped");
	pn_cfg_free(sv.cfg);
	return 0;
}

int
pn_server_run(const struct pn_provider *p, const struct pn_server_opts *o, int listen_fd,
	      struct pn_config *cfg)
{
	struct pn_err err;

	if (FCGX_Init() != 0) {
		pn_log(PN_LOG_ERROR, "could not initialise libfcgi");
		pn_cfg_free(cfg);
		return PN_EXIT_SOFTWARE;
	}
	/* Before any fork: the workers share the counters (metrics.h). */
	if (pn_metrics_init(p->name, &err))
		pn_metrics_sites(cfg);
	else
		pn_log(PN_LOG_ERROR, "%s; the status path will answer 404", err.msg);
	if (o->workers <= 0)
		return serve_here(p, o, listen_fd, cfg);
	if (o->workers > MAX_WORKERS) {
		pn_log(PN_LOG_ERROR, "invalid --workers: at most %d workers", MAX_WORKERS);
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	return supervise(p, o, listen_fd, cfg);
}

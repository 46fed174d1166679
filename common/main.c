/*
 * main.c: main() of every receiver, written once.
 *
 * Compiled once per receiver with -DPN_PROVIDER=pn_provider_<name>.  The
 * same binary serves
 *   - one request as plain CGI (environment + stdin), when fd 0 is not a
 *     socket and --listen is not given;
 *   - FastCGI on fd 0 when fd 0 is a listening socket (web server,
 *     spawn-fcgi, systemd socket unit);
 *   - FastCGI on its own socket with --listen, pre-forking --workers N.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "exit.h"
#include "log.h"
#include "pidfile.h"
#include "pipeline.h"
#include "proctitle.h"
#include "server.h"

#ifndef PN_PROVIDER
#error "compile with -DPN_PROVIDER=pn_provider_<name>"
#endif

extern char **environ;

/* ---- CGI ---------------------------------------------------------------- */

static const char *
cgi_param(void *ctx, const char *name)
{
	return getenv(name);
}

static void
cgi_each_param(void *ctx, void (*fn)(void *, const char *), void *arg)
{
	char **e;

	for (e = environ; *e; e++)
		fn(arg, *e);
}

/*
 * The body on fd 0, read with read(2) after poll(2) against the request's
 * deadline ([limits] read_timeout_ms from the start of the process), so a
 * client that sends its body slowly cannot hold a CGI process for longer.
 */
static int64_t cgi_deadline_us;

static long
cgi_read(void *ctx, void *buf, size_t n)
{
	for (;;) {
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		int64_t	left_ms = (cgi_deadline_us - pn_now_us() + 999) / 1000;
		ssize_t	got;
		int	rc;

		if (left_ms <= 0)
			return PN_IO_TIMEOUT;
		rc = poll(&pfd, 1, left_ms > INT32_MAX ? INT32_MAX : (int)left_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0)
			return PN_IO_TIMEOUT;
		got = read(STDIN_FILENO, buf, n);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return got < 0 ? -1 : (long)got;
	}
}

static bool
cgi_write(void *ctx, const void *buf, size_t n)
{
	return fwrite(buf, 1, n, stdout) == n;
}

static int
serve_cgi(const struct pn_provider *provider, struct pn_config *cfg)
{
	struct pn_receiver rcv;
	struct pn_io io = {.param = cgi_param, .each_param = cgi_each_param, .read = cgi_read,
			   .write = cgi_write};
	int	rc = PN_EXIT_OK;

	if (cfg)
		cgi_deadline_us = pn_now_us() + cfg->read_timeout_ms * 1000;
	pn_receiver_init(&rcv, provider, cfg);
	pn_pipeline_handle(&rcv, &io);
	/* Close stdout first: the web server has the whole answer before the
	 * wake-up is sent. */
	if (fclose(stdout) != 0)
		rc = PN_EXIT_IOERR;
	pn_pipeline_after_answer(&rcv);
	pn_receiver_destroy(&rcv);
	pn_cfg_free(cfg);
	return rc;
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-c FILE] [--listen unix:PATH|HOST:PORT] [--workers N] [--pidfile FILE]\n"
		"          [--user USER [--group GROUP]]\n"
		"\n"
		"Receives %s payment notifications.  Without --listen it is a CGI program,\n"
		"or a FastCGI responder when fd 0 is a listening socket.\n"
		"\n"
		"  -c, --config FILE        configuration (default: $PAYNOTIFY_CONFIG, else\n"
		"                           " PN_DEFAULT_CONFIG "), then\n"
		"                           conf.d/*.conf beside it\n"
		"  -l, --listen ADDR        FastCGI on unix:PATH or HOST:PORT\n"
		"  -w, --workers N          pre-fork N supervised workers (default with\n"
		"                           --listen: 2; on fd 0: 0 = serve in this process)\n"
		"  -m, --socket-mode MODE   octal mode of a unix socket (default 0660)\n"
		"  -o, --socket-owner U[:G] owner of a unix socket (only root may give it away)\n"
		"  -u, --user USER          started as root: bind the socket and write the pid\n"
		"                           file, then serve as USER (the configuration, its\n"
		"                           keys and every reload are read as USER)\n"
		"  -g, --group GROUP        with --user: serve with group GROUP (default: the\n"
		"                           user's primary group)\n"
		"  -p, --pidfile FILE       write the supervisor's pid to FILE (removed on a\n"
		"                           clean stop; refused if it names a live receiver)\n"
		"  -t, --check-config       load the configuration, report, and exit (0 when\n"
		"                           it loads, 78 when not: the reload command's check)\n"
		"  -h, --help               show this help\n"
		"  -V, --version            show the version\n"
		"\n"
		"Signals: SIGTERM stops after in-flight requests; SIGHUP reloads the\n"
		"configuration and keys (a broken one is refused, the old one keeps serving).\n"
		"ps shows \"%s: supervisor\" and \"%s: worker N\" (task names pn-%s.N).\n"
		"\n"
		"Exit status: 0 stopped cleanly, 3 could not answer (CGI), 64 usage, 71 could\n"
		"not listen or write the pid file, 73 another receiver serves the --listen\n"
		"address or the pid file, 78 configuration error (docs/OPERATIONS.md,\n"
		"\"Exit statuses\").\n",
		prog, PN_PROVIDER.name, prog, prog, PN_PROVIDER.name);
}

/* A line written before (or instead of) pn_log: the journal's error priority. */
static const char *
err_prefix(void)
{
	return pn_log_stderr_is_journal() ? "<3>" : "";
}

/* root_cfg: the same file read before the drop (NULL: none), to say that a
 * site's keys are unreadable by the user rather than broken. */
static void
log_disabled_sites(const struct pn_config *cfg, const struct pn_config *root_cfg)
{
	size_t	i, j;

	for (i = 0; i < cfg->nsites; i++) {
		bool	root_could = false;

		if (cfg->sites[i].disabled == NULL)
			continue;
		for (j = 0; root_cfg != NULL && j < root_cfg->nsites; j++)
			if (strcmp(root_cfg->sites[j].name, cfg->sites[i].name) == 0)
				root_could = root_cfg->sites[j].disabled == NULL;
		pn_log(PN_LOG_ERROR, "site %s is disabled (answers 503 until fixed): %s%s",
		       cfg->sites[i].name, cfg->sites[i].disabled,
		       root_could ? " (root could read its keys: the --user cannot)" : "");
	}
}

/*
 * --user: the socket is bound and chowned and the pid file written; become
 * the user, then read the configuration again as the user, and serve that
 * one: what serves is what a reload (SIGHUP) will read.  NULL (the old one
 * freed, logged, *rc the exit status) when the drop fails or the user
 * cannot read the file.
 */
static struct pn_config *
serve_as(const struct pn_identity *id, const struct pn_server_opts *opts,
	 struct pn_config *root_cfg, const char *pidfile, int *rc)
{
	struct pn_config *cfg;
	struct pn_err err;

	if (!pn_server_drop_privileges(id, &err)) {
		pn_log(PN_LOG_ERROR, "%s", err.msg);
		cfg = NULL;
		*rc = PN_EXIT_OSERR;
	} else {
		*rc = PN_EXIT_CONFIG;
		cfg = pn_cfg_load_flags(opts->config_path, PN_CFG_ISOLATE_SITES | PN_CFG_RECEIVER,
					&err);
		if (cfg == NULL)
			pn_log(PN_LOG_ERROR, "could not load configuration as user %s (the workers "
			       "and every reload read it as that user; make it readable by %s): %s",
			       id->user, id->user, err.msg);
		else {
			log_disabled_sites(cfg, root_cfg);
			pn_log_set_level((int)cfg->log_level);
			pn_log(PN_LOG_INFO, "serving as user %s (uid %ld), group %s (gid %ld)",
			       id->user, (long)id->uid, id->group, (long)id->gid);
		}
	}
	pn_cfg_free(root_cfg);
	if (cfg == NULL) {
		/* as the user now: removed if the directory lets it */
		pn_server_unlink_socket();
		pn_pidfile_remove(pidfile);
	}
	return cfg;
}

/* The command line. */
struct cmdline {
	struct pn_server_opts opts;
	const char *pidfile, *user, *group;
	struct pn_identity id;
	bool	check_only;
};

/* One option of getopt_long() into cl; -1: go on, else the exit status. */
static int
parse_option(int c, const struct pn_provider *provider, struct cmdline *cl)
{
	char   *end;

	switch (c) {
	case 'c':
		cl->opts.config_path = optarg;
		break;
	case 'l':
		cl->opts.listen = optarg;
		break;
	case 'w':
		cl->opts.workers = (int)strtol(optarg, &end, 10);
		if (*end != '\0' || cl->opts.workers < 0) {
			fprintf(stderr, "%s%s: invalid --workers \"%s\": expected a number of "
				"workers (0 or more)\n", err_prefix(), provider->program, optarg);
			return PN_EXIT_USAGE;
		}
		break;
	case 'm':
		cl->opts.socket_mode = (mode_t)strtol(optarg, &end, 8);
		if (*end != '\0' || cl->opts.socket_mode > 0777) {
			fprintf(stderr, "%s%s: invalid --socket-mode \"%s\": expected an octal "
				"mode such as 0660\n", err_prefix(), provider->program, optarg);
			return PN_EXIT_USAGE;
		}
		break;
	case 'o':
		cl->opts.socket_owner = optarg;
		break;
	case 'p':
		if (*optarg == '\0') {
			fprintf(stderr, "%s%s: invalid --pidfile \"\"\n", err_prefix(),
				provider->program);
			return PN_EXIT_USAGE;
		}
		cl->pidfile = optarg;
		break;
	case 'u':
		cl->user = optarg;
		break;
	case 'g':
		cl->group = optarg;
		break;
	case 't':
		cl->check_only = true;
		break;
	case 'h':
		usage(stdout, provider->program);
		return 0;
	case 'V':
		printf("%s %s\n", provider->program, PACKAGE_VERSION);
		return 0;
	default:
		usage(stderr, provider->program);
		return PN_EXIT_USAGE;
	}
	return -1;
}

/* The command line into cl; -1: go on, else the exit status (--help, --version,
 * a usage error). */
static int
parse_args(int argc, char **argv, const struct pn_provider *provider, struct cmdline *cl)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"listen", required_argument, NULL, 'l'},
		{"workers", required_argument, NULL, 'w'},
		{"socket-mode", required_argument, NULL, 'm'},
		{"socket-owner", required_argument, NULL, 'o'},
		{"pidfile", required_argument, NULL, 'p'},
		{"user", required_argument, NULL, 'u'},
		{"group", required_argument, NULL, 'g'},
		{"check-config", no_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct pn_err err;
	int	c, rc;

	while ((c = getopt_long(argc, argv, "c:l:w:m:o:p:u:g:thV", longopts, NULL)) != -1)
		if ((rc = parse_option(c, provider, cl)) >= 0)
			return rc;
	if (optind != argc) {
		usage(stderr, provider->program);
		return PN_EXIT_USAGE;
	}
	if (cl->group != NULL && cl->user == NULL) {
		fprintf(stderr, "%s%s: --group needs --user (the user to serve as)\n", err_prefix(),
			provider->program);
		return PN_EXIT_USAGE;
	}
	if (cl->user != NULL) {
		if (!pn_server_identity(cl->user, cl->group, &cl->id, &err)) {
			fprintf(stderr, "%s%s: %s\n", err_prefix(), provider->program, err.msg);
			return PN_EXIT_USAGE;
		}
		if (geteuid() != 0) {
			fprintf(stderr, "%s%s: --user %s: only root can change user (this process "
				"runs as uid %ld); start it as root, or without --user as %s "
				"itself\n", err_prefix(), provider->program, cl->id.user,
				(long)geteuid(), cl->id.user);
			return PN_EXIT_USAGE;
		}
	}
	if (cl->opts.config_path == NULL)
		cl->opts.config_path = pn_cfg_default_path();
	return -1;
}

/* -t: what the check found (cfg NULL: err), the exit status. */
static int
check_result(const struct cmdline *cl, struct pn_config *cfg, const struct pn_err *err)
{
	if (cfg == NULL) {
		/* ExecReload= runs this: journalctl -p err shows why */
		if (cl->id.set)
			fprintf(stderr, "%s%s (read as user %s, as the workers and every "
				"reload read it: make the files readable by %s)\n",
				err_prefix(), err->msg, cl->id.user, cl->id.user);
		else
			fprintf(stderr, "%s%s\n", err_prefix(), err->msg);
		return PN_EXIT_CONFIG;
	}
	if (cl->id.set)
		printf("%s: configuration OK (%zu sites) as user %s\n", cl->opts.config_path,
		       cfg->nsites, cl->id.user);
	else
		printf("%s: configuration OK (%zu sites)\n", cl->opts.config_path, cfg->nsites);
	pn_cfg_free(cfg);
	return 0;
}

/* FastCGI: the pid file, the socket, --user, then the server; the exit status. */
static int
serve_fastcgi(const struct pn_provider *provider, struct cmdline *cl, struct pn_config *cfg)
{
	struct pn_server_opts *opts = &cl->opts;
	struct pn_err err;
	int	rc, listen_fd = 0;

	if (cl->pidfile != NULL && !pn_pidfile_check(cl->pidfile, provider->program, &err)) {
		pn_log(PN_LOG_ERROR, "%s", err.msg);
		pn_cfg_free(cfg);
		return PN_EXIT_IN_USE;
	}
	if (opts->listen != NULL) {
		listen_fd = pn_server_listen(opts->listen, opts->socket_mode, opts->socket_owner,
					     &err);
		if (listen_fd < 0) {
			pn_log(PN_LOG_ERROR, "%s", err.msg);
			pn_cfg_free(cfg);
			return listen_fd == PN_LISTEN_IN_USE ? PN_EXIT_IN_USE : PN_EXIT_OSERR;
		}
		if (opts->workers < 0)
			opts->workers = 2;
	} else if (opts->workers < 0)
		opts->workers = 0;
	if (cl->pidfile != NULL && !pn_pidfile_write(cl->pidfile, &err)) {
		pn_log(PN_LOG_ERROR, "%s", err.msg);
		pn_server_unlink_socket();
		pn_cfg_free(cfg);
		return PN_EXIT_OSERR;
	}
	if (cl->id.set) {
		cfg = serve_as(&cl->id, opts, cfg, cl->pidfile, &rc);
		if (cfg == NULL)
			return rc;
	} else if (geteuid() == 0)
		pn_log(PN_LOG_WARNING, "running as root: the workers will serve requests as root; "
		       "start with --user (e.g. --user paynotify --socket-owner paynotify:www-data, "
		       "docs/DEPLOYMENT.md \"Without systemd\") or from the systemd units");
	rc = pn_server_run(provider, opts, listen_fd, cfg);
	pn_server_unlink_socket();
	pn_pidfile_remove(cl->pidfile);
	return rc;
}

int
main(int argc, char **argv)
{
	const struct pn_provider *provider = &PN_PROVIDER;
	struct cmdline cl = {.opts = {.workers = -1, .socket_mode = 0660}};
	struct pn_config *cfg;
	struct pn_err err;
	int	rc;

	/* first: getopt and the configuration keep pointers into argv */
	argv = pn_proctitle_init(argc, argv);
	if ((rc = parse_args(argc, argv, provider, &cl)) >= 0)
		return rc;
	pn_log_init(provider->program, PN_LOG_INFO);
	signal(SIGPIPE, SIG_IGN);

	/* -t --user: check as the workers (and their reloads) will read it */
	if (cl.check_only && cl.id.set && !pn_server_drop_privileges(&cl.id, &err)) {
		fprintf(stderr, "%s%s\n", err_prefix(), err.msg);
		return PN_EXIT_OSERR;
	}
	/* -t checks strictly; serving isolates a site whose keys are unusable */
	cfg = pn_cfg_load_flags(cl.opts.config_path, cl.check_only ? PN_CFG_RECEIVER
				: PN_CFG_ISOLATE_SITES | PN_CFG_RECEIVER, &err);
	if (cfg != NULL && !cl.check_only && !cl.id.set)	/* with --user: after the drop */
		log_disabled_sites(cfg, NULL);
	if (cl.check_only)
		return check_result(&cl, cfg, &err);
	if (cl.opts.listen == NULL && FCGX_IsCGI()) {
		if (cl.id.set) {
			fprintf(stderr, "%s%s: --user is for a FastCGI server (--listen, or a "
				"socket on fd 0); a CGI program runs as its web server's user\n",
				err_prefix(), provider->program);
			pn_cfg_free(cfg);
			return PN_EXIT_USAGE;
		}
		/* CGI: a broken configuration still gets the provider's
		 * failure form, so that the provider retries. */
		if (cfg == NULL)
			pn_log(PN_LOG_ERROR, "could not load configuration: %s", err.msg);
		else
			pn_log_set_level((int)cfg->log_level);
		return serve_cgi(provider, cfg);
	}
	if (cfg == NULL) {
		pn_log(PN_LOG_ERROR, "could not load configuration: %s", err.msg);
		return PN_EXIT_CONFIG;	/* a supervisor should not spin on it */
	}
	pn_log_set_level((int)cfg->log_level);
	return serve_fastcgi(provider, &cl, cfg);
}

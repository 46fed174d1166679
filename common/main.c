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

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "log.h"
#include "pipeline.h"
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

static long
cgi_read(void *ctx, void *buf, size_t n)
{
	size_t got = fread(buf, 1, n, stdin);

	if (got == 0 && ferror(stdin))
		return -1;
	return (long)got;
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
	struct pn_io io = {NULL, cgi_param, cgi_each_param, cgi_read, cgi_write};
	int	rc = 0;

	pn_receiver_init(&rcv, provider, cfg);
	pn_pipeline_handle(&rcv, &io);
	/* Close stdout first: the web server has the whole answer before the
	 * wake-up is sent. */
	if (fclose(stdout) != 0)
		rc = 1;
	pn_pipeline_after_answer(&rcv);
	pn_receiver_destroy(&rcv);
	pn_cfg_free(cfg);
	return rc;
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-c FILE] [--listen unix:PATH|HOST:PORT] [--workers N]\n"
		"\n"
		"Receives %s payment notifications.  Without --listen it is a CGI program,\n"
		"or a FastCGI responder when fd 0 is a listening socket.\n"
		"\n"
		"  -c, --config FILE        configuration (default: $PAYNOTIFY_CONFIG, else\n"
		"                           " PN_DEFAULT_CONFIG ")\n"
		"  -l, --listen ADDR        FastCGI on unix:PATH or HOST:PORT\n"
		"  -w, --workers N          pre-fork N supervised workers (default with\n"
		"                           --listen: 2; on fd 0: 0 = serve in this process)\n"
		"  -m, --socket-mode MODE   octal mode of a unix socket (default 0660)\n"
		"  -o, --socket-owner U[:G] owner of a unix socket\n"
		"  -t, --check-config       load the configuration, report, and exit\n"
		"  -h, --help               show this help\n"
		"  -V, --version            show the version\n"
		"\n"
		"Signals: SIGTERM stops after in-flight requests; SIGHUP reloads the\n"
		"configuration and keys (a broken one is refused, the old one keeps serving).\n",
		prog, PN_PROVIDER.name);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"listen", required_argument, NULL, 'l'},
		{"workers", required_argument, NULL, 'w'},
		{"socket-mode", required_argument, NULL, 'm'},
		{"socket-owner", required_argument, NULL, 'o'},
		{"check-config", no_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const struct pn_provider *provider = &PN_PROVIDER;
	struct pn_server_opts opts = {NULL, NULL, -1, 0660, NULL};
	struct pn_config *cfg;
	struct pn_err err;
	bool	check_only = false;
	int	c, listen_fd = 0;

	while ((c = getopt_long(argc, argv, "c:l:w:m:o:thV", longopts, NULL)) != -1) {
		char   *end;

		switch (c) {
		case 'c':
			opts.config_path = optarg;
			break;
		case 'l':
			opts.listen = optarg;
			break;
		case 'w':
			opts.workers = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || opts.workers < 0) {
				fprintf(stderr, "%s: invalid --workers \"%s\"\n", provider->program, optarg);
				return 2;
			}
			break;
		case 'm':
			opts.socket_mode = (mode_t)strtol(optarg, &end, 8);
			if (*end != '\0' || opts.socket_mode > 0777) {
				fprintf(stderr, "%s: invalid --socket-mode \"%s\"\n", provider->program,
					optarg);
				return 2;
			}
			break;
		case 'o':
			opts.socket_owner = optarg;
			break;
		case 't':
			check_only = true;
			break;
		case 'h':
			usage(stdout, provider->program);
			return 0;
		case 'V':
			printf("%s %s\n", provider->program, PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr, provider->program);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr, provider->program);
		return 2;
	}
	if (opts.config_path == NULL)
		opts.config_path = pn_cfg_default_path();
	pn_log_init(provider->program, PN_LOG_INFO);
	signal(SIGPIPE, SIG_IGN);

	cfg = pn_cfg_load(opts.config_path, &err);
	if (check_only) {
		if (cfg == NULL) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		printf("%s: configuration OK (%zu sites)\n", opts.config_path, cfg->nsites);
		pn_cfg_free(cfg);
		return 0;
	}
	if (opts.listen == NULL && FCGX_IsCGI()) {
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
		return 78;	/* EX_CONFIG: a supervisor should not spin on it */
	}
	pn_log_set_level((int)cfg->log_level);
	if (opts.listen != NULL) {
		listen_fd = pn_server_listen(opts.listen, opts.socket_mode, opts.socket_owner, &err);
		if (listen_fd < 0) {
			pn_log(PN_LOG_ERROR, "%s", err.msg);
			pn_cfg_free(cfg);
			return 1;
		}
		if (opts.workers < 0)
			opts.workers = 2;
	} else if (opts.workers < 0)
		opts.workers = 0;
	return pn_server_run(provider, &opts, listen_fd, cfg);
}

/*
 * main.c: main() of every receiver, written once.
 *
 * Compiled once per receiver with -DPN_PROVIDER=pn_provider_<name>.  The
 * same binary serves one request as plain CGI (environment + stdin) or, when
 * fd 0 is a listening socket (web server, spawn-fcgi, systemd socket unit),
 * loops as a FastCGI responder.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "log.h"
#include "pipeline.h"

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

/* ---- FastCGI ------------------------------------------------------------ */

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

static long
fcgi_read(void *ctx, void *buf, size_t n)
{
	FCGX_Request *r = ctx;
	int	want = n > 65536 ? 65536 : (int)n;

	return FCGX_GetStr(buf, want, r->in);
}

static bool
fcgi_write(void *ctx, const void *buf, size_t n)
{
	FCGX_Request *r = ctx;

	return FCGX_PutStr(buf, (int)n, r->out) == (int)n;
}

static int
serve_fastcgi(struct pn_receiver *rcv)
{
	FCGX_Request req;

	if (FCGX_Init() != 0) {
		pn_log(PN_LOG_ERROR, "could not initialise libfcgi");
		return 1;
	}
	if (FCGX_InitRequest(&req, 0, 0) != 0) {
		pn_log(PN_LOG_ERROR, "could not initialise a FastCGI request");
		return 1;
	}
	pn_log(PN_LOG_INFO, "serving FastCGI on fd 0 (%zu sites)", rcv->cfg ? rcv->cfg->nsites : 0);
	while (FCGX_Accept_r(&req) >= 0) {
		struct pn_io io = {&req, fcgi_param, fcgi_each_param, fcgi_read, fcgi_write};

		pn_pipeline_handle(rcv, &io);
		FCGX_Finish_r(&req);
	}
	FCGX_Free(&req, 1);
	pn_log(PN_LOG_INFO, "FastCGI loop ended");
	return 0;
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-c FILE]\n"
		"\n"
		"Receives %s payment notifications as a CGI program, or as a FastCGI\n"
		"responder when fd 0 is a listening socket.\n"
		"\n"
		"  -c, --config FILE   configuration file (default: $PAYNOTIFY_CONFIG,\n"
		"                      else /etc/paynotify/paynotify.conf)\n"
		"  -h, --help          show this help\n"
		"  -V, --version       show the version\n",
		prog, PN_PROVIDER.name);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const struct pn_provider *provider = &PN_PROVIDER;
	const char *config_path = NULL;
	struct pn_config *cfg;
	struct pn_receiver rcv;
	struct pn_err err;
	int	c, rc = 0;
	bool	cgi;

	while ((c = getopt_long(argc, argv, "c:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
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
	if (config_path == NULL)
		config_path = pn_cfg_default_path();
	pn_log_init(provider->program, PN_LOG_INFO);
	signal(SIGPIPE, SIG_IGN);

	cgi = FCGX_IsCGI();
	cfg = pn_cfg_load(config_path, &err);
	if (cfg == NULL) {
		pn_log(PN_LOG_ERROR, "could not load configuration: %s", err.msg);
		if (!cgi)
			return 78;	/* EX_CONFIG: a supervisor should not spin on it */
	} else
		pn_log_set_level((int)cfg->log_level);

	pn_receiver_init(&rcv, provider, cfg);
	if (cgi) {
		struct pn_io io = {NULL, cgi_param, cgi_each_param, cgi_read, cgi_write};

		pn_pipeline_handle(&rcv, &io);
		if (fflush(stdout) != 0)
			rc = 1;
	} else
		rc = serve_fastcgi(&rcv);
	pn_receiver_destroy(&rcv);
	pn_cfg_free(cfg);
	return rc;
}

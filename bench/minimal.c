/*
 * bench/minimal.c: the throughput ceiling for bench/run, not part of the
 * product.  A libfcgi responder that does the least a notification receiver
 * can do against the same schema: read the body, pick notify_id and
 * out_trade_no out of an Alipay form body with strstr (no decoding, no
 * signature, no raw body kept), and run ONE prepared statement that inserts
 * the dedup row (or counts a delivery) and marks the order paid, then
 * answers "success".
 *
 *   pn-minimal SOCKET_PATH WORKERS CONNINFO
 *
 * Pre-forks WORKERS processes on one unix socket; SIGTERM stops them all.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcgiapp.h>
#include <libpq-fe.h>

#define SQL \
	"WITH ins AS (" \
	" INSERT INTO paynotify.notifications AS n" \
	"  (site, provider, dedup_key, event_kind, order_id, outcome, raw_body)" \
	" VALUES ($1, 'alipay', $2, 'paid', $3, 'applied', '\\x'::bytea)" \
	" ON CONFLICT (site, provider, dedup_key) DO UPDATE" \
	"  SET deliveries = n.deliveries + 1, last_delivery_at = now()" \
	" RETURNING (xmax = 0) AS inserted)" \
	"UPDATE paynotify.orders o SET status = 'paid', psp = 'alipay', paid_at = now(), " \
	" updated_at = now() FROM ins" \
	" WHERE ins.inserted AND o.site = $1 AND o.order_id = $3 AND o.status = 'pending'"

static pid_t kids[256];
static int nkids;

static void
on_term(int sig)
{
	int i;

	for (i = 0; i < nkids; i++)
		kill(kids[i], SIGTERM);
	_exit(0);
}

/* The value of "&name=" (or "name=" at the start) in a form body, copied. */
static int
field(const char *body, const char *name, char *out, size_t cap)
{
	size_t	nl = strlen(name);
	const char *p = body;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == body || p[-1] == '&') && p[nl] == '=') {
			size_t n = strcspn(p + nl + 1, "&");

			if (n == 0 || n >= cap)
				return 0;
			memcpy(out, p + nl + 1, n);
			out[n] = '\0';
			return 1;
		}
		p += nl;
	}
	return 0;
}

static void
worker(int lfd, const char *conninfo)
{
	FCGX_Request req;
	PGconn *c = PQconnectdb(conninfo);
	PGresult *r;
	char   *body = malloc(1 << 20);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pn-minimal: %s", PQerrorMessage(c));
		_exit(1);
	}
	r = PQprepare(c, "s", SQL, 3, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "pn-minimal: prepare: %s", PQerrorMessage(c));
		_exit(1);
	}
	PQclear(r);
	FCGX_InitRequest(&req, lfd, 0);
	while (FCGX_Accept_r(&req) >= 0) {
		const char *cl = FCGX_GetParam("CONTENT_LENGTH", req.envp);
		const char *path = FCGX_GetParam("PATH_INFO", req.envp);
		const char *site = path ? strrchr(path, '/') : NULL;
		char	id[256], order[256];
		const char *vals[3];
		long	len = cl ? strtol(cl, NULL, 10) : 0;
		int	got = 0, n;

		if (len < 0 || len >= (1 << 20))
			len = 0;
		while (got < len && (n = FCGX_GetStr(body + got, (int)(len - got), req.in)) > 0)
			got += n;
		body[got] = '\0';
		if (site == NULL || !field(body, "notify_id", id, sizeof(id))
		    || !field(body, "out_trade_no", order, sizeof(order))) {
			FCGX_PutS("Status: 400\r\nContent-Type: text/plain\r\n\r\nfail", req.out);
			FCGX_Finish_r(&req);
			continue;
		}
		vals[0] = site + 1;
		vals[1] = id;
		vals[2] = order;
		r = PQexecPrepared(c, "s", 3, vals, NULL, NULL, 0);
		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			FCGX_PutS("Status: 200\r\nContent-Type: text/plain\r\n\r\nsuccess", req.out);
		else
			FCGX_PutS("Status: 503\r\nContent-Type: text/plain\r\n\r\nfail", req.out);
		PQclear(r);
		FCGX_Finish_r(&req);
	}
	_exit(0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sun;
	int	lfd, i, n;

	if (argc != 4 || (n = atoi(argv[2])) < 1 || n > 256) {
		fprintf(stderr, "usage: pn-minimal SOCKET_PATH WORKERS CONNINFO\n");
		return 2;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", argv[1]);
	unlink(argv[1]);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) != 0
	    || chmod(argv[1], 0666) != 0 || listen(lfd, 1024) != 0) {
		perror("pn-minimal: listen");
		return 1;
	}
	FCGX_Init();
	for (i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0)
			worker(lfd, argv[3]);
		kids[nkids++] = pid;
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return 0;
}

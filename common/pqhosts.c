/*
 * pqhosts.c: the hosts of a multi-host libpq connection string, rotated.
 *
 * libpq's lists (libpq "Connection Strings", multiple hosts): host,
 * hostaddr and port are comma-separated; a port list has one entry for
 * every host, or one for all of them; no escaping of commas.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pqhosts.h"
#include "sql.h"		/* <libpq-fe.h> (no SQL here) */
#include "util.h"

struct list {
	char  **v;
	size_t	n;
	char   *rotated;		/* the last pn_pqhosts_params() form */
};

struct pn_pqhosts {
	PQconninfoOption *opts;
	size_t	nopts;			/* options with a value */
	size_t	n;			/* hosts */
	struct list host, hostaddr, port;
	const char **keys, **vals;	/* the last pn_pqhosts_params() */
};

static void
list_split(struct list *l, const char *s)
{
	const char *p = s;

	for (;;) {
		size_t	len = strcspn(p, ",");

		l->v = pn_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
		l->v[l->n++] = pn_xstrndup(p, len);
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
}

static void
list_free(struct list *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->rotated);
}

/* The list from entry `first` on, wrapping around, joined with commas; a
 * list that is not one entry per host (a single port for all) unchanged. */
static const char *
list_rotated(struct list *l, size_t nhosts, size_t first)
{
	size_t	i, len = 0, at = 0;

	free(l->rotated);
	for (i = 0; i < l->n; i++)
		len += strlen(l->v[i]) + 1;
	l->rotated = pn_xmalloc(len + 1);
	for (i = 0; i < l->n; i++) {
		const char *e = l->v[l->n == nhosts ? (first + i) % nhosts : i];
		size_t	elen = strlen(e);

		if (i > 0)
			l->rotated[at++] = ',';
		memcpy(l->rotated + at, e, elen);
		at += elen;
	}
	l->rotated[at] = '\0';
	return l->rotated;
}

struct pn_pqhosts *
pn_pqhosts_new(const char *conninfo)
{
	PQconninfoOption *opts, *o;
	struct pn_pqhosts *h;
	char   *errmsg = NULL;

	opts = PQconninfoParse(conninfo ? conninfo : "", &errmsg);
	if (opts == NULL) {
		PQfreemem(errmsg);
		return NULL;
	}
	h = pn_xcalloc(1, sizeof(*h));
	h->opts = opts;
	for (o = opts; o->keyword; o++) {
		if (o->val == NULL)
			continue;
		h->nopts++;
		if (strcmp(o->keyword, "host") == 0)
			list_split(&h->host, o->val);
		else if (strcmp(o->keyword, "hostaddr") == 0)
			list_split(&h->hostaddr, o->val);
		else if (strcmp(o->keyword, "port") == 0)
			list_split(&h->port, o->val);
	}
	h->n = h->host.n > 0 ? h->host.n : h->hostaddr.n;
	if (h->n < 2) {
		pn_pqhosts_free(h);
		return NULL;
	}
	return h;
}

void
pn_pqhosts_free(struct pn_pqhosts *h)
{
	if (h == NULL)
		return;
	PQconninfoFree(h->opts);
	list_free(&h->host);
	list_free(&h->hostaddr);
	list_free(&h->port);
	free(h->keys);
	free(h->vals);
	free(h);
}

size_t
pn_pqhosts_count(const struct pn_pqhosts *h)
{
	return h->n;
}

void
pn_pqhosts_params(struct pn_pqhosts *h, size_t first, const char *const *fb_keys,
		  const char *const *fb_vals, size_t nfb, const char *const **keys,
		  const char *const **vals)
{
	PQconninfoOption *o;
	size_t	i, k = 0;

	first %= h->n;
	free(h->keys);
	free(h->vals);
	h->keys = pn_xcalloc(nfb + h->nopts + 1, sizeof(*h->keys));
	h->vals = pn_xcalloc(nfb + h->nopts + 1, sizeof(*h->vals));
	for (i = 0; i < nfb; i++, k++) {
		h->keys[k] = fb_keys[i];
		h->vals[k] = fb_vals[i];
	}
	for (o = h->opts; o->keyword; o++) {
		if (o->val == NULL)
			continue;
		h->keys[k] = o->keyword;
		if (strcmp(o->keyword, "host") == 0)
			h->vals[k] = list_rotated(&h->host, h->n, first);
		else if (strcmp(o->keyword, "hostaddr") == 0)
			h->vals[k] = list_rotated(&h->hostaddr, h->n, first);
		else if (strcmp(o->keyword, "port") == 0)
			h->vals[k] = list_rotated(&h->port, h->n, first);
		else
			h->vals[k] = o->val;
		k++;
	}
	*keys = h->keys;
	*vals = h->vals;
}

const char *
pn_pqhosts_name(const struct pn_pqhosts *h, size_t i)
{
	if (i < h->host.n && h->host.v[i][0] != '\0')
		return h->host.v[i];
	if (i < h->hostaddr.n)
		return h->hostaddr.v[i];
	return "";
}

int
pn_pqhosts_find(const struct pn_pqhosts *h, const char *host, const char *port)
{
	size_t	i;

	if (host == NULL)
		return -1;
	for (i = 0; i < h->n; i++) {
		/* PQhost(): the host entry, or the hostaddr one when host is empty */
		if (strcmp(pn_pqhosts_name(h, i), host) != 0)
			continue;
		if (port != NULL && h->port.n > 0
		    && strcmp(h->port.v[h->port.n == h->n ? i : 0], port) != 0
		    && h->port.v[h->port.n == h->n ? i : 0][0] != '\0')
			continue;
		return (int)i;
	}
	return -1;
}

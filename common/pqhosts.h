/*
 * pqhosts.h: the hosts of a multi-host libpq connection string
 * (host=A,B port=P,Q ...), so that a connection can start at any of them.
 *
 * libpq tries the hosts in the order written and keeps the first one that
 * accepts the connection (and, with target_session_attrs, the session).  A
 * pooler in front of each node accepts the connection whether or not its
 * server is usable, so the receiver, not libpq, learns that a host failed
 * (docs/DEPLOYMENT.md "Failover through poolers"): the store then starts
 * its next connection at the host after the one that failed, and libpq
 * goes on from there in the written order, wrapping around.
 */
#ifndef PN_PQHOSTS_H
#define PN_PQHOSTS_H

#include <stddef.h>

struct pn_pqhosts;

/*
 * NULL when conninfo names fewer than two hosts (nothing to rotate) or does
 * not parse (the connection attempt then says why).  Free with
 * pn_pqhosts_free() (NULL-safe).
 */
struct pn_pqhosts *pn_pqhosts_new(const char *conninfo);
void pn_pqhosts_free(struct pn_pqhosts *h);

size_t pn_pqhosts_count(const struct pn_pqhosts *h);

/*
 * The connection parameters with host `first` tried first: the nfb
 * fallback pairs, then every parameter the conninfo sets (its host,
 * hostaddr and port lists rotated), NULL-terminated, for
 * PQconnectdbParams(keys, vals, 0) (the last value of a key wins).  The
 * arrays and strings belong to h, valid until the next call or free.
 */
void pn_pqhosts_params(struct pn_pqhosts *h, size_t first, const char *const *fb_keys,
		       const char *const *fb_vals, size_t nfb, const char *const **keys,
		       const char *const **vals);

/*
 * The index (in the conninfo's order) of the host a connection reached,
 * given PQhost() and PQport() of it; -1 when none matches.
 */
int pn_pqhosts_find(const struct pn_pqhosts *h, const char *host, const char *port);

/* Host i as written (its host, else its hostaddr, entry; "" for the
 * default), for log lines. */
const char *pn_pqhosts_name(const struct pn_pqhosts *h, size_t i);

#endif

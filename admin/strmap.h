/*
 * strmap.h: a small string-keyed map for the admin command (open
 * addressing, FNV-1a, storage in a pn_arena).  Sized once for the keys it
 * will hold: no growth, no deletion; the first value put for a key stays.
 * Keys and values are not copied: they must outlive the map.
 */
#ifndef PN_STRMAP_H
#define PN_STRMAP_H

#include <stddef.h>

#include "arena.h"

struct pn_strmap {
	size_t cap, n;
	const char **keys;
	void **vals;
};

/* Room for want keys (at least 64 slots, a power of two over 2 * want). */
void pn_strmap_init(struct pn_strmap *m, struct pn_arena *a, size_t want);
/* The value put for k, or NULL (also for k NULL). */
void *pn_strmap_get(const struct pn_strmap *m, const char *k);
/* Put k -> v unless k is NULL, already there, or the map is full. */
void pn_strmap_put(struct pn_strmap *m, const char *k, void *v);

#endif

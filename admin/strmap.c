/*
 * strmap.c: a small string map (open addressing, arena); strmap.h.
 * Moved out of cmd_reconcile.c unchanged.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "strmap.h"

static uint64_t
fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

void
pn_strmap_init(struct pn_strmap *m, struct pn_arena *a, size_t want)
{
	m->cap = 64;
	while (m->cap < want * 2 + 1)
		m->cap *= 2;
	m->n = 0;
	m->keys = pn_arena_alloc(a, m->cap * sizeof(*m->keys));
	m->vals = pn_arena_alloc(a, m->cap * sizeof(*m->vals));
}

void *
pn_strmap_get(const struct pn_strmap *m, const char *k)
{
	size_t i;

	if (k == NULL)
		return NULL;
	for (i = fnv(k) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (strcmp(m->keys[i], k) == 0)
			return m->vals[i];
	return NULL;
}

/* The first value for a key stays; want was sized for every key put. */
void
pn_strmap_put(struct pn_strmap *m, const char *k, void *v)
{
	size_t i;

	if (k == NULL || m->n * 2 + 1 >= m->cap)
		return;
	for (i = fnv(k) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (strcmp(m->keys[i], k) == 0)
			return;
	m->keys[i] = k;
	m->vals[i] = v;
	m->n++;
}

/*
 * arena.h: a per-request memory arena.
 *
 * Everything a request allocates through the arena is released at once by
 * pn_arena_reset() at the end of the request; a FastCGI worker therefore
 * cannot grow with the number of requests it has served.  The first block is
 * kept across resets so that the steady state does no malloc at all for
 * small requests.  Memory from libraries (jansson, libxml2, OpenSSL, libpq)
 * is not in the arena and is freed by its owner before the request ends.
 */
#ifndef PN_ARENA_H
#define PN_ARENA_H

#include <stddef.h>
#include "util.h"

struct pn_arena;

struct pn_arena *pn_arena_new(void);
void pn_arena_free(struct pn_arena *a);		/* NULL-safe */
void pn_arena_reset(struct pn_arena *a);	/* frees every allocation */
size_t pn_arena_used(const struct pn_arena *a);

void *pn_arena_alloc(struct pn_arena *a, size_t n);	/* 16-byte aligned, zeroed */
char *pn_arena_strdup(struct pn_arena *a, const char *s);
char *pn_arena_strndup(struct pn_arena *a, const char *s, size_t n);
void *pn_arena_memdup(struct pn_arena *a, const void *p, size_t n);
char *pn_arena_printf(struct pn_arena *a, const char *fmt, ...) PN_PRINTF(2, 3);

#endif

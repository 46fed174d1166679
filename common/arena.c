/*
 * arena.c: bump allocator with a list of blocks.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define ARENA_BLOCK 16384
#define ARENA_ALIGN 16

struct block {
	struct block *next;
	size_t	size;		/* usable bytes after the header */
	size_t	used;
	_Alignas(16) unsigned char data[];
};

struct pn_arena {
	struct block *head;	/* current block, list of all blocks */
	struct block *first;	/* the block kept across resets */
	size_t	total;
};

static struct block *
block_new(size_t size)
{
	struct block *b = pn_xmalloc(sizeof(*b) + size);

	b->next = NULL;
	b->size = size;
	b->used = 0;
	return b;
}

struct pn_arena *
pn_arena_new(void)
{
	struct pn_arena *a = pn_xcalloc(1, sizeof(*a));

	a->head = a->first = block_new(ARENA_BLOCK);
	return a;
}

void
pn_arena_free(struct pn_arena *a)
{
	struct block *b, *next;

	if (a == NULL)
		return;
	for (b = a->head; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

void
pn_arena_reset(struct pn_arena *a)
{
	struct block *b, *next;

	/* Free every block but the first one. */
	for (b = a->head; b; b = next) {
		next = b->next;
		if (b != a->first)
			free(b);
	}
	a->first->next = NULL;
	a->first->used = 0;
	a->head = a->first;
	a->total = 0;
}

size_t
pn_arena_used(const struct pn_arena *a)
{
	return a->total;
}

void *
pn_arena_alloc(struct pn_arena *a, size_t n)
{
	struct block *b = a->head;
	size_t	off = (b->used + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void   *p;

	if (n > SIZE_MAX / 2)
		pn_fatal("arena allocation too large");
	if (off + n > b->size) {
		size_t size = n > ARENA_BLOCK / 2 ? n : ARENA_BLOCK;
		struct block *nb = block_new(size);

		if (n > ARENA_BLOCK / 2) {
			/* A large allocation gets its own block behind the
			 * current one, so the current block keeps filling. */
			nb->next = b->next;
			b->next = nb;
			nb->used = n;
			a->total += n;
			memset(nb->data, 0, n);
			return nb->data;
		}
		nb->next = b;
		a->head = nb;
		b = nb;
		off = 0;
	}
	p = b->data + off;
	b->used = off + n;
	a->total += n;
	memset(p, 0, n);
	return p;
}

void *
pn_arena_memdup(struct pn_arena *a, const void *p, size_t n)
{
	void *q = pn_arena_alloc(a, n + 1);

	if (n)
		memcpy(q, p, n);
	return q;
}

char *
pn_arena_strndup(struct pn_arena *a, const char *s, size_t n)
{
	return pn_arena_memdup(a, s, n);	/* memdup leaves a NUL */
}

char *
pn_arena_strdup(struct pn_arena *a, const char *s)
{
	return pn_arena_strndup(a, s, strlen(s));
}

char *
pn_arena_printf(struct pn_arena *a, const char *fmt, ...)
{
	va_list ap;
	size_t	n;
	char   *p;

	va_start(ap, fmt);
	n = pn_vsize(fmt, ap);
	p = pn_arena_alloc(a, n + 1);
	vsnprintf(p, n + 1, fmt, ap);
	va_end(ap);
	return p;
}

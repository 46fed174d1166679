/*
 * buf.c: growable byte buffer.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void
pn_buf_reserve(struct pn_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need < b->len)
		pn_fatal("buffer size overflow");
	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->data = pn_xrealloc(b->data, cap);
	b->cap = cap;
}

void
pn_buf_put(struct pn_buf *b, const void *p, size_t n)
{
	pn_buf_reserve(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
pn_buf_puts(struct pn_buf *b, const char *s)
{
	pn_buf_put(b, s, strlen(s));
}

void
pn_buf_putc(struct pn_buf *b, char c)
{
	pn_buf_put(b, &c, 1);
}

void
pn_buf_printf(struct pn_buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t	n;

	va_start(ap, fmt);
	n = pn_vsize(fmt, ap);
	pn_buf_reserve(b, n);
	vsnprintf(b->data + b->len, n + 1, fmt, ap);
	va_end(ap);
	b->len += n;
}

void
pn_buf_reset(struct pn_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void
pn_buf_free(struct pn_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *
pn_buf_steal(struct pn_buf *b, size_t *len)
{
	char *p;

	if (b->data == NULL) {
		b->data = pn_xmalloc(1);	/* an empty string, never NULL */
		b->data[0] = '\0';
	}
	p = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

/*
 * buf.h: a growable byte buffer (always NUL-terminated for convenience).
 * The buffer owns its memory; pn_buf_free() releases it and leaves an empty,
 * reusable buffer.
 */
#ifndef PN_BUF_H
#define PN_BUF_H

#include <stddef.h>
#include "util.h"

struct pn_buf {
	char   *data;		/* NULL until first write; else data[len] == '\0' */
	size_t	len;
	size_t	cap;
};

#define PN_BUF_INIT { NULL, 0, 0 }

void pn_buf_reserve(struct pn_buf *b, size_t extra);
void pn_buf_put(struct pn_buf *b, const void *p, size_t n);
void pn_buf_puts(struct pn_buf *b, const char *s);
void pn_buf_putc(struct pn_buf *b, char c);
void pn_buf_printf(struct pn_buf *b, const char *fmt, ...) PN_PRINTF(2, 3);
void pn_buf_reset(struct pn_buf *b);	/* len = 0, keeps memory */
void pn_buf_free(struct pn_buf *b);	/* releases memory */
/* Hands the data over to the caller (who frees it) and resets the buffer. */
char *pn_buf_steal(struct pn_buf *b, size_t *len);

#endif

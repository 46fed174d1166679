/*
 * util.h: the project-wide conventions: errors, allocation, attributes.
 *
 * Error convention (HACKING.md): a fallible function returns bool (true on
 * success) and fills a caller-provided struct pn_err on failure.  Messages
 * follow PostgreSQL's style: lower case, no trailing period, specific.
 * Allocation failure is not an error we recover from: pn_xmalloc() and
 * friends abort, as tmux and PgBouncer's startup paths do.
 */
#ifndef PN_UTIL_H
#define PN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PN_WUR __attribute__((warn_unused_result))
#define PN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PN_NORETURN __attribute__((noreturn))
#define PN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct pn_err {
	char msg[512];
};

/* Set err->msg (err may be NULL: then nothing is recorded). */
void pn_err_set(struct pn_err *err, const char *fmt, ...) PN_PRINTF(2, 3);
/* Prefix an existing message: "what: <old message>". */
void pn_err_prefix(struct pn_err *err, const char *fmt, ...) PN_PRINTF(2, 3);

/* Allocation that aborts on failure.  Returned memory is owned by the caller. */
void *pn_xmalloc(size_t n);
void *pn_xcalloc(size_t n, size_t size);
void *pn_xrealloc(void *p, size_t n);
char *pn_xstrdup(const char *s);
char *pn_xstrndup(const char *s, size_t n);
char *pn_xasprintf(const char *fmt, ...) PN_PRINTF(1, 2);
/* The length vsnprintf() will print for fmt and ap (ap is not consumed:
 * the caller then prints with the same ap); aborts on a format error. */
size_t pn_vsize(const char *fmt, va_list ap) PN_PRINTF(1, 0);
PN_NORETURN void pn_fatal(const char *fmt, ...) PN_PRINTF(1, 2);

/* ASCII helpers that ignore the locale. */
bool pn_streq_nocase(const char *a, const char *b);
char *pn_trim(char *s);		/* trims ASCII blanks in place; returns s advanced */

/* Is s[0..len) well-formed UTF-8 (no overlongs, no surrogates)? */
bool pn_utf8_valid(const char *s, size_t len);
/* s as valid UTF-8: every byte that is not part of a well-formed sequence
 * becomes the four characters \xNN.  Deterministic (the same bytes always
 * give the same text), so it can be used for keys.  Returns s itself when it
 * is valid; otherwise a malloc'd string the caller frees. */
char *pn_utf8_escape(const char *s);

/* Value of one hex digit (either case), or -1. */
int pn_hexval(unsigned char c);

/* Parse a whole decimal string into int64 (no sign, no blanks). */
bool pn_parse_i64(const char *s, int64_t *out) PN_WUR;

/* Read a whole file (at most max bytes) into a NUL-terminated buffer. */
bool pn_read_file(const char *path, size_t max, char **out, size_t *len,
		  struct pn_err *err) PN_WUR;

/* Microseconds on the monotonic clock. */
int64_t pn_now_us(void);

#endif

/*
 * util.c: errors, aborting allocation, small string helpers.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "util.h"

void
pn_err_set(struct pn_err *err, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

void
pn_err_prefix(struct pn_err *err, const char *fmt, ...)
{
	char	prefix[256], old[sizeof(err->msg)];
	int	n;
	va_list ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is acceptable: the prefix matters most. */
	n = snprintf(err->msg, sizeof(err->msg), "%s: ", prefix);
	if (n > 0 && (size_t)n < sizeof(err->msg) - 1) {
		size_t room = sizeof(err->msg) - (size_t)n - 1;
		size_t len = strnlen(old, room);

		memcpy(err->msg + n, old, len);
		err->msg[(size_t)n + len] = '\0';
	}
}

void
pn_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("paynotify: fatal: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

void *
pn_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		pn_fatal("out of memory (%zu bytes)", n);
	return p;
}

void *
pn_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		pn_fatal("out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *
pn_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		pn_fatal("out of memory (%zu bytes)", n);
	return q;
}

char *
pn_xstrdup(const char *s)
{
	return pn_xstrndup(s, strlen(s));
}

char *
pn_xstrndup(const char *s, size_t n)
{
	char *p = pn_xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

size_t
pn_vsize(const char *fmt, va_list ap)
{
	va_list cp;
	int	n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		pn_fatal("vsnprintf failed");
	return (size_t)n;
}

char *
pn_xasprintf(const char *fmt, ...)
{
	va_list ap;
	size_t	n;
	char   *p;

	va_start(ap, fmt);
	n = pn_vsize(fmt, ap);
	p = pn_xmalloc(n + 1);
	vsnprintf(p, n + 1, fmt, ap);
	va_end(ap);
	return p;
}

bool
pn_streq_nocase(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;

		if (ca >= 'A' && ca <= 'Z')
			ca = (unsigned char)(ca - 'A' + 'a');
		if (cb >= 'A' && cb <= 'Z')
			cb = (unsigned char)(cb - 'A' + 'a');
		if (ca != cb)
			return false;
		if (ca == '\0')
			return true;
	}
}

char *
pn_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/* Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0. */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t	len, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
	    || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool
pn_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t	i = 0, n;

	while (i < len) {
		if ((n = utf8_seq(p + i, len - i)) == 0)
			return false;
		i += n;
	}
	return true;
}

char *
pn_utf8_escape(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t	len = strlen(s), i = 0, o = 0, n;
	char   *out;

	if (pn_utf8_valid(s, len))
		return (char *)s;
	out = pn_xmalloc(len * 4 + 1);
	while (i < len) {
		if ((n = utf8_seq(p + i, len - i)) == 0) {
			snprintf(out + o, 5, "\\x%02x", p[i]);
			o += 4;
			i++;
			continue;
		}
		memcpy(out + o, p + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
	return out;
}

int
pn_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool
pn_parse_i64(const char *s, int64_t *out)
{
	int64_t v = 0;

	if (s == NULL || *s == '\0')
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (INT64_MAX - (*s - '0')) / 10)
			return false;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return true;
}

bool
pn_read_file(const char *path, size_t max, char **out, size_t *len, struct pn_err *err)
{
	int	fd;
	char   *buf = NULL;
	size_t	used = 0, cap = 4096;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pn_err_set(err, "could not open \"%s\": %s", path, strerror(errno));
		return false;
	}
	buf = pn_xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap) {
			cap *= 2;
			buf = pn_xrealloc(buf, cap);
		}
		n = read(fd, buf + used, cap - used - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			pn_err_set(err, "could not read \"%s\": %s", path, strerror(errno));
			goto failed;
		}
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > max) {
			pn_err_set(err, "file \"%s\" is larger than %zu bytes", path, max);
			goto failed;
		}
	}
	close(fd);
	buf[used] = '\0';
	*out = buf;
	if (len)
		*len = used;
	return true;
failed:
	close(fd);
	free(buf);
	return false;
}

int64_t
pn_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

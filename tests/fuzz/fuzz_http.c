/*
 * fuzz_http.c: the request reader, pn_request_read(), through a fake
 * struct pn_io, then the routing and answer helpers.
 *
 * Input: one control byte (bits 0-1: max_body 16 / 1024 / 4096 / 1 MiB;
 * bits 2-4: read chunk size 1 .. 128; bit 5: the body stream ends with a
 * read error instead of end-of-file), then CGI parameters as
 * "NAME=value" lines up to an empty line, then the body bytes.
 * Invariants: an accepted request respects max_body and the header
 * limits, its body is NUL-terminated, headers are unique by name and
 * findable, and the answer written back is well formed.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "http.h"

struct fake {
	char  **params;		/* "NAME=value" */
	size_t	nparams;
	const uint8_t *body;
	size_t	body_len, pos, chunk;
	bool	fail_at_end;
	size_t	written;
};

static const char *
fake_param(void *ctx, const char *name)
{
	struct fake *f = ctx;
	size_t	i, n = strlen(name);

	for (i = 0; i < f->nparams; i++)
		if (strncmp(f->params[i], name, n) == 0 && f->params[i][n] == '=')
			return f->params[i] + n + 1;
	return NULL;
}

static void
fake_each_param(void *ctx, void (*fn)(void *arg, const char *kv), void *arg)
{
	struct fake *f = ctx;
	size_t	i;

	for (i = 0; i < f->nparams; i++)
		fn(arg, f->params[i]);
}

static long
fake_read(void *ctx, void *buf, size_t n)
{
	struct fake *f = ctx;
	size_t	left = f->body_len - f->pos;

	if (left == 0)
		return f->fail_at_end ? -1 : 0;
	if (n > f->chunk)
		n = f->chunk;
	if (n > left)
		n = left;
	memcpy(buf, f->body + f->pos, n);
	f->pos += n;
	return (long)n;
}

static bool
fake_write(void *ctx, const void *buf, size_t n)
{
	struct fake *f = ctx;

	fuzz_check(buf != NULL || n == 0);
	f->written += n;
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t max_bodies[] = {16, 1024, 4096, 1048576};
	static struct pn_arena *a;
	struct fake f;
	struct pn_io io = {&f, fake_param, fake_each_param, fake_read, fake_write, NULL};
	struct pn_request req;
	struct pn_response res = {0};
	struct pn_err err = {{0}};
	enum pn_read_rc rc;
	size_t	max_body, i, j;
	const uint8_t *p, *end;

	if (a == NULL)
		a = pn_arena_new();
	if (size < 1)
		return 0;
	memset(&f, 0, sizeof(f));
	max_body = max_bodies[data[0] & 3];
	f.chunk = (size_t)1 << ((data[0] >> 2) & 7);
	f.fail_at_end = (data[0] & 32) != 0;
	p = data + 1;
	end = data + size;
	/* parameters, one a line, up to an empty line */
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t	len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (len == 0) {
			p++;
			break;
		}
		f.params = pn_xrealloc(f.params, (f.nparams + 1) * sizeof(*f.params));
		f.params[f.nparams++] = fuzz_strndup(p, len);
		p += len + (nl ? 1 : 0);
	}
	f.body = p;
	f.body_len = (size_t)(end - p);

	rc = pn_request_read(&io, max_body, a, &req, &err);
	if (rc == PN_READ_OK) {
		fuzz_check(req.body_len <= max_body);
		fuzz_check(req.body[req.body_len] == '\0');
		fuzz_check(memcmp(req.body, f.body, req.body_len) == 0);
		fuzz_check(req.nheaders <= PN_MAX_HEADERS);
		fuzz_check(req.method != NULL && req.path_info != NULL);
		for (i = 0; i < req.nheaders; i++) {
			fuzz_check(pn_request_header(&req, req.headers[i].name) != NULL);
			for (j = i + 1; j < req.nheaders; j++)
				fuzz_check(strcmp(req.headers[i].name, req.headers[j].name) != 0);
		}
		(void)pn_request_header(&req, "Stripe-Signature");
		(void)pn_request_site(&req, a);
		pn_response_set(&res, 200, "text/plain", (const char *)req.body);
	} else {
		fuzz_check(err.msg[0] != '\0');
		pn_response_set(&res, rc == PN_READ_TOO_LARGE ? 413
				: rc == PN_READ_HEADERS_TOO_LARGE ? 431 : 400, NULL, NULL);
	}
	fuzz_check(pn_response_write(&io, &res));
	fuzz_check(f.written > 0);
	pn_buf_free(&res.body);
	for (i = 0; i < f.nparams; i++)
		free(f.params[i]);
	free(f.params);
	pn_arena_reset(a);
	return 0;
}

/*
 * http.c: reading a CGI/FastCGI request and writing the answer.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

struct collect {
	struct pn_request *req;
	struct pn_arena *a;
	size_t	bytes;
	bool	too_large;
};

/* "HTTP_STRIPE_SIGNATURE" -> "Stripe-Signature" */
static char *
canonical_name(struct pn_arena *a, const char *env, size_t len)
{
	char   *out = pn_arena_alloc(a, len + 1);
	size_t	i;
	bool	start = true;

	for (i = 0; i < len; i++) {
		char c = env[i];

		if (c == '_') {
			out[i] = '-';
			start = true;
			continue;
		}
		if (start && c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		else if (!start && c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		out[i] = c;
		start = false;
	}
	return out;
}

static void
collect_header(void *arg, const char *kv)
{
	struct collect *c = arg;
	struct pn_request *req = c->req;
	const char *eq;
	char   *name;
	size_t	i;

	if (strncmp(kv, "HTTP_", 5) != 0 || (eq = strchr(kv, '=')) == NULL)
		return;
	c->bytes += strlen(kv);
	if (c->bytes > PN_MAX_HEADER_BYTES || req->nheaders == PN_MAX_HEADERS) {
		c->too_large = true;
		return;
	}
	name = canonical_name(c->a, kv + 5, (size_t)(eq - kv - 5));
	for (i = 0; i < req->nheaders; i++)
		if (strcmp(req->headers[i].name, name) == 0) {
			req->headers[i].duplicate = true;
			return;
		}
	req->headers[req->nheaders].name = name;
	req->headers[req->nheaders].value = pn_arena_strdup(c->a, eq + 1);
	req->headers[req->nheaders].duplicate = false;
	req->nheaders++;
}

static enum pn_read_rc
read_request(struct pn_io *io, size_t max_body, struct pn_arena *a, struct pn_request *req,
	     struct pn_err *err)
{
	const char *v;
	struct collect c = {.req = req, .a = a, .bytes = 0, .too_large = false};
	int64_t	clen = -1;
	unsigned char *body;
	size_t	got = 0, cap;

	memset(req, 0, sizeof(*req));
	v = io->param(io->ctx, "REQUEST_METHOD");
	req->method = pn_arena_strdup(a, v ? v : "");
	v = io->param(io->ctx, "PATH_INFO");
	req->path_info = pn_arena_strdup(a, v ? v : "");
	v = io->param(io->ctx, "CONTENT_TYPE");
	req->content_type = v ? pn_arena_strdup(a, v) : NULL;
	v = io->param(io->ctx, "REQUEST_URI");
	req->request_uri = v ? pn_arena_strdup(a, v) : NULL;
	v = io->param(io->ctx, "REMOTE_ADDR");
	req->remote_addr = v ? pn_arena_strdup(a, v) : NULL;
	req->body = (const unsigned char *)"";

	io->each_param(io->ctx, collect_header, &c);
	if (c.too_large) {
		pn_err_set(err, "request headers exceed %d bytes or %d fields",
			   PN_MAX_HEADER_BYTES, PN_MAX_HEADERS);
		return PN_READ_HEADERS_TOO_LARGE;
	}

	v = io->param(io->ctx, "CONTENT_LENGTH");
	if (v != NULL && *v != '\0') {
		if (!pn_parse_i64(v, &clen)) {
			pn_err_set(err, "invalid CONTENT_LENGTH \"%.32s\"", v);
			return PN_READ_BAD;
		}
		if ((uint64_t)clen > max_body) {
			pn_err_set(err, "body of %lld bytes exceeds max_body_bytes (%zu)",
				   (long long)clen, max_body);
			return PN_READ_TOO_LARGE;
		}
	}
	/* Without CONTENT_LENGTH read to the end, but never past the limit. */
	cap = clen >= 0 ? (size_t)clen : max_body + 1;
	body = pn_arena_alloc(a, cap + 1);
	while (got < cap) {
		long n = io->read(io->ctx, body + got, cap - got);

		if (n == PN_IO_TIMEOUT) {
			if (clen >= 0)
				pn_err_set(err, "request body not received within [limits] "
					   "read_timeout_ms: %zu of %lld bytes", got, (long long)clen);
			else
				pn_err_set(err, "request body not received within [limits] "
					   "read_timeout_ms: %zu bytes, no end", got);
			return PN_READ_TIMEOUT;
		}
		if (n < 0) {
			pn_err_set(err, "could not read request body");
			return PN_READ_BAD;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (clen >= 0 && got != (size_t)clen) {
		pn_err_set(err, "request body ended after %zu of %lld bytes", got, (long long)clen);
		return PN_READ_BAD;
	}
	if (clen < 0 && got > max_body) {
		pn_err_set(err, "body exceeds max_body_bytes (%zu)", max_body);
		return PN_READ_TOO_LARGE;
	}
	body[got] = '\0';
	req->body = body;
	req->body_len = got;
	return PN_READ_OK;
}

enum pn_read_rc
pn_request_read(struct pn_io *io, size_t max_body, struct pn_arena *a,
		struct pn_request *req, struct pn_err *err)
{
	enum pn_read_rc rc = read_request(io, max_body, a, req, err);

	if (io->read_end)
		io->read_end(io->ctx);
	return rc;
}

const struct pn_header *
pn_request_header(const struct pn_request *req, const char *name)
{
	size_t i;

	for (i = 0; i < req->nheaders; i++)
		if (pn_streq_nocase(req->headers[i].name, name))
			return &req->headers[i];
	return NULL;
}

const char *
pn_request_site(const struct pn_request *req, struct pn_arena *a)
{
	const char *p = req->path_info, *end, *start;

	/* Without PATH_INFO (Apache's mod_proxy_fcgi) the request URI,
	 * without its query, names the site the same way. */
	if (*p == '\0' && req->request_uri != NULL)
		p = req->request_uri;
	end = p + strcspn(p, "?");
	if (end > p && end[-1] == '/')
		end--;		/* tolerate one trailing slash */
	start = end;
	while (start > p && start[-1] != '/')
		start--;
	if (start == end)
		return NULL;
	return pn_arena_strndup(a, start, (size_t)(end - start));
}

const char *
pn_http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

void
pn_response_set(struct pn_response *res, int status, const char *content_type,
		const char *body)
{
	res->status = status;
	res->content_type = content_type;
	pn_buf_reset(&res->body);
	if (body)
		pn_buf_puts(&res->body, body);
}

bool
pn_response_write(struct pn_io *io, const struct pn_response *res)
{
	char	head[256];
	int	n;

	if (res->content_type != NULL)
		n = snprintf(head, sizeof(head),
			     "Status: %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			     "Cache-Control: no-store\r\n%s\r\n",
			     res->status, pn_http_reason(res->status), res->content_type,
			     res->body.len, res->status == 405 ? "Allow: POST, GET, HEAD\r\n" : "");
	else
		n = snprintf(head, sizeof(head), "Status: %d %s\r\n%s\r\n", res->status,
			     pn_http_reason(res->status),
			     res->status == 204 ? "" : "Content-Length: 0\r\n");
	if (n < 0 || (size_t)n >= sizeof(head))
		return false;
	if (!io->write(io->ctx, head, (size_t)n))
		return false;
	if (res->content_type != NULL && res->body.len > 0)
		return io->write(io->ctx, res->body.data, res->body.len);
	return true;
}

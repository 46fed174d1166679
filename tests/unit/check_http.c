/*
 * check_http.c: reading a request through struct pn_io and writing answers.
 *
 * The io here is a table of CGI variables and a body in memory, the same
 * interface the CGI and FastCGI front ends fill (those run for real in
 * tests/integration).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "buf.h"
#include "http.h"
#include "suites.h"

struct mem {
	const char **env;	/* "NAME=value", NULL-terminated */
	const char *body;
	size_t	body_len, pos;
	size_t	chunk;		/* bytes per read (0: all) */
	long	fail_at;	/* read returns this once pos reaches stop (0: never) */
	size_t	stop;
	struct pn_buf out;
	int	writes_left;	/* -1: unlimited */
	int	read_end_calls;
};

static const char *
mem_param(void *ctx, const char *name)
{
	struct mem *m = ctx;
	size_t	n = strlen(name), i;

	for (i = 0; m->env[i]; i++)
		if (strncmp(m->env[i], name, n) == 0 && m->env[i][n] == '=')
			return m->env[i] + n + 1;
	return NULL;
}

static void
mem_each(void *ctx, void (*fn)(void *arg, const char *kv), void *arg)
{
	struct mem *m = ctx;
	size_t	i;

	for (i = 0; m->env[i]; i++)
		fn(arg, m->env[i]);
}

static long
mem_read(void *ctx, void *buf, size_t n)
{
	struct mem *m = ctx;
	size_t	left = m->body_len - m->pos;

	if (m->fail_at != 0 && m->pos >= m->stop)
		return m->fail_at;
	if (m->fail_at != 0 && left > m->stop - m->pos)
		left = m->stop - m->pos;
	if (m->chunk && left > m->chunk)
		left = m->chunk;
	if (left > n)
		left = n;
	memcpy(buf, m->body + m->pos, left);
	m->pos += left;
	return (long)left;
}

static bool
mem_write(void *ctx, const void *buf, size_t n)
{
	struct mem *m = ctx;

	if (m->writes_left == 0)
		return false;
	if (m->writes_left > 0)
		m->writes_left--;
	pn_buf_put(&m->out, buf, n);
	return true;
}

static void
mem_read_end(void *ctx)
{
	((struct mem *)ctx)->read_end_calls++;
}

static struct pn_io
mem_io(struct mem *m)
{
	struct pn_io io = {m, mem_param, mem_each, mem_read, mem_write, mem_read_end};

	m->writes_left = -1;
	return io;
}

/* The variables env, the body body[0..len), read in chunks of chunk bytes
 * (0: at once); a read returns fail (-1 or PN_IO_TIMEOUT) once stop bytes
 * have been read when fail is not 0. */
static struct mem
mem_of(const char **env, const char *body, size_t len, size_t chunk, long fail, size_t stop)
{
	return (struct mem){env, body, len, 0, chunk, fail, stop, PN_BUF_INIT, -1, 0};
}

static enum pn_read_rc
read_mem(struct mem *m, size_t max_body, struct pn_arena *a, struct pn_request *req,
	 struct pn_err *err)
{
	struct pn_io io = mem_io(m);

	return pn_request_read(&io, max_body, a, req, err);
}

START_TEST(test_read_basic)
{
	const char *env[] = {"REQUEST_METHOD=POST", "PATH_INFO=/notify/stripe/shop-a",
			     "CONTENT_TYPE=application/json", "CONTENT_LENGTH=9",
			     "REMOTE_ADDR=127.0.0.1", "REQUEST_URI=/notify/stripe/shop-a?x=1",
			     "HTTP_STRIPE_SIGNATURE=t=1,v1=ab", "HTTP_X_FORWARDED_FOR=10.0.0.1",
			     "HTTP_WECHATPAY_SERIAL=ABC", "SERVER_NAME=ignored", NULL};
	struct mem m = mem_of(env, "{\"a\":1}\0x", 9, 3, 0, 0);
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_err err;
	const struct pn_header *h;

	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_OK);
	ck_assert_int_eq(m.read_end_calls, 1);
	ck_assert_str_eq(req.method, "POST");
	ck_assert_str_eq(req.path_info, "/notify/stripe/shop-a");
	ck_assert_str_eq(req.content_type, "application/json");
	ck_assert_str_eq(req.remote_addr, "127.0.0.1");
	ck_assert_str_eq(req.request_uri, "/notify/stripe/shop-a?x=1");
	/* the body is raw bytes, a NUL inside included, and terminated */
	ck_assert_uint_eq(req.body_len, 9);
	ck_assert_int_eq(memcmp(req.body, "{\"a\":1}\0x", 9), 0);
	ck_assert_int_eq(req.body[9], '\0');
	/* headers: HTTP_* only, canonical names, looked up in any case */
	ck_assert_uint_eq(req.nheaders, 3);
	h = pn_request_header(&req, "stripe-signature");
	ck_assert_ptr_nonnull(h);
	ck_assert_str_eq(h->name, "Stripe-Signature");
	ck_assert_str_eq(h->value, "t=1,v1=ab");	/* value kept after its own '=' */
	ck_assert(!h->duplicate);
	ck_assert_str_eq(pn_request_header(&req, "X-FORWARDED-FOR")->name, "X-Forwarded-For");
	ck_assert_str_eq(pn_request_header(&req, "Wechatpay-Serial")->value, "ABC");
	ck_assert_ptr_null(pn_request_header(&req, "Server-Name"));
	ck_assert_ptr_null(pn_request_header(&req, "Stripe"));
	pn_arena_free(a);
}
END_TEST

START_TEST(test_read_absent)
{
	const char *env[] = {NULL};
	struct mem m = mem_of(env, "", 0, 0, 0, 0);
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_err err;

	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_OK);
	ck_assert_str_eq(req.method, "");
	ck_assert_str_eq(req.path_info, "");	/* "" when absent, as http.h says */
	ck_assert_ptr_null(req.request_uri);
	ck_assert_ptr_null(req.content_type);
	ck_assert_ptr_null(req.remote_addr);
	ck_assert_uint_eq(req.body_len, 0);
	ck_assert_str_eq((const char *)req.body, "");
	ck_assert_uint_eq(req.nheaders, 0);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_duplicate_header)
{
	const char *env[] = {"HTTP_STRIPE_SIGNATURE=first", "HTTP_STRIPE_SIGNATURE=second", NULL};
	struct mem m = mem_of(env, "", 0, 0, 0, 0);
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_err err;
	const struct pn_header *h;

	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_OK);
	ck_assert_uint_eq(req.nheaders, 1);
	h = pn_request_header(&req, "Stripe-Signature");
	ck_assert(h->duplicate);
	ck_assert_str_eq(h->value, "first");
	pn_arena_free(a);
}
END_TEST

/* CONTENT_LENGTH: bounds, lies and garbage. */
START_TEST(test_content_length)
{
	static const struct {
		const char *clen;
		size_t	body_len;
		size_t	max;
		enum pn_read_rc rc;
		const char *why;
	} cases[] = {
		{"CONTENT_LENGTH=10", 10, 10, PN_READ_OK, NULL},
		{"CONTENT_LENGTH=11", 11, 10, PN_READ_TOO_LARGE, "body of 11 bytes exceeds max_body_bytes (10)"},
		{"CONTENT_LENGTH=0", 0, 10, PN_READ_OK, NULL},
		{"CONTENT_LENGTH=", 5, 10, PN_READ_OK, NULL},	/* empty: read to the end */
		{"CONTENT_LENGTH=-1", 0, 10, PN_READ_BAD, "invalid CONTENT_LENGTH \"-1\""},
		{"CONTENT_LENGTH=1e3", 0, 10, PN_READ_BAD, "invalid CONTENT_LENGTH"},
		{"CONTENT_LENGTH= 5", 5, 10, PN_READ_BAD, "invalid CONTENT_LENGTH"},
		{"CONTENT_LENGTH=99999999999999999999", 0, 10, PN_READ_BAD, "invalid CONTENT_LENGTH"},
		{"CONTENT_LENGTH=9223372036854775807", 0, 10, PN_READ_TOO_LARGE, "exceeds max_body_bytes"},
		{"CONTENT_LENGTH=8", 5, 10, PN_READ_BAD, "request body ended after 5 of 8 bytes"},
		/* more bytes than claimed: only the claimed ones are the body */
		{"CONTENT_LENGTH=3", 8, 10, PN_READ_OK, NULL},
		/* no CONTENT_LENGTH: at most max bytes */
		{NULL, 10, 10, PN_READ_OK, NULL},
		{NULL, 11, 10, PN_READ_TOO_LARGE, "body exceeds max_body_bytes (10)"},
		{NULL, 0, 0, PN_READ_OK, NULL},
		{NULL, 1, 0, PN_READ_TOO_LARGE, "body exceeds max_body_bytes (0)"},
	};
	static const char body[] = "0123456789ABCDEF";
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		const char *env[] = {"REQUEST_METHOD=POST", cases[i].clen, NULL};
		struct mem m = mem_of(env, body, cases[i].body_len, 4, 0, 0);
		struct pn_arena *a = pn_arena_new();
		struct pn_request req;
		struct pn_err err = {""};
		enum pn_read_rc rc = read_mem(&m, cases[i].max, a, &req, &err);

		ck_assert_msg(rc == cases[i].rc, "case %zu (%s): rc %d (%s)", i,
			      cases[i].clen ? cases[i].clen : "no length", (int)rc, err.msg);
		ck_assert_int_eq(m.read_end_calls, 1);
		if (cases[i].why)
			ck_assert_msg(strstr(err.msg, cases[i].why) != NULL, "case %zu: \"%s\"", i,
				      err.msg);
		else if (cases[i].clen && strcmp(cases[i].clen, "CONTENT_LENGTH=3") == 0) {
			ck_assert_uint_eq(req.body_len, 3);
			ck_assert_str_eq((const char *)req.body, "012");
		} else if (rc == PN_READ_OK)
			ck_assert_uint_eq(req.body_len, cases[i].body_len);
		pn_arena_free(a);
	}
}
END_TEST

START_TEST(test_read_errors)
{
	const char *env[] = {"CONTENT_LENGTH=10", NULL};
	const char *noenv[] = {NULL};
	struct mem m = mem_of(env, "0123456789", 10, 2, -1, 4);
	struct pn_io io;
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_err err;

	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_BAD);
	ck_assert_str_eq(err.msg, "could not read request body");
	ck_assert_int_eq(m.read_end_calls, 1);
	m = mem_of(env, "0123456789", 10, 2, PN_IO_TIMEOUT, 4);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_TIMEOUT);
	ck_assert_str_eq(err.msg, "request body not received within [limits] read_timeout_ms: "
		"4 of 10 bytes");
	ck_assert_int_eq(m.read_end_calls, 1);
	m = mem_of(noenv, "0123456789", 10, 2, PN_IO_TIMEOUT, 6);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_TIMEOUT);
	ck_assert_str_eq(err.msg, "request body not received within [limits] read_timeout_ms: "
		"6 bytes, no end");
	/* read_end may be NULL */
	m = mem_of(noenv, "01", 2, 0, 0, 0);
	io = mem_io(&m);
	io.read_end = NULL;
	ck_assert_int_eq(pn_request_read(&io, 100, a, &req, &err), PN_READ_OK);
	pn_arena_free(a);
}
END_TEST

/* PN_MAX_HEADERS fields and PN_MAX_HEADER_BYTES bytes: at the limit and past it. */
START_TEST(test_header_limits)
{
	const char *env[PN_MAX_HEADERS + 3];
	char	names[PN_MAX_HEADERS + 1][32], *big;
	struct mem m;
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_err err;
	size_t	i;

	for (i = 0; i <= PN_MAX_HEADERS; i++) {
		snprintf(names[i], sizeof(names[i]), "HTTP_X_H%zu=v", i);
		env[i] = names[i];
	}
	env[PN_MAX_HEADERS] = NULL;
	m = mem_of(env, "", 0, 0, 0, 0);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_OK);
	ck_assert_uint_eq(req.nheaders, PN_MAX_HEADERS);
	ck_assert_str_eq(pn_request_header(&req, "X-H63")->value, "v");
	env[PN_MAX_HEADERS] = names[PN_MAX_HEADERS];
	env[PN_MAX_HEADERS + 1] = NULL;
	m = mem_of(env, "", 0, 0, 0, 0);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_HEADERS_TOO_LARGE);
	ck_assert_str_eq(err.msg, "request headers exceed 16384 bytes or 64 fields");
	ck_assert_int_eq(m.read_end_calls, 1);
	/* bytes: "HTTP_BIG=" + value, exactly 16384 and one more */
	big = malloc(PN_MAX_HEADER_BYTES + 2);
	memset(big, 'b', PN_MAX_HEADER_BYTES + 1);
	memcpy(big, "HTTP_BIG=", 9);
	big[PN_MAX_HEADER_BYTES] = '\0';
	env[0] = big;
	env[1] = "CONTENT_LENGTH=0";	/* not a header: not counted */
	env[2] = NULL;
	m = mem_of(env, "", 0, 0, 0, 0);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_OK);
	ck_assert_uint_eq(strlen(pn_request_header(&req, "Big")->value), PN_MAX_HEADER_BYTES - 9);
	big[PN_MAX_HEADER_BYTES] = 'b';
	big[PN_MAX_HEADER_BYTES + 1] = '\0';
	m = mem_of(env, "", 0, 0, 0, 0);
	ck_assert_int_eq(read_mem(&m, 100, a, &req, &err), PN_READ_HEADERS_TOO_LARGE);
	free(big);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_site)
{
	static const struct {
		const char *path_info, *uri, *site;
	} cases[] = {
		{"/notify/alipay/shop-a", NULL, "shop-a"},
		{"/notify/alipay/shop-a/", NULL, "shop-a"},	/* one trailing slash */
		{"/notify/alipay/shop-a//", NULL, NULL},
		{"shop-a", NULL, "shop-a"},
		{"/", NULL, NULL},
		{"", NULL, NULL},
		{"", "/notify/alipay/shop-b?x=1&y=/z", "shop-b"},	/* query removed */
		{"", "/notify/alipay/shop-b/?x", "shop-b"},
		{"", "/notify/alipay/?x", "alipay"},
		{"", "?x", NULL},
		{"/p/shop-a", "/notify/alipay/shop-b", "shop-a"},	/* PATH_INFO wins */
	};
	struct pn_arena *a = pn_arena_new();
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(cases); i++) {
		struct pn_request req;
		const char *got;

		memset(&req, 0, sizeof(req));
		req.path_info = cases[i].path_info;
		req.request_uri = cases[i].uri;
		got = pn_request_site(&req, a);
		if (cases[i].site == NULL)
			ck_assert_msg(got == NULL, "case %zu: got \"%s\"", i, got);
		else
			ck_assert_msg(got && strcmp(got, cases[i].site) == 0, "case %zu: got \"%s\"", i,
				      got ? got : "(null)");
	}
	pn_arena_free(a);
}
END_TEST

START_TEST(test_response)
{
	const char *env[] = {NULL};
	struct mem m = mem_of(env, "", 0, 0, 0, 0);
	struct pn_io io = mem_io(&m);
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	char	ctype[300];

	pn_response_set(&res, 200, "text/plain", "success");
	ck_assert(pn_response_write(&io, &res));
	pn_buf_putc(&m.out, '\0');
	ck_assert_str_eq(m.out.data, "Status: 200 OK\r\nContent-Type: text/plain\r\n"
			 "Content-Length: 7\r\nCache-Control: no-store\r\n\r\nsuccess");
	pn_buf_reset(&m.out);
	pn_response_set(&res, 405, "text/plain", "");	/* empty body: no second write */
	m.writes_left = 1;
	ck_assert(pn_response_write(&io, &res));
	pn_buf_putc(&m.out, '\0');
	ck_assert_str_eq(m.out.data, "Status: 405 Method Not Allowed\r\nContent-Type: text/plain\r\n"
			 "Content-Length: 0\r\nCache-Control: no-store\r\nAllow: POST, GET, HEAD\r\n\r\n");
	pn_buf_reset(&m.out);
	m.writes_left = -1;
	pn_response_set(&res, 204, NULL, NULL);
	ck_assert(pn_response_write(&io, &res));
	pn_buf_putc(&m.out, '\0');
	ck_assert_str_eq(m.out.data, "Status: 204 No Content\r\n\r\n");
	pn_buf_reset(&m.out);
	pn_response_set(&res, 503, NULL, NULL);
	ck_assert(pn_response_write(&io, &res));
	pn_buf_putc(&m.out, '\0');
	ck_assert_str_eq(m.out.data, "Status: 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
	/* write failures are reported: head, then body */
	m.writes_left = 0;
	pn_response_set(&res, 200, "text/plain", "x");
	ck_assert(!pn_response_write(&io, &res));
	m.writes_left = 1;
	ck_assert(!pn_response_write(&io, &res));
	/* a header that does not fit the head buffer is refused, not cut */
	memset(ctype, 'c', sizeof(ctype) - 1);
	ctype[sizeof(ctype) - 1] = '\0';
	m.writes_left = -1;
	pn_buf_reset(&m.out);
	pn_response_set(&res, 200, ctype, "x");
	ck_assert(!pn_response_write(&io, &res));
	ck_assert_uint_eq(m.out.len, 0);
	/* set replaces the previous body */
	pn_response_set(&res, 200, "text/plain", "first");
	pn_response_set(&res, 200, "text/plain", "2nd");
	ck_assert_uint_eq(res.body.len, 3);
	pn_buf_free(&res.body);
	pn_buf_free(&m.out);
}
END_TEST

START_TEST(test_reason)
{
	static const int known[] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 431, 500, 503};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(known); i++)
		ck_assert_str_ne(pn_http_reason(known[i]), "Unknown");
	ck_assert_str_eq(pn_http_reason(413), "Content Too Large");
	ck_assert_str_eq(pn_http_reason(431), "Request Header Fields Too Large");
	ck_assert_str_eq(pn_http_reason(299), "Unknown");
	ck_assert_str_eq(pn_http_reason(-1), "Unknown");
}
END_TEST

Suite *
suite_http(void)
{
	Suite  *s = suite_create("http");
	TCase  *tc = tcase_create("http");

	tcase_add_test(tc, test_read_basic);
	tcase_add_test(tc, test_read_absent);
	tcase_add_test(tc, test_duplicate_header);
	tcase_add_test(tc, test_content_length);
	tcase_add_test(tc, test_read_errors);
	tcase_add_test(tc, test_header_limits);
	tcase_add_test(tc, test_site);
	tcase_add_test(tc, test_response);
	tcase_add_test(tc, test_reason);
	suite_add_tcase(s, tc);
	return s;
}

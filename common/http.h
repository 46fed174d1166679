/*
 * http.h: one HTTP request as a receiver sees it, and the answer it gives.
 *
 * The request is read either from the CGI environment and stdin or from a
 * FastCGI request (libfcgi); both go through struct pn_io so the reading
 * code exists once.  All request memory lives in the request arena.
 */
#ifndef PN_HTTP_H
#define PN_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "buf.h"
#include "util.h"

#define PN_MAX_HEADERS 64
#define PN_MAX_HEADER_BYTES 16384	/* all HTTP_* parameters together */

struct pn_header {
	const char *name;	/* canonical: "Stripe-Signature" */
	const char *value;
	bool	duplicate;	/* the server passed this header more than once */
};

struct pn_request {
	const char *method;
	const char *path_info;		/* "" when absent */
	const char *request_uri;	/* NULL when absent */
	const char *content_type;	/* NULL when absent */
	const char *remote_addr;
	const unsigned char *body;	/* raw bytes, NUL-terminated for convenience */
	size_t	body_len;
	struct pn_header headers[PN_MAX_HEADERS];
	size_t	nheaders;
};

/* How the request arrives: CGI environment or a FastCGI request. */
struct pn_io {
	void   *ctx;
	/* Returns the parameter (CGI variable) or NULL. */
	const char *(*param)(void *ctx, const char *name);
	/* Calls fn for every parameter "NAME=value". */
	void	(*each_param)(void *ctx, void (*fn)(void *arg, const char *kv), void *arg);
	/* Reads up to n bytes of the body; returns bytes read, 0 at end, -1 on
	 * error, PN_IO_TIMEOUT when the request's read deadline has passed. */
	long	(*read)(void *ctx, void *buf, size_t n);
	/* Writes the whole buffer; false on error. */
	bool	(*write)(void *ctx, const void *buf, size_t n);
	/* Called once the request has been read (or reading it failed): the
	 * read deadline no longer applies.  May be NULL. */
	void	(*read_end)(void *ctx);
};

#define PN_IO_TIMEOUT (-2L)

enum pn_read_rc {
	PN_READ_OK = 0,
	PN_READ_TOO_LARGE,	/* 413: body longer than the limit */
	PN_READ_HEADERS_TOO_LARGE,	/* 431 */
	PN_READ_BAD,		/* 400: CONTENT_LENGTH unreadable, short body */
	PN_READ_TIMEOUT,	/* 408: the body did not arrive within [limits] read_timeout_ms */
};

/* Read method, path, headers and the body (at most max_body bytes). */
enum pn_read_rc pn_request_read(struct pn_io *io, size_t max_body, struct pn_arena *a,
				struct pn_request *req, struct pn_err *err) PN_WUR;

/* Case-insensitive header lookup; NULL when absent. */
const struct pn_header *pn_request_header(const struct pn_request *req, const char *name);

/* The last segment of PATH_INFO ("/notify/alipay/shop-a" -> "shop-a"), or of
 * REQUEST_URI (query removed) when PATH_INFO is empty; NULL if none. */
const char *pn_request_site(const struct pn_request *req, struct pn_arena *a);

struct pn_response {
	int	status;
	const char *content_type;	/* NULL: no body */
	struct pn_buf body;
};

void pn_response_set(struct pn_response *res, int status, const char *content_type,
		     const char *body);
/* Serialise as a CGI/FastCGI response (Status:, Content-Type:, Content-Length:). */
bool pn_response_write(struct pn_io *io, const struct pn_response *res);
const char *pn_http_reason(int status);

#endif

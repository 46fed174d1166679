/*
 * form.h: application/x-www-form-urlencoded, decoded exactly once.
 *
 * '+' becomes a space, %HH becomes the byte 0xHH, every other byte stays.
 * A malformed escape, a decoded NUL byte or a key that appears twice makes
 * the whole body invalid (Alipay signs the values as decoded once; a second
 * decode breaks '+' and '%').  Values are kept as bytes, never transcoded.
 */
#ifndef PN_FORM_H
#define PN_FORM_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "util.h"

#define PN_FORM_MAX_FIELDS 256

struct pn_form_field {
	const char *key;
	const char *value;
	size_t	value_len;
};

struct pn_form {
	struct pn_form_field *fields;	/* in body order */
	size_t	n;
};

bool pn_form_parse(struct pn_arena *a, const char *body, size_t len, struct pn_form *out,
		   struct pn_err *err) PN_WUR;
/* The value of key, or NULL. */
const char *pn_form_get(const struct pn_form *f, const char *key);
/* Percent-encode for building form bodies (test signing, re-delivery). */
char *pn_form_encode(struct pn_arena *a, const char *s);
/* Percent-encode all but RFC 3986's unreserved characters (a URL's path or
 * query component). */
char *pn_uri_encode(struct pn_arena *a, const char *s);

#endif

/*
 * form.c: application/x-www-form-urlencoded decoder (exactly once).
 */
#include "config.h"

#include <string.h>

#include "form.h"

/* Decode s[0..len) into a new arena string; false on a bad escape or NUL. */
static bool
decode(struct pn_arena *a, const char *s, size_t len, char **out, size_t *outlen,
       struct pn_err *err)
{
	char   *buf = pn_arena_alloc(a, len + 1);
	size_t	i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '+')
			buf[o++] = ' ';
		else if (c == '%') {
			int hi, lo;

			if (i + 2 >= len || (hi = pn_hexval((unsigned char)s[i + 1])) < 0
			    || (lo = pn_hexval((unsigned char)s[i + 2])) < 0) {
				pn_err_set(err, "malformed percent escape at byte %zu", i);
				return false;
			}
			c = (unsigned char)(hi << 4 | lo);
			if (c == 0) {
				pn_err_set(err, "percent escape decodes to a NUL byte at byte %zu", i);
				return false;
			}
			buf[o++] = (char)c;
			i += 2;
		} else if (c == 0) {
			pn_err_set(err, "NUL byte in form body at byte %zu", i);
			return false;
		} else
			buf[o++] = (char)c;
	}
	buf[o] = '\0';
	*out = buf;
	*outlen = o;
	return true;
}

bool
pn_form_parse(struct pn_arena *a, const char *body, size_t len, struct pn_form *out,
	      struct pn_err *err)
{
	size_t	cap = 16, pos = 0, i, j;

	out->n = 0;
	out->fields = pn_arena_alloc(a, cap * sizeof(*out->fields));
	while (pos < len) {
		const char *item = body + pos, *amp, *eq;
		size_t	ilen;
		char   *key, *value;
		size_t	klen, vlen;

		amp = memchr(item, '&', len - pos);
		ilen = amp ? (size_t)(amp - item) : len - pos;
		pos += ilen + 1;
		if (ilen == 0)
			continue;	/* "a=1&&b=2" or a trailing '&' */
		eq = memchr(item, '=', ilen);
		if (eq == NULL) {
			pn_err_set(err, "form field without '=' at byte %zu", (size_t)(item - body));
			return false;
		}
		if (!decode(a, item, (size_t)(eq - item), &key, &klen, err)
		    || !decode(a, eq + 1, ilen - (size_t)(eq - item) - 1, &value, &vlen, err))
			return false;
		if (klen == 0) {
			pn_err_set(err, "form field with an empty name at byte %zu",
				   (size_t)(item - body));
			return false;
		}
		if (out->n == PN_FORM_MAX_FIELDS) {
			pn_err_set(err, "more than %d form fields", PN_FORM_MAX_FIELDS);
			return false;
		}
		if (out->n == cap) {
			struct pn_form_field *nf = pn_arena_alloc(a, 2 * cap * sizeof(*nf));

			memcpy(nf, out->fields, cap * sizeof(*nf));
			out->fields = nf;
			cap *= 2;
		}
		out->fields[out->n].key = key;
		out->fields[out->n].value = value;
		out->fields[out->n].value_len = vlen;
		out->n++;
	}
	/* Duplicate keys: the quadratic check is fine for <= 256 fields. */
	for (i = 0; i < out->n; i++)
		for (j = i + 1; j < out->n; j++)
			if (strcmp(out->fields[i].key, out->fields[j].key) == 0) {
				pn_err_set(err, "duplicate form field \"%s\"", out->fields[i].key);
				return false;
			}
	return true;
}

const char *
pn_form_get(const struct pn_form *f, const char *key)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (strcmp(f->fields[i].key, key) == 0)
			return f->fields[i].value;
	return NULL;
}

/*
 * Percent-encode every byte but the ASCII letters, digits and the bytes in
 * keep; with form, a space becomes '+' (application/x-www-form-urlencoded).
 */
static char *
percent_encode(struct pn_arena *a, const char *s, const char *keep, bool form)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t	len = strlen(s), i, o = 0;
	char   *out = pn_arena_alloc(a, len * 3 + 1);

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		    || (c != '\0' && strchr(keep, c) != NULL))
			out[o++] = (char)c;
		else if (form && c == ' ')
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}

char *
pn_form_encode(struct pn_arena *a, const char *s)
{
	return percent_encode(a, s, "-_.*", true);
}

char *
pn_uri_encode(struct pn_arena *a, const char *s)
{
	return percent_encode(a, s, "-_.~", false);
}

/*
 * fuzz_form.c: the form decoder, pn_form_parse().
 *
 * Input: a raw application/x-www-form-urlencoded body.  Invariants checked
 * on success: at most PN_FORM_MAX_FIELDS fields, no empty or duplicate key,
 * no NUL inside a value, pn_form_get() finds every field, and encoding the
 * fields again with pn_form_encode() parses back to the same fields.  The
 * Alipay signed content is built from the fields as well.
 */
#include "config.h"

#include <string.h>

#include "alipay.h"
#include "buf.h"
#include "form.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	struct pn_form form, again;
	struct pn_err err;
	struct pn_buf body = {0};
	size_t	i, len;
	char   *content;

	if (a == NULL)
		a = pn_arena_new();
	if (!pn_form_parse(a, (const char *)data, size, &form, &err))
		goto done;
	fuzz_check(form.n <= PN_FORM_MAX_FIELDS);
	for (i = 0; i < form.n; i++) {
		const struct pn_form_field *f = &form.fields[i];

		fuzz_check(f->key[0] != '\0');
		fuzz_check(strlen(f->value) == f->value_len);
		fuzz_check(pn_form_get(&form, f->key) == f->value);
		if (i > 0)
			pn_buf_putc(&body, '&');
		pn_buf_puts(&body, pn_form_encode(a, f->key));
		pn_buf_putc(&body, '=');
		pn_buf_puts(&body, pn_form_encode(a, f->value));
	}
	fuzz_check(pn_form_parse(a, body.data ? body.data : "", body.len, &again, &err));
	fuzz_check(again.n == form.n);
	for (i = 0; i < form.n; i++) {
		fuzz_check(strcmp(again.fields[i].key, form.fields[i].key) == 0);
		fuzz_check(again.fields[i].value_len == form.fields[i].value_len);
		fuzz_check(memcmp(again.fields[i].value, form.fields[i].value,
				  form.fields[i].value_len) == 0);
	}
	content = pn_alipay_sign_content(a, &form, false, false, &len);
	fuzz_check(strlen(content) == len);
	content = pn_alipay_sign_content(a, &form, true, true, &len);
	fuzz_check(strlen(content) == len);
done:
	pn_buf_free(&body);
	pn_arena_reset(a);
	return 0;
}

/*
 * fuzz_json.c: the JSON helpers, pn_json_parse() and the path lookups.
 *
 * Input: an optional first line naming a dotted path ("data.object.amount";
 * used when a newline comes within the first 128 bytes), then the JSON
 * text.  Every path the Stripe adapter reads is looked up too.  Strings
 * come back as arena copies of exactly json_string_length() bytes.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "json.h"

static const char *const paths[] = {
	"object", "id", "type", "created", "data.object", "data.object.id",
	"data.object.amount", "data.object.amount_received", "data.object.amount_total",
	"data.object.amount_refunded", "data.object.currency", "data.object.payment_intent",
	"data.object.payment_status", "data.object.client_reference_id",
	"data.object.metadata.order_id", "", ".", "a..b", NULL,
};

static void
lookup(struct pn_arena *a, json_t *root, const char *path)
{
	json_t *v = pn_json_path(root, path);
	const char *s = pn_json_str(a, root, path);
	int64_t	i;

	if (s != NULL) {
		fuzz_check(json_is_string(v));
		fuzz_check(memcmp(s, json_string_value(v), json_string_length(v)) == 0);
		fuzz_check(s[json_string_length(v)] == '\0');
	}
	if (pn_json_int(root, path, &i))
		fuzz_check(json_is_integer(v) && json_integer_value(v) == i);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	const uint8_t *nl = memchr(data, '\n', size < 128 ? size : 128);
	char   *path = NULL;
	json_t *root;
	struct pn_err err;
	size_t	i;

	if (a == NULL)
		a = pn_arena_new();
	if (nl != NULL) {
		path = fuzz_strndup(data, (size_t)(nl - data));
		size -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
	root = pn_json_parse(data, size, &err);
	if (root != NULL) {
		for (i = 0; paths[i]; i++)
			lookup(a, root, paths[i]);
		if (path != NULL)
			lookup(a, root, path);
		json_decref(root);
	} else
		fuzz_check(strncmp(err.msg, "invalid JSON", 12) == 0);
	free(path);
	pn_arena_reset(a);
	return 0;
}

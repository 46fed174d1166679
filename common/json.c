/*
 * json.c: strict jansson helpers.
 */
#include "config.h"

#include <string.h>

#include "json.h"

json_t *
pn_json_parse(const void *data, size_t len, struct pn_err *err)
{
	json_error_t jerr;
	json_t *root;

	root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		pn_err_set(err, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
			   jerr.text);
		return NULL;
	}
	return root;
}

json_t *
pn_json_path(json_t *root, const char *path)
{
	const char *p = path;
	json_t *cur = root;

	while (cur != NULL && *p) {
		const char *dot = strchr(p, '.');
		size_t	n = dot ? (size_t)(dot - p) : strlen(p);
		char	key[64];

		if (!json_is_object(cur) || n >= sizeof(key))
			return NULL;
		memcpy(key, p, n);
		key[n] = '\0';
		cur = json_object_get(cur, key);
		p += n + (dot ? 1 : 0);
	}
	return cur;
}

const char *
pn_json_str(struct pn_arena *a, json_t *root, const char *path)
{
	json_t *v = pn_json_path(root, path);

	if (!json_is_string(v))
		return NULL;
	return pn_arena_strndup(a, json_string_value(v), json_string_length(v));
}

bool
pn_json_int(json_t *root, const char *path, int64_t *out)
{
	json_t *v = pn_json_path(root, path);

	if (!json_is_integer(v))
		return false;
	*out = (int64_t)json_integer_value(v);
	return true;
}

/*
 * sign.c: the test registry: pn_sign_<name> of every line of
 * webhooks/providers.mk (build/provider_list.h; sign.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "sign.h"

static const struct {
	const char *provider;
	pn_sign_fn sign;
} registry[] = {
#define PN_MODULE(name) {#name, pn_sign_##name},
#include "provider_list.h"
#undef PN_MODULE
};

pn_sign_fn
pn_signer_find(const char *provider)
{
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(registry); i++)
		if (strcmp(registry[i].provider, provider) == 0)
			return registry[i].sign;
	return NULL;
}

char *
pn_sign_json(struct pn_arena *a, json_t *obj)
{
	char   *text = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL, *out;

	json_decref(obj);
	if (text == NULL)
		return NULL;
	out = pn_arena_strdup(a, text);
	free(text);
	return out;
}

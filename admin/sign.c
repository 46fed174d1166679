/*
 * sign.c: the test registry, one line per provider (sign.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "sign.h"

static const struct {
	const char *provider;
	pn_sign_fn sign;
} registry[] = {
	{"alipay", pn_sign_alipay},
	{"stripe", pn_sign_stripe},
	{"2c2p", pn_sign_2c2p},
	{"wechatpay", pn_sign_wechatpay},
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

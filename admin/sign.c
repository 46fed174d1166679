/*
 * sign.c: the test registry, one line per provider (sign.h).
 */
#include "config.h"

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

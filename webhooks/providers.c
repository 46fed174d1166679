/*
 * providers.c: the list of provider adapters (for the admin command).
 * A new provider adds its descriptor here and in provider.h; its
 * configuration (keys, checks) is listed apart, in providers_cfg.h, so that
 * loading a configuration links no adapter's verify code.
 */
#include "config.h"

#include <string.h>

#include "provider.h"

const struct pn_provider *const pn_providers[] = {
	&pn_provider_alipay,
	&pn_provider_stripe,
	&pn_provider_2c2p,
	&pn_provider_wechatpay,
	NULL,
};

const struct pn_provider *
pn_provider_find(const char *name)
{
	const struct pn_provider *const *p;

	for (p = pn_providers; *p; p++)
		if (strcmp((*p)->name, name) == 0)
			return *p;
	return NULL;
}

/*
 * providers.c: the list of provider adapters (for the admin command), one
 * per line of webhooks/providers.mk, in its order (build/provider_list.h);
 * its configuration (keys, checks) is listed apart, in providers_cfg.h, so that
 * loading a configuration links no adapter's verify code.
 */
#include "config.h"

#include <string.h>

#include "provider.h"

const struct pn_provider *const pn_providers[] = {
#define PN_MODULE(name) &pn_provider_##name,
#include "provider_list.h"
#undef PN_MODULE
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

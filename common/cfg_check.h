/*
 * cfg_check.h: the checks of a loaded configuration's sites, for the loader
 * (cfg.c): it calls them once every file is parsed.  The hooks the
 * providers' checks use (pn_cfg_site_finding(), pn_cfg_require(), ...) are
 * in cfg.h.
 */
#ifndef PN_CFG_CHECK_H
#define PN_CFG_CHECK_H

#include <stddef.h>
#include <stdint.h>

struct pn_cfg_findings;
struct pn_cfg_provider;
struct pn_config;
struct pn_site;

/* The site keys of every provider together, at most: one bit each in a
 * site's "failed" set (a uint64_t). */
#define PN_CFG_MAX_KEYS 64

/* The bit of provider prov's key i in a site's failed set: the site keys in
 * the registry's order (pn_cfg_providers). */
unsigned pn_cfg_site_key_bit(const struct pn_cfg_provider *prov, size_t i);

/*
 * One site: a provider at all, each configured provider's PN_KEY_REQUIRED
 * keys, its validate and site marker form, then the forms of the secrets
 * (secret_forms).  failed: the site keys given and refused (their own
 * findings said why).  Every problem into fd.
 */
void pn_cfg_check_site(const struct pn_site *s, uint64_t failed, struct pn_cfg_findings *fd);

/* Every pair of sites of a provider that a genuine notification cannot tell
 * apart: an error each (never isolated to one site: it is about two). */
void pn_cfg_check_shared_identities(const struct pn_config *cfg, struct pn_cfg_findings *fd);

#endif

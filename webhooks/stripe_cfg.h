/*
 * stripe_cfg.h: a site's Stripe settings (the stripe.* keys, stripe_cfg.c).
 */
#ifndef PN_STRIPE_CFG_H
#define PN_STRIPE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pn_cfg_provider;
struct pn_secret;
struct pn_site;

enum pn_stripe_mode { PN_STRIPE_LIVE = 0, PN_STRIPE_TEST = 1 };

struct pn_stripe_cfg {
	bool	configured;
	struct pn_secret *secrets;	/* stripe.secret_files, one per line */
	size_t	nsecrets;
	int64_t	tolerance_s;
	int	mode;			/* enum pn_stripe_mode: livemode events accepted */
	char   *site_metadata;	/* stripe.site_metadata "KEY=VALUE", or NULL */
	bool	test_signing;		/* stripe.test_signing (paynotify sign) */
	char   *query_key_path;		/* stripe.query_key_file: path only */
	char   *query_url;		/* stripe.query_url */
};

extern const struct pn_cfg_provider pn_stripe_cfg_keys;

/*
 * The site's stripe.site_metadata split at its first '=': *key (not
 * NUL-terminated at key_len) and the value after the '='.  false when the
 * site sets none or it is malformed (the loader refuses those).
 */
bool pn_cfg_stripe_marker(const struct pn_site *site, const char **key, size_t *key_len);

#endif

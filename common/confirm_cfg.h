/*
 * confirm_cfg.h: a site's settings for `paynotify confirm`, the endpoint the
 * shop's backend asks "is this order paid?" when the buyer returns
 * (docs/SHOP-ORDERS.md "The buyer returns: confirm"; the confirm.* keys,
 * confirm_cfg.c).  Listed in providers_cfg.h beside the providers' keys
 * (.not_a_provider: setting them configures no provider).
 */
#ifndef PN_CONFIRM_CFG_H
#define PN_CONFIRM_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pn_cfg_provider;

struct pn_confirm_cfg {
	bool	configured;
	char   *secret_path;		/* confirm.secret_file: path only; read by
					 * `paynotify confirm` alone, never by a receiver */
	int64_t	timeout_ms;		/* confirm.timeout_ms: the provider ask, whole */
	int64_t	min_interval_s;		/* confirm.min_interval_s: one ask per order per */
};

extern const struct pn_cfg_provider pn_confirm_cfg_keys;

#endif

/*
 * providers_cfg.h: the providers a [site] section may configure, one line
 * each (and the header that declares its settings).
 *
 * PN_CFG_PROVIDERS(X) calls X(member) per provider: struct pn_site gets a
 * member "struct pn_<member>_cfg <member>" (site->alipay, site->twoc2p), and
 * the loader the declaration pn_<member>_cfg_keys (its keys and checks,
 * webhooks/<provider>_cfg.c).  The order is the order of the keys in the
 * documentation, of the checks' findings and of check-config's listing.
 * Only the configuration is listed here: no verify code comes with it.
 * The last line is no provider: the confirm.* keys of `paynotify confirm`
 * (common/confirm_cfg.c, .not_a_provider).
 */
#ifndef PN_PROVIDERS_CFG_H
#define PN_PROVIDERS_CFG_H

#include "alipay_cfg.h"
#include "stripe_cfg.h"
#include "wechatpay_cfg.h"
#include "2c2p_cfg.h"
#include "confirm_cfg.h"

#define PN_CFG_PROVIDERS(X) \
	X(alipay) \
	X(stripe) \
	X(wechatpay) \
	X(twoc2p) \
	X(confirm)

#endif

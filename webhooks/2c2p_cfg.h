/*
 * 2c2p_cfg.h: a site's 2C2P settings (the 2c2p.* keys, 2c2p_cfg.c).  The
 * member is site->twoc2p: a C name cannot start with a digit.
 */
#ifndef PN_2C2P_CFG_H
#define PN_2C2P_CFG_H

#include <stdbool.h>
#include <stddef.h>

struct pn_cfg_provider;
struct pn_secret;

enum pn_2c2p_api { PN_2C2P_JWT = 0, PN_2C2P_REDIRECT = 1 };
enum pn_2c2p_hash { PN_2C2P_SHA1 = 0, PN_2C2P_SHA256 = 1 };
enum pn_2c2p_invoice { PN_2C2P_INVOICE_EMPTY = 0, PN_2C2P_INVOICE_ORDER_ID = 1 };

struct pn_twoc2p_cfg {
	bool	configured;
	char   *merchant_id;
	struct pn_secret *secrets;	/* 2c2p.secret_key_file */
	size_t	nsecrets;
	int	api;			/* enum pn_2c2p_api */
	int	redirect_hash;		/* enum pn_2c2p_hash */
	int	redirect_invoice_no;	/* enum pn_2c2p_invoice */
	bool	test_signing;		/* 2c2p.test_signing (paynotify sign) */
	char   *query_url;		/* 2c2p.query_url */
	char   *site_marker;		/* 2c2p.site_marker "userDefinedN=VALUE", or NULL */
};

extern const struct pn_cfg_provider pn_twoc2p_cfg_keys;

#endif

/*
 * alipay_cfg.h: a site's Alipay settings (the alipay.* keys, alipay_cfg.c).
 */
#ifndef PN_ALIPAY_CFG_H
#define PN_ALIPAY_CFG_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>

struct pn_cfg_provider;
struct pn_pubkey;

enum pn_alipay_sign_type { PN_ALIPAY_RSA2 = 0, PN_ALIPAY_RSA = 1 };

struct pn_alipay_cfg {
	bool	configured;
	char   *app_id;
	char   *seller_id;
	struct pn_pubkey *keys;		/* alipay.public_key_file (several: rotation) */
	size_t	nkeys;
	int	sign_type;		/* enum pn_alipay_sign_type */
	EVP_PKEY *test_key;		/* alipay.test_private_key_file (paynotify sign) */
	char   *query_key_path;		/* alipay.query_private_key_file: path only */
	char   *query_url;		/* alipay.query_url (gateway) */
	char   *query_app_cert;		/* alipay.query_app_cert_file: path only */
	char   *query_root_cert;	/* alipay.query_root_cert_file: path only */
	char   *site_passback;		/* alipay.site_passback, or NULL */
};

extern const struct pn_cfg_provider pn_alipay_cfg_keys;

#endif

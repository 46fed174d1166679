/*
 * wechatpay_cfg.h: a site's WeChat Pay settings (the wechatpay.* keys,
 * wechatpay_cfg.c).
 */
#ifndef PN_WECHATPAY_CFG_H
#define PN_WECHATPAY_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

struct pn_cfg_provider;
struct pn_pubkey;
struct pn_secret;

enum pn_wxv2_sign { PN_WXV2_MD5 = 1, PN_WXV2_HMAC_SHA256 = 2 };

struct pn_wechatpay_cfg {
	bool	configured;
	char   *mchid;
	char   *appid;
	struct pn_secret *apiv3_keys;	/* wechatpay.apiv3_key_file */
	size_t	napiv3_keys;
	struct pn_secret *apiv2_keys;	/* wechatpay.apiv2_key_file */
	size_t	napiv2_keys;
	unsigned v2_sign_types;		/* bit set of enum pn_wxv2_sign */
	struct pn_pubkey *certs;	/* wechatpay.platform_cert_files and every *.pem of
					 * wechatpay.platform_cert_dir */
	size_t	ncerts;
	char   *platform_cert_dir;	/* wechatpay.platform_cert_dir, or NULL */
	char   *public_key_id;		/* wechatpay.public_key_id */
	struct pn_pubkey *public_keys;	/* wechatpay.public_key_file */
	size_t	npublic_keys;
	int64_t	tolerance_s;
	EVP_PKEY *test_key;		/* wechatpay.test_private_key_file (paynotify sign) */
	char   *query_key_path;		/* wechatpay.query_private_key_file: path only */
	char   *query_cert_serial;	/* wechatpay.query_cert_serial */
	char   *query_url;		/* wechatpay.query_url */
	char   *site_attach;		/* wechatpay.site_attach, or NULL */
};

extern const struct pn_cfg_provider pn_wechatpay_cfg_keys;

#endif

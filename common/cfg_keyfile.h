/*
 * cfg_keyfile.h: the files a configuration names for its keys: secret
 * files (owner and mode checked, one secret a line), public keys and
 * certificates (parsed into EVP_PKEY), test signing keys, and the key ids
 * recorded with each notification.  The loader (cfg.c) reads them all at
 * load time, so no request touches the file system.
 */
#ifndef PN_CFG_KEYFILE_H
#define PN_CFG_KEYFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <openssl/evp.h>

#include "util.h"

/*
 * Key ids, recorded with each notification as key_id: the file's base name
 * and the first 8 hex digits of the SHA-256 of the key material (the secret
 * bytes; a public key's DER SubjectPublicKeyInfo), e.g.
 * "stripe-whsec:3f9a1c2e".  Stable across rotations: a line added to or
 * removed from a secret file does not change what an id names.  (Ids stored
 * by earlier builds are positional: a secret's line number, "stripe-whsec:1",
 * and a public key's bare base name; see pn_cfg_site_key_state().)
 */
#define PN_KEY_FP_HEX 8

/* A secret (HMAC key, API key), with the id recorded as key_id. */
struct pn_secret {
	char   *id;		/* "stripe-whsec:3f9a1c2e": file base name and fingerprint */
	unsigned char *data;
	size_t	len;
	int	line;		/* line in its file, for messages (0: not from a file) */
};

/* A public key, possibly from an X.509 certificate. */
struct pn_pubkey {
	char   *id;		/* "alipay-public.pem:1c2d3e4f": base name and fingerprint */
	char   *path;
	EVP_PKEY *pkey;
	char   *serial;		/* certificate serial, upper-case hex; NULL for bare keys */
	time_t	not_after;	/* certificate expiry; 0 for bare keys */
};

struct pn_site;

/*
 * Is the key that key_id names (as stored with a notification) still among
 * the site's keys?  key_id may be composite ("sig/aes", WeChat Pay v3).
 */
enum pn_key_state {
	PN_KEY_CONFIGURED,	/* every part names a configured key */
	PN_KEY_GONE,		/* some part names a key that is no longer configured */
	PN_KEY_UNKNOWN,		/* an id from before fingerprints whose file is still
				 * configured: what it named cannot be told */
};
enum pn_key_state pn_cfg_site_key_state(const struct pn_site *s, const char *key_id);

/*
 * Is path a secret file we may read (a regular file owned by root or by the
 * user reading it, mode 0600, or 0640 with the receivers' group "paynotify"
 * or the reader's own group (not root's); never group-writable, never
 * accessible by others)?  For the credentials that only `paynotify query`
 * loads: the configuration keeps their paths, never their bytes.
 */
bool pn_cfg_secret_file_ok(const char *path, struct pn_err *err) PN_WUR;

/* ---- for the loader (cfg.c) ---------------------------------------------- */

/* Does path exist as a file whose owner, group or mode pn_cfg_secret_file_ok()
 * refuses (a security policy, never isolated to one site)? */
bool pn_cfg_secret_file_loose(const char *path);

/* Read one secret file (pn_cfg_secret_file_ok() first): every non-empty
 * line, trailing blanks removed, is a secret appended to *list. */
bool pn_cfg_load_secrets(const char *path, struct pn_secret **list, size_t *n,
			 struct pn_err *err) PN_WUR;
/*
 * One public key or certificate file for key (its name, for messages),
 * appended to *list.  min_bits: the key's declared floor (2048 unless it
 * says otherwise: a provider whose floor depends on a later key checks that
 * in its validate).  private_not_public: what to say when the file holds a
 * private key (the provider's pn_cfg_provider.private_not_public), or NULL.
 */
bool pn_cfg_load_pubkey(const char *path, const char *key, int min_bits,
			const char *private_not_public, struct pn_pubkey **list, size_t *n,
			struct pn_err *err) PN_WUR;
/* Every "*.pem" file of dir (not starting with '.', in name order) the same
 * way; record (if not NULL) is told each file's path before it is read. */
bool pn_cfg_load_pubkey_dir(const char *dir, const char *key, int min_bits,
			    const char *private_not_public, struct pn_pubkey **list,
			    size_t *count, void (*record)(void *ctx, const char *path),
			    void *ctx, struct pn_err *err) PN_WUR;
/* A test signing key (PKCS#8 or PKCS#1 PEM) for key, whose mode the caller
 * has checked; NULL with err set (naming the mistake when it is a public
 * key or a certificate).  The caller frees it. */
EVP_PKEY *pn_cfg_load_privkey(const char *path, const char *key, struct pn_err *err) PN_WUR;
/* Free a list (the secrets' bytes wiped first); NULL-safe. */
void pn_cfg_secrets_free(struct pn_secret *s, size_t n);
void pn_cfg_pubkeys_free(struct pn_pubkey *k, size_t n);

#endif

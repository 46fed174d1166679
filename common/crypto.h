/*
 * crypto.h: every cryptographic operation paynotify does, through OpenSSL 3
 * EVP interfaces only.  Comparisons of MACs and signatures go through
 * pn_ct_equal() (constant time).  Output buffers come from the caller's
 * arena unless stated otherwise.
 */
#ifndef PN_CRYPTO_H
#define PN_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <openssl/evp.h>

#include "arena.h"
#include "util.h"

enum pn_md { PN_MD_SHA1, PN_MD_SHA256, PN_MD_MD5 };

/* A piece of a message that is hashed or MACed without being copied. */
struct pn_iov {
	const void *p;
	size_t	len;
};

/* The EVP digest of md. */
const EVP_MD *pn_md_evp(enum pn_md md);

/* Constant-time equality of two equally long byte strings. */
bool pn_ct_equal(const void *a, const void *b, size_t n) PN_WUR;

/* Strict standard base64 (RFC 4648 §4) with padding; no blanks. */
bool pn_b64_decode(struct pn_arena *a, const char *in, size_t len,
		   unsigned char **out, size_t *outlen) PN_WUR;
/* base64url (RFC 4648 §5) without padding, as JWT uses it. */
bool pn_b64url_decode(struct pn_arena *a, const char *in, size_t len,
		      unsigned char **out, size_t *outlen) PN_WUR;
char *pn_b64_encode(struct pn_arena *a, const void *in, size_t len);
char *pn_b64url_encode(struct pn_arena *a, const void *in, size_t len);
/* Hex, lower or upper case, NUL-terminated. */
char *pn_hex_encode(struct pn_arena *a, const void *in, size_t len, bool upper);
/* Hex of either case into out (capacity outcap). */
bool pn_hex_decode(const char *in, size_t len, unsigned char *out, size_t outcap,
		   size_t *outlen) PN_WUR;

/* Message digest of the concatenated pieces; out must hold 64 bytes. */
bool pn_digest(enum pn_md md, const struct pn_iov *iov, size_t n, unsigned char *out,
	       size_t *outlen) PN_WUR;
/* HMAC of the concatenated pieces; out must hold 64 bytes. */
bool pn_hmac(enum pn_md md, const void *key, size_t keylen, const struct pn_iov *iov,
	     size_t n, unsigned char *out, size_t *outlen) PN_WUR;

/* RSASSA-PKCS1-v1_5 verification of the concatenated pieces.  True only when
 * the signature is valid; any error (wrong key type, bad length) is false. */
bool pn_rsa_verify(EVP_PKEY *pkey, enum pn_md md, const struct pn_iov *iov, size_t n,
		   const unsigned char *sig, size_t siglen) PN_WUR;

/* AEAD_AES_256_GCM decryption; in = ciphertext || 16-byte tag.  False on a
 * bad tag.  out (arena) receives inlen - 16 bytes plus a NUL. */
bool pn_aes256gcm_decrypt(struct pn_arena *a, const unsigned char key[32],
			  const void *iv, size_t ivlen, const void *aad, size_t aadlen,
			  const unsigned char *in, size_t inlen,
			  unsigned char **out, size_t *outlen) PN_WUR;
/* AES-256-ECB with PKCS#7 padding (WeChat v2 refund req_info). */
bool pn_aes256ecb_decrypt(struct pn_arena *a, const unsigned char key[32],
			  const unsigned char *in, size_t inlen,
			  unsigned char **out, size_t *outlen) PN_WUR;

/*
 * The EVP calls of one cipher direction, and one AES-256 pass with them
 * (GCM when gcm: iv, aad, 16-byte tag checked when decrypting and written
 * when encrypting; else ECB with PKCS#7 padding).  out has room for inlen
 * + 16 bytes.  The decrypting direction is crypto.c's own; the encrypting
 * one exists only in crypto_sign.c (test signing), which no receiver links.
 */
struct pn_cipher_dir {
	int	(*init)(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl,
			const unsigned char *key, const unsigned char *iv);
	int	(*update)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
			  const unsigned char *in, int inl);
	int	(*final)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl);
	bool	encrypt;
};
bool pn_aes256_pass(const struct pn_cipher_dir *d, bool gcm, const unsigned char key[32],
		    const void *iv, size_t ivlen, const void *aad, size_t aadlen,
		    const unsigned char *in, size_t inlen, unsigned char *tag, unsigned char *out,
		    size_t *outlen) PN_WUR;

/*
 * Load a public key from a file holding an SPKI PEM ("BEGIN PUBLIC KEY"), a
 * bare base64 SPKI (the Alipay console form) or an X.509 certificate PEM.
 * For a certificate, *serial receives the upper-case hex serial (malloc'd)
 * and *not_after its expiry; both are left NULL/0 for bare keys.
 * Returns a new EVP_PKEY the caller frees.
 */
EVP_PKEY *pn_pubkey_load(const char *path, char **serial, time_t *not_after,
			 struct pn_err *err) PN_WUR;
/* Same, from memory. */
EVP_PKEY *pn_pubkey_parse(const char *text, size_t len, char **serial, time_t *not_after,
			  struct pn_err *err) PN_WUR;
/* What a key file holds, to name a key given in the wrong place. */
enum pn_key_kind {
	PN_KEY_KIND_OTHER,
	PN_KEY_KIND_PRIVATE,		/* PEM "... PRIVATE KEY", or bare base64 of a DER one */
	PN_KEY_KIND_PUBLIC,		/* PEM "PUBLIC KEY" / "RSA PUBLIC KEY", or bare base64 SPKI */
	PN_KEY_KIND_CERTIFICATE,
};
enum pn_key_kind pn_key_text_kind(const char *text, size_t len);

/*
 * RSA key sizes: every key needs PN_RSA_MIN_BITS, which the two functions
 * above enforce; only Alipay's legacy sign_type RSA (SHA1withRSA) still
 * has 1024-bit keys in the field, so the config loader reads Alipay keys
 * with the *_bits variants and PN_RSA_LEGACY_MIN_BITS, then requires 2048
 * for RSA2 (its validate hook, run by cfg_check.c).  Below 1024 nothing is
 * accepted.
 */
#define PN_RSA_MIN_BITS 2048
#define PN_RSA_LEGACY_MIN_BITS 1024
EVP_PKEY *pn_pubkey_load_bits(const char *path, int min_bits, char **serial, time_t *not_after,
			      struct pn_err *err) PN_WUR;
EVP_PKEY *pn_pubkey_parse_bits(const char *text, size_t len, int min_bits, char **serial,
			       time_t *not_after, struct pn_err *err) PN_WUR;
/* Load a private key (PKCS#8 or PKCS#1 PEM): test signing keys, which only the
 * paynotify command loads (cfg.h PN_CFG_RECEIVER), and `paynotify query` keys. */
EVP_PKEY *pn_privkey_load(const char *path, struct pn_err *err) PN_WUR;

#endif

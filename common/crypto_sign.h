/*
 * crypto_sign.h: the cryptography only test signing needs (`paynotify
 * sign`) and `paynotify query` (signed API requests): RSA signatures and
 * encryption.  crypto_sign.c is linked into the admin command and the
 * tests, never into libpaynotify.a: a receiver cannot sign or encrypt
 * (tests/integration/test_receiver_symbols.py).
 */
#ifndef PN_CRYPTO_SIGN_H
#define PN_CRYPTO_SIGN_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>

#include "arena.h"
#include "crypto.h"

/* RSASSA-PKCS1-v1_5 signature; *sig from the arena. */
bool pn_rsa_sign(struct pn_arena *a, EVP_PKEY *pkey, enum pn_md md, const void *msg,
		 size_t len, unsigned char **sig, size_t *siglen) PN_WUR;

/* AEAD_AES_256_GCM encryption: out = ciphertext || 16-byte tag. */
bool pn_aes256gcm_encrypt(struct pn_arena *a, const unsigned char key[32], const void *iv,
			  size_t ivlen, const void *aad, size_t aadlen, const void *in,
			  size_t inlen, unsigned char **out, size_t *outlen) PN_WUR;
/* AES-256-ECB with PKCS#7 padding, encryption. */
bool pn_aes256ecb_encrypt(struct pn_arena *a, const unsigned char key[32], const void *in,
			  size_t inlen, unsigned char **out, size_t *outlen) PN_WUR;

#endif

/*
 * crypto_sign.c: RSA signatures and AES encryption, for the admin command
 * and the tests only (crypto_sign.h).
 */
#include "config.h"

#include <openssl/err.h>

#include "crypto_sign.h"

bool
pn_rsa_sign(struct pn_arena *a, EVP_PKEY *pkey, enum pn_md md, const void *msg, size_t len,
	    unsigned char **sig, size_t *siglen)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t	n = 0;
	bool	ok = false;

	if (ctx == NULL)
		return false;
	if (EVP_DigestSignInit(ctx, NULL, pn_md_evp(md), NULL, pkey) != 1
	    || EVP_DigestSign(ctx, NULL, &n, msg, len) != 1)
		goto done;
	*sig = pn_arena_alloc(a, n);
	if (EVP_DigestSign(ctx, *sig, &n, msg, len) != 1)
		goto done;
	*siglen = n;
	ok = true;
done:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

static const struct pn_cipher_dir pn_cipher_encrypt = {
	.init = EVP_EncryptInit_ex, .update = EVP_EncryptUpdate, .final = EVP_EncryptFinal_ex,
	.encrypt = true,
};

bool
pn_aes256gcm_encrypt(struct pn_arena *a, const unsigned char key[32], const void *iv,
		     size_t ivlen, const void *aad, size_t aadlen, const void *in, size_t inlen,
		     unsigned char **out, size_t *outlen)
{
	unsigned char *buf;
	size_t	n = 0;

	if (inlen > (size_t)INT32_MAX - 32)
		return false;
	buf = pn_arena_alloc(a, inlen + 16 + 1);
	if (!pn_aes256_pass(&pn_cipher_encrypt, true, key, iv, ivlen, aad, aadlen, in, inlen,
			    buf + inlen, buf, &n))
		return false;
	*out = buf;
	*outlen = n + 16;
	return true;
}

bool
pn_aes256ecb_encrypt(struct pn_arena *a, const unsigned char key[32], const void *in,
		     size_t inlen, unsigned char **out, size_t *outlen)
{
	unsigned char *buf;

	if (inlen > (size_t)INT32_MAX - 32)
		return false;
	buf = pn_arena_alloc(a, inlen + 32);
	if (!pn_aes256_pass(&pn_cipher_encrypt, false, key, NULL, 0, NULL, 0, in, inlen, NULL, buf,
			    outlen))
		return false;
	*out = buf;
	return true;
}

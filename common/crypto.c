/*
 * crypto.c: OpenSSL 3 EVP wrappers, codecs and key loading.
 */
#include "config.h"

#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "crypto.h"

const EVP_MD *
pn_md_evp(enum pn_md md)
{
	switch (md) {
	case PN_MD_SHA1:
		return EVP_sha1();
	case PN_MD_SHA256:
		return EVP_sha256();
	case PN_MD_MD5:
		return EVP_md5();
	}
	return NULL;
}

static const char *
md_name(enum pn_md md)
{
	switch (md) {
	case PN_MD_SHA1:
		return "SHA1";
	case PN_MD_SHA256:
		return "SHA256";
	case PN_MD_MD5:
		return "MD5";
	}
	return NULL;
}

bool
pn_ct_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

/* ---- base64 / base64url / hex ---------------------------------------- */

static int
b64_value(unsigned char c, bool url)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (url ? '-' : '+'))
		return 62;
	if (c == (url ? '_' : '/'))
		return 63;
	return -1;
}

/*
 * Decode in[0..len).  Standard base64 requires padding to a multiple of 4;
 * base64url must not carry padding.  Non-canonical trailing bits are
 * rejected so that one signature has exactly one encoding.
 */
static bool
b64_decode(struct pn_arena *a, const char *in, size_t len, bool url,
	   unsigned char **out, size_t *outlen)
{
	size_t	pad = 0, i, o = 0, data_len;
	unsigned char *buf;
	uint32_t acc = 0;
	int	bits = 0;

	if (!url) {
		if (len % 4 != 0)
			return false;
		if (len >= 1 && in[len - 1] == '=')
			pad++;
		if (len >= 2 && in[len - 2] == '=')
			pad++;
	} else if (len % 4 == 1)
		return false;
	data_len = len - pad;
	buf = pn_arena_alloc(a, (data_len * 3) / 4 + 1);
	for (i = 0; i < data_len; i++) {
		int v = b64_value((unsigned char)in[i], url);

		if (v < 0)
			return false;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* leftover bits must be zero */
	if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
		return false;
	buf[o] = '\0';
	*out = buf;
	*outlen = o;
	return true;
}

bool
pn_b64_decode(struct pn_arena *a, const char *in, size_t len, unsigned char **out,
	      size_t *outlen)
{
	return b64_decode(a, in, len, false, out, outlen);
}

bool
pn_b64url_decode(struct pn_arena *a, const char *in, size_t len, unsigned char **out,
		 size_t *outlen)
{
	return b64_decode(a, in, len, true, out, outlen);
}

static char *
b64_encode(struct pn_arena *a, const void *in, size_t len, bool url)
{
	static const char std[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char urlalpha[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *alpha = url ? urlalpha : std;
	const unsigned char *p = in;
	char   *out = pn_arena_alloc(a, ((len + 2) / 3) * 4 + 1), *o = out;
	size_t	i;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*o++ = alpha[(v >> 18) & 63];
		*o++ = alpha[(v >> 12) & 63];
		*o++ = alpha[(v >> 6) & 63];
		*o++ = alpha[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);

		*o++ = alpha[(v >> 18) & 63];
		*o++ = alpha[(v >> 12) & 63];
		if (i + 1 < len)
			*o++ = alpha[(v >> 6) & 63];
		else if (!url)
			*o++ = '=';
		if (!url)
			*o++ = '=';
	}
	*o = '\0';
	return out;
}

char *
pn_b64_encode(struct pn_arena *a, const void *in, size_t len)
{
	return b64_encode(a, in, len, false);
}

char *
pn_b64url_encode(struct pn_arena *a, const void *in, size_t len)
{
	return b64_encode(a, in, len, true);
}

char *
pn_hex_encode(struct pn_arena *a, const void *in, size_t len, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	const unsigned char *p = in;
	char   *out = pn_arena_alloc(a, len * 2 + 1);
	size_t	i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * len] = '\0';
	return out;
}

bool
pn_hex_decode(const char *in, size_t len, unsigned char *out, size_t outcap, size_t *outlen)
{
	size_t i;

	if (len % 2 != 0 || len / 2 > outcap)
		return false;
	for (i = 0; i < len; i += 2) {
		int hi = pn_hexval((unsigned char)in[i]), lo = pn_hexval((unsigned char)in[i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	*outlen = len / 2;
	return true;
}

/* ---- digests, MACs, signatures ---------------------------------------- */

bool
pn_digest(enum pn_md md, const struct pn_iov *iov, size_t n, unsigned char *out,
	  size_t *outlen)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int len = 0;
	bool	ok = false;
	size_t	i;

	if (ctx == NULL || EVP_DigestInit_ex(ctx, pn_md_evp(md), NULL) != 1)
		goto done;
	for (i = 0; i < n; i++)
		if (EVP_DigestUpdate(ctx, iov[i].p, iov[i].len) != 1)
			goto done;
	if (EVP_DigestFinal_ex(ctx, out, &len) != 1)
		goto done;
	*outlen = len;
	ok = true;
done:
	EVP_MD_CTX_free(ctx);
	return ok;
}

/* The HMAC implementation is fetched once per process. */
static EVP_MAC *
hmac_impl(void)
{
	static EVP_MAC *mac;

	if (mac == NULL)
		mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	return mac;
}

bool
pn_hmac(enum pn_md md, const void *key, size_t keylen, const struct pn_iov *iov, size_t n,
	unsigned char *out, size_t *outlen)
{
	EVP_MAC *mac = hmac_impl();
	EVP_MAC_CTX *ctx = NULL;
	OSSL_PARAM params[2];
	static const unsigned char empty_key[1];
	bool	ok = false;
	size_t	i;

	if (mac == NULL || (ctx = EVP_MAC_CTX_new(mac)) == NULL)
		return false;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						     (char *)md_name(md), 0);
	params[1] = OSSL_PARAM_construct_end();
	if (EVP_MAC_init(ctx, keylen ? key : empty_key, keylen, params) != 1)
		goto done;
	for (i = 0; i < n; i++)
		if (EVP_MAC_update(ctx, iov[i].p, iov[i].len) != 1)
			goto done;
	if (EVP_MAC_final(ctx, out, outlen, 64) != 1)
		goto done;
	ok = true;
done:
	EVP_MAC_CTX_free(ctx);
	return ok;
}

bool
pn_rsa_verify(EVP_PKEY *pkey, enum pn_md md, const struct pn_iov *iov, size_t n,
	      const unsigned char *sig, size_t siglen)
{
	EVP_MD_CTX *ctx;
	bool	ok = false;
	size_t	i;

	if (pkey == NULL || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA || md == PN_MD_MD5)
		return false;
	if ((size_t)EVP_PKEY_get_size(pkey) != siglen)
		return false;
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return false;
	/* PKCS#1 v1.5 is the default padding for RSA. */
	if (EVP_DigestVerifyInit(ctx, NULL, pn_md_evp(md), NULL, pkey) != 1)
		goto done;
	for (i = 0; i < n; i++)
		if (EVP_DigestVerifyUpdate(ctx, iov[i].p, iov[i].len) != 1)
			goto done;
	ok = EVP_DigestVerifyFinal(ctx, sig, siglen) == 1;
done:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

/* ---- ciphers ------------------------------------------------------------ */

/*
 * One AES-256 pass, either direction: d holds the EVP calls of the one
 * direction (pn_cipher_decrypt here; the encrypting one exists only in
 * crypto_sign.c, which no receiver links).  GCM when gcm, with iv and aad
 * and a 16-byte tag (checked before the final step when decrypting,
 * written after it when encrypting); else ECB with PKCS#7 padding.
 */
bool
pn_aes256_pass(const struct pn_cipher_dir *d, bool gcm, const unsigned char key[32],
	       const void *iv, size_t ivlen, const void *aad, size_t aadlen,
	       const unsigned char *in, size_t inlen, unsigned char *tag, unsigned char *out,
	       size_t *outlen)
{
	EVP_CIPHER_CTX *ctx;
	int	n = 0, m = 0;
	bool	ok = false;

	if (inlen > (size_t)INT32_MAX - 32 || (gcm && (ivlen == 0 || ivlen > 64)))
		return false;
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL)
		return false;
	if (d->init(ctx, gcm ? EVP_aes_256_gcm() : EVP_aes_256_ecb(), NULL, gcm ? NULL : key,
		    NULL) != 1)
		goto done;
	if (gcm && (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)ivlen, NULL) != 1
		    || d->init(ctx, NULL, NULL, key, iv) != 1
		    || (aadlen > 0 && d->update(ctx, NULL, &n, aad, (int)aadlen) != 1)))
		goto done;
	if (d->update(ctx, out, &n, in, (int)inlen) != 1)
		goto done;
	if (gcm && !d->encrypt && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag) != 1)
		goto done;
	if (d->final(ctx, out + n, &m) != 1)
		goto done;
	if (gcm && d->encrypt && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
		goto done;
	*outlen = (size_t)(n + m);
	ok = true;
done:
	EVP_CIPHER_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

static const struct pn_cipher_dir pn_cipher_decrypt = {
	.init = EVP_DecryptInit_ex, .update = EVP_DecryptUpdate, .final = EVP_DecryptFinal_ex,
	.encrypt = false,
};

bool
pn_aes256gcm_decrypt(struct pn_arena *a, const unsigned char key[32], const void *iv,
		     size_t ivlen, const void *aad, size_t aadlen, const unsigned char *in,
		     size_t inlen, unsigned char **out, size_t *outlen)
{
	unsigned char *buf;

	if (inlen <= 16 || ivlen == 0 || ivlen > 64)
		return false;
	buf = pn_arena_alloc(a, inlen - 16 + 1);
	if (!pn_aes256_pass(&pn_cipher_decrypt, true, key, iv, ivlen, aad, aadlen, in, inlen - 16,
			    (unsigned char *)(in + inlen - 16), buf, outlen))
		return false;
	buf[*outlen] = '\0';
	*out = buf;
	return true;
}

bool
pn_aes256ecb_decrypt(struct pn_arena *a, const unsigned char key[32], const unsigned char *in,
		     size_t inlen, unsigned char **out, size_t *outlen)
{
	unsigned char *buf;

	if (inlen == 0 || inlen % 16 != 0)
		return false;
	buf = pn_arena_alloc(a, inlen + 16 + 1);
	if (!pn_aes256_pass(&pn_cipher_decrypt, false, key, NULL, 0, NULL, 0, in, inlen, NULL,
			    buf, outlen))
		return false;
	buf[*outlen] = '\0';
	*out = buf;
	return true;
}

/* ---- keys ---------------------------------------------------------------- */

static char *
cert_serial_hex(X509 *cert)
{
	const ASN1_INTEGER *sn = X509_get0_serialNumber(cert);
	BIGNUM *bn = ASN1_INTEGER_to_BN(sn, NULL);
	char   *hex, *out;

	if (bn == NULL)
		return NULL;
	hex = BN_bn2hex(bn);	/* upper case, no leading zeros */
	BN_free(bn);
	if (hex == NULL)
		return NULL;
	out = pn_xstrdup(hex);
	OPENSSL_free(hex);
	return out;
}

static time_t
asn1_time_to_unix(const ASN1_TIME *t)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return 0;
	return timegm(&tm);
}

EVP_PKEY *
pn_pubkey_parse(const char *text, size_t len, char **serial, time_t *not_after,
		struct pn_err *err)
{
	return pn_pubkey_parse_bits(text, len, PN_RSA_MIN_BITS, serial, not_after, err);
}

EVP_PKEY *
pn_pubkey_parse_bits(const char *text, size_t len, int min_bits, char **serial,
		     time_t *not_after, struct pn_err *err)
{
	BIO    *bio = NULL;
	EVP_PKEY *pkey = NULL;
	X509   *cert = NULL;

	if (serial)
		*serial = NULL;
	if (not_after)
		*not_after = 0;
	if (len > 65536) {
		pn_err_set(err, "key text is too large");
		return NULL;
	}
	if (memmem(text, len, "-----BEGIN CERTIFICATE-----", 27) != NULL) {
		bio = BIO_new_mem_buf(text, (int)len);
		cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
		if (cert == NULL) {
			pn_err_set(err, "could not parse X.509 certificate");
			goto done;
		}
		pkey = X509_get_pubkey(cert);
		if (pkey == NULL) {
			pn_err_set(err, "certificate has no usable public key");
			goto done;
		}
		if (serial)
			*serial = cert_serial_hex(cert);
		if (not_after)
			*not_after = asn1_time_to_unix(X509_get0_notAfter(cert));
	} else if (memmem(text, len, "-----BEGIN PUBLIC KEY-----", 26) != NULL) {
		bio = BIO_new_mem_buf(text, (int)len);
		pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
		if (pkey == NULL)
			pn_err_set(err, "could not parse SPKI PEM public key");
	} else if (memmem(text, len, "-----BEGIN", 10) != NULL) {
		pn_err_set(err, "unsupported PEM type (expected \"PUBLIC KEY\" or \"CERTIFICATE\"; "
			   "PKCS#1 \"RSA PUBLIC KEY\" and private keys are not accepted)");
	} else {
		/* Bare base64 SPKI, as the Alipay console shows it. */
		struct pn_arena *a = pn_arena_new();
		char   *clean = pn_arena_alloc(a, len + 1);
		size_t	i, n = 0, derlen;
		unsigned char *der;

		for (i = 0; i < len; i++)
			if (text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t')
				clean[n++] = text[i];
		if (n == 0 || !pn_b64_decode(a, clean, n, &der, &derlen)) {
			pn_err_set(err, "not a PEM file and not bare base64 SPKI");
		} else {
			const unsigned char *p = der;

			pkey = d2i_PUBKEY(NULL, &p, (long)derlen);
			if (pkey == NULL || p != der + derlen) {
				EVP_PKEY_free(pkey);
				pkey = NULL;
				pn_err_set(err, "could not parse base64 SPKI public key");
			}
		}
		pn_arena_free(a);
	}
	if (pkey != NULL && EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
		pn_err_set(err, "public key is not an RSA key");
		EVP_PKEY_free(pkey);
		pkey = NULL;
	}
	if (pkey != NULL && EVP_PKEY_get_bits(pkey) < min_bits) {
		pn_err_set(err, "RSA key has %d bits; at least %d are required",
			   EVP_PKEY_get_bits(pkey), min_bits);
		EVP_PKEY_free(pkey);
		pkey = NULL;
	}
done:
	if (pkey == NULL && serial && *serial) {
		free(*serial);
		*serial = NULL;
	}
	X509_free(cert);
	BIO_free(bio);
	ERR_clear_error();
	return pkey;
}

EVP_PKEY *
pn_pubkey_load(const char *path, char **serial, time_t *not_after, struct pn_err *err)
{
	return pn_pubkey_load_bits(path, PN_RSA_MIN_BITS, serial, not_after, err);
}

EVP_PKEY *
pn_pubkey_load_bits(const char *path, int min_bits, char **serial, time_t *not_after,
		    struct pn_err *err)
{
	char   *text = NULL;
	size_t	len = 0;
	EVP_PKEY *pkey;

	if (!pn_read_file(path, 65536, &text, &len, err))
		return NULL;
	pkey = pn_pubkey_parse_bits(text, len, min_bits, serial, not_after, err);
	free(text);
	return pkey;
}

enum pn_key_kind
pn_key_text_kind(const char *text, size_t len)
{
	struct pn_arena *a;
	char   *clean;
	unsigned char *der;
	size_t	i, n = 0, derlen;
	enum pn_key_kind kind = PN_KEY_KIND_OTHER;

	if (memmem(text, len, "PRIVATE KEY-----", 16) != NULL)
		return PN_KEY_KIND_PRIVATE;
	if (memmem(text, len, "-----BEGIN CERTIFICATE-----", 27) != NULL)
		return PN_KEY_KIND_CERTIFICATE;
	if (memmem(text, len, "PUBLIC KEY-----", 15) != NULL)
		return PN_KEY_KIND_PUBLIC;
	if (memmem(text, len, "-----BEGIN", 10) != NULL || len > 65536)
		return PN_KEY_KIND_OTHER;
	/* Bare base64, as consoles show keys: which DER is it? */
	a = pn_arena_new();
	clean = pn_arena_alloc(a, len + 1);
	for (i = 0; i < len; i++)
		if (text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t')
			clean[n++] = text[i];
	if (n > 0 && pn_b64_decode(a, clean, n, &der, &derlen)) {
		const unsigned char *p = der;
		EVP_PKEY *k = d2i_AutoPrivateKey(NULL, &p, (long)derlen);

		if (k != NULL)
			kind = PN_KEY_KIND_PRIVATE;
		else {
			p = der;
			k = d2i_PUBKEY(NULL, &p, (long)derlen);
			if (k != NULL)
				kind = PN_KEY_KIND_PUBLIC;
		}
		EVP_PKEY_free(k);
		OPENSSL_cleanse(der, derlen);
	}
	OPENSSL_cleanse(clean, n);
	pn_arena_free(a);
	ERR_clear_error();
	return kind;
}

EVP_PKEY *
pn_privkey_load(const char *path, struct pn_err *err)
{
	char   *text = NULL;
	size_t	len = 0;
	BIO    *bio;
	EVP_PKEY *pkey = NULL;

	if (!pn_read_file(path, 65536, &text, &len, err))
		return NULL;
	bio = BIO_new_mem_buf(text, (int)len);
	if (bio)
		pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	if (pkey == NULL)
		pn_err_set(err, "could not parse private key \"%s\"", path);
	BIO_free(bio);
	OPENSSL_cleanse(text, len);
	free(text);
	ERR_clear_error();
	return pkey;
}

/*
 * cfg_keyfile.c: the files a configuration names for their keys
 * (cfg_keyfile.h): the secret files' owner and mode, secrets one a line,
 * public keys and certificates, the test signing keys, and the key ids
 * made from them and looked up again (pn_cfg_site_key_state()).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "cfg.h"
#include "cfg_keyfile.h"
#include "crypto.h"

#ifndef PN_RECEIVER_GROUP
#define PN_RECEIVER_GROUP "paynotify"
#endif

#define CFG_MAX_SECRET_FILE 65536

/* ---- key ids --------------------------------------------------------------- */

static const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* "name:3f9a1c2e": base name and the first PN_KEY_FP_HEX hex digits of SHA-256(data). */
static char *
make_key_id(const char *path, const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char	hex[PN_KEY_FP_HEX + 1];
	int	i;

	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < PN_KEY_FP_HEX / 2)
		pn_fatal("could not compute SHA-256");
	for (i = 0; i < PN_KEY_FP_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return pn_xasprintf("%s:%s", base_name(path), hex);
}

/* ---- secret files, public and private keys --------------------------------- */

/*
 * The receivers' group: a secret file of mode 0640 may belong to it (the
 * package's root:paynotify 0640), as well as to the group the reading
 * process runs as (unless that is root, whose group is no one's in
 * particular).  (uid_t)-1 / (gid_t)-1: none.
 */
static gid_t
receivers_gid(void)
{
	struct group *gr = getgrnam(PN_RECEIVER_GROUP);

	return gr ? gr->gr_gid : (gid_t)-1;
}

/*
 * May a secret file with this owner, group and mode be read?  NULL if yes,
 * else why not (a static string): the owner is root or the running user
 * (root may read the receivers' own files, whoever they run as); others
 * have no access at all; the group may at most read, and only when it is
 * the receivers' group (PN_RECEIVER_GROUP, or the running user's group
 * when that is not root).
 */
static const char *
secret_mode_problem(const struct stat *st)
{
	uid_t	euid = geteuid();

	if (euid != 0 && st->st_uid != 0 && st->st_uid != euid)
		return "it must belong to root or to the user that reads it";
	if (st->st_mode & S_IRWXO)
		return "it must not be accessible by others";
	if (st->st_mode & (S_IWGRP | S_IXGRP))
		return "its group may at most read it";
	if ((st->st_mode & S_IRGRP) && st->st_gid != receivers_gid()
	    && (euid == 0 || st->st_gid != getegid()))
		return "only the receivers' group (" PN_RECEIVER_GROUP ") may read it";
	return NULL;
}

bool
pn_cfg_secret_file_ok(const char *path, struct pn_err *err)
{
	struct stat st;
	const char *why;

	if (stat(path, &st) != 0) {
		pn_err_set(err, "could not stat secret file \"%s\": %s", path, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		pn_err_set(err, "secret file \"%s\" is not a regular file", path);
		return false;
	}
	if ((why = secret_mode_problem(&st)) != NULL) {
		struct group *gr = getgrgid(st.st_gid);
		char	gname[32];

		if (gr)
			snprintf(gname, sizeof(gname), "%s", gr->gr_name);
		else
			snprintf(gname, sizeof(gname), "%ld", (long)st.st_gid);
		pn_err_set(err, "secret file \"%s\" has mode %04o (owner uid %ld, group %s): %s "
			   "(chmod 600 \"%s\" and chown it to the user that reads it, or chown "
			   "root:" PN_RECEIVER_GROUP " and chmod 640)", path,
			   (unsigned)(st.st_mode & 07777), (long)st.st_uid, gname, why, path);
		return false;
	}
	return true;
}

void
pn_cfg_secrets_free(struct pn_secret *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(s[i].id);
		if (s[i].data) {
			OPENSSL_cleanse(s[i].data, s[i].len);
			free(s[i].data);
		}
	}
	free(s);
}

void
pn_cfg_pubkeys_free(struct pn_pubkey *k, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(k[i].id);
		free(k[i].path);
		free(k[i].serial);
		EVP_PKEY_free(k[i].pkey);
	}
	free(k);
}

bool
pn_cfg_load_secrets(const char *path, struct pn_secret **list, size_t *n, struct pn_err *err)
{
	char   *text = NULL, *line, *next;
	size_t	len = 0;
	int	lineno = 0;
	bool	ok = false;

	if (!pn_cfg_secret_file_ok(path, err))
		return false;
	if (!pn_read_file(path, CFG_MAX_SECRET_FILE, &text, &len, err))
		return false;
	if (memchr(text, '\0', len) != NULL) {
		pn_err_set(err, "secret file \"%s\" contains a NUL byte", path);
		goto done;
	}
	for (line = text; line != NULL; line = next) {
		size_t l;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		l = strlen(line);
		while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
			line[--l] = '\0';
		if (l == 0)
			continue;
		*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
		(*list)[*n].id = make_key_id(path, line, l);
		(*list)[*n].line = lineno;
		(*list)[*n].data = (unsigned char *)pn_xstrndup(line, l);
		(*list)[*n].len = l;
		(*n)++;
	}
	ok = true;
done:
	OPENSSL_cleanse(text, len);
	free(text);
	return ok;
}

/*
 * What the file at path holds, when it is the wrong kind of key for key (a
 * private key where a public one belongs, or the reverse): a sentence saying
 * so and what belongs there (a private key: the provider's own,
 * private_not_public); NULL when it is not that mistake.
 */
static const char *
wrong_kind(const char *path, const char *private_not_public, bool want_private)
{
	char   *text = NULL;
	size_t	len = 0;
	enum pn_key_kind kind;
	struct pn_err e;

	if (!pn_read_file(path, 65536, &text, &len, &e))
		return NULL;
	kind = pn_key_text_kind(text, len);
	OPENSSL_cleanse(text, len);
	free(text);
	if (!want_private && kind == PN_KEY_KIND_PRIVATE)
		return private_not_public;
	if (want_private && (kind == PN_KEY_KIND_PUBLIC || kind == PN_KEY_KIND_CERTIFICATE))
		return kind == PN_KEY_KIND_PUBLIC
		       ? "this is a public key: test signing needs the matching private key (PEM)"
		       : "this is a certificate: test signing needs the matching private key (PEM)";
	return NULL;
}

bool
pn_cfg_load_pubkey(const char *path, const char *key, int min_bits,
		   const char *private_not_public, struct pn_pubkey **list, size_t *n,
		   struct pn_err *err)
{
	struct pn_pubkey k;
	unsigned char *der = NULL;
	const char *why;
	int	derlen;

	memset(&k, 0, sizeof(k));
	k.pkey = pn_pubkey_load_bits(path, min_bits, &k.serial, &k.not_after, err);
	if (k.pkey == NULL) {
		if ((why = wrong_kind(path, private_not_public, false)) != NULL)
			pn_err_set(err, "could not load key \"%s\" for \"%s\": %s", path, key, why);
		else
			pn_err_prefix(err, "could not load key \"%s\"", path);
		return false;
	}
	derlen = i2d_PUBKEY(k.pkey, &der);
	if (derlen <= 0)
		pn_fatal("could not encode the public key of \"%s\"", path);
	k.path = pn_xstrdup(path);
	k.id = make_key_id(path, der, (size_t)derlen);
	OPENSSL_free(der);
	*list = pn_xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = k;
	return true;
}

EVP_PKEY *
pn_cfg_load_privkey(const char *path, const char *key, struct pn_err *err)
{
	EVP_PKEY *k = pn_privkey_load(path, err);
	const char *why;

	if (k == NULL && (why = wrong_kind(path, NULL, true)) != NULL)
		pn_err_set(err, "could not load \"%s\" for \"%s\": %s", path, key, why);
	return k;
}

static int
pem_name(const struct dirent *d)
{
	size_t	n = strlen(d->d_name);

	return d->d_name[0] != '.' && n > 4 && strcmp(d->d_name + n - 4, ".pem") == 0;
}

bool
pn_cfg_load_pubkey_dir(const char *dir, const char *key, int min_bits,
		       const char *private_not_public, struct pn_pubkey **list, size_t *count,
		       void (*record)(void *ctx, const char *path), void *ctx, struct pn_err *err)
{
	struct dirent **names = NULL;
	bool	ok = true;
	int	n, i;

	if ((n = scandir(dir, &names, pem_name, alphasort)) < 0) {
		pn_err_set(err, "could not read directory \"%s\" for \"%s\": %s", dir, key,
			   strerror(errno));
		return false;
	}
	for (i = 0; i < n; i++) {
		char   *path = pn_xasprintf("%s/%s", dir, names[i]->d_name);
		struct stat st;

		if (ok && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (record)
				record(ctx, path);
			ok = pn_cfg_load_pubkey(path, key, min_bits, private_not_public, list,
						count, err);
		}
		free(path);
		free(names[i]);
	}
	free(names);
	return ok;
}

bool
pn_cfg_secret_file_loose(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && secret_mode_problem(&st) != NULL;
}

/* ---- which key an id names ------------------------------------------------- */

/* Is cand the id id[0..idlen) (base_only: an id "NAME:..." of base name id[0..idlen))? */
static bool
same_id(const char *cand, const char *id, size_t idlen, bool base_only)
{
	const char *colon = strrchr(cand, ':');

	if (base_only)
		return colon && (size_t)(colon - cand) == idlen && strncmp(cand, id, idlen) == 0;
	return strlen(cand) == idlen && strncmp(cand, id, idlen) == 0;
}

/* Does a key id of the site equal id[0..idlen) (base_only: have that base name)? */
static bool
site_has_id(const struct pn_site *s, const char *id, size_t idlen, bool base_only)
{
	const struct pn_cfg_provider *const *prov;
	size_t	i, j;

	for (prov = pn_cfg_providers; *prov; prov++)
		for (i = 0; i < (*prov)->nkeys; i++) {
			const struct pn_cfg_keydef *kd = &(*prov)->keys[i];
			const void *field = pn_cfg_site_field(s, kd);
			size_t	n = pn_cfg_site_count(s, kd);

			if (kd->type == PN_K_SECRETS) {
				const struct pn_secret *sec = *(struct pn_secret *const *)field;

				for (j = 0; j < n; j++)
					if (same_id(sec[j].id, id, idlen, base_only))
						return true;
			} else if (kd->type == PN_K_PUBKEYS) {
				const struct pn_pubkey *pub = *(struct pn_pubkey *const *)field;

				for (j = 0; j < n; j++)
					if (same_id(pub[j].id, id, idlen, base_only)
					    || (!base_only && pub[j].serial
						&& same_id(pub[j].serial, id, idlen, false)))
						return true;
			} else if ((kd->flags & PN_KEY_ID) && !base_only) {
				const char *v = *(char *const *)field;

				if (v && same_id(v, id, idlen, false))
					return true;
			}
		}
	return false;
}

/* "name:" followed by exactly PN_KEY_FP_HEX lower-case hex digits. */
static bool
is_fingerprint_id(const char *id, size_t n)
{
	size_t i;

	if (n < PN_KEY_FP_HEX + 2 || id[n - PN_KEY_FP_HEX - 1] != ':')
		return false;
	for (i = n - PN_KEY_FP_HEX; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

enum pn_key_state
pn_cfg_site_key_state(const struct pn_site *s, const char *key_id)
{
	enum pn_key_state state = PN_KEY_CONFIGURED;
	const char *part = key_id, *end;

	if (s == NULL || key_id == NULL || *key_id == '\0')
		return PN_KEY_UNKNOWN;
	for (; part; part = *end ? end + 1 : NULL) {
		size_t	n, base;
		const char *colon;

		end = strchr(part, '/');	/* composite: "signing key/decryption key" */
		if (end == NULL)
			end = part + strlen(part);
		n = (size_t)(end - part);
		if (site_has_id(s, part, n, false))
			continue;
		if (is_fingerprint_id(part, n))
			return PN_KEY_GONE;
		/* An id from an earlier build: "file:LINE" (a secret) or "file" (a public
		 * key).  Gone if no key comes from that file any more; otherwise that
		 * file's keys may or may not include the one it named. */
		colon = memchr(part, ':', n);
		base = colon ? (size_t)(colon - part) : n;
		if (!site_has_id(s, part, base, true))
			return PN_KEY_GONE;
		state = PN_KEY_UNKNOWN;
	}
	return state;
}

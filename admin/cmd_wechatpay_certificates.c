/*
 * cmd_wechatpay_certificates.c: paynotify wechatpay-certificates --fetch —
 * download WeChat Pay's API v3 platform certificates (平台证书), check
 * them, and write them into wechatpay.platform_cert_dir, which the
 * receivers load (every *.pem) at start and at every reload, so that a
 * rotation needs no manual step (docs/WECHATPAY.md "Platform certificates").
 *
 * One signed GET <wechatpay.query_url>/v3/certificates per site, with
 * `paynotify query`'s merchant API key and client (pn_query_wechatpay_get).
 * Nothing is written unless all of this holds:
 *   - the answer's Wechatpay-* signature verifies exactly as a
 *     notification's (webhooks/wechatpay_v3.c): with the platform
 *     certificate the site already trusts whose serial Wechatpay-Serial
 *     names, or with the WeChat Pay public key when the serial is
 *     wechatpay.public_key_id (bootstrapping a site that has the public key);
 *     a certificate is never trusted on its own word;
 *   - every entry of data[] decrypts: encrypt_certificate.algorithm
 *     AEAD_AES_256_GCM, AES-256-GCM with an APIv3 key of the site, the nonce
 *     as IV and associated_data as AAD, the last 16 bytes of the base64
 *     ciphertext the tag (EVP, common/crypto.c);
 *   - each plaintext is one PEM X.509 certificate with an RSA key of at least
 *     2048 bits whose serial (upper-case hex) is the entry's serial_no, and
 *     which has not expired (an expired one is listed and not written).
 * The tree configures no WeChat Pay CA, so no chain is checked: a
 * certificate is trusted because only WeChat Pay and the merchant hold the
 * APIv3 key that sealed it, inside an answer signed with a key already
 * trusted.
 *
 * Files: <dir>/wechatpay-platform-<SERIAL>.pem, written atomically (a
 * hidden temporary file in the same directory, fsync, rename, fsync of the
 * directory) with the mode and owner of the site's other certificate files
 * (0644 and the directory's owner when it has none).  An expired
 * wechatpay-platform-*.pem of the directory is removed.  The receivers read
 * them at their next reload (SIGHUP; systemctl reload paynotify@wechatpay).
 *
 * Exit status: 0 done (or nothing to do: a site in public-key mode), 1 an
 * answer refused (signature, decryption, a certificate that does not
 * match): nothing written for that site, 3 could not do the job (transport,
 * HTTP error, a file that could not be written), 64 usage, 78 configuration
 * (the site cannot fetch: no APIv3 key, no query key, no
 * wechatpay.platform_cert_dir).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "admin.h"
#include "args.h"
#include "arena.h"
#include "crypto.h"
#include "json.h"
#include "query.h"

#define MAX_CERTS 16			/* entries of one answer */
#define FILE_PREFIX "wechatpay-platform-"

struct run {
	struct pn_config *cfg;
	struct pn_qhttp http;
	bool	dry_run;
	struct pn_table out;
	int	written, refused, errors, config;
};

/* One decrypted, checked certificate of an answer (arena). */
struct cert {
	const char *serial;
	const char *pem;
	size_t	pem_len;
	time_t	not_before, not_after;
	bool	expired;
};

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify wechatpay-certificates --fetch [--site S] [--dry-run]\n"
		"                                       [--format table|csv|json]\n\n"
		"Download WeChat Pay's API v3 platform certificates (GET /v3/certificates,\n"
		"signed with wechatpay.query_private_key_file as paynotify query does), verify\n"
		"the answer's signature with a platform certificate the site already trusts or\n"
		"its WeChat Pay public key, decrypt each certificate with the APIv3 key\n"
		"(AES-256-GCM), check its serial, key and dates, and write it atomically into\n"
		"wechatpay.platform_cert_dir as wechatpay-platform-<serial>.pem (expired ones\n"
		"there are removed).  The receivers load the directory at their next reload.\n"
		"Every API v3 site with wechatpay.platform_cert_dir, or --site S.  A site in\n"
		"public-key mode (wechatpay.public_key_id, no platform certificates) needs no\n"
		"certificates: it is said and skipped.  --dry-run downloads and checks,\n"
		"writes nothing.\n"
		"Exit status: 0 done or nothing to do, 1 an answer refused (nothing written\n"
		"for that site), 3 could not do the job (transport, HTTP error, a file not\n"
		"written), 64 usage, 78 the site cannot fetch (configuration).\n"
		"See docs/WECHATPAY.md \"Platform certificates\".\n");
}

static void
add(struct run *r, const struct pn_site *s, const struct cert *c, const char *result,
    const char *detail)
{
	const char *cells[6];
	char	from[32] = "", until[32] = "";
	struct tm tm;

	if (c != NULL && c->not_before > 0 && gmtime_r(&c->not_before, &tm))
		strftime(from, sizeof(from), "%Y-%m-%d %H:%M:%SZ", &tm);
	if (c != NULL && c->not_after > 0 && gmtime_r(&c->not_after, &tm))
		strftime(until, sizeof(until), "%Y-%m-%d %H:%M:%SZ", &tm);
	cells[0] = s->name;
	cells[1] = c ? c->serial : NULL;
	cells[2] = from[0] ? from : NULL;
	cells[3] = until[0] ? until : NULL;
	cells[4] = result;
	cells[5] = detail;
	pn_table_add(&r->out, cells);
}

static time_t
asn1_unix(const ASN1_TIME *t)
{
	struct tm tm;

	if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1)
		return 0;
	return timegm(&tm);
}

/*
 * One entry of data[]: decrypted with one of the site's APIv3 keys and
 * checked.  False: err says why (the whole answer is then refused).
 */
static bool
open_entry(struct pn_arena *a, const struct pn_site *s, json_t *e, time_t now, struct cert *c,
	   struct pn_err *err)
{
	const struct pn_wechatpay_cfg *w = &s->wechatpay;
	const char *serial = pn_json_str(a, e, "serial_no");
	const char *alg = pn_json_str(a, e, "encrypt_certificate.algorithm");
	const char *nonce = pn_json_str(a, e, "encrypt_certificate.nonce");
	const char *aad = pn_json_str(a, e, "encrypt_certificate.associated_data");
	const char *ct64 = pn_json_str(a, e, "encrypt_certificate.ciphertext");
	unsigned char *ct, *plain = NULL;
	size_t	ctlen, plen = 0, i;
	char   *got = NULL;
	EVP_PKEY *pkey;
	BIO    *bio;
	X509   *x;

	memset(c, 0, sizeof(*c));
	if (serial == NULL || *serial == '\0' || strlen(serial) > 64 || alg == NULL
	    || nonce == NULL || ct64 == NULL) {
		pn_err_set(err, "an entry lacks serial_no or encrypt_certificate.{algorithm, nonce, "
			   "ciphertext}");
		return false;
	}
	c->serial = serial;
	if (strcmp(alg, "AEAD_AES_256_GCM") != 0) {
		pn_err_set(err, "certificate %s: algorithm \"%.32s\", expected AEAD_AES_256_GCM",
			   serial, alg);
		return false;
	}
	if (aad == NULL)
		aad = "";
	if (!pn_b64_decode(a, ct64, strlen(ct64), &ct, &ctlen) || ctlen <= 16) {
		pn_err_set(err, "certificate %s: ciphertext is not base64 of ciphertext and tag",
			   serial);
		return false;
	}
	for (i = 0; i < w->napiv3_keys && plain == NULL; i++)
		if (w->apiv3_keys[i].len == 32
		    && !pn_aes256gcm_decrypt(a, w->apiv3_keys[i].data, nonce, strlen(nonce), aad,
					     strlen(aad), ct, ctlen, &plain, &plen))
			plain = NULL;
	if (plain == NULL) {
		pn_err_set(err, "certificate %s: AES-256-GCM tag mismatch with each of the %zu "
			   "APIv3 key%s (altered, or sealed with another merchant's key)", serial,
			   w->napiv3_keys, w->napiv3_keys == 1 ? "" : "s");
		return false;
	}
	if (plen > 65536 || memmem(plain, plen, "-----BEGIN CERTIFICATE-----", 27) == NULL) {
		pn_err_set(err, "certificate %s: the plaintext is not a PEM certificate", serial);
		return false;
	}
	/* the key: RSA of at least 2048 bits, as every configured certificate */
	pkey = pn_pubkey_parse_bits((const char *)plain, plen, 2048, &got, NULL, err);
	if (pkey == NULL) {
		pn_err_prefix(err, "certificate %s", serial);
		return false;
	}
	EVP_PKEY_free(pkey);
	if (got == NULL || strcasecmp(got, serial) != 0) {
		pn_err_set(err, "certificate serial %s is not the entry's serial_no %s",
			   got ? got : "-", serial);
		free(got);
		return false;
	}
	c->serial = pn_arena_strdup(a, got);	/* upper-case hex: a safe file name */
	free(got);
	bio = BIO_new_mem_buf(plain, (int)plen);
	x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	if (x == NULL) {
		pn_err_set(err, "certificate %s: unreadable X.509", serial);
		return false;
	}
	c->not_before = asn1_unix(X509_get0_notBefore(x));
	c->not_after = asn1_unix(X509_get0_notAfter(x));
	X509_free(x);
	if (c->not_before == 0 || c->not_after == 0 || c->not_after <= c->not_before) {
		pn_err_set(err, "certificate %s: unreadable validity dates", serial);
		return false;
	}
	c->expired = c->not_after <= now;
	c->pem = (const char *)plain;
	c->pem_len = plen;
	return true;
}

/* The mode and owner new certificate files get: those of the site's others. */
static void
file_owner(const struct pn_site *s, const char *dir, mode_t *mode, uid_t *uid, gid_t *gid)
{
	struct stat st;
	size_t	i;

	for (i = 0; i < s->wechatpay.ncerts; i++)
		if (stat(s->wechatpay.certs[i].path, &st) == 0 && S_ISREG(st.st_mode)) {
			*mode = st.st_mode & 0644;	/* never executable, never group/other-writable */
			*uid = st.st_uid;
			*gid = st.st_gid;
			return;
		}
	*mode = 0644;
	if (stat(dir, &st) == 0) {
		*uid = st.st_uid;
		*gid = st.st_gid;
	} else {
		*uid = geteuid();
		*gid = getegid();
	}
}

/* Does path hold exactly data? */
static bool
same_file(const char *path, const char *data, size_t len)
{
	struct pn_err err;
	char   *old = NULL;
	size_t	olen = 0;
	bool	same;

	if (!pn_read_file(path, 65536, &old, &olen, &err))
		return false;
	same = olen == len && memcmp(old, data, len) == 0;
	free(old);
	return same;
}

/* Write data to path atomically: dir/.name.XXXXXX, fsync, rename, fsync dir. */
static bool
write_atomic(const char *dir, const char *path, const char *data, size_t len, mode_t mode,
	     uid_t uid, gid_t gid, struct pn_err *err)
{
	char   *tmp = pn_xasprintf("%s/.%s.XXXXXX", dir, strrchr(path, '/') + 1);
	int	fd = mkstemp(tmp), dfd;
	bool	ok = false;

	if (fd < 0) {
		pn_err_set(err, "could not create a file in %s: %s", dir, strerror(errno));
		free(tmp);
		return false;
	}
	if ((uid != geteuid() || gid != getegid()) && fchown(fd, uid, gid) != 0) {
		pn_err_set(err, "could not give %s the owner %ld:%ld of the other certificate "
			   "files: %s", tmp, (long)uid, (long)gid, strerror(errno));
		goto done;
	}
	if (fchmod(fd, mode) != 0 || write(fd, data, len) != (ssize_t)len || fsync(fd) != 0) {
		pn_err_set(err, "could not write %s: %s", tmp, strerror(errno));
		goto done;
	}
	if (close(fd) != 0) {
		fd = -1;
		pn_err_set(err, "could not write %s: %s", tmp, strerror(errno));
		goto done;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		pn_err_set(err, "could not rename %s to %s: %s", tmp, path, strerror(errno));
		goto done;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	ok = true;
done:
	if (fd >= 0)
		close(fd);
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok;
}

static int
ours(const struct dirent *d)
{
	size_t	n = strlen(d->d_name);

	return strncmp(d->d_name, FILE_PREFIX, strlen(FILE_PREFIX)) == 0 && n > 4
	    && strcmp(d->d_name + n - 4, ".pem") == 0;
}

/* Remove the expired wechatpay-platform-*.pem of dir that the answer no longer lists. */
static void
remove_expired(struct run *r, const struct pn_site *s, struct pn_arena *a, const char *dir,
	       const struct cert *certs, size_t n, time_t now)
{
	struct dirent **names = NULL;
	int	nn, i;

	if ((nn = scandir(dir, &names, ours, alphasort)) < 0)
		return;
	for (i = 0; i < nn; i++) {
		char   *path = pn_arena_printf(a, "%s/%s", dir, names[i]->d_name);
		struct pn_err err;
		struct cert c;
		char   *serial = NULL;
		time_t	not_after = 0;
		EVP_PKEY *k = pn_pubkey_load_bits(path, 0, &serial, &not_after, &err);
		bool	loaded = k != NULL, listed = false;
		size_t	j;

		free(names[i]);
		EVP_PKEY_free(k);
		for (j = 0; serial && j < n; j++)
			listed = listed || strcasecmp(certs[j].serial, serial) == 0;
		if (!loaded || serial == NULL || listed || not_after == 0 || not_after > now) {
			free(serial);
			continue;
		}
		memset(&c, 0, sizeof(c));
		c.serial = pn_arena_strdup(a, serial);
		c.not_after = not_after;
		free(serial);
		if (r->dry_run)
			add(r, s, &c, "would_remove", pn_arena_printf(a, "%s: expired", path));
		else if (unlink(path) != 0) {
			r->errors++;
			add(r, s, &c, "error", pn_arena_printf(a, "could not remove expired %s: %s",
								 path, strerror(errno)));
		} else
			add(r, s, &c, "removed", pn_arena_printf(a, "%s: expired", path));
	}
	free(names);
}

static void
fetch_site(struct run *r, const struct pn_site *s, struct pn_arena *a, bool named)
{
	const struct pn_wechatpay_cfg *w = &s->wechatpay;
	const struct pn_query_provider *qp = &pn_query_wechatpay;
	const char *why = NULL, *dir = w->platform_cert_dir;
	struct pn_qhttp_answer h;
	struct pn_query_ctx ctx;
	struct pn_err err;
	struct cert certs[MAX_CERTS];
	json_t *root = NULL, *data;
	void   *creds = NULL;
	size_t	n, i;
	time_t	now = time(NULL);
	mode_t	mode;
	uid_t	uid;
	gid_t	gid;

	if (w->napiv3_keys == 0) {
		if (named) {
			r->config++;
			add(r, s, NULL, "error", "WeChat Pay API v2 only (no wechatpay.apiv3_key_file):"
			    " API v2 has no platform certificates");
		}
		return;
	}
	if (w->public_key_id != NULL && w->ncerts == 0 && dir == NULL) {
		add(r, s, NULL, "skipped", pn_arena_printf(a, "public-key mode (wechatpay.public_key_id"
			" %s): notifications are verified with the WeChat Pay public key, platform "
			"certificates are not used; nothing to fetch", w->public_key_id));
		return;
	}
	if (dir == NULL) {
		if (named) {
			r->config++;
			add(r, s, NULL, "error", "no wechatpay.platform_cert_dir: the directory the "
			    "certificates are written to (and the receivers load)");
		} else
			add(r, s, NULL, "skipped", "no wechatpay.platform_cert_dir (its "
			    "wechatpay.platform_cert_files are kept by hand)");
		return;
	}
	if (!qp->configured(s, &why)) {
		r->config++;
		add(r, s, NULL, "error", pn_arena_printf(a, "cannot sign the request: %s", why));
		return;
	}
	if (!qp->load(s, &creds, &err)) {
		r->config++;
		add(r, s, NULL, "error", err.msg);
		return;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.cfg = r->cfg;
	ctx.site = s;
	ctx.http = &r->http;
	ctx.arena = a;
	ctx.now = (int64_t)now;
	ctx.creds = creds;
	memset(&h, 0, sizeof(h));
	if (!pn_query_wechatpay_get(&ctx, pn_arena_printf(a, "%s/v3/certificates", w->query_url),
				    true, &h, &err)) {
		/* a 2xx answer that did not verify is refused; anything else an error */
		if (h.status >= 200 && h.status <= 299)
			r->refused++;
		else
			r->errors++;
		add(r, s, NULL, h.status >= 200 && h.status <= 299 ? "refused" : "error",
		    pn_arena_printf(a, "%s; nothing written", err.msg));
		goto done;
	}
	root = pn_json_parse(h.body, h.body_len, &err);
	data = root ? json_object_get(root, "data") : NULL;
	n = json_is_array(data) ? json_array_size(data) : 0;
	if (n == 0 || n > MAX_CERTS) {
		r->refused++;
		add(r, s, NULL, "refused", pn_arena_printf(a, "the signed answer has %s data[] (1 "
			"to %d certificates expected); nothing written", n ? "too long a" : "no",
			MAX_CERTS));
		goto done;
	}
	for (i = 0; i < n; i++)
		if (!open_entry(a, s, json_array_get(data, i), now, &certs[i], &err)) {
			r->refused++;
			add(r, s, certs[i].serial ? &certs[i] : NULL, "refused",
			    pn_arena_printf(a, "%s; nothing written", err.msg));
			goto done;
		}
	file_owner(s, dir, &mode, &uid, &gid);
	for (i = 0; i < n; i++) {
		const struct cert *c = &certs[i];
		char   *path = pn_arena_printf(a, "%s/" FILE_PREFIX "%s.pem", dir, c->serial);

		if (c->expired) {
			add(r, s, c, "expired", "listed by WeChat Pay but expired: not written");
			continue;
		}
		if (same_file(path, c->pem, c->pem_len)) {
			add(r, s, c, "unchanged", path);
			continue;
		}
		if (r->dry_run) {
			add(r, s, c, "would_write", path);
			continue;
		}
		if (!write_atomic(dir, path, c->pem, c->pem_len, mode, uid, gid, &err)) {
			r->errors++;
			add(r, s, c, "error", err.msg);
			continue;
		}
		r->written++;
		add(r, s, c, "written", pn_arena_printf(a, "%s (mode %04o); the receivers load it at "
			"their next reload", path, (unsigned)mode));
	}
	remove_expired(r, s, a, dir, certs, n, now);
done:
	json_decref(root);
	qp->free_creds(creds);
}

static int
certs_exec(int argc, char **argv, const char *config_path)
{
	static const char *const cols[] = {"site", "serial_no", "valid_from", "valid_until",
					   "result", "detail"};
	const char *site_name = NULL;
	enum pn_format fmt = pn_format_default();
	struct pn_arena *a;
	struct pn_err err;
	struct run r;
	bool	fetch = false;
	int	rc;
	size_t	i;
	const struct pn_arg options[] = {
		{"fetch", no_argument, 0, PN_ARG_FLAG, .flag = &fetch},
		{"site", required_argument, 0, PN_ARG_STR, .str = &site_name},
		{"dry-run", no_argument, 0, PN_ARG_FLAG, .flag = &r.dry_run},
		{"format", required_argument, 0, PN_ARG_FORMAT, .fmt = &fmt},
		PN_ARGS_END,
	};
	const struct pn_args args = {.cmd = "wechatpay-certificates", .help = help,
				     .opts = options, .rest = PN_REST_UNNAMED};

	memset(&r, 0, sizeof(r));
	if ((rc = pn_args_parse(&args, argc, argv, NULL)) != PN_ARGS_RUN)
		return rc;
	if (!fetch) {
		fprintf(stderr, "paynotify: wechatpay-certificates: --fetch is required (it "
			"downloads the platform certificates)\n");
		return PN_EXIT_USAGE;
	}
	if ((r.cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (site_name != NULL && !pn_opt_site(r.cfg, "--site", site_name)) {
		pn_cfg_free(r.cfg);
		return PN_EXIT_USAGE;
	}
	if (site_name != NULL && !pn_cfg_site(r.cfg, site_name)->wechatpay.configured) {
		fprintf(stderr, "paynotify: wechatpay-certificates: site %s has no WeChat Pay "
			"configuration in %s\n", site_name, r.cfg->path);
		pn_cfg_free(r.cfg);
		return PN_EXIT_CONFIG;
	}
	if (!pn_qhttp_init(&r.http, r.cfg, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		pn_cfg_free(r.cfg);
		return PN_EXIT_FAILED;
	}
	pn_table_init(&r.out, PN_ARRAY_LEN(cols), cols);
	a = pn_arena_new();
	for (i = 0; i < r.cfg->nsites; i++) {
		const struct pn_site *s = &r.cfg->sites[i];

		if ((site_name && strcmp(s->name, site_name) != 0) || !s->wechatpay.configured)
			continue;
		fetch_site(&r, s, a, site_name != NULL);
		pn_arena_reset(a);
	}
	pn_table_print(&r.out, fmt, stdout);
	pn_table_free(&r.out);
	rc = r.errors > 0 ? PN_EXIT_FAILED : r.refused > 0 ? PN_EXIT_ATTENTION
	   : r.config > 0 ? PN_EXIT_CONFIG : PN_EXIT_OK;
	fprintf(stderr, "paynotify: wechatpay-certificates: %d written, %d refused, %d errors%s%s\n",
		r.written, r.refused, r.errors + r.config, r.dry_run ? " (dry run)" : "",
		r.written > 0 ? "; reload the WeChat Pay receivers (SIGHUP: systemctl reload "
		"paynotify@wechatpay) to use them" : "");
	pn_arena_free(a);
	pn_qhttp_destroy(&r.http);
	pn_cfg_free(r.cfg);
	return rc;
}

const struct pn_cmd pn_cmd_wechatpay_certificates = {
	"wechatpay-certificates", "--fetch [--site S] [--dry-run]",
	"download, verify and install WeChat Pay's API v3 platform certificates", certs_exec, help,
};

/*
 * bill_fetch.c: `paynotify reconcile --fetch` — download the day's bill
 * with the keys and HTTP client of `paynotify query` (admin/query_alipay.c,
 * admin/query_wechatpay.c) into the --statement FILE, which is then read
 * as if it had been given (docs/RECONCILE.md).  The fetch session
 * (pn_rec_fetch_open) is also the client of --by-query.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "json.h"
#include "reconcile.h"

/* Write a downloaded bill to path atomically (path.part, then rename). */
static bool
write_bill(const char *path, const unsigned char *data, size_t len, struct pn_err *err)
{
	char *tmp = pn_xasprintf("%s.part", path);
	FILE *f = fopen(tmp, "wb");
	bool ok = f != NULL && fwrite(data, 1, len, f) == len && fflush(f) == 0;

	if (f != NULL && fclose(f) != 0)
		ok = false;
	if (!ok)
		pn_err_set(err, "could not write %s: %s", tmp, strerror(errno));
	else if (rename(tmp, path) != 0) {
		pn_err_set(err, "could not rename %s to %s: %s", tmp, path, strerror(errno));
		ok = false;
	}
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok;
}

/* Load qp's credentials for r->site (those of `paynotify query`) and set up
 * the HTTP client for a bill-sized answer; pn_rec_fetch_close() when true. */
bool
pn_rec_fetch_open(struct run *r, const struct pn_query_provider *qp, struct pn_rec_fetch *f,
           struct pn_err *err)
{
	const char *why = NULL;

	memset(f, 0, sizeof(*f));
	f->qp = qp;
	if (!qp->configured(r->site, &why)) {
		pn_err_set(err, "site %s cannot fetch bills: %s (the keys of paynotify query)",
		           r->site->name, why);
		return false;
	}
	if (!qp->load(r->site, &f->creds, err))
		return false;
	if (!pn_qhttp_init(&f->http, r->cfg, err)) {
		qp->free_creds(f->creds);
		return false;
	}
	f->http.max_answer = PN_STMT_MAX_FILE;
	f->ctx.cfg = r->cfg;
	f->ctx.site = r->site;
	f->ctx.http = &f->http;
	f->ctx.arena = r->a;
	f->ctx.now = (int64_t)time(NULL);
	f->ctx.creds = f->creds;
	return true;
}

void
pn_rec_fetch_close(struct pn_rec_fetch *f)
{
	pn_qhttp_destroy(&f->http);
	f->qp->free_creds(f->creds);
}

/*
 * Alipay: alipay.data.dataservice.bill.downloadurl.query (bill_type trade),
 * signed with `paynotify query`'s key, its answer verified; then the
 * bill_download_url of the signed answer (https, valid 30 seconds; the zip
 * is trusted for its TLS and the signed answer that named it), kept at path.
 */
bool
pn_rec_fetch_alipay(struct run *r, const char *path, struct pn_err *err)
{
	const char *get_headers[] = {NULL};
	struct pn_rec_fetch f;
	struct pn_qhttp_answer h;
	const char *url;
	json_t *biz, *root = NULL, *resp = NULL;
	bool ok = false;

	if (!pn_rec_fetch_open(r, &pn_query_alipay, &f, err))
		return false;
	biz = json_pack("{s:s, s:s}", "bill_type", "trade", "bill_date", r->day);
	ok = pn_query_alipay_call(&f.ctx, "alipay.data.dataservice.bill.downloadurl.query", biz,
	                          &root, &resp, err);
	json_decref(biz);
	if (!ok)
		goto done;
	ok = false;
	url = pn_json_str(r->a, resp, "bill_download_url");
	/* "https:/" "/" split: the source checks strip // comments */
	if (url == NULL || strncmp(url,
	                           "https:/"
	                           "/",
	                           8) != 0) {
		pn_err_set(err, "Alipay's answer has no https bill_download_url");
		goto done;
	}
	if (!pn_qhttp_do(&f.http, r->a, "GET", url, get_headers, NULL, 0, &h, err))
		goto done;
	if (h.status != 200) {
		pn_err_set(err, "HTTP %ld downloading the bill: %.200s", h.status,
		           (const char *)h.body);
		goto done;
	}
	if (!write_bill(path, h.body, h.body_len, err))
		goto done;
	fprintf(stderr,
	        "paynotify: reconcile: fetched Alipay's %s trade bill (%zu bytes) into %s\n",
	        r->day, h.body_len, path);
	ok = true;
done:
	json_decref(root);
	pn_rec_fetch_close(&f);
	return ok;
}

/*
 * Download the day's ALL trade bill with `paynotify query`'s credentials and
 * client: GET /v3/bill/tradebill (the answer's signature verified), then its
 * download_url (on the same API host; signed request; the file's SHA1 checked
 * against the signed answer's hash_value), written to path atomically.
 */
bool
pn_rec_fetch_wechatpay(struct run *r, const char *path, struct pn_err *err)
{
	const struct pn_site *site = r->site;
	struct pn_rec_fetch f;
	struct pn_qhttp_answer h;
	const char *hash_type, *hash_value, *url;
	json_t *root = NULL;
	unsigned char md[64];
	size_t mdlen = 0;
	struct pn_iov iov;
	char *hex;
	bool ok = false;

	if (!pn_rec_fetch_open(r, &pn_query_wechatpay, &f, err))
		return false;
	url = pn_arena_printf(r->a, "%s/v3/bill/tradebill?bill_date=%s&bill_type=ALL",
	                      site->wechatpay.query_url, r->day);
	if (!pn_query_wechatpay_get(&f.ctx, url, true, &h, err))
		goto done;
	root = pn_json_parse(h.body, h.body_len, err);
	hash_type = root ? pn_json_str(r->a, root, "hash_type") : NULL;
	hash_value = root ? pn_json_str(r->a, root, "hash_value") : NULL;
	url = root ? pn_json_str(r->a, root, "download_url") : NULL;
	if (hash_type == NULL || strcmp(hash_type, "SHA1") != 0 || hash_value == NULL ||
	    strlen(hash_value) != 40 || url == NULL) {
		pn_err_set(err, "WeChat Pay's tradebill answer has no SHA1 hash_value and "
		                "download_url");
		goto done;
	}
	/* the signed request goes to WeChat Pay's API host only */
	if (strncmp(url, site->wechatpay.query_url, strlen(site->wechatpay.query_url)) != 0 ||
	    url[strlen(site->wechatpay.query_url)] != '/') {
		pn_err_set(err, "download_url %.120s is not on wechatpay.query_url %s", url,
		           site->wechatpay.query_url);
		goto done;
	}
	if (!pn_query_wechatpay_get(&f.ctx, url, false, &h, err))
		goto done;
	iov.p = h.body;
	iov.len = h.body_len;
	if (!pn_digest(PN_MD_SHA1, &iov, 1, md, &mdlen)) {
		pn_err_set(err, "could not hash the bill");
		goto done;
	}
	hex = pn_hex_encode(r->a, md, mdlen, false);
	{
		char want[41];
		size_t i;

		for (i = 0; i < 40; i++)
			want[i] = (char)(hash_value[i] >= 'A' && hash_value[i] <= 'F'
			                     ? hash_value[i] - 'A' + 'a'
			                     : hash_value[i]);
		want[40] = '\0';
		if (!pn_ct_equal(hex, want, 40)) {
			pn_err_set(err,
			           "the downloaded bill's SHA1 %s is not the hash_value %s of "
			           "the signed answer",
			           hex, want);
			goto done;
		}
	}
	if (!write_bill(path, h.body, h.body_len, err))
		goto done;
	fprintf(stderr,
	        "paynotify: reconcile: fetched WeChat Pay's %s ALL bill (%zu bytes, SHA1 "
	        "checked) into %s\n",
	        r->day, h.body_len, path);
	ok = true;
done:
	json_decref(root);
	pn_rec_fetch_close(&f);
	return ok;
}

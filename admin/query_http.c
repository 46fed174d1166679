/*
 * query_http.c: the HTTPS client of `paynotify query` (libcurl).
 *
 * Every request: https only (no other protocol, no redirects), peer and
 * host verified always (CURLOPT_SSL_VERIFYPEER/VERIFYHOST are set here and
 * nowhere turned off; [query] ca_file only replaces the CA bundle), a
 * connect and a total timeout from [query], the answer bounded to
 * PN_QUERY_MAX_ANSWER bytes.  One try: no retries.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "query.h"

struct sink {
	struct pn_arena *a;
	size_t	max;
	struct pn_buf body;
	bool	too_large;
	struct pn_request *hdrs;
};

static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;

	if (s->body.len + size * n > s->max) {
		s->too_large = true;
		return 0;	/* aborts the transfer */
	}
	pn_buf_put(&s->body, p, size * n);
	return size * n;
}

/* One header line of the answer ("Name: value\r\n"); a new status line
 * (100 Continue, then the real one) starts the list again. */
static size_t
on_header(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t	len = size * n, i;
	char   *line, *colon, *v;

	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		s->hdrs->nheaders = 0;
		return len;
	}
	line = pn_arena_strndup(s->a, p, len);
	colon = strchr(line, ':');
	if (colon == NULL || colon == line || s->hdrs->nheaders == PN_MAX_HEADERS)
		return len;
	*colon = '\0';
	v = pn_trim(colon + 1);
	for (i = 0; i < s->hdrs->nheaders; i++)
		if (pn_streq_nocase(s->hdrs->headers[i].name, line)) {
			((struct pn_header *)&s->hdrs->headers[i])->duplicate = true;
			return len;
		}
	s->hdrs->headers[s->hdrs->nheaders].name = line;
	s->hdrs->headers[s->hdrs->nheaders].value = v;
	s->hdrs->headers[s->hdrs->nheaders].duplicate = false;
	s->hdrs->nheaders++;
	return len;
}

bool
pn_qhttp_init(struct pn_qhttp *h, const struct pn_config *cfg, struct pn_err *err)
{
	memset(h, 0, sizeof(*h));
	h->cfg = cfg;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		pn_err_set(err, "could not initialise libcurl");
		return false;
	}
	h->curl = curl_easy_init();
	if (h->curl == NULL) {
		curl_global_cleanup();
		pn_err_set(err, "could not initialise libcurl");
		return false;
	}
	return true;
}

void
pn_qhttp_destroy(struct pn_qhttp *h)
{
	if (h->curl == NULL)
		return;
	curl_easy_cleanup(h->curl);
	curl_global_cleanup();
	h->curl = NULL;
}

static const char *
headers_json(struct pn_arena *a, const struct pn_request *r)
{
	json_t *o = json_object();
	char   *text, *out;
	size_t	i;

	for (i = 0; i < r->nheaders; i++)
		json_object_set_new(o, r->headers[i].name, json_string(r->headers[i].value));
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	out = pn_arena_strdup(a, text ? text : "{}");
	free(text);
	json_decref(o);
	return out;
}

bool
pn_qhttp_do(struct pn_qhttp *h, struct pn_arena *a, const char *method, const char *url,
	    const char *const *headers, const char *body, size_t body_len,
	    struct pn_qhttp_answer *out, struct pn_err *err)
{
	CURL   *c = h->curl;
	struct curl_slist *list = NULL;
	struct sink s;
	char	errbuf[CURL_ERROR_SIZE];
	CURLcode rc;
	size_t	i;
	int64_t	connect_ms = h->cfg->query_connect_timeout_ms, total_ms = h->cfg->query_timeout_ms;

	memset(out, 0, sizeof(*out));
	/* [query]'s bounds, cut to what is left before the caller's deadline
	 * (paynotify confirm: confirm.timeout_ms for the whole ask) */
	if (h->deadline_us > 0) {
		int64_t	left_ms = (h->deadline_us - pn_now_us()) / 1000;

		if (left_ms <= 0) {
			pn_err_set(err, "request to %s not sent: timed out (the ask's bound of "
				   "confirm.timeout_ms has passed)", url);
			return false;
		}
		if (total_ms > left_ms)
			total_ms = left_ms;
		if (connect_ms > left_ms)
			connect_ms = left_ms;
	}
	memset(&s, 0, sizeof(s));
	s.a = a;
	s.max = h->max_answer ? h->max_answer : PN_QUERY_MAX_ANSWER;
	s.hdrs = &out->headers;
	errbuf[0] = '\0';
	for (i = 0; headers && headers[i]; i++)
		list = curl_slist_append(list, headers[i]);
	list = curl_slist_append(list, "Expect:");
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500	/* 7.85: CURLOPT_PROTOCOLS is deprecated */
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
#else
	curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (h->cfg->query_ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->cfg->query_ca_file);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)total_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "paynotify-query/" PACKAGE_VERSION);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	} else
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	rc = curl_easy_perform(c);
	curl_slist_free_all(list);
	if (s.too_large) {
		pn_buf_free(&s.body);
		pn_err_set(err, "answer from %s is larger than %zu bytes", url, s.max);
		return false;
	}
	if (rc != CURLE_OK) {
		pn_buf_free(&s.body);
		pn_err_set(err, "request to %s failed: %s", url,
			   errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return false;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	out->body_len = s.body.len;
	out->body = pn_arena_alloc(a, s.body.len + 1);
	if (s.body.len)
		memcpy(out->body, s.body.data, s.body.len);
	pn_buf_free(&s.body);
	out->headers.method = method;
	out->headers.path_info = "";
	out->headers.body = out->body;
	out->headers.body_len = out->body_len;
	out->headers_json = headers_json(a, &out->headers);
	return true;
}


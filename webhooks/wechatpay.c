/*
 * wechatpay.c: WeChat Pay notifications, API v3 and API v2
 * (paynotify-wechatpay).  One program serves both generations for a site;
 * the request tells them apart (pn_wechatpay_is_v2): an XML body is v2,
 * anything else is v3.  docs/WECHATPAY.md lists what was checked against
 * the official SDKs and every decision taken here.
 *
 * API v3, as wechatpay-go (core/auth/validators, core/notify) and
 * wechatpay-java (NotificationParser) do it:
 *   - Wechatpay-Timestamp, -Nonce, -Signature and -Serial must be present
 *     and non-empty (trimmed); a Wechatpay-Signature-Type other than
 *     WECHATPAY2-SHA256-RSA2048 is refused; probe signatures
 *     (WECHATPAY/SIGNTEST/...) are refused and said to be probes;
 *   - the timestamp must be within wechatpay.tolerance_s of now;
 *   - SHA256withRSA over "timestamp\nnonce\nbody\n" on the raw body, with
 *     the WeChat Pay public key when the serial is wechatpay.public_key_id,
 *     else with the platform certificate of that serial (case-insensitive);
 *   - then resource is opened with AEAD_AES_256_GCM under an APIv3 key
 *     (nonce and associated_data used as their bytes, tag = last 16 bytes).
 * API v2: flat XML (common/xml.c); payment results carry an MD5 or
 * HMAC-SHA256 "sign" made with the APIv2 key (WXPayUtil.generateSignature);
 * refund results carry no sign but an AES-256-ECB "req_info" whose key is
 * the lower-case hex MD5 of the APIv2 key.
 * A genuine notification whose merchant identity is not the site's is
 * stored flagged merchant_mismatch and never applied.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "json.h"
#include "money.h"
#include "provider.h"
#include "wechatpay.h"

#define MAX_FEN INT64_C(1000000000000000)	/* 10^15, as pn_money_parse */
#define PN_WECHATPAY_MAX_KEY 255

static const char *const wechatpay_keep_headers[] = {
	"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Signature", "Wechatpay-Serial",
	"Wechatpay-Signature-Type", NULL};

/* ---- shared helpers ------------------------------------------------------ */

static bool
is_blank(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool
contains_nocase(const char *hay, const char *needle)
{
	size_t	n = strlen(needle), i, j;

	for (i = 0; hay && hay[i]; i++) {
		for (j = 0; j < n && hay[i + j]; j++) {
			char c = hay[i + j];

			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (c != needle[j])
				break;
		}
		if (j == n)
			return true;
	}
	return false;
}

bool
pn_wechatpay_is_v2(const struct pn_request *req)
{
	size_t	i = 0;

	if (req == NULL)
		return false;
	if (req->body != NULL) {
		/* a UTF-8 byte order mark, then blanks */
		if (req->body_len >= 3 && memcmp(req->body, "\xEF\xBB\xBF", 3) == 0)
			i = 3;
		while (i < req->body_len && is_blank(req->body[i]))
			i++;
		if (i < req->body_len)
			return req->body[i] == '<';
	}
	/* No body (unread, too large): the headers are all we have. */
	if (pn_request_header(req, "Wechatpay-Signature") != NULL
	    || pn_request_header(req, "Wechatpay-Serial") != NULL)
		return false;
	return contains_nocase(req->content_type, "xml");
}

/* Non-empty string or NULL. */
static const char *
nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

static bool
streq(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static void
flag_amount(struct pn_event *ev, const char *why)
{
	ev->flag = "amount_mismatch";
	ev->flag_detail = why;
}

/* Currency as sent, CNY when absent (WeChat Pay's default); false if unknown. */
static bool
currency_of(struct pn_arena *a, const char *sent, const char **out)
{
	char	cur[4];

	if (sent == NULL || *sent == '\0') {
		*out = "CNY";
		return true;
	}
	if (!pn_money_currency(sent, cur))
		return false;
	*out = pn_arena_strdup(a, cur);
	return true;
}

/* A fen amount from a decimal string (API v2 fields). */
static bool
fen_text(const char *s, int64_t *out)
{
	int64_t v;

	if (s == NULL || strlen(s) > 16 || !pn_parse_i64(s, &v) || v > MAX_FEN)
		return false;
	*out = v;
	return true;
}

/* A fen amount from a JSON integer (API v3 fields). */
static bool
fen_json(json_t *obj, const char *path, int64_t *out)
{
	int64_t v;

	if (!pn_json_int(obj, path, &v) || v < 0 || v > MAX_FEN)
		return false;
	*out = v;
	return true;
}

/*
 * Is the notification addressed to this site?  In service-provider mode
 * (sub_mchid present) the site is the sub-merchant: sub_mchid must be
 * wechatpay.mchid and the appid is sub_appid when present, else the
 * provider's.  appid is compared when present; need_appid makes its
 * absence a mismatch too (payments always carry one, refunds never do).
 */
struct merchant_ids {
	const char *mchid, *sub_mchid, *appid, *sub_appid;
	const char *mchid_name, *appid_name;	/* field names, for the detail */
};

static void
check_merchant(struct pn_arena *a, const struct pn_site *site, const struct merchant_ids *m,
	       bool need_appid, struct pn_event *ev)
{
	const char *mch = nonempty(m->sub_mchid) ? m->sub_mchid : nonempty(m->mchid);
	const char *app = nonempty(m->sub_appid) ? m->sub_appid : nonempty(m->appid);
	const char *mch_name = nonempty(m->sub_mchid) ? "sub_mchid" : m->mchid_name;

	if (!streq(mch, site->wechatpay.mchid)) {
		ev->flag = "merchant_mismatch";
		ev->flag_detail = pn_arena_printf(a, "%s \"%.32s\" is not site %s's \"%s\"",
						  mch_name, mch ? mch : "", site->name,
						  site->wechatpay.mchid);
	} else if ((app != NULL || need_appid) && !streq(app, site->wechatpay.appid)) {
		ev->flag = "merchant_mismatch";
		ev->flag_detail = pn_arena_printf(a, "%s \"%.40s\" is not site %s's \"%s\"",
						  nonempty(m->sub_appid) ? "sub_appid"
						  : m->appid_name, app ? app : "", site->name,
						  site->wechatpay.appid);
	}
}

/*
 * Keys are indexed (unique per site and provider): a key built from an
 * unusually long provider field is replaced by its SHA-256, so that it can
 * never make the insert fail and the provider retry forever.
 */
static const char *
bound_key(struct pn_arena *a, const char *key)
{
	struct pn_iov iov = {key, strlen(key)};
	unsigned char md[64];
	size_t	mdlen = 0;

	if (iov.len <= PN_WECHATPAY_MAX_KEY || !pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen))
		return key;
	return pn_arena_printf(a, "sha256:%s", pn_hex_encode(a, md, mdlen, false));
}

/* ---- API v3: headers, signature, decryption ----------------------------- */

struct v3_headers {
	const char *ts, *nonce, *sig, *serial;
	int64_t	t;
};

/* A required Wechatpay-* header, trimmed; NULL (and err) when unusable. */
static const char *
v3_header(const struct pn_request *req, struct pn_arena *a, const char *name, bool required,
	  struct pn_err *err)
{
	const struct pn_header *h = pn_request_header(req, name);
	char   *v;

	if (h != NULL && h->duplicate) {
		pn_err_set(err, "more than one %s header", name);
		return NULL;
	}
	v = h ? pn_trim(pn_arena_strdup(a, h->value)) : NULL;
	if (v == NULL || *v == '\0') {
		if (required)
			pn_err_set(err, "missing or empty %s header", name);
		return NULL;
	}
	return v;
}

static bool
v3_read_headers(const struct pn_request *req, struct pn_arena *a, struct v3_headers *h,
		struct pn_err *err)
{
	const struct pn_header *st = pn_request_header(req, "Wechatpay-Signature-Type");
	const char *type;

	memset(h, 0, sizeof(*h));
	if ((h->ts = v3_header(req, a, "Wechatpay-Timestamp", true, err)) == NULL
	    || (h->nonce = v3_header(req, a, "Wechatpay-Nonce", true, err)) == NULL
	    || (h->sig = v3_header(req, a, "Wechatpay-Signature", true, err)) == NULL
	    || (h->serial = v3_header(req, a, "Wechatpay-Serial", true, err)) == NULL)
		return false;
	/* Absent means the one type there is (wechatpay-go's default). */
	type = v3_header(req, a, "Wechatpay-Signature-Type", false, err);
	if ((st != NULL && st->duplicate)
	    || (type != NULL && strcmp(type, PN_WECHATPAY_SIGN_TYPE) != 0)) {
		pn_err_set(err, "unsupported Wechatpay-Signature-Type \"%.48s\" (only %s)",
			   type ? type : "", PN_WECHATPAY_SIGN_TYPE);
		return false;
	}
	/* Probes must fail; saying so keeps on-call from chasing a forgery. */
	if (strncmp(h->sig, PN_WECHATPAY_PROBE_PREFIX, strlen(PN_WECHATPAY_PROBE_PREFIX)) == 0) {
		pn_err_set(err, "WeChat Pay signature probe (Wechatpay-Signature starts with %s): "
			   "rejected as WeChat Pay expects", PN_WECHATPAY_PROBE_PREFIX);
		return false;
	}
	if (strlen(h->ts) > 18 || !pn_parse_i64(h->ts, &h->t)) {
		pn_err_set(err, "invalid Wechatpay-Timestamp \"%.24s\"", h->ts);
		return false;
	}
	return true;
}

/* |now - t| <= tolerance_s: "largest accepted distance" (cfg contract). */
static bool
v3_fresh(const struct pn_verify_ctx *ctx, const struct v3_headers *h, struct pn_err *err)
{
	int64_t d = ctx->now - h->t, tol = ctx->site->wechatpay.tolerance_s;

	if (d < 0)
		d = -d;
	if (d > tol) {
		pn_err_set(err, "Wechatpay-Timestamp %lld is %lld s away from now (tolerance %lld s)",
			   (long long)h->t, (long long)d, (long long)tol);
		return false;
	}
	return true;
}

/* SHA256withRSA over "ts\nnonce\nbody\n"; *key_id names the key that verified. */
static bool
v3_signature(const struct pn_verify_ctx *ctx, const struct v3_headers *h, const char **key_id,
	     struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	const struct pn_request *req = ctx->req;
	struct pn_iov iov[6] = {{h->ts, strlen(h->ts)}, {"\n", 1}, {h->nonce, strlen(h->nonce)},
				{"\n", 1}, {req->body, req->body_len}, {"\n", 1}};
	bool	pubkey_mode = streq(h->serial, s->wechatpay.public_key_id);
	unsigned char *sig;
	size_t	siglen, i, tried = 0;

	if (!pn_b64_decode(ctx->arena, h->sig, strlen(h->sig), &sig, &siglen)) {
		pn_err_set(err, "Wechatpay-Signature is not valid base64");
		return false;
	}
	for (i = 0; pubkey_mode && i < s->wechatpay.npublic_keys; i++, tried++)
		if (pn_rsa_verify(s->wechatpay.public_keys[i].pkey, PN_MD_SHA256, iov, 6, sig,
				  siglen)) {
			*key_id = s->wechatpay.public_key_id;
			return true;
		}
	for (i = 0; !pubkey_mode && i < s->wechatpay.ncerts; i++) {
		const struct pn_pubkey *c = &s->wechatpay.certs[i];

		if (!pn_streq_nocase(c->serial, h->serial))
			continue;
		tried++;
		if (pn_rsa_verify(c->pkey, PN_MD_SHA256, iov, 6, sig, siglen)) {
			*key_id = c->serial;
			return true;
		}
	}
	if (tried == 0)
		pn_err_set(err, "unknown Wechatpay-Serial \"%.64s\" for site %s: no platform "
			   "certificate has this serial and it is not wechatpay.public_key_id",
			   h->serial, s->name);
	else
		pn_err_set(err, "could not verify WeChat Pay signature for site %s with the key "
			   "of serial %.64s", s->name, h->serial);
	return false;
}

/* A string member of a JSON object with its length; false if absent/not a string. */
static bool
json_bytes(json_t *obj, const char *key, const char **p, size_t *len)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_string(v))
		return false;
	*p = json_string_value(v);
	*len = json_string_length(v);
	return true;
}

/* Open resource (AEAD_AES_256_GCM) with each APIv3 key in turn. */
static enum pn_verdict
v3_decrypt(const struct pn_verify_ctx *ctx, json_t *env, unsigned char **plain, size_t *plen,
	   const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	json_t *res = json_object_get(env, "resource");
	const char *alg = NULL, *ct = NULL, *nonce = NULL, *aad = "";
	size_t	alglen, ctlen, noncelen, aadlen = 0, rawlen, i;
	unsigned char *raw;

	if (!json_is_object(res)) {
		pn_err_set(err, "WeChat Pay notification has no resource object");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "algorithm", &alg, &alglen) || strcmp(alg, "AEAD_AES_256_GCM") != 0) {
		pn_err_set(err, "unsupported resource.algorithm \"%.32s\" (only AEAD_AES_256_GCM)",
			   alg ? alg : "");
		return PN_MALFORMED;
	}
	if (json_object_get(res, "associated_data") != NULL
	    && !json_bytes(res, "associated_data", &aad, &aadlen)) {
		pn_err_set(err, "resource.associated_data is not a string");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "nonce", &nonce, &noncelen) || noncelen != 12) {
		pn_err_set(err, "resource.nonce must be a string of 12 characters");
		return PN_MALFORMED;
	}
	if (!json_bytes(res, "ciphertext", &ct, &ctlen)
	    || !pn_b64_decode(ctx->arena, ct, ctlen, &raw, &rawlen) || rawlen <= 16) {
		pn_err_set(err, "resource.ciphertext is not base64 of ciphertext and a 16-byte tag");
		return PN_MALFORMED;
	}
	for (i = 0; i < s->wechatpay.napiv3_keys; i++) {
		const struct pn_secret *k = &s->wechatpay.apiv3_keys[i];

		if (k->len == 32
		    && pn_aes256gcm_decrypt(ctx->arena, k->data, nonce, noncelen, aad, aadlen, raw,
					    rawlen, plain, plen)) {
			*key_id = k->id;
			return PN_VERIFIED;
		}
	}
	pn_err_set(err, "could not decrypt WeChat Pay resource for site %s: the AES-256-GCM tag "
		   "does not match under any APIv3 key (%zu tried)", s->name,
		   s->wechatpay.napiv3_keys);
	return PN_UNVERIFIED;
}

/* ---- API v3: normalising the decrypted resource ------------------------- */

static const char *
jstr(struct pn_arena *a, json_t *obj, const char *path)
{
	return nonempty(pn_json_str(a, obj, path));
}

static enum pn_kind
trade_state_kind(const char *state)
{
	if (streq(state, "NOTPAY") || streq(state, "USERPAYING"))
		return PN_KIND_PENDING;
	if (streq(state, "CLOSED") || streq(state, "REVOKED"))
		return PN_KIND_CLOSED;
	if (streq(state, "PAYERROR"))
		return PN_KIND_FAILED;
	return PN_KIND_IGNORED;	/* REFUND (refunds have their own events), unknown */
}

static void
v3_amounts(struct pn_arena *a, json_t *p, struct pn_event *ev)
{
	if (!currency_of(a, pn_json_str(a, p, "amount.currency"), &ev->currency)) {
		ev->currency = NULL;
		flag_amount(ev, "amount.currency is not an ISO 4217 code");
	}
	if (!fen_json(p, "amount.total", &ev->amount_minor)) {
		ev->amount_minor = -1;
		if (ev->kind == PN_KIND_PAID && ev->flag == NULL)
			flag_amount(ev, "no usable integer amount.total on a payment");
	}
}

static void
v3_transaction(struct pn_arena *a, json_t *p, const char *id, struct pn_event *ev)
{
	const char *state = jstr(a, p, "trade_state");
	const char *txn = jstr(a, p, "transaction_id"), *otn = jstr(a, p, "out_trade_no");
	const char *base = txn ? txn
	    : otn ? pn_arena_printf(a, "otn:%s", otn) : pn_arena_printf(a, "event:%s", id);

	ev->order_id = otn;
	ev->psp_txn_id = txn;
	ev->psp_time = jstr(a, p, "success_time");
	if (streq(ev->event_type, "TRANSACTION.SUCCESS") && streq(state, "SUCCESS"))
		ev->kind = PN_KIND_PAID;
	else
		ev->kind = trade_state_kind(state);
	/* A non-SUCCESS state keys separately, so a later SUCCESS is not swallowed. */
	ev->dedup_key = state == NULL || streq(state, "SUCCESS")
	    ? pn_arena_printf(a, "%s:%s", base, ev->event_type)
	    : pn_arena_printf(a, "%s:%s:%s", base, ev->event_type, state);
	v3_amounts(a, p, ev);
}

static void
v3_refund(struct pn_arena *a, json_t *p, const char *id, struct pn_event *ev)
{
	const char *rid = jstr(a, p, "refund_id"), *orn = jstr(a, p, "out_refund_no");
	const char *base = rid ? rid
	    : orn ? pn_arena_printf(a, "out:%s", orn) : pn_arena_printf(a, "event:%s", id);

	ev->order_id = jstr(a, p, "out_trade_no");
	ev->psp_txn_id = jstr(a, p, "transaction_id");
	ev->psp_time = jstr(a, p, "success_time");
	ev->dedup_key = pn_arena_printf(a, "refund:%s:%s", base, ev->event_type);
	/* ABNORMAL and CLOSED are recorded: a human looks at them. */
	if (!streq(ev->event_type, "REFUND.SUCCESS") || !streq(jstr(a, p, "refund_status"),
							       "SUCCESS"))
		return;
	ev->kind = PN_KIND_REFUND;
	ev->refund_cumulative = false;	/* amount.refund is this refund alone */
	if (!currency_of(a, pn_json_str(a, p, "amount.currency"), &ev->currency)) {
		ev->currency = NULL;
		flag_amount(ev, "amount.currency is not an ISO 4217 code");
	}
	if (!fen_json(p, "amount.refund", &ev->refund_minor)) {
		ev->refund_minor = -1;
		flag_amount(ev, "no usable integer amount.refund on a refund");
	}
	if (!fen_json(p, "amount.total", &ev->amount_minor))
		ev->amount_minor = -1;	/* the refund amount alone is enough */
}

static void
v3_normalise(struct pn_arena *a, json_t *env, json_t *p, const struct v3_headers *h,
	     const struct pn_site *site, struct pn_event *ev)
{
	const char *id = jstr(a, env, "id");
	const char *type = jstr(a, env, "event_type");
	bool	txn = type && strncmp(type, "TRANSACTION.", 12) == 0;
	bool	refund = type && strncmp(type, "REFUND.", 7) == 0;
	struct merchant_ids m = {
		jstr(a, p, "mchid"), jstr(a, p, "sub_mchid"), jstr(a, p, "appid"),
		jstr(a, p, "sub_appid"), "mchid", "appid"};

	ev->psp_event_id = id;
	ev->event_type = type;
	ev->psp_time = jstr(a, env, "create_time");
	if (id == NULL)	/* keys below need something stable; the nonce is per delivery */
		id = pn_arena_printf(a, "nonce:%s:%s", h->ts, h->nonce);
	if (m.mchid == NULL) {	/* service-provider mode */
		m.mchid = jstr(a, p, "sp_mchid");
		m.mchid_name = "sp_mchid";
	}
	if (m.appid == NULL) {
		m.appid = jstr(a, p, "sp_appid");
		m.appid_name = "sp_appid";
	}
	if (txn)
		v3_transaction(a, p, id, ev);
	else if (refund)
		v3_refund(a, p, id, ev);
	else {
		ev->kind = PN_KIND_IGNORED;
		ev->dedup_key = pn_arena_printf(a, "event:%s", id);
	}
	if (ev->psp_time == NULL)
		ev->psp_time = jstr(a, env, "create_time");
	/* Other products' events name no merchant reliably: checked when they do. */
	if (txn || refund || m.mchid != NULL || m.sub_mchid != NULL)
		check_merchant(a, site, &m, txn, ev);
}

static enum pn_verdict
v3_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	struct v3_headers h;
	json_t *env = NULL, *plain_json = NULL;
	const char *sig_key = NULL, *aes_key = NULL;
	unsigned char *plain = NULL;
	size_t	plen = 0;
	enum pn_verdict v;

	if (ctx->site->wechatpay.napiv3_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv3_key_file: API v3 notifications "
			   "cannot be verified", ctx->site->name);
		return PN_UNVERIFIED;
	}
	if (!v3_read_headers(req, ctx->arena, &h, err)
	    || (ctx->check_freshness && !v3_fresh(ctx, &h, err))
	    || !v3_signature(ctx, &h, &sig_key, err))
		return PN_UNVERIFIED;
	/* Only now is the body genuine: parse, then decrypt. */
	env = pn_json_parse(req->body, req->body_len, err);
	if (env == NULL || !json_is_object(env)) {
		pn_err_prefix(err, "WeChat Pay notification is not a JSON object");
		v = PN_MALFORMED;
		goto done;
	}
	v = v3_decrypt(ctx, env, &plain, &plen, &aes_key, err);
	if (v != PN_VERIFIED)
		goto done;
	plain_json = pn_json_parse(plain, plen, err);
	if (plain_json == NULL || !json_is_object(plain_json)) {
		pn_err_prefix(err, "decrypted WeChat Pay resource is not a JSON object");
		v = PN_MALFORMED;
		goto done;
	}
	ev->key_id = pn_arena_printf(ctx->arena, "%s/%s", sig_key, aes_key);
	v3_normalise(ctx->arena, env, plain_json, &h, ctx->site, ev);
	ev->dedup_key = bound_key(ctx->arena, ev->dedup_key);
done:
	json_decref(plain_json);
	json_decref(env);
	return v;
}

/*
 * Shared with `paynotify query` (admin/query_wechatpay.c): the answer to an
 * API v3 request carries the same Wechatpay-* headers and is verified by
 * exactly the code above; a transaction it returns is normalised as the
 * decrypted resource of a TRANSACTION.* notification, merchant check
 * included.
 */
bool
pn_wechatpay_v3_verify_sig(const struct pn_verify_ctx *ctx, const char **key_id,
			   struct pn_err *err)
{
	struct v3_headers h;

	return v3_read_headers(ctx->req, ctx->arena, &h, err)
	    && (!ctx->check_freshness || v3_fresh(ctx, &h, err))
	    && v3_signature(ctx, &h, key_id, err);
}

void
pn_wechatpay_v3_transaction(struct pn_arena *a, const struct pn_site *site, json_t *p,
			    const char *event_type, struct pn_event *ev)
{
	struct merchant_ids m = {
		jstr(a, p, "mchid"), jstr(a, p, "sub_mchid"), jstr(a, p, "appid"),
		jstr(a, p, "sub_appid"), "mchid", "appid"};

	if (m.mchid == NULL) {	/* service-provider mode */
		m.mchid = jstr(a, p, "sp_mchid");
		m.mchid_name = "sp_mchid";
	}
	if (m.appid == NULL) {
		m.appid = jstr(a, p, "sp_appid");
		m.appid_name = "sp_appid";
	}
	ev->event_type = event_type;
	v3_transaction(a, p, "query", ev);
	check_merchant(a, site, &m, true, ev);
	ev->dedup_key = bound_key(a, ev->dedup_key);
}

/* ---- API v2 -------------------------------------------------------------- */

/* Java's String.trim(): every byte <= 0x20 at either end. */
static void
trim_java(const char *s, size_t len, const char **start, size_t *out)
{
	while (len > 0 && (unsigned char)*s <= 0x20)
		s++, len--;
	while (len > 0 && (unsigned char)s[len - 1] <= 0x20)
		len--;
	*start = s;
	*out = len;
}

/* A v2 value as it was signed (trimmed, see v2_sign_string), or NULL if empty. */
static const char *
v2_get(struct pn_arena *a, const struct pn_xml_flat *x, const char *name)
{
	const char *v = pn_xml_get(x, name), *s;
	size_t	len;

	if (v == NULL)
		return NULL;
	trim_java(v, strlen(v), &s, &len);
	return len ? pn_arena_strndup(a, s, len) : NULL;
}

static int
field_cmp(const void *a, const void *b)
{
	const struct pn_xml_field *fa = *(const struct pn_xml_field *const *)a;
	const struct pn_xml_field *fb = *(const struct pn_xml_field *const *)b;

	return strcmp(fa->name, fb->name);
}

/* "k=v&...&key=APIv2KEY" as WXPayUtil.generateSignature builds it. */
static struct pn_buf
v2_sign_string(struct pn_arena *a, const struct pn_xml_flat *x, const struct pn_secret *key)
{
	const struct pn_xml_field **sorted = pn_arena_alloc(a, (x->n + 1) * sizeof(*sorted));
	struct pn_buf b = PN_BUF_INIT;
	size_t	i, n = 0;

	for (i = 0; i < x->n; i++)
		if (strcmp(x->fields[i].name, "sign") != 0)
			sorted[n++] = &x->fields[i];
	qsort(sorted, n, sizeof(*sorted), field_cmp);
	for (i = 0; i < n; i++) {
		const char *v;
		size_t	vlen;

		trim_java(sorted[i]->value, sorted[i]->value_len, &v, &vlen);
		if (vlen == 0)
			continue;
		pn_buf_puts(&b, sorted[i]->name);
		pn_buf_putc(&b, '=');
		pn_buf_put(&b, v, vlen);
		pn_buf_putc(&b, '&');
	}
	pn_buf_puts(&b, "key=");
	pn_buf_put(&b, key->data, key->len);
	return b;
}

char *
pn_wechatpay_v2_sign(struct pn_arena *a, const struct pn_xml_flat *x, enum pn_wxv2_sign alg,
		     const struct pn_secret *key)
{
	struct pn_buf b = v2_sign_string(a, x, key);
	struct pn_iov iov = {b.data, b.len};
	unsigned char mac[64];
	size_t	maclen = 0;
	bool	ok;

	/* HMAC-SHA256 is keyed with the APIv2 key AND still ends in "&key=..." */
	if (alg == PN_WXV2_HMAC_SHA256)
		ok = pn_hmac(PN_MD_SHA256, key->data, key->len, &iov, 1, mac, &maclen);
	else
		ok = pn_digest(PN_MD_MD5, &iov, 1, mac, &maclen);
	OPENSSL_cleanse(b.data, b.len);
	pn_buf_free(&b);
	return ok ? pn_hex_encode(a, mac, maclen, true) : NULL;
}

bool
pn_wechatpay_v2_refund_key(const struct pn_secret *key, unsigned char out[32])
{
	struct pn_iov iov = {key->data, key->len};
	static const char hex[] = "0123456789abcdef";
	unsigned char md[64];
	size_t	mdlen = 0, i;

	if (!pn_digest(PN_MD_MD5, &iov, 1, md, &mdlen) || mdlen != 16)
		return false;
	for (i = 0; i < 16; i++) {
		out[2 * i] = (unsigned char)hex[md[i] >> 4];
		out[2 * i + 1] = (unsigned char)hex[md[i] & 15];
	}
	OPENSSL_cleanse(md, sizeof(md));
	return true;
}

/* The algorithm named by sign_type (absent or blank = MD5, as the SDK). */
static bool
v2_algorithm(const struct pn_xml_flat *x, enum pn_wxv2_sign *alg)
{
	const char *st = pn_xml_get(x, "sign_type"), *v = "";
	size_t	len = 0;

	if (st != NULL)
		trim_java(st, strlen(st), &v, &len);
	if (len == 0 || (len == 3 && memcmp(v, "MD5", 3) == 0))
		*alg = PN_WXV2_MD5;
	else if (len == 11 && memcmp(v, "HMAC-SHA256", 11) == 0)
		*alg = PN_WXV2_HMAC_SHA256;
	else
		return false;
	return true;
}

static bool
v2_check_sign(const struct pn_verify_ctx *ctx, const struct pn_xml_flat *x,
	      const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	const char *sign = pn_xml_get(x, "sign");
	enum pn_wxv2_sign alg;
	const char *alg_name;
	char   *upper;
	size_t	i, len;

	if (sign == NULL || *sign == '\0') {
		pn_err_set(err, "WeChat Pay v2 notification has no sign");
		return false;
	}
	if (!v2_algorithm(x, &alg)) {
		pn_err_set(err, "unsupported sign_type \"%.32s\"", pn_xml_get(x, "sign_type"));
		return false;
	}
	alg_name = alg == PN_WXV2_MD5 ? "MD5" : "HMAC-SHA256";
	if ((s->wechatpay.v2_sign_types & (unsigned)alg) == 0) {
		pn_err_set(err, "sign_type %s is not accepted for site %s (wechatpay.v2_sign_type)",
			   alg_name, s->name);
		return false;
	}
	len = strlen(sign);
	upper = pn_arena_strdup(ctx->arena, sign);
	for (i = 0; i < len; i++)
		if (upper[i] >= 'a' && upper[i] <= 'f')
			upper[i] = (char)(upper[i] - 'a' + 'A');
	for (i = 0; i < s->wechatpay.napiv2_keys; i++) {
		const char *want = pn_wechatpay_v2_sign(ctx->arena, x, alg,
							&s->wechatpay.apiv2_keys[i]);

		if (want != NULL && strlen(want) == len && pn_ct_equal(want, upper, len)) {
			*key_id = s->wechatpay.apiv2_keys[i].id;
			return true;
		}
	}
	pn_err_set(err, "could not verify WeChat Pay v2 %s sign for site %s: no APIv2 key matched "
		   "(%zu tried)", alg_name, s->name, s->wechatpay.napiv2_keys);
	return false;
}

static void
v2_payment(struct pn_arena *a, const struct pn_xml_flat *x, struct pn_event *ev)
{
	const char *result = v2_get(a, x, "result_code");
	const char *txn = v2_get(a, x, "transaction_id");
	const char *otn = v2_get(a, x, "out_trade_no");
	const char *base = txn ? txn : otn ? pn_arena_printf(a, "otn:%s", otn) : "-";

	ev->order_id = otn;
	ev->psp_txn_id = txn;
	ev->psp_time = v2_get(a, x, "time_end");
	ev->event_type = pn_arena_printf(a, "v2.pay.%s", result ? result : "-");
	ev->dedup_key = pn_arena_printf(a, "%s:%s", base, result ? result : "-");
	ev->kind = streq(result, "SUCCESS") ? PN_KIND_PAID
	    : streq(result, "FAIL") ? PN_KIND_FAILED : PN_KIND_IGNORED;
	if (!currency_of(a, v2_get(a, x, "fee_type"), &ev->currency)) {
		ev->currency = NULL;
		flag_amount(ev, "fee_type is not an ISO 4217 code");
	}
	if (!fen_text(v2_get(a, x, "total_fee"), &ev->amount_minor)) {
		ev->amount_minor = -1;
		if (ev->kind == PN_KIND_PAID && ev->flag == NULL)
			flag_amount(ev, "no usable total_fee on a payment");
	}
}

/* Decrypt req_info with each APIv2 key; the inner <root> XML must parse. */
static bool
v2_open_refund(const struct pn_verify_ctx *ctx, const char *req_info, struct pn_xml_flat *in,
	       const char **key_id, struct pn_err *err)
{
	const struct pn_site *s = ctx->site;
	unsigned char *raw, *plain, aes[32];
	size_t	rawlen, plen, i;
	const char *opened = NULL;
	struct pn_err inner;

	if (!pn_b64_decode(ctx->arena, req_info, strlen(req_info), &raw, &rawlen)) {
		pn_err_set(err, "req_info is not valid base64");
		return false;
	}
	for (i = 0; i < s->wechatpay.napiv2_keys; i++) {
		bool dec = pn_wechatpay_v2_refund_key(&s->wechatpay.apiv2_keys[i], aes)
		    && pn_aes256ecb_decrypt(ctx->arena, aes, raw, rawlen, &plain, &plen);

		OPENSSL_cleanse(aes, sizeof(aes));
		if (!dec)
			continue;
		/* No MAC: well-formed <root> XML is the rest of the proof. */
		if (pn_xml_parse_flat(ctx->arena, plain, plen, "root", in, &inner)) {
			*key_id = s->wechatpay.apiv2_keys[i].id;
			return true;
		}
		opened = s->wechatpay.apiv2_keys[i].id;
	}
	if (opened != NULL)
		pn_err_set(err, "WeChat Pay v2 req_info for site %s decrypts with APIv2 key %s but "
			   "is not acceptable XML: %s", s->name, opened, inner.msg);
	else
		pn_err_set(err, "could not decrypt WeChat Pay v2 refund req_info for site %s with "
			   "any APIv2 key (%zu tried)", s->name, s->wechatpay.napiv2_keys);
	return false;
}

static void
v2_refund(struct pn_arena *a, const struct pn_xml_flat *in, struct pn_event *ev)
{
	const char *status = v2_get(a, in, "refund_status");
	const char *rid = v2_get(a, in, "refund_id");
	const char *orn = v2_get(a, in, "out_refund_no");
	const char *base = rid ? rid : orn ? pn_arena_printf(a, "out:%s", orn) : "-";

	ev->order_id = v2_get(a, in, "out_trade_no");
	ev->psp_txn_id = v2_get(a, in, "transaction_id");
	ev->psp_time = v2_get(a, in, "success_time");
	ev->event_type = pn_arena_printf(a, "v2.refund.%s", status ? status : "-");
	ev->dedup_key = pn_arena_printf(a, "refund:%s:%s", base, status ? status : "-");
	ev->currency = "CNY";
	if (!fen_text(v2_get(a, in, "total_fee"), &ev->amount_minor))
		ev->amount_minor = -1;
	/* CHANGE (abnormal) and REFUNDCLOSE are recorded for a human. */
	if (!streq(status, "SUCCESS"))
		return;
	ev->kind = PN_KIND_REFUND;
	ev->refund_cumulative = false;	/* refund_fee is this refund alone */
	if (!fen_text(v2_get(a, in, "refund_fee"), &ev->refund_minor)) {
		ev->refund_minor = -1;
		flag_amount(ev, "no usable refund_fee on a refund");
	}
}

/*
 * Shared with `paynotify query` (admin/query_wechatpay.c): an API v2
 * orderquery answer with trade_state SUCCESS is the payment result of the
 * notification, normalised by the same code: the same dedup key
 * ("<transaction_id>:SUCCESS"), amounts and merchant check.
 */
void
pn_wechatpay_v2_payment(struct pn_arena *a, const struct pn_site *site,
			const struct pn_xml_flat *x, struct pn_event *ev)
{
	struct merchant_ids m;

	v2_payment(a, x, ev);
	m.mchid = v2_get(a, x, "mch_id");
	m.sub_mchid = v2_get(a, x, "sub_mch_id");
	m.appid = v2_get(a, x, "appid");
	m.sub_appid = v2_get(a, x, "sub_appid");
	m.mchid_name = "mch_id";
	m.appid_name = "appid";
	check_merchant(a, site, &m, true, ev);
	ev->dedup_key = bound_key(a, ev->dedup_key);
}

static enum pn_verdict
v2_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_request *req = ctx->req;
	struct pn_xml_flat x, in;
	const char *rc, *req_info, *key_id = NULL;
	struct merchant_ids m;

	if (ctx->site->wechatpay.napiv2_keys == 0) {
		pn_err_set(err, "site %s has no wechatpay.apiv2_key_file: API v2 notifications "
			   "cannot be verified", ctx->site->name);
		return PN_UNVERIFIED;
	}
	if (!pn_xml_parse_flat(ctx->arena, req->body, req->body_len, "xml", &x, err)) {
		pn_err_prefix(err, "WeChat Pay v2 notification is not acceptable XML");
		return PN_MALFORMED;
	}
	/* return_code is a transport flag; without SUCCESS nothing is signed. */
	rc = v2_get(ctx->arena, &x, "return_code");
	if (!streq(rc, "SUCCESS")) {
		pn_err_set(err, "WeChat Pay v2 return_code is \"%.16s\", not SUCCESS: nothing to "
			   "verify or record", rc ? rc : "");
		return PN_MALFORMED;
	}
	req_info = v2_get(ctx->arena, &x, "req_info");
	if (req_info != NULL) {
		if (!v2_open_refund(ctx, req_info, &in, &key_id, err))
			return PN_UNVERIFIED;
		v2_refund(ctx->arena, &in, ev);
		/*
		 * Nothing signed ties a v2 refund result to this site: the
		 * outer mch_id/sub_mch_id/appid are not covered by anything
		 * (a sender may edit them freely), and req_info is AES-256-ECB
		 * without integrity (blocks of other genuine refunds under the
		 * same APIv2 key can be spliced in).  So the outer ids decide
		 * nothing, not even a merchant_mismatch flag; the refund may
		 * change an order only when it matches a payment this site
		 * verified (same transaction_id, not above what was paid), which
		 * the store checks (weak_identity, else txn_mismatch).
		 */
		ev->weak_identity = true;
		ev->key_id = key_id;
		ev->dedup_key = bound_key(ctx->arena, ev->dedup_key);
		return PN_VERIFIED;
	}
	if (!v2_check_sign(ctx, &x, &key_id, err))
		return PN_UNVERIFIED;
	v2_payment(ctx->arena, &x, ev);
	ev->key_id = key_id;
	m.mchid = v2_get(ctx->arena, &x, "mch_id");
	m.sub_mchid = v2_get(ctx->arena, &x, "sub_mch_id");
	m.appid = v2_get(ctx->arena, &x, "appid");
	m.sub_appid = v2_get(ctx->arena, &x, "sub_appid");
	m.mchid_name = "mch_id";
	m.appid_name = "appid";
	check_merchant(ctx->arena, ctx->site, &m, true, ev);
	ev->dedup_key = bound_key(ctx->arena, ev->dedup_key);
	return PN_VERIFIED;
}

/* ---- the adapter ----------------------------------------------------------- */

static enum pn_verdict
wechatpay_verify(const struct pn_verify_ctx *ctx, struct pn_event *ev, struct pn_err *err)
{
	return pn_wechatpay_is_v2(ctx->req) ? v2_verify(ctx, ev, err) : v3_verify(ctx, ev, err);
}

static bool
wechatpay_configured(const struct pn_site *site)
{
	return site->wechatpay.configured;
}

/* A reason fit for CDATA: printable ASCII, no ']', bounded. */
static void
cdata_reason(const char *reason, char *out, size_t sz)
{
	size_t o = 0;

	for (; reason && *reason && o + 1 < sz; reason++)
		if (*reason >= 0x20 && *reason < 0x7f && *reason != ']')
			out[o++] = *reason;
	out[o] = '\0';
}

/* v2 reads return_code in the body; v3 reads only the status (2xx = done). */
static void
wechatpay_answer(const struct pn_request *req, struct pn_response *res, int status,
		 const char *reason)
{
	bool	ok = status >= 200 && status < 300;
	char	clean[128], *text;
	json_t *obj;

	if (pn_wechatpay_is_v2(req)) {
		cdata_reason(ok ? "OK" : reason ? reason : "FAIL", clean, sizeof(clean));
		pn_response_set(res, ok ? 200 : status, "text/xml", NULL);
		pn_buf_printf(&res->body, "<xml><return_code><![CDATA[%s]]></return_code>"
			      "<return_msg><![CDATA[%s]]></return_msg></xml>",
			      ok ? "SUCCESS" : "FAIL", clean);
		return;
	}
	if (ok) {
		pn_response_set(res, 204, NULL, NULL);
		return;
	}
	obj = json_pack("{s:s,s:s}", "code", "FAIL", "message", reason ? reason : "failed");
	text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	pn_response_set(res, status, "application/json",
			text ? text : "{\"code\":\"FAIL\",\"message\":\"failed\"}");
	free(text);
	json_decref(obj);
}

const struct pn_provider pn_provider_wechatpay = {
	.name = "wechatpay",
	.program = "paynotify-wechatpay",
	.unverified_status = 400,
	.keep_headers = wechatpay_keep_headers,
	.configured = wechatpay_configured,
	.verify = wechatpay_verify,
	.answer = wechatpay_answer,
};

/*
 * sign_alipay.c: Alipay test notifications (`paynotify sign alipay`): an
 * asynchronous trade notification as Alipay sends it, signed with the
 * site's alipay.test_private_key_file over pn_alipay_sign_content() (rule
 * V1), so the receiver verifies it exactly as a genuine one.
 */
#include "config.h"

#include <string.h>
#include <time.h>

#include "alipay.h"
#include "buf.h"
#include "crypto.h"
#include "crypto_sign.h"
#include "form.h"
#include "money.h"
#include "sign.h"

static void
add_field(struct pn_form *f, struct pn_arena *a, const char *key, const char *value)
{
	struct pn_form_field *fl = &f->fields[f->n++];

	fl->key = key;
	fl->value = pn_arena_strdup(a, value);
	fl->value_len = strlen(value);
}

/* Sign f (sign added last) and write it as the form body. */
static bool
finish(const struct pn_sign_req *r, struct pn_form *f, struct pn_signed *out, struct pn_err *err)
{
	const struct pn_site *site = r->site;
	struct pn_arena *a = r->arena;
	struct pn_buf body = PN_BUF_INIT;
	unsigned char *sig;
	size_t	siglen, len, i;
	char   *content = pn_alipay_sign_content(a, f, false, false, &len);

	if (!pn_rsa_sign(a, site->alipay.test_key,
			 site->alipay.sign_type == PN_ALIPAY_RSA ? PN_MD_SHA1 : PN_MD_SHA256, content,
			 len, &sig, &siglen)) {
		pn_err_set(err, "could not sign with alipay.test_private_key_file");
		return false;
	}
	add_field(f, a, "sign", pn_b64_encode(a, sig, siglen));
	for (i = 0; i < f->n; i++)
		pn_buf_printf(&body, "%s%s=%s", i ? "&" : "", f->fields[i].key,
			      pn_form_encode(a, f->fields[i].value));
	out->content_type = "application/x-www-form-urlencoded; charset=utf-8";
	out->nheaders = 0;
	out->body = pn_arena_memdup(a, body.data, body.len);
	out->body_len = body.len;
	pn_buf_free(&body);
	return true;
}

/* The message service's alipay.merchant.tradecomplain.changed (webhooks/alipay.c). */
static bool
sign_complaint(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	struct pn_arena *a = r->arena;
	struct pn_form f;
	json_t *biz = json_pack("{s:s}", "complain_event_id", r->case_id ? r->case_id
				: pn_arena_printf(a, "20200923001020%s", r->id));
	const char *bizs = pn_sign_json(a, biz);

	if (bizs == NULL) {
		pn_err_set(err, "could not build biz_content");
		return false;
	}
	f.n = 0;
	f.fields = pn_arena_alloc(a, 12 * sizeof(*f.fields));
	add_field(&f, a, "charset", "utf-8");
	add_field(&f, a, "biz_content", bizs);
	add_field(&f, a, "msg_method", "alipay.merchant.tradecomplain.changed");
	add_field(&f, a, "utc_timestamp", pn_arena_printf(a, "%lld000", (long long)r->now));
	add_field(&f, a, "version", "1.1");
	add_field(&f, a, "sign_type", r->site->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2");
	add_field(&f, a, "notify_id", pn_arena_printf(a, "test%s", r->id));
	add_field(&f, a, "app_id", r->site->alipay.app_id);
	return finish(r, &f, out, err);
}

bool
pn_sign_alipay(const struct pn_sign_req *r, struct pn_signed *out, struct pn_err *err)
{
	const struct pn_site *site = r->site;
	struct pn_arena *a = r->arena;
	struct pn_form f;
	char	amount[32], when[32];
	const char *status;
	time_t	bj = (time_t)r->now + 8 * 3600;	/* Alipay writes Beijing time */
	struct tm tm;

	if (site->alipay.test_key == NULL) {
		pn_err_set(err, "site %s has no alipay.test_private_key_file: refusing to sign",
			   site->name);
		return false;
	}
	if (strcmp(r->currency, "CNY") != 0) {
		pn_err_set(err, "Alipay notifications are in CNY, not %s", r->currency);
		return false;
	}
	switch (r->kind) {
	case PN_KIND_COMPLAINT:
		return sign_complaint(r, out, err);
	case PN_KIND_PAID:
	case PN_KIND_REFUND:
		status = "TRADE_SUCCESS";
		break;
	case PN_KIND_CLOSED:
		status = "TRADE_CLOSED";
		break;
	default:
		pn_err_set(err, "Alipay sends no \"%s\" notification", pn_kind_name(r->kind));
		return false;
	}
	gmtime_r(&bj, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	pn_money_format(r->amount_minor, 2, amount, sizeof(amount));
	f.n = 0;
	f.fields = pn_arena_alloc(a, 24 * sizeof(*f.fields));
	add_field(&f, a, "app_id", site->alipay.app_id);
	add_field(&f, a, "auth_app_id", site->alipay.app_id);
	add_field(&f, a, "seller_id", site->alipay.seller_id);
	add_field(&f, a, "charset", "utf-8");
	add_field(&f, a, "version", "1.0");
	add_field(&f, a, "notify_type", "trade_status_sync");
	add_field(&f, a, "notify_id", pn_arena_printf(a, "test%s", r->id));
	add_field(&f, a, "notify_time", when);
	add_field(&f, a, "out_trade_no", r->order_id);
	add_field(&f, a, "trade_no", pn_arena_printf(a, "test-%s", r->order_id));
	add_field(&f, a, "trade_status", status);
	add_field(&f, a, "subject", "paynotify test");
	add_field(&f, a, "gmt_payment", when);
	add_field(&f, a, "sign_type", site->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2");
	if (r->marker != NULL)	/* as the shop sent it: URL-encoded once (a marker: as is) */
		add_field(&f, a, "passback_params", pn_form_encode(a, r->marker));
	if (r->kind == PN_KIND_REFUND) {
		/* refund_fee is the total refunded: this test refunds amount once */
		add_field(&f, a, "out_biz_no", pn_arena_printf(a, "refund-%s", r->id));
		add_field(&f, a, "refund_fee", amount);
		add_field(&f, a, "gmt_refund", when);
	} else
		add_field(&f, a, "total_amount", amount);
	return finish(r, &f, out, err);
}


/*
 * adapter.c: helpers every provider adapter shares (adapter.h).
 */
#include "config.h"

#include <stdlib.h>

#include "adapter.h"

void
pn_flag_amount(struct pn_event *ev, const char *why)
{
	ev->flag = "amount_mismatch";
	ev->flag_detail = why;
}

void
pn_flag_merchant(struct pn_arena *a, struct pn_event *ev, const char *field, int width,
		 const char *got, const struct pn_site *site, const char *want)
{
	ev->flag = "merchant_mismatch";
	ev->flag_detail = pn_arena_printf(a, "%s \"%.*s\" is not site %s's \"%s\"", field, width,
					  got ? got : "", site->name, want);
}

void
pn_flag_unhandled(struct pn_arena *a, struct pn_event *ev, const char *provider)
{
	if (ev->flag != NULL)
		return;
	ev->flag = "unhandled";
	ev->flag_detail = ev->event_type != NULL
	    ? pn_arena_printf(a, "paynotify has no handling for %s event type \"%.64s\" "
			      "(docs/PROVIDERS.md): stored, not applied", provider, ev->event_type)
	    : pn_arena_printf(a, "paynotify has no handling for this %s notification (no event "
			      "type in it): stored, not applied", provider);
}

void
pn_flag_refund_failed(struct pn_event *ev, const char *detail)
{
	if (ev->flag != NULL)
		return;
	ev->flag = "refund_failed";
	ev->flag_detail = detail;
}

void
pn_answer_json(struct pn_response *res, int status, json_t *obj, const char *fallback)
{
	char   *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

	pn_response_set(res, status, "application/json", text ? text : fallback);
	free(text);
	json_decref(obj);
}

void
pn_answer_error(struct pn_response *res, int status, const char *reason)
{
	pn_answer_json(res, status, json_pack("{s:s}", "error", reason ? reason : "failed"),
		       "{\"error\":\"failed\"}");
}

bool
pn_mac_match(pn_mac_fn mac, const void *msg, const struct pn_secret *keys, size_t nkeys,
	     const unsigned char *want, size_t nwant, size_t wantlen, const char **key_id)
{
	bool	matched = false;
	size_t	i, j;

	for (i = 0; i < nkeys; i++) {
		unsigned char got[64];
		size_t	gotlen = 0;
		bool	this_key = false;

		if (!mac(msg, &keys[i], got, &gotlen) || gotlen != wantlen)
			continue;
		for (j = 0; j < nwant; j++)
			this_key |= pn_ct_equal(got, want + j * wantlen, wantlen);
		if (this_key && !matched) {
			matched = true;
			if (key_id)
				*key_id = keys[i].id;
		}
	}
	return matched;
}

struct hmac_msg {
	enum pn_md md;
	const struct pn_iov *iov;
	size_t	n;
};

static bool
hmac_mac(const void *msg, const struct pn_secret *key, unsigned char *out, size_t *outlen)
{
	const struct hmac_msg *m = msg;

	return pn_hmac(m->md, key->data, key->len, m->iov, m->n, out, outlen);
}

bool
pn_hmac_match(enum pn_md md, const struct pn_iov *iov, size_t n, const struct pn_secret *keys,
	      size_t nkeys, const unsigned char *want, size_t nwant, size_t wantlen,
	      const char **key_id)
{
	struct hmac_msg m = {md, iov, n};

	return pn_mac_match(hmac_mac, &m, keys, nkeys, want, nwant, wantlen, key_id);
}

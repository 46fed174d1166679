/*
 * adapter.c: helpers every provider adapter shares (adapter.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

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

const struct pn_site *
pn_marker_sibling(const struct pn_config *cfg, const struct pn_site *site,
		  const struct pn_cfg_provider *p, const char *got, size_t got_len)
{
	struct pn_cfg_marker mine, theirs;
	char	what[256];
	size_t	i;

	if (cfg == NULL || got == NULL || !pn_cfg_marker(site, p, &mine))
		return NULL;
	for (i = 0; i < cfg->nsites; i++) {
		const struct pn_site *o = &cfg->sites[i];

		if (strcmp(o->name, site->name) == 0 || !pn_cfg_configured(o, p)
		    || !pn_cfg_marker(o, p, &theirs) || theirs.field_len != mine.field_len
		    || memcmp(theirs.field, mine.field, mine.field_len) != 0
		    || strlen(theirs.value) != got_len || memcmp(theirs.value, got, got_len) != 0)
			continue;
		if (p->same_identity == NULL || p->same_identity(site, o, what, sizeof(what)))
			return o;
	}
	return NULL;
}

void
pn_check_marker(struct pn_arena *a, const struct pn_config *cfg, const struct pn_site *site,
		const struct pn_cfg_provider *p, const char *field, const char *got, size_t got_len,
		struct pn_event *ev)
{
	struct pn_cfg_marker mine;
	const struct pn_site *sib;

	if (!pn_cfg_marker(site, p, &mine) || ev->kind == PN_KIND_PENDING
	    || ev->kind == PN_KIND_IGNORED
	    || (ev->flag != NULL && strcmp(ev->flag, "amount_mismatch") != 0
		&& strcmp(ev->flag, "pending_confirmation") != 0))
		return;		/* a waiting event is still checked: a sibling's never waits here */
	if (got != NULL && got_len == strlen(mine.value) && memcmp(got, mine.value, got_len) == 0)
		return;		/* this site's */
	if ((sib = pn_marker_sibling(cfg, site, p, got, got_len)) != NULL) {
		ev->flag = "foreign_site";
		ev->flag_detail = pn_arena_printf(a, "site %s's event (%s \"%s\", its %s): not "
						  "applied here", sib->name, field,
						  pn_arena_strndup(a, got, got_len), p->marker_key);
		return;
	}
	if ((got == NULL || got_len == 0) && ev->kind == PN_KIND_REFUND && ev->psp_txn_id != NULL) {
		ev->weak_identity = true;
		return;
	}
	ev->flag = "merchant_mismatch";
	ev->flag_detail = pn_arena_printf(a, "%s is %s%.*s%s, not site %s's \"%s\" (%s)%s", field,
					  got ? "\"" : "", got ? (int)(got_len > 64 ? 64 : got_len)
					  : 6, got ? got : "absent", got ? "\"" : "", site->name,
					  mine.value, p->marker_key,
					  got && got_len ? ", nor another configured site's" : "");
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

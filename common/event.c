/*
 * event.c: the normalised event.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "event.h"
#include "util.h"

/* The event's text fields, in one place for both functions below. */
#define EVENT_TEXT_FIELDS(ev) \
	{&(ev)->dedup_key, &(ev)->event_type, &(ev)->order_id, &(ev)->psp_txn_id, \
	 &(ev)->psp_event_id, &(ev)->currency, &(ev)->psp_time, &(ev)->key_id, &(ev)->flag, \
	 &(ev)->flag_detail, &(ev)->source, &(ev)->case_id, &(ev)->case_status, \
	 &(ev)->case_reason, &(ev)->site}

const char *
pn_kind_name(enum pn_kind kind)
{
	switch (kind) {
	case PN_KIND_PAID:
		return "paid";
	case PN_KIND_REFUND:
		return "refund";
	case PN_KIND_CLOSED:
		return "closed";
	case PN_KIND_FAILED:
		return "failed";
	case PN_KIND_PENDING:
		return "pending";
	case PN_KIND_IGNORED:
		return "ignored";
	case PN_KIND_DISPUTE:
		return "dispute";
	case PN_KIND_COMPLAINT:
		return "complaint";
	}
	return "ignored";
}

void
pn_event_init(struct pn_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = PN_KIND_IGNORED;
	ev->amount_minor = -1;
	ev->refund_minor = -1;
	ev->case_due = -1;
	ev->case_time = -1;
}

void
pn_event_canonicalise(struct pn_event *ev, struct pn_arena *a)
{
	const char **fields[] = EVENT_TEXT_FIELDS(ev);
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(fields); i++) {
		const char *v = *fields[i];
		char   *e;

		if (v == NULL || (e = pn_utf8_escape(v)) == v)
			continue;
		*fields[i] = pn_arena_strdup(a, e);
		free(e);
	}
	for (i = 0; i < ev->nsubs; i++)
		pn_event_canonicalise(&ev->subs[i], a);
}

bool
pn_event_is_canonical(const struct pn_event *ev)
{
	const char *const *fields[] = EVENT_TEXT_FIELDS(ev);
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(fields); i++)
		if (*fields[i] != NULL && !pn_utf8_valid(*fields[i], strlen(*fields[i])))
			return false;
	for (i = 0; i < ev->nsubs; i++)
		if (!pn_event_is_canonical(&ev->subs[i]))
			return false;
	return true;
}

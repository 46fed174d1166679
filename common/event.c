/*
 * event.c: the normalised event.
 */
#include "config.h"

#include <string.h>

#include "event.h"

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
}

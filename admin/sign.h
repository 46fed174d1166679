/*
 * sign.h: test notifications for `paynotify sign` (cmd_sign.c).
 *
 * Building a signed notification is the admin command's business, never a
 * receiver's: each admin/sign_<provider>.c holds one provider's signer,
 * listed once in sign.c, and only the `paynotify` program links them (with
 * common/crypto_sign.c).  A receiver that cannot sign cannot be tricked
 * into signing (tests/integration/test_receiver_symbols.py).
 */
#ifndef PN_SIGN_H
#define PN_SIGN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "http.h"
#include "util.h"

/* A test notification to build. */
struct pn_sign_req {
	const struct pn_site *site;
	struct pn_arena *arena;
	enum pn_kind kind;		/* paid, refund, closed or failed */
	const char *order_id;
	int64_t	amount_minor;		/* ISO 4217 minor units */
	const char *currency;		/* upper-case alpha-3 */
	int64_t	now;			/* Unix seconds */
	const char *id;			/* unique token for the ids the provider invents */
	const char *variant;		/* provider-specific ("v2" for WeChat Pay); NULL = default */
	/* kind dispute (Stripe) or complaint (WeChat Pay v3, Alipay): */
	const char *case_id;		/* the dispute's / complaint's id; NULL: made from id */
	const char *case_status;	/* Stripe: the dispute's status (needs_response, won, ...);
					 * WeChat Pay: the action_type; NULL: the provider's first */
	/* The site marker value to carry in the provider's field (2c2p.site_marker's
	 * userDefinedN, attach, passback_params, stripe.site_metadata's KEY; a
	 * site without a marker: 2C2P userDefined1, Stripe metadata.site);
	 * NULL: none.  `paynotify sign` defaults it to the site's own. */
	const char *marker;
	/* WeChat Pay combine payment (--combine): the further sub-orders, the
	 * first being site/order_id/amount_minor itself; nsubs 0 = a single one */
	const struct pn_sign_sub *subs;
	size_t	nsubs;
};

/* One more sub-order of a combine payment: a site of the same configuration. */
struct pn_sign_sub {
	const struct pn_site *site;
	const char *order_id;
	int64_t	amount_minor;
};

/* The request that carries it. */
struct pn_signed {
	const char *content_type;
	struct pn_header headers[8];
	size_t	nheaders;
	const char *body;
	size_t	body_len;
};

/* Build a signed test notification with the site's test keys; false with
 * a reason when the site has none or the event does not exist. */
typedef bool (*pn_sign_fn)(const struct pn_sign_req *req, struct pn_signed *out,
			   struct pn_err *err);

/* pn_sign_alipay, ...: one per line of webhooks/providers.mk (sign_<name>.c) */
#define PN_MODULE(name) \
	bool pn_sign_##name(const struct pn_sign_req *req, struct pn_signed *out, struct pn_err *err);
#include "provider_list.h"
#undef PN_MODULE

/* obj (consumed) as compact JSON in its own member order, in the arena;
 * NULL when obj is NULL or cannot be written. */
char *pn_sign_json(struct pn_arena *a, json_t *obj);

/* The signer of a provider (by its pn_provider name); NULL if none. */
pn_sign_fn pn_signer_find(const char *provider);

#endif

/*
 * stripe_cfg.c: the stripe.* keys of a [site] section and what only Stripe's
 * settings need checked.  Parsing, defaults, files and freeing: common/cfg.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg.h"

#define S(field) PN_CFG_SITE_OFF(stripe.field)

static const struct pn_cfg_choice modes[] = {
	{"live", PN_STRIPE_LIVE}, {"test", PN_STRIPE_TEST}, {NULL, 0}};

static const struct pn_cfg_keydef keys[] = {
	{"site", "stripe.secret_files", PN_K_SECRETS, S(secrets), S(nsecrets), 0, 0,
	 NULL, NULL, "endpoint signing secret file(s) (whsec_...), one secret a line: rotation",
	 PN_KEY_REQUIRED, "secrets"},
	{"site", "stripe.test_signing", PN_K_BOOL, S(test_signing), 0, 0, 0, NULL, "off",
	 "sandbox sites only: let `paynotify sign` sign test events with the site's secret", 0,
	 NULL},
	{"site", "stripe.mode", PN_K_CHOICE, S(mode), 0, 0, 0, modes, "live",
	 "live or test: an event whose livemode is the other mode is stored mode_mismatch, "
	 "acknowledged, never applied", 0, NULL},
	{"site", "stripe.site_metadata", PN_K_STR, S(site_metadata), 0, 0, 0, NULL, NULL,
	 "KEY=VALUE that the event object's metadata must carry (metadata.KEY = VALUE); "
	 "required in practice when several sites share one Stripe account, which sends every "
	 "event to every endpoint: an event without it is stored merchant_mismatch", 0, NULL},
	{"site", "stripe.query_key_file", PN_K_PATH, S(query_key_path), 0, 0, 0, NULL, NULL,
	 "paynotify query: a restricted key (rk_..., PaymentIntents read) in a file; read by the "
	 "query command only, never by the receiver", 0, NULL},
	{"site", "stripe.query_url", PN_K_URL, S(query_url), 0, 0, 0, NULL,
	 "https://api.stripe.com", "paynotify query: the Stripe API (test mode uses the same "
	 "host with an rk_test_ key)", 0, NULL},
	{"site", "stripe.tolerance_s", PN_K_INT, S(tolerance_s), 0, 1, 86400, NULL, "300",
	 "largest accepted age of the Stripe-Signature timestamp (future ones pass, as in the "
	 "SDKs)", 0, NULL},
};

bool
pn_cfg_stripe_marker(const struct pn_site *site, const char **key, size_t *key_len)
{
	const char *m = site->stripe.site_metadata, *eq, *p;

	if (m == NULL || (eq = strchr(m, '=')) == NULL || eq == m || eq - m > 40
	    || eq[1] == '\0' || strlen(eq + 1) > 500)
		return false;
	for (p = m; p < eq; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
		      || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	if (key)
		*key = m;
	if (key_len)
		*key_len = (size_t)(eq - m);
	return true;
}

static void
validate(const struct pn_cfg_check *c)
{
	const struct pn_site *s = c->site;

	if (s->stripe.site_metadata != NULL && !pn_cfg_stripe_marker(s, NULL, NULL))
		pn_cfg_site_finding(c, PN_CFG_ERROR, "invalid stripe.site_metadata \"%s\": "
				    "expected KEY=VALUE, KEY at most 40 letters, digits, '_' or '-', "
				    "VALUE 1 to 500 characters", s->stripe.site_metadata);
}

/*
 * Stripe's endpoint signing secrets start "whsec_"; an API key (sk_, rk_,
 * pk_) pasted instead can never verify.  Ids and published prefixes only,
 * never secret bytes.
 */
static void
secret_forms(const struct pn_cfg_check *c)
{
	const struct pn_stripe_cfg *st = &c->site->stripe;
	size_t	i;

	for (i = 0; i < st->nsecrets; i++) {
		const struct pn_secret *k = &st->secrets[i];
		const char *d = (const char *)k->data;
		const char *what = NULL;

		if (k->len >= 6 && memcmp(d, "whsec_", 6) == 0)
			continue;
		if (k->len >= 3 && (memcmp(d, "sk_", 3) == 0 || memcmp(d, "rk_", 3) == 0))
			what = memcmp(d, "sk_", 3) == 0 ? "a Stripe secret API key (sk_...)"
			       : "a Stripe restricted API key (rk_...)";
		else if (k->len >= 3 && memcmp(d, "pk_", 3) == 0)
			what = "a Stripe publishable API key (pk_...)";
		if (what)
			pn_cfg_site_finding(c, PN_CFG_SITE_ERROR, "stripe.secret_files %s (line %d) "
					    "is %s, not a webhook signing secret: every event would "
					    "fail to verify; copy the endpoint's signing secret "
					    "(whsec_...) from the dashboard (Developers, Webhooks, the "
					    "endpoint, Signing secret)", k->id, k->line, what);
		else
			pn_cfg_site_finding(c, PN_CFG_SITE_ERROR, "stripe.secret_files %s (line %d) "
					    "does not start with \"whsec_\": Stripe's endpoint signing "
					    "secrets do, and the prefix is part of the key; copy the "
					    "whole signing secret (whsec_...) from the dashboard",
					    k->id, k->line);
	}
}

static void
summary(const struct pn_site *s, char *buf, size_t size)
{
	snprintf(buf, size, "tolerance %lld s%s", (long long)s->stripe.tolerance_s,
		 s->stripe.test_signing ? ", test signing on" : "");
}

/* Site binding (issue 11): sites that may share one Stripe account, unmarked. */
static int
warnings(const struct pn_config *cfg, FILE *out)
{
	size_t	i, sites = 0, unmarked = 0;

	for (i = 0; i < cfg->nsites; i++)
		if (cfg->sites[i].stripe.configured) {
			sites++;
			if (cfg->sites[i].stripe.site_metadata == NULL)
				unmarked++;
		}
	if (sites < 2 || unmarked == 0)
		return 0;
	fprintf(out, "WARNING: %zu sites configure Stripe and %zu of them set no "
		"stripe.site_metadata: if they share one Stripe account, every event "
		"reaches every endpoint and one site's payment can pay another site's "
		"order with the same order id; give each site its own marker (e.g. "
		"stripe.site_metadata = site=<name>, set in the PaymentIntent's or "
		"Checkout Session's metadata)\n", sites, unmarked);
	return 1;
}

/*
 * Stripe sends every event of an account to every endpoint of it, each
 * signed with that endpoint's secret, and nothing in the configuration says
 * which account a site is on: two sites with the same stripe.site_metadata
 * can never be told apart, whatever their secrets; two with one secret
 * (one endpoint) only by distinct markers.
 */
static bool
same_identity(const struct pn_site *a, const struct pn_site *b, char *what, size_t size)
{
	const struct pn_stripe_cfg *x = &a->stripe, *y = &b->stripe;

	/* livemode is signed and checked against stripe.mode */
	if (x->mode != y->mode)
		return false;
	if (pn_cfg_secrets_overlap(x->secrets, x->nsecrets, y->secrets, y->nsecrets)) {
		snprintf(what, size, "an endpoint signing secret");
		return true;
	}
	if (x->site_metadata != NULL && y->site_metadata != NULL
	    && strcmp(x->site_metadata, y->site_metadata) == 0) {
		snprintf(what, size, "stripe.site_metadata %s: Stripe sends every event of an "
			 "account to every endpoint", x->site_metadata);
		return true;
	}
	return false;
}

const struct pn_cfg_provider pn_stripe_cfg_keys = {
	.prefix = "stripe",
	.title = "Stripe",
	.configured_off = S(configured),
	.keys = keys,
	.nkeys = PN_ARRAY_LEN(keys),
	.validate = validate,
	.secret_forms = secret_forms,
	.summary = summary,
	.warnings = warnings,
	.same_identity = same_identity,
	.marker_key = "stripe.site_metadata",
};

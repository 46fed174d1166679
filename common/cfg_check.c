/*
 * cfg_check.c: the checks of the sites a configuration sets (cfg_check.h),
 * from the key declarations and the providers' hooks: every configured
 * provider's required keys, its own validate and secret_forms, the form of
 * its site marker, and the pairs of sites that share one identity (README
 * "Several sites on one provider account").  Each problem is a finding.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "cfg.h"
#include "cfg_check.h"
#include "crypto.h"

/* The bit of provider prov's key i in parser.failed: the site keys in registry order. */
unsigned
pn_cfg_site_key_bit(const struct pn_cfg_provider *prov, size_t i)
{
	const struct pn_cfg_provider *const *p;
	size_t	bit = i;

	for (p = pn_cfg_providers; *p != prov; p++)
		bit += (*p)->nkeys;
	if (bit >= PN_CFG_MAX_KEYS)
		pn_fatal("more than %d site keys: parser.failed needs more bits", PN_CFG_MAX_KEYS);
	return (unsigned)bit;
}

/* ---- site markers and shared identities (README "Several sites on one
 * provider account") -------------------------------------------------- */

static bool
marker_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
	    || c == '_' || c == '-' || c == '.' || c == '~';
}

bool
pn_cfg_marker(const struct pn_site *s, const struct pn_cfg_provider *p, struct pn_cfg_marker *out)
{
	const struct pn_cfg_keydef *kd = NULL;
	const char *m, *v, *eq;
	size_t	i, flen, vlen;

	if (p->marker_key == NULL)
		return false;
	for (i = 0; i < p->nkeys && kd == NULL; i++)
		if (strcmp(p->keys[i].key, p->marker_key) == 0)
			kd = &p->keys[i];
	if (kd == NULL || kd->type != PN_K_STR)
		pn_fatal("%s: marker key %s is not one of its strings", p->prefix, p->marker_key);
	m = *(char *const *)pn_cfg_site_field(s, kd);
	if (m == NULL)
		return false;
	if (p->marker_field != NULL) {
		out->field = p->marker_field;
		flen = strlen(p->marker_field);
		v = m;
	} else {
		if ((eq = strchr(m, '=')) == NULL || eq == m)
			return false;
		out->field = m;
		flen = (size_t)(eq - m);
		v = eq + 1;
	}
	vlen = strlen(v);
	if (p->marker_field == NULL && p->marker_fields == NULL) {
		/* a free KEY (Stripe metadata): KEY at most 40 of [A-Za-z0-9_-],
		 * VALUE 1 to 500 characters (Stripe's own metadata limits) */
		if (flen > 40 || vlen == 0 || vlen > 500)
			return false;
		for (i = 0; i < flen; i++)
			if (!marker_char(m[i]) || m[i] == '.' || m[i] == '~')
				return false;
	} else {
		if (p->marker_fields != NULL) {
			for (i = 0; p->marker_fields[i] != NULL; i++)
				if (strlen(p->marker_fields[i]) == flen
				    && memcmp(p->marker_fields[i], m, flen) == 0)
					break;
			if (p->marker_fields[i] == NULL)
				return false;
		}
		if (vlen == 0 || vlen > PN_CFG_MARKER_MAX)
			return false;
		for (i = 0; i < vlen; i++)
			if (!marker_char(v[i]))
				return false;
	}
	out->field_len = flen;
	out->value = v;
	return true;
}

bool
pn_cfg_secrets_overlap(const struct pn_secret *a, size_t na, const struct pn_secret *b, size_t nb)
{
	size_t	i, j;

	for (i = 0; i < na; i++)
		for (j = 0; j < nb; j++)
			if (a[i].len == b[j].len && pn_ct_equal(a[i].data, b[j].data, a[i].len))
				return true;
	return false;
}

bool
pn_cfg_pubkeys_overlap(const struct pn_pubkey *a, size_t na, const struct pn_pubkey *b, size_t nb)
{
	size_t	i, j;

	for (i = 0; i < na; i++)
		for (j = 0; j < nb; j++)
			if (a[i].pkey && b[j].pkey && EVP_PKEY_eq(a[i].pkey, b[j].pkey) == 1)
				return true;
	return false;
}

/*
 * Two sites that a genuine notification of one provider cannot tell apart
 * (the provider's same_identity: a shared key or secret and the same signed
 * identity) are refused, unless each has a site marker from signed data
 * (p->marker_key), on the same field, with values the provider can tell
 * apart: otherwise one site's genuine payment, posted to the other site's
 * URL, pays that site's order with the same order id (issue 23).  An
 * error, so that check-config fails, a receiver refuses to start and a
 * reload keeps the old configuration; never isolated to one site, because
 * it is about two.
 */
void
pn_cfg_check_shared_identities(const struct pn_config *cfg, struct pn_cfg_findings *fd)
{
	const struct pn_cfg_provider *const *prov;
	size_t	i, j;

	for (prov = pn_cfg_providers; *prov; prov++) {
		const struct pn_cfg_provider *p = *prov;

		if (p->same_identity == NULL)
			continue;
		for (i = 0; i < cfg->nsites; i++) {
			const struct pn_site *a = &cfg->sites[i];

			if (!pn_cfg_configured(a, p))
				continue;
			for (j = i + 1; j < cfg->nsites; j++) {
				const struct pn_site *b = &cfg->sites[j];
				struct pn_cfg_marker ma, mb;
				bool	hasa, hasb;
				char	what[256], why[320];

				if (!pn_cfg_configured(b, p) || !p->same_identity(a, b, what,
										sizeof(what)))
					continue;
				hasa = pn_cfg_marker(a, p, &ma);
				hasb = pn_cfg_marker(b, p, &mb);
				if (!hasa || !hasb)
					snprintf(why, sizeof(why), "%s%s%s %s", !hasa && !hasb
						 ? "neither sets" : "\"", !hasa && !hasb ? ""
						 : !hasa ? a->name : b->name, !hasa && !hasb ? ""
						 : "\" sets no", p->marker_key);
				else if (ma.field_len != mb.field_len
					 || memcmp(ma.field, mb.field, ma.field_len) != 0)
					snprintf(why, sizeof(why), "their %s name different fields "
						 "(%.*s, %.*s): a notification may carry both",
						 p->marker_key, (int)ma.field_len, ma.field,
						 (int)mb.field_len, mb.field);
				else if (strcmp(ma.value, mb.value) == 0)
					snprintf(why, sizeof(why), "both set %s to the same value",
						 p->marker_key);
				else if (p->markers_distinct != NULL
					 && !p->markers_distinct(a, ma.value, b, mb.value))
					snprintf(why, sizeof(why), "their %s values \"%s\" and \"%s\" "
						 "cannot be told apart (one contains the other, and "
						 "the field's boundaries are not signed)",
						 p->marker_key, ma.value, mb.value);
				else
					continue;
				pn_cfg_finding_add(fd, PN_CFG_ERROR, b->file, b->line,
						   "sites \"%s\" and \"%s\" share one %s identity (%s) "
						   "and %s: a genuine notification for either verifies "
						   "and binds at both, so one site's payment could pay "
						   "the other's order with the same order id; give each "
						   "site its own %s, on the same field, with distinct "
						   "values, and set it in every payment request",
						   a->name, b->name, p->title, what, why, p->marker_key);
			}
		}
	}
}

/* ---- checks of a site, from the declarations and the providers' hooks ------ */

bool
pn_cfg_key_failed(const struct pn_cfg_check *c, const char *key)
{
	size_t	i;

	for (i = 0; i < c->provider->nkeys; i++)
		if (strcmp(c->provider->keys[i].key, key) == 0)
			return (c->failed & (UINT64_C(1) << i)) != 0;
	pn_fatal("no %s key \"%s\"", c->provider->prefix, key);
}

void
pn_cfg_site_finding(const struct pn_cfg_check *c, enum pn_cfg_severity sev, const char *fmt,
		    ...)
{
	va_list ap;
	char	buf[1024];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pn_cfg_finding_add(c->fd, sev, c->site->file, c->site->line, "site \"%s\": %s",
			   c->site->name, buf);
}

void
pn_cfg_require(const struct pn_cfg_check *c, bool ok, const char *key, const char *what)
{
	if (!ok && !pn_cfg_key_failed(c, key))
		pn_cfg_site_finding(c, PN_CFG_ERROR, "%s", what);
}

/* What provider prov's checks of site s get; failed: the site's parser.failed. */
static struct pn_cfg_check
site_check(const struct pn_site *s, const struct pn_cfg_provider *prov, uint64_t failed,
	   struct pn_cfg_findings *fd)
{
	struct pn_cfg_check c;
	size_t	i;

	c.site = s;
	c.fd = fd;
	c.provider = prov;
	c.failed = 0;
	for (i = 0; i < prov->nkeys; i++)
		if (failed & (UINT64_C(1) << pn_cfg_site_key_bit(prov, i)))
			c.failed |= UINT64_C(1) << i;
	return c;
}

/* Is a value set for site key kd (a list: at least one)? */
static bool
key_set(const struct pn_site *s, const struct pn_cfg_keydef *kd)
{
	if (kd->type == PN_K_SECRETS || kd->type == PN_K_PUBKEYS)
		return pn_cfg_site_count(s, kd) > 0;
	return *(char *const *)pn_cfg_site_field(s, kd) != NULL;
}

/* The site marker's form (pn_cfg_marker), for the providers other than
 * Stripe (whose validate says it in its own words). */
static void
check_marker_form(const struct pn_cfg_check *c)
{
	const struct pn_cfg_provider *p = c->provider;
	const char *m;
	struct pn_cfg_marker mk;
	char	fields[160];
	size_t	i, used = 0;

	if (p->marker_key == NULL || (p->marker_field == NULL && p->marker_fields == NULL)
	    || pn_cfg_key_failed(c, p->marker_key))
		return;
	m = pn_cfg_site_str(c->site, p->prefix, p->marker_key + strlen(p->prefix) + 1);
	if (m == NULL || pn_cfg_marker(c->site, p, &mk))
		return;
	fields[0] = '\0';
	for (i = 0; p->marker_fields && p->marker_fields[i] && used < sizeof(fields); i++)
		used += (size_t)snprintf(fields + used, sizeof(fields) - used, "%s%s",
					 i ? ", " : "", p->marker_fields[i]);
	if (p->marker_fields)
		pn_cfg_site_finding(c, PN_CFG_ERROR, "invalid %s \"%s\": expected FIELD=VALUE, "
				    "FIELD one of %s, VALUE 1 to %d letters, digits, '.', '_', "
				    "'~' or '-'", p->marker_key, m, fields, PN_CFG_MARKER_MAX);
	else
		pn_cfg_site_finding(c, PN_CFG_ERROR, "invalid %s \"%s\": expected 1 to %d "
				    "letters, digits, '.', '_', '~' or '-'", p->marker_key, m,
				    PN_CFG_MARKER_MAX);
}

/*
 * Completeness of one site: a provider at all, each configured provider's
 * PN_KEY_REQUIRED keys, then its own checks.  Every problem into fd.
 */
static void
validate_site(const struct pn_site *s, uint64_t failed, struct pn_cfg_findings *fd)
{
	const struct pn_cfg_provider *const *prov;
	bool	any = false;
	char	what[256];
	size_t	i, used = 0;

	for (prov = pn_cfg_providers; *prov; prov++)
		any = any || (!(*prov)->not_a_provider && pn_cfg_configured(s, *prov));
	if (!any && failed == 0) {
		for (prov = pn_cfg_providers; *prov && used < sizeof(what); prov++) {
			const struct pn_cfg_provider *const *next = prov + 1;

			if ((*prov)->not_a_provider)
				continue;
			while (*next && (*next)->not_a_provider)
				next++;
			used += (size_t)snprintf(what + used, sizeof(what) - used, "%s%s.*",
						 prov == pn_cfg_providers ? "" : *next ? ", "
						 : " or ", (*prov)->prefix);
		}
		pn_cfg_finding_add(fd, PN_CFG_ERROR, s->file, s->line, "site \"%s\": no provider "
				   "is configured (set %s keys)", s->name, what);
	}
	for (prov = pn_cfg_providers; *prov; prov++) {
		struct pn_cfg_check c = site_check(s, *prov, failed, fd);

		if (!pn_cfg_configured(s, *prov))
			continue;
		for (i = 0; i < (*prov)->nkeys; i++) {
			const struct pn_cfg_keydef *kd = &(*prov)->keys[i];

			if (!(kd->flags & PN_KEY_REQUIRED))
				continue;
			snprintf(what, sizeof(what), "%s is required for %s", kd->key, (*prov)->title);
			pn_cfg_require(&c, key_set(s, kd), kd->key, what);
		}
		if ((*prov)->validate)
			(*prov)->validate(&c);
		check_marker_form(&c);
	}
}

/*
 * The forms the providers give their secrets, checked so that a secret
 * pasted into the wrong place is caught before the first notification
 * fails.  Only what can never verify is a site error; a form that is merely
 * unusual is a warning.  The hooks never quote secret bytes: ids, lengths,
 * prefixes of published forms (sk_, whsec_) only.
 */
static void
check_secret_forms(const struct pn_site *s, uint64_t failed, struct pn_cfg_findings *fd)
{
	const struct pn_cfg_provider *const *prov;

	for (prov = pn_cfg_providers; *prov; prov++)
		if ((*prov)->secret_forms) {
			struct pn_cfg_check c = site_check(s, *prov, failed, fd);

			(*prov)->secret_forms(&c);
		}
}

void
pn_cfg_check_site(const struct pn_site *s, uint64_t failed, struct pn_cfg_findings *fd)
{
	validate_site(s, failed, fd);
	check_secret_forms(s, failed, fd);
}

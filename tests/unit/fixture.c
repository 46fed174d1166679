/*
 * fixture.c: loading and running data-driven provider cases.
 */
#include "config.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "fixture.h"

#ifndef PN_FIXTURES
#error "PN_FIXTURES must name tests/fixtures"
#endif

const char *
fixture_path(const char *rel)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", PN_FIXTURES, rel);
	return buf;
}

const struct pn_config *
fixture_config(void)
{
	static struct pn_config *cfg;
	static const char *secrets[] = {"stripe-old", "stripe-new", "stripe-both",
					"stripe-dotnet", "2c2p-sandbox", "2c2p-guide",
					"2c2p-rotated", "2c2p-legacy", "wx-apiv3", "wx-apiv3-rotated",
					"wx-apiv3-wrong", "wx-apiv2", "wx-apiv2-refund", NULL};
	struct pn_err err;
	const char **s;

	if (cfg != NULL)
		return cfg;
	/* git does not keep modes: make the secret files private, as
	 * the configuration loader insists. */
	for (s = secrets; *s; s++) {
		char rel[256];

		snprintf(rel, sizeof(rel), "unit/secrets/%s", *s);
		chmod(fixture_path(rel), 0600);
	}
	cfg = pn_cfg_load(fixture_path("unit/unit.conf"), &err);
	if (cfg == NULL) {
		fprintf(stderr, "cannot load unit.conf: %s\n", err.msg);
		abort();
	}
	return cfg;
}

/*
 * The configuration that holds site name: unit.conf, or, for a variant that
 * shares the provider identity of a unit.conf site (a key in another form,
 * a rotation, another v2 sign type), its own unit/variants/<name>.conf:
 * two sites a genuine notification cannot tell apart are refused in one
 * file (README "Several sites on one provider account").  Loaded once.
 */
const struct pn_config *
fixture_config_of(const char *name)
{
	static struct {
		char	name[64];
		struct pn_config *cfg;
	} variants[32];
	static size_t nvariants;
	const struct pn_config *base = fixture_config();
	char	rel[256];
	struct pn_err err;
	size_t	i;

	if (pn_cfg_site(base, name) != NULL)
		return base;
	for (i = 0; i < nvariants; i++)
		if (strcmp(variants[i].name, name) == 0)
			return variants[i].cfg;
	snprintf(rel, sizeof(rel), "unit/variants/%s.conf", name);
	if (access(fixture_path(rel), R_OK) != 0 || nvariants == PN_ARRAY_LEN(variants))
		return base;
	snprintf(variants[nvariants].name, sizeof(variants[nvariants].name), "%s", name);
	variants[nvariants].cfg = pn_cfg_load(fixture_path(rel), &err);
	if (variants[nvariants].cfg == NULL) {
		fprintf(stderr, "cannot load %s: %s\n", rel, err.msg);
		abort();
	}
	return variants[nvariants++].cfg;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t
fixture_cases(const char *dir, char ***names)
{
	DIR    *d = opendir(fixture_path(dir));
	struct dirent *de;
	size_t	n = 0;

	*names = NULL;
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);

		if (len > 5 && strcmp(de->d_name + len - 5, ".case") == 0) {
			*names = pn_xrealloc(*names, (n + 1) * sizeof(char *));
			(*names)[n++] = pn_xstrndup(de->d_name, len - 5);
		}
	}
	closedir(d);
	qsort(*names, n, sizeof(char *), cmp_str);
	return n;
}

struct expect {
	char	key[64];
	char	value[512];
};

static const char *
event_field(const struct pn_event *ev, const char *key, char *buf, size_t sz)
{
	if (strcmp(key, "kind") == 0)
		return pn_kind_name(ev->kind);
	if (strcmp(key, "dedup_key") == 0)
		return ev->dedup_key;
	if (strcmp(key, "order_id") == 0)
		return ev->order_id;
	if (strcmp(key, "currency") == 0)
		return ev->currency;
	if (strcmp(key, "psp_txn_id") == 0)
		return ev->psp_txn_id;
	if (strcmp(key, "psp_event_id") == 0)
		return ev->psp_event_id;
	if (strcmp(key, "event_type") == 0)
		return ev->event_type;
	if (strcmp(key, "key_id") == 0)
		return ev->key_id;
	if (strcmp(key, "flag") == 0)
		return ev->flag;
	if (strcmp(key, "amount_minor") == 0) {
		snprintf(buf, sz, "%" PRId64, ev->amount_minor);
		return buf;
	}
	if (strcmp(key, "refund_minor") == 0) {
		snprintf(buf, sz, "%" PRId64, ev->refund_minor);
		return buf;
	}
	if (strcmp(key, "refund_cumulative") == 0)
		return ev->refund_cumulative ? "true" : "false";
	if (strcmp(key, "psp_time") == 0)
		return ev->psp_time;
	if (strcmp(key, "weak_identity") == 0)
		return ev->weak_identity ? "true" : "false";
	if (strcmp(key, "flag_detail") == 0)
		return ev->flag_detail;
	ck_abort_msg("unknown expectation field \"%s\"", key);
	return NULL;
}

/* One tests/fixtures/PROVIDER/NAME.case file, read (its format: fixture.h). */
struct fixture_case {
	char	rel[512];
	char	site_name[128], body_file[256], expect[32];
	char	want_err[8][256];
	struct expect ex[32];
	size_t	nex, nerr;
	int64_t	now;
	struct pn_request req;
};

static void
case_load(struct fixture_case *c, const char *dir, const char *name, struct pn_arena *a)
{
	char   *text = NULL, *line, *save = NULL;
	struct pn_err err;

	memset(c, 0, sizeof(*c));
	snprintf(c->rel, sizeof(c->rel), "%s/%s.case", dir, name);
	ck_assert_msg(pn_read_file(fixture_path(c->rel), 65536, &text, NULL, &err), "%s", err.msg);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq, *k, *val;

		line = pn_trim(line);
		if (*line == '#' || *line == '\0')
			continue;
		eq = strstr(line, " =");
		ck_assert_msg(eq != NULL, "%s: bad line \"%s\"", c->rel, line);
		*eq = '\0';
		k = pn_trim(line);
		val = eq + 2;
		if (*val == ' ')
			val++;
		if (strcmp(k, "site") == 0)
			snprintf(c->site_name, sizeof(c->site_name), "%s", val);
		else if (strcmp(k, "body") == 0)
			snprintf(c->body_file, sizeof(c->body_file), "%s/%s", dir, val);
		else if (strcmp(k, "now") == 0)
			ck_assert(pn_parse_i64(val, &c->now));
		else if (strncmp(k, "header ", 7) == 0) {
			ck_assert(c->req.nheaders < PN_MAX_HEADERS);
			c->req.headers[c->req.nheaders].name = pn_arena_strdup(a, k + 7);
			c->req.headers[c->req.nheaders].value = pn_arena_strdup(a, val);
			c->req.nheaders++;
		} else if (strcmp(k, "expect") == 0)
			snprintf(c->expect, sizeof(c->expect), "%s", val);
		else if (strcmp(k, "error") == 0) {
			ck_assert_msg(*val != '\0', "%s: empty error", c->rel);
			ck_assert_msg(c->nerr < PN_ARRAY_LEN(c->want_err), "%s: too many error lines",
				      c->rel);
			ck_assert_msg(strlen(val) < sizeof(c->want_err[0]), "%s: error too long", c->rel);
			snprintf(c->want_err[c->nerr++], sizeof(c->want_err[0]), "%s", val);
		}
		else if (strncmp(k, "expect.", 7) == 0) {
			ck_assert(c->nex < PN_ARRAY_LEN(c->ex));
			snprintf(c->ex[c->nex].key, sizeof(c->ex[c->nex].key), "%s", k + 7);
			snprintf(c->ex[c->nex].value, sizeof(c->ex[c->nex].value), "%s", val);
			c->nex++;
		} else
			ck_abort_msg("%s: unknown key \"%s\"", c->rel, k);
	}
	free(text);
}

/* The case's request through p's verify, as the receiver makes it; the
 * body is copied into a (the event points into it). */
static enum pn_verdict
case_verify(const struct pn_provider *p, struct fixture_case *c, struct pn_arena *a,
	    const struct pn_site **site_out, struct pn_event *ev, struct pn_err *err)
{
	const struct pn_config *cfg = fixture_config_of(c->site_name);
	const struct pn_site *site = pn_cfg_site(cfg, c->site_name);
	char   *body = NULL;
	size_t	body_len = 0;

	ck_assert_msg(site != NULL, "%s: unknown site \"%s\"", c->rel, c->site_name);
	ck_assert_msg(pn_read_file(fixture_path(c->body_file), 1 << 20, &body, &body_len, err),
		      "%s", err->msg);
	c->req.method = "POST";
	c->req.path_info = pn_arena_printf(a, "/notify/%s/%s", p->name, c->site_name);
	c->req.body = pn_arena_memdup(a, body, body_len + 1);
	c->req.body_len = body_len;
	free(body);
	pn_event_init(ev);
	*site_out = site;
	{
		struct pn_verify_ctx vc = {&c->req, site, a, c->now, c->now != 0, 0, cfg};

		err->msg[0] = '\0';
		return p->verify(&vc, ev, err);
	}
}

void
fixture_run_case(const struct pn_provider *p, const char *dir, const char *name)
{
	struct fixture_case c;
	size_t	i;
	struct pn_err err;
	struct pn_event ev;
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	enum pn_verdict v;
	const char *want_name;

	case_load(&c, dir, name, a);
	v = case_verify(p, &c, a, &site, &ev, &err);
	want_name = v == PN_VERIFIED ? "verified" : v == PN_MALFORMED ? "malformed" : "unverified";
	ck_assert_msg(strcmp(want_name, c.expect) == 0, "%s: expected %s, got %s (%s)", c.rel,
		      c.expect, want_name, err.msg);
	/* A rejection must be for the reason the case names: every "error"
	 * line is a substring of the verifier's message. */
	if (v == PN_VERIFIED)
		ck_assert_msg(c.nerr == 0, "%s: an error line on a case expected to verify", c.rel);
	else
		ck_assert_msg(c.nerr > 0, "%s: a case expected %s must say why (error = ...); got "
			      "\"%s\"", c.rel, c.expect, err.msg);
	for (i = 0; i < c.nerr; i++)
		ck_assert_msg(strstr(err.msg, c.want_err[i]) != NULL,
			      "%s: %s as expected, but for another reason: \"%s\" does not contain "
			      "\"%s\"", c.rel, c.expect, err.msg, c.want_err[i]);
	for (i = 0; i < c.nex && v == PN_VERIFIED; i++) {
		char	buf[64];
		const char *got = event_field(&ev, c.ex[i].key, buf, sizeof(buf));

		ck_assert_msg(strcmp(got ? got : "", c.ex[i].value) == 0,
			      "%s: expected %s \"%s\", got \"%s\"", c.rel, c.ex[i].key,
			      c.ex[i].value, got ? got : "(null)");
	}
	pn_arena_free(a);
}

enum pn_verdict
fixture_verify(const struct pn_provider *p, const char *dir, const char *name,
	       struct pn_arena *a, const struct pn_site **site_out, struct pn_event *ev)
{
	struct fixture_case c;
	struct pn_err err;

	case_load(&c, dir, name, a);
	return case_verify(p, &c, a, site_out, ev, &err);
}

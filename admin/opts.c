/*
 * opts.c: option values of the subcommands, checked before anything runs.
 *
 * A typo in a filter (`--site shpo`, `--outcome unknown-order`) used to
 * match nothing and exit 0: a silent wrong answer.  Each value is checked
 * here against what can exist (the configured sites, the providers built
 * in, the outcomes the schema records, durations and times in the forms
 * listed in the message), and a wrong one exits 64 with the valid values.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "provider.h"

/* The CHECK list of paynotify.notifications.outcome (sql/). */
const char *const pn_outcomes[] = {
	"applied", "already_applied", "unknown_order", "amount_mismatch", "merchant_mismatch",
	"mode_mismatch", "ignored", "duplicate_payment", "paid_after_close",
	"conflicting_duplicate", "txn_mismatch", "combined", "missing_id", "foreign_site",
	"unhandled", "refund_failed", "pending_confirmation", "dispute", "complaint", NULL,
};

#define DURATION_FORMS "30s, 30m, 2h, 1d, 1w, 1h30m, \"90 seconds\", \"2 hours\", \"1 day\""
#define TIME_FORMS "2026-11-30, \"2026-11-30 08:00\", \"2026-11-30 08:00+08\", " \
	"2026-11-30T08:00:00Z, today, yesterday, now, or a duration meaning that long ago (2h, 1d)"

bool
pn_opt_site(const struct pn_config *cfg, const char *opt, const char *value)
{
	size_t	i;

	if (pn_cfg_site(cfg, value) != NULL)
		return true;
	fprintf(stderr, "paynotify: %s \"%s\": no such site in %s; the sites are:", opt, value,
		cfg->path);
	for (i = 0; i < cfg->nsites; i++)
		fprintf(stderr, "%s %s", i ? "," : "", cfg->sites[i].name);
	fputc('\n', stderr);
	return false;
}

bool
pn_opt_provider(const char *opt, const char *value)
{
	const struct pn_provider *const *p;

	if (pn_provider_find(value) != NULL)
		return true;
	fprintf(stderr, "paynotify: %s \"%s\": unknown provider; expected one of", opt, value);
	for (p = pn_providers; *p; p++)
		fprintf(stderr, "%s %s", p == pn_providers ? "" : ",", (*p)->name);
	fputc('\n', stderr);
	return false;
}

bool
pn_opt_outcome(const char *opt, const char *value)
{
	const char *const *o;

	for (o = pn_outcomes; *o; o++)
		if (strcmp(*o, value) == 0)
			return true;
	fprintf(stderr, "paynotify: %s \"%s\": unknown outcome; expected one of", opt, value);
	for (o = pn_outcomes; *o; o++)
		fprintf(stderr, "%s %s", o == pn_outcomes ? "" : ",", *o);
	fputc('\n', stderr);
	return false;
}

bool
pn_opt_id(const char *opt, const char *value)
{
	int64_t v;

	if (pn_parse_i64(value, &v) && v > 0)
		return true;
	fprintf(stderr, "paynotify: %s \"%s\": expected a notification id (a positive integer)\n",
		opt, value);
	return false;
}

bool
pn_opt_int(const char *opt, const char *value, int64_t min, int64_t max, int64_t *out)
{
	int64_t v;

	if (pn_parse_i64(value, &v) && v >= min && v <= max) {
		*out = v;
		return true;
	}
	fprintf(stderr, "paynotify: %s \"%s\": expected a whole number from %lld to %lld\n", opt,
		value, (long long)min, (long long)max);
	return false;
}

/* One unit word; its length in seconds, 0 if it is none. */
static int64_t
unit_seconds(const char *w, size_t n)
{
	static const struct {
		const char *word;
		int64_t	s;
	} units[] = {
		{"s", 1}, {"sec", 1}, {"secs", 1}, {"second", 1}, {"seconds", 1},
		{"m", 60}, {"min", 60}, {"mins", 60}, {"minute", 60}, {"minutes", 60},
		{"h", 3600}, {"hour", 3600}, {"hours", 3600},
		{"d", 86400}, {"day", 86400}, {"days", 86400},
		{"w", 604800}, {"week", 604800}, {"weeks", 604800},
	};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(units); i++)
		if (strlen(units[i].word) == n && strncmp(units[i].word, w, n) == 0)
			return units[i].s;
	return 0;
}

/* "1h30m", "2 hours", "1 day 6 hours": false when it is not one. */
static bool
parse_duration(const char *s, int64_t *out)
{
	int64_t	total = 0;
	bool	any = false;

	for (;;) {
		int64_t	n = 0, u;
		const char *w;

		while (*s == ' ')
			s++;
		if (*s == '\0')
			break;
		if (*s < '0' || *s > '9')
			return false;
		for (; *s >= '0' && *s <= '9'; s++) {
			n = n * 10 + (*s - '0');
			if (n > 100 * 365 * 86400LL)
				return false;
		}
		while (*s == ' ')
			s++;
		for (w = s; *s >= 'a' && *s <= 'z'; s++)
			;
		if ((u = unit_seconds(w, (size_t)(s - w))) == 0)
			return false;
		total += n * u;
		if (total > 100 * 365 * 86400LL)
			return false;
		any = true;
	}
	*out = total;
	return any;
}

bool
pn_opt_duration(const char *opt, const char *value, int64_t *seconds)
{
	if (parse_duration(value, seconds) && *seconds > 0)
		return true;
	fprintf(stderr, "paynotify: %s \"%s\": expected a duration: a number and a unit (s, m, h, "
		"d, w, or the words), e.g. " DURATION_FORMS "\n", opt, value);
	return false;
}

/* n digits at *s into *v; advances. */
static bool
digits(const char **s, int n, int *v)
{
	int	i;

	*v = 0;
	for (i = 0; i < n; i++) {
		if ((*s)[i] < '0' || (*s)[i] > '9')
			return false;
		*v = *v * 10 + ((*s)[i] - '0');
	}
	*s += n;
	return true;
}

static bool
iso_time(const char *s)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int	y, mo, d, h, mi, sec, zh, zm;

	if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) || *s++ != '-'
	    || !digits(&s, 2, &d))
		return false;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1]
	    || (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)))
		return false;
	if (*s == '\0')
		return true;
	if (*s != ' ' && *s != 'T')
		return false;
	s++;
	if (!digits(&s, 2, &h) || *s++ != ':' || !digits(&s, 2, &mi) || h > 23 || mi > 59)
		return false;
	if (*s == ':') {
		s++;
		if (!digits(&s, 2, &sec) || sec > 60)
			return false;
		if (*s == '.') {
			s++;
			if (*s < '0' || *s > '9')
				return false;
			while (*s >= '0' && *s <= '9')
				s++;
		}
	}
	if (*s == ' ')
		s++;
	if (*s == '\0' || (*s == 'Z' && s[1] == '\0'))
		return true;
	if (*s != '+' && *s != '-')
		return false;
	s++;
	if (!digits(&s, 2, &zh) || zh > 14)
		return false;
	if (*s == ':')
		s++;
	if (*s == '\0')
		return true;
	return digits(&s, 2, &zm) && zm <= 59 && *s == '\0';
}

bool
pn_opt_time(const char *opt, const char *value, char **out)
{
	int64_t	ago;

	/* PostgreSQL's own words, read in the session's time zone */
	static const char *const words[] = {"now", "today", "yesterday", "tomorrow", NULL};
	const char *const *w;

	for (w = words; *w; w++)
		if (strcmp(value, *w) == 0) {
			*out = pn_xstrdup(value);
			return true;
		}
	if (iso_time(value)) {
		*out = pn_xstrdup(value);
		return true;
	}
	if (parse_duration(value, &ago)) {
		time_t	t = time(NULL) - (time_t)ago;
		struct tm tm;
		char	buf[40];

		gmtime_r(&t, &tm);
		strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S+00", &tm);
		*out = pn_xstrdup(buf);
		return true;
	}
	fprintf(stderr, "paynotify: %s \"%s\": expected a time: " TIME_FORMS "\n", opt, value);
	return false;
}

bool
pn_opt_url(const char *opt, const char *value)
{
	const char *p = value;

	if (strncmp(p, "https:", 6) == 0)
		p += 6;
	else if (strncmp(p, "http:", 5) == 0)
		p += 5;
	else
		p = NULL;
	if (p != NULL && p[0] == '/' && p[1] == '/' && p[2] != '\0' && p[2] != '/')
		return true;
	fprintf(stderr, "paynotify: %s \"%s\": expected http://HOST[:PORT] or "
		"https://HOST[:PORT]\n", opt, value);
	return false;
}

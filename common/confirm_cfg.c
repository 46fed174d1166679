/*
 * confirm_cfg.c: the confirm.* keys of a [site] section (`paynotify
 * confirm`, docs/SHOP-ORDERS.md).  Parsing, defaults, files and freeing:
 * common/cfg.c.
 */
#include "config.h"

#include <stdio.h>

#include "cfg.h"

#define S(field) PN_CFG_SITE_OFF(confirm.field)

static const struct pn_cfg_keydef keys[] = {
	{"site", "confirm.secret_file", PN_K_PATH, S(secret_path), 0, 0, 0, NULL, NULL,
	 "paynotify confirm: the file with the site's HMAC-SHA256 key (one line, at least 32 "
	 "bytes, e.g. openssl rand -hex 32) that the shop's backend signs each confirm request "
	 "with; mode 0600 or 0640 like the other secret files; read by paynotify confirm only, "
	 "never by a receiver; unset: the site has no confirm endpoint", PN_KEY_REQUIRED, NULL},
	{"site", "confirm.timeout_ms", PN_K_INT, S(timeout_ms), 0, 100, 30000, NULL, "2000",
	 "paynotify confirm: largest time of the provider ask of one confirm request (every "
	 "request to the provider together, within [query]'s bounds); when it passes the "
	 "stored status is answered (pending) and the follow-up schedule asks later", 0, NULL},
	{"site", "confirm.min_interval_s", PN_K_INT, S(min_interval_s), 0, 1, 3600, NULL, "10",
	 "paynotify confirm: at most one provider ask per order in this many seconds, over "
	 "every worker and host (paynotify.confirm_asks); a request within it is answered "
	 "the stored status with \"asked\": false", 0, NULL},
};

static void
summary(const struct pn_site *s, char *buf, size_t size)
{
	snprintf(buf, size, "secret file %s, ask bounded to %lld ms, one ask per order every "
		 "%lld s", s->confirm.secret_path ? s->confirm.secret_path : "(none)",
		 (long long)s->confirm.timeout_ms, (long long)s->confirm.min_interval_s);
}

const struct pn_cfg_provider pn_confirm_cfg_keys = {
	.prefix = "confirm",
	.title = "the confirm endpoint",
	.configured_off = S(configured),
	.keys = keys,
	.nkeys = PN_ARRAY_LEN(keys),
	.summary = summary,
	.not_a_provider = true,
};

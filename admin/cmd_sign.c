/*
 * cmd_sign.c: paynotify sign — print a complete signed test notification
 * for a sandbox site, like `stripe trigger`.  Only sites with test keys
 * (alipay/wechatpay.test_private_key_file, stripe/2c2p.test_signing) can
 * be signed for.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "args.h"
#include "crypto.h"
#include "money.h"
#include "provider.h"
#include "sign.h"

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify sign PROVIDER --site S --order ID --amount 12.34\n"
		"                      [--currency CNY]\n"
		"                      [--event paid|refund|closed|failed|dispute|complaint]\n"
		"                      [--case ID] [--status WORD] [--v2]\n"
		"                      [--marker VALUE | --no-marker]\n"
		"                      [--combine SITE:ORDER:AMOUNT ...] [--curl] [--url BASE]\n\n"
		"Print a complete signed notification (method, path, headers, body) for a\n"
		"site that has test signing keys, or with --curl a ready curl command.\n"
		"PROVIDER is alipay, wechatpay, stripe or 2c2p; --v2 makes a WeChat Pay\n"
		"API v2 (XML) notification.  --amount is in major units, exact.\n\n"
		"  --url BASE   where --curl sends it (default http://127.0.0.1:8080)\n"
		"  --event dispute    a Stripe charge.dispute.* of the order's PaymentIntent\n"
		"  --event complaint  a WeChat Pay COMPLAINT.* (v3) or an Alipay\n"
		"                     alipay.merchant.tradecomplain.changed message\n"
		"  --case ID    the dispute's / complaint's id (default: made up)\n"
		"  --status WORD  Stripe: the dispute's status (needs_response, under_review,\n"
		"               won, lost, ...; the event type follows it); WeChat Pay: the\n"
		"               action_type (CREATE_COMPLAINT, ...)\n"
		"  --marker VALUE  the site marker the notification carries (default: the\n"
		"               site's own 2c2p.site_marker, wechatpay.site_attach,\n"
		"               alipay.site_passback or stripe.site_metadata value, if set)\n"
		"  --no-marker  carry none\n"
		"  --combine SITE:ORDER:AMOUNT\n"
		"               WeChat Pay only: a combine payment (合单支付) whose first\n"
		"               sub-order is --site/--order/--amount and each --combine one\n"
		"               more, of SITE (a site of this configuration: its mchid and\n"
		"               appid), at most 49 times; --event paid only\n\n"
		"Exit status: 0, 64 usage (an unknown provider, site or currency, a bad\n"
		"amount or URL), 78 the site has no test keys or the configuration is\n"
		"broken.\n");
}

/* 'text' for a POSIX shell: single quotes, ' as '\'' */
static void
shell_quote(FILE *f, const char *s, size_t len)
{
	size_t i;

	fputc('\'', f);
	for (i = 0; i < len; i++) {
		if (s[i] == '\'')
			fputs("'\\''", f);
		else
			fputc(s[i], f);
	}
	fputc('\'', f);
}

static bool
parse_kind(const char *s, enum pn_kind *k)
{
	if (strcmp(s, "paid") == 0)
		*k = PN_KIND_PAID;
	else if (strcmp(s, "refund") == 0)
		*k = PN_KIND_REFUND;
	else if (strcmp(s, "closed") == 0)
		*k = PN_KIND_CLOSED;
	else if (strcmp(s, "failed") == 0)
		*k = PN_KIND_FAILED;
	else if (strcmp(s, "dispute") == 0)
		*k = PN_KIND_DISPUTE;
	else if (strcmp(s, "complaint") == 0)
		*k = PN_KIND_COMPLAINT;
	else
		return false;
	return true;
}

/* --event */
static bool
event_arg(const struct pn_arg *arg, const char *value)
{
	if (!parse_kind(value, arg->dest)) {
		fprintf(stderr, "paynotify: --event must be paid, refund, closed, failed, "
			"dispute or complaint\n");
		return false;
	}
	return true;
}

/* --case, --status: an id or a provider's word: printable ASCII, bounded */
static bool
word_arg(const struct pn_arg *arg, const char *value)
{
	size_t	i;

	for (i = 0; value[i]; i++)
		if (value[i] <= ' ' || value[i] > '~' || value[i] == '"' || value[i] == '\\')
			break;
	if (i == 0 || value[i] != '\0' || i > 64) {
		fprintf(stderr, "paynotify: --%s \"%s\": 1 to 64 printable characters, "
			"no blanks or quotes\n", arg->name, value);
		return false;
	}
	*(const char **)arg->dest = value;
	return true;
}

static bool
no_marker_arg(const struct pn_arg *arg, const char *value)
{
	*(const char **)arg->dest = NULL;
	return true;
}

/* --combine, once per further sub-order */
struct combine {
	const char *v[PN_EVENT_MAX_SUBS];
	size_t	n;
};

static bool
combine_arg(const struct pn_arg *arg, const char *value)
{
	struct combine *c = arg->dest;

	if (c->n + 1 >= PN_EVENT_MAX_SUBS) {
		fprintf(stderr, "paynotify: --combine: at most %d sub-orders in one "
			"combine payment\n", PN_EVENT_MAX_SUBS);
		return false;
	}
	c->v[c->n++] = value;
	return true;
}

static int
sign_exec(int argc, char **argv, const char *config_path)
{
	const char *site_name = NULL, *order = NULL, *amount = NULL, *currency = "CNY";
	const char *url = "http://127.0.0.1:8080";
	const struct pn_provider *p;
	pn_sign_fn sign;
	struct pn_sign_req req;
	struct pn_signed out;
	struct pn_config *cfg;
	struct pn_err err;
	struct pn_arena *a;
	char	cur[4];
	struct combine combine = {.n = 0};
	bool	curl = false, marker_set = false, v2 = false;
	const char *marker = NULL;
	int	first, rc;
	size_t	i;
	const struct pn_arg options[] = {
		{"site", required_argument, 0, PN_ARG_STR, .str = &site_name},
		{"order", required_argument, 0, PN_ARG_STR, .str = &order},
		{"amount", required_argument, 0, PN_ARG_STR, .str = &amount},
		{"currency", required_argument, 0, PN_ARG_STR, .str = &currency},
		{"event", required_argument, 0, PN_ARG_CALL, .dest = &req.kind, .set = event_arg},
		{"v2", no_argument, 0, PN_ARG_FLAG, .flag = &v2},
		{"case", required_argument, 0, PN_ARG_CALL, .dest = &req.case_id, .set = word_arg},
		{"status", required_argument, 0, PN_ARG_CALL, .dest = &req.case_status,
		 .set = word_arg},
		{"marker", required_argument, 0, PN_ARG_STR, .str = &marker, .seen = &marker_set},
		{"no-marker", no_argument, 0, PN_ARG_CALL, .dest = &marker, .set = no_marker_arg,
		 .seen = &marker_set},
		{"curl", no_argument, 0, PN_ARG_FLAG, .flag = &curl},
		{"url", required_argument, 0, PN_ARG_STR, .str = &url},
		{"combine", required_argument, 0, PN_ARG_CALL, .dest = &combine,
		 .set = combine_arg},
		PN_ARGS_END,
	};
	/* the argument left is the provider */
	const struct pn_args args = {.cmd = "sign", .help = help, .opts = options,
				     .min_rest = 1, .max_rest = 1, .rest = PN_REST_HELP};

	memset(&req, 0, sizeof(req));
	req.kind = PN_KIND_PAID;
	if ((rc = pn_args_parse(&args, argc, argv, &first)) != PN_ARGS_RUN)
		return rc;
	rc = PN_EXIT_CONFIG;
	if (!site_name || !order || !amount) {
		help(stderr);
		return PN_EXIT_USAGE;
	}
	if (v2)
		req.variant = "v2";
	if (!pn_opt_provider("PROVIDER", argv[first]))
		return PN_EXIT_USAGE;
	p = pn_provider_find(argv[first]);
	if ((sign = pn_signer_find(p->name)) == NULL) {
		fprintf(stderr, "paynotify: provider \"%s\" cannot sign\n", argv[first]);
		return PN_EXIT_USAGE;
	}
	if (combine.n > 0 && strcmp(p->name, "wechatpay") != 0) {
		fprintf(stderr, "paynotify: --combine: only WeChat Pay has combine payments\n");
		return PN_EXIT_USAGE;
	}
	if (*order == '\0') {
		fprintf(stderr, "paynotify: --order: empty order id\n");
		return PN_EXIT_USAGE;
	}
	if (!pn_opt_url("--url", url))
		return PN_EXIT_USAGE;
	if (!pn_money_currency(currency, cur)) {
		fprintf(stderr, "paynotify: --currency \"%s\": unknown currency (an ISO 4217 "
			"code, e.g. CNY, USD, SGD, JPY)\n", currency);
		return PN_EXIT_USAGE;
	}
	if (!pn_money_parse(amount, pn_money_exponent(cur), &req.amount_minor, &err)) {
		fprintf(stderr, "paynotify: --amount: %s\n", err.msg);
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_CONFIG;
	if (!pn_opt_site(cfg, "--site", site_name)) {
		pn_cfg_free(cfg);
		return PN_EXIT_USAGE;
	}
	if (marker != NULL) {
		size_t	n = strlen(marker), k;
		bool	ok = n >= 1 && n <= 255;

		for (k = 0; ok && k < n; k++)
			ok = (unsigned char)marker[k] >= 0x20 && marker[k] != 0x7f;
		if (!ok) {
			fprintf(stderr, "paynotify: --marker must be 1 to 255 printable characters\n");
			pn_cfg_free(cfg);
			return PN_EXIT_USAGE;
		}
	}
	a = pn_arena_new();
	req.site = pn_cfg_site(cfg, site_name);
	if (req.site == NULL || !pn_provider_configured(p, req.site)) {
		fprintf(stderr, "paynotify: site \"%s\" has no %s configuration\n", site_name, p->name);
		goto done;
	}
	if (combine.n > 0) {
		struct pn_sign_sub *subs = pn_arena_alloc(a, combine.n * sizeof(*subs));

		for (i = 0; i < combine.n; i++) {
			const char *sub = combine.v[i];
			const char *c1 = strchr(sub, ':'), *c2 = strrchr(sub, ':');
			const char *sname = c1 ? pn_arena_strndup(a, sub, (size_t)(c1 - sub)) : NULL;

			if (c1 == NULL || c2 == c1 || c2 == c1 + 1 || c2[1] == '\0') {
				fprintf(stderr, "paynotify: --combine \"%s\": expected SITE:ORDER:AMOUNT\n",
					sub);
				rc = PN_EXIT_USAGE;
				goto done;
			}
			subs[i].site = pn_cfg_site(cfg, sname);
			subs[i].order_id = pn_arena_strndup(a, c1 + 1, (size_t)(c2 - c1 - 1));
			if (subs[i].site == NULL || !pn_provider_configured(p, subs[i].site)) {
				fprintf(stderr, "paynotify: --combine: site \"%s\" has no %s "
					"configuration\n", sname, p->name);
				rc = PN_EXIT_USAGE;
				goto done;
			}
			if (!pn_money_parse(c2 + 1, pn_money_exponent(cur), &subs[i].amount_minor,
					    &err)) {
				fprintf(stderr, "paynotify: --combine \"%s\": %s\n", sub, err.msg);
				rc = PN_EXIT_USAGE;
				goto done;
			}
		}
		req.subs = subs;
		req.nsubs = combine.n;
	}
	{
		unsigned char rnd[8];
		FILE   *ur = fopen("/dev/urandom", "rb");

		if (ur == NULL || fread(rnd, 1, sizeof(rnd), ur) != sizeof(rnd)) {
			fprintf(stderr, "paynotify: could not read /dev/urandom\n");
			if (ur)
				fclose(ur);
			rc = PN_EXIT_IOERR;
			goto done;
		}
		fclose(ur);
		req.id = pn_hex_encode(a, rnd, sizeof(rnd), false);
	}
	if (!marker_set) {
		/* the site's own marker for this provider, if it sets one */
		struct pn_cfg_marker mk;

		if (pn_cfg_marker(req.site, p->keys, &mk))
			marker = mk.value;
	}
	req.marker = marker;
	req.arena = a;
	req.order_id = order;
	req.currency = cur;
	req.now = (int64_t)time(NULL);
	if (!sign(&req, &out, &err)) {
		fprintf(stderr, "paynotify: %s\n", err.msg);
		goto done;
	}
	if (curl) {
		printf("printf '%%s' ");
		shell_quote(stdout, out.body, out.body_len);
		printf(" | curl -sS -i -X POST ");
		{
			char *u = pn_arena_printf(a, "%s/notify/%s/%s", url, p->name, site_name);

			shell_quote(stdout, u, strlen(u));
		}
		printf(" -H ");
		{
			char *h = pn_arena_printf(a, "Content-Type: %s", out.content_type);

			shell_quote(stdout, h, strlen(h));
		}
		for (i = 0; i < out.nheaders; i++) {
			char *h = pn_arena_printf(a, "%s: %s", out.headers[i].name, out.headers[i].value);

			printf(" -H ");
			shell_quote(stdout, h, strlen(h));
		}
		printf(" --data-binary @-\n");
	} else {
		printf("POST /notify/%s/%s\nContent-Type: %s\n", p->name, site_name, out.content_type);
		for (i = 0; i < out.nheaders; i++)
			printf("%s: %s\n", out.headers[i].name, out.headers[i].value);
		printf("\n");
		fwrite(out.body, 1, out.body_len, stdout);
		printf("\n");
	}
	rc = PN_EXIT_OK;
done:
	pn_arena_free(a);
	pn_cfg_free(cfg);
	return rc;
}

const struct pn_cmd pn_cmd_sign = {
	"sign", "PROVIDER --site S --order ID --amount N", "print a signed test notification",
	sign_exec, help,
};

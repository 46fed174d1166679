/*
 * cmd_sign.c: paynotify sign — print a complete signed test notification
 * for a sandbox site, like `stripe trigger`.  Only sites with test keys
 * (alipay/wechatpay.test_private_key_file, stripe/2c2p.test_signing) can
 * be signed for.
 */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
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

static int
sign_exec(int argc, char **argv, const char *config_path)
{
	static const struct option longopts[] = {
		{"site", required_argument, NULL, 's'},
		{"order", required_argument, NULL, 'o'},
		{"amount", required_argument, NULL, 'a'},
		{"currency", required_argument, NULL, 'C'},
		{"event", required_argument, NULL, 'e'},
		{"v2", no_argument, NULL, '2'},
		{"case", required_argument, NULL, 'K'},
		{"status", required_argument, NULL, 'S'},
		{"marker", required_argument, NULL, 'm'},
		{"no-marker", no_argument, NULL, 'M'},
		{"curl", no_argument, NULL, 'u'},
		{"url", required_argument, NULL, 'U'},
		{"combine", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
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
	const char *combine[PN_EVENT_MAX_SUBS];
	size_t	ncombine = 0;
	bool	curl = false, marker_set = false;
	const char *marker = NULL;
	int	opt, rc = PN_EXIT_CONFIG;
	size_t	i;

	memset(&req, 0, sizeof(req));
	req.kind = PN_KIND_PAID;
	optind = 0;	/* glibc: 0 re-initialises getopt after main() used it */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': site_name = optarg; break;
		case 'o': order = optarg; break;
		case 'a': amount = optarg; break;
		case 'C': currency = optarg; break;
		case '2': req.variant = "v2"; break;
		case 'm': marker = optarg; marker_set = true; break;
		case 'M': marker = NULL; marker_set = true; break;
		case 'u': curl = true; break;
		case 'U': url = optarg; break;
		case 'K':
		case 'S':
			/* an id or a provider's word: printable ASCII, bounded */
			for (i = 0; optarg[i]; i++)
				if (optarg[i] <= ' ' || optarg[i] > '~' || optarg[i] == '"'
				    || optarg[i] == '\\')
					break;
			if (i == 0 || optarg[i] != '\0' || i > 64) {
				fprintf(stderr, "paynotify: --%s \"%s\": 1 to 64 printable characters, "
					"no blanks or quotes\n", opt == 'K' ? "case" : "status", optarg);
				return PN_EXIT_USAGE;
			}
			if (opt == 'K')
				req.case_id = optarg;
			else
				req.case_status = optarg;
			break;
		case 'c':
			if (ncombine + 1 >= PN_EVENT_MAX_SUBS) {
				fprintf(stderr, "paynotify: --combine: at most %d sub-orders in one "
					"combine payment\n", PN_EVENT_MAX_SUBS);
				return PN_EXIT_USAGE;
			}
			combine[ncombine++] = optarg;
			break;
		case 'e':
			if (!parse_kind(optarg, &req.kind)) {
				fprintf(stderr, "paynotify: --event must be paid, refund, closed, failed, "
					"dispute or complaint\n");
				return PN_EXIT_USAGE;
			}
			break;
		case 'h':
			help(stdout);
			return 0;
		default:
			help(stderr);
			return PN_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc || !site_name || !order || !amount) {
		help(stderr);
		return PN_EXIT_USAGE;
	}
	if (!pn_opt_provider("PROVIDER", argv[optind]))
		return PN_EXIT_USAGE;
	p = pn_provider_find(argv[optind]);
	if ((sign = pn_signer_find(p->name)) == NULL) {
		fprintf(stderr, "paynotify: provider \"%s\" cannot sign\n", argv[optind]);
		return PN_EXIT_USAGE;
	}
	if (ncombine > 0 && strcmp(p->name, "wechatpay") != 0) {
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
	if (ncombine > 0) {
		struct pn_sign_sub *subs = pn_arena_alloc(a, ncombine * sizeof(*subs));

		for (i = 0; i < ncombine; i++) {
			const char *c1 = strchr(combine[i], ':'), *c2 = strrchr(combine[i], ':');
			const char *sname = c1 ? pn_arena_strndup(a, combine[i],
								 (size_t)(c1 - combine[i])) : NULL;

			if (c1 == NULL || c2 == c1 || c2 == c1 + 1 || c2[1] == '\0') {
				fprintf(stderr, "paynotify: --combine \"%s\": expected SITE:ORDER:AMOUNT\n",
					combine[i]);
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
				fprintf(stderr, "paynotify: --combine \"%s\": %s\n", combine[i], err.msg);
				rc = PN_EXIT_USAGE;
				goto done;
			}
		}
		req.subs = subs;
		req.nsubs = ncombine;
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

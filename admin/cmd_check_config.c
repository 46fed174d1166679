/*
 * cmd_check_config.c: paynotify check-config — load the configuration as
 * the receivers would and say what is configured, what expires, and whether
 * the database and its schema are there.
 */
#include "config.h"

#include <getopt.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "query.h"

#define EXPIRY_WARN_DAYS 30

static void
help(FILE *f)
{
	fprintf(f, "usage: paynotify check-config [-c FILE]\n\n"
		"Load the configuration as the receivers do (every key and certificate,\n"
		"secret-file permissions), print each site's providers, key ids, certificate\n"
		"serials and expiry dates (warning within %d days), connect to the database\n"
		"and check the schema version.  Exit 0 when all is well, 3 on any problem\n"
		"(errors name the file and line).\n\n"
		"  -c, --config FILE  the configuration to check (default: the one given\n"
		"                     before the command, $PAYNOTIFY_CONFIG, else the default)\n",
		EXPIRY_WARN_DAYS);
}

static void
print_secrets(const char *what, const struct pn_secret *s, size_t n)
{
	size_t i;

	printf("    %s:", what);
	for (i = 0; i < n; i++)
		printf(" %s", s[i].id);	/* ids only, never the bytes */
	printf("\n");
}

/* Print keys; returns the number of problems (expired certificates). */
static int
print_keys(const char *what, const struct pn_pubkey *k, size_t n, time_t now, int *warnings)
{
	int	problems = 0;
	size_t	i;

	for (i = 0; i < n; i++) {
		printf("    %s: %s (RSA-%d)", what, k[i].id, EVP_PKEY_get_bits(k[i].pkey));
		if (k[i].serial) {
			char	date[32];
			struct tm tm;
			double	days = difftime(k[i].not_after, now) / 86400.0;

			gmtime_r(&k[i].not_after, &tm);
			strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%SZ", &tm);
			printf(" certificate serial %s, expires %s", k[i].serial, date);
			if (days < 0) {
				printf("  ERROR: expired");
				problems++;
			} else if (days < EXPIRY_WARN_DAYS) {
				printf("  WARNING: expires in %.0f days", days);
				(*warnings)++;
			}
		}
		printf("\n");
	}
	return problems;
}

/* The credentials only `paynotify query` loads: load them here too. */
static int
check_query(const struct pn_site *s)
{
	const struct pn_query_provider *const *qp;
	int	problems = 0;

	for (qp = pn_query_providers; *qp; qp++) {
		const char *why = NULL, *url = NULL;
		struct pn_err err;
		void   *creds = NULL;

		if (!(*qp)->configured(s, &why))
			continue;
		if (strcmp((*qp)->name, "alipay") == 0)
			url = s->alipay.query_url;
		else if (strcmp((*qp)->name, "wechatpay") == 0)
			url = s->wechatpay.query_url;
		else if (strcmp((*qp)->name, "stripe") == 0)
			url = s->stripe.query_url;
		else
			url = s->twoc2p.query_url;
		if (!(*qp)->load(s, &creds, &err)) {
			printf("  query %s: ERROR: %s\n", (*qp)->name, err.msg);
			problems++;
			continue;
		}
		printf("  query %s: ok%s%s%s, %s\n", (*qp)->name,
		       (*qp)->describe ? " (" : "", (*qp)->describe ? (*qp)->describe(creds) : "",
		       (*qp)->describe ? ")" : "", url);
		(*qp)->free_creds(creds);
	}
	return problems;
}

static int
check_config_exec(int argc, char **argv, const char *config_path)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct pn_config *cfg;
	struct pn_err err;
	PGconn *conn;
	time_t	now = time(NULL);
	int	opt, problems = 0, warnings = 0, version = 0;
	size_t	i;

	optind = 0;	/* glibc: 0 re-initialises getopt after main() used it */
	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		if (opt == 'c')
			config_path = optarg;
		else if (opt == 'h') {
			help(stdout);
			return 0;
		} else {
			help(stderr);
			return PN_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		help(stderr);
		return PN_EXIT_USAGE;
	}
	if ((cfg = pn_admin_config(config_path)) == NULL)
		return PN_EXIT_FAILURE;
	printf("configuration %s: loaded, %zu site%s\n", cfg->path, cfg->nsites,
	       cfg->nsites == 1 ? "" : "s");
	printf("  statement_timeout_ms %lld, max_body_bytes %lld\n",
	       (long long)cfg->statement_timeout_ms, (long long)cfg->max_body_bytes);
	for (i = 0; i < cfg->nsites; i++) {
		const struct pn_site *s = &cfg->sites[i];

		printf("site %s (line %d)\n", s->name, s->line);
		if (s->alipay.configured) {
			printf("  alipay: app_id %s, seller_id %s, %s%s\n", s->alipay.app_id,
			       s->alipay.seller_id, s->alipay.sign_type == PN_ALIPAY_RSA ? "RSA" : "RSA2",
			       s->alipay.test_key ? ", test signing key" : "");
			problems += print_keys("key", s->alipay.keys, s->alipay.nkeys, now, &warnings);
		}
		if (s->stripe.configured) {
			printf("  stripe: tolerance %lld s%s\n", (long long)s->stripe.tolerance_s,
			       s->stripe.test_signing ? ", test signing on" : "");
			print_secrets("secrets", s->stripe.secrets, s->stripe.nsecrets);
		}
		if (s->wechatpay.configured) {
			printf("  wechatpay: mchid %s, appid %s%s\n", s->wechatpay.mchid,
			       s->wechatpay.appid, s->wechatpay.test_key ? ", test signing key" : "");
			if (s->wechatpay.napiv3_keys)
				print_secrets("APIv3 keys", s->wechatpay.apiv3_keys, s->wechatpay.napiv3_keys);
			if (s->wechatpay.napiv2_keys)
				print_secrets("APIv2 keys", s->wechatpay.apiv2_keys, s->wechatpay.napiv2_keys);
			problems += print_keys("platform certificate", s->wechatpay.certs,
					       s->wechatpay.ncerts, now, &warnings);
			if (s->wechatpay.public_key_id)
				printf("    public key id %s\n", s->wechatpay.public_key_id);
			problems += print_keys("public key", s->wechatpay.public_keys,
					       s->wechatpay.npublic_keys, now, &warnings);
		}
		if (s->twoc2p.configured) {
			printf("  2c2p: merchant_id %s, api %s%s\n", s->twoc2p.merchant_id,
			       s->twoc2p.api == PN_2C2P_REDIRECT ? "redirect" : "jwt",
			       s->twoc2p.test_signing ? ", test signing on" : "");
			print_secrets("secret keys", s->twoc2p.secrets, s->twoc2p.nsecrets);
		}
		problems += check_query(s);
	}
	conn = pn_db_connect(cfg, &err);
	if (conn == NULL || !pn_db_schema_version(conn, &version, &err)) {
		printf("database: ERROR: %s\n", err.msg);
		problems++;
	} else if (version != PN_SCHEMA_VERSION) {
		printf("database: ERROR: schema version %d, this build needs %d: run `paynotify "
		       "migrate`\n", version, PN_SCHEMA_VERSION);
		problems++;
	} else
		printf("database: reachable, schema version %d\n", version);
	PQfinish(conn);
	pn_cfg_free(cfg);
	printf("%d problem%s, %d warning%s\n", problems, problems == 1 ? "" : "s", warnings,
	       warnings == 1 ? "" : "s");
	return problems ? PN_EXIT_FAILURE : PN_EXIT_OK;
}

const struct pn_cmd pn_cmd_check_config = {
	"check-config", "[-c FILE]", "load and check the configuration, keys and database",
	check_config_exec, help,
};

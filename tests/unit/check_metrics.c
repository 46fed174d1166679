/*
 * check_metrics.c: the shared counter region (common/metrics.c): labels,
 * bounded site slots, sharing across fork(), the exposition text.  Each test
 * runs in its own forked process (CK_FORK), so each maps a fresh region.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "metrics.h"
#include "suites.h"

static char *
render(bool db_up)
{
	struct pn_buf b = PN_BUF_INIT;
	char   *out;

	pn_metrics_render(&b, db_up);
	pn_buf_putc(&b, '\0');
	out = strdup(b.data);
	pn_buf_free(&b);
	return out;
}

static void
assert_line(const char *text, const char *line)
{
	char	needle[512];

	snprintf(needle, sizeof(needle), "\n%s\n", line);
	ck_assert_msg(strstr(text, needle) != NULL, "no line \"%s\" in:\n%s", line, text);
}

static struct pn_config *
config_of(size_t n, const char *prefix)
{
	struct pn_config *cfg = calloc(1, sizeof(*cfg));
	size_t	i;

	cfg->sites = calloc(n, sizeof(*cfg->sites));
	cfg->nsites = n;
	for (i = 0; i < n; i++) {
		cfg->sites[i].name = malloc(70);
		snprintf(cfg->sites[i].name, 70, "%s%zu", prefix, i);
	}
	return cfg;
}

static void
config_free(struct pn_config *cfg)
{
	size_t	i;

	for (i = 0; i < cfg->nsites; i++)
		free(cfg->sites[i].name);
	free(cfg->sites);
	free(cfg);
}

START_TEST(test_not_live_without_init)
{
	struct pn_buf b = PN_BUF_INIT;

	ck_assert(!pn_metrics_live());
	pn_metrics_request("a", true, "applied", 200);	/* CGI: no-ops */
	pn_metrics_reload(false);
	pn_metrics_render(&b, true);
	ck_assert_uint_eq(b.len, 0);
	pn_buf_free(&b);
}
END_TEST

START_TEST(test_labels)
{
	struct pn_config *cfg = config_of(2, "shop-");
	struct pn_err err;
	char   *text;

	ck_assert_msg(pn_metrics_init("stripe", &err), "%s", err.msg);
	ck_assert(pn_metrics_live());
	pn_metrics_sites(cfg);
	pn_metrics_request("shop-0", true, "applied", 200);
	pn_metrics_request("shop-0", true, "applied", 200);
	pn_metrics_request("shop-1", true, "rejected", 400);
	pn_metrics_request(NULL, true, "rejected", 404);	/* a name nobody configured */
	pn_metrics_request(NULL, true, "rejected", 404);
	pn_metrics_request(NULL, false, "health", 503);
	pn_metrics_request("shop-1", true, "surprising", 299);
	pn_metrics_request("not-registered", true, "applied", 200);
	text = render(false);
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"shop-0\","
		    "outcome=\"applied\",status=\"200\"} 2");
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"shop-1\","
		    "outcome=\"rejected\",status=\"400\"} 1");
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"(unknown)\","
		    "outcome=\"rejected\",status=\"404\"} 2");
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"(none)\","
		    "outcome=\"health\",status=\"503\"} 1");
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"shop-1\","
		    "outcome=\"other\",status=\"other\"} 1");
	assert_line(text, "paynotify_requests_total{provider=\"stripe\",site=\"(other)\","
		    "outcome=\"applied\",status=\"200\"} 1");
	assert_line(text, "paynotify_database_up{provider=\"stripe\"} 0");
	assert_line(text, "paynotify_last_ingest_timestamp_seconds{provider=\"stripe\"} 0");
	/* only the series that occurred */
	ck_assert(strstr(text, "status=\"413\"") == NULL);
	free(text);
	pn_metrics_ingested();
	text = render(true);
	assert_line(text, "paynotify_database_up{provider=\"stripe\"} 1");
	ck_assert(strstr(text, "paynotify_last_ingest_timestamp_seconds{provider=\"stripe\"} 0\n")
		  == NULL);
	free(text);
	config_free(cfg);
}
END_TEST

/* At most PN_METRICS_MAX_SITES site labels, reloads included. */
START_TEST(test_site_slots_bounded)
{
	struct pn_config *a = config_of(200, "a"), *b = config_of(100, "b");
	struct pn_err err;
	char   *text;

	ck_assert(pn_metrics_init("alipay", &err));
	pn_metrics_sites(a);
	pn_metrics_sites(a);		/* a reload with the same sites adds none */
	pn_metrics_sites(b);		/* 56 of these fit */
	pn_metrics_request("a199", true, "applied", 200);
	pn_metrics_request("b55", true, "applied", 200);
	pn_metrics_request("b56", true, "applied", 200);
	pn_metrics_request("b99", true, "applied", 200);
	text = render(true);
	assert_line(text, "paynotify_requests_total{provider=\"alipay\",site=\"a199\","
		    "outcome=\"applied\",status=\"200\"} 1");
	assert_line(text, "paynotify_requests_total{provider=\"alipay\",site=\"b55\","
		    "outcome=\"applied\",status=\"200\"} 1");
	assert_line(text, "paynotify_requests_total{provider=\"alipay\",site=\"(other)\","
		    "outcome=\"applied\",status=\"200\"} 2");
	free(text);
	config_free(a);
	config_free(b);
}
END_TEST

/* Counts made by forked workers are seen by the parent and each other. */
START_TEST(test_shared_across_fork)
{
	struct pn_config *cfg = config_of(1, "s");
	struct pn_err err;
	pid_t	pids[3];
	int	i, j, status;
	char   *text;

	ck_assert(pn_metrics_init("2c2p", &err));
	pn_metrics_sites(cfg);
	for (i = 0; i < 3; i++) {
		pids[i] = fork();
		ck_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			for (j = 0; j < 10000; j++)
				pn_metrics_request("s0", true, "duplicate", 200);
			_exit(0);
		}
	}
	for (j = 0; j < 10000; j++)
		pn_metrics_request("s0", true, "duplicate", 200);
	for (i = 0; i < 3; i++) {
		ck_assert(waitpid(pids[i], &status, 0) == pids[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	text = render(true);
	assert_line(text, "paynotify_requests_total{provider=\"2c2p\",site=\"s0\","
		    "outcome=\"duplicate\",status=\"200\"} 40000");
	free(text);
	config_free(cfg);
}
END_TEST

/*
 * paynotify_rejections_total by fixed reason (zeros shown for a configured
 * site), and the skew gauges: last value with its sign, |max| raised by
 * concurrent workers (compare-and-swap), never lowered; a site that is not
 * configured gives no skew series.
 */
START_TEST(test_rejections_and_skew)
{
	struct pn_config *cfg = config_of(2, "s");
	struct pn_err err;
	pid_t	pids[3];
	int	i, j, status;
	char   *text;

	ck_assert(pn_metrics_init("stripe", &err));
	pn_metrics_sites(cfg);
	text = render(true);
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"s0\","
		    "reason=\"stale\"} 0");
	ck_assert_msg(strstr(text, "paynotify_clock_skew_seconds{") == NULL, "%s", text);
	ck_assert_msg(strstr(text, "reason=\"(null)\"") == NULL, "%s", text);
	free(text);
	for (i = 0; i < 3; i++) {
		pids[i] = fork();
		ck_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			for (j = 0; j < 1000; j++) {
				pn_metrics_rejected("s0", true, PN_REJECT_STALE);
				pn_metrics_skew("s0", (i + 1) * 1000 + j % 7);	/* max 3006 */
			}
			_exit(0);
		}
	}
	for (i = 0; i < 3; i++) {
		ck_assert(waitpid(pids[i], &status, 0) == pids[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	pn_metrics_skew("s0", -42);		/* our clock behind: negative, |max| kept */
	pn_metrics_skew("s1", -5000);		/* |max| of a negative skew is positive */
	pn_metrics_skew("nosuch", 99999);	/* not configured: nowhere */
	pn_metrics_skew(NULL, 99999);
	pn_metrics_rejected(NULL, true, PN_REJECT_UNKNOWN_SITE);
	pn_metrics_rejected(NULL, false, PN_REJECT_UNKNOWN_SITE);
	pn_metrics_rejected("s1", true, PN_REJECT_BAD_SIGNATURE);
	pn_metrics_rejected("s1", true, PN_REJECT_DEFAULT);	/* not a reason: ignored */
	pn_metrics_rejected("s1", true, (enum pn_reject)PN_REJECT_N);
	text = render(true);
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"s0\","
		    "reason=\"stale\"} 3000");
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"s1\","
		    "reason=\"bad_signature\"} 1");
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"s1\","
		    "reason=\"stale\"} 0");
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"(unknown)\","
		    "reason=\"unknown_site\"} 1");
	assert_line(text, "paynotify_rejections_total{provider=\"stripe\",site=\"(none)\","
		    "reason=\"unknown_site\"} 1");
	ck_assert_msg(strstr(text, "site=\"(none)\",reason=\"stale\"") == NULL, "%s", text);
	assert_line(text, "paynotify_clock_skew_seconds{provider=\"stripe\",site=\"s0\"} -42");
	assert_line(text, "paynotify_clock_skew_abs_max_seconds{provider=\"stripe\",site=\"s0\"} "
		    "3006");
	assert_line(text, "paynotify_clock_skew_seconds{provider=\"stripe\",site=\"s1\"} -5000");
	assert_line(text, "paynotify_clock_skew_abs_max_seconds{provider=\"stripe\",site=\"s1\"} "
		    "5000");
	ck_assert_msg(strstr(text, "99999") == NULL && strstr(text, "nosuch") == NULL, "%s", text);
	ck_assert_msg(strstr(text, "paynotify_clock_skew_sample_timestamp_seconds{provider="
			      "\"stripe\",site=\"s0\"} ") != NULL, "%s", text);
	free(text);
	config_free(cfg);
}
END_TEST

START_TEST(test_supervisor_gauges)
{
	struct pn_err err;
	char   *text;

	ck_assert(pn_metrics_init("wechatpay", &err));
	pn_metrics_workers(4, 3);
	pn_metrics_worker_died();
	pn_metrics_reload(false);
	pn_metrics_reload(true);
	pn_metrics_reload(false);
	text = render(true);
	assert_line(text, "paynotify_workers{provider=\"wechatpay\"} 4");
	assert_line(text, "paynotify_workers_alive{provider=\"wechatpay\"} 3");
	assert_line(text, "paynotify_worker_restarts_total{provider=\"wechatpay\"} 1");
	assert_line(text, "paynotify_config_generation{provider=\"wechatpay\"} 2");
	assert_line(text, "paynotify_config_reloads_total{provider=\"wechatpay\",result=\"ok\"} 1");
	assert_line(text, "paynotify_config_reloads_total{provider=\"wechatpay\","
		    "result=\"refused\"} 2");
	assert_line(text, "paynotify_up{provider=\"wechatpay\"} 1");
	ck_assert(strstr(text, "# TYPE paynotify_requests_total counter\n") != NULL);
	ck_assert(strstr(text, "paynotify_config_last_refused_reload_timestamp_seconds"
			 "{provider=\"wechatpay\"} 0\n") == NULL);
	free(text);
}
END_TEST

Suite *
suite_metrics(void)
{
	Suite  *s = suite_create("metrics");
	TCase  *tc = tcase_create("metrics");

	tcase_add_test(tc, test_not_live_without_init);
	tcase_add_test(tc, test_labels);
	tcase_add_test(tc, test_site_slots_bounded);
	tcase_add_test(tc, test_shared_across_fork);
	tcase_add_test(tc, test_supervisor_gauges);
	tcase_add_test(tc, test_rejections_and_skew);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_pqhosts.c: the host lists of a multi-host conninfo, rotated
 * (common/pqhosts.c; docs/DEPLOYMENT.md "Failover through poolers").
 */
#include "config.h"

#include <string.h>

#include <check.h>

#include "pqhosts.h"
#include "suites.h"

/* The value of key in a NULL-terminated keys/vals pair; the last one wins,
 * as in PQconnectdbParams. */
static const char *
param(const char *const *keys, const char *const *vals, const char *key)
{
	const char *v = NULL;
	size_t	i;

	for (i = 0; keys[i]; i++)
		if (strcmp(keys[i], key) == 0)
			v = vals[i];
	return v;
}

START_TEST(test_one_host_is_not_rotated)
{
	ck_assert_ptr_null(pn_pqhosts_new("host=/tmp/a port=6432 dbname=x"));
	ck_assert_ptr_null(pn_pqhosts_new("dbname=x"));
	ck_assert_ptr_null(pn_pqhosts_new("host='unterminated"));	/* libpq says why later */
	pn_pqhosts_free(NULL);
}
END_TEST

START_TEST(test_rotate_hosts_and_ports)
{
	struct pn_pqhosts *h = pn_pqhosts_new("host=pg-a,pg-b,pg-c port=6432,6433,6434 dbname=shop "
					      "user=paynotify target_session_attrs=any "
					      "application_name=mine");
	const char *fbk[] = {"application_name", "connect_timeout"};
	const char *fbv[] = {"paynotify-stripe", "2"};
	const char *const *k, *const *v;

	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(pn_pqhosts_count(h), 3);
	pn_pqhosts_params(h, 0, fbk, fbv, 2, &k, &v);
	ck_assert_str_eq(param(k, v, "host"), "pg-a,pg-b,pg-c");
	ck_assert_str_eq(param(k, v, "port"), "6432,6433,6434");
	pn_pqhosts_params(h, 1, fbk, fbv, 2, &k, &v);
	ck_assert_str_eq(param(k, v, "host"), "pg-b,pg-c,pg-a");
	ck_assert_str_eq(param(k, v, "port"), "6433,6434,6432");
	ck_assert_str_eq(param(k, v, "dbname"), "shop");
	ck_assert_str_eq(param(k, v, "user"), "paynotify");
	ck_assert_str_eq(param(k, v, "target_session_attrs"), "any");
	/* the fallbacks come first: what the conninfo sets wins */
	ck_assert_str_eq(k[0], "application_name");
	ck_assert_str_eq(param(k, v, "application_name"), "mine");
	ck_assert_str_eq(param(k, v, "connect_timeout"), "2");
	pn_pqhosts_params(h, 5, fbk, fbv, 2, &k, &v);		/* modulo the count */
	ck_assert_str_eq(param(k, v, "host"), "pg-c,pg-a,pg-b");
	ck_assert_int_eq(pn_pqhosts_find(h, "pg-b", "6433"), 1);
	ck_assert_int_eq(pn_pqhosts_find(h, "pg-b", "6432"), -1);
	ck_assert_int_eq(pn_pqhosts_find(h, "pg-x", "6432"), -1);
	ck_assert_int_eq(pn_pqhosts_find(h, NULL, NULL), -1);
	ck_assert_str_eq(pn_pqhosts_name(h, 2), "pg-c");
	pn_pqhosts_free(h);
}
END_TEST

START_TEST(test_one_port_for_all_and_hostaddr)
{
	struct pn_pqhosts *h = pn_pqhosts_new("postgresql://pg-a,pg-b:6432/shop");
	const char *const *k, *const *v;

	ck_assert_ptr_nonnull(h);		/* a URI too */
	pn_pqhosts_params(h, 1, NULL, NULL, 0, &k, &v);
	ck_assert_str_eq(param(k, v, "host"), "pg-b,pg-a");
	ck_assert_str_eq(param(k, v, "port"), "6432,");		/* pg-b:6432, then pg-a (default) */
	pn_pqhosts_free(h);

	h = pn_pqhosts_new("host=a.internal,b.internal hostaddr=10.0.0.1,10.0.0.2 port=5432");
	ck_assert_ptr_nonnull(h);
	pn_pqhosts_params(h, 1, NULL, NULL, 0, &k, &v);
	ck_assert_str_eq(param(k, v, "host"), "b.internal,a.internal");
	ck_assert_str_eq(param(k, v, "hostaddr"), "10.0.0.2,10.0.0.1");
	ck_assert_str_eq(param(k, v, "port"), "5432");		/* one port for all: as is */
	ck_assert_int_eq(pn_pqhosts_find(h, "b.internal", "5432"), 1);
	pn_pqhosts_free(h);

	h = pn_pqhosts_new("hostaddr=10.0.0.1,10.0.0.2,10.0.0.3 port=5432");
	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(pn_pqhosts_count(h), 3);
	ck_assert_int_eq(pn_pqhosts_find(h, "10.0.0.3", "5432"), 2);	/* PQhost: the hostaddr */
	pn_pqhosts_free(h);
}
END_TEST

Suite *
suite_pqhosts(void)
{
	Suite  *s = suite_create("pqhosts");
	TCase  *tc = tcase_create("pqhosts");

	tcase_add_test(tc, test_one_host_is_not_rotated);
	tcase_add_test(tc, test_rotate_hosts_and_ports);
	tcase_add_test(tc, test_one_port_for_all_and_hostaddr);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * runner.c: runs every unit-test suite (make check).
 */
#include "config.h"

#include <stdlib.h>

#include "suites.h"

int
main(void)
{
	SRunner *sr = srunner_create(suite_util());
	int	failed;

	srunner_add_suite(sr, suite_arena());
	srunner_add_suite(sr, suite_log());
	srunner_add_suite(sr, suite_json());
	srunner_add_suite(sr, suite_xml());
	srunner_add_suite(sr, suite_http());
	srunner_add_suite(sr, suite_crypto());
	srunner_add_suite(sr, suite_form());
	srunner_add_suite(sr, suite_money());
	srunner_add_suite(sr, suite_pqhosts());
	srunner_add_suite(sr, suite_cfg());
	srunner_add_suite(sr, suite_store());
	srunner_add_suite(sr, suite_metrics());
	srunner_add_suite(sr, suite_stripe());
	srunner_add_suite(sr, suite_alipay());
	srunner_add_suite(sr, suite_2c2p());
	srunner_add_suite(sr, suite_wechatpay());
	srunner_add_suite(sr, suite_admin());
	srunner_add_suite(sr, suite_args());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

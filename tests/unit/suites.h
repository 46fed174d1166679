/*
 * suites.h: every unit-test suite, one per module (libsigrok style).
 */
#ifndef PN_TEST_SUITES_H
#define PN_TEST_SUITES_H

#include <check.h>

Suite *suite_2c2p(void);
Suite *suite_admin(void);
Suite *suite_alipay(void);
Suite *suite_args(void);
Suite *suite_arena(void);
Suite *suite_cfg(void);
Suite *suite_crypto(void);
Suite *suite_form(void);
Suite *suite_http(void);
Suite *suite_json(void);
Suite *suite_log(void);
Suite *suite_metrics(void);
Suite *suite_money(void);
Suite *suite_pqhosts(void);
Suite *suite_store(void);
Suite *suite_stripe(void);
Suite *suite_util(void);
Suite *suite_wechatpay(void);
Suite *suite_xml(void);

#endif

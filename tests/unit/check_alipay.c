/*
 * check_alipay.c: the signed-content rules and the data-driven Alipay cases
 * in tests/fixtures/alipay (real SDK vectors and our own).
 */
#include "config.h"

#include <string.h>

#include <check.h>
#include <openssl/sha.h>

#include "alipay.h"
#include "alipay/identity.h"
#include "crypto.h"
#include "fixture.h"
#include "statement.h"
#include "suites.h"
#include "unit.h"

static char **cases;
static size_t ncases;

START_TEST(test_alipay_case)
{
	fixture_run_case(&pn_provider_alipay, "alipay", cases[_i]);
}
END_TEST

static char *
content_of(struct pn_arena *a, const char *body, bool v2)
{
	struct pn_form f;
	struct pn_err err;
	size_t	len;

	ck_assert_msg(pn_form_parse(a, body, strlen(body), &f, &err), "%s", err.msg);
	return pn_alipay_sign_content(a, &f, v2, false, &len);
}

/* psp §1.9.C: the exact V1 content, byte for byte. */
START_TEST(test_v1_content_synthetic)
{
	struct pn_arena *a = pn_arena_new();
	char   *body = NULL, *c;
	size_t	len;
	struct pn_err err;
	unsigned char md[64];
	size_t	mdlen;
	struct pn_iov iov;

	ck_assert(pn_read_file(fixture_path("alipay/synthetic-pem.body"), 65536, &body, &len, &err));
	c = content_of(a, body, false);
	ck_assert_str_eq(c,
	    "app_id=2021000000000001&auth_app_id=2021000000000001&buyer_id=2088102177846880&"
	    "buyer_logon_id=tes***@example.com&buyer_pay_amount=88.88&charset=utf-8&"
	    "fund_bill_list=[{\"amount\":\"88.88\",\"fundChannel\":\"ALIPAYACCOUNT\"}]&"
	    "gmt_create=2024-05-20 10:00:01&gmt_payment=2024-05-20 10:00:05&invoice_amount=88.88&"
	    "notify_id=2024052001222100002000000000000001&notify_time=2024-05-20 10:00:06&"
	    "notify_type=trade_status_sync&out_trade_no=ORDER-20240520-0001&"
	    "passback_params=order%3D42&point_amount=0.00&receipt_amount=88.88&"
	    "seller_email=merchant@example.com&seller_id=2088000000000001&"
	    "subject=\xe4\xbc\x9a\xe5\x91\x98+\xe5\xb9\xb4\xe5\x8d\xa1 (test)&total_amount=88.88&"
	    "trade_no=2024052022001400000000000001&trade_status=TRADE_SUCCESS&version=1.0");
	iov.p = c;
	iov.len = strlen(c);
	ck_assert(pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen));
	ck_assert_str_eq(pn_hex_encode(a, md, mdlen, false),
			 "eb933f0498ed926ffb2038ca87bff1123b42e15317fda0a4f9aede2ba21dda70");
	free(body);
	pn_arena_free(a);
}
END_TEST

/* psp §1.9.A: the real notification's V1 content hashes to the known value. */
START_TEST(test_v1_content_yuque)
{
	struct pn_arena *a = pn_arena_new();
	char   *body = NULL, *c;
	size_t	len, mdlen;
	struct pn_err err;
	unsigned char md[64];
	struct pn_iov iov;

	ck_assert(pn_read_file(fixture_path("alipay/yuque-v1.body"), 65536, &body, &len, &err));
	c = content_of(a, body, false);
	iov.p = c;
	iov.len = strlen(c);
	ck_assert(pn_digest(PN_MD_SHA256, &iov, 1, md, &mdlen));
	ck_assert_str_eq(pn_hex_encode(a, md, mdlen, false),
			 "f7ddd6b8ed65cde03339b71735ad29e044d8f3ed0e2659c5156d9ed2acaf1f57");
	/* V2 keeps sign_type */
	ck_assert(strstr(content_of(a, body, true), "&sign_type=RSA2&") != NULL);
	ck_assert(strstr(c, "sign_type") == NULL);
	free(body);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_content_rules)
{
	struct pn_arena *a = pn_arena_new();

	/* empty values dropped, byte order ('_' before letters; prefix first) */
	ck_assert_str_eq(content_of(a, "b=2&a_b=3&a=1&empty=&sign=x&sign_type=RSA2&ab=4", false),
			 "a=1&a_b=3&ab=4&b=2");
	ck_assert_str_eq(content_of(a, "b=2&sign_type=RSA2&sign=x", true), "b=2&sign_type=RSA2");
	{
		struct pn_form f;
		struct pn_err err;
		size_t	len;

		ck_assert(pn_form_parse(a, "b=&a=1&sign=x", 13, &f, &err));
		ck_assert_str_eq(pn_alipay_sign_content(a, &f, false, true, &len), "a=1&b=");
	}
	pn_arena_free(a);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_alipay.answer(0, &res, 200, NULL);
	ck_assert_int_eq(res.body.len, 7);
	ck_assert_str_eq(res.body.data, "success");
	ck_assert_str_eq(res.content_type, "text/plain");
	pn_provider_alipay.answer(0, &res, 503, "db down");
	ck_assert_str_eq(res.body.data, "fail");
	ck_assert_int_eq(res.status, 503);
	pn_buf_free(&res.body);
}
END_TEST

/* ---- the identity (alipay/identity.c): where receiver, query and reconcile meet ---- */

/* A receiver's event: the fixture's request through the real paynotify-alipay code. */
static void
notification(struct pn_arena *a, const char *name, const struct pn_site **site,
	     struct pn_event *ev)
{
	ck_assert_int_eq(fixture_verify(&pn_provider_alipay, "alipay", name, a, site, ev),
			 PN_VERIFIED);
}

/* A query answer's event, its fact filled as admin/query_alipay.c fills it. */
static void
query_answer(struct pn_arena *a, const char *trade_no, const char *otn, const char *status,
	     const char *total, struct pn_event *ev, struct pn_alipay_amounts *am)
{
	struct pn_alipay_fact f;

	memset(&f, 0, sizeof(f));
	f.trade_no = trade_no;
	f.out_trade_no = otn;
	f.trade_status = status;
	f.total_amount = total;
	pn_event_init(ev);
	pn_alipay_identity(a, &f, ev, am);
}

/* A bill row's event: admin/statement_alipay.c itself. */
static void
bill_row(struct pn_arena *a, const struct pn_site *site, enum pn_stmt_kind kind,
	 const char *trade_no, const char *otn, const char *refund_id, int64_t amount,
	 int64_t order_amount, int64_t refunded_after, struct pn_event *ev)
{
	struct pn_stmt_txn t;

	memset(&t, 0, sizeof(t));
	t.kind = kind;
	t.psp_txn_id = trade_no;
	t.order_id = otn;
	t.refund_id = refund_id;
	t.amount_minor = amount;
	memcpy(t.currency, "CNY", 4);
	t.time = "2024-05-20 10:00:06";
	pn_stmt_alipay.event(a, site, &t, order_amount, refunded_after, ev);
}

START_TEST(test_identity_payment_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, q, b;
	struct pn_alipay_amounts am;

	notification(a, "no-trans-currency-cny", &site, &n);
	ck_assert_str_eq(n.dedup_key, "2024T1:TRADE_SUCCESS");
	ck_assert_int_eq(n.kind, PN_KIND_PAID);
	query_answer(a, "2024T1", "T1", "TRADE_SUCCESS", "1.00", &q, &am);
	ck_assert(am.currency_ok && am.total_ok);
	bill_row(a, site, PN_STMT_PAYMENT, "2024T1", "T1", NULL, 100, 100, 0, &b);
	unit_same_identity("notification / query answer", &n, &q);
	unit_same_identity("notification / bill row", &n, &b);
	ck_assert_str_eq(b.source, "statement");
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_refund_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, b;

	/* part refunded: TRADE_SUCCESS, out_biz_no names it, refund_fee the running total */
	notification(a, "partial-refund", &site, &n);
	ck_assert_str_eq(n.dedup_key, "2024T1:TRADE_SUCCESS:refund:R1");
	bill_row(a, site, PN_STMT_REFUND, "2024T1", "T1", "R1", 30, 100, 30, &b);
	unit_same_identity("partial refund", &n, &b);
	/* all refunded: TRADE_CLOSED */
	notification(a, "full-refund", &site, &n);
	ck_assert_str_eq(n.dedup_key, "2024T1:TRADE_CLOSED:refund:R2");
	bill_row(a, site, PN_STMT_REFUND, "2024T1", "T1", "R2", 100, 100, 100, &b);
	unit_same_identity("full refund", &n, &b);
	/* no out_biz_no: keyed by refund_fee, which the bill writes as Alipay does */
	notification(a, "refund-by-fee", &site, &n);
	ck_assert_str_eq(n.dedup_key, "2024T1:TRADE_SUCCESS:refund:0.40");
	bill_row(a, site, PN_STMT_REFUND, "2024T1", "T1", NULL, 40, 100, 40, &b);
	unit_same_identity("refund without out_biz_no", &n, &b);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_rules)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_alipay_fact f;
	struct pn_alipay_amounts am;
	struct pn_event ev;
	static const struct {
		const char *status;
		enum pn_kind kind;
	} kinds[] = {
		{"TRADE_SUCCESS", PN_KIND_PAID}, {"TRADE_FINISHED", PN_KIND_PAID},
		{"TRADE_CLOSED", PN_KIND_CLOSED}, {"WAIT_BUYER_PAY", PN_KIND_PENDING},
		{"TRADE_PENDING", PN_KIND_IGNORED},
	};
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(kinds); i++) {
		query_answer(a, "2088", "T9", kinds[i].status, "9.99", &ev, &am);
		ck_assert_msg(ev.kind == kinds[i].kind, "%s", kinds[i].status);
		ck_assert_str_eq(ev.dedup_key, pn_arena_printf(a, "2088:%s", kinds[i].status));
		ck_assert_int_eq(ev.amount_minor, 999);
	}
	/* no trade_no: the seller's order id, under "otn:" */
	query_answer(a, NULL, "T9", "TRADE_SUCCESS", "9.99", &ev, &am);
	ck_assert_str_eq(ev.dedup_key, "otn:T9:TRADE_SUCCESS");
	ck_assert_ptr_null(ev.psp_txn_id);
	/* a refund's fallbacks: out_biz_no, refund_fee, notify_id, the sign */
	memset(&f, 0, sizeof(f));
	f.trade_no = "2088";
	f.out_trade_no = "T9";
	f.trade_status = "TRADE_SUCCESS";
	f.refund = true;
	f.notify_id = "n7";
	f.sign = "c2lnbg==";
	pn_event_init(&ev);
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert_str_eq(ev.dedup_key, "2088:TRADE_SUCCESS:refund:notify:n7");
	ck_assert_int_eq(ev.kind, PN_KIND_REFUND);
	ck_assert(ev.refund_cumulative);
	ck_assert(!am.refund_ok);
	f.notify_id = NULL;
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert_str_eq(ev.dedup_key, "2088:TRADE_SUCCESS:refund:c2lnbg==");
	f.refund_fee = "0.50";
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert_str_eq(ev.dedup_key, "2088:TRADE_SUCCESS:refund:0.50");
	ck_assert(am.refund_ok);
	ck_assert_int_eq(ev.refund_minor, 50);
	f.out_biz_no = "RB";
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert_str_eq(ev.dedup_key, "2088:TRADE_SUCCESS:refund:RB");
	/* amounts in trans_currency; an unknown one is never guessed */
	f.refund = false;
	f.trans_currency = "JPY";
	f.total_amount = "1000";
	pn_event_init(&ev);
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert_str_eq(ev.currency, "JPY");
	ck_assert_int_eq(ev.amount_minor, 1000);
	f.trans_currency = "jpy";
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert(!am.currency_ok);
	ck_assert_ptr_null(ev.currency);
	ck_assert_int_eq(ev.amount_minor, -1);
	ck_assert_str_eq(ev.dedup_key, "2088:TRADE_SUCCESS");	/* the key never depends on it */
	f.trans_currency = NULL;
	f.total_amount = "1.234";
	pn_alipay_identity(a, &f, &ev, &am);
	ck_assert(am.currency_ok && !am.total_ok);
	ck_assert(am.total_err.msg[0] != '\0');
	ck_assert_int_eq(ev.amount_minor, -1);
	/* complaints: per message (receiver), per state (query) */
	ck_assert_str_eq(pn_alipay_complaint_key(a, "C1", "n9", NULL, NULL),
			 "complaint:C1:changed:n9");
	ck_assert_str_eq(pn_alipay_complaint_key(a, "C1", NULL, "FINISHED", "2088"),
			 "complaint:C1:state:FINISHED:2088");
	ck_assert_str_eq(pn_alipay_complaint_key(a, "C1", NULL, "CLOSED", NULL),
			 "complaint:C1:state:CLOSED:-");
	pn_arena_free(a);
}
END_TEST

Suite *
suite_alipay(void)
{
	Suite  *s = suite_create("alipay");
	TCase  *tc = tcase_create("alipay");

	ncases = fixture_cases("alipay", &cases);
	tcase_add_test(tc, test_v1_content_synthetic);
	tcase_add_test(tc, test_v1_content_yuque);
	tcase_add_test(tc, test_content_rules);
	tcase_add_test(tc, test_answers);
	tcase_add_loop_test(tc, test_alipay_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	tc = tcase_create("identity");
	tcase_add_test(tc, test_identity_payment_meets);
	tcase_add_test(tc, test_identity_refund_meets);
	tcase_add_test(tc, test_identity_rules);
	suite_add_tcase(s, tc);
	return s;
}

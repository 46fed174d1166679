/*
 * check_stripe.c: Stripe-Signature parsing and the data-driven Stripe
 * cases in tests/fixtures/stripe (SDK known answers and our own).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "fixture.h"
#include "statement.h"
#include "stripe.h"
#include "stripe/identity.h"
#include "suites.h"
#include "unit.h"

static char **cases;
static size_t ncases;

START_TEST(test_stripe_case)
{
	fixture_run_case(&pn_provider_stripe, "stripe", cases[_i]);
}
END_TEST

START_TEST(test_header_elements)
{
	struct pn_stripe_sig sig;
	struct pn_err err;

	ck_assert(pn_stripe_parse_header(" t=12 , v1=" "2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7 ,v0=ab,x=y",
					 &sig, &err));
	ck_assert_int_eq(sig.t, 12);
	ck_assert_str_eq(sig.t_text, "12");
	ck_assert_int_eq(sig.nv1, 1);
	/* upper-case hex decodes to the same bytes (stripe-go compares bytes) */
	ck_assert(pn_stripe_parse_header("t=1,v1=2220F87EF101A04665F11CDF770523143F875572008577FA0F20882DDB9CC3C7",
					 &sig, &err));
	ck_assert_int_eq(sig.nv1, 1);
	ck_assert(!pn_stripe_parse_header("", &sig, &err));
	ck_assert(!pn_stripe_parse_header("v1=aa", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=1,v1=a=b", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=-1", &sig, &err));
	ck_assert(!pn_stripe_parse_header("t=1234567890123456789", &sig, &err));
}
END_TEST

START_TEST(test_many_v1_bounded)
{
	struct pn_buf b = PN_BUF_INIT;
	struct pn_stripe_sig sig;
	struct pn_err err;
	int	i;

	pn_buf_puts(&b, "t=1");
	for (i = 0; i < 40; i++)
		pn_buf_puts(&b, ",v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7");
	ck_assert(pn_stripe_parse_header(b.data, &sig, &err));
	ck_assert_int_eq(sig.nv1, 16);
	pn_buf_free(&b);
}
END_TEST

START_TEST(test_duplicate_header_refused)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_request req;
	struct pn_event ev;
	struct pn_err err;
	const struct pn_site *site = pn_cfg_site(fixture_config(), "stripe-old");
	struct pn_verify_ctx vc = {&req, site, a, 0, false, 0, NULL};

	memset(&req, 0, sizeof(req));
	req.body = (const unsigned char *)"{}";
	req.body_len = 2;
	req.headers[0].name = "Stripe-Signature";
	req.headers[0].value = "t=1,v1=00";
	req.headers[0].duplicate = true;
	req.nheaders = 1;
	pn_event_init(&ev);
	ck_assert_int_eq(pn_provider_stripe.verify(&vc, &ev, &err), PN_UNVERIFIED);
	ck_assert(strstr(err.msg, "more than one") != NULL);
	req.nheaders = 0;
	ck_assert_int_eq(pn_provider_stripe.verify(&vc, &ev, &err), PN_UNVERIFIED);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_stripe.answer(0, &res, 200, NULL);
	ck_assert_int_eq(res.status, 200);
	pn_provider_stripe.answer(0, &res, 400, "bad \"quoted\" reason");
	ck_assert_int_eq(res.status, 400);
	ck_assert_str_eq(res.body.data, "{\"error\":\"bad \\\"quoted\\\" reason\"}");
	pn_buf_free(&res.body);
}
END_TEST

/* ---- the identity (stripe/identity.c): where receiver, query and reconcile meet ---- */

/* The event a fixture's request gets from the real paynotify-stripe code, and its
 * data.object (json_decref it). */
static json_t *
notification(struct pn_arena *a, const char *name, const struct pn_site **site,
	     struct pn_event *ev)
{
	char	rel[256], *body = NULL;
	size_t	len = 0;
	struct pn_err err;
	json_t *root, *obj;

	ck_assert_int_eq(fixture_verify(&pn_provider_stripe, "stripe", name, a, site, ev),
			 PN_VERIFIED);
	snprintf(rel, sizeof(rel), "stripe/%s.body", name);
	ck_assert(pn_read_file(fixture_path(rel), 1 << 20, &body, &len, &err));
	root = json_loadb(body, len, 0, NULL);
	free(body);
	ck_assert_ptr_nonnull(root);
	obj = json_incref(json_object_get(json_object_get(root, "data"), "object"));
	json_decref(root);
	return obj;
}

static void
bill_row(struct pn_arena *a, const struct pn_site *site, enum pn_stmt_kind kind,
	 const char *pi, const char *order, const char *refund_id, int64_t amount,
	 const char *currency, int64_t refunded_after, struct pn_event *ev)
{
	struct pn_stmt_txn t;

	memset(&t, 0, sizeof(t));
	t.kind = kind;
	t.psp_txn_id = pi;
	t.order_id = order;
	t.refund_id = refund_id;
	t.amount_minor = amount;
	memcpy(t.currency, currency, 4);
	t.time = "2023-11-14 22:13:20";
	pn_stmt_stripe.event(a, site, &t, -1, refunded_after, ev);
}

START_TEST(test_identity_payment_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, q, b;
	struct pn_stripe_fact f;
	struct pn_stripe_result r;
	json_t *pi = notification(a, "pi-succeeded-bhd", &site, &n);

	ck_assert_str_eq(n.dedup_key, "evt_pi_succeeded_bhd");
	/* the PaymentIntent as `paynotify query` reads it (admin/query_stripe.c) */
	memset(&f, 0, sizeof(f));
	f.type = "payment_intent.succeeded";
	f.obj = pi;
	pn_event_init(&q);
	pn_stripe_identity(a, &f, &q, &r);
	ck_assert_ptr_null(r.amount_why);
	ck_assert_str_eq(q.dedup_key, "query:pi_2:succeeded");
	/* the balance report's charge row (admin/statement_stripe.c) */
	bill_row(a, site, PN_STMT_PAYMENT, "pi_2", "BH-1", NULL, 1230, "BHD", 0, &b);
	unit_same_identity("query answer / bill row", &q, &b);
	/* the notification keys on its evt_ id, by design: the rest is the same, and
	 * whichever comes second finds the order already_applied */
	q.dedup_key = n.dedup_key;
	unit_same_identity("notification / query answer", &n, &q);
	json_decref(pi);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_refund_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, b;
	json_t *ch = notification(a, "charge-refunded-partial", &site, &n);

	bill_row(a, site, PN_STMT_REFUND, "pi_test_0001", NULL, "re_1", 500, "USD", 500, &b);
	ck_assert_str_eq(b.dedup_key, "refund:re_1");
	/* both the running total: the second adds nothing, though the keys differ */
	ck_assert_int_eq(n.kind, PN_KIND_REFUND);
	ck_assert_int_eq(b.kind, PN_KIND_REFUND);
	ck_assert(n.refund_cumulative && b.refund_cumulative);
	ck_assert_int_eq(n.refund_minor, 500);
	ck_assert_int_eq(b.refund_minor, 500);
	ck_assert_str_eq(n.psp_txn_id, b.psp_txn_id);
	ck_assert_str_eq(n.currency, b.currency);
	ck_assert_str_eq(n.event_type, b.event_type);
	json_decref(ch);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_rules)
{
	static const struct {
		const char *type, *object;
		enum pn_kind kind;
		bool	unhandled;
	} types[] = {
		{"payment_intent.succeeded",
		 "{\"id\":\"pi_1\",\"amount\":100,\"currency\":\"usd\"}", PN_KIND_PAID, false},
		{"payment_intent.payment_failed", "{\"id\":\"pi_1\"}", PN_KIND_FAILED, false},
		{"checkout.session.completed", "{\"payment_status\":\"paid\",\"amount_total\":5,"
		 "\"currency\":\"eur\",\"payment_intent\":\"pi_1\"}", PN_KIND_PAID, false},
		{"checkout.session.completed", "{\"payment_status\":\"unpaid\"}", PN_KIND_PENDING,
		 false},
		{"checkout.session.async_payment_failed", "{}", PN_KIND_FAILED, false},
		{"checkout.session.expired", "{}", PN_KIND_CLOSED, false},
		{"checkout.session.something_new", "{}", PN_KIND_IGNORED, true},
		{"charge.refunded", "{\"amount\":100,\"amount_refunded\":40,\"currency\":\"usd\","
		 "\"payment_intent\":{\"id\":\"pi_1\"}}", PN_KIND_REFUND, false},
		{"charge.dispute.created", "{\"id\":\"dp_1\",\"status\":\"needs_response\","
		 "\"amount\":100,\"currency\":\"usd\",\"charge\":\"ch_1\"}", PN_KIND_DISPUTE, false},
		{"charge.succeeded", "{}", PN_KIND_IGNORED, false},
		{"refund.updated", "{\"status\":\"failed\"}", PN_KIND_IGNORED, true},
		{"invoice.paid", "{}", PN_KIND_IGNORED, true},
	};
	struct pn_arena *a = pn_arena_new();
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(types); i++) {
		struct pn_stripe_fact f;
		struct pn_stripe_result r;
		struct pn_event ev;
		json_t *obj = json_loads(types[i].object, 0, NULL);

		ck_assert_ptr_nonnull(obj);
		memset(&f, 0, sizeof(f));
		f.event_id = "evt_1";
		f.type = types[i].type;
		f.obj = obj;
		pn_event_init(&ev);
		pn_stripe_identity(a, &f, &ev, &r);
		ck_assert_msg(ev.kind == types[i].kind, "%s: %s", types[i].type,
			      pn_kind_name(ev.kind));
		ck_assert_msg(r.unhandled == types[i].unhandled, "%s", types[i].type);
		ck_assert_ptr_null(r.amount_why);
		ck_assert_str_eq(ev.dedup_key, ev.kind == PN_KIND_DISPUTE
				 ? "dispute:dp_1:charge.dispute.created:needs_response" : "evt_1");
		if (ev.kind == PN_KIND_REFUND) {
			ck_assert(ev.refund_cumulative);
			ck_assert_int_eq(ev.refund_minor, 40);
			ck_assert_str_eq(ev.psp_txn_id, "pi_1");
		}
		json_decref(obj);
	}
	{
		/* an amount that is not exact is said, for the caller to flag */
		struct pn_stripe_fact f;
		struct pn_stripe_result r;
		struct pn_event ev;
		json_t *obj = json_loads("{\"id\":\"pi_9\",\"amount\":100,\"currency\":\"xyz\"}", 0,
					 NULL);

		memset(&f, 0, sizeof(f));
		f.type = "payment_intent.succeeded";
		f.obj = obj;
		pn_event_init(&ev);
		pn_stripe_identity(a, &f, &ev, &r);
		ck_assert_ptr_nonnull(r.amount_why);
		ck_assert_str_eq(ev.dedup_key, "query:pi_9:succeeded");
		json_decref(obj);
	}
	pn_arena_free(a);
}
END_TEST

Suite *
suite_stripe(void)
{
	Suite  *s = suite_create("stripe");
	TCase  *tc = tcase_create("stripe");

	ncases = fixture_cases("stripe", &cases);
	tcase_add_test(tc, test_header_elements);
	tcase_add_test(tc, test_many_v1_bounded);
	tcase_add_test(tc, test_duplicate_header_refused);
	tcase_add_test(tc, test_answers);
	tcase_add_loop_test(tc, test_stripe_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	tc = tcase_create("identity");
	tcase_add_test(tc, test_identity_payment_meets);
	tcase_add_test(tc, test_identity_refund_meets);
	tcase_add_test(tc, test_identity_rules);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_2c2p.c: the 2C2P adapter: psp §B14 known answers (the JWT guide
 * sample verifies only with the key's ASCII bytes; the legacy SHA1
 * vector), the literal-amount scanner, the respCode table, the answers,
 * and the data-driven cases in tests/fixtures/2c2p (psp §B15 and ours).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "2c2p.h"
#include "crypto.h"
#include "fixture.h"
#include "json.h"
#include "suites.h"
#include "unit.h"

#define GUIDE_KEY "1F4EDB965BBB3094F791A83750FBDCDA3852131CB5218E21E4F42929A1975E60"
#define GUIDE_JWT                                                                                 \
	"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJtZXJjaGFudElEIjoiSlQwMSIsImludm9pY2VObyI6IjE1Mj" \
	"M5NTM2NjEiLCJkZXNjcmlwdGlvbiI6Iml0ZW0gMSIsImFtb3VudCI6MTAwMCwiY3VycmVuY3lDb2RlIjoiU0dE" \
	"In0.ElmhOULUdK63FnriSs2XyhH1LxULoTVIopTUuQ77DvA"
#define GUIDE_PAYLOAD                                                                              \
	"{\"merchantID\":\"JT01\",\"invoiceNo\":\"1523953661\",\"description\":\"item 1\","        \
	"\"amount\":1000,\"currencyCode\":\"SGD\"}"

static char **cases;
static size_t ncases;

START_TEST(test_2c2p_case)
{
	fixture_run_case(&pn_provider_2c2p, "2c2p", cases[_i]);
}
END_TEST

static bool
verify_with(struct pn_arena *a, const void *key, size_t keylen, const char *jwt,
	    unsigned char **payload, size_t *plen, struct pn_err *err)
{
	struct pn_secret s = {"k:1", (unsigned char *)key, keylen, 1};
	const char *key_id = NULL;

	return pn_2c2p_verify_jwt(a, jwt, strlen(jwt), &s, 1, payload, plen, &key_id, err);
}

/* psp §B14.1 / §B15.1-2: ASCII key verifies; hex-decoded and lower-case do not. */
START_TEST(test_guide_key_is_ascii)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char raw[32], *payload = NULL;
	char	lower[65];
	size_t	n = 0, plen = 0, i;
	struct pn_err err;

	ck_assert_msg(verify_with(a, GUIDE_KEY, 64, GUIDE_JWT, &payload, &plen, &err), "%s",
		      err.msg);
	ck_assert_uint_eq(plen, strlen(GUIDE_PAYLOAD));
	ck_assert_str_eq((const char *)payload, GUIDE_PAYLOAD);

	ck_assert(pn_hex_decode(GUIDE_KEY, 64, raw, sizeof(raw), &n) && n == 32);
	ck_assert(!verify_with(a, raw, 32, GUIDE_JWT, &payload, &plen, &err));
	for (i = 0; i < 64; i++)
		lower[i] = (char)(GUIDE_KEY[i] >= 'A' && GUIDE_KEY[i] <= 'F' ? GUIDE_KEY[i] + 32
								     : GUIDE_KEY[i]);
	lower[64] = '\0';
	ck_assert(!verify_with(a, lower, 64, GUIDE_JWT, &payload, &plen, &err));
	pn_arena_free(a);
}
END_TEST

START_TEST(test_jwt_bounds)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char *payload;
	size_t	plen, big = PN_2C2P_MAX_JWT + 1;
	char   *huge = malloc(big + 1);
	struct pn_err err;

	memset(huge, 'A', big);
	huge[10] = huge[20] = '.';
	huge[big] = '\0';
	ck_assert(!verify_with(a, GUIDE_KEY, 64, huge, &payload, &plen, &err));
	ck_assert(strstr(err.msg, "too long") != NULL);
	ck_assert(!verify_with(a, GUIDE_KEY, 64, "", &payload, &plen, &err));
	ck_assert(!verify_with(a, GUIDE_KEY, 64, "..", &payload, &plen, &err));
	ck_assert(!verify_with(a, GUIDE_KEY, 64, GUIDE_JWT ".", &payload, &plen, &err));
	/* an embedded NUL never reaches the HMAC */
	{
		const char *key_id;
		struct pn_secret s = {"k:1", (unsigned char *)GUIDE_KEY, 64, 1};
		char	buf[sizeof(GUIDE_JWT)];

		memcpy(buf, GUIDE_JWT, sizeof(buf));
		buf[5] = '\0';
		ck_assert(!pn_2c2p_verify_jwt(a, buf, sizeof(buf) - 1, &s, 1, &payload, &plen,
					      &key_id, &err));
	}
	free(huge);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_raw_member)
{
	const char *v;
	size_t	n;
	static const char doc[] =
	    " { \"a\" : {\"amount\": 1, \"x\": [1, {\"y\": \"}\"}]}, \"s\": \"q\\\"}\", "
	    "\"amount\" : 19.990 , \"t\":true}";

	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "amount", &v, &n));
	ck_assert_uint_eq(n, 6);
	ck_assert(memcmp(v, "19.990", 6) == 0);
	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "t", &v, &n) && n == 4);
	ck_assert(pn_2c2p_raw_member(doc, strlen(doc), "s", &v, &n) && n == 6);
	ck_assert(!pn_2c2p_raw_member(doc, strlen(doc), "y", &v, &n));
	ck_assert(!pn_2c2p_raw_member(doc, strlen(doc), "am", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"\\u0061mount\":1}", strlen("{\"\\u0061mount\":1}"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("[1]", strlen("[1]"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{}", strlen("{}"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"amount\"", strlen("{\"amount\""), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"amount\":", strlen("{\"amount\":"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"a\":\"unterminated", strlen("{\"a\":\"unterminated"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("{\"a\":[1,2", strlen("{\"a\":[1,2"), "amount", &v, &n));
	ck_assert(!pn_2c2p_raw_member("", strlen(""), "amount", &v, &n));
	/* only the given length is read */
	ck_assert(!pn_2c2p_raw_member("{\"amount\":1}", 8, "amount", &v, &n));
}
END_TEST

static const struct {
	const char *code;
	enum pn_kind kind;
} kinds[] = {
	{"0000", PN_KIND_PAID},	   {"0001", PN_KIND_PENDING}, {"2001", PN_KIND_PENDING},
	{"0003", PN_KIND_CLOSED},  {"4001", PN_KIND_FAILED},  {"4051", PN_KIND_FAILED},
	{"4999", PN_KIND_FAILED},  {"4000", PN_KIND_IGNORED}, {"4200", PN_KIND_IGNORED},
	{"0004", PN_KIND_IGNORED}, {"0999", PN_KIND_IGNORED}, {"2000", PN_KIND_IGNORED},
	{"2002", PN_KIND_IGNORED}, {"9015", PN_KIND_IGNORED}, {"5xyz", PN_KIND_IGNORED},
	{"4x51", PN_KIND_IGNORED}, {"000", PN_KIND_IGNORED},  {"00000", PN_KIND_IGNORED},
	{"", PN_KIND_IGNORED},	   {" 000", PN_KIND_IGNORED}, {NULL, PN_KIND_IGNORED},
};

START_TEST(test_resp_code_table)
{
	ck_assert_msg(pn_2c2p_kind(kinds[_i].code) == kinds[_i].kind, "respCode \"%s\"",
		      kinds[_i].code ? kinds[_i].code : "(null)");
}
END_TEST

/* psp §B14.3: the legacy content string and its HMAC-SHA1. */
START_TEST(test_legacy_vector)
{
	static const char body[] =
	    "version=7.0&request_timestamp=2024-01-01+12%3A00%3A00&merchant_id=JT01&order_id=ORDER42"
	    "&invoice_no=&currency=702&amount=000000001999&transaction_ref=1234567&approval_code="
	    "123456&eci=05&transaction_datetime=2024-01-01+12%3A00%3A05&payment_channel=001"
	    "&payment_status=000&channel_response_code=00&channel_response_desc=success"
	    "&masked_pan=411111XXXXXX1111&hash_value=ignored&not_signed=x";
	struct pn_arena *a = pn_arena_new();
	struct pn_form f;
	struct pn_err err;
	unsigned char mac[64];
	size_t	len, maclen;
	char   *content;
	struct pn_iov iov;

	ck_assert(pn_form_parse(a, body, strlen(body), &f, &err));
	content = pn_2c2p_redirect_content(a, &f, &len);
	ck_assert_str_eq(content, "7.02024-01-01 12:00:00JT01ORDER42702000000001999123456712345605"
				  "2024-01-01 12:00:0500100000success411111XXXXXX1111");
	ck_assert_uint_eq(len, strlen(content));
	iov = (struct pn_iov){content, len};
	ck_assert(pn_hmac(PN_MD_SHA1, "TESTSECRET", 10, &iov, 1, mac, &maclen));
	ck_assert_str_eq(pn_hex_encode(a, mac, maclen, false),
			 "e6057e5c42fa46942495a4758719ba36f16dd58f");
	pn_arena_free(a);
}
END_TEST

/*
 * pn_2c2p_redirect_check on one field replaced in the §B14.3 form: the
 * field formats (docs/2C2P.md "Field formats"), each bound and one step past
 * it.  value NULL removes the field.  Signed cases: tests/fixtures/2c2p.
 */
static const struct {
	const char *field, *value;
	bool	ok;
	bool	invoice_is_order;
} formats[] = {
	{"version", "7.0", true, false}, {"version", "10.25", true, false},
	{"version", "7", false, false}, {"version", "7.0.1", false, false},
	{"version", "100.25", false, false}, {"version", NULL, false, false},
	{"request_timestamp", "2024-02-29 23:59:59", true, false},
	{"request_timestamp", "2023-02-29 12:00:00", false, false},
	{"request_timestamp", "2024-04-31 12:00:00", false, false},
	{"request_timestamp", "2024-01-01 12:00:60", false, false},
	{"request_timestamp", "2024-01-01_12:00:00", false, false},
	{"request_timestamp", NULL, false, false},
	{"merchant_id", "JT_sub-01", true, false},
	{"merchant_id", "1234567890123456789012345", true, false},
	{"merchant_id", "12345678901234567890123456", false, false},
	{"order_id", "12345678901234567890123456789012345678901234567890", true, false},
	{"order_id", "123456789012345678901234567890123456789012345678901", false, false},
	{"order_id", "ORD 42", false, false}, {"order_id", "ORD:42", false, false},
	{"order_id", "", false, false},
	{"invoice_no", "", true, false}, {"invoice_no", "ORDER42", false, false},
	{"invoice_no", "ORDER42", true, true}, {"invoice_no", "ORDER4", false, true},
	{"invoice_no", "", false, true},
	{"currency", "392", true, false}, {"currency", "999", false, false},
	{"currency", "70", false, false}, {"currency", "SGD", false, false},
	{"amount", "000000000000", true, false}, {"amount", "00000000199", false, false},
	{"amount", "0000000001999", false, false}, {"amount", "+00000001999", false, false},
	{"transaction_ref", "1234567890123456789012345678", true, false},
	{"transaction_ref", "12345678901234567890123456789", false, false},
	/* no reference while approval_code and eci are there: refused (issue 23) */
	{"transaction_ref", NULL, false, false}, {"transaction_ref", "T-1", false, false},
	{"approval_code", "1234567", false, false}, {"approval_code", "12345", false, false},
	{"approval_code", "A1b2C3", true, false}, {"approval_code", NULL, true, false},
	{"eci", "123", false, false}, {"eci", "7", false, false}, {"eci", NULL, true, false},
	{"transaction_datetime", "2024-01-01 12:00:05 ", false, false},
	{"transaction_datetime", NULL, false, false},
	{"payment_channel", "001002", false, false}, {"payment_channel", "01", false, false},
	{"payment_channel", NULL, false, false},
	{"payment_status", "000", true, false}, {"payment_status", "0000", false, false},
	{"payment_status", "00", false, false}, {"payment_status", NULL, false, false},
	{"channel_response_code", "12345678", true, false},
	{"channel_response_code", "123456789", false, false},
	{"channel_response_desc", "ok\x7f", false, false},
	{"channel_response_desc", "ok\x01", false, false},
	{"masked_pan", "4111111111111111111", true, false},
	{"masked_pan", "41111111111111111111", false, false},
	{"ippInterestRate", "0.80", true, false}, {"ippInterestRate", "0..8", false, false},
	{"ippInterestType", "A", true, false}, {"ippInterestType", "AA", false, false},
};

START_TEST(test_redirect_formats)
{
	static const char *base[][2] = {
		{"version", "7.0"}, {"request_timestamp", "2024-01-01 12:00:00"},
		{"merchant_id", "JT01"}, {"order_id", "ORDER42"}, {"invoice_no", ""},
		{"currency", "702"}, {"amount", "000000001999"}, {"transaction_ref", "1234567"},
		{"approval_code", "123456"}, {"eci", "05"},
		{"transaction_datetime", "2024-01-01 12:00:05"}, {"payment_channel", "001"},
		{"payment_status", "000"}, {"channel_response_code", "00"},
		{"channel_response_desc", "success"}, {"masked_pan", "411111XXXXXX1111"},
	};
	struct pn_arena *a = pn_arena_new();
	struct pn_form f;
	struct pn_err err;
	size_t	i, n = 0;
	bool	seen = false, ok;

	f.fields = pn_arena_alloc(a, (PN_ARRAY_LEN(base) + 1) * sizeof(*f.fields));
	for (i = 0; i < PN_ARRAY_LEN(base); i++) {
		const char *v = base[i][1];

		if (strcmp(base[i][0], formats[_i].field) == 0) {
			seen = true;
			v = formats[_i].value;
			if (formats[_i].invoice_is_order && strcmp(base[i][0], "invoice_no") != 0)
				v = base[i][1];
		} else if (formats[_i].invoice_is_order && strcmp(base[i][0], "invoice_no") == 0)
			v = "ORDER42";
		if (v == NULL)
			continue;
		f.fields[n].key = base[i][0];
		f.fields[n].value = v;
		f.fields[n++].value_len = strlen(v);
	}
	if (!seen && formats[_i].value != NULL) {
		f.fields[n].key = formats[_i].field;
		f.fields[n].value = formats[_i].value;
		f.fields[n++].value_len = strlen(formats[_i].value);
	}
	f.n = n;
	memset(&err, 0, sizeof(err));
	ok = pn_2c2p_redirect_check(a, &f, formats[_i].invoice_is_order, &err);
	ck_assert_msg(ok == formats[_i].ok, "%s=\"%s\"%s: expected %s, got %s (%s)",
		      formats[_i].field, formats[_i].value ? formats[_i].value : "(absent)",
		      formats[_i].invoice_is_order ? " (invoice_no = order_id site)" : "",
		      formats[_i].ok ? "accepted" : "refused", ok ? "accepted" : "refused", err.msg);
	if (!ok)	/* the reason names the field */
		ck_assert_msg(strstr(err.msg, formats[_i].field) != NULL, "%s", err.msg);
	pn_arena_free(a);
}
END_TEST

/*
 * pn_2c2p_redirect_splits: the ways transaction_ref + approval_code + eci
 * can be read (approval_code "" or 6, eci "" or 2 digits, transaction_ref
 * 1..28 for the rest; issue 23).
 */
START_TEST(test_redirect_splits)
{
	/* 1234567|123456|05, 12345671234|56|05 ... */
	ck_assert_uint_eq(pn_2c2p_redirect_splits("123456712345605"), 4);
	ck_assert_uint_eq(pn_2c2p_redirect_splits("1234567123456"), 4);	/* no eci */
	ck_assert_uint_eq(pn_2c2p_redirect_splits("12345671234AB"), 2);	/* AB: no eci */
	ck_assert_uint_eq(pn_2c2p_redirect_splits("88A"), 1);
	ck_assert_uint_eq(pn_2c2p_redirect_splits("8805"), 2);		/* 8805, 88|05 */
	ck_assert_uint_eq(pn_2c2p_redirect_splits("05"), 1);		/* no empty tref */
	ck_assert_uint_eq(pn_2c2p_redirect_splits(""), 1);
	/* 28 + 6 + 2: only the full split leaves transaction_ref at most 28 */
	ck_assert_uint_eq(pn_2c2p_redirect_splits("1111111111111111111111111111123456"
						  "05"), 1);
	ck_assert_uint_eq(pn_2c2p_redirect_splits("11111111111111111111111111111123456"
						  "05"), 0);
}
END_TEST

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	pn_provider_2c2p.answer(0, &res, 200, NULL);
	ck_assert_int_eq(res.status, 200);
	ck_assert_str_eq(res.content_type, "application/json");
	ck_assert_str_eq(res.body.data, "{\"status\":\"received\"}");
	pn_provider_2c2p.answer(0, &res, 400, "signature verification failed");
	ck_assert_int_eq(res.status, 400);
	ck_assert_str_eq(res.body.data, "{\"error\":\"signature verification failed\"}");
	pn_provider_2c2p.answer(0, &res, 503, NULL);
	ck_assert_int_eq(res.status, 503);
	ck_assert_str_eq(res.body.data, "{\"error\":\"failed\"}");
	pn_buf_free(&res.body);
	ck_assert_str_eq(pn_provider_2c2p.name, "2c2p");
	ck_assert_str_eq(pn_provider_2c2p.program, "paynotify-2c2p");
	ck_assert_int_eq(PN_UNVERIFIED_STATUS, 400);
	ck_assert_ptr_eq(pn_provider_find("2c2p"), &pn_provider_2c2p);
}
END_TEST

/* A site that is not configured for 2C2P is not served. */
START_TEST(test_configured)
{
	const struct pn_config *cfg = fixture_config();

	ck_assert(pn_provider_configured(&pn_provider_2c2p, pn_cfg_site(cfg, "2c2p-jt01")));
	ck_assert(!pn_provider_configured(&pn_provider_2c2p, pn_cfg_site(cfg, "stripe-old")));
	ck_assert_int_eq(pn_cfg_site(cfg, "2c2p-jt01")->twoc2p.api, PN_2C2P_JWT);
	ck_assert_int_eq(pn_cfg_site(cfg, "2c2p-legacy")->twoc2p.api, PN_2C2P_REDIRECT);
}
END_TEST

/* ---- the identity (2c2p/identity.c): where receiver, query and reconcile meet ---- */

START_TEST(test_identity_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, q;
	struct pn_err err;
	char	*body = NULL;
	size_t	len = 0, plen;
	unsigned char *payload;
	const char *key_id;
	json_t *root;

	ck_assert_int_eq(fixture_verify(&pn_provider_2c2p, "2c2p", "amount-string", a, &site, &n),
			 PN_VERIFIED);
	ck_assert_str_eq(n.dedup_key, "INV-1:0000:T-1");
	/* the same payload as a paymentInquiry answer (admin/query_2c2p.c; reconcile
	 * --by-query ingests that answer's event as it is) */
	ck_assert(pn_read_file(fixture_path("2c2p/amount-string.body"), 1 << 20, &body, &len,
			       &err));
	root = json_loadb(body, len, 0, NULL);
	free(body);
	ck_assert_ptr_nonnull(root);
	ck_assert(pn_2c2p_verify_jwt(a, json_string_value(json_object_get(root, "payload")),
				     json_string_length(json_object_get(root, "payload")),
				     site->twoc2p.secrets, site->twoc2p.nsecrets, &payload, &plen,
				     &key_id, &err));
	json_decref(root);
	pn_event_init(&q);
	ck_assert_int_eq(pn_2c2p_normalise(a, NULL, site, payload, plen, 0, "query:INV-1", &q,
					   &err), PN_VERIFIED);
	unit_same_identity("notification / paymentInquiry answer", &n, &q);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_rules)
{
	static const struct {
		const char *status;
		enum pn_kind kind;
	} statuses[] = {
		{"000", PN_KIND_PAID}, {"001", PN_KIND_PENDING}, {"002", PN_KIND_FAILED},
		{"003", PN_KIND_FAILED}, {"999", PN_KIND_FAILED}, {"004", PN_KIND_IGNORED},
		{"0000", PN_KIND_IGNORED},
	};
	struct pn_arena *a = pn_arena_new();
	struct pn_2c2p_fact f;
	struct pn_event ev;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(statuses); i++)
		ck_assert_msg(pn_2c2p_redirect_kind(statuses[i].status) == statuses[i].kind, "%s",
			      statuses[i].status);
	memset(&f, 0, sizeof(f));
	f.invoice_no = "INV-9";
	f.code = "4051";
	f.unkeyed = "jwt:sig";
	pn_event_init(&ev);
	pn_2c2p_identity(a, &f, &ev);
	ck_assert_int_eq(ev.kind, PN_KIND_FAILED);
	ck_assert_str_eq(ev.dedup_key, "INV-9:4051:");	/* no tranRef: empty, not "-" */
	ck_assert_str_eq(ev.event_type, "4051");
	ck_assert_str_eq(ev.order_id, "INV-9");
	f.code = NULL;
	pn_event_init(&ev);
	pn_2c2p_identity(a, &f, &ev);
	ck_assert_int_eq(ev.kind, PN_KIND_IGNORED);
	ck_assert_str_eq(ev.dedup_key, "jwt:sig");
	memset(&f, 0, sizeof(f));
	f.redirect = true;
	f.invoice_no = "ORD-1";
	f.code = "000";
	f.hash_hex = "ab12";
	pn_event_init(&ev);
	pn_2c2p_identity(a, &f, &ev);
	ck_assert_int_eq(ev.kind, PN_KIND_PAID);
	ck_assert_str_eq(ev.dedup_key, "ORD-1:000:ab12");
	pn_arena_free(a);
}
END_TEST

Suite *
suite_2c2p(void)
{
	Suite  *s = suite_create("2c2p");
	TCase  *tc = tcase_create("2c2p");

	ncases = fixture_cases("2c2p", &cases);
	tcase_add_test(tc, test_guide_key_is_ascii);
	tcase_add_test(tc, test_jwt_bounds);
	tcase_add_test(tc, test_raw_member);
	tcase_add_loop_test(tc, test_resp_code_table, 0, (int)PN_ARRAY_LEN(kinds));
	tcase_add_test(tc, test_legacy_vector);
	tcase_add_test(tc, test_redirect_splits);
	tcase_add_loop_test(tc, test_redirect_formats, 0, (int)PN_ARRAY_LEN(formats));
	tcase_add_test(tc, test_answers);
	tcase_add_test(tc, test_configured);
	tcase_add_loop_test(tc, test_2c2p_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	tc = tcase_create("identity");
	tcase_add_test(tc, test_identity_meets);
	tcase_add_test(tc, test_identity_rules);
	suite_add_tcase(s, tc);
	return s;
}

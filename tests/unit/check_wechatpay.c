/*
 * check_wechatpay.c: WeChat Pay known answers (psp notes §2.10.A, §2.10.B,
 * §3.4.A, §3.4.B, §3.9), the flat XML parser, answers, and the
 * data-driven cases in tests/fixtures/wechatpay.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "crypto.h"
#include "fixture.h"
#include "statement.h"
#include "suites.h"
#include "unit.h"
#include "wechatpay.h"
#include "wechatpay/identity.h"
#include "xml.h"

static char **cases;
static size_t ncases;
static struct pn_arena *A;

static void
setup(void)
{
	A = pn_arena_new();
}

static void
teardown(void)
{
	pn_arena_free(A);
}

START_TEST(test_wechatpay_case)
{
	fixture_run_case(&pn_provider_wechatpay, "wechatpay", cases[_i]);
}
END_TEST

static const char *
fixture_text(const char *rel, size_t *len)
{
	char   *text = NULL;
	struct pn_err err;

	const char *copy;

	ck_assert_msg(pn_read_file(fixture_path(rel), 1 << 20, &text, len, &err), "%s", err.msg);
	copy = pn_arena_memdup(A, text, *len + 1);
	free(text);
	return copy;
}

static struct pn_secret
secret(const char *s)
{
	struct pn_secret k = {"test", (unsigned char *)s, strlen(s), 1};

	return k;
}

/* ---- API v2 signatures ------------------------------------------------ */

/* psp §3.4.A: the v2 security spec's own example (also WxJava SignUtilsTest). */
START_TEST(test_v2_official_vector)
{
	static const char xml[] =
	    "<xml><appid>wxd930ea5d5a258f4f</appid><mch_id>10000100</mch_id>"
	    "<device_info>1000</device_info><body>test</body>"
	    "<nonce_str>ibuaiVcKdpRxkhJA</nonce_str><sign>ignored</sign><empty> </empty></xml>";
	struct pn_secret key = secret("192006250b4c09247ec02edce69f6a2d");
	struct pn_xml_flat x;
	struct pn_err err;

	ck_assert_msg(pn_xml_parse_flat(A, xml, strlen(xml), "xml", &x, &err), "%s", err.msg);
	ck_assert_str_eq(pn_wechatpay_v2_sign(A, &x, PN_WXV2_MD5, &key),
			 "9A0A8659F005D6984697E2CA0A9CF3B7");
	ck_assert_str_eq(pn_wechatpay_v2_sign(A, &x, PN_WXV2_HMAC_SHA256, &key),
			 "6A9AE1657590FD6257D693A078E1C3E4BB6BA4DC30B23E0EE2496E54170DACD6");
}
END_TEST

/* psp §3.9: MD5, HMAC-SHA256 of the same string, and with a sign_type field. */
START_TEST(test_v2_synthetic_vector)
{
	struct pn_secret key = secret("TestAPIv2Key0123456789abcdefABCD");
	struct pn_xml_flat x;
	struct pn_err err;
	size_t	len;
	const char *body = fixture_text("wechatpay/v2-md5.body", &len);

	ck_assert_msg(pn_xml_parse_flat(A, body, len, "xml", &x, &err), "%s", err.msg);
	ck_assert_str_eq(pn_wechatpay_v2_sign(A, &x, PN_WXV2_MD5, &key),
			 "3919A323079762A2E04464A83E88A164");
	ck_assert_str_eq(pn_wechatpay_v2_sign(A, &x, PN_WXV2_HMAC_SHA256, &key),
			 "6532E94F20151E8B864CF9517650564A481B44B6203AE84F2E9D3C02B96A76F2");
	body = fixture_text("wechatpay/v2-hmac.body", &len);
	ck_assert_msg(pn_xml_parse_flat(A, body, len, "xml", &x, &err), "%s", err.msg);
	ck_assert_str_eq(pn_xml_get(&x, "sign_type"), "HMAC-SHA256");
	ck_assert_str_eq(pn_wechatpay_v2_sign(A, &x, PN_WXV2_HMAC_SHA256, &key),
			 "5EC6A853A51E101DDE7B44BDA86660D69BA715127D2D6083C8B1F106E5D22F7C");
}
END_TEST

/* psp §3.4.B: the refund key and the gopay req_info vector. */
START_TEST(test_v2_refund_vector)
{
	struct pn_secret key = secret("ziR0QKsTUfMOuochC9RfCdmfHECorQAP");
	unsigned char aes[32], *raw, *plain;
	size_t	rawlen, plen, len;
	struct pn_xml_flat outer, in;
	struct pn_err err;
	const char *body = fixture_text("wechatpay/v2-refund.body", &len), *req_info;

	ck_assert(pn_wechatpay_v2_refund_key(&key, aes));
	ck_assert(memcmp(aes, "a1fdc4d1da9fb443b1091d34bcee9493", 32) == 0);
	ck_assert_msg(pn_xml_parse_flat(A, body, len, "xml", &outer, &err), "%s", err.msg);
	req_info = pn_xml_get(&outer, "req_info");
	ck_assert(pn_b64_decode(A, req_info, strlen(req_info), &raw, &rawlen));
	ck_assert(pn_aes256ecb_decrypt(A, aes, raw, rawlen, &plain, &plen));
	ck_assert_uint_eq(rawlen - plen, 12);	/* the last byte was 0x0C */
	ck_assert(strncmp((char *)plain, "<root>\n<out_refund_no><![CDATA[50fd012ed1b311e7af7800163e"
			  "32c503]]></out_refund_no>", 80) == 0);
	ck_assert_msg(pn_xml_parse_flat(A, plain, plen, "root", &in, &err), "%s", err.msg);
	ck_assert_uint_eq(in.n, 13);
	ck_assert_str_eq(pn_xml_get(&in, "refund_recv_accout"), "支付用户零钱");
	ck_assert_str_eq(pn_xml_get(&in, "refund_fee"), "6");
	ck_assert_str_eq(pn_xml_get(&in, "transaction_id"), "4200000015201711256947025404");
}
END_TEST

/* ---- API v3 ---------------------------------------------------------- */

/* psp §2.10.A, signature half: wechatpay-go's own certificate and request. */
START_TEST(test_v3_gosdk_signature)
{
	const struct pn_site *site = pn_cfg_site(fixture_config(), "wx-gosdk");
	size_t	len, siglen, mdlen;
	const char *body = fixture_text("wechatpay/gosdk-vector.body", &len);
	static const char sig64[] =
	    "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyX"
	    "FlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9"
	    "FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmP"
	    "QvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrF"
	    "mtxw2Q==";
	struct pn_iov iov[3] = {{"1624523846\nEcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz\n", 44},
				{body, len}, {"\n", 1}};
	unsigned char *sig, md[64];

	ck_assert_uint_eq(len, 568);
	ck_assert_uint_eq(site->wechatpay.ncerts, 1);
	ck_assert_str_eq(site->wechatpay.certs[0].serial, "D7CE59D1F522D701");
	ck_assert(pn_digest(PN_MD_SHA256, iov, 3, md, &mdlen));
	ck_assert_str_eq(pn_hex_encode(A, md, mdlen, false),
			 "d2c90663606e98fc711012c768a5150ff0f953e4bccecc69395f4fe977dc4257");
	ck_assert(pn_b64_decode(A, sig64, strlen(sig64), &sig, &siglen));
	ck_assert(pn_rsa_verify(site->wechatpay.certs[0].pkey, PN_MD_SHA256, iov, 3, sig, siglen));
	sig[0] ^= 1;
	ck_assert(!pn_rsa_verify(site->wechatpay.certs[0].pkey, PN_MD_SHA256, iov, 3, sig, siglen));
}
END_TEST

/* Through the adapter: the signature passes, decryption is what fails. */
START_TEST(test_v3_gosdk_through_adapter)
{
	const struct pn_site *site = pn_cfg_site(fixture_config(), "wx-gosdk");
	struct pn_request req;
	struct pn_event ev;
	struct pn_err err;
	size_t	len;
	const char *body = fixture_text("wechatpay/gosdk-vector.body", &len);
	struct pn_verify_ctx vc = {&req, site, A, 1624523846, true, 0, NULL};

	memset(&req, 0, sizeof(req));
	req.body = (const unsigned char *)body;
	req.body_len = len;
	req.headers[0] = (struct pn_header){"Wechatpay-Timestamp", "1624523846", false};
	req.headers[1] = (struct pn_header){"Wechatpay-Nonce", "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz",
					    false};
	req.headers[2] = (struct pn_header){"Wechatpay-Serial", "D7CE59D1F522D701", false};
	req.headers[3] = (struct pn_header){
	    "Wechatpay-Signature",
	    "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyX"
	    "FlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9"
	    "FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmP"
	    "QvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrF"
	    "mtxw2Q==", false};
	req.nheaders = 4;
	pn_event_init(&ev);
	ck_assert_int_eq(pn_provider_wechatpay.verify(&vc, &ev, &err), PN_UNVERIFIED);
	ck_assert_msg(strstr(err.msg, "could not decrypt") != NULL, "%s", err.msg);
	/* a second header of the same name is refused before anything else */
	req.headers[3].duplicate = true;
	ck_assert_int_eq(pn_provider_wechatpay.verify(&vc, &ev, &err), PN_UNVERIFIED);
	ck_assert_msg(strstr(err.msg, "more than one") != NULL, "%s", err.msg);
}
END_TEST

/* §2.10.A, decryption half: its key is 16 bytes (AES-128), which we refuse. */
START_TEST(test_v3_16_byte_key_refused)
{
	char	dir[] = "/tmp/pn-wx-XXXXXX", path[128], conf[128];
	FILE   *f;
	struct pn_err err;
	struct pn_config *cfg;
	unsigned char key[32] = "testMchAPIv3Key0", *raw, *out;
	size_t	len, rawlen, outlen;
	const char *body = fixture_text("wechatpay/gosdk-vector.body", &len), *ct;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/apiv3", dir);
	ck_assert((f = fopen(path, "w")) != NULL);
	fputs("testMchAPIv3Key0\n", f);
	fclose(f);
	chmod(path, 0600);
	snprintf(conf, sizeof(conf), "%s/pn.conf", dir);
	ck_assert((f = fopen(conf, "w")) != NULL);
	fprintf(f, "[site s]\nwechatpay.mchid = 1\nwechatpay.appid = a\n"
		"wechatpay.apiv3_key_file = apiv3\nwechatpay.platform_cert_files = %s\n",
		fixture_path("unit/keys/wx-go-sdk.crt"));
	fclose(f);
	cfg = pn_cfg_load(conf, &err);
	ck_assert(cfg == NULL);
	ck_assert_msg(strstr(err.msg, "it must be exactly 32") != NULL, "%s", err.msg);
	unlink(path);
	unlink(conf);
	rmdir(dir);
	/* the 16 bytes zero-padded to an AES-256 key do not open it either */
	ct = strstr(body, "\"ciphertext\":\"") + 14;
	ck_assert(pn_b64_decode(A, ct, (size_t)(strchr(ct, '"') - ct), &raw, &rawlen));
	ck_assert(!pn_aes256gcm_decrypt(A, key, "Kj7QIyUiYx1q", 12, "payscore", 8, raw, rawlen, &out,
					&outlen));
}
END_TEST

/* §2.10.B: AES-256-GCM known answer. */
START_TEST(test_v3_synthetic_decrypt)
{
	static const unsigned char key[] = "TestAPIv3Key0123456789abcdefABCD";
	static const char want[] =
	    "{\"mchid\":\"1900000109\",\"appid\":\"wxd678efh567hg6787\",\"out_trade_no\":\"ORDER-"
	    "20240520-0001\",\"transaction_id\":\"4200000000202405200000000001\",\"trade_type\":"
	    "\"JSAPI\",\"trade_state\":\"SUCCESS\",\"trade_state_desc\":\"支付成功\",\"bank_type\":"
	    "\"OTHERS\",\"attach\":\"\",\"success_time\":\"2024-05-20T10:00:05+08:00\",\"payer\":"
	    "{\"openid\":\"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o\"},\"amount\":{\"total\":8888,\"payer_total\""
	    ":8888,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}";
	size_t	len, rawlen, outlen;
	const char *body = fixture_text("wechatpay/pub-vector.body", &len), *ct;
	unsigned char *raw, *out;

	ck_assert_uint_eq(len, 901);
	ct = strstr(body, "\"ciphertext\":\"") + 14;
	ck_assert(pn_b64_decode(A, ct, (size_t)(strchr(ct, '"') - ct), &raw, &rawlen));
	ck_assert_str_eq(pn_hex_encode(A, raw + rawlen - 16, 16, false),
			 "24eff93515a1cc6c6693a76f73ce4d91");
	ck_assert(pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "transaction", 11, raw, rawlen,
				       &out, &outlen));
	ck_assert_uint_eq(outlen, strlen(want));
	ck_assert_str_eq((char *)out, want);
	ck_assert(!pn_aes256gcm_decrypt(A, key, "fdasflkja484", 12, "refund", 6, raw, rawlen, &out,
					&outlen));
}
END_TEST

/* ---- the flat XML parser ---------------------------------------------- */

static bool
xml_ok(const char *s, struct pn_xml_flat *x)
{
	struct pn_err err;

	return pn_xml_parse_flat(A, s, strlen(s), "xml", x, &err);
}

START_TEST(test_xml_values)
{
	struct pn_xml_flat x;

	ck_assert(xml_ok("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<xml a=\"1\">\n"
			 "<!-- a comment --><v>a<![CDATA[<b>&amp;]]>c&amp;&#x4e2d;</v>\n"
			 "<e></e><f/></xml>\n", &x));
	ck_assert_uint_eq(x.n, 3);
	ck_assert_str_eq(pn_xml_get(&x, "v"), "a<b>&amp;c&中");
	ck_assert_str_eq(pn_xml_get(&x, "e"), "");
	ck_assert_str_eq(pn_xml_get(&x, "f"), "");
	ck_assert(pn_xml_get(&x, "g") == NULL);
}
END_TEST

START_TEST(test_xml_refusals)
{
	static const char *bad[] = {
		"", "<xml>", "<XML></XML>", "<xml><a>1</a><a>2</a></xml>", "<xml><a><b/></a></xml>",
		"<xml>text<a>1</a></xml>", "<!DOCTYPE xml><xml/>", "<!DoCtYpE xml><xml/>",
		"<xml><a>&ent;</a></xml>", "<xml><a>1</a></xml><xml/>", "<xml><?pi x?><a>1</a></xml>",
		"<x:xml xmlns:x=\"urn:x\"/>", "<xml>\x01</xml>", NULL};
	struct pn_xml_flat x;
	struct pn_buf b = PN_BUF_INIT;
	const char **p;
	int	i;

	for (p = bad; *p; p++)
		ck_assert_msg(!xml_ok(*p, &x), "accepted \"%s\"", *p);
	/* 128 fields are fine, 129 are not */
	pn_buf_puts(&b, "<xml>");
	for (i = 0; i < PN_XML_MAX_FIELDS; i++)
		pn_buf_printf(&b, "<f%d>x</f%d>", i, i);
	pn_buf_puts(&b, "</xml>");
	ck_assert(xml_ok(b.data, &x));
	ck_assert_uint_eq(x.n, PN_XML_MAX_FIELDS);
	pn_buf_reset(&b);
	pn_buf_puts(&b, "<xml>");
	for (i = 0; i <= PN_XML_MAX_FIELDS; i++)
		pn_buf_printf(&b, "<f%d>x</f%d>", i, i);
	pn_buf_puts(&b, "</xml>");
	ck_assert(!xml_ok(b.data, &x));
	/* larger than the bound */
	pn_buf_reset(&b);
	pn_buf_puts(&b, "<xml><a>");
	for (i = 0; i < PN_XML_MAX_BYTES / 8; i++)
		pn_buf_puts(&b, "xxxxxxxx");
	pn_buf_puts(&b, "</a></xml>");
	ck_assert(!xml_ok(b.data, &x));
	pn_buf_free(&b);
}
END_TEST

/* ---- answers ------------------------------------------------------------- */

START_TEST(test_answers)
{
	struct pn_response res = {0, NULL, PN_BUF_INIT};
	struct pn_request req;

	memset(&req, 0, sizeof(req));
	/* v3 (and anything unreadable without an XML hint): status decides */
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 200, NULL);
	ck_assert_int_eq(res.status, 204);
	ck_assert(res.content_type == NULL);
	ck_assert_uint_eq(res.body.len, 0);
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 400, "signature \"verification\" failed");
	ck_assert_int_eq(res.status, 400);
	ck_assert_str_eq(res.content_type, "application/json");
	ck_assert_str_eq(res.body.data,
			 "{\"code\":\"FAIL\",\"message\":\"signature \\\"verification\\\" failed\"}");
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 503, NULL);
	ck_assert_int_eq(res.status, 503);
	ck_assert_str_eq(res.body.data, "{\"code\":\"FAIL\",\"message\":\"failed\"}");

	/* v2: the body decides, status 200 on success */
	req.body = (const unsigned char *)"\xEF\xBB\xBF \n<xml></xml>";
	req.body_len = strlen((const char *)req.body);
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 200, NULL);
	ck_assert_int_eq(res.status, 200);
	ck_assert_str_eq(res.content_type, "text/xml");
	ck_assert_str_eq(res.body.data, "<xml><return_code><![CDATA[SUCCESS]]></return_code>"
			 "<return_msg><![CDATA[OK]]></return_msg></xml>");
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 503, "db down ]]> <x>\n");
	ck_assert_int_eq(res.status, 503);
	ck_assert_str_eq(res.body.data, "<xml><return_code><![CDATA[FAIL]]></return_code>"
			 "<return_msg><![CDATA[db down > <x>]]></return_msg></xml>");
	/* a body too large to read: Content-Type hints v2, Wechatpay-* headers v3 */
	req.body = NULL;
	req.body_len = 0;
	req.content_type = "text/xml; charset=UTF-8";
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 413, "body too large");
	ck_assert_str_eq(res.content_type, "text/xml");
	req.headers[0] = (struct pn_header){"Wechatpay-Signature", "x", false};
	req.nheaders = 1;
	pn_provider_wechatpay.answer(pn_provider_wechatpay.variant(&req), &res, 413, "body too large");
	ck_assert_str_eq(res.content_type, "application/json");
	pn_buf_free(&res.body);
}
END_TEST

/* A v2 combine payment result, signed with the wx-v2 site's APIv2 key. */
static enum pn_verdict
v2_combine(const char *cotn, const char *list, struct pn_event *ev)
{
	const struct pn_site *site = pn_cfg_site(fixture_config(), "wx-v2");
	struct pn_secret key = secret("TestAPIv2Key0123456789abcdefABCD");
	struct pn_xml_field f[8] = {
		{"return_code", "SUCCESS", 7}, {"combine_appid", "wx2421b1c4370ec43b", 18},
		{"combine_mch_id", "10000100", 8}, {"nonce_str", "n1", 2},
		{"combine_out_trade_no", cotn, strlen(cotn)}, {"result_code", "SUCCESS", 7},
		{"sub_order_list", list, strlen(list)}, {"sign", NULL, 0}};
	struct pn_xml_flat x = {f, 7};
	struct pn_request req;
	struct pn_err err;
	struct pn_verify_ctx vc = {&req, site, A, 0, false, 0, NULL};
	struct pn_buf b = PN_BUF_INIT;
	size_t	i;

	f[7].value = pn_wechatpay_v2_sign(A, &x, PN_WXV2_MD5, &key);
	f[7].value_len = strlen(f[7].value);
	pn_buf_puts(&b, "<xml>");
	for (i = 0; i < 8; i++)
		pn_buf_printf(&b, "<%s><![CDATA[%s]]></%s>", f[i].name, f[i].value, f[i].name);
	pn_buf_puts(&b, "</xml>");
	memset(&req, 0, sizeof(req));
	req.body = pn_arena_memdup(A, b.data, b.len);
	req.body_len = b.len;
	pn_buf_free(&b);
	pn_event_init(ev);
	return pn_provider_wechatpay.verify(&vc, ev, &err);
}

/* Issue 22: a v2 combine payment is one event per sub-order, never "-:SUCCESS". */
START_TEST(test_v2_combine_sub_orders)
{
	struct pn_event ev, ev2;

	ck_assert_int_eq(v2_combine("C1", "{\"order_num\":3,\"order_list\":["
				    "{\"appid\":\"wx2421b1c4370ec43b\",\"mch_id\":\"10000100\","
				    "\"total_fee\":101,\"transaction_id\":\"4201\","
				    "\"out_trade_no\":\"A1\"},"
				    "{\"appid\":\"wx2421b1c4370ec43b\",\"mch_id\":\"10000199\","
				    "\"total_fee\":\"202\",\"transaction_id\":\"4202\","
				    "\"out_trade_no\":\"B1\"},"
				    "{\"appid\":\"wx2421b1c4370ec43b\",\"mch_id\":\"10000100\","
				    "\"total_fee\":303,\"out_trade_no\":\"A2\"}]}", &ev), PN_VERIFIED);
	ck_assert_uint_eq(ev.nsubs, 3);
	ck_assert_int_eq(ev.kind, PN_KIND_IGNORED);
	ck_assert(strncmp(ev.dedup_key, "combine:", 8) == 0);
	ck_assert_str_eq(ev.subs[0].dedup_key, "4201:SUCCESS");
	ck_assert_int_eq(ev.subs[0].kind, PN_KIND_PAID);
	ck_assert_str_eq(ev.subs[0].order_id, "A1");
	ck_assert_int_eq(ev.subs[0].amount_minor, 101);
	ck_assert_ptr_null(ev.subs[0].flag);
	ck_assert_ptr_null(ev.subs[0].site);
	/* another merchant id, and no other site to route it to (ctx.cfg NULL) */
	ck_assert_str_eq(ev.subs[1].flag, "merchant_mismatch");
	ck_assert_int_eq(ev.subs[1].amount_minor, 202);
	/* no transaction_id: keyed by its content, flagged */
	ck_assert_str_eq(ev.subs[2].flag, PN_FLAG_MISSING_ID);
	ck_assert(strncmp(ev.subs[2].dedup_key, "noid:", 5) == 0);
	/* a second, different combine payment has keys of its own */
	ck_assert_int_eq(v2_combine("C2", "{\"order_num\":1,\"order_list\":["
				    "{\"appid\":\"wx2421b1c4370ec43b\",\"mch_id\":\"10000100\","
				    "\"total_fee\":101,\"out_trade_no\":\"A2\"}]}", &ev2),
			 PN_VERIFIED);
	ck_assert_str_ne(ev.dedup_key, ev2.dedup_key);
	ck_assert_str_ne(ev.subs[2].dedup_key, ev2.subs[0].dedup_key);
	/* no usable sub_order_list: the envelope alone, for a human */
	ck_assert_int_eq(v2_combine("C3", "not json", &ev), PN_VERIFIED);
	ck_assert_uint_eq(ev.nsubs, 0);
	ck_assert_str_eq(ev.flag, PN_FLAG_MISSING_ID);
}
END_TEST

/* ---- the identity (wechatpay/identity.c): where receiver, query and reconcile meet ---- */

static void
wx_notification(struct pn_arena *a, const char *name, const struct pn_site **site,
		struct pn_event *ev)
{
	ck_assert_int_eq(fixture_verify(&pn_provider_wechatpay, "wechatpay", name, a, site, ev),
			 PN_VERIFIED);
}

static void
wx_bill_row(struct pn_arena *a, const struct pn_site *site, enum pn_stmt_kind kind,
	    const char *txn, const char *otn, const char *refund_id, int64_t amount,
	    int64_t order_amount, struct pn_event *ev)
{
	struct pn_stmt_txn t;

	memset(&t, 0, sizeof(t));
	t.kind = kind;
	t.psp_txn_id = txn;
	t.order_id = otn;
	t.refund_id = refund_id;
	t.amount_minor = amount;
	memcpy(t.currency, "CNY", 4);
	t.time = "2024-05-20 10:00:06";
	pn_stmt_wechatpay.event(a, site, &t, order_amount, 0, ev);
}

/* An API v3 order query's answer (the transaction, unencrypted), as query_wechatpay.c
 * hands it to the receiver's pn_wechatpay_v3_transaction. */
static void
wx_v3_answer(struct pn_arena *a, const struct pn_site *site, const char *state,
	     struct pn_event *ev)
{
	json_t *p = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:i, s:s}}",
			      "mchid", site->wechatpay.mchid, "appid", site->wechatpay.appid,
			      "out_trade_no", "ORDER-20240520-0001",
			      "transaction_id", "4200000000202405200000000001",
			      "trade_state", state, "success_time", "2024-05-20T10:00:06+08:00",
			      "amount", "total", 8888, "currency", "CNY");

	ck_assert_ptr_nonnull(p);
	pn_event_init(ev);
	ev->source = "query";
	pn_wechatpay_v3_transaction(a, site, p, strcmp(state, "SUCCESS") == 0
				    ? "TRANSACTION.SUCCESS" : "QUERY", ev);
	json_decref(p);
}

START_TEST(test_identity_v3_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, q, b;

	/* the payment: notification, query answer, bill row */
	wx_notification(a, "pub-vector", &site, &n);
	ck_assert_str_eq(n.dedup_key, "4200000000202405200000000001:TRANSACTION.SUCCESS");
	wx_v3_answer(a, site, "SUCCESS", &q);
	ck_assert_ptr_null(q.flag);
	unit_same_identity("v3 notification / query answer", &n, &q);
	wx_bill_row(a, site, PN_STMT_PAYMENT, "4200000000202405200000000001",
		    "ORDER-20240520-0001", NULL, 8888, 8888, &b);
	unit_same_identity("v3 notification / bill row", &n, &b);
	/* the refund: notification, bill row */
	wx_notification(a, "refund-success", &site, &n);
	wx_bill_row(a, site, PN_STMT_REFUND, "4200000000202405200000000001",
		    "ORDER-20240520-0001", "50300000000000000000000000001", 888, 8888, &b);
	unit_same_identity("v3 refund notification / bill row", &n, &b);
	/* a close: the notification's key carries the state, the query's too */
	wx_notification(a, "state-closed", &site, &n);
	ck_assert_int_eq(n.kind, PN_KIND_CLOSED);
	wx_v3_answer(a, site, "CLOSED", &q);
	ck_assert_int_eq(q.kind, PN_KIND_CLOSED);
	ck_assert_str_eq(q.dedup_key, "4200000000202405200000000001:QUERY:CLOSED");
	pn_arena_free(a);
}
END_TEST

START_TEST(test_identity_v2_meets)
{
	struct pn_arena *a = pn_arena_new();
	const struct pn_site *site;
	struct pn_event n, q, b;
	struct pn_xml_flat x;
	struct pn_err err;
	size_t	len;
	const char *body = fixture_text("wechatpay/v2-md5.body", &len), *missing;
	struct pn_wechatpay_fact f;
	char	rid[64];

	wx_notification(a, "v2-md5", &site, &n);
	/* orderquery's SUCCESS answer: the notification's own fields, the receiver's code */
	ck_assert(pn_xml_parse_flat(a, (const unsigned char *)body, len, "xml", &x, &err));
	pn_event_init(&q);
	pn_wechatpay_v2_payment(a, site, &x, &q);
	unit_same_identity("v2 notification / orderquery answer", &n, &q);
	wx_bill_row(a, site, PN_STMT_PAYMENT, "1004400740201409030005092168", "1409811653",
		    NULL, 1, 1, &b);
	unit_same_identity("v2 notification / bill row", &n, &b);
	/* orderquery's CLOSED answer: keyed as the v3 answer of that state */
	memset(&f, 0, sizeof(f));
	f.event_type = "QUERY";
	f.state = "CLOSED";
	f.transaction_id = "1004400740201409030005092168";
	f.out_trade_no = "1409811653";
	pn_event_init(&q);
	pn_wechatpay_identity(a, &f, &q, &missing);
	ck_assert_ptr_null(missing);
	ck_assert_int_eq(q.kind, PN_KIND_CLOSED);
	ck_assert_str_eq(q.dedup_key, "1004400740201409030005092168:QUERY:CLOSED");
	/* a v2 refund result and its bill row */
	wx_notification(a, "sdk-v2-refund", &site, &n);
	ck_assert_int_eq(n.kind, PN_KIND_REFUND);
	ck_assert(sscanf(n.dedup_key, "refund:%63[^:]:SUCCESS", rid) == 1);
	wx_bill_row(a, site, PN_STMT_REFUND, n.psp_txn_id, n.order_id, rid, n.refund_minor,
		    n.amount_minor, &b);
	unit_same_identity("v2 refund notification / bill row", &n, &b);
	pn_arena_free(a);
}
END_TEST

static const char *
content_key(struct pn_arena *a, void *arg)
{
	return pn_arena_printf(a, "noid:%s", (const char *)arg);
}

START_TEST(test_identity_rules)
{
	static const struct {
		const char *state;
		enum pn_kind kind;
	} states[] = {
		{"NOTPAY", PN_KIND_PENDING}, {"USERPAYING", PN_KIND_PENDING},
		{"CLOSED", PN_KIND_CLOSED}, {"REVOKED", PN_KIND_CLOSED},
		{"PAYERROR", PN_KIND_FAILED}, {"REFUND", PN_KIND_IGNORED},
		{"SOMETHING_NEW", PN_KIND_IGNORED}, {"SUCCESS", PN_KIND_IGNORED},
	};
	struct pn_arena *a = pn_arena_new();
	struct pn_wechatpay_fact f;
	struct pn_event ev;
	const char *missing;
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(states); i++)
		ck_assert_msg(pn_wechatpay_trade_state_kind(states[i].state) == states[i].kind,
			      "%s", states[i].state);
	memset(&f, 0, sizeof(f));
	f.content_key = content_key;
	f.content_arg = "c";
	/* v3: only TRANSACTION.SUCCESS with SUCCESS is paid, and needs a transaction_id */
	f.event_type = "TRANSACTION.SUCCESS";
	f.state = "SUCCESS";
	f.out_trade_no = "O1";
	f.event_id = "E1";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_PAID);
	ck_assert_str_eq(ev.dedup_key, "noid:c");
	ck_assert_ptr_nonnull(missing);
	f.state = "NOTPAY";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_str_eq(ev.dedup_key, "otn:O1:TRANSACTION.SUCCESS:NOTPAY");
	ck_assert_ptr_null(missing);
	f.out_trade_no = NULL;
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_str_eq(ev.dedup_key, "event:E1:TRANSACTION.SUCCESS:NOTPAY");
	/* v3 refunds: refund_id, out:<out_refund_no>, event:<id>, the content */
	memset(&f, 0, sizeof(f));
	f.content_key = content_key;
	f.content_arg = "r";
	f.refund = true;
	f.event_type = "REFUND.ABNORMAL";
	f.state = "ABNORMAL";
	f.out_refund_no = "OR1";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_str_eq(ev.dedup_key, "refund:out:OR1:REFUND.ABNORMAL");
	ck_assert_int_eq(ev.kind, PN_KIND_IGNORED);	/* the receiver flags it refund_failed */
	f.out_refund_no = NULL;
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_str_eq(ev.dedup_key, "noid:r");
	ck_assert_ptr_nonnull(missing);
	/* v2 payments: result_code, otn: for what is not a payment, contract changes */
	memset(&f, 0, sizeof(f));
	f.content_key = content_key;
	f.content_arg = "p";
	f.v2 = true;
	f.state = "FAIL";
	f.out_trade_no = "O2";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_FAILED);
	ck_assert_str_eq(ev.dedup_key, "otn:O2:FAIL");
	ck_assert_str_eq(ev.event_type, "v2.pay.FAIL");
	f.out_trade_no = NULL;
	f.other_product = true;
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_IGNORED);
	ck_assert_str_eq(ev.dedup_key, "noid:p");
	ck_assert_ptr_null(missing);	/* another product's: unhandled, not missing_id */
	/* a v2 combine sub-order keeps its kind and type, and says so when unkeyed */
	f.other_product = false;
	f.sub_order = true;
	f.state = "SUCCESS";
	pn_event_init(&ev);
	ev.event_type = "v2.combine.SUCCESS";
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_PAID);
	ck_assert_str_eq(ev.event_type, "v2.combine.SUCCESS");
	ck_assert_str_eq(missing, "a sub-order without transaction_id: keyed by its signed "
			 "content, not applied");
	/* v2 refunds: SUCCESS, CHANGE and REFUNDCLOSE are refunds, the rest is not */
	memset(&f, 0, sizeof(f));
	f.v2 = true;
	f.refund = true;
	f.refund_id = "RID";
	f.state = "CHANGE";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_REFUND);
	ck_assert_str_eq(ev.dedup_key, "refund:RID:CHANGE");
	f.state = "PROCESSING";
	pn_event_init(&ev);
	pn_wechatpay_identity(a, &f, &ev, &missing);
	ck_assert_int_eq(ev.kind, PN_KIND_IGNORED);
	ck_assert_str_eq(ev.event_type, "v2.refund.PROCESSING");
	/* complaints: per action (receiver), per state (query) */
	ck_assert_str_eq(pn_wechatpay_complaint_key(a, "200201", "CREATE_COMPLAINT", NULL, NULL),
			 "complaint:200201:CREATE_COMPLAINT");
	ck_assert_str_eq(pn_wechatpay_complaint_key(a, "200201", NULL, NULL, NULL),
			 "complaint:200201:-");
	ck_assert_str_eq(pn_wechatpay_complaint_key(a, "200201", NULL, "PROCESSED", "4200"),
			 "complaint:200201:state:PROCESSED:4200");
	pn_arena_free(a);
}
END_TEST

Suite *
suite_wechatpay(void)
{
	Suite  *s = suite_create("wechatpay");
	TCase  *tc = tcase_create("wechatpay");

	ncases = fixture_cases("wechatpay", &cases);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_v2_official_vector);
	tcase_add_test(tc, test_v2_synthetic_vector);
	tcase_add_test(tc, test_v2_refund_vector);
	tcase_add_test(tc, test_v2_combine_sub_orders);
	tcase_add_test(tc, test_v3_gosdk_signature);
	tcase_add_test(tc, test_v3_gosdk_through_adapter);
	tcase_add_test(tc, test_v3_16_byte_key_refused);
	tcase_add_test(tc, test_v3_synthetic_decrypt);
	tcase_add_test(tc, test_xml_values);
	tcase_add_test(tc, test_xml_refusals);
	tcase_add_test(tc, test_answers);
	tcase_add_loop_test(tc, test_wechatpay_case, 0, (int)ncases);
	suite_add_tcase(s, tc);
	tc = tcase_create("identity");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_identity_v3_meets);
	tcase_add_test(tc, test_identity_v2_meets);
	tcase_add_test(tc, test_identity_rules);
	suite_add_tcase(s, tc);
	return s;
}

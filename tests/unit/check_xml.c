/*
 * check_xml.c: the flat XML shape of WeChat Pay API v2.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "buf.h"
#include "suites.h"
#include "xml.h"

static bool
parse(struct pn_arena *a, const char *s, size_t len, struct pn_xml_flat *x, struct pn_err *err)
{
	return pn_xml_parse_flat(a, s, len ? len : strlen(s), "xml", x, err);
}

START_TEST(test_flat)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_xml_flat x;
	struct pn_err err;
	const char *doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
			  "<xml>\n  <return_code><![CDATA[SUCCESS]]></return_code>\n"
			  "  <!-- a comment -->\n"
			  "  <total_fee>1</total_fee>\n"
			  "  <attach>a<![CDATA[ b ]]>c &amp; &#x5546;</attach>\n"
			  "  <empty></empty><selfclosed/>\n"
			  "  <body><![CDATA[<b>not markup</b>]]></body>\n"
			  "</xml>\n";

	ck_assert_msg(parse(a, doc, 0, &x, &err), "%s", err.msg);
	ck_assert_uint_eq(x.n, 6);
	ck_assert_str_eq(x.fields[0].name, "return_code");	/* document order */
	ck_assert_str_eq(pn_xml_get(&x, "return_code"), "SUCCESS");
	ck_assert_str_eq(pn_xml_get(&x, "total_fee"), "1");
	ck_assert_str_eq(pn_xml_get(&x, "attach"), "a b c & \xe5\x95\x86");
	ck_assert_str_eq(pn_xml_get(&x, "empty"), "");
	ck_assert_uint_eq(x.fields[3].value_len, 0);
	ck_assert_str_eq(pn_xml_get(&x, "selfclosed"), "");
	ck_assert_str_eq(pn_xml_get(&x, "body"), "<b>not markup</b>");
	ck_assert_ptr_null(pn_xml_get(&x, "missing"));
	ck_assert_ptr_null(pn_xml_get(&x, "Total_fee"));	/* names are case-sensitive */
	pn_arena_free(a);
}
END_TEST

/* Values are copies in the arena: UTF-8 out, whatever the declared encoding. */
START_TEST(test_encoding)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_xml_flat x;
	struct pn_err err;
	/* "商" in GBK is C9 CC */
	const char *gbk = "<?xml version=\"1.0\" encoding=\"GBK\"?><xml><a>\xc9\xcc</a></xml>";

	ck_assert_msg(parse(a, gbk, 0, &x, &err), "%s", err.msg);
	ck_assert_str_eq(pn_xml_get(&x, "a"), "\xe5\x95\x86");
	pn_arena_free(a);
}
END_TEST

static const struct {
	const char *doc;
	const char *why;	/* a substring of the error */
} refused[] = {
	{"<!DOCTYPE xml><xml/>", "DOCTYPE or ENTITY declaration is refused"},
	{"<!doctype xml><xml/>", "DOCTYPE or ENTITY declaration is refused"},
	{"<xml><a><!ENTITY x \"y\"></a></xml>", "DOCTYPE or ENTITY declaration is refused"},
	{"<xml><a>&xxe;</a></xml>", "invalid XML"},
	{"<xml><a>1</a>", "invalid XML"},
	{"<xml><a>1</b></xml>", "invalid XML"},
	{"<xml></xml><xml></xml>", "invalid XML"},
	{"<xml/>trailing", "invalid XML"},
	{"<xml><a>&#0;</a></xml>", "invalid XML"},
	{"<xml><a>\x01</a></xml>", "invalid XML"},
	{"<root><a>1</a></root>", "XML root element is <root>, expected <xml>"},
	{"<XML><a>1</a></XML>", "expected <xml>"},
	{"<p:xml xmlns:p=\"urn:x\"><a>1</a></p:xml>", "expected <xml>"},
	{"<xml xmlns=\"urn:x\"><a>1</a></xml>", "expected <xml>"},
	{"<xml><a>1</a><a>2</a></xml>", "field <a> appears twice"},
	{"<xml><a><b>1</b></a></xml>", "field <a> holds more than text"},
	{"<xml><a><?pi x?></a></xml>", "field <a> holds more than text"},
	{"<xml>text<a>1</a></xml>", "unexpected content directly under <xml>"},
	{"<xml><![CDATA[x]]><a>1</a></xml>", "unexpected content directly under <xml>"},
	{"<xml><?pi x?></xml>", "unexpected content directly under <xml>"},
	{"<xml xmlns:p=\"urn:x\"><p:a>1</p:a></xml>", "namespaced field <a> is not accepted"},
	/* text must be well-formed UTF-8 (the declared default) */
	{"<xml><a>\x80</a></xml>", "invalid XML"},
	{"<xml><a>\xc0\x80</a></xml>", "invalid XML"},
	{"<xml><a>\xc0\xaf</a></xml>", "invalid XML"},
	{"<xml><a>\xe0\x80\xaf</a></xml>", "invalid XML"},
	{"<xml><a>\xf0\x80\x80\xaf</a></xml>", "invalid XML"},
	{"<xml><a>\xed\xa0\x80</a></xml>", "invalid XML"},
	{"<xml><a>\xf4\x90\x80\x80</a></xml>", "invalid XML"},
	{"<xml><a>\xe5\x95</a></xml>", "invalid XML"},
};

START_TEST(test_refused)
{
	size_t	i;

	for (i = 0; i < PN_ARRAY_LEN(refused); i++) {
		struct pn_arena *a = pn_arena_new();
		struct pn_xml_flat x = {NULL, 99};
		struct pn_err err = {""};

		ck_assert_msg(!parse(a, refused[i].doc, 0, &x, &err), "accepted: %s", refused[i].doc);
		ck_assert_msg(strstr(err.msg, refused[i].why) != NULL, "%s: \"%s\" does not say \"%s\"",
			      refused[i].doc, err.msg, refused[i].why);
		ck_assert_msg(strchr(err.msg, '\n') == NULL, "%s: newline in \"%s\"", refused[i].doc,
			      err.msg);
		/* a refused document leaves nothing to read */
		ck_assert_ptr_null(x.fields);
		ck_assert_uint_eq(x.n, 0);
		pn_arena_free(a);
	}
}
END_TEST

START_TEST(test_bounds)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_xml_flat x;
	struct pn_err err;
	struct pn_buf b = PN_BUF_INIT;
	size_t	i;

	/* empty and oversized bodies, before libxml2 */
	ck_assert(!pn_xml_parse_flat(a, "<xml/>", 0, "xml", &x, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "XML body of 0 bytes (expected 1 to 65536)"));
	/* exactly 128 fields are accepted, 129 are not */
	pn_buf_puts(&b, "<xml>");
	for (i = 0; i < PN_XML_MAX_FIELDS; i++)
		pn_buf_printf(&b, "<f%zu>%zu</f%zu>", i, i, i);
	pn_buf_puts(&b, "</xml>");
	ck_assert_msg(pn_xml_parse_flat(a, b.data, b.len, "xml", &x, &err), "%s", err.msg);
	ck_assert_uint_eq(x.n, PN_XML_MAX_FIELDS);
	ck_assert_str_eq(pn_xml_get(&x, "f127"), "127");
	pn_buf_reset(&b);
	pn_buf_puts(&b, "<xml>");
	for (i = 0; i <= PN_XML_MAX_FIELDS; i++)
		pn_buf_printf(&b, "<f%zu>%zu</f%zu>", i, i, i);
	pn_buf_puts(&b, "</xml>");
	ck_assert(!pn_xml_parse_flat(a, b.data, b.len, "xml", &x, &err));
	ck_assert_str_eq(err.msg, "more than 128 fields");
	/* exactly PN_XML_MAX_BYTES is parsed, one more byte is refused */
	pn_buf_reset(&b);
	pn_buf_puts(&b, "<xml><a>");
	while (b.len < PN_XML_MAX_BYTES - strlen("</a></xml>"))
		pn_buf_putc(&b, 'v');
	pn_buf_puts(&b, "</a></xml>");
	ck_assert_uint_eq(b.len, PN_XML_MAX_BYTES);
	ck_assert_msg(pn_xml_parse_flat(a, b.data, b.len, "xml", &x, &err), "%s", err.msg);
	ck_assert_uint_eq(x.fields[0].value_len, PN_XML_MAX_BYTES - 8 - 10);
	pn_buf_putc(&b, ' ');
	ck_assert(!pn_xml_parse_flat(a, b.data, b.len, "xml", &x, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "XML body of 65537 bytes"));
	/* only len bytes are parsed */
	ck_assert(!pn_xml_parse_flat(a, "<xml><a>1</a></xml>", 10, "xml", &x, &err));
	ck_assert(pn_xml_parse_flat(a, "<xml/><junk", 6, "xml", &x, &err));
	ck_assert_uint_eq(x.n, 0);
	/* the root name is the caller's: <root> for WeChat Pay v2 req_info */
	ck_assert(pn_xml_parse_flat(a, "<root><a>1</a></root>", 21, "root", &x, &err));
	ck_assert_str_eq(pn_xml_get(&x, "a"), "1");
	pn_buf_free(&b);
	pn_arena_free(a);
}
END_TEST

/* A failed parse does not leave libxml2's error behind for the next one. */
START_TEST(test_error_state)
{
	struct pn_arena *a = pn_arena_new();
	struct pn_xml_flat x;
	struct pn_err err;

	ck_assert(!parse(a, "<xml><a>", 0, &x, &err));
	ck_assert_msg(parse(a, "<xml><a>1</a></xml>", 0, &x, &err), "%s", err.msg);
	ck_assert(!parse(a, "<xml><a>1</b></xml>", 0, &x, &err));
	ck_assert_ptr_null(strstr(err.msg, "Premature end"));
	pn_arena_free(a);
}
END_TEST

Suite *
suite_xml(void)
{
	Suite  *s = suite_create("xml");
	TCase  *tc = tcase_create("xml");

	tcase_add_test(tc, test_flat);
	tcase_add_test(tc, test_encoding);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_error_state);
	suite_add_tcase(s, tc);
	return s;
}

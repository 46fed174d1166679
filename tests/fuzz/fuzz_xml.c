/*
 * fuzz_xml.c: the WeChat Pay v2 XML parser, pn_xml_parse_flat().
 *
 * Input: one byte choosing the expected root ("xml" for notifications,
 * "root" for the decrypted refund req_info), then the document.
 * Invariants on success: at most PN_XML_MAX_FIELDS fields with non-empty,
 * unique names, NUL-terminated values of value_len bytes, and
 * pn_xml_get() returning each field's own value.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "xml.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	struct pn_xml_flat x;
	struct pn_err err = {{0}};
	const char *root;
	size_t	i, j;

	if (a == NULL)
		a = pn_arena_new();
	if (size < 1)
		return 0;
	root = data[0] & 1 ? "root" : "xml";
	if (pn_xml_parse_flat(a, data + 1, size - 1, root, &x, &err)) {
		fuzz_check(size - 1 <= PN_XML_MAX_BYTES);
		fuzz_check(x.n <= PN_XML_MAX_FIELDS);
		for (i = 0; i < x.n; i++) {
			fuzz_check(x.fields[i].name != NULL && x.fields[i].name[0] != '\0');
			fuzz_check(x.fields[i].value != NULL);
			fuzz_check(x.fields[i].value[x.fields[i].value_len] == '\0');
			fuzz_check(pn_xml_get(&x, x.fields[i].name) == x.fields[i].value);
			for (j = i + 1; j < x.n; j++)
				fuzz_check(strcmp(x.fields[i].name, x.fields[j].name) != 0);
		}
	} else
		fuzz_check(err.msg[0] != '\0');
	pn_arena_reset(a);
	return 0;
}

/*
 * xml.h: the one XML shape paynotify accepts (WeChat Pay API v2):
 *
 *   <ROOT><name1>value</name1><name2><![CDATA[value]]></name2>...</ROOT>
 *
 * A flat root whose children are elements holding only text and CDATA.
 * Parsing goes through libxml2 with network access, DTD loading and entity
 * substitution off, and any DOCTYPE is refused outright: no external
 * entity, no entity expansion ("billion laughs"), no DTD of any kind.
 * Inputs are bounded in size and in the number of fields, and a field
 * name that appears twice makes the document malformed (two "total_fee"s
 * are an attack, not a notification).  Names and values are copies in the
 * arena, so the libxml2 document is freed before returning.
 */
#ifndef PN_XML_H
#define PN_XML_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "util.h"

#define PN_XML_MAX_BYTES 65536	/* WeChat bodies are a few KB */
#define PN_XML_MAX_FIELDS 128

struct pn_xml_field {
	const char *name;
	const char *value;	/* UTF-8, NUL-terminated; text and CDATA joined */
	size_t	value_len;
};

struct pn_xml_flat {
	struct pn_xml_field *fields;	/* in document order */
	size_t	n;
};

/* Parse data[0..len) whose root element must be named root. */
bool pn_xml_parse_flat(struct pn_arena *a, const void *data, size_t len, const char *root,
		       struct pn_xml_flat *out, struct pn_err *err) PN_WUR;

/* The value of field name, or NULL when absent. */
const char *pn_xml_get(const struct pn_xml_flat *x, const char *name);

#endif

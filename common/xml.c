/*
 * xml.c: strict flat XML through libxml2 (WeChat Pay API v2 bodies).
 */
#include "config.h"

#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include "buf.h"
#include "xml.h"

/*
 * Never XML_PARSE_NOENT (entity substitution), XML_PARSE_DTDLOAD,
 * XML_PARSE_DTDATTR or XML_PARSE_HUGE; NONET forbids fetching anything.
 */
#define PN_XML_OPTIONS (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)

/* Case-insensitive search for a markup declaration keyword. */
static bool
has_decl(const char *p, size_t len, const char *word)
{
	size_t	wl = strlen(word), i, j;

	for (i = 0; i + wl <= len; i++) {
		for (j = 0; j < wl; j++) {
			char c = p[i + j];

			if (c >= 'a' && c <= 'z')
				c = (char)(c - 'a' + 'A');
			if (c != word[j])
				break;
		}
		if (j == wl)
			return true;
	}
	return false;
}

static bool
is_blank_text(const xmlChar *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
			return false;
	return true;
}

/* The text of one field element: text and CDATA only, nothing nested. */
static bool
field_value(struct pn_arena *a, xmlNode *el, struct pn_xml_field *f, struct pn_err *err)
{
	struct pn_buf b = PN_BUF_INIT;
	xmlNode *c;

	for (c = el->children; c; c = c->next) {
		if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
			if (c->content)
				pn_buf_puts(&b, (const char *)c->content);
		} else if (c->type != XML_COMMENT_NODE) {
			pn_err_set(err, "field <%.64s> holds more than text", (const char *)el->name);
			pn_buf_free(&b);
			return false;
		}
	}
	f->value = pn_arena_strndup(a, b.data ? b.data : "", b.len);
	f->value_len = b.len;
	pn_buf_free(&b);
	return true;
}

static bool
collect_fields(struct pn_arena *a, xmlNode *root, struct pn_xml_flat *out, struct pn_err *err)
{
	xmlNode *c;
	size_t	i;

	out->fields = pn_arena_alloc(a, PN_XML_MAX_FIELDS * sizeof(*out->fields));
	out->n = 0;
	for (c = root->children; c; c = c->next) {
		const char *name = (const char *)c->name;

		if (c->type == XML_COMMENT_NODE
		    || (c->type == XML_TEXT_NODE && is_blank_text(c->content)))
			continue;
		if (c->type != XML_ELEMENT_NODE) {
			pn_err_set(err, "unexpected content directly under <%s>",
				   (const char *)root->name);
			return false;
		}
		if (c->ns != NULL) {
			pn_err_set(err, "namespaced field <%.64s> is not accepted", name);
			return false;
		}
		if (out->n == PN_XML_MAX_FIELDS) {
			pn_err_set(err, "more than %d fields", PN_XML_MAX_FIELDS);
			return false;
		}
		for (i = 0; i < out->n; i++)
			if (strcmp(out->fields[i].name, name) == 0) {
				pn_err_set(err, "field <%.64s> appears twice", name);
				return false;
			}
		out->fields[out->n].name = pn_arena_strdup(a, name);
		if (!field_value(a, c, &out->fields[out->n], err))
			return false;
		out->n++;
	}
	return true;
}

bool
pn_xml_parse_flat(struct pn_arena *a, const void *data, size_t len, const char *root,
		  struct pn_xml_flat *out, struct pn_err *err)
{
	xmlDoc *doc = NULL;
	xmlNode *top;
	bool	ok = false;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len > PN_XML_MAX_BYTES) {
		pn_err_set(err, "XML body of %zu bytes (expected 1 to %d)", len, PN_XML_MAX_BYTES);
		return false;
	}
	/* Refuse DTDs before libxml2 sees them; the tree check below is the
	 * second line of defence. */
	if (has_decl(data, len, "<!DOCTYPE") || has_decl(data, len, "<!ENTITY")) {
		pn_err_set(err, "XML with a DOCTYPE or ENTITY declaration is refused");
		return false;
	}
	doc = xmlReadMemory(data, (int)len, NULL, NULL, PN_XML_OPTIONS);
	if (doc == NULL) {
		const xmlError *xe = xmlGetLastError();

		pn_err_set(err, "invalid XML: %s", xe && xe->message ? xe->message : "parse error");
		/* strip libxml2's trailing newline */
		err->msg[strcspn(err->msg, "\n")] = '\0';
		goto done;
	}
	if (doc->intSubset != NULL || doc->extSubset != NULL) {
		pn_err_set(err, "XML with a DOCTYPE is refused");
		goto done;
	}
	top = xmlDocGetRootElement(doc);
	if (top == NULL || top->ns != NULL || strcmp((const char *)top->name, root) != 0) {
		pn_err_set(err, "XML root element is <%.32s>, expected <%s>",
			   top ? (const char *)top->name : "", root);
		goto done;
	}
	ok = collect_fields(a, top, out, err);
done:
	xmlFreeDoc(doc);
	xmlResetLastError();
	if (!ok)
		memset(out, 0, sizeof(*out));
	return ok;
}

const char *
pn_xml_get(const struct pn_xml_flat *x, const char *name)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		if (strcmp(x->fields[i].name, name) == 0)
			return x->fields[i].value;
	return NULL;
}

/*
 * table.c: rows printed as an aligned table, CSV (RFC 4180) or JSON.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"

void
pn_table_init(struct pn_table *t, size_t ncols, const char *const *cols)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->cols = pn_xcalloc(ncols, sizeof(char *));
	for (i = 0; i < ncols; i++)
		t->cols[i] = pn_xstrdup(cols[i]);
}

void
pn_table_add(struct pn_table *t, const char *const *cells)
{
	size_t i;

	t->cells = pn_xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(char *));
	for (i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = cells[i] ? pn_xstrdup(cells[i]) : NULL;
	t->nrows++;
}

const char *
pn_table_get(const struct pn_table *t, size_t row, const char *col)
{
	size_t i;

	for (i = 0; i < t->ncols; i++)
		if (strcmp(t->cols[i], col) == 0)
			return t->cells[row * t->ncols + i];
	pn_fatal("no column \"%s\"", col);
}

void
pn_table_free(struct pn_table *t)
{
	size_t i;

	for (i = 0; i < t->ncols; i++)
		free(t->cols[i]);
	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cols);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* Display width of UTF-8 text: code points, East Asian wide ones count 2. */
static size_t
width(const char *s)
{
	size_t	w = 0;

	while (*s) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x80)
			w++, s++;
		else if ((c & 0xe0) == 0xc0)
			w++, s += 2;
		else if ((c & 0xf0) == 0xe0)
			w += 2, s += 3;	/* CJK lives here */
		else
			w += 2, s += 4;
		for (; (*s & 0xc0) == 0x80; s++)
			;
	}
	return w;
}

static void
print_table(const struct pn_table *t, FILE *f)
{
	size_t *w = pn_xcalloc(t->ncols, sizeof(size_t)), r, c;

	for (c = 0; c < t->ncols; c++)
		w[c] = width(t->cols[c]);
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			const char *v = t->cells[r * t->ncols + c];
			size_t	n = width(v ? v : "");

			if (n > w[c])
				w[c] = n;
		}
	for (c = 0; c < t->ncols; c++)
		fprintf(f, "%s%s%*s", c ? "  " : "", t->cols[c],
			c + 1 < t->ncols ? (int)(w[c] - width(t->cols[c])) : 0, "");
	fputc('\n', f);
	for (c = 0; c < t->ncols; c++) {
		size_t i;

		fputs(c ? "  " : "", f);
		for (i = 0; i < w[c]; i++)
			fputc('-', f);
	}
	fputc('\n', f);
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *v = t->cells[r * t->ncols + c];

			if (v == NULL)
				v = "";
			fprintf(f, "%s%s%*s", c ? "  " : "", v,
				c + 1 < t->ncols ? (int)(w[c] - width(v)) : 0, "");
		}
		fputc('\n', f);
	}
	free(w);
}

static void
csv_cell(const char *v, FILE *f)
{
	if (v == NULL)
		return;
	if (strpbrk(v, ",\"\r\n") == NULL) {
		fputs(v, f);
		return;
	}
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '"')
			fputc('"', f);
		fputc(*v, f);
	}
	fputc('"', f);
}

static void
print_csv(const struct pn_table *t, FILE *f)
{
	size_t r, c;

	for (c = 0; c < t->ncols; c++) {
		fputs(c ? "," : "", f);
		csv_cell(t->cols[c], f);
	}
	fputs("\r\n", f);
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			fputs(c ? "," : "", f);
			csv_cell(t->cells[r * t->ncols + c], f);
		}
		fputs("\r\n", f);
	}
}

static void
print_json(const struct pn_table *t, FILE *f)
{
	json_t *arr = json_array();
	size_t	r, c;
	char   *text;

	for (r = 0; r < t->nrows; r++) {
		json_t *obj = json_object();

		for (c = 0; c < t->ncols; c++) {
			const char *v = t->cells[r * t->ncols + c];
			json_t *jv = v ? json_string(v) : json_null();

			json_object_set_new(obj, t->cols[c], jv ? jv : json_string("(invalid UTF-8)"));
		}
		json_array_append_new(arr, obj);
	}
	text = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		fprintf(f, "%s\n", text);
	free(text);
	json_decref(arr);
}

void
pn_table_print(const struct pn_table *t, enum pn_format fmt, FILE *f)
{
	switch (fmt) {
	case PN_FMT_CSV:
		print_csv(t, f);
		break;
	case PN_FMT_JSON:
		print_json(t, f);
		break;
	default:
		print_table(t, f);
		break;
	}
}

bool
pn_format_parse(const char *s, bool allow_prometheus, enum pn_format *out)
{
	if (strcmp(s, "table") == 0)
		*out = PN_FMT_TABLE;
	else if (strcmp(s, "csv") == 0)
		*out = PN_FMT_CSV;
	else if (strcmp(s, "json") == 0)
		*out = PN_FMT_JSON;
	else if (allow_prometheus && strcmp(s, "prometheus") == 0)
		*out = PN_FMT_PROMETHEUS;
	else {
		fprintf(stderr, "paynotify: --format must be table, csv%s\n",
			allow_prometheus ? ", json or prometheus" : " or json");
		return false;
	}
	return true;
}

enum pn_format
pn_format_default(void)
{
	return isatty(STDOUT_FILENO) ? PN_FMT_TABLE : PN_FMT_CSV;
}

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

void
pn_table_optional(struct pn_table *t, const char *col)
{
	size_t i;

	for (i = 0; i < t->ncols && i < 64; i++)
		if (strcmp(t->cols[i], col) == 0) {
			t->optional |= UINT64_C(1) << i;
			return;
		}
	pn_fatal("no column \"%s\"", col);
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

/* Tables fit this many columns unless --wide (pn_table_set_wide). */
#define TABLE_COLUMNS 100
#define GAP 2

static bool table_wide = false;

void
pn_table_set_wide(bool wide)
{
	table_wide = wide;
}

/*
 * Bytes of the code point at s: its lead byte and the continuation bytes
 * that follow, never past the terminating NUL (a truncated or invalid
 * sequence is as long as the bytes that are there).
 */
static size_t
cp_len(const char *s)
{
	size_t	n = 1;

	while (n < 4 && s[n] != '\0' && ((unsigned char)s[n] & 0xc0) == 0x80)
		n++;
	return n;
}

/* Display width of the code point at s: East Asian wide ones (3- and 4-byte) count 2. */
static size_t
cp_width(const char *s)
{
	unsigned char c = (unsigned char)*s;

	return (c & 0xf0) == 0xe0 || (c & 0xf8) == 0xf0 ? 2 : 1;	/* CJK lives there */
}

/* Display width of the first n bytes of UTF-8 text s. */
static size_t
width_n(const char *s, size_t n)
{
	size_t	w = 0, i = 0;

	while (i < n && s[i] != '\0') {
		w += cp_width(s + i);
		i += cp_len(s + i);
	}
	return w;
}

static size_t
width(const char *s)
{
	return width_n(s, strlen(s));
}

/* Display width of the word at s: up to the next blank, newline or the end. */
static size_t
word_width(const char *s)
{
	return width_n(s, strcspn(s, " \n"));
}

/*
 * The next line of a cell wrapped at max display columns: its length in
 * bytes (*skip: bytes to step over after it, the blanks or the newline it
 * broke at; a continuation line never starts with a blank, a wrapped line
 * never ends with one).  Breaks at the last blank that fits when the word
 * after it fits a line of its own; a word longer than the column is broken
 * inside: after its last '_', '-', '/', ':' or ',' (identifiers:
 * pending_without_ / notification) when that is in the second half of the
 * line, else between code points.
 */
static size_t
wrap_line(const char *s, size_t max, size_t *skip)
{
	size_t	i = 0, w = 0, blank = 0, after = 0, punct = 0, n, next;

	*skip = 0;
	while (s[i] != '\0' && s[i] != '\n') {
		size_t	cw = cp_width(s + i);

		if (w + cw > max && i > 0)
			break;
		if (s[i] == ' ') {
			if (i == 0 || s[i - 1] != ' ')
				blank = i;	/* where a run of blanks starts */
			after = i + 1;	/* the word after it */
		} else if (strchr("_-/:,", s[i]) != NULL)
			punct = i + 1;
		w += cw;
		i += cp_len(s + i);
	}
	if (s[i] == '\0' || s[i] == '\n') {	/* the rest fits */
		*skip = s[i] == '\n';
		return i;
	}
	if (s[i] == ' ')			/* full at a blank: break there */
		n = i;
	else if (after > 0 && word_width(s + after) <= max)
		n = blank;			/* the word goes whole to the next line */
	else if (punct > after && width_n(s, punct) * 2 >= max)
		n = punct;
	else
		n = i;
	for (next = n; s[next] == ' '; next++)
		;
	while (n > 0 && s[n - 1] == ' ')
		n--;
	*skip = next - n;
	return n;
}

/* The narrowest a column's name may wrap to: its longest '_'-separated word. */
static size_t
name_floor(const char *name)
{
	size_t	best = 0, n;

	while (*name) {
		n = strcspn(name, "_");
		if (width_n(name, n) + (name[n] == '_') > best)
			best = width_n(name, n) + (name[n] == '_');
		name += n + (name[n] == '_');
	}
	return best;
}

/* Total width of the columns with those in `which` capped at cap (never below floor[c]). */
static size_t
capped_total(const struct pn_table *t, const size_t *w, const size_t *floor, const bool *which,
	     size_t cap)
{
	size_t	c, sum = 0;

	for (c = 0; c < t->ncols; c++) {
		size_t	v = w[c];

		if (which[c] && v > cap)
			v = cap > floor[c] ? cap : floor[c];
		sum += v + (c ? GAP : 0);
	}
	return sum;
}

static size_t
natural_total(const struct pn_table *t, const size_t *w)
{
	size_t	c, sum = 0;

	for (c = 0; c < t->ncols; c++)
		sum += w[c] + (c ? GAP : 0);
	return sum;
}

/* Cap the columns in `which` at the largest cap that fits (water-filling: widest first). */
static void
cap_columns(const struct pn_table *t, size_t *w, const size_t *floor, const bool *which)
{
	size_t	c, lo = 1, hi = 0;

	for (c = 0; c < t->ncols; c++)
		if (which[c] && w[c] > hi)
			hi = w[c];
	if (hi == 0)
		return;
	while (lo < hi) {	/* the total grows with the cap */
		size_t	mid = (lo + hi + 1) / 2;

		if (capped_total(t, w, floor, which, mid) <= TABLE_COLUMNS)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (c = 0; c < t->ncols; c++)
		if (which[c] && w[c] > lo)
			w[c] = lo > floor[c] ? lo : floor[c];
}

/*
 * Column widths that fit TABLE_COLUMNS, their cells wrapping onto more
 * lines.  Columns of prose (cells with blanks: notes, details, times) wrap
 * best, so they give way first, down to PROSE_MIN each; then the other
 * columns are cut, widest first, no narrower than the longest word of their
 * names (notification_ / id); the prose columns share what is left.  With --wide, or when it fits anyway, the
 * natural widths.
 */
#define PROSE_MIN 12

static void
fit_columns(const struct pn_table *t, size_t *w)
{
	bool   *prose = pn_xcalloc(t->ncols, sizeof(bool)), *other = pn_xcalloc(t->ncols, sizeof(bool));
	size_t *floor = pn_xcalloc(t->ncols, sizeof(size_t)), *nat = pn_xcalloc(t->ncols, sizeof(size_t));
	size_t	r, c;

	if (table_wide || natural_total(t, w) <= TABLE_COLUMNS)
		goto done;
	for (c = 0; c < t->ncols; c++) {
		for (r = 0; r < t->nrows && !prose[c]; r++) {
			const char *v = t->cells[r * t->ncols + c];

			prose[c] = v && strchr(v, ' ') != NULL;
		}
		other[c] = !prose[c];
		nat[c] = w[c];
		floor[c] = name_floor(t->cols[c]);
		if (prose[c]) {	/* hold the prose columns at PROSE_MIN while the others are cut */
			size_t	hold = floor[c] > PROSE_MIN ? floor[c] : PROSE_MIN;

			if (w[c] > hold)
				w[c] = hold;
		}
	}
	cap_columns(t, w, floor, other);
	for (c = 0; c < t->ncols; c++)
		if (prose[c])
			w[c] = nat[c];
	cap_columns(t, w, floor, prose);
	if (natural_total(t, w) > TABLE_COLUMNS) {	/* the names themselves are too wide: wrap them */
		for (c = 0; c < t->ncols; c++) {
			floor[c] = floor[c] < 4 ? floor[c] : 4;
			other[c] = true;
		}
		cap_columns(t, w, floor, other);
	}
done:
	free(prose);
	free(other);
	free(floor);
	free(nat);
}

/* Table cells only: a PostgreSQL timestamp without its fraction of a second. */
static const char *
display_cell(const char *v, char *buf, size_t sz)
{
	const char *dot;
	size_t	n;

	/* "2026-12-01 07:51:48.161069+00" -> "2026-12-01 07:51:48+00" */
	if (v == NULL || strlen(v) < 20 || v[4] != '-' || v[7] != '-' || v[10] != ' '
	    || v[13] != ':' || v[16] != ':' || v[19] != '.')
		return v;
	dot = v + 19;
	for (n = 1; dot[n] >= '0' && dot[n] <= '9'; n++)
		;
	snprintf(buf, sz, "%.19s%s", v, dot + n);
	return buf;
}

/* One row (cells; NULL is empty), wrapped to the widths: as many lines as its tallest cell. */
static void
print_row(const struct pn_table *t, const char *const *cells, const size_t *w, FILE *f)
{
	const char **rest = pn_xcalloc(t->ncols, sizeof(char *));
	size_t	c;
	bool	more = true;

	for (c = 0; c < t->ncols; c++)
		rest[c] = cells[c] ? cells[c] : "";
	while (more) {
		more = false;
		for (c = 0; c < t->ncols; c++) {
			size_t	skip, n = wrap_line(rest[c], w[c], &skip);
			size_t	cw = width_n(rest[c], n);

			fprintf(f, "%s%.*s", c ? "  " : "", (int)n, rest[c]);
			if (c + 1 < t->ncols)
				fprintf(f, "%*s", (int)(w[c] > cw ? w[c] - cw : 0), "");
			rest[c] += n + skip;
			if (*rest[c] != '\0')
				more = true;
		}
		fputc('\n', f);
	}
	free(rest);
}

static void
print_table(const struct pn_table *t, FILE *f)
{
	const struct pn_table *orig = t;
	size_t *w = pn_xcalloc(t->ncols, sizeof(size_t)), r, c;
	struct pn_table d;	/* the cells as shown */

	bool   *shown = pn_xcalloc(t->ncols, sizeof(bool));
	size_t	i, dropped = 0;

	/* the columns shown: all of them, unless they do not fit and some are optional */
	for (c = 0; c < t->ncols; c++)
		shown[c] = true;
	if (!table_wide && t->optional != 0) {
		for (c = 0; c < t->ncols; c++)
			w[c] = width(t->cols[c]);
		for (r = 0; r < t->nrows; r++)
			for (c = 0; c < t->ncols; c++) {
				const char *v = t->cells[r * t->ncols + c];
				size_t	n = width(v ? v : "");

				if (n > w[c])
					w[c] = n;
			}
		if (natural_total(t, w) > TABLE_COLUMNS)
			for (c = 0; c < t->ncols; c++)
				if (c < 64 && (t->optional & (UINT64_C(1) << c))) {
					shown[c] = false;
					dropped++;
				}
	}
	memset(&d, 0, sizeof(d));
	d.ncols = t->ncols - dropped;
	d.nrows = t->nrows;
	d.cols = pn_xcalloc(d.ncols + 1, sizeof(char *));
	for (c = 0, i = 0; c < t->ncols; c++)
		if (shown[c])
			d.cols[i++] = t->cols[c];
	d.cells = pn_xcalloc(t->nrows * d.ncols + 1, sizeof(char *));
	for (r = 0, i = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			char	buf[64];
			const char *v;

			if (!shown[c])
				continue;
			v = display_cell(t->cells[r * t->ncols + c], buf, sizeof(buf));
			d.cells[i++] = pn_xstrdup(v ? v : "");
		}
	t = &d;
	for (c = 0; c < t->ncols; c++)
		w[c] = width(t->cols[c]);
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			size_t	n = width(t->cells[r * t->ncols + c]);

			if (n > w[c])
				w[c] = n;
		}
	fit_columns(t, w);
	print_row(t, (const char *const *)t->cols, w, f);
	for (c = 0; c < t->ncols; c++) {
		fputs(c ? "  " : "", f);
		for (i = 0; i < w[c]; i++)
			fputc('-', f);
	}
	fputc('\n', f);
	for (r = 0; r < t->nrows; r++)
		print_row(t, (const char *const *)&t->cells[r * t->ncols], w, f);
	if (dropped > 0) {
		const struct pn_table *o = orig;

		fputs("(not shown:", f);
		for (c = 0, i = 0; c < o->ncols; c++)
			if (!shown[c])
				fprintf(f, "%s %s", i++ ? "," : "", o->cols[c]);
		fputs("; --wide shows every column)\n", f);
	}
	for (r = 0; r < d.nrows * d.ncols; r++)
		free(d.cells[r]);
	free(d.cells);
	free(d.cols);
	free(shown);
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

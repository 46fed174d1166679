/*
 * statement.c: what the statement adapters share: bounded line reading, a
 * strict CSV splitter, GBK to UTF-8 through glibc's iconv, signed decimal
 * amounts and the providers' local times (docs/RECONCILE.md).
 */
#include "config.h"

#include <errno.h>
#include <iconv.h>
#include <string.h>

#include "money.h"
#include "statement.h"

const struct pn_stmt_adapter *
pn_stmt_adapter_find(const char *provider)
{
	static const struct pn_stmt_adapter *const all[] = {
	    &pn_stmt_alipay,
	    &pn_stmt_wechatpay,
	    &pn_stmt_stripe,
	    NULL,
	};
	size_t i;

	for (i = 0; all[i]; i++)
		if (strcmp(all[i]->provider, provider) == 0)
			return all[i];
	return NULL;
}

void
pn_lines_init(struct pn_lines *l, const unsigned char *data, size_t len)
{
	l->p = data;
	l->end = data + len;
	l->lineno = 0;
	l->raw = NULL;
	l->raw_len = 0;
}

bool
pn_lines_next(struct pn_lines *l, struct pn_arena *a, char **line, bool *eof, struct pn_err *err)
{
	const unsigned char *start = l->p, *nl;
	size_t n;

	*eof = false;
	if (l->p >= l->end) {
		*eof = true;
		return true;
	}
	l->lineno++;
	nl = memchr(start, '\n', (size_t)(l->end - start));
	n = nl ? (size_t)(nl - start) : (size_t)(l->end - start);
	l->p = nl ? nl + 1 : l->end;
	if (n > 0 && start[n - 1] == '\r')
		n--;
	if (n > PN_STMT_MAX_LINE) {
		pn_err_set(err, "line %d: longer than %d bytes", l->lineno, PN_STMT_MAX_LINE);
		return false;
	}
	if (memchr(start, '\0', n) != NULL) {
		pn_err_set(err, "line %d: holds a NUL byte (not a text statement)", l->lineno);
		return false;
	}
	l->raw = start;
	l->raw_len = n;
	*line = pn_arena_strndup(a, (const char *)start, n);
	return true;
}

bool
pn_csv_split(char *line, char **fields, size_t *n, struct pn_err *err)
{
	char *r = line, *w;

	*n = 0;
	for (;;) {
		if (*n == PN_STMT_MAX_FIELDS) {
			pn_err_set(err, "more than %d fields", PN_STMT_MAX_FIELDS);
			return false;
		}
		w = r;
		fields[(*n)++] = w;
		if (*r == '"') {
			r++;
			for (;;) {
				if (*r == '\0') {
					pn_err_set(err, "field %zu: unterminated quote", *n);
					return false;
				}
				if (*r == '"' && r[1] == '"') {
					*w++ = '"';
					r += 2;
				} else if (*r == '"') {
					r++;
					break;
				} else
					*w++ = *r++;
			}
			if (*r != ',' && *r != '\0') {
				pn_err_set(err, "field %zu: text after the closing quote", *n);
				return false;
			}
		} else {
			while (*r != ',' && *r != '\0') {
				if (*r == '"') {
					pn_err_set(err, "field %zu: quote inside an unquoted field",
					           *n);
					return false;
				}
				*w++ = *r++;
			}
		}
		if (*r == '\0') {
			*w = '\0';
			return true;
		}
		r++; /* the comma */
		*w = '\0';
	}
}

int
pn_csv_col(char *const *fields, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(fields[i], name) == 0)
			return (int)i;
	return -1;
}

/*
 * A statement is text: a file with NUL bytes is not one (a download cut short
 * and padded, a disk image's hole, a zip entry that inflated to zeros), and
 * UTF-16 (a spreadsheet's "Unicode text" save) is the wrong encoding.  Said
 * as such here, before any line is read, instead of as a missing header.
 */
bool
pn_stmt_text_check(const unsigned char *data, size_t len, struct pn_err *err)
{
	const unsigned char *nul;
	size_t i, nuls = 0;

	if (len == 0) {
		pn_err_set(err, "empty (0 bytes: a failed or truncated download?)");
		return false;
	}
	if (len >= 2 &&
	    ((data[0] == 0xFF && data[1] == 0xFE) || (data[0] == 0xFE && data[1] == 0xFF))) {
		pn_err_set(err,
		           "not text in the provider's encoding: it starts with a UTF-16 byte "
		           "order mark (re-saved by a spreadsheet? give the file as downloaded)");
		return false;
	}
	if ((nul = memchr(data, '\0', len)) == NULL)
		return true;
	for (i = (size_t)(nul - data); i < len; i++)
		nuls += data[i] == '\0';
	if (nuls == len)
		pn_err_set(err,
		           "not text: NUL bytes at offset 0 (all %zu bytes are NUL: a truncated "
		           "or corrupt download?)",
		           len);
	else
		pn_err_set(err,
		           "not text: NUL bytes at offset %zu (%zu of %zu bytes: a truncated or "
		           "corrupt download?)",
		           (size_t)(nul - data), nuls, len);
	return false;
}

bool
pn_stmt_from_gbk(struct pn_arena *a, const char *in, size_t len, char **out, struct pn_err *err)
{
	iconv_t cd = iconv_open("UTF-8", "GB18030");
	char *ip = (char *)in, *buf, *op;
	size_t il = len, cap = len * 2 + 16, ol = cap;

	if (cd == (iconv_t)-1) {
		pn_err_set(err, "could not open iconv GB18030 to UTF-8: %s", strerror(errno));
		return false;
	}
	buf = pn_arena_alloc(a, cap + 1); /* GBK's 2 bytes are at most 3 in UTF-8 */
	op = buf;
	if (iconv(cd, &ip, &il, &op, &ol) == (size_t)-1) {
		pn_err_set(err, "not GBK text at byte %zu: %s", (size_t)(ip - in), strerror(errno));
		iconv_close(cd);
		return false;
	}
	iconv_close(cd);
	*op = '\0';
	*out = buf;
	return true;
}

bool
pn_stmt_amount(const char *s, int exponent, int64_t *minor, struct pn_err *err)
{
	bool neg = (*s == '-');

	if (!pn_money_parse(neg ? s + 1 : s, exponent, minor, err))
		return false;
	if (neg)
		*minor = -*minor;
	return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool
digits(const char *s, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

static bool
parse_date(const char *s, int *y, int *m, int *d)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (!digits(s, 4, y) || s[4] != '-' || !digits(s + 5, 2, m) || s[7] != '-' ||
	    !digits(s + 8, 2, d) || *y < 2000 || *m < 1 || *m > 12 || *d < 1 || *d > mdays[*m - 1])
		return false;
	return !(*m == 2 && *d == 29 && !((*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0));
}

bool
pn_stmt_day(const char *s, int utc_offset_s, int64_t *epoch)
{
	int y, m, d;

	if (strlen(s) != 10 || !parse_date(s, &y, &m, &d))
		return false;
	*epoch = days_from_civil(y, m, d) * 86400 - utc_offset_s;
	return true;
}

bool
pn_stmt_time(const char *s, int utc_offset_s, int64_t *epoch)
{
	int y, m, d, hh, mm, ss;

	if (strlen(s) != 19 || !parse_date(s, &y, &m, &d) || s[10] != ' ' ||
	    !digits(s + 11, 2, &hh) || s[13] != ':' || !digits(s + 14, 2, &mm) || s[16] != ':' ||
	    !digits(s + 17, 2, &ss) || hh > 23 || mm > 59 || ss > 60)
		return false;
	*epoch = days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss - utc_offset_s;
	return true;
}

struct pn_stmt_txn *
pn_stmt_add(struct pn_arena *a, struct pn_statement *st, int line, struct pn_err *err)
{
	struct pn_stmt_txn *t;

	if (st->ntxns >= PN_STMT_MAX_ROWS) {
		pn_err_set(err, "line %d: more than %d transactions", line, PN_STMT_MAX_ROWS);
		return NULL;
	}
	if (st->ntxns == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 64;
		struct pn_stmt_txn *n = pn_arena_alloc(a, cap * sizeof(*n));

		if (st->ntxns)
			memcpy(n, st->txns, st->ntxns * sizeof(*n));
		st->txns = n;
		st->cap = cap;
	}
	t = &st->txns[st->ntxns++];
	memset(t, 0, sizeof(*t));
	t->line = line;
	return t;
}

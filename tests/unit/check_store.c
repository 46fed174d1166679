/*
 * check_store.c: the ingest statements, made from one table in
 * common/store.c (pn_store_stmt()): their SQL text names every parameter
 * exactly once and in order, with the table's casts; the parameters are the
 * functions' arguments of sql/functions.sql, in order, with their types;
 * the result columns read by name are the SELECT list and the functions'
 * output columns.  No database: the text only.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "store.h"
#include "suites.h"

#define FUNCTIONS_SQL PN_FIXTURES "/../../sql/functions.sql"

/* $1, $2, ... each once, in order, each followed by its cast and then ", "
 * (or the closing parenthesis after the last one). */
static void
check_placeholders(const struct pn_store_stmt *st)
{
	const char *p = st->sql, *q;
	size_t	k = 0;
	char	want[64];

	while ((q = strchr(p, '$')) != NULL) {
		char   *end;
		unsigned long n = strtoul(q + 1, &end, 10);

		ck_assert_msg(k < st->nparams, "%s: more placeholders than the %zu parameters",
			      st->sql, st->nparams);
		ck_assert_msg(n == k + 1, "%s: $%lu where $%zu (%s) belongs", st->sql, n, k + 1,
			      st->params[k].name);
		snprintf(want, sizeof(want), "%s%s", st->params[k].cast,
			 k + 1 < st->nparams ? ", " : ")");
		ck_assert_msg(strncmp(end, want, strlen(want)) == 0, "%s: $%lu not followed by "
			      "\"%s\"", st->sql, n, want);
		p = end;
		k++;
	}
	ck_assert_msg(k == st->nparams, "%s: %zu placeholders for %zu parameters", st->sql, k,
		      st->nparams);
}

/* "SELECT a, b, ... FROM": the columns before ours (ord), then ours in order. */
static void
check_select_list(const struct pn_store_stmt *st)
{
	const char *p = st->sql + strlen("SELECT ");
	const char *from = strstr(st->sql, " FROM ");
	size_t	i, n = 0;

	ck_assert(strncmp(st->sql, "SELECT ", 7) == 0);
	ck_assert_ptr_nonnull(from);
	for (i = 0; p < from; i++) {
		size_t	len = strcspn(p, ", ");

		if (p + len > from)
			len = (size_t)(from - p);
		if (i >= (size_t)st->first_column) {
			ck_assert_msg(n < st->ncolumns, "%s: more columns than read", st->sql);
			ck_assert_msg(strlen(st->columns[n]) == len
				      && strncmp(p, st->columns[n], len) == 0,
				      "%s: column %zu is %.*s, read as %s", st->sql, i + 1, (int)len, p,
				      st->columns[n]);
			n++;
		}
		p += len;
		if (strncmp(p, ", ", 2) == 0)
			p += 2;
	}
	ck_assert_uint_eq(n, st->ncolumns);
}

START_TEST(test_ingest_placeholders)
{
	check_placeholders(pn_store_stmt(false));
	check_select_list(pn_store_stmt(false));
	ck_assert(strstr(pn_store_stmt(false)->sql, " FROM paynotify.ingest($1, ") != NULL);
}
END_TEST

START_TEST(test_combined_placeholders)
{
	check_placeholders(pn_store_stmt(true));
	check_select_list(pn_store_stmt(true));
	ck_assert(strstr(pn_store_stmt(true)->sql, " FROM paynotify.ingest_combined($1, ")
		  != NULL);
	ck_assert_int_eq(pn_store_stmt(true)->first_column, 1);	/* ord */
}
END_TEST

static char *
read_functions_sql(void)
{
	FILE   *f = fopen(FUNCTIONS_SQL, "rb");
	char   *buf;
	long	n;

	ck_assert_msg(f != NULL, "cannot open %s", FUNCTIONS_SQL);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 1);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/*
 * The text between the parenthesis right after the first `head` in sql and
 * the one that closes it, as a list of items split at the commas outside
 * parentheses, each trimmed: items[0..return).  *endp: after it.
 */
static size_t
paren_list(const char *sql, const char *head, char items[][128], size_t max,
	   const char **endp)
{
	const char *p = strstr(sql, head);
	size_t	n = 0, len = 0;
	int	depth = 0;

	while (p != NULL && p[strlen(head)] != '(')
		p = strstr(p + 1, head);
	ck_assert_msg(p != NULL, "%s( not in %s", head, FUNCTIONS_SQL);
	p += strlen(head);
	for (p++; *p; p++) {
		if (*p == '(')
			depth++;
		else if (*p == ')' && depth-- == 0)
			break;
		if ((*p == ',' && depth == 0) || len == 0) {
			if (*p == ',') {
				n++;
				len = 0;
				continue;
			}
			if (isspace((unsigned char)*p))
				continue;	/* leading space of an item */
		}
		ck_assert_uint_lt(n, max);
		ck_assert_uint_lt(len, 127);
		items[n][len++] = isspace((unsigned char)*p) ? ' ' : *p;
		items[n][len] = '\0';
	}
	ck_assert_int_eq(*p, ')');
	*endp = p + 1;
	return len > 0 ? n + 1 : n;
}

/* The word `w` (0: the first) of item, or "" (copied into out). */
static const char *
word(const char *item, int w, char *out, size_t sz)
{
	size_t	len;

	for (;;) {
		item += strspn(item, " ");
		len = strcspn(item, " ");
		if (w-- == 0)
			break;
		item += len;
	}
	snprintf(out, sz, "%.*s", (int)len, item);
	return out;
}

/* The statement's parameters are the function's arguments p_<name>, in
 * order, each cast to the argument's type where the table casts it; its
 * columns are output columns of the function, in their order. */
static void
check_against_function(const struct pn_store_stmt *st, const char *function,
		       const char *returns_table)
{
	char   *sql = read_functions_sql();
	const char *end;
	char	items[48][128], outs[48][128], w0[128], w1[128], w2[128], want[160];
	size_t	n, i, nin = 0, nout = 0, col = 0;

	n = paren_list(sql, function, items, 48, &end);
	for (i = 0; i < n; i++) {
		if (strcmp(word(items[i], 0, w0, sizeof(w0)), "OUT") == 0) {
			snprintf(outs[nout++], sizeof(outs[0]), "%s", word(items[i], 1, w1,
									     sizeof(w1)));
			continue;
		}
		ck_assert_msg(nin < st->nparams, "%s: argument %s has no parameter", function,
			      items[i]);
		snprintf(want, sizeof(want), "p_%s", st->params[nin].name);
		ck_assert_str_eq(word(items[i], 0, w0, sizeof(w0)), want);
		if (st->params[nin].cast[0] != '\0') {
			snprintf(want, sizeof(want), "::%s", word(items[i], 1, w2, sizeof(w2)));
			ck_assert_msg(strcmp(st->params[nin].cast, want) == 0, "%s: $%zu %s cast %s, "
				      "the argument is %s", function, nin + 1, st->params[nin].name,
				      st->params[nin].cast, items[i]);
		}
		nin++;
	}
	ck_assert_msg(nin == st->nparams, "%s: %zu arguments, %zu parameters", function, nin,
		      st->nparams);
	if (returns_table != NULL) {
		/* the function's own RETURNS TABLE, right after its arguments */
		n = paren_list(end, returns_table, items, 48, &end);
		for (i = 0; i < n; i++)
			snprintf(outs[nout++], sizeof(outs[0]), "%s", word(items[i], 0, w0,
									     sizeof(w0)));
		/* the columns before ours */
		ck_assert_uint_ge(nout, (size_t)st->first_column);
		i = (size_t)st->first_column;
	} else
		i = 0;
	/* our columns, in order, among the function's (ingest also has order_id) */
	for (; i < nout && col < st->ncolumns; i++)
		if (strcmp(outs[i], st->columns[col]) == 0)
			col++;
	ck_assert_msg(col == st->ncolumns, "%s: column %s is not an output column in order",
		      function, col < st->ncolumns ? st->columns[col] : "?");
	free(sql);
}

START_TEST(test_ingest_matches_functions_sql)
{
	check_against_function(pn_store_stmt(false), "CREATE OR REPLACE FUNCTION paynotify.ingest",
			       NULL);
}
END_TEST

START_TEST(test_combined_matches_functions_sql)
{
	check_against_function(pn_store_stmt(true), "CREATE OR REPLACE FUNCTION paynotify.ingest_combined", "RETURNS TABLE ");
}
END_TEST

Suite *
suite_store(void)
{
	Suite  *s = suite_create("store");
	TCase  *tc = tcase_create("statements");

	tcase_add_test(tc, test_ingest_placeholders);
	tcase_add_test(tc, test_combined_placeholders);
	tcase_add_test(tc, test_ingest_matches_functions_sql);
	tcase_add_test(tc, test_combined_matches_functions_sql);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * sql.h: SQL text is a string literal, and the compiler checks it.
 *
 * Values go through parameters; the text of a statement is fixed when the
 * program is built.  Every call that takes SQL text (libpq's, and the admin
 * command's pn_db_* helpers) is reached through a macro that puts its SQL
 * argument between two empty literals, "" sql "": anything but a literal
 * (or a macro that is one) does not compile, so no SQL can be built from
 * strings at run time.  Included by common/store.c and admin/admin.h, after
 * <libpq-fe.h> (included here first, so its prototypes are not rewritten).
 *
 * The admin helpers take a struct pn_sql, made only by PN_SQL("...") or, for
 * a named constant (static const char x_sql[] = "..."), by PN_SQL_CONST(x_sql),
 * which accepts a const char array and nothing else.  The one exception is
 * pn_db_script() (admin/db.c): the text of the numbered files in sql/,
 * applied as they are by `paynotify migrate`.
 */
#ifndef PN_SQL_H
#define PN_SQL_H

#include <libpq-fe.h>

/* SQL text checked to be literal; only PN_SQL and PN_SQL_CONST make one. */
struct pn_sql {
	const char *text;
};

#define PN_SQL(s) ((const struct pn_sql){"" s ""})
/* A const char array (its text fixed where it is defined); a pointer does not compile. */
#define PN_SQL_CONST(a) ((const struct pn_sql){_Generic(&(a), const char (*)[sizeof(a)]: (a))})

/* libpq's calls that take SQL text: a literal only. */
#define PQexec(conn, sql) (PQexec)((conn), PN_SQL(sql).text)
#define PQexecParams(conn, sql, ...) (PQexecParams)((conn), PN_SQL(sql).text, __VA_ARGS__)
#define PQprepare(conn, name, sql, ...) (PQprepare)((conn), (name), PN_SQL(sql).text, __VA_ARGS__)
#define PQsendQuery(conn, sql) (PQsendQuery)((conn), PN_SQL(sql).text)
#define PQsendQueryParams(conn, sql, ...) \
	(PQsendQueryParams)((conn), PN_SQL(sql).text, __VA_ARGS__)
#define PQsendPrepare(conn, name, sql, ...) \
	(PQsendPrepare)((conn), (name), PN_SQL(sql).text, __VA_ARGS__)

#endif

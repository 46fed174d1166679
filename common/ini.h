/*
 * ini.h: the INI reader of the configuration: lines, comments, section
 * headers and "key = value" pairs.  It knows no section or key: each header
 * and each pair goes to the caller's handler (cfg.c), which says whether it
 * is accepted; every refused or malformed line goes to the handler's error
 * hook with the reason, and reading goes on.
 */
#ifndef PN_INI_H
#define PN_INI_H

#include <stdbool.h>

#include "util.h"

struct pn_ini_handler {
	/* "[name]": name as written between the brackets (the handler trims
	 * it).  false with err set: refused; the keys up to the next header
	 * are then skipped. */
	bool	(*section)(void *ctx, int line, char *name, struct pn_err *err);
	/* "key = value", both trimmed, outside a skipped section.  false with
	 * err set: refused. */
	bool	(*key)(void *ctx, int line, char *key, char *value, struct pn_err *err);
	/* A line refused or malformed: why. */
	void	(*error)(void *ctx, int line, const char *msg);
};

/*
 * Read text (NUL-terminated; modified in place) line by line, the first
 * line 1.  A comment starts with ';' or '#' at the start of a line or after
 * a blank; blank lines are skipped.  A line is a section header "[...]"
 * (nothing after the ']'), or "key = value"; anything else is an error.
 */
void pn_ini_parse(char *text, const struct pn_ini_handler *h, void *ctx);

#endif

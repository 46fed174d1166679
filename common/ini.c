/*
 * ini.c: the INI reader (ini.h).
 */
#include "config.h"

#include <string.h>

#include "ini.h"

/* Strip an inline comment: ';' or '#' at the start or after a blank. */
static void
strip_comment(char *s)
{
	char *c;

	for (c = s; *c; c++)
		if ((*c == ';' || *c == '#') && (c == s || c[-1] == ' ' || c[-1] == '\t')) {
			*c = '\0';
			return;
		}
}

void
pn_ini_parse(char *text, const struct pn_ini_handler *h, void *ctx)
{
	char   *line, *next;
	int	lineno = 0;
	bool	skip = false;	/* the current section header was refused: ignore its keys */
	struct pn_err e;

	for (line = text; line; line = next) {
		char *eq, *key, *value;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		strip_comment(line);
		line = pn_trim(line);
		if (*line == '\0')
			continue;
		if (*line == '[') {
			char *close = strchr(line, ']');

			if (close == NULL || close[1] != '\0') {
				pn_err_set(&e, "malformed section header \"%s\"", line);
				skip = true;
				goto line_error;
			}
			*close = '\0';
			skip = !h->section(ctx, lineno, line + 1, &e);
			if (skip)
				goto line_error;
			continue;
		}
		eq = strchr(line, '=');
		if (eq == NULL) {
			pn_err_set(&e, "expected \"key = value\", got \"%s\"", line);
			goto line_error;
		}
		*eq = '\0';
		key = pn_trim(line);
		value = pn_trim(eq + 1);
		if (skip || h->key(ctx, lineno, key, value, &e))
			continue;
line_error:
		h->error(ctx, lineno, e.msg);
	}
}

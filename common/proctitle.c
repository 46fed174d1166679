/*
 * proctitle.c: overwrite the argv area so that ps shows what a process is.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "proctitle.h"

extern char **environ;

static char *title_area;	/* argv[0] of the original argv */
static size_t title_size;	/* bytes we may write, the final NUL included */
static char **saved_argv;	/* the heap copies: reachable, never freed */
static char **saved_environ;

char  **
pn_proctitle_init(int argc, char **argv)
{
	char   *end = NULL;
	size_t	n, i;

	if (argc <= 0 || argv == NULL || argv[0] == NULL)
		return argv;
	/* The area: argv strings, then environment strings, as long as each
	 * starts right after the one before (as the kernel lays them out). */
	for (i = 0; i < (size_t)argc; i++) {
		if (i > 0 && argv[i] != end + 1)
			break;
		end = argv[i] + strlen(argv[i]);
	}
	for (n = 0; environ[n]; n++)
		;
	for (i = 0; i < n; i++) {
		if (environ[i] != end + 1)
			break;
		end = environ[i] + strlen(environ[i]);
	}

	/* Move the environment and argv out of the way. */
	saved_environ = pn_xmalloc((n + 1) * sizeof(char *));
	for (i = 0; i < n; i++)
		saved_environ[i] = pn_xstrdup(environ[i]);
	saved_environ[n] = NULL;
	environ = saved_environ;
	saved_argv = pn_xmalloc(((size_t)argc + 1) * sizeof(char *));
	for (i = 0; i < (size_t)argc; i++)
		saved_argv[i] = pn_xstrdup(argv[i]);
	saved_argv[argc] = NULL;
#ifdef __GLIBC__
	/* err(3), error(3) and getopt's messages point into argv[0] */
	program_invocation_name = saved_argv[0];
	{
		char   *slash = strrchr(saved_argv[0], '/');

		program_invocation_short_name = slash ? slash + 1 : saved_argv[0];
	}
#endif
	title_area = argv[0];
	title_size = (size_t)(end - argv[0]) + 1;
	return saved_argv;
}

void
pn_proctitle_set(const char *fmt, ...)
{
	va_list	ap;
	int	len;

	if (title_area == NULL || title_size < 2)
		return;
	va_start(ap, fmt);
	len = vsnprintf(title_area, title_size, fmt, ap);
	va_end(ap);
	if (len < 0)
		len = 0;
	if ((size_t)len >= title_size)
		len = (int)title_size - 1;
	/* NULs after the title: the kernel then shows exactly the title */
	memset(title_area + len, '\0', title_size - (size_t)len);
}

void
pn_proctitle_set_name(const char *name)
{
#ifdef PR_SET_NAME
	char	comm[16];

	snprintf(comm, sizeof(comm), "%s", name);
	(void)prctl(PR_SET_NAME, comm, 0, 0, 0);
#endif
}

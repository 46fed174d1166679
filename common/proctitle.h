/*
 * proctitle.h: the process title ps shows ("paynotify-alipay: worker 3").
 *
 * Linux has no setproctitle(3): as PostgreSQL's ps_status.c does, the title
 * is written over the memory that held argv[] and, after it, the
 * environment strings (both moved to the heap first), padded with NULs;
 * the kernel's 15-byte task name (top, ps -o comm) is set with
 * prctl(PR_SET_NAME).
 */
#ifndef PN_PROCTITLE_H
#define PN_PROCTITLE_H

#include "util.h"

/*
 * Call first thing in main(), before anything keeps a pointer into argv or
 * environ: it copies both to the heap (environ is switched to the copy)
 * and returns the copy of argv, which main() uses from then on.  Never
 * freed (the process lives with it).
 */
char  **pn_proctitle_init(int argc, char **argv);

/* Set the title ps shows; longer titles are cut to the space argv had.
 * Before pn_proctitle_init(), or if it found no space, does nothing. */
void	pn_proctitle_set(const char *fmt, ...) PN_PRINTF(1, 2);

/* Set the kernel's task name (at most 15 bytes are kept). */
void	pn_proctitle_set_name(const char *name);

#endif

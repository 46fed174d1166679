/*
 * pidfile.h: --pidfile FILE, the supervisor's process id for scripts
 * (kill -HUP "$(cat FILE)") and supervisors that want one.
 */
#ifndef PN_PIDFILE_H
#define PN_PIDFILE_H

#include <stdbool.h>

#include "util.h"

/*
 * Before starting: false (err set) if path names a live process that runs
 * program (another receiver); a missing file, or one naming a dead
 * process, a process running something else (the pid was reused) or no
 * pid at all, is stale and will be replaced.
 */
bool	pn_pidfile_check(const char *path, const char *program, struct pn_err *err) PN_WUR;

/* Write this process's pid to path atomically (a temporary file in the
 * same directory, renamed over it). */
bool	pn_pidfile_write(const char *path, struct pn_err *err) PN_WUR;

/* Remove path if it still holds this process's pid (a clean stop). */
void	pn_pidfile_remove(const char *path);

#endif

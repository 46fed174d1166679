/*
 * exit.h: the exit statuses of every program, receivers and `paynotify`
 * alike (the table is in docs/OPERATIONS.md, "Exit statuses").
 *
 * 0-4 are results an operator's script acts on; 64 and up follow BSD's
 * sysexits.h, so that a supervisor (systemd's RestartPreventExitStatus=78)
 * and a cron wrapper can tell "fix the command line" from "fix the
 * configuration" from "the database is not there".
 */
#ifndef PN_EXIT_H
#define PN_EXIT_H

#define PN_EXIT_OK 0
#define PN_EXIT_ATTENTION 1	/* something needs a human (report, replay) */
#define PN_EXIT_UNVERIFIED 2	/* replay: a stored notification does not verify (altered?) */
#define PN_EXIT_KEY_GONE 4	/* replay: the key that verified it is no longer configured */
#define PN_EXIT_USAGE 64	/* EX_USAGE: bad command line (option, value, filter) */
#define PN_EXIT_UNAVAILABLE 69	/* EX_UNAVAILABLE: database unreachable, query failed,
				 * schema at the wrong version */
#define PN_EXIT_SOFTWARE 70	/* EX_SOFTWARE: could not initialise a library */
#define PN_EXIT_OSERR 71	/* EX_OSERR: could not listen, bind or fork */
#define PN_EXIT_IOERR 74	/* EX_IOERR: could not read input or write output */
#define PN_EXIT_CONFIG 78	/* EX_CONFIG: the configuration cannot be loaded or has an
				 * error (check-config); a site cannot do what was asked */

#endif

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
#define PN_EXIT_ATTENTION 1	/* something needs a human (report, replay, query, reconcile) */
#define PN_EXIT_UNVERIFIED 2	/* replay: a stored notification does not verify (altered?) */
/*
 * Could not do the job: the database is unreachable, a query failed, the
 * schema is at the wrong version, a provider's API did not answer, an input
 * file cannot be read or is malformed, an output cannot be written.  One
 * code (3, as since the first release) so that a cron wrapper retries it;
 * the message says which.
 */
#define PN_EXIT_FAILED 3
#define PN_EXIT_UNAVAILABLE PN_EXIT_FAILED	/* database or provider unavailable */
#define PN_EXIT_IOERR PN_EXIT_FAILED		/* could not read input or write output */
#define PN_EXIT_KEY_GONE 4	/* replay: the key that verified it is no longer configured */
#define PN_EXIT_USAGE 64	/* EX_USAGE: bad command line (option, value, filter) */
#define PN_EXIT_SOFTWARE 70	/* EX_SOFTWARE: could not initialise a library */
#define PN_EXIT_OSERR 71	/* EX_OSERR: could not listen, bind, fork or write the pid file */
#define PN_EXIT_IN_USE 73	/* EX_CANTCREAT: another receiver serves the socket, or the
				 * --pidfile names a live one: nothing was touched */
#define PN_EXIT_CONFIG 78	/* EX_CONFIG: the configuration cannot be loaded or has an
				 * error (check-config); a site cannot do what was asked */

#endif

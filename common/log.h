/*
 * log.h: diagnostics on stderr, one line per request.
 *
 * Lines are logfmt ("key=value ..."), values quoted when needed.  Nothing
 * here ever receives a secret: callers pass ids (key_id), never key bytes.
 */
#ifndef PN_LOG_H
#define PN_LOG_H

#include <stdint.h>

#include "util.h"

/*
 * A line's priority.  ERROR, INFO and DEBUG are also the [log] level values
 * (0, 1, 2) passed to pn_log_init/pn_log_set_level; WARNING is written at
 * every level, like ERROR.
 */
enum pn_log_level { PN_LOG_ERROR = 0, PN_LOG_INFO = 1, PN_LOG_DEBUG = 2, PN_LOG_WARNING = 3 };

/* Also decides the form (below) from JOURNAL_STREAM and fd 2: call it after
 * stderr is where it stays. */
void pn_log_init(const char *program, int level);
void pn_log_set_level(int level);
/* Whether fd 2 is the stream systemd's JOURNAL_STREAM names. */
bool pn_log_stderr_is_journal(void);
/*
 * A free-form diagnostic line: "TIME <program>[pid]: <level>: message", or
 * when stderr is the journal "<N>[pid] <level>: message", N the syslog
 * priority (3 error, 4 warning, 6 info, 7 debug) journald files it under.
 */
void pn_log(enum pn_log_level level, const char *fmt, ...) PN_PRINTF(2, 3);

/* Longest forwarded-for value logged (bytes, with the NUL). */
#define PN_LOG_FORWARDED_MAX 128

/* The per-request line. */
struct pn_reqlog {
	const char *client;		/* REMOTE_ADDR */
	const char *forwarded;		/* a trusted proxy's forwarded-for header, or NULL */
	const char *site;
	const char *provider;
	const char *dedup_key;
	const char *order_id;
	const char *outcome;		/* applied, duplicate, rejected, ... */
	const char *key_id;
	const char *reason;		/* why, for anything but success */
	int	status;
	int64_t	notification_id;	/* 0 when nothing was stored */
	int64_t	micros;
};
/* Written at [log] level 1, and at 0 when status >= 400; same two forms. */
void pn_log_request(const struct pn_reqlog *rl);
/* Its priority: info below 400, warning 4xx, error 5xx. */
enum pn_log_level pn_log_request_level(int status);

#endif

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

enum pn_log_level { PN_LOG_ERROR = 0, PN_LOG_INFO = 1, PN_LOG_DEBUG = 2 };

void pn_log_init(const char *program, int level);
void pn_log_set_level(int level);
/* A free-form diagnostic line: "<program>[pid]: <level>: message". */
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
void pn_log_request(const struct pn_reqlog *rl);

#endif

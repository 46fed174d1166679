/*
 * metrics.h: live counters of a FastCGI receiver, shared by its workers.
 *
 * The supervisor (or a single-process receiver) maps one anonymous shared
 * region before it forks; every worker counts into it with atomic adds and
 * any worker renders all of it on the status path ([metrics] status_path)
 * in the Prometheus text format.  Nothing is allocated per request: the
 * region has a fixed size and the answer is written into the receiver's
 * reused response buffer.
 *
 * Label cardinality is bounded: the site label is a configured site name
 * (at most PN_METRICS_MAX_SITES over the life of the process, reloads
 * included), "(unknown)" for any other name in the path (attacker-chosen),
 * "(none)" when the path names no site, and "(other)" once the table is
 * full; outcome and status come from fixed lists ("other" for the rest);
 * the event type of paynotify_events_total is the provider's own word from
 * a verified notification, at most PN_METRICS_MAX_TYPES series.
 *
 * CGI has no process that outlives a request: pn_metrics_init() is never
 * called, every pn_metrics_* call is a no-op and the status path answers
 * 404 (use `paynotify stats` and the log).
 */
#ifndef PN_METRICS_H
#define PN_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "cfg.h"
#include "event.h"
#include "util.h"

#define PN_METRICS_MAX_SITES 256
/* Distinct (site, event type, handled) series of paynotify_events_total;
 * once full, new ones count under type "(other)". */
#define PN_METRICS_MAX_TYPES 512
#define PN_METRICS_TYPE_MAX 64	/* bytes of a type label kept */

/* Map the shared region (before forking workers).  false: no live metrics. */
bool pn_metrics_init(const char *provider, struct pn_err *err) PN_WUR;
/* Are live metrics available in this process (false under CGI)? */
bool pn_metrics_live(void);

/* Supervisor side (one writer): give cfg's sites their label slots (at
 * start-up and after every reload, before the new workers start). */
void pn_metrics_sites(const struct pn_config *cfg);
void pn_metrics_workers(int configured, int alive);
void pn_metrics_worker_died(void);	/* an unexpected exit, restarted */
void pn_metrics_reload(bool ok);	/* a SIGHUP reload done or refused */

/* Worker side.  site: the configured site the request was for, or NULL;
 * named: the path named some site (counted as "(unknown)" when site is
 * NULL).  outcome: the log line's outcome. */
void pn_metrics_request(const char *site, bool named, const char *outcome, int status);
void pn_metrics_ingested(void);		/* a notification stored (commit done) */
/*
 * A verified notification stored or counted as a duplicate delivery, by
 * the provider's event type (NULL: "(none)"): paynotify_events_total
 * {site, type, handled}.  handled false: the type has no handling
 * (outcome unhandled; `paynotify report --unhandled`).  The type comes
 * only from signed content, and the series are bounded (PN_METRICS_MAX_TYPES).
 */
void pn_metrics_event(const char *site, const char *type, bool handled);
/*
 * A request refused (answered 4xx in the provider's failure form), by
 * reason: paynotify_rejections_total{site, reason}.  site and named as
 * for pn_metrics_request(); the reason is one of a fixed list (enum
 * pn_reject), never text from the request.
 */
void pn_metrics_rejected(const char *site, bool named, enum pn_reject reason);
/*
 * A verified notification's clock skew: the receiver's clock minus the
 * send time the provider signed (pn_event.signed_time), in seconds;
 * positive: the notification looks old (our clock ahead, or delivery
 * took that long), negative: it looks sent in the future (our clock
 * behind).  Only for a configured site and a signature that verified and
 * passed the freshness check, so a forged request cannot move it.
 */
void pn_metrics_skew(const char *site, int64_t skew_s);
/* A connection closed before its request's parameters arrived within
 * [limits] read_timeout_ms: there was no request to count or answer. */
void pn_metrics_dropped(void);

/* Append the exposition text; db_up: the database answered a ping just now. */
void pn_metrics_render(struct pn_buf *out, bool db_up);

#endif

/*
 * metrics.c: the shared counter region and its Prometheus rendering.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "metrics.h"

/* Site label slots: three fixed ones, then the configured sites. */
enum { SLOT_NONE = 0, SLOT_UNKNOWN = 1, SLOT_OTHER = 2, SLOT_SITES = 3 };
#define NSLOTS (SLOT_SITES + PN_METRICS_MAX_SITES)
#define SITE_NAME_MAX 65	/* cfg.c: site names are at most 64 bytes */

static const char *const outcomes[] = {
	"applied", "already_applied", "unknown_order", "amount_mismatch", "merchant_mismatch",
	"mode_mismatch", "txn_mismatch", "duplicate_payment", "paid_after_close",
	"conflicting_duplicate", "ignored", "combined", "missing_id", "foreign_site", "unhandled",
	"refund_failed", "pending_confirmation", "dispute", "complaint", "duplicate", "rejected",
	"unavailable", "health",
	"other",
};
#define NOUTCOMES (sizeof(outcomes) / sizeof(outcomes[0]))

static const int statuses[] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 431, 500, 503,
			       0};
#define NSTATUSES (sizeof(statuses) / sizeof(statuses[0]))

/* The reason labels of paynotify_rejections_total, in enum pn_reject's order. */
static const char *const reject_reasons[PN_REJECT_N] = {
	[PN_REJECT_DEFAULT] = NULL,	/* never counted as it is: the pipeline resolves it */
	[PN_REJECT_STALE] = "stale",
	[PN_REJECT_UNKNOWN_KEY] = "unknown_key",
	[PN_REJECT_UNSIGNED] = "unsigned",
	[PN_REJECT_PROBE] = "probe",
	[PN_REJECT_MALFORMED] = "malformed",
	[PN_REJECT_BAD_SIGNATURE] = "bad_signature",
	[PN_REJECT_UNKNOWN_SITE] = "unknown_site",
	[PN_REJECT_METHOD] = "method",
	[PN_REJECT_TOO_LARGE] = "too_large",
	[PN_REJECT_TIMEOUT] = "timeout",
	[PN_REJECT_BAD_REQUEST] = "bad_request",
};

/* The clock skew of one site (see pn_metrics_skew()). */
struct skew {
	int64_t	last;				/* seconds, receiver - signed */
	int64_t	abs_max;			/* largest |last| since start */
	int64_t	at;				/* Unix seconds of the sample, 0: none */
};

/*
 * One series of paynotify_events_total.  Claimed by one worker (state
 * EMPTY -> BUSY by compare-and-swap), written, then published (READY,
 * release); readers use only READY entries.  Two workers may claim two
 * entries for the same series at once: the rendering adds them up, so
 * each series is printed once.
 */
enum { TYPE_EMPTY = 0, TYPE_BUSY = 1, TYPE_READY = 2 };
struct type_entry {
	uint32_t state;
	uint32_t slot;				/* site slot, as requests[] */
	uint32_t handled;
	char	type[PN_METRICS_TYPE_MAX + 1];
	uint64_t count;
};

struct shared {
	char	provider[32];
	int64_t	start_time;
	uint32_t nsites;			/* slots used; release/acquire */
	char	names[PN_METRICS_MAX_SITES][SITE_NAME_MAX];
	uint64_t requests[NSLOTS][NOUTCOMES][NSTATUSES];
	int64_t	last_ingest;			/* Unix seconds, 0: never */
	int32_t	workers, workers_alive;
	uint64_t worker_restarts;
	uint64_t dropped_read_timeout;		/* connections, see pn_metrics_dropped() */
	uint64_t generation;			/* 1 + successful reloads */
	uint64_t reloads_ok, reloads_refused;
	int64_t	last_reload_refused;		/* Unix seconds, 0: never */
	struct type_entry types[PN_METRICS_MAX_TYPES];
	uint64_t types_other[NSLOTS][2];	/* the table was full; [handled] */
	uint64_t rejections[NSLOTS][PN_REJECT_N];
	struct skew skew[NSLOTS];
};

static struct shared *M;

#define ADD(x, n) __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

bool
pn_metrics_init(const char *provider, struct pn_err *err)
{
	void   *p;

	if (M != NULL)
		return true;
	p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED) {
		pn_err_set(err, "could not map %zu bytes of shared memory for the metrics: %s",
			   sizeof(struct shared), strerror(errno));
		return false;
	}
	M = p;		/* zero-filled by the kernel */
	snprintf(M->provider, sizeof(M->provider), "%s", provider);
	M->start_time = (int64_t)time(NULL);
	M->generation = 1;
	return true;
}

bool
pn_metrics_live(void)
{
	return M != NULL;
}

static int
find_site(const char *name)
{
	uint32_t i, n = __atomic_load_n(&M->nsites, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++)
		if (strcmp(M->names[i], name) == 0)
			return (int)i;
	return -1;
}

static size_t
site_slot(const char *site, bool named)
{
	if (site != NULL) {
		int i = find_site(site);

		return i >= 0 ? SLOT_SITES + (size_t)i : SLOT_OTHER;
	}
	return named ? SLOT_UNKNOWN : SLOT_NONE;
}

void
pn_metrics_sites(const struct pn_config *cfg)
{
	size_t	i;

	if (M == NULL || cfg == NULL)
		return;
	for (i = 0; i < cfg->nsites; i++) {
		uint32_t n = M->nsites;

		if (find_site(cfg->sites[i].name) >= 0 || n == PN_METRICS_MAX_SITES)
			continue;	/* a full table counts new sites as "(other)" */
		snprintf(M->names[n], SITE_NAME_MAX, "%s", cfg->sites[i].name);
		__atomic_store_n(&M->nsites, n + 1, __ATOMIC_RELEASE);
	}
}

void
pn_metrics_workers(int configured, int alive)
{
	if (M == NULL)
		return;
	SET(M->workers, configured);
	SET(M->workers_alive, alive);
}

void
pn_metrics_worker_died(void)
{
	if (M != NULL)
		ADD(M->worker_restarts, 1);
}

void
pn_metrics_dropped(void)
{
	if (M != NULL)
		ADD(M->dropped_read_timeout, 1);
}

void
pn_metrics_reload(bool ok)
{
	if (M == NULL)
		return;
	if (ok) {
		ADD(M->reloads_ok, 1);
		ADD(M->generation, 1);
	} else {
		ADD(M->reloads_refused, 1);
		SET(M->last_reload_refused, (int64_t)time(NULL));
	}
}

void
pn_metrics_request(const char *site, bool named, const char *outcome, int status)
{
	size_t	slot, o, s;

	if (M == NULL)
		return;
	slot = site_slot(site, named);
	for (o = 0; o < NOUTCOMES - 1; o++)
		if (outcome != NULL && strcmp(outcomes[o], outcome) == 0)
			break;
	for (s = 0; s < NSTATUSES - 1; s++)
		if (statuses[s] == status)
			break;
	ADD(M->requests[slot][o][s], 1);
}

void
pn_metrics_event(const char *site, const char *type, bool handled)
{
	char	t[PN_METRICS_TYPE_MAX + 1];
	size_t	i, slot;

	if (M == NULL)
		return;
	slot = site_slot(site, site != NULL);
	snprintf(t, sizeof(t), "%s", type != NULL ? type : "(none)");
	for (i = 0; i < PN_METRICS_MAX_TYPES; i++) {
		struct type_entry *e = &M->types[i];
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);

		if (st == TYPE_READY) {
			if (e->slot == slot && e->handled == (uint32_t)handled
			    && strcmp(e->type, t) == 0) {
				ADD(e->count, 1);
				return;
			}
			continue;
		}
		if (st == TYPE_EMPTY) {
			uint32_t empty = TYPE_EMPTY;

			if (!__atomic_compare_exchange_n(&e->state, &empty, TYPE_BUSY, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;	/* another worker took it: look on */
			e->slot = (uint32_t)slot;
			e->handled = handled;
			memcpy(e->type, t, sizeof(t));
			e->count = 1;
			__atomic_store_n(&e->state, TYPE_READY, __ATOMIC_RELEASE);
			return;
		}
	}
	ADD(M->types_other[slot][handled ? 1 : 0], 1);
}

void
pn_metrics_rejected(const char *site, bool named, enum pn_reject reason)
{
	if (M == NULL || reason <= PN_REJECT_DEFAULT || reason >= PN_REJECT_N)
		return;
	ADD(M->rejections[site_slot(site, named)][reason], 1);
}

void
pn_metrics_skew(const char *site, int64_t skew_s)
{
	struct skew *k;
	int64_t	a = skew_s < 0 ? -skew_s : skew_s, old;
	int	i;

	if (M == NULL || site == NULL || (i = find_site(site)) < 0 || skew_s == INT64_MIN)
		return;		/* only configured sites' own slots: bounded, never "(other)" */
	k = &M->skew[SLOT_SITES + (size_t)i];
	SET(k->last, skew_s);
	SET(k->at, (int64_t)time(NULL));
	old = GET(k->abs_max);
	while (a > old && !__atomic_compare_exchange_n(&k->abs_max, &old, a, false,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;	/* old reloaded: another worker raised it */
}

void
pn_metrics_ingested(void)
{
	if (M != NULL)
		SET(M->last_ingest, (int64_t)time(NULL));
}

static const char *
slot_label(size_t slot)
{
	switch (slot) {
	case SLOT_NONE: return "(none)";
	case SLOT_UNKNOWN: return "(unknown)";
	case SLOT_OTHER: return "(other)";
	default: return M->names[slot - SLOT_SITES];
	}
}

/* "# HELP"/"# TYPE" and one unlabelled-but-for-provider sample. */
static void
one(struct pn_buf *b, const char *name, const char *type, const char *help, long long v)
{
	pn_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s{provider=\"%s\"} %lld\n", name, help, name,
		      type, name, M->provider, v);
}

/* A label value as Prometheus reads it: \, " and newline escaped. */
static void
label_value(struct pn_buf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			pn_buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			pn_buf_printf(b, "\\n");
		else if ((unsigned char)*v < 0x20 || *v == 0x7f)
			pn_buf_printf(b, "?");
		else
			pn_buf_printf(b, "%c", *v);
	}
}

static void
type_sample(struct pn_buf *b, size_t slot, const char *type, bool handled, uint64_t v)
{
	pn_buf_printf(b, "paynotify_events_total{provider=\"%s\",site=\"%s\",type=\"", M->provider,
		      slot_label(slot));
	label_value(b, type);
	pn_buf_printf(b, "\",handled=\"%s\"} %llu\n", handled ? "yes" : "no",
		      (unsigned long long)v);
}

/* paynotify_events_total: every series once (entries of one series added up). */
static void
render_types(struct pn_buf *b)
{
	size_t	i, j, slot;

	pn_buf_printf(b, "# HELP paynotify_events_total Verified notifications (duplicate "
		      "deliveries included) by site and the provider's event type; handled=\"no\": "
		      "a type paynotify has no handling for (paynotify report --unhandled).\n"
		      "# TYPE paynotify_events_total counter\n");
	for (i = 0; i < PN_METRICS_MAX_TYPES; i++) {
		const struct type_entry *e = &M->types[i];
		uint64_t v;
		bool	seen = false;

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != TYPE_READY)
			continue;
		for (j = 0; j < i && !seen; j++) {
			const struct type_entry *f = &M->types[j];

			seen = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE) == TYPE_READY
			    && f->slot == e->slot && f->handled == e->handled
			    && strcmp(f->type, e->type) == 0;
		}
		if (seen)
			continue;
		v = GET(e->count);
		for (j = i + 1; j < PN_METRICS_MAX_TYPES; j++) {
			const struct type_entry *f = &M->types[j];

			if (__atomic_load_n(&f->state, __ATOMIC_ACQUIRE) == TYPE_READY
			    && f->slot == e->slot && f->handled == e->handled
			    && strcmp(f->type, e->type) == 0)
				v += GET(f->count);
		}
		type_sample(b, e->slot, e->type, e->handled != 0, v);
	}
	for (slot = 0; slot < NSLOTS; slot++)
		for (j = 0; j < 2; j++)
			if (GET(M->types_other[slot][j]) != 0)
				type_sample(b, slot, "(other)", j == 1, GET(M->types_other[slot][j]));
}

/* paynotify_rejections_total (every reason for a configured site, zeros too,
 * so a rate sees the first one) and the clock-skew gauges. */
static void
render_rejections_skew(struct pn_buf *b, size_t nslots)
{
	size_t	slot, r;

	pn_buf_printf(b, "# HELP paynotify_rejections_total Requests refused, by site and reason "
		      "(stale: signed timestamp outside the tolerance; bad_signature, "
		      "unknown_key, unsigned, probe, malformed, unknown_site, method, too_large, "
		      "timeout, bad_request).\n# TYPE paynotify_rejections_total counter\n");
	for (slot = 0; slot < nslots; slot++)
		for (r = PN_REJECT_DEFAULT + 1; r < PN_REJECT_N; r++) {
			uint64_t v = GET(M->rejections[slot][r]);

			if (v == 0 && slot < SLOT_SITES)
				continue;
			pn_buf_printf(b, "paynotify_rejections_total{provider=\"%s\",site=\"%s\","
				      "reason=\"%s\"} %llu\n", M->provider, slot_label(slot),
				      reject_reasons[r], (unsigned long long)v);
		}
	pn_buf_printf(b, "# HELP paynotify_clock_skew_seconds Receiver clock minus the "
		      "provider's signed send time of the last verified notification (delivery "
		      "delay included; negative: the receiver's clock is behind).\n"
		      "# TYPE paynotify_clock_skew_seconds gauge\n");
	for (slot = SLOT_SITES; slot < nslots; slot++)
		if (GET(M->skew[slot].at) != 0)
			pn_buf_printf(b, "paynotify_clock_skew_seconds{provider=\"%s\",site=\"%s\"} "
				      "%lld\n", M->provider, slot_label(slot),
				      (long long)GET(M->skew[slot].last));
	pn_buf_printf(b, "# HELP paynotify_clock_skew_abs_max_seconds Largest |clock skew| of a "
		      "verified notification since the receiver started.\n"
		      "# TYPE paynotify_clock_skew_abs_max_seconds gauge\n");
	for (slot = SLOT_SITES; slot < nslots; slot++)
		if (GET(M->skew[slot].at) != 0)
			pn_buf_printf(b, "paynotify_clock_skew_abs_max_seconds{provider=\"%s\","
				      "site=\"%s\"} %lld\n", M->provider, slot_label(slot),
				      (long long)GET(M->skew[slot].abs_max));
	pn_buf_printf(b, "# HELP paynotify_clock_skew_sample_timestamp_seconds When the last "
		      "clock-skew sample was taken (Unix time).\n"
		      "# TYPE paynotify_clock_skew_sample_timestamp_seconds gauge\n");
	for (slot = SLOT_SITES; slot < nslots; slot++)
		if (GET(M->skew[slot].at) != 0)
			pn_buf_printf(b, "paynotify_clock_skew_sample_timestamp_seconds{provider="
				      "\"%s\",site=\"%s\"} %lld\n", M->provider, slot_label(slot),
				      (long long)GET(M->skew[slot].at));
}

void
pn_metrics_render(struct pn_buf *b, bool db_up)
{
	size_t	slot, o, s, nslots;

	if (M == NULL)
		return;
	one(b, "paynotify_up", "gauge", "The receiver answered this scrape.", 1);
	one(b, "paynotify_database_up", "gauge",
	    "The database answered a ping during this scrape (1) or not (0).", db_up ? 1 : 0);
	one(b, "paynotify_start_time_seconds", "gauge", "When the receiver started (Unix time).",
	    (long long)M->start_time);
	one(b, "paynotify_last_ingest_timestamp_seconds", "gauge",
	    "When a notification was last stored (Unix time; 0: not since start).",
	    (long long)GET(M->last_ingest));
	one(b, "paynotify_workers", "gauge", "Workers configured (--workers).",
	    (long long)GET(M->workers));
	one(b, "paynotify_workers_alive", "gauge", "Workers running now.",
	    (long long)GET(M->workers_alive));
	one(b, "paynotify_worker_restarts_total", "counter",
	    "Workers that exited unexpectedly and were restarted.",
	    (long long)GET(M->worker_restarts));
	pn_buf_printf(b, "# HELP paynotify_connections_dropped_total Connections closed before "
		      "a request's parameters arrived ([limits] read_timeout_ms).\n"
		      "# TYPE paynotify_connections_dropped_total counter\n"
		      "paynotify_connections_dropped_total{provider=\"%s\",reason=\"read_timeout\"} "
		      "%llu\n", M->provider, (unsigned long long)GET(M->dropped_read_timeout));
	one(b, "paynotify_config_generation", "gauge",
	    "Configuration in use: 1 at start, +1 per successful reload.",
	    (long long)GET(M->generation));
	pn_buf_printf(b, "# HELP paynotify_config_reloads_total SIGHUP reloads, done or refused "
		      "(the old configuration keeps serving).\n"
		      "# TYPE paynotify_config_reloads_total counter\n"
		      "paynotify_config_reloads_total{provider=\"%s\",result=\"ok\"} %llu\n"
		      "paynotify_config_reloads_total{provider=\"%s\",result=\"refused\"} %llu\n",
		      M->provider, (unsigned long long)GET(M->reloads_ok), M->provider,
		      (unsigned long long)GET(M->reloads_refused));
	one(b, "paynotify_config_last_refused_reload_timestamp_seconds", "gauge",
	    "When a reload was last refused (Unix time; 0: never).",
	    (long long)GET(M->last_reload_refused));
	render_types(b);
	pn_buf_printf(b, "# HELP paynotify_requests_total Requests answered, by site, outcome and "
		      "HTTP status.\n# TYPE paynotify_requests_total counter\n");
	nslots = SLOT_SITES + __atomic_load_n(&M->nsites, __ATOMIC_ACQUIRE);
	for (slot = 0; slot < nslots; slot++)
		for (o = 0; o < NOUTCOMES; o++)
			for (s = 0; s < NSTATUSES; s++) {
				uint64_t v = GET(M->requests[slot][o][s]);
				char	st[8];

				if (v == 0)
					continue;
				if (statuses[s])
					snprintf(st, sizeof(st), "%d", statuses[s]);
				else
					snprintf(st, sizeof(st), "other");
				pn_buf_printf(b, "paynotify_requests_total{provider=\"%s\",site=\"%s\","
					      "outcome=\"%s\",status=\"%s\"} %llu\n", M->provider,
					      slot_label(slot), outcomes[o], st, (unsigned long long)v);
			}
	render_rejections_skew(b, nslots);
}

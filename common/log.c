/*
 * log.c: logfmt lines on stderr.
 *
 * Two forms (log.h): the ordinary "TIME program[pid]: level: message", and,
 * when stderr is the journal, "<N>[pid] level: message" with the syslog
 * priority N that journald's stream protocol takes off the line (systemd.exec(5)
 * SyslogLevelPrefix=, default yes) and no timestamp or program (journald
 * adds both: SYSLOG_IDENTIFIER and its own time).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

static const char *log_program = "paynotify";
static int log_level = PN_LOG_INFO;
static bool log_journal = false;

/*
 * systemd.exec(5) "JOURNAL_STREAM": "<device>:<inode>" (decimal) of the
 * stream it connected to stdout/stderr.  stderr is the journal only if fd 2
 * is still that file: the variable is inherited by children whose stderr a
 * shell or a test redirected (sd_journal_stream_fd(3), and systemd's own
 * advice: compare with fstat(2) of the descriptor).
 */
bool
pn_log_stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char   *end;

	if (v == NULL || *v < '0' || *v > '9')
		return false;
	dev = strtoull(v, &end, 10);
	if (*end != ':' || end[1] < '0' || end[1] > '9')
		return false;
	ino = strtoull(end + 1, &end, 10);
	if (*end != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void
pn_log_init(const char *program, int level)
{
	log_program = program;
	log_level = level;
	log_journal = pn_log_stderr_is_journal();
}

void
pn_log_set_level(int level)
{
	log_level = level;
}

/* syslog(3) priorities, as journald reads them off "<N>". */
static int
priority(enum pn_log_level level)
{
	switch (level) {
	case PN_LOG_ERROR:
		return 3;	/* LOG_ERR */
	case PN_LOG_WARNING:
		return 4;	/* LOG_WARNING */
	case PN_LOG_INFO:
		return 6;	/* LOG_INFO */
	case PN_LOG_DEBUG:
		break;
	}
	return 7;		/* LOG_DEBUG */
}

/* The [log] level (0..2) from which a line of this priority is written. */
static int
min_level(enum pn_log_level level)
{
	switch (level) {
	case PN_LOG_ERROR:
	case PN_LOG_WARNING:
		return 0;
	case PN_LOG_INFO:
		return 1;
	case PN_LOG_DEBUG:
		break;
	}
	return 2;
}

/* The line's start: a priority for the journal, else a timestamp and program. */
static void
put_prefix(struct pn_buf *b, enum pn_log_level level)
{
	struct timespec ts;
	struct tm tm;
	char	tbuf[40];

	if (log_journal) {
		pn_buf_printf(b, "<%d>[%ld] ", priority(level), (long)getpid());
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	pn_buf_printf(b, "%s.%03ldZ %s[%ld]: ", tbuf, ts.tv_nsec / 1000000, log_program,
		      (long)getpid());
}

static void
emit(struct pn_buf *b)
{
	pn_buf_putc(b, '\n');
	/* One write(2) per line keeps lines whole when workers share stderr. */
	if (write(STDERR_FILENO, b->data, b->len) < 0) {
		/* nowhere left to report it */
	}
}

void
pn_log(enum pn_log_level level, const char *fmt, ...)
{
	static const char *names[] = {"error", "info", "debug", "warning"};
	struct pn_buf b = PN_BUF_INIT;
	char	msg[2048];
	va_list	ap;

	if (min_level(level) > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	put_prefix(&b, level);
	pn_buf_printf(&b, "%s: %s", names[level], msg);
	emit(&b);
	pn_buf_free(&b);
}

/* key=value, quoting values that need it; control bytes are escaped. */
static void
put_kv(struct pn_buf *b, const char *key, const char *value)
{
	const char *p;
	bool	quote = false;

	if (value == NULL)
		return;
	if (*value == '\0')
		quote = true;
	for (p = value; *p; p++)
		if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20 || *p == 0x7f
		    || *p == '\\')
			quote = true;	/* control bytes and DEL only the quoted form escapes */
	if (strlen(value) > 512)
		quote = true;	/* the loop below cuts it */
	pn_buf_printf(b, " %s=", key);
	if (!quote) {
		pn_buf_puts(b, value);
		return;
	}
	pn_buf_putc(b, '"');
	for (p = value; *p && p - value < 512; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '"' || c == '\\')
			pn_buf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			pn_buf_printf(b, "\\x%02x", c);
		else
			pn_buf_putc(b, (char)c);
	}
	pn_buf_putc(b, '"');
}

/*
 * A request line's priority, from its status: an answer the provider takes
 * as delivered (2xx) is info; a refused request (4xx: bad signature, stale
 * timestamp, unknown site, too large, too slow; the provider may retry,
 * nothing was stored as handled) is a warning, since one is an attack, a
 * scanner or a key or clock that drifted; an answer that asks for a retry
 * because this side failed (503 database down or a disabled site, 500) is
 * an error: nothing is accepted until it is fixed.
 */
enum pn_log_level
pn_log_request_level(int status)
{
	if (status >= 500)
		return PN_LOG_ERROR;
	if (status >= 400)
		return PN_LOG_WARNING;
	return PN_LOG_INFO;
}

void
pn_log_request(const struct pn_reqlog *rl)
{
	struct pn_buf b = PN_BUF_INIT;
	char	num[32];

	enum pn_log_level level = pn_log_request_level(rl->status);

	if (min_level(level) > log_level)
		return;
	put_prefix(&b, level);
	pn_buf_puts(&b, "request");
	put_kv(&b, "site", rl->site ? rl->site : "-");
	put_kv(&b, "provider", rl->provider);
	put_kv(&b, "client", rl->client ? rl->client : "-");
	put_kv(&b, "forwarded_for", rl->forwarded);
	put_kv(&b, "dedup_key", rl->dedup_key);
	put_kv(&b, "order", rl->order_id);
	put_kv(&b, "outcome", rl->outcome);
	put_kv(&b, "key", rl->key_id);
	if (rl->notification_id > 0) {
		snprintf(num, sizeof(num), "%lld", (long long)rl->notification_id);
		put_kv(&b, "id", num);
	}
	snprintf(num, sizeof(num), "%d", rl->status);
	put_kv(&b, "status", num);
	snprintf(num, sizeof(num), "%lld", (long long)rl->micros);
	put_kv(&b, "us", num);
	put_kv(&b, "reason", rl->reason);
	emit(&b);
	pn_buf_free(&b);
}

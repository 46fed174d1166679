/*
 * log.c: logfmt lines on stderr.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

static const char *log_program = "paynotify";
static int log_level = PN_LOG_INFO;

void
pn_log_init(const char *program, int level)
{
	log_program = program;
	log_level = level;
}

void
pn_log_set_level(int level)
{
	log_level = level;
}

static void
put_time(struct pn_buf *b)
{
	struct timespec ts;
	struct tm tm;
	char	tbuf[40];

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
	static const char *names[] = {"error", "info", "debug"};
	struct pn_buf b = PN_BUF_INIT;
	char	msg[2048];
	va_list	ap;

	if ((int)level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	put_time(&b);
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

void
pn_log_request(const struct pn_reqlog *rl)
{
	struct pn_buf b = PN_BUF_INIT;
	char	num[32];

	if (log_level < PN_LOG_INFO && rl->status < 400)
		return;
	put_time(&b);
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

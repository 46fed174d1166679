/*
 * unit.c: helpers shared by the unit-test suites (see unit.h).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "event.h"
#include "unit.h"
#include "util.h"

static char scratch_dir[4096], scratch_path[4200];

const char *
unit_scratch_file(const void *data, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	int	fd;

	if (scratch_dir[0] == '\0') {
		snprintf(scratch_dir, sizeof(scratch_dir), "%s/pn-unit-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		ck_assert_msg(mkdtemp(scratch_dir) != NULL, "mkdtemp %s", scratch_dir);
	}
	snprintf(scratch_path, sizeof(scratch_path), "%s/file", scratch_dir);
	fd = open(scratch_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "cannot create %s", scratch_path);
	ck_assert(write(fd, data, len) == (ssize_t)len);
	close(fd);
	return scratch_path;
}

void
unit_scratch_done(void)
{
	if (scratch_dir[0] == '\0')
		return;
	unlink(scratch_path);
	rmdir(scratch_dir);
	scratch_dir[0] = '\0';
}

static int saved_stderr = -1;
static FILE *captured;

void
unit_stderr_begin(void)
{
	ck_assert(saved_stderr < 0);
	fflush(stderr);
	captured = tmpfile();
	ck_assert(captured != NULL);
	saved_stderr = dup(STDERR_FILENO);
	ck_assert(saved_stderr >= 0);
	ck_assert(dup2(fileno(captured), STDERR_FILENO) == STDERR_FILENO);
}

char *
unit_stderr_end(void)
{
	long	n;
	char   *out;

	ck_assert(saved_stderr >= 0);
	fflush(stderr);
	ck_assert(dup2(saved_stderr, STDERR_FILENO) == STDERR_FILENO);
	close(saved_stderr);
	saved_stderr = -1;
	n = lseek(fileno(captured), 0, SEEK_END);
	ck_assert(n >= 0);
	out = pn_xmalloc((size_t)n + 1);
	ck_assert(pread(fileno(captured), out, (size_t)n, 0) == n);
	out[n] = '\0';
	fclose(captured);
	captured = NULL;
	return out;
}

static const char *
or_null(const char *s)
{
	return s ? s : "(null)";
}

void
unit_same_identity(const char *what, const struct pn_event *x, const struct pn_event *y)
{
	ck_assert_msg(strcmp(or_null(x->dedup_key), or_null(y->dedup_key)) == 0,
		      "%s: dedup key %s != %s", what, or_null(x->dedup_key), or_null(y->dedup_key));
	ck_assert_msg(x->kind == y->kind, "%s: kind %s != %s", what, pn_kind_name(x->kind),
		      pn_kind_name(y->kind));
	ck_assert_msg(strcmp(or_null(x->event_type), or_null(y->event_type)) == 0,
		      "%s: event type %s != %s", what, or_null(x->event_type),
		      or_null(y->event_type));
	ck_assert_msg(strcmp(or_null(x->order_id), or_null(y->order_id)) == 0,
		      "%s: order %s != %s", what, or_null(x->order_id), or_null(y->order_id));
	ck_assert_msg(strcmp(or_null(x->psp_txn_id), or_null(y->psp_txn_id)) == 0,
		      "%s: transaction %s != %s", what, or_null(x->psp_txn_id),
		      or_null(y->psp_txn_id));
	ck_assert_msg(strcmp(or_null(x->currency), or_null(y->currency)) == 0,
		      "%s: currency %s != %s", what, or_null(x->currency), or_null(y->currency));
	ck_assert_msg(x->amount_minor == y->amount_minor, "%s: amount %lld != %lld", what,
		      (long long)x->amount_minor, (long long)y->amount_minor);
	ck_assert_msg(x->refund_minor == y->refund_minor, "%s: refund %lld != %lld", what,
		      (long long)x->refund_minor, (long long)y->refund_minor);
	ck_assert_msg(x->refund_cumulative == y->refund_cumulative,
		      "%s: refund_cumulative %d != %d", what, x->refund_cumulative,
		      y->refund_cumulative);
}

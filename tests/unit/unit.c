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

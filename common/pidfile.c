/*
 * pidfile.c: write, check and remove --pidfile.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pidfile.h"

/* The pid in path, or 0 when there is no file or no pid in it. */
static pid_t
read_pid(const char *path)
{
	char	buf[32];
	ssize_t	n;
	long	pid;
	char   *end;
	int	fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	errno = 0;
	pid = strtol(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\n' && *end != '\0') || pid <= 0
	    || pid > INT_MAX)
		return 0;
	return (pid_t)pid;
}

/* Does pid run program?  Unknown (no /proc) counts as yes. */
static bool
runs_program(pid_t pid, const char *program)
{
	char	path[64], buf[4096];
	ssize_t	n;
	int	fd;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return true;
	buf[n] = '\0';		/* argv[0], or our process title */
	return strstr(buf, program) != NULL;
}

bool
pn_pidfile_check(const char *path, const char *program, struct pn_err *err)
{
	pid_t	pid = read_pid(path);

	if (pid == 0 || pid == getpid())
		return true;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	if (!runs_program(pid, program))
		return true;
	pn_err_set(err, "pid file \"%s\" names process %ld, which is running: another %s is "
		   "already started with it; stop it first or choose another --pidfile",
		   path, (long)pid, program);
	return false;
}

bool
pn_pidfile_write(const char *path, struct pn_err *err)
{
	char	tmp[PATH_MAX], line[32];
	int	fd, len;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
		pn_err_set(err, "pid file path \"%s\" is too long", path);
		return false;
	}
	len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		pn_err_set(err, "could not create pid file \"%s\": %s", tmp, strerror(errno));
		return false;
	}
	if (write(fd, line, (size_t)len) != len || fsync(fd) != 0) {
		pn_err_set(err, "could not write pid file \"%s\": %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return false;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		pn_err_set(err, "could not rename \"%s\" to \"%s\": %s", tmp, path, strerror(errno));
		unlink(tmp);
		return false;
	}
	return true;
}

void
pn_pidfile_remove(const char *path)
{
	if (path != NULL && read_pid(path) == getpid())
		unlink(path);
}

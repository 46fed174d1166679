/*
 * replay.c: run a fuzz target over files without libFuzzer.
 *
 *   replay_<target> FILE|DIR...
 *
 * Calls LLVMFuzzerTestOneInput() once per file (every regular file of a
 * directory, in name order), as libFuzzer does when given files.  Built
 * with any C compiler, so CI replays the corpora under ASan+UBSan with gcc
 * too.  A crash or sanitizer report ends the process like it would end
 * libFuzzer; a file that cannot be read is an error (exit status 2).
 */
#include "config.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool
run_file(const char *path)
{
	char   *data = NULL;
	size_t	len = 0;
	struct pn_err err;

	if (!pn_read_file(path, 16 * 1024 * 1024, &data, &len, &err)) {
		fprintf(stderr, "replay: %s\n", err.msg);
		return false;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	/* Exactly len bytes, so that ASan sees a read past the input. */
	{
		uint8_t *copy = pn_xmalloc(len ? len : 1);

		memcpy(copy, data, len);
		free(data);
		LLVMFuzzerTestOneInput(copy, len);
		free(copy);
	}
	return true;
}

static bool
run_dir(const char *dir)
{
	DIR    *d = opendir(dir);
	struct dirent *de;
	char  **names = NULL;
	size_t	n = 0, i;
	bool	ok = true;

	if (d == NULL) {
		fprintf(stderr, "replay: could not open directory \"%s\"\n", dir);
		return false;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		names = pn_xrealloc(names, (n + 1) * sizeof(*names));
		names[n++] = pn_xasprintf("%s/%s", dir, de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		struct stat st;

		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
			ok &= run_file(names[i]);
		free(names[i]);
	}
	free(names);
	return ok;
}

int
main(int argc, char **argv)
{
	bool	ok = true;
	int	i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: could not stat \"%s\"\n", argv[i]);
			ok = false;
		} else if (S_ISDIR(st.st_mode))
			ok &= run_dir(argv[i]);
		else
			ok &= run_file(argv[i]);
	}
	return ok ? 0 : 2;
}

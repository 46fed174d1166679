/*
 * fuzz_cfg.c: the configuration loader, pn_cfg_load(), on a temporary file.
 *
 * Input: the whole configuration text.  It is written to a file in a
 * private temporary directory holding "keys" (a link to tests/fixtures/
 * unit/keys) and "secrets" (copies of the secret files of tests/fixtures/
 * unit/secrets and of keys/test-a.key.pem, mode 0600), so that relative
 * key and secret paths load real files.  Inputs naming /dev, /proc or /sys are skipped: a path like /dev/stdin would
 * block the fuzzer, which is the harness's problem, not the loader's.
 * Invariants: a loaded configuration has sites and each has a provider;
 * a failure names the file; pn_cfg_free() releases everything (LeakSanitizer
 * checks that on every error path too).
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static char dir[256];
static char conf[300];

/* Files copied into <dir>/secrets with mode 0600. */
static const char *const private_files[] = {
	"unit/secrets/stripe-old", "unit/secrets/stripe-new", "unit/secrets/stripe-both",
	"unit/secrets/stripe-dotnet", "unit/secrets/2c2p-sandbox", "unit/secrets/2c2p-guide",
	"unit/secrets/2c2p-rotated", "unit/secrets/2c2p-legacy", "unit/keys/test-a.key.pem",
	NULL};

static void
cleanup(void)
{
	char	path[512];
	size_t	i;

	unlink(conf);
	for (i = 0; private_files[i]; i++) {
		snprintf(path, sizeof(path), "%s/secrets/%s", dir, strrchr(private_files[i], '/') + 1);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/secrets", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/keys", dir);
	unlink(path);
	rmdir(dir);
}

static void
setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char	path[512], keys[4096];
	size_t	i;

	snprintf(dir, sizeof(dir), "%s/pn-fuzz-cfg.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL) {
		perror("fuzz: mkdtemp");
		abort();
	}
	snprintf(conf, sizeof(conf), "%s/fuzz.conf", dir);
	snprintf(keys, sizeof(keys), "%s", fuzz_fixture("unit/keys"));
	snprintf(path, sizeof(path), "%s/keys", dir);
	if (symlink(keys, path) != 0) {
		perror("fuzz: symlink");
		abort();
	}
	snprintf(path, sizeof(path), "%s/secrets", dir);
	if (mkdir(path, 0700) != 0) {
		perror("fuzz: mkdir");
		abort();
	}
	for (i = 0; private_files[i]; i++) {
		char   *text = NULL;
		size_t	len = 0;
		struct pn_err err;
		FILE   *f;

		if (!pn_read_file(fuzz_fixture(private_files[i]), 65536, &text, &len, &err)) {
			fprintf(stderr, "fuzz: %s\n", err.msg);
			abort();
		}
		snprintf(path, sizeof(path), "%s/secrets/%s", dir, strrchr(private_files[i], '/') + 1);
		if ((f = fopen(path, "w")) == NULL || fwrite(text, 1, len, f) != len
		    || fclose(f) != 0 || chmod(path, 0600) != 0) {
			perror("fuzz: writing a secret file");
			abort();
		}
		free(text);
	}
	atexit(cleanup);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pn_config *cfg;
	struct pn_err err;
	FILE   *f;
	size_t	i;

	if (dir[0] == '\0')
		setup();
	if (memmem(data, size, "/dev", 4) || memmem(data, size, "/proc", 5)
	    || memmem(data, size, "/sys", 4))
		return 0;
	if ((f = fopen(conf, "w")) == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
		perror("fuzz: writing the configuration");
		abort();
	}
	cfg = pn_cfg_load(conf, &err);
	if (cfg != NULL) {
		fuzz_check(cfg->nsites > 0);
		for (i = 0; i < cfg->nsites; i++) {
			const struct pn_site *s = &cfg->sites[i];

			fuzz_check(s->alipay.configured || s->stripe.configured
				   || s->wechatpay.configured || s->twoc2p.configured);
			fuzz_check(pn_cfg_site(cfg, s->name) == s);
		}
		pn_cfg_free(cfg);
	} else
		fuzz_check(strncmp(err.msg, conf, strlen(conf)) == 0
			   || strstr(err.msg, conf) != NULL);
	return 0;
}

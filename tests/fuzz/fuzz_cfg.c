/*
 * fuzz_cfg.c: the configuration loader, pn_cfg_load(), on a temporary file.
 *
 * Input: the whole configuration text.  It is written to a file in a
 * private temporary directory holding "keys" (a link to tests/fixtures/
 * unit/keys) and "secrets" (copies of the secret files of tests/fixtures/
 * unit/secrets and of keys/test-a.key.pem, mode 0600), so that relative
 * key and secret paths load real files (fuzz_tmpdir()).  Inputs naming /dev,
 * /proc or /sys are skipped: a path like /dev/stdin would block the fuzzer, which is the harness's problem, not the loader's.
 * Invariants: a loaded configuration has sites and each has a provider;
 * a failure names the file; pn_cfg_free() releases everything (LeakSanitizer
 * checks that on every error path too).
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static char conf[300];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pn_config *cfg;
	struct pn_err err;
	FILE   *f;
	size_t	i;

	if (conf[0] == '\0')
		snprintf(conf, sizeof(conf), "%s/fuzz.conf", fuzz_tmpdir());
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

/*
 * cfg_findings.h: what loading the configuration found (HACKING.md
 * "Errors"): every problem collected, none stopping the load, then printed
 * by check-config or logged by the receivers (pn_cfg_findings_report()).
 */
#ifndef PN_CFG_FINDINGS_H
#define PN_CFG_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * Severity:
 *   PN_CFG_ERROR       the configuration cannot be loaded (syntax, a file that
 *                      cannot be read, a key missing): receivers refuse it
 *                      (start-up exits 78, a reload keeps the old one)
 *   PN_CFG_SITE_ERROR  it loads, but one site can never verify anything (a
 *                      Stripe API key where the webhook signing secret
 *                      belongs): check-config fails; receivers log it at error
 *                      level and serve the other sites (refusing the whole
 *                      file would turn away every site's notifications)
 *   PN_CFG_WARNING     worth a look, works (an unusual key form)
 */
enum pn_cfg_severity { PN_CFG_ERROR, PN_CFG_SITE_ERROR, PN_CFG_WARNING };

struct pn_cfg_finding {
	enum pn_cfg_severity severity;
	char   *file;		/* NULL when not about a place in the file */
	int	line;
	char   *msg;		/* lower case, names the site and key, says the fix */
};

struct pn_cfg_findings {
	struct pn_cfg_finding *v;
	size_t	n;
};

void pn_cfg_finding_add(struct pn_cfg_findings *f, enum pn_cfg_severity severity,
			const char *file, int line, const char *fmt, ...) PN_PRINTF(5, 6);
size_t pn_cfg_findings_count(const struct pn_cfg_findings *f, enum pn_cfg_severity severity);
/* "file:line: msg" (or msg) into a malloc'd string. */
char *pn_cfg_finding_text(const struct pn_cfg_finding *fi);
void pn_cfg_findings_free(struct pn_cfg_findings *f);	/* the entries; f itself is the caller's */

/*
 * What a receiver says about the findings of one load: when nothing loaded
 * (loaded false), the first error into err ("file:line: ...", and how many
 * more); when it loaded, each site error logged at error level and each
 * warning at warning level ("configuration warning: ..."), in order.
 */
void pn_cfg_findings_report(const struct pn_cfg_findings *f, bool loaded, struct pn_err *err);

#endif

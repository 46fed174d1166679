/*
 * cfg_findings.c: the configuration's findings, collected and said
 * (cfg_findings.h).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfg_findings.h"
#include "log.h"

void
pn_cfg_finding_add(struct pn_cfg_findings *f, enum pn_cfg_severity severity, const char *file,
		   int line, const char *fmt, ...)
{
	struct pn_cfg_finding *fi;
	va_list ap;
	char	buf[1024];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	f->v = pn_xrealloc(f->v, (f->n + 1) * sizeof(*f->v));
	fi = &f->v[f->n++];
	fi->severity = severity;
	fi->file = file ? pn_xstrdup(file) : NULL;
	fi->line = line;
	fi->msg = pn_xstrdup(buf);
}

size_t
pn_cfg_findings_count(const struct pn_cfg_findings *f, enum pn_cfg_severity severity)
{
	size_t	i, n = 0;

	for (i = 0; i < f->n; i++)
		if (f->v[i].severity == severity)
			n++;
	return n;
}

char *
pn_cfg_finding_text(const struct pn_cfg_finding *fi)
{
	if (fi->file && fi->line > 0)
		return pn_xasprintf("%s:%d: %s", fi->file, fi->line, fi->msg);
	if (fi->file)
		return pn_xasprintf("%s: %s", fi->file, fi->msg);
	return pn_xstrdup(fi->msg);
}

void
pn_cfg_findings_free(struct pn_cfg_findings *f)
{
	size_t i;

	if (f == NULL)
		return;
	for (i = 0; i < f->n; i++) {
		free(f->v[i].file);
		free(f->v[i].msg);
	}
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

void
pn_cfg_findings_report(const struct pn_cfg_findings *f, bool loaded, struct pn_err *err)
{
	size_t	i, nerr = pn_cfg_findings_count(f, PN_CFG_ERROR);

	for (i = 0; i < f->n; i++) {
		char   *t = pn_cfg_finding_text(&f->v[i]);

		if (!loaded && f->v[i].severity == PN_CFG_ERROR) {
			if (nerr > 1)
				pn_err_set(err, "%s (and %zu more error%s: `paynotify check-config` "
					   "lists them all)", t, nerr - 1, nerr == 2 ? "" : "s");
			else
				pn_err_set(err, "%s", t);
			free(t);
			break;
		}
		if (loaded && f->v[i].severity == PN_CFG_SITE_ERROR)
			pn_log(PN_LOG_ERROR, "%s", t);
		else if (loaded && f->v[i].severity == PN_CFG_WARNING)
			pn_log(PN_LOG_WARNING, "configuration warning: %s", t);
		free(t);
	}
}

/*
 * fixture.h: data-driven provider cases (tests/fixtures/PROVIDER/NAME.case).
 *
 * A case is a text file of "key = value" lines ('#' starts a comment):
 *
 *   site = NAME                 a [site] of tests/fixtures/unit/unit.conf
 *   body = FILE                 the raw body, relative to the case file
 *   now = UNIX                  the verifier's clock (default: 0 = freshness off)
 *   header NAME = VALUE         a request header (repeatable)
 *   expect = verified|malformed|unverified
 *   error = TEXT                why a malformed/unverified case is refused:
 *                               a substring of the verifier's error message
 *                               (repeatable: each must occur).  Required on
 *                               every refusing case, refused on a verified one.
 *   expect.FIELD = VALUE        kind, dedup_key, order_id, amount_minor,
 *                               currency, refund_minor, refund_cumulative,
 *                               psp_txn_id, psp_event_id, event_type,
 *                               key_id, flag ("" = must be absent)
 *
 * Adding a case needs no C: drop the files in the provider's directory.
 */
#ifndef PN_TEST_FIXTURE_H
#define PN_TEST_FIXTURE_H

#include <stddef.h>

#include "cfg.h"
#include "provider.h"

/* The unit-test configuration (loaded once, secret modes fixed first). */
const struct pn_config *fixture_config(void);
/* The configuration holding site name: unit.conf or unit/variants/<name>.conf. */
const struct pn_config *fixture_config_of(const char *name);
/* Path under tests/fixtures (static buffer). */
const char *fixture_path(const char *rel);
/* Sorted list of NAME.case files in tests/fixtures/<dir>; count returned. */
size_t fixture_cases(const char *dir, char ***names);
/*
 * The event of one case's request as the provider's receiver verifies it
 * (its expectations are not checked); *site the case's site.  Everything
 * lives in a.
 */
enum pn_verdict fixture_verify(const struct pn_provider *p, const char *dir, const char *name,
			       struct pn_arena *a, const struct pn_site **site,
			       struct pn_event *ev);
/* Run one case against a provider; calls ck_assert on every expectation. */
void fixture_run_case(const struct pn_provider *p, const char *dir, const char *name);

#endif

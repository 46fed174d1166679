/*
 * unit.h: small helpers shared by the unit-test suites.
 */
#ifndef PN_TEST_UNIT_H
#define PN_TEST_UNIT_H

#include <stddef.h>

/* A private scratch file holding data[0..len): its path, in a directory
 * made with mkdtemp(3) under $TMPDIR (static buffer).  unit_scratch_done()
 * removes both. */
const char *unit_scratch_file(const void *data, size_t len);
void unit_scratch_done(void);

/* Send stderr (file descriptor 2) to a temporary file until
 * unit_stderr_end(), which returns what was written (malloc'd, NUL
 * terminated) and restores stderr. */
void unit_stderr_begin(void);
char *unit_stderr_end(void);

/*
 * The same event identity (issue 27): dedup key, kind, event type, order,
 * PSP transaction, amounts and currency of x and y are equal (ck_assert;
 * what names the two arrivals apart, source, key_id, psp_event_id and
 * times, is not compared).  what names the pair in a failure.
 */
struct pn_event;
void unit_same_identity(const char *what, const struct pn_event *x, const struct pn_event *y);

#endif

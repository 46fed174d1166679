/*
 * money.h: exact amounts.  Every amount is an integer number of minor
 * units with the currency's ISO 4217 exponent (JPY 0, CNY 2, KWD 3).
 * Decimal strings are converted exactly; floating point is never used.
 */
#ifndef PN_MONEY_H
#define PN_MONEY_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* ISO 4217 exponent of an alpha-3 code (any case), or -1 if unknown. */
int pn_money_exponent(const char *alpha3);
/* Alpha-3 code (upper case, static) of a numeric ISO 4217 code ("702"), or NULL. */
const char *pn_money_alpha_from_numeric(const char *numeric);
/* Numeric ISO 4217 code (static) of an alpha-3 code, or NULL. */
const char *pn_money_numeric(const char *alpha3);
/* Canonical upper-case alpha-3 into out[4]; false when not a known code. */
bool pn_money_currency(const char *in, char out[4]) PN_WUR;

/*
 * "88.88" with exponent 2 -> 8888.  Accepts digits with at most one '.',
 * leading zeros, and trailing zeros past the exponent ("19.990" -> 1999).
 * Rejects signs, exponents, blanks, empty parts, non-zero digits past the
 * exponent and values above 10^15 minor units.
 */
bool pn_money_parse(const char *s, int exponent, int64_t *minor, struct pn_err *err) PN_WUR;
/* Convert between exponents exactly (false if not exact or out of range). */
bool pn_money_rescale(int64_t v, int from_exp, int to_exp, int64_t *out) PN_WUR;
/* Format minor units as a decimal string ("88.88") into buf. */
void pn_money_format(int64_t minor, int exponent, char *buf, size_t bufsz);

#endif

/*
 * fuzz_money.c: exact amounts, pn_money_parse() and friends.
 *
 * Input: one byte choosing the exponent (-1 .. 6, so that invalid
 * exponents are tried too), then the amount text.  Invariants: a parsed
 * amount is within 0 .. 10^15 minor units, pn_money_format() writes it back
 * as text that parses to the same value, and rescaling up and back down is
 * exact.  The text is also tried as a currency code (alpha and numeric).
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "money.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pn_err err;
	int64_t	minor, again, up, down;
	int	exponent;
	char   *s, buf[64], cur[4];

	if (size < 1)
		return 0;
	exponent = (int)(data[0] % 8) - 1;
	s = fuzz_strndup(data + 1, size - 1);
	if (pn_money_parse(s, exponent, &minor, &err)) {
		fuzz_check(exponent >= 0 && exponent <= 4);
		fuzz_check(minor >= 0 && minor <= 1000000000000000LL);
		pn_money_format(minor, exponent, buf, sizeof(buf));
		fuzz_check(pn_money_parse(buf, exponent, &again, &err));
		fuzz_check(again == minor);
		if (pn_money_rescale(minor, exponent, exponent + 2, &up)) {
			fuzz_check(pn_money_rescale(up, exponent + 2, exponent, &down));
			fuzz_check(down == minor);
		}
	}
	if (pn_money_currency(s, cur)) {
		fuzz_check(strlen(cur) == 3);
		fuzz_check(pn_money_exponent(cur) >= 0);
	}
	(void)pn_money_alpha_from_numeric(s);
	free(s);
	return 0;
}

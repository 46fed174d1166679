/*
 * money.c: ISO 4217 exponents and exact decimal conversion.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "money.h"

#define PN_MONEY_MAX 1000000000000000LL	/* 10^15 minor units */

struct currency {
	char	alpha[4];
	char	numeric[4];
	int	exponent;
};

/* ISO 4217 (active codes, 2025).  Sorted by alpha code. */
static const struct currency currencies[] = {
	{"AED", "784", 2}, {"AFN", "971", 2}, {"ALL", "008", 2}, {"AMD", "051", 2},
	{"ANG", "532", 2}, {"AOA", "973", 2}, {"ARS", "032", 2}, {"AUD", "036", 2},
	{"AWG", "533", 2}, {"AZN", "944", 2}, {"BAM", "977", 2}, {"BBD", "052", 2},
	{"BDT", "050", 2}, {"BGN", "975", 2}, {"BHD", "048", 3}, {"BIF", "108", 0},
	{"BMD", "060", 2}, {"BND", "096", 2}, {"BOB", "068", 2}, {"BRL", "986", 2},
	{"BSD", "044", 2}, {"BTN", "064", 2}, {"BWP", "072", 2}, {"BYN", "933", 2},
	{"BZD", "084", 2}, {"CAD", "124", 2}, {"CDF", "976", 2}, {"CHF", "756", 2},
	{"CLF", "990", 4}, {"CLP", "152", 0}, {"CNY", "156", 2}, {"COP", "170", 2},
	{"CRC", "188", 2}, {"CUP", "192", 2}, {"CVE", "132", 2}, {"CZK", "203", 2},
	{"DJF", "262", 0}, {"DKK", "208", 2}, {"DOP", "214", 2}, {"DZD", "012", 2},
	{"EGP", "818", 2}, {"ERN", "232", 2}, {"ETB", "230", 2}, {"EUR", "978", 2},
	{"FJD", "242", 2}, {"FKP", "238", 2}, {"GBP", "826", 2}, {"GEL", "981", 2},
	{"GHS", "936", 2}, {"GIP", "292", 2}, {"GMD", "270", 2}, {"GNF", "324", 0},
	{"GTQ", "320", 2}, {"GYD", "328", 2}, {"HKD", "344", 2}, {"HNL", "340", 2},
	{"HTG", "332", 2}, {"HUF", "348", 2}, {"IDR", "360", 2}, {"ILS", "376", 2},
	{"INR", "356", 2}, {"IQD", "368", 3}, {"IRR", "364", 2}, {"ISK", "352", 0},
	{"JMD", "388", 2}, {"JOD", "400", 3}, {"JPY", "392", 0}, {"KES", "404", 2},
	{"KGS", "417", 2}, {"KHR", "116", 2}, {"KMF", "174", 0}, {"KPW", "408", 2},
	{"KRW", "410", 0}, {"KWD", "414", 3}, {"KYD", "136", 2}, {"KZT", "398", 2},
	{"LAK", "418", 2}, {"LBP", "422", 2}, {"LKR", "144", 2}, {"LRD", "430", 2},
	{"LSL", "426", 2}, {"LYD", "434", 3}, {"MAD", "504", 2}, {"MDL", "498", 2},
	{"MGA", "969", 2}, {"MKD", "807", 2}, {"MMK", "104", 2}, {"MNT", "496", 2},
	{"MOP", "446", 2}, {"MRU", "929", 2}, {"MUR", "480", 2}, {"MVR", "462", 2},
	{"MWK", "454", 2}, {"MXN", "484", 2}, {"MYR", "458", 2}, {"MZN", "943", 2},
	{"NAD", "516", 2}, {"NGN", "566", 2}, {"NIO", "558", 2}, {"NOK", "578", 2},
	{"NPR", "524", 2}, {"NZD", "554", 2}, {"OMR", "512", 3}, {"PAB", "590", 2},
	{"PEN", "604", 2}, {"PGK", "598", 2}, {"PHP", "608", 2}, {"PKR", "586", 2},
	{"PLN", "985", 2}, {"PYG", "600", 0}, {"QAR", "634", 2}, {"RON", "946", 2},
	{"RSD", "941", 2}, {"RUB", "643", 2}, {"RWF", "646", 0}, {"SAR", "682", 2},
	{"SBD", "090", 2}, {"SCR", "690", 2}, {"SDG", "938", 2}, {"SEK", "752", 2},
	{"SGD", "702", 2}, {"SHP", "654", 2}, {"SLE", "925", 2}, {"SOS", "706", 2},
	{"SRD", "968", 2}, {"SSP", "728", 2}, {"STN", "930", 2}, {"SVC", "222", 2},
	{"SYP", "760", 2}, {"SZL", "748", 2}, {"THB", "764", 2}, {"TJS", "972", 2},
	{"TMT", "934", 2}, {"TND", "788", 3}, {"TOP", "776", 2}, {"TRY", "949", 2},
	{"TTD", "780", 2}, {"TWD", "901", 2}, {"TZS", "834", 2}, {"UAH", "980", 2},
	{"UGX", "800", 0}, {"USD", "840", 2}, {"UYI", "940", 0}, {"UYU", "858", 2},
	{"UYW", "927", 4}, {"UZS", "860", 2}, {"VES", "928", 2}, {"VND", "704", 0},
	{"VUV", "548", 0}, {"WST", "882", 2}, {"XAF", "950", 0}, {"XCD", "951", 2},
	{"XCG", "532", 2}, {"XOF", "952", 0}, {"XPF", "953", 0}, {"YER", "886", 2},
	{"ZAR", "710", 2}, {"ZMW", "967", 2}, {"ZWG", "924", 2},
};

static const struct currency *
find_alpha(const char *alpha3)
{
	char	up[4];
	size_t	i;

	if (alpha3 == NULL || strlen(alpha3) != 3)
		return NULL;
	for (i = 0; i < 3; i++) {
		char c = alpha3[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (c < 'A' || c > 'Z')
			return NULL;
		up[i] = c;
	}
	up[3] = '\0';
	for (i = 0; i < PN_ARRAY_LEN(currencies); i++)
		if (memcmp(currencies[i].alpha, up, 4) == 0)
			return &currencies[i];
	return NULL;
}

int
pn_money_exponent(const char *alpha3)
{
	const struct currency *c = find_alpha(alpha3);

	return c ? c->exponent : -1;
}

const char *
pn_money_numeric(const char *alpha3)
{
	const struct currency *c = find_alpha(alpha3);

	return c ? c->numeric : NULL;
}

bool
pn_money_currency(const char *in, char out[4])
{
	const struct currency *c = find_alpha(in);

	if (c == NULL)
		return false;
	memcpy(out, c->alpha, 4);
	return true;
}

const char *
pn_money_alpha_from_numeric(const char *numeric)
{
	size_t i;

	if (numeric == NULL || strlen(numeric) != 3)
		return NULL;
	for (i = 0; i < PN_ARRAY_LEN(currencies); i++)
		if (memcmp(currencies[i].numeric, numeric, 4) == 0)
			return currencies[i].alpha;
	return NULL;
}

bool
pn_money_parse(const char *s, int exponent, int64_t *minor, struct pn_err *err)
{
	int64_t	v = 0;
	int	frac = 0;
	bool	seen_dot = false, int_digits = false, frac_digits = false;
	const char *p;

	if (s == NULL || *s == '\0') {
		pn_err_set(err, "empty amount");
		return false;
	}
	if (exponent < 0 || exponent > 4) {
		pn_err_set(err, "unsupported currency exponent %d", exponent);
		return false;
	}
	for (p = s; *p; p++) {
		if (*p == '.') {
			if (seen_dot) {
				pn_err_set(err, "amount \"%.40s\" has two decimal points", s);
				return false;
			}
			seen_dot = true;
			continue;
		}
		if (*p < '0' || *p > '9') {
			pn_err_set(err, "amount \"%.40s\" is not a plain decimal number", s);
			return false;
		}
		if (seen_dot) {
			frac_digits = true;
			if (frac >= exponent) {
				if (*p != '0') {
					pn_err_set(err, "amount \"%.40s\" has more than %d decimal places",
						   s, exponent);
					return false;
				}
				continue;
			}
			frac++;
		} else
			int_digits = true;
		v = v * 10 + (*p - '0');
		if (v > PN_MONEY_MAX) {
			pn_err_set(err, "amount \"%.40s\" is too large", s);
			return false;
		}
	}
	if (!int_digits || (seen_dot && !frac_digits)) {
		pn_err_set(err, "amount \"%.40s\" is not a plain decimal number", s);
		return false;
	}
	for (; frac < exponent; frac++) {
		v *= 10;
		if (v > PN_MONEY_MAX) {
			pn_err_set(err, "amount \"%.40s\" is too large", s);
			return false;
		}
	}
	*minor = v;
	return true;
}

bool
pn_money_rescale(int64_t v, int from_exp, int to_exp, int64_t *out)
{
	if (v < 0 || v > PN_MONEY_MAX)
		return false;
	while (from_exp < to_exp) {
		v *= 10;
		if (v > PN_MONEY_MAX)
			return false;
		from_exp++;
	}
	while (from_exp > to_exp) {
		if (v % 10 != 0)
			return false;
		v /= 10;
		from_exp--;
	}
	*out = v;
	return true;
}

void
pn_money_format(int64_t minor, int exponent, char *buf, size_t bufsz)
{
	int64_t	scale = 1;
	int	i;

	for (i = 0; i < exponent; i++)
		scale *= 10;
	if (exponent == 0) {
		snprintf(buf, bufsz, "%lld", (long long)minor);
		return;
	}
	/* the sign once, in front: -4 fen is "-0.04" (a refund total), not
	 * "0.-4"; magnitudes from the quotient and remainder, each of which
	 * fits for any int64_t (INT64_MIN included) */
	snprintf(buf, bufsz, "%s%lld.%0*lld", minor < 0 ? "-" : "",
		 (long long)(minor < 0 ? -(minor / scale) : minor / scale), exponent,
		 (long long)(minor < 0 ? -(minor % scale) : minor % scale));
}

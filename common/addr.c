/*
 * addr.c: address lists, parsed at load and matched per request (addr.h).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "addr.h"
#include "util.h"

bool
pn_addr_parse(const char *word, struct pn_addr *a)
{
	char	buf[INET6_ADDRSTRLEN + 8], *slash;
	int64_t	bits;
	unsigned max, i;

	if (strlen(word) >= sizeof(buf))
		return false;
	memset(a, 0, sizeof(*a));
	snprintf(buf, sizeof(buf), "%s", word);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, a->bytes) == 1)
		a->family = AF_INET, max = 32;
	else if (inet_pton(AF_INET6, buf, a->bytes) == 1)
		a->family = AF_INET6, max = 128;
	else
		return false;
	a->bits = max;
	if (slash) {
		if (!pn_parse_i64(slash, &bits) || bits < 0 || bits > max)
			return false;
		a->bits = (unsigned)bits;
	}
	for (i = a->bits; i < max; i++)
		if (a->bytes[i / 8] & (0x80 >> (i % 8)))
			return false;	/* 10.0.0.1/8: a typo for 10.0.0.0/8? */
	return true;
}

bool
pn_addr_match(const struct pn_addr *list, size_t n, const char *text)
{
	unsigned char b[16];
	int	family;
	size_t	i;

	if (text == NULL || strlen(text) > INET6_ADDRSTRLEN)
		return false;
	if (inet_pton(AF_INET, text, b) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, text, b) == 1) {
		static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		family = AF_INET6;
		if (memcmp(b, mapped, 12) == 0) {
			memmove(b, b + 12, 4);
			family = AF_INET;
		}
	} else
		return false;
	for (i = 0; i < n; i++) {
		const struct pn_addr *a = &list[i];
		unsigned full = a->bits / 8, rest = a->bits % 8;

		if (a->family != family || memcmp(a->bytes, b, full) != 0)
			continue;
		if (rest && ((a->bytes[full] ^ b[full]) & (0xff << (8 - rest)) & 0xff))
			continue;
		return true;
	}
	return false;
}

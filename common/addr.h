/*
 * addr.h: address lists ([log] trusted_proxies, [metrics] allow): one entry
 * parsed when the configuration is loaded, a client's REMOTE_ADDR matched on
 * the request path (pn_addr_match()).  No allocation, no file, no lookup.
 */
#ifndef PN_ADDR_H
#define PN_ADDR_H

#include <stdbool.h>
#include <stddef.h>

/* An address or network of an address list ([log] trusted_proxies, [metrics] allow). */
struct pn_addr {
	int	family;			/* AF_INET or AF_INET6 */
	unsigned char bytes[16];	/* network byte order; 4 used for AF_INET */
	unsigned bits;			/* prefix length: 32 / 128 for one address */
};

/* "ADDR" or "ADDR/BITS", IPv4 or IPv6, into *a; host bits beyond the prefix
 * must be 0 (10.0.0.1/8 is refused: a typo for 10.0.0.0/8?). */
bool pn_addr_parse(const char *word, struct pn_addr *a);

/* Is the textual address (REMOTE_ADDR) in the list?  IPv4-mapped IPv6
 * addresses (::ffff:a.b.c.d) match IPv4 entries.  NULL or unparsable: no. */
bool pn_addr_match(const struct pn_addr *list, size_t n, const char *text);

#endif

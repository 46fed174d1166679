/*
 * 2c2p.h: the parts of the 2C2P adapter that tests and the admin command
 * use directly.
 */
#ifndef PN_2C2P_H
#define PN_2C2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "form.h"
#include "provider.h"
#include "util.h"
#include "2c2p/identity.h"

#define PN_2C2P_MAX_JWT (256 * 1024)	/* whole compact JWT, characters */
#define PN_2C2P_MAX_JWT_HEADER 1024	/* header segment, characters */

/*
 * Verify a compact JWS as 2C2P PGW v4 signs it: exactly three non-empty
 * base64url segments without padding, header alg "HS256" and nothing else,
 * HMAC-SHA256 keyed with a configured secret's ASCII bytes over the first
 * two segments as received, compared in constant time with the 32-byte
 * signature.  Every secret is tried (rotation); *key_id names the first
 * that matched.  On success *payload (arena, NUL-terminated) holds the
 * decoded payload segment.
 */
bool pn_2c2p_verify_jwt(struct pn_arena *a, const char *jwt, size_t len,
			const struct pn_secret *secrets, size_t nsecrets,
			unsigned char **payload, size_t *payload_len, const char **key_id,
			struct pn_err *err) PN_WUR;

/*
 * The raw text of member name of the top-level object of json (which
 * jansson has already accepted): a number literal exactly as sent, or a
 * string with its quotes.  Keys are compared as raw bytes, so an escaped
 * key ("\u0061mount") is not found: the caller then refuses to guess.
 */
bool pn_2c2p_raw_member(const char *json, size_t len, const char *name, const char **val,
			size_t *vlen);

/*
 * Normalise a verified v4 payload.  now > 0 enforces exp/nbf when present;
 * unkeyed is the dedup key for a payload without invoiceNo or respCode.
 * cfg (or NULL) tells a sibling site's 2c2p.site_marker from a stranger's.
 */
enum pn_verdict pn_2c2p_normalise(struct pn_arena *a, const struct pn_config *cfg,
				  const struct pn_site *site,
				  const unsigned char *payload, size_t len, int64_t now,
				  const char *unkeyed, struct pn_event *ev,
				  struct pn_err *err) PN_WUR;

/* The respCode mapping, pn_2c2p_kind(), and the rest of a result's identity:
 * 2c2p/identity.h. */

/*
 * The legacy Redirect API signed content: the values of the response
 * fields in 2C2P's fixed order, concatenated without separators; a field
 * that is absent contributes nothing.
 */
char *pn_2c2p_redirect_content(struct pn_arena *a, const struct pn_form *f, size_t *len);
/* transaction_ref + approval_code + eci of a legacy form, concatenated as
 * the MAC covers them, and the number of ways that text can be split into
 * fields of their formats (1: the posted split is the only one). */
char *pn_2c2p_redirect_segment(struct pn_arena *a, const struct pn_form *f);
unsigned pn_2c2p_redirect_splits(const char *segment);

/*
 * Check every legacy Redirect API field against its documented format
 * (docs/2C2P.md "Field formats"), before the hash is computed, so that the
 * separator-less signed content has one split only.  invoice_is_order:
 * invoice_no must be order_id itself (2c2p.redirect_invoice_no =
 * order_id); otherwise it must be empty.  false with the reason in err.
 */
bool pn_2c2p_redirect_check(struct pn_arena *a, const struct pn_form *f, bool invoice_is_order,
			    struct pn_err *err) PN_WUR;

#endif

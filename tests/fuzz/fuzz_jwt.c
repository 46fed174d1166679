/*
 * fuzz_jwt.c: the 2C2P JWT parser, pn_2c2p_verify_jwt(), and the raw JSON
 * member scanner, pn_2c2p_raw_member(), that reads the signed amount
 * literal.
 *
 * Input: a compact JWT.  When it starts with '@' the harness treats the
 * rest as "header.payload" and appends the valid HS256 signature (test
 * secret), so that mutated headers and payloads get past the MAC.  The
 * decoded payload (or, for any input, the input itself) is then scanned
 * for "amount" and checked against jansson: a literal found must lie
 * inside the text and parse to the very value jansson holds for the
 * member.
 */
#include "config.h"

#include <string.h>

#include "2c2p.h"
#include "crypto.h"
#include "fuzz.h"
#include "json.h"

static void
check_raw_member(const char *text, size_t len)
{
	const char *val = NULL;
	size_t	vlen = 0;
	json_t *root, *lit;
	struct pn_err err;

	if (!pn_2c2p_raw_member(text, len, "amount", &val, &vlen))
		return;
	fuzz_check(val >= text && vlen > 0 && val + vlen <= text + len);
	root = pn_json_parse(text, len, &err);
	if (root == NULL)
		return;		/* the scanner only runs on JSON jansson accepted */
	if (json_is_object(root) && json_object_get(root, "amount") != NULL) {
		lit = json_loadb(val, vlen, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
		fuzz_check(lit != NULL);
		fuzz_check(json_equal(lit, json_object_get(root, "amount")));
		json_decref(lit);
	}
	json_decref(root);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pn_arena *a;
	const struct pn_site *site = fuzz_2c2p_site(PN_2C2P_JWT, 0);
	unsigned char *payload = NULL;
	size_t	plen = 0;
	const char *key_id = NULL;
	struct pn_err err;
	char   *jwt;
	size_t	len;

	if (a == NULL)
		a = pn_arena_new();
	if (size > 0 && data[0] == '@') {
		struct pn_iov iov = {data + 1, size - 1};
		unsigned char mac[64];
		size_t	maclen = 0;

		fuzz_check(pn_hmac(PN_MD_SHA256, FUZZ_2C2P_SECRET, strlen(FUZZ_2C2P_SECRET), &iov,
				   1, mac, &maclen));
		jwt = pn_xasprintf("%.*s.%s", (int)(size - 1), (const char *)data + 1,
				   pn_b64url_encode(a, mac, maclen));
		len = strlen(jwt);
	} else {
		jwt = fuzz_strndup(data, size);
		len = size;
	}
	if (pn_2c2p_verify_jwt(a, jwt, len, site->twoc2p.secrets, site->twoc2p.nsecrets,
			       &payload, &plen, &key_id, &err)) {
		fuzz_check(key_id != NULL && strcmp(key_id, site->twoc2p.secrets[0].id) == 0);
		fuzz_check(payload != NULL && payload[plen] == '\0');
		check_raw_member((const char *)payload, plen);
	} else
		fuzz_check(err.msg[0] != '\0');
	check_raw_member((const char *)data, size);
	free(jwt);
	pn_arena_reset(a);
	return 0;
}

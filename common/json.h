/*
 * json.h: the few jansson helpers the adapters share.
 *
 * Parsing is strict: duplicate object keys are refused (two "amount"s are
 * an attack, not a notification), nesting is bounded by jansson (2048), and
 * the whole input must be one JSON value.  Strings returned are copies in
 * the request arena, so the json_t can be released at once.
 */
#ifndef PN_JSON_H
#define PN_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "arena.h"
#include "util.h"

/* Parse bytes; NULL and err on failure.  Caller json_decref()s. */
json_t *pn_json_parse(const void *data, size_t len, struct pn_err *err) PN_WUR;

/* Value at a dotted path ("data.object.metadata.order_id"), or NULL. */
json_t *pn_json_path(json_t *root, const char *path);
/* String at path copied into the arena, or NULL when absent or not a string. */
const char *pn_json_str(struct pn_arena *a, json_t *root, const char *path);
/* Integer at path (JSON integer only); false when absent or not an integer. */
bool pn_json_int(json_t *root, const char *path, int64_t *out);

#endif

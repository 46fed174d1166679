/*
 * alipay.h: the parts of the Alipay adapter that tests and the admin
 * command use directly.
 */
#ifndef PN_ALIPAY_H
#define PN_ALIPAY_H

#include <stdbool.h>

#include "arena.h"
#include "form.h"
#include "util.h"

/*
 * The signed content of a decoded notification: fields sorted by name
 * (byte order), "sign" dropped, and "sign_type" dropped too under rule V1
 * (trade notifications) but kept under rule V2 (open-platform messages).
 * Empty values are dropped (alipay-sdk-java, gopay) unless keep_empty
 * (alipay-sdk-nodejs keeps them).  Values are the once-decoded bytes.
 */
char *pn_alipay_sign_content(struct pn_arena *a, const struct pn_form *f, bool keep_sign_type,
			     bool keep_empty, size_t *len);

#endif

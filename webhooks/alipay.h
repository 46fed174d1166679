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

/*
 * The currency of an Alipay trade's amounts (total_amount, refund_fee) from
 * its signed trans_currency: "标价币种, total_amount 对应的币种单位", the
 * value the merchant passed at payment (alipay-sdk-java
 * AlipayTradeQueryResponse / AlipayTradePayResponse; docs/PROVIDERS.md
 * "Alipay: currency").  Absent or empty (a domestic trade): CNY.  Otherwise
 * it must be an ISO 4217 alpha-3 code exactly as Alipay writes them (three
 * upper-case letters, a code this build knows): *out is it and *exponent
 * its minor-unit exponent.  Anything else is never guessed at: false, and
 * the caller flags the event.
 */
bool pn_alipay_currency(struct pn_arena *a, const char *trans_currency, const char **out,
			int *exponent) PN_WUR;

#endif

/*
 * 2c2p_int.h: between the 2C2P adapter's files (2c2p.c, 2c2p_jwt.c,
 * 2c2p_redirect.c); not for anything else.
 */
#ifndef PN_2C2P_INT_H
#define PN_2C2P_INT_H

#include "arena.h"
#include "cfg.h"
#include "event.h"
#include "provider.h"

/* Flags ev merchant_mismatch unless got is the site's 2c2p.merchant_id. */
void pn_2c2p_check_merchant(struct pn_arena *a, const struct pn_site *site, const char *field,
			    const char *got, struct pn_event *ev);

/* The two generations' verify. */
enum pn_verdict pn_2c2p_verify_v4(const struct pn_verify_ctx *ctx, struct pn_event *ev,
				  struct pn_err *err) PN_WUR;
enum pn_verdict pn_2c2p_verify_redirect(const struct pn_verify_ctx *ctx, struct pn_event *ev,
					struct pn_err *err) PN_WUR;

#endif

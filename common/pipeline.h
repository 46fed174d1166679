/*
 * pipeline.h: one request, end to end (docs/ARCHITECTURE.md "One request";
 * README "How a notification is handled").
 *
 *   read -> route (site) -> verify (provider adapter) -> store (one
 *   transaction) -> answer (success only after commit) -> one log line
 *
 * The pipeline owns nothing of the request after it returns: the arena is
 * reset, library objects are freed.
 */
#ifndef PN_PIPELINE_H
#define PN_PIPELINE_H

#include <stdint.h>

#include "arena.h"
#include "cfg.h"
#include "http.h"
#include "provider.h"
#include "store.h"

/* Per-process state of a receiver. */
struct pn_receiver {
	const struct pn_provider *provider;
	struct pn_config *cfg;		/* NULL when the configuration failed to load */
	struct pn_store *store;
	struct pn_arena *arena;		/* reset after every request */
	struct pn_response res;		/* body buffer reused across requests */
	int64_t	(*clock)(void);		/* Unix seconds; injectable for tests */
	void   *app;			/* provider->handle's own state, or NULL */
};

void pn_receiver_init(struct pn_receiver *r, const struct pn_provider *provider,
		      struct pn_config *cfg);
void pn_receiver_destroy(struct pn_receiver *r);

/* Serve one request read from io and write the answer to io. */
void pn_pipeline_handle(struct pn_receiver *r, struct pn_io *io);

/*
 * Once the answer has left (FastCGI request finished, CGI stdout closed):
 * send the LISTEN wake-up of the event just stored, if any.  Off the
 * payment transaction and off the provider's critical path.
 */
void pn_pipeline_after_answer(struct pn_receiver *r);

#endif

-- paynotify schema, version 17: a per-order follow-up schedule for
-- `paynotify query --due` (issue 26, item 5; docs/QUERY.md "Follow-up
-- schedule").  Follows version 14 (014_resolutions.sql); 15 and 16 are other
-- changes' numbers.
--
-- Until now the query timer asked about the orders pending 1 to 26 minutes,
-- every 5 minutes, and a nightly sweep the older ones: an order whose
-- provider answered "pending" was asked again at fixed times, or not at all
-- after the window.  Now every order still pending (and every stored event
-- that waits for the provider's signed confirmation: outcome
-- pending_confirmation) has one row here with the time it is next asked
-- about; `paynotify query --due --apply` claims the rows that are due,
-- asks, records the answer and reschedules by a backoff (1, 2, 5, 10, 30
-- minutes, then hourly, up to the provider's horizon: [query]
-- follow_up_<provider>_hours), or ends the row on a final answer.
--
--   site, order_id   the order (paynotify.orders' key; no foreign key: the
--                    receivers' UPDATE of an order must not pay for one)
--   ref              0: the order's payment (its order query); otherwise
--                    paynotify.notifications.id of a refund that waits for
--                    its signed confirmation (its refund query)
--   state            scheduled (asked when next_ask_at comes), done (a final
--                    answer was stored: whatever its outcome, asking again
--                    gives the same answer; a flagged one is on `report`),
--                    expired (still not final at the horizon: asked no more)
--   starts_at        what the backoff and the horizon count from: the
--                    order's created_at, the notification's received_at
--   next_ask_at, attempts, last_asked_at, last_answer (the provider's own
--   word), last_result (query's result column)
--   claim_token, claimed_by, claimed_until
--                    the claim: a run takes a due row with FOR UPDATE SKIP
--                    LOCKED and leases it (claimed_until); a second run or
--                    host skips it; a claimer that crashed loses it when the
--                    lease runs out, and only the token's holder records
--
-- Rows are made off the receivers' path: by a trigger on the shop's INSERT
-- into paynotify.orders (follow_up_new_order(), sql/functions.sql, once per
-- statement), below for the orders pending now, and by `query --due
-- --apply` runs (follow_up_sweep(): stored events waiting for a
-- confirmation, every run; pending orders without a row, at most every 15
-- minutes: paynotify.follow_up_sweeps).  The sweep also deletes, lazily,
-- the due rows whose order became final (by a notification: never asked),
-- was deleted, or whose confirmation was settled.  Nothing here touches
-- ingest().
--
-- Rights (docs/DATABASE.md): the admin role (which runs `query --due`)
-- needs SELECT, INSERT, UPDATE, DELETE here, SELECT, UPDATE on
-- follow_up_sweeps and EXECUTE on follow_up_sweep,
-- follow_up_claim, follow_up_answered and follow_up_delay; the shop needs
-- nothing new (the trigger's function is SECURITY DEFINER, owned by the
-- schema owner); the receivers nothing.

BEGIN;

CREATE TABLE paynotify.follow_ups (
    site           text        NOT NULL,
    order_id       text        NOT NULL,
    ref            bigint      NOT NULL DEFAULT 0 CHECK (ref >= 0),
    state          text        NOT NULL DEFAULT 'scheduled'
                   CHECK (state IN ('scheduled', 'done', 'expired')),
    starts_at      timestamptz NOT NULL,
    next_ask_at    timestamptz NOT NULL,
    attempts       integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_asked_at  timestamptz,
    last_answer    text,
    last_result    text,
    claim_token    uuid,
    claimed_by     text,
    claimed_until  timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, order_id, ref),
    CHECK ((claim_token IS NULL) = (claimed_until IS NULL))
);

-- the claim's, the sweep's and stats' read: the scheduled rows by time;
-- the sweep's other read: the finished ones
CREATE INDEX follow_ups_due_idx ON paynotify.follow_ups (next_ask_at)
    WHERE state = 'scheduled';
CREATE INDEX follow_ups_finished_idx ON paynotify.follow_ups (starts_at)
    WHERE state <> 'scheduled';

-- When the sweep last read the whole orders table for pending orders
-- without a row (at most every 15 minutes: follow_up_sweep()).  One row.
CREATE TABLE paynotify.follow_up_sweeps (
    one      boolean     PRIMARY KEY DEFAULT true CHECK (one),
    full_at  timestamptz NOT NULL
);
INSERT INTO paynotify.follow_up_sweeps (full_at) VALUES ('-infinity');

-- The orders pending now, created in the last 3 days (the longest default
-- horizon; the first `query --due --apply` run adds those of a longer
-- configured horizon): asked at once, then by the backoff.
INSERT INTO paynotify.follow_ups (site, order_id, ref, starts_at, next_ask_at)
SELECT o.site, o.order_id, 0, o.created_at, o.created_at + interval '1 minute'
  FROM paynotify.orders o
 WHERE o.status = 'pending' AND o.created_at > now() - interval '3 days';

INSERT INTO paynotify.schema_version (version) VALUES (17);

COMMIT;

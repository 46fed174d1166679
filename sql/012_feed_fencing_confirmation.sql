-- paynotify schema, version 12: fenced acknowledgements on the event feed;
-- the outcome pending_confirmation.
--
-- 1. The feed.
-- Before, ack_events(consumer, ids) deleted any claimed event of the group:
-- a consumer whose lease had run out, and whose events another consumer of
-- the group had claimed since, could still acknowledge them, and the next
-- event of the order went out while the first was being handled again
-- (issue 23, item 4).  Now every claim_events() call hands out a lease
-- token (one random uuid per call, returned in the new column lease_token
-- of every row it claimed); ack_events(consumer, ids, lease_token) deletes
-- only events whose current lease is that token.  An id held under another
-- token (claimed again since) or never claimed is refused: not deleted,
-- counted in feed_consumers.stale_acks (last_stale_ack_at), `paynotify
-- stats --format prometheus` shows it, and the call raises a WARNING.
-- ack_events without a token is refused with an error naming the new form
-- (docs/OPERATIONS.md, upgrade note for version 12).
--
-- The functions are in sql/functions.sql; the two whose signature or
-- result changes are dropped here so that functions.sql can create them.
--
-- 2. The outcome pending_confirmation (issue 23, item 3): a genuinely signed
-- event that does not say which PSP transaction it is, stored, acknowledged
-- and never applied until a signed answer of the provider confirms it.  A
-- legacy 2C2P form whose transaction_ref + approval_code + eci can be split
-- more than one way is one (docs/2C2P.md "Which transaction"); `paynotify
-- query --apply` confirms it (outcome then already_applied), `paynotify
-- report` lists those still unconfirmed after an hour.  The domain's check
-- is replaced by the full list.

BEGIN;

ALTER TABLE paynotify.feed ADD COLUMN lease_token uuid;

ALTER TABLE paynotify.feed_consumers
    ADD COLUMN stale_acks        bigint      NOT NULL DEFAULT 0,
    ADD COLUMN last_stale_ack_at timestamptz;

-- An event claimed before the upgrade has no token, so nobody can
-- acknowledge it under that claim; its lease is left to run out (no second
-- consumer gets it meanwhile), then it is handed out again with a token.

DROP FUNCTION IF EXISTS paynotify.claim_events(text, integer, integer);
DROP FUNCTION IF EXISTS paynotify.ack_events(text, bigint[]);

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch', 'combined',
                     'missing_id', 'dispute', 'complaint', 'foreign_site', 'unhandled',
                     'refund_failed', 'pending_confirmation')) NOT VALID;
ALTER DOMAIN paynotify.outcome VALIDATE CONSTRAINT outcome_check;

INSERT INTO paynotify.schema_version (version) VALUES (12);

COMMIT;

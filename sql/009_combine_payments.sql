-- paynotify schema, version 9: combine payments and events without ids.
--
-- 1. notifications.parent_id.  A WeChat Pay combine payment (合单支付, one
--    notification for up to 50 sub-orders, each its own transaction) is
--    stored as one row holding the raw bytes (outcome "combined": the
--    envelope, never applied, counted and not reported) and one row per
--    sub-order, each under its own site and dedup key, applied, flagged
--    and deduplicated as a single payment would be.  A sub-order's row has
--    an empty raw_body and parent_id = the envelope's id: the bytes are
--    stored once.  No foreign key: `paynotify purge` and the archive
--    recipe of docs/DATABASE.md delete rows one by one.  purge deletes
--    only outcomes on its list of resolved ones, which "combined" is not:
--    an envelope is kept (its bytes are the proof of every sub-order).
--
-- 2. Two outcomes (the full list replaces the domain's check):
--      combined    the envelope of a combine payment (see 1.)
--      missing_id  a genuine event that no provider id names: keyed by a
--                  hash of its signed content ("noid:<sha256>") so that it
--                  never shares a key with another event, stored, never
--                  applied, on `paynotify report` (issue 22: every v2
--                  combine payment once shared the key "-:SUCCESS", and the
--                  second was taken for a retry of the first)

BEGIN;

ALTER TABLE paynotify.notifications ADD COLUMN parent_id bigint;
CREATE INDEX notifications_parent_idx ON paynotify.notifications (parent_id)
    WHERE parent_id IS NOT NULL;

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch',
                     'combined', 'missing_id'));

INSERT INTO paynotify.schema_version (version) VALUES (9);

COMMIT;

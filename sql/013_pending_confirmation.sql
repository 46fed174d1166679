-- paynotify schema, version 13: unauthenticated refunds wait for a signed
-- confirmation (issue 23, item 2).  Follows version 11 (011_report_noise.sql).
--
-- A WeChat Pay API v2 refund result carries no MAC: its req_info is
-- AES-256-ECB, and 16-byte blocks of two genuine results under one APIv2
-- key can be swapped (one order's transaction with another refund's id and
-- amount).  Such a result is now stored with the outcome
-- pending_confirmation, the order unchanged, and applied only when
-- `paynotify query` has WeChat Pay's signed refundquery answer confirming
-- it (docs/WECHATPAY.md "Refund confirmation").  A confirmed refund whose
-- status is not SUCCESS is refund_failed (the outcome another branch gives
-- a v2 refund result whose own refund_status is not SUCCESS; the list
-- below is the full list, as every migration that extends the domain
-- writes it).
--
-- The outcome domain's CHECK is replaced with the full list; the partial
-- index keeps the work of `paynotify query` and `paynotify report` (the
-- refunds still waiting) a read of the waiting rows only.

BEGIN;

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch', 'combined',
                     'missing_id', 'dispute', 'complaint', 'foreign_site', 'unhandled',
                     'refund_failed', 'pending_confirmation')) NOT VALID;
ALTER DOMAIN paynotify.outcome VALIDATE CONSTRAINT outcome_check;

CREATE INDEX notifications_pending_confirmation
    ON paynotify.notifications (received_at, id)
    WHERE outcome = 'pending_confirmation';

INSERT INTO paynotify.schema_version (version) VALUES (13);

COMMIT;

-- paynotify schema, version 10: disputes and complaints, their own kind.
--
-- A dispute (Stripe charge.dispute.*) or a complaint (WeChat Pay 消费者投诉
-- 2.0 COMPLAINT.*, Alipay alipay.merchant.tradecomplain.changed) is not an
-- order transition: it never moves or rolls back an order.  It is a case a
-- person works on until the provider closes it.  Each notification (and
-- each `paynotify query --complaints` answer) is still stored once in
-- paynotify.notifications, byte for byte, deduplicated per case and status
-- (its dedup key: "dispute:<id>:<event type>:<status>",
-- "complaint:<id>:<action>"), with
--
--   event_kind  dispute | complaint   (added to paynotify.event_kind)
--   outcome     dispute | complaint   (added to paynotify.outcome): stored
--               as a case event, its case carried in paynotify.cases
--   case_id     the provider's case id (dp_..., complaint_id,
--               complain_event_id); NULL for every other notification
--
-- and the case's current state is one row of paynotify.cases, written by
-- paynotify.case_record() (sql/functions.sql) in the ingest transaction:
-- the order it belongs to (through the stored PSP transaction,
-- order_by_txn(), or the order id the provider signed), the amount and
-- currency, the reason, the evidence due date, the provider's status word
-- and closed_at once the provider closed it (won, lost, ...).  Events may
-- come in any order: a case once closed stays closed unless a later event
-- reopens it (see case_record()).
--
-- `paynotify report` lists every open case and, for a while, the outcome of
-- a closed one; `paynotify purge` never removes a row of a case that is
-- still open.  Version 9 (sql/009_combine_payments.sql) runs before this
-- file and added the outcomes combined and missing_id: the full lists below
-- keep them.

BEGIN;

ALTER DOMAIN paynotify.event_kind DROP CONSTRAINT event_kind_check;
ALTER DOMAIN paynotify.event_kind ADD CONSTRAINT event_kind_check
    CHECK (VALUE IN ('paid', 'refund', 'closed', 'failed', 'pending', 'ignored', 'dispute',
                     'complaint'));

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch', 'combined',
                     'missing_id', 'dispute', 'complaint'));

-- NULL for every existing row: no rewrite of the table.
ALTER TABLE paynotify.notifications ADD COLUMN case_id text;

CREATE TABLE paynotify.cases (
    site             text        NOT NULL,
    provider         text        NOT NULL,
    case_id          text        NOT NULL,
    case_kind        text        NOT NULL CHECK (case_kind IN ('dispute', 'complaint')),
    order_id         text,
    psp_txn_id       text,
    amount_minor     bigint      CHECK (amount_minor >= 0),
    currency         text        CHECK (currency ~ '^[A-Z]{3}$'),
    reason           text,
    status           text        NOT NULL,     -- the provider's word: needs_response, won, PROCESSED
    status_time      bigint,                   -- provider time of that status (Unix s), if known
    due_by           timestamptz,              -- evidence / answer due
    opened_at        timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,              -- NULL while open
    events           integer     NOT NULL DEFAULT 1,
    notification_id  bigint      NOT NULL,     -- the last stored event of the case
    PRIMARY KEY (site, provider, case_id)
);
-- report: the open cases; purge: "is this row's case open?" is the key.
CREATE INDEX cases_open_idx ON paynotify.cases (site) WHERE closed_at IS NULL;
CREATE INDEX notifications_case_idx ON paynotify.notifications (site, provider, case_id)
    WHERE case_id IS NOT NULL;

INSERT INTO paynotify.schema_version (version) VALUES (10);

COMMIT;

-- paynotify schema, version 5: site binding, event sources, the event feed.
--
-- Tables and data only; the functions are (re)created by sql/functions.sql,
-- which `paynotify migrate` applies after this file.
--
--  1. New outcomes (README "Outcomes"): mode_mismatch, duplicate_payment,
--     paid_after_close, conflicting_duplicate, txn_mismatch.
--  2. notifications.source: where the event came from (notification,
--     query, statement); the dedup identity is the same for all three.
--  3. Alipay events are keyed on the provider's unique trade_no instead of
--     the merchant's out_trade_no ("<trade_no>:<trade_status>", refunds
--     "<trade_no>:<trade_status>:refund:<out_biz_no or refund_fee>"): the
--     stored keys are rewritten, so a retry of a notification stored before
--     the upgrade is still a duplicate.  Rows without a trade_no keep theirs.
--  4. Flagged notifications (stored under an adapter's flag, never applied)
--     move out of the site's key space: "!<flag>:<key>".  A foreign
--     notification can then never make a genuine one look like a duplicate;
--     its own retries still find it and count deliveries.
--  5. The event feed (README "Event feed"): feed_consumers (consumer
--     groups; 'default' is created here) and feed (one row per applied
--     transition per group, deleted when the group acknowledges it).
--  6. The functions whose signature or result changed are dropped (the
--     receivers, replay and report of this release call the new ones).

BEGIN;

-- 6. signatures that changed (CREATE OR REPLACE cannot change a result type)
DROP FUNCTION IF EXISTS paynotify.ingest(text, text, text, text, text, text, text, text, bigint,
                                         text, bigint, boolean, text, text, text, text, jsonb,
                                         bytea);
DROP FUNCTION IF EXISTS paynotify.reapply(bigint, text, text, text, bigint, text, bigint, boolean,
                                          text);
DROP FUNCTION IF EXISTS paynotify.apply_event(text, text, text, text, text, bigint, text, bigint,
                                              boolean);

-- 1. outcomes
ALTER TABLE paynotify.notifications DROP CONSTRAINT notifications_outcome_check;
ALTER TABLE paynotify.notifications ADD CONSTRAINT notifications_outcome_check
    CHECK (outcome IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                       'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                       'paid_after_close', 'conflicting_duplicate', 'txn_mismatch'));

DROP INDEX paynotify.notifications_attention_idx;
CREATE INDEX notifications_attention_idx ON paynotify.notifications (outcome)
    WHERE outcome NOT IN ('applied', 'already_applied', 'ignored');

-- 2. source
ALTER TABLE paynotify.notifications
    ADD COLUMN source text NOT NULL DEFAULT 'notification'
        CHECK (source IN ('notification', 'query', 'statement'));

-- 3. Alipay keys on trade_no.  Before: "<out_trade_no>:<trade_status>" and
-- "<out_trade_no>:<trade_status>:refund:<x>", with out_trade_no stored in
-- order_id, trade_status in event_type and trade_no in psp_txn_id.
UPDATE paynotify.notifications
   SET dedup_key = psp_txn_id || substr(dedup_key, length(order_id) + 1)
 WHERE provider = 'alipay' AND psp_txn_id IS NOT NULL AND order_id IS NOT NULL
   AND event_type IS NOT NULL
   AND (dedup_key = order_id || ':' || event_type
        OR starts_with(dedup_key, order_id || ':' || event_type || ':refund:'));

-- 4. Flagged rows out of the key space.  merchant_mismatch was only ever
-- an adapter's flag; amount_mismatch was an adapter's flag when it came
-- with a detail (the adapters' reason), and apply_event's finding (a
-- genuine event of this site whose amount does not match the order: it
-- stays in the key space) when it came without one.
UPDATE paynotify.notifications
   SET dedup_key = '!' || outcome || ':' || dedup_key
 WHERE NOT starts_with(dedup_key, '!')
   AND (outcome = 'merchant_mismatch'
        OR (outcome = 'amount_mismatch' AND outcome_detail IS NOT NULL
            AND NOT starts_with(outcome_detail, 'replayed: ')));

-- 5. The event feed.
CREATE TABLE paynotify.feed_consumers (
    consumer    text        PRIMARY KEY CHECK (consumer ~ '^[A-Za-z0-9_.:-]{1,64}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO paynotify.feed_consumers (consumer) VALUES ('default');

CREATE SEQUENCE paynotify.feed_event_seq;

-- No foreign keys on purpose: a key check would lock the consumer row (or
-- the notification) in every payment transaction.
CREATE TABLE paynotify.feed (
    consumer         text        NOT NULL,
    event_id         bigint      NOT NULL,
    site             text        NOT NULL,
    provider         text        NOT NULL,
    order_id         text        NOT NULL,
    notification_id  bigint      NOT NULL,
    event_kind       text        NOT NULL,
    outcome          text        NOT NULL,
    order_status     text,
    amount_minor     bigint,
    currency         text,
    refund_minor     bigint,
    replayed         boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    lease_until      timestamptz,
    claims           integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, event_id)
);
-- Per-order ordering: "is there an earlier unacknowledged event of this order?"
CREATE INDEX feed_order_idx ON paynotify.feed (consumer, site, order_id, event_id);

INSERT INTO paynotify.schema_version (version) VALUES (5);

COMMIT;

-- paynotify schema, version 1.
--
-- Contract (README "Storage"): the schema name, the tables orders and
-- notifications and their key columns.
--
-- The numbered files hold tables and data changes only.  Every function
-- lives once, in sql/functions.sql, which `paynotify migrate` re-applies
-- after the numbered files on every run.  (Until version 4 the functions
-- were defined here and re-defined in later files; installed databases
-- applied those versions, and sql/005 drops what changed.)
--
-- Applied by `paynotify migrate` or by hand, in order, then functions.sql:
--     psql -v ON_ERROR_STOP=1 -f sql/001_schema.sql ... -f sql/functions.sql

BEGIN;

CREATE SCHEMA IF NOT EXISTS paynotify;

CREATE TABLE paynotify.schema_version (
    version     integer PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per merchant order.  The site inserts it (status 'pending') before
-- sending the buyer to the provider; paynotify only moves it forward.
CREATE TABLE paynotify.orders (
    site            text        NOT NULL,
    order_id        text        NOT NULL,
    amount_minor    bigint      NOT NULL CHECK (amount_minor >= 0),
    currency        text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status          text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'paid', 'partially_refunded',
                                      'refunded', 'closed', 'failed')),
    psp             text,
    psp_txn_id      text,
    paid_at         timestamptz,
    refunded_minor  bigint      NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, order_id)
);

-- One row per distinct verified event, raw bytes included, kept for replay.
CREATE TABLE paynotify.notifications (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site              text        NOT NULL,
    provider          text        NOT NULL,
    dedup_key         text        NOT NULL,
    event_kind        text        NOT NULL
                      CHECK (event_kind IN ('paid', 'refund', 'closed', 'failed',
                                            'pending', 'ignored')),
    event_type        text,
    order_id          text,
    psp_txn_id        text,
    psp_event_id      text,
    amount_minor      bigint,
    currency          text,
    refund_minor      bigint,
    refund_cumulative boolean     NOT NULL DEFAULT false,
    psp_time          text,
    outcome           text        NOT NULL
                      CHECK (outcome IN ('applied', 'already_applied', 'unknown_order',
                                         'amount_mismatch', 'merchant_mismatch',
                                         'ignored')),
    outcome_detail    text,
    deliveries        integer     NOT NULL DEFAULT 1,
    raw_headers       jsonb       NOT NULL DEFAULT '{}',
    raw_body          bytea       NOT NULL,
    key_id            text,
    received_at       timestamptz NOT NULL DEFAULT now(),
    last_delivery_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (site, provider, dedup_key)
);

CREATE INDEX orders_psp_txn_idx ON paynotify.orders (site, psp_txn_id)
    WHERE psp_txn_id IS NOT NULL;
CREATE INDEX notifications_order_idx ON paynotify.notifications (site, order_id);
CREATE INDEX notifications_attention_idx ON paynotify.notifications (outcome)
    WHERE outcome IN ('unknown_order', 'amount_mismatch', 'merchant_mismatch');
CREATE INDEX notifications_received_idx ON paynotify.notifications (received_at);

INSERT INTO paynotify.schema_version (version) VALUES (1);

COMMIT;

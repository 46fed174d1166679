-- paynotify schema, version 1.
--
-- Contract (README "Storage"): the schema name, the tables orders and
-- notifications, their key columns, and the function paynotify.apply_event,
-- which a site that keeps its orders elsewhere in the same database may
-- replace (same signature, same outcomes) without losing atomicity.
--
-- Applied by `paynotify migrate` or by hand:  psql -v ON_ERROR_STOP=1 -f sql/001_schema.sql

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

-- The order transition: forward only, idempotent.
--   paid:    pending/failed/closed -> paid (amount and currency must match)
--   refund:  -> partially_refunded/refunded; refund_minor is this refund, or
--            the running total when p_refund_cumulative (Alipay, Stripe)
--   closed, failed: pending -> closed/failed; never overwrites paid
--   pending, ignored: recorded only
-- Returns the outcome: applied, already_applied, unknown_order,
-- amount_mismatch or ignored.  Replace this function (same signature) to
-- keep orders elsewhere; it runs inside the ingest transaction and must lock
-- the order row it changes.
CREATE FUNCTION paynotify.apply_event(
    p_site text, p_order_id text, p_kind text, p_provider text, p_psp_txn_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    o            paynotify.orders%ROWTYPE;
    new_refunded bigint;
BEGIN
    IF p_order_id IS NULL THEN
        -- A payment or refund we cannot tie to an order needs a human.
        IF p_kind IN ('paid', 'refund') THEN
            RETURN 'unknown_order';
        END IF;
        RETURN 'ignored';
    END IF;

    SELECT * INTO o FROM paynotify.orders
     WHERE site = p_site AND order_id = p_order_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown_order';
    END IF;

    IF p_kind = 'paid' THEN
        IF p_amount_minor IS DISTINCT FROM o.amount_minor
           OR p_currency IS DISTINCT FROM o.currency THEN
            RETURN 'amount_mismatch';
        END IF;
        IF o.status IN ('paid', 'partially_refunded', 'refunded') THEN
            RETURN 'already_applied';
        END IF;
        UPDATE paynotify.orders
           SET status = 'paid', psp = p_provider, psp_txn_id = p_psp_txn_id,
               paid_at = now(), updated_at = now()
         WHERE site = p_site AND order_id = p_order_id;
        RETURN 'applied';

    ELSIF p_kind = 'refund' THEN
        IF (p_currency IS NOT NULL AND p_currency IS DISTINCT FROM o.currency)
           OR (p_amount_minor IS NOT NULL AND p_amount_minor <> o.amount_minor)
           OR p_refund_minor IS NULL OR p_refund_minor < 0 THEN
            RETURN 'amount_mismatch';
        END IF;
        IF p_refund_cumulative THEN
            new_refunded := greatest(o.refunded_minor, p_refund_minor);
        ELSE
            new_refunded := o.refunded_minor + p_refund_minor;
        END IF;
        IF new_refunded > o.amount_minor THEN
            RETURN 'amount_mismatch';
        END IF;
        IF new_refunded = o.refunded_minor
           AND o.status IN ('partially_refunded', 'refunded') THEN
            RETURN 'already_applied';
        END IF;
        -- A verified refund proves the payment, even if its notification
        -- has not arrived yet (out of order); the late "paid" then finds the
        -- order past paid and changes nothing.
        UPDATE paynotify.orders
           SET refunded_minor = new_refunded,
               status = CASE WHEN new_refunded >= o.amount_minor
                             THEN 'refunded' ELSE 'partially_refunded' END,
               psp = coalesce(psp, p_provider),
               psp_txn_id = coalesce(psp_txn_id, p_psp_txn_id),
               paid_at = coalesce(paid_at, now()),
               updated_at = now()
         WHERE site = p_site AND order_id = p_order_id;
        RETURN 'applied';

    ELSIF p_kind IN ('closed', 'failed') THEN
        IF o.status = 'pending' THEN
            UPDATE paynotify.orders
               SET status = p_kind, updated_at = now()
             WHERE site = p_site AND order_id = p_order_id;
            RETURN 'applied';
        ELSIF o.status = p_kind THEN
            RETURN 'already_applied';
        END IF;
        RETURN 'ignored';
    END IF;

    RETURN 'ignored';
END;
$$;

-- Ingest one verified notification: one transaction, one round trip.
-- Concurrent deliveries of one event serialise on a transaction-level
-- advisory lock of (site, provider, dedup_key); the first stores the event
-- and applies it, the others only count a delivery.
CREATE FUNCTION paynotify.ingest(
    p_site text, p_provider text, p_dedup_key text, p_event_kind text,
    p_event_type text, p_order_id text, p_psp_txn_id text, p_psp_event_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean, p_psp_time text, p_key_id text,
    p_flag text, p_flag_detail text, p_raw_headers jsonb, p_raw_body bytea,
    OUT notification_id bigint, OUT outcome text, OUT duplicate boolean,
    OUT deliveries integer, OUT order_status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_order_id text := p_order_id;
    v_stored_order_id text;
BEGIN
    PERFORM pg_advisory_xact_lock(
        hashtextextended(p_site || '/' || p_provider || '/' || p_dedup_key, 0));

    UPDATE paynotify.notifications n
       SET deliveries = n.deliveries + 1, last_delivery_at = now()
     WHERE n.site = p_site AND n.provider = p_provider AND n.dedup_key = p_dedup_key
    RETURNING n.id, n.outcome, n.deliveries, n.order_id
         INTO notification_id, outcome, deliveries, v_stored_order_id;

    -- RETURNING INTO sets its targets to NULL when no row matched: the
    -- stored order id goes into its own variable, never over p_order_id.
    IF FOUND THEN
        duplicate := true;
        v_order_id := v_stored_order_id;
    ELSE
        duplicate := false;
        deliveries := 1;
        -- An event without an order id (a Stripe refund of a charge whose
        -- metadata was not copied) finds its order by the PSP transaction.
        IF v_order_id IS NULL AND p_psp_txn_id IS NOT NULL THEN
            SELECT o.order_id INTO v_order_id FROM paynotify.orders o
             WHERE o.site = p_site AND o.psp_txn_id = p_psp_txn_id
             ORDER BY o.created_at LIMIT 1;
        END IF;
        IF p_flag IS NOT NULL THEN
            outcome := p_flag;
        ELSE
            outcome := paynotify.apply_event(p_site, v_order_id, p_event_kind, p_provider,
                                             p_psp_txn_id, p_amount_minor, p_currency,
                                             p_refund_minor, p_refund_cumulative);
        END IF;
        INSERT INTO paynotify.notifications
               (site, provider, dedup_key, event_kind, event_type, order_id, psp_txn_id,
                psp_event_id, amount_minor, currency, refund_minor, refund_cumulative,
                psp_time, outcome, outcome_detail, raw_headers, raw_body, key_id)
        VALUES (p_site, p_provider, p_dedup_key, p_event_kind, p_event_type, v_order_id,
                p_psp_txn_id, p_psp_event_id, p_amount_minor, p_currency, p_refund_minor,
                coalesce(p_refund_cumulative, false), p_psp_time, outcome, p_flag_detail,
                coalesce(p_raw_headers, '{}'), p_raw_body, p_key_id)
        RETURNING id INTO notification_id;
    END IF;

    SELECT o.status INTO order_status FROM paynotify.orders o
     WHERE o.site = p_site AND o.order_id = v_order_id;

    IF NOT duplicate AND outcome = 'applied' THEN
        PERFORM pg_notify('paynotify', json_build_object(
            'notification_id', notification_id, 'site', p_site, 'provider', p_provider,
            'order_id', v_order_id, 'event_kind', p_event_kind,
            'order_status', order_status)::text);
    END IF;
END;
$$;

INSERT INTO paynotify.schema_version (version) VALUES (1);

COMMIT;

-- paynotify schema, version 3: the LISTEN/NOTIFY signal can be turned off.
--
-- PostgreSQL serialises the commits of transactions that NOTIFY: each one
-- holds a database-wide lock from its pre-commit step until its commit
-- record is flushed to disk, so notifying ingests commit one WAL flush at a
-- time and never share a flush (group commit).  On a disk whose fdatasync
-- takes 0.5 ms that caps ingest near 1/(flush + commit) per second whatever
-- the number of workers (docs/PERFORMANCE.md has the numbers).
--
-- A shop that does not `LISTEN paynotify` turns the signal off, for the
-- database or for the receivers' role:
--
--     ALTER DATABASE paynotify SET paynotify.notify = off;
--     ALTER ROLE paynotify SET paynotify.notify = off;
--
-- (new sessions pick it up: reload or restart the receivers).  Unset, or
-- any other value: notify, exactly as before.  Nothing else changes: the
-- transaction, its locks and its durability are the same.

BEGIN;

-- True unless the setting paynotify.notify is off (or false, no, 0).
CREATE FUNCTION paynotify.notify_enabled() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT lower(coalesce(current_setting('paynotify.notify', true), ''))
           NOT IN ('off', 'false', 'no', '0', 'f', 'n')
$$;

CREATE OR REPLACE FUNCTION paynotify.ingest(
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

    IF NOT duplicate AND outcome = 'applied' AND paynotify.notify_enabled() THEN
        PERFORM pg_notify('paynotify', json_build_object(
            'notification_id', notification_id, 'site', p_site, 'provider', p_provider,
            'order_id', v_order_id, 'event_kind', p_event_kind,
            'order_status', order_status)::text);
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION paynotify.reapply(
    p_id bigint, p_event_kind text, p_order_id text, p_psp_txn_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean, p_flag text,
    OUT outcome_before text, OUT outcome_now text, OUT order_status text)
LANGUAGE plpgsql AS $$
DECLARE
    n          paynotify.notifications%ROWTYPE;
    v_order_id text := p_order_id;
BEGIN
    SELECT * INTO n FROM paynotify.notifications WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'notification % does not exist', p_id;
    END IF;
    -- Same serialisation as live ingest of this event.
    PERFORM pg_advisory_xact_lock(
        hashtextextended(n.site || '/' || n.provider || '/' || n.dedup_key, 0));
    outcome_before := n.outcome;

    IF n.outcome IN ('applied', 'already_applied', 'ignored') THEN
        outcome_now := n.outcome;
        v_order_id := n.order_id;
    ELSIF p_flag IS NOT NULL THEN
        outcome_now := p_flag;
    ELSE
        IF v_order_id IS NULL AND p_psp_txn_id IS NOT NULL THEN
            SELECT o.order_id INTO v_order_id FROM paynotify.orders o
             WHERE o.site = n.site AND o.psp_txn_id = p_psp_txn_id
             ORDER BY o.created_at LIMIT 1;
        END IF;
        outcome_now := paynotify.apply_event(n.site, v_order_id, p_event_kind, n.provider,
                                             p_psp_txn_id, p_amount_minor, p_currency,
                                             p_refund_minor, p_refund_cumulative);
        IF outcome_now IS DISTINCT FROM n.outcome THEN
            UPDATE paynotify.notifications
               SET outcome = outcome_now, order_id = coalesce(v_order_id, order_id),
                   outcome_detail = 'replayed: was ' || n.outcome
             WHERE id = p_id;
        END IF;
    END IF;

    SELECT o.status INTO order_status FROM paynotify.orders o
     WHERE o.site = n.site AND o.order_id = v_order_id;

    IF outcome_now = 'applied' AND outcome_before <> 'applied'
       AND paynotify.notify_enabled() THEN
        PERFORM pg_notify('paynotify', json_build_object(
            'notification_id', p_id, 'site', n.site, 'provider', n.provider,
            'order_id', v_order_id, 'event_kind', p_event_kind,
            'order_status', order_status, 'replayed', true)::text);
    END IF;
END;
$$;

INSERT INTO paynotify.schema_version (version) VALUES (3);

COMMIT;

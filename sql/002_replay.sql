-- paynotify schema, version 2: replaying stored notifications.
--
-- paynotify.reapply() runs a stored, re-verified notification through the
-- same transition function as live traffic.  It is idempotent: a
-- notification that was applied (or needed nothing) stays as it is; one
-- flagged unknown_order or amount_mismatch is applied once the order is
-- there and matches.  `paynotify replay --apply` calls it; the default dry
-- run calls it inside a transaction that is rolled back.

BEGIN;

CREATE FUNCTION paynotify.reapply(
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

    IF outcome_now = 'applied' AND outcome_before <> 'applied' THEN
        PERFORM pg_notify('paynotify', json_build_object(
            'notification_id', p_id, 'site', n.site, 'provider', n.provider,
            'order_id', v_order_id, 'event_kind', p_event_kind,
            'order_status', order_status, 'replayed', true)::text);
    END IF;
END;
$$;

INSERT INTO paynotify.schema_version (version) VALUES (2);

COMMIT;

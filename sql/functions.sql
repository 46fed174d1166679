-- paynotify functions: the one current definition of each.
--
-- `paynotify migrate` applies this file after the numbered files, on every
-- run (CREATE OR REPLACE: idempotent).  By hand:
--     psql -v ON_ERROR_STOP=1 -f sql/functions.sql
--
-- Which function does what (docs/ARCHITECTURE.md "SQL"):
--
--   ingest()        one verified event: dedup, transition, feed.  The receivers.
--   reapply()       one stored, re-verified event, again.       paynotify replay.
--   confirm_refund() one stored event that waited for the provider's signed
--                   answer, settled as that answer says.      paynotify query.
--   apply_event()   the money rules (README "Who may change an order").
--   order_lock(), order_update(), order_pay(), order_by_txn(), order_rows()
--                   the order storage: the ONLY functions that read or write
--                   paynotify.orders.  A site whose orders live in its own
--                   table replaces these five (docs/SHOP-ORDERS.md); a
--                   replacement commented 'site: ...' survives re-applying
--                   this file.
--   case_record()   a dispute's or complaint's state (paynotify.cases), from
--                   ingest(); never touches an order.
--   claim_events(), ack_events(), feed_subscribe(), feed_unsubscribe()
--                   the durable event feed (README "Event feed").
--   follow_up_new_order() (trigger), follow_up_sweep(), follow_up_claim(),
--   follow_up_answered(), follow_up_delay()
--                   the follow-up schedule of `paynotify query --due`
--                   (sql/017); never on the receivers' path.
--   confirm_claim() the rate limit of `paynotify confirm` (sql/018): one
--                   provider ask per order per interval; confirm_order(),
--                   its read of one order.
--
-- Lock order, the same on every path (ingest, reapply, the feed), so that
-- no two transactions can wait for each other in a cycle:
--
--   1. the notification row: ingest inserts it (the unique index on
--      (site, provider, dedup_key) is the event lock: a concurrent delivery
--      of the same event waits in its INSERT ... ON CONFLICT until the
--      first commits), or locks it through ON CONFLICT DO UPDATE; reapply
--      locks it FOR UPDATE.  (A conflicting duplicate then inserts its own
--      row, which only it ever takes second.)
--   2. the order row: order_lock() ... FOR UPDATE, inside apply_event().
--   3. the feed: new rows only (nothing on the payment path waits for a
--      consumer; consumers lock feed rows only).
--
-- No advisory locks.  Every function that touches the tables on the request
-- path runs with enable_seqscan off (inherited by what it calls): a plan
-- cached by a long-lived receiver session while the tables were empty must
-- never become a walk of the table (docs/PERFORMANCE.md).

BEGIN;

-- A site's own replacements of the replaceable functions (order_lock,
-- order_update, order_pay, order_by_txn, order_rows, apply_event) carry a comment
-- starting with "site:" (docs/SHOP-ORDERS.md).  Re-applying this file must
-- not overwrite them: they are moved aside here, ours are (re)created below
-- (so that each has one definition to read, here), and at the end of the
-- file the site's are put back in place of ours.  One transaction: no
-- session ever sees ours in between, and the site's keep their identity.
CREATE SCHEMA IF NOT EXISTS paynotify_site_kept;
DO $keep$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'paynotify'
                AND p.proname IN ('order_lock', 'order_update', 'order_pay', 'order_by_txn',
                                  'order_rows', 'apply_event')
                AND obj_description(p.oid, 'pg_proc') LIKE 'site:%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET SCHEMA paynotify_site_kept', f);
    END LOOP;
END;
$keep$;

-- True unless the setting paynotify.notify is off (or false, no, 0): the
-- wake-up signal (README "Event feed").
CREATE OR REPLACE FUNCTION paynotify.notify_enabled() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT lower(coalesce(current_setting('paynotify.notify', true), ''))
           NOT IN ('off', 'false', 'no', '0', 'f', 'n')
$$;

-- An amount as operators read it (README: major units with the currency):
-- money_text(6600, 'CNY') = '66.00 CNY'.  The ISO 4217 exponents are those
-- of common/money.c (tests/integration/test_rules.py compares the two); an
-- unknown currency is shown as minor units ('6600 minor units XXX').  Used
-- for the outcome details of flagged events only, never on the applied path.
CREATE OR REPLACE FUNCTION paynotify.money_text(p_minor bigint, p_currency text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
           WHEN p_minor IS NULL THEN 'no amount'
           WHEN e.x IS NULL THEN p_minor || ' minor units' || coalesce(' ' || p_currency, '')
           WHEN e.x = 0 THEN p_minor || ' ' || p_currency
           ELSE CASE WHEN p_minor < 0 THEN '-' ELSE '' END
                || (abs(p_minor) / (10 ^ e.x)::bigint) || '.'
                || lpad((abs(p_minor) % (10 ^ e.x)::bigint)::text, e.x, '0') || ' ' || p_currency
           END
      FROM (SELECT CASE
                   WHEN p_currency IN (
                        'AED', 'AFN', 'ALL', 'AMD', 'ANG', 'AOA', 'ARS', 'AUD', 'AWG', 'AZN',
                        'BAM', 'BBD', 'BDT', 'BGN', 'BMD', 'BND', 'BOB', 'BRL', 'BSD', 'BTN',
                        'BWP', 'BYN', 'BZD', 'CAD', 'CDF', 'CHF', 'CNY', 'COP', 'CRC', 'CUP',
                        'CVE', 'CZK', 'DKK', 'DOP', 'DZD', 'EGP', 'ERN', 'ETB', 'EUR', 'FJD',
                        'FKP', 'GBP', 'GEL', 'GHS', 'GIP', 'GMD', 'GTQ', 'GYD', 'HKD', 'HNL',
                        'HTG', 'HUF', 'IDR', 'ILS', 'INR', 'IRR', 'JMD', 'KES', 'KGS', 'KHR',
                        'KPW', 'KYD', 'KZT', 'LAK', 'LBP', 'LKR', 'LRD', 'LSL', 'MAD', 'MDL',
                        'MGA', 'MKD', 'MMK', 'MNT', 'MOP', 'MRU', 'MUR', 'MVR', 'MWK', 'MXN',
                        'MYR', 'MZN', 'NAD', 'NGN', 'NIO', 'NOK', 'NPR', 'NZD', 'PAB', 'PEN',
                        'PGK', 'PHP', 'PKR', 'PLN', 'QAR', 'RON', 'RSD', 'RUB', 'SAR', 'SBD',
                        'SCR', 'SDG', 'SEK', 'SGD', 'SHP', 'SLE', 'SOS', 'SRD', 'SSP', 'STN',
                        'SVC', 'SYP', 'SZL', 'THB', 'TJS', 'TMT', 'TOP', 'TRY', 'TTD', 'TWD',
                        'TZS', 'UAH', 'USD', 'UYU', 'UZS', 'VES', 'WST', 'XCD', 'XCG', 'YER',
                        'ZAR', 'ZMW', 'ZWG') THEN 2
                   WHEN p_currency IN (
                        'BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF',
                        'UGX', 'UYI', 'VND', 'VUV', 'XAF', 'XOF', 'XPF') THEN 0
                   WHEN p_currency IN ('BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND') THEN 3
                   WHEN p_currency IN ('CLF', 'UYW') THEN 4
                   END AS x) e
$$;

-- ---------------------------------------------------------------------------
-- Order storage.  Replace these five to keep orders elsewhere in the same
-- database (same signatures); nothing else reads or writes paynotify.orders.

-- Lock the order row (FOR UPDATE) and return what the rules need.  known is
-- false (the rest NULL) when there is no such order.
CREATE OR REPLACE FUNCTION paynotify.order_lock(
    p_site text, p_order_id text,
    OUT known boolean, OUT amount_minor bigint, OUT currency text, OUT status text,
    OUT psp text, OUT psp_txn_id text, OUT refunded_minor bigint)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT o.amount_minor, o.currency, o.status, o.psp, o.psp_txn_id, o.refunded_minor
      INTO amount_minor, currency, status, psp, psp_txn_id, refunded_minor
      FROM paynotify.orders o
     WHERE o.site = p_site AND o.order_id = p_order_id
       FOR UPDATE;
    known := FOUND;
END;
$$;

-- Write the order's new state (the row order_lock() locked).  status is one
-- of pending, paid, partially_refunded, refunded, closed, failed; when it
-- is paid or past paid, paid_at is set unless it already is.  Returns
-- whether a row was written.
CREATE OR REPLACE FUNCTION paynotify.order_update(
    p_site text, p_order_id text, p_status text, p_refunded_minor bigint, p_psp text,
    p_psp_txn_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE paynotify.orders o
       SET status = p_status, refunded_minor = p_refunded_minor, psp = p_psp,
           psp_txn_id = p_psp_txn_id,
           paid_at = CASE WHEN p_status IN ('paid', 'partially_refunded', 'refunded')
                          THEN coalesce(o.paid_at, now()) ELSE o.paid_at END,
           updated_at = now()
     WHERE o.site = p_site AND o.order_id = p_order_id;
    RETURN FOUND;
END;
$$;

-- The common case in one statement: pay the order if it is pending and the
-- amount and currency match (the row locked and written at once, instead of
-- order_lock() then order_update()).  Returns true when it did; false (or
-- NULL) otherwise, and apply_event() then takes the general path
-- (order_lock, the rules, order_update), which would have decided exactly
-- this write for this case: status paid, refunded_minor unchanged, psp
-- p_psp, psp_txn_id p_psp_txn_id unless NULL, paid_at set unless set.  A
-- replacement may always return false (it only loses the shortcut); one
-- that pays must write what order_update() would have written.
CREATE OR REPLACE FUNCTION paynotify.order_pay(
    p_site text, p_order_id text, p_amount_minor bigint, p_currency text, p_psp text,
    p_psp_txn_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE paynotify.orders o
       SET status = 'paid', psp = p_psp, psp_txn_id = coalesce(p_psp_txn_id, o.psp_txn_id),
           paid_at = coalesce(o.paid_at, now()), updated_at = now()
     WHERE o.site = p_site AND o.order_id = p_order_id AND o.status = 'pending'
       AND o.amount_minor = p_amount_minor AND o.currency = p_currency;
    RETURN FOUND;
END;
$$;

-- The order a PSP transaction belongs to (an event without an order id,
-- e.g. a Stripe refund of a charge whose metadata was not copied), or NULL.
CREATE OR REPLACE FUNCTION paynotify.order_by_txn(p_site text, p_psp_txn_id text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text;
BEGIN
    SELECT o.order_id INTO v FROM paynotify.orders o
     WHERE o.site = p_site AND o.psp_txn_id = p_psp_txn_id
     ORDER BY o.created_at LIMIT 1;
    RETURN v;
END;
$$;

-- The orders of a site (all sites when p_site is NULL), as `paynotify
-- report` needs them.  An SQL function PostgreSQL inlines into the report's
-- query, so the report's conditions reach the table's indexes.
CREATE OR REPLACE FUNCTION paynotify.order_rows(p_site text)
RETURNS TABLE (site text, order_id text, amount_minor bigint, currency text, status text,
               psp text, psp_txn_id text, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT o.site, o.order_id, o.amount_minor, o.currency, o.status, o.psp, o.psp_txn_id,
           o.created_at, o.updated_at
      FROM paynotify.orders o
     WHERE p_site IS NULL OR o.site = p_site
$$;

-- ---------------------------------------------------------------------------
-- The money rules (README "Who may change an order", DESIGN.md).  Runs
-- inside the ingest (or reapply) transaction, after the notification row is
-- locked; reads the order once, through order_lock() (or, for the payment
-- of a pending order with the right amount, pays it through order_pay()).
--
--   paid     pending or failed -> paid (amount and currency must match):
--            applied.  failed is an attempt that failed (a declined card,
--            WeChat Pay result_code FAIL, a 2C2P decline): the buyer may
--            try again on the same order, and a later success is the
--            payment, not a surprise (docs/PROVIDERS.md "What failed
--            means").  closed -> paid: paid_after_close (the order was
--            closed by the shop, the provider's close or its expiry; the
--            money is real; a human checks the goods were not restocked);
--            already paid: already_applied, or duplicate_payment when the
--            event's PSP transaction differs from the order's (both known):
--            a second real charge, money to refund.
--   refund   -> partially_refunded/refunded; refund_minor is this refund,
--            or the running total when p_refund_cumulative.  A refund may
--            come before its payment (it proves the payment), unless weak.
--   closed   pending or failed -> closed (an expiry after failed attempts
--            closes the order); never overwrites paid.
--   failed   pending -> failed; never overwrites paid or closed.
--   refund, closed, failed whose PSP transaction differs from the order's
--            recorded one (both known): txn_mismatch, order unchanged.
--   p_weak_identity  (nothing signed ties the event to the site: WeChat Pay
--            v2 refund results) only a refund of a payment this site
--            verified: the order paid with the same PSP transaction, the
--            refunds not above the amount paid; anything else txn_mismatch.
--
-- The contract a replacement honours: same arguments; returns outcome (one
-- of the outcomes above or applied, already_applied, unknown_order,
-- amount_mismatch, ignored), order_id (the order the event was applied to,
-- or NULL), order_status (its status after the event, or NULL when there
-- is no such order) and detail (a short human note, or NULL).
CREATE OR REPLACE FUNCTION paynotify.apply_event(
    p_site text, p_order_id text, p_kind text, p_provider text, p_psp_txn_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean, p_weak_identity boolean,
    OUT outcome text, OUT order_id text, OUT order_status text, OUT detail text)
LANGUAGE plpgsql AS $$
DECLARE
    o            record;
    new_refunded bigint;
    txn_differs  boolean;
    written      boolean;
BEGIN
    order_id := p_order_id;
    IF p_order_id IS NULL THEN
        -- A payment or refund we cannot tie to an order needs a human.
        IF p_weak_identity THEN
            outcome := 'txn_mismatch';
            detail := 'no order of this site has this transaction';
        ELSIF p_kind IN ('paid', 'refund') THEN
            outcome := 'unknown_order';
        ELSE
            outcome := 'ignored';
        END IF;
        RETURN;
    END IF;

    -- A payment of a pending order, amount and currency as ordered: applied,
    -- in one statement (order_pay).  Anything else, or an order_pay() that
    -- declines, goes the general way below, which decides the same.
    IF p_kind = 'paid' AND NOT p_weak_identity AND p_amount_minor IS NOT NULL
       AND p_currency IS NOT NULL
       AND paynotify.order_pay(p_site, p_order_id, p_amount_minor, p_currency, p_provider,
                               p_psp_txn_id) THEN
        outcome := 'applied';
        order_status := 'paid';
        RETURN;
    END IF;

    o := paynotify.order_lock(p_site, p_order_id);
    IF NOT o.known THEN
        IF p_weak_identity THEN
            outcome := 'txn_mismatch';
            detail := 'no such order';
        ELSIF p_kind IN ('pending', 'ignored') THEN
            -- informational (a PaymentIntent created, a charge.failed of a
            -- sibling site's order on a shared Stripe account, which carries
            -- no marker check): nothing to apply and no money, so nothing
            -- for a person either
            outcome := 'ignored';
        ELSE
            outcome := 'unknown_order';
        END IF;
        RETURN;
    END IF;
    order_status := o.status;
    txn_differs := p_psp_txn_id IS NOT NULL AND o.psp_txn_id IS NOT NULL
                   AND p_psp_txn_id <> o.psp_txn_id;

    IF p_weak_identity AND (p_kind <> 'refund'
                            OR o.status NOT IN ('paid', 'partially_refunded', 'refunded')
                            OR o.psp_txn_id IS NULL
                            OR p_psp_txn_id IS DISTINCT FROM o.psp_txn_id) THEN
        outcome := 'txn_mismatch';
        detail := CASE WHEN o.psp_txn_id IS NULL OR o.status NOT IN ('paid', 'partially_refunded',
                                                                     'refunded')
                       THEN 'order ' || o.status || ', no verified payment to refund'
                       ELSE 'order paid by transaction ' || o.psp_txn_id END;
        RETURN;
    END IF;

    IF p_kind = 'paid' THEN
        IF o.status IN ('paid', 'partially_refunded', 'refunded') THEN
            IF txn_differs THEN
                outcome := 'duplicate_payment';
                detail := 'order already paid by transaction ' || o.psp_txn_id;
            ELSE
                outcome := 'already_applied';
            END IF;
            RETURN;
        END IF;
        IF p_amount_minor IS DISTINCT FROM o.amount_minor
           OR p_currency IS DISTINCT FROM o.currency THEN
            outcome := 'amount_mismatch';
            detail := 'paid ' || paynotify.money_text(p_amount_minor, p_currency) || ', order '
                      || paynotify.money_text(o.amount_minor, o.currency) || ' ' || o.status;
            RETURN;
        END IF;
        IF o.status = 'closed' THEN
            outcome := 'paid_after_close';
            detail := 'order was closed when the payment arrived';
        ELSE
            outcome := 'applied';
        END IF;
        written := paynotify.order_update(p_site, p_order_id, 'paid', o.refunded_minor,
                                          p_provider, coalesce(p_psp_txn_id, o.psp_txn_id));
        order_status := 'paid';
        RETURN;

    ELSIF p_kind = 'refund' THEN
        IF txn_differs THEN
            outcome := 'txn_mismatch';
            detail := 'order paid by transaction ' || o.psp_txn_id;
            RETURN;
        END IF;
        IF (p_currency IS NOT NULL AND p_currency IS DISTINCT FROM o.currency)
           OR (p_amount_minor IS NOT NULL AND p_amount_minor <> o.amount_minor)
           OR p_refund_minor IS NULL OR p_refund_minor < 0 THEN
            outcome := CASE WHEN p_weak_identity THEN 'txn_mismatch' ELSE 'amount_mismatch' END;
            detail := 'refund ' || paynotify.money_text(p_refund_minor, p_currency) || ', order '
                      || paynotify.money_text(o.amount_minor, o.currency) || ' ' || o.status
                      || CASE WHEN p_amount_minor IS NOT NULL AND p_amount_minor <> o.amount_minor
                              THEN ' (the refund names a payment of '
                                   || paynotify.money_text(p_amount_minor, p_currency) || ')'
                              ELSE '' END;
            RETURN;
        END IF;
        IF p_refund_cumulative THEN
            new_refunded := greatest(o.refunded_minor, p_refund_minor);
        ELSE
            new_refunded := o.refunded_minor + p_refund_minor;
        END IF;
        IF new_refunded > o.amount_minor THEN
            outcome := CASE WHEN p_weak_identity THEN 'txn_mismatch' ELSE 'amount_mismatch' END;
            detail := 'refunds would total ' || paynotify.money_text(new_refunded, o.currency)
                      || ' of ' || paynotify.money_text(o.amount_minor, o.currency);
            RETURN;
        END IF;
        IF new_refunded = o.refunded_minor
           AND o.status IN ('partially_refunded', 'refunded') THEN
            outcome := 'already_applied';
            RETURN;
        END IF;
        -- A verified refund proves the payment, even if its notification
        -- has not arrived yet (out of order); the late "paid" then finds the
        -- order past paid and changes nothing.
        order_status := CASE WHEN new_refunded >= o.amount_minor
                             THEN 'refunded' ELSE 'partially_refunded' END;
        written := paynotify.order_update(p_site, p_order_id, order_status, new_refunded,
                                          coalesce(o.psp, p_provider),
                                          coalesce(o.psp_txn_id, p_psp_txn_id));
        outcome := 'applied';
        RETURN;

    ELSIF p_kind IN ('closed', 'failed') THEN
        IF txn_differs THEN
            outcome := 'txn_mismatch';
            detail := 'order paid by transaction ' || o.psp_txn_id;
        ELSIF o.status = 'pending' OR (o.status = 'failed' AND p_kind = 'closed') THEN
            written := paynotify.order_update(p_site, p_order_id, p_kind, o.refunded_minor, o.psp,
                                              o.psp_txn_id);
            order_status := p_kind;
            outcome := 'applied';
        ELSIF o.status = p_kind THEN
            outcome := 'already_applied';
        ELSE
            outcome := 'ignored';
        END IF;
        RETURN;
    END IF;

    outcome := 'ignored';
END;
$$;

-- ---------------------------------------------------------------------------
-- The event feed.  One row per applied transition per consumer group,
-- written in the payment transaction; deleted when that group acknowledges
-- it.  Returns the event id.
CREATE OR REPLACE FUNCTION paynotify.feed_append(
    p_notification_id bigint, p_site text, p_provider text, p_order_id text,
    p_event_kind text, p_outcome text, p_order_status text, p_amount_minor bigint,
    p_currency text, p_refund_minor bigint, p_replayed boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := nextval('paynotify.feed_event_seq');
BEGIN
    INSERT INTO paynotify.feed (consumer, event_id, site, provider, order_id, notification_id,
                                event_kind, outcome, order_status, amount_minor, currency,
                                refund_minor, replayed)
    SELECT c.consumer, v_id, p_site, p_provider, coalesce(p_order_id, ''), p_notification_id,
           p_event_kind,
           p_outcome, p_order_status, p_amount_minor, p_currency, p_refund_minor, p_replayed
      FROM paynotify.feed_consumers c;
    RETURN v_id;
END;
$$;

-- The wake-up payload (JSON) the receiver sends with pg_notify() AFTER its
-- answer, or NULL when paynotify.notify is off.
CREATE OR REPLACE FUNCTION paynotify.wakeup_payload(
    p_event_id bigint, p_notification_id bigint, p_site text, p_provider text,
    p_order_id text, p_event_kind text, p_order_status text, p_replayed boolean)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN paynotify.notify_enabled() THEN
           json_build_object('event_id', p_event_id, 'notification_id', p_notification_id,
                             'site', p_site, 'provider', p_provider, 'order_id', p_order_id,
                             'event_kind', p_event_kind, 'order_status', p_order_status,
                             'replayed', p_replayed)::text END
$$;

-- ---------------------------------------------------------------------------
-- Disputes and complaints (schema 10, sql/010_cases.sql).  One stored case
-- event (a notification or a query answer, already inserted by ingest() as
-- notification p_notification_id) updates its case in paynotify.cases.
-- Never reads or writes an order: a dispute or complaint does not move an
-- order, and does not roll one back (the order is linked, not locked).
--
-- The case's order: once linked it stays; else the event's order (the
-- order id the provider signed, or order_by_txn() of the event's PSP
-- transaction, resolved by ingest()).  Events may come out of order:
--   - a closed case stays closed, except that a later event with
--     p_reopens (a WeChat Pay CONTINUE_COMPLAINT, a query answer saying the
--     complaint is open again) reopens it;
--   - a closing event (p_closed: won, lost, PROCESSED, FINISHED, ...) closes
--     an open case whatever came before it;
--   - otherwise the status is the one of the latest event by provider time
--     (p_status_time, Unix seconds; an event without a time counts as the
--     latest).
-- Amount, currency, reason and due date: the latest event's where it has
-- them.  detail: why the case is not linked to an order, or NULL.
-- Lock order: the notification row (ingest), then the case row (here); no
-- other path locks a case row before a notification row.
CREATE OR REPLACE FUNCTION paynotify.case_record(
    p_notification_id bigint, p_site text, p_provider text, p_kind text, p_case_id text,
    p_order_id text, p_psp_txn_id text, p_amount_minor bigint, p_currency text,
    p_status text, p_reason text, p_due_by bigint, p_closed boolean, p_reopens boolean,
    p_status_time bigint,
    OUT order_id text, OUT status text, OUT closed boolean, OUT detail text)
LANGUAGE plpgsql AS $$
DECLARE
    c        record;
    v_newer  boolean;
    v_closed timestamptz;
    v_status text;
BEGIN
    INSERT INTO paynotify.cases AS x
           (site, provider, case_id, case_kind, order_id, psp_txn_id, amount_minor, currency,
            reason, status, status_time, due_by, closed_at, notification_id)
    VALUES (p_site, p_provider, p_case_id, p_kind, p_order_id, p_psp_txn_id, p_amount_minor,
            CASE WHEN p_amount_minor IS NOT NULL THEN p_currency END, p_reason,
            coalesce(p_status, 'notified'), p_status_time,
            CASE WHEN p_due_by IS NOT NULL THEN to_timestamp(p_due_by) END,
            CASE WHEN coalesce(p_closed, false) THEN now() END, p_notification_id)
    ON CONFLICT (site, provider, case_id) DO NOTHING
    RETURNING x.order_id, x.status, x.closed_at IS NOT NULL INTO order_id, status, closed;
    IF NOT FOUND THEN
        SELECT * INTO c FROM paynotify.cases x
         WHERE x.site = p_site AND x.provider = p_provider AND x.case_id = p_case_id
           FOR UPDATE;
        v_newer := p_status_time IS NULL OR c.status_time IS NULL
                   OR p_status_time >= c.status_time;
        v_closed := c.closed_at;
        v_status := c.status;
        IF c.closed_at IS NULL THEN
            IF coalesce(p_closed, false) THEN
                v_closed := now();
                v_status := coalesce(p_status, v_status);
            ELSIF v_newer THEN
                v_status := coalesce(p_status, v_status);
            END IF;
        ELSIF v_newer AND coalesce(p_closed, false) THEN
            v_status := coalesce(p_status, v_status);     -- e.g. funds_reinstated after won
        ELSIF v_newer AND coalesce(p_reopens, false) THEN
            v_closed := NULL;
            v_status := coalesce(p_status, v_status);
        END IF;
        UPDATE paynotify.cases x
           SET order_id = coalesce(x.order_id, p_order_id),
               psp_txn_id = coalesce(x.psp_txn_id, p_psp_txn_id),
               amount_minor = CASE WHEN p_amount_minor IS NOT NULL AND v_newer
                                   THEN p_amount_minor ELSE x.amount_minor END,
               currency = CASE WHEN p_amount_minor IS NOT NULL AND v_newer
                               THEN p_currency ELSE x.currency END,
               reason = CASE WHEN v_newer THEN coalesce(p_reason, x.reason)
                             ELSE coalesce(x.reason, p_reason) END,
               due_by = CASE WHEN p_due_by IS NOT NULL AND (v_newer OR x.due_by IS NULL)
                             THEN to_timestamp(p_due_by) ELSE x.due_by END,
               status = v_status,
               status_time = CASE WHEN v_newer THEN coalesce(p_status_time, x.status_time)
                                  ELSE x.status_time END,
               closed_at = v_closed,
               events = x.events + 1,
               updated_at = now(),
               notification_id = p_notification_id
         WHERE x.site = p_site AND x.provider = p_provider AND x.case_id = p_case_id
        RETURNING x.order_id, x.status, x.closed_at IS NOT NULL INTO order_id, status, closed;
    END IF;
    IF order_id IS NULL THEN
        detail := CASE WHEN p_psp_txn_id IS NOT NULL
                       THEN 'no order of this site has transaction ' || p_psp_txn_id
                       ELSE 'not linked to an order yet (paynotify query --complaints)' END;
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------
-- Ingest one verified event: one transaction, one round trip.
--
-- The dedup goes through the unique key itself: INSERT ... ON CONFLICT
-- (site, provider, dedup_key) uses its arbiter index whatever the
-- statistics say.  The row is inserted with the outcome 'applied' and
-- corrected in the same transaction when apply_event() says otherwise (no
-- one else can see it before the commit), so a new payment costs: the
-- insert, the order's lock and update, the feed row.
--
--   flagged (p_flag): stored under "!<flag>:<key>", outside the site's key
--       space, never applied; its retries count deliveries.
--   p_flag pending_confirmation on a refund (WeChat Pay v2 refund results,
--       nothing signs them as a whole): stored under its own key with that
--       outcome, never applied here; confirm_refund() applies it once the
--       provider's signed answer confirms it.  Same key, different content:
--       its own pending row under "!pending_confirmation:<key>:<md5>".
--   duplicate, same content: a delivery is counted; nothing else.
--   duplicate, different content (event kind, order, PSP transaction,
--       amount, currency, refund amount): the first stays authoritative;
--       this one is stored as conflicting_duplicate under
--       "!conflicting_duplicate:<key>:<md5 of the content>" (its retries
--       count deliveries there), never applied.
--   new: apply_event(); an applied transition (applied, paid_after_close)
--       writes a feed event and returns the wake-up payload.
--
-- order_status is the order's status after this event, NULL for
-- duplicates, flagged events and unknown orders (the order is not read).
-- detail is the stored row's outcome_detail: why a flagged, conflicting or
-- not applied event was not applied, as apply_event() (or the adapter's
-- flag) said it, amounts in major units ("paid 1.00 CNY, order 88.88 CNY
-- pending"); NULL when there is nothing to say.  The receivers log it.
-- Schema 10 added the p_case_* arguments: the older signature goes, so that
-- a call naming the first 20 arguments is not ambiguous.
DROP FUNCTION IF EXISTS paynotify.ingest(text, text, text, text, text, text, text, text, bigint,
                                         text, bigint, boolean, text, text, text, text, jsonb,
                                         bytea, boolean, text);
CREATE OR REPLACE FUNCTION paynotify.ingest(
    p_site text, p_provider text, p_dedup_key text, p_event_kind text,
    p_event_type text, p_order_id text, p_psp_txn_id text, p_psp_event_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean, p_psp_time text, p_key_id text,
    p_flag text, p_flag_detail text, p_raw_headers jsonb, p_raw_body bytea,
    p_weak_identity boolean DEFAULT false, p_source text DEFAULT NULL,
    p_case_id text DEFAULT NULL, p_case_status text DEFAULT NULL, p_case_reason text DEFAULT NULL,
    p_case_due bigint DEFAULT NULL, p_case_time bigint DEFAULT NULL,
    p_case_closed boolean DEFAULT NULL, p_case_reopens boolean DEFAULT NULL,
    OUT notification_id bigint, OUT outcome text, OUT duplicate boolean,
    OUT deliveries integer, OUT order_id text, OUT order_status text,
    OUT event_id bigint, OUT wakeup text, OUT detail text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_key      text := p_dedup_key;
    v_order_id text := p_order_id;
    v_outcome  text := 'applied';
    v_detail   text := p_flag_detail;
    v_case_id  text;
    a          record;
    c          record;
    -- A re-delivery's commit need not wait for its WAL flush when the
    -- caller asks (the receivers' sessions: common/store.c), this
    -- statement is its transaction's first write (no other caller's
    -- change can ride on it: ingest_combined's envelope comes first), and
    -- no synchronous standby is configured (below).
    v_lazy_dup boolean := current_setting('paynotify.async_duplicates', true) = 'on'
                          AND pg_current_xact_id_if_assigned() IS NULL
                          AND current_setting('synchronous_standby_names') = '';
BEGIN
    IF p_flag = 'pending_confirmation' AND p_event_kind = 'refund' THEN
        -- A refund nothing signs as a whole (WeChat Pay v2 refund results):
        -- stored under its own key, so a re-delivery of an applied one is a
        -- duplicate, and applied only by confirm_refund().  A payment that
        -- waits (a legacy 2C2P form that does not say which transaction it
        -- is) is flagged like any other, under "!pending_confirmation:<key>":
        -- its transaction comes from the provider's answer, under its own key.
        v_outcome := p_flag;
    ELSIF p_flag IS NOT NULL THEN
        v_key := '!' || p_flag || ':' || p_dedup_key;
        v_outcome := p_flag;
    ELSIF v_order_id IS NULL AND p_psp_txn_id IS NOT NULL THEN
        v_order_id := paynotify.order_by_txn(p_site, p_psp_txn_id);
    END IF;
    -- A dispute or complaint: stored as such and recorded in its case
    -- (case_record), never applied to an order.
    IF p_event_kind IN ('dispute', 'complaint') AND p_case_id IS NOT NULL THEN
        v_case_id := p_case_id;
        IF p_flag IS NULL THEN
            v_outcome := p_event_kind;
        END IF;
    END IF;

    -- 1. the notification row: the event lock
    INSERT INTO paynotify.notifications AS n
           (site, provider, dedup_key, event_kind, event_type, order_id, psp_txn_id,
            psp_event_id, amount_minor, currency, refund_minor, refund_cumulative, psp_time,
            outcome, outcome_detail, raw_headers, raw_body, key_id, source, case_id)
    VALUES (p_site, p_provider, v_key, p_event_kind, p_event_type, v_order_id,
            p_psp_txn_id, p_psp_event_id, p_amount_minor, p_currency, p_refund_minor,
            coalesce(p_refund_cumulative, false), p_psp_time, v_outcome, v_detail,
            coalesce(p_raw_headers, '{}'), p_raw_body, p_key_id,
            coalesce(p_source, 'notification'), v_case_id)
    ON CONFLICT (site, provider, dedup_key) DO UPDATE
       SET deliveries = n.deliveries + 1, last_delivery_at = now()
     WHERE n.event_kind = EXCLUDED.event_kind
       AND n.psp_txn_id IS NOT DISTINCT FROM EXCLUDED.psp_txn_id
       AND n.amount_minor IS NOT DISTINCT FROM EXCLUDED.amount_minor
       AND n.currency IS NOT DISTINCT FROM EXCLUDED.currency
       AND n.refund_minor IS NOT DISTINCT FROM EXCLUDED.refund_minor
       AND (p_order_id IS NULL OR n.order_id IS NOT DISTINCT FROM p_order_id)
    RETURNING n.id, n.outcome, n.deliveries, n.order_id, n.outcome_detail
         INTO notification_id, outcome, deliveries, order_id, detail;

    IF NOT FOUND THEN
        -- Same key, different content: stored on its own, never applied.
        -- One that waits for a confirmation waits on its own row too: the
        -- first row may be the spliced one, and the provider's signed
        -- answer decides which (if any) is the refund; two rows that differ
        -- in this content can never both match that answer.
        v_key := CASE WHEN p_flag = 'pending_confirmation' AND p_event_kind = 'refund'
                      THEN '!pending_confirmation:'
                      ELSE '!conflicting_duplicate:' END || v_key || ':'
                 || md5(concat_ws('|', p_event_kind, p_order_id, p_psp_txn_id, p_amount_minor,
                                  p_currency, p_refund_minor));
        INSERT INTO paynotify.notifications AS n
               (site, provider, dedup_key, event_kind, event_type, order_id, psp_txn_id,
                psp_event_id, amount_minor, currency, refund_minor, refund_cumulative, psp_time,
                outcome, outcome_detail, raw_headers, raw_body, key_id, source)
        VALUES (p_site, p_provider, v_key, p_event_kind, p_event_type, v_order_id,
                p_psp_txn_id, p_psp_event_id, p_amount_minor, p_currency, p_refund_minor,
                coalesce(p_refund_cumulative, false), p_psp_time,
                CASE WHEN p_flag = 'pending_confirmation' AND p_event_kind = 'refund'
                     THEN 'pending_confirmation' ELSE 'conflicting_duplicate' END,
                CASE WHEN p_flag = 'pending_confirmation' AND p_event_kind = 'refund'
                     THEN 'same refund id as an earlier result, different content; '
                          || coalesce(p_flag_detail, 'waits for a signed confirmation')
                     ELSE 'same event key as an earlier notification, different content' END,
                coalesce(p_raw_headers, '{}'), p_raw_body, p_key_id,
                coalesce(p_source, 'notification'))
        ON CONFLICT (site, provider, dedup_key) DO UPDATE
           SET deliveries = n.deliveries + 1, last_delivery_at = now()
        RETURNING n.id, n.outcome, n.deliveries, n.order_id, n.outcome_detail
             INTO notification_id, outcome, deliveries, order_id, detail;
    END IF;

    -- A new row has deliveries 1; ON CONFLICT DO UPDATE always adds one.
    duplicate := deliveries > 1;

    -- A duplicate changes nothing but its counter: the event it repeats is
    -- durable already (ON CONFLICT saw it committed, and a synchronous
    -- commit becomes visible only after its local flush).  So its commit
    -- does not wait for the flush (PostgreSQL's asynchronous commit, for
    -- this transaction only): a crash can lose the +1 of the last few
    -- hundred milliseconds, never an event, and copies that arrive
    -- together no longer queue on the row lock through one flush each
    -- (docs/PERFORMANCE.md, round 4).  Not with a synchronous standby: a
    -- first delivery whose wait for the standby was cancelled is visible
    -- here before the standby has it, and only the re-delivery's own
    -- synchronous commit proves that it is on the standby now
    -- (faults/test_ha.py UnknownOutcome).
    IF duplicate AND v_lazy_dup THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;

    -- 2'. a new dispute or complaint event: its case, then the feed (no order)
    IF NOT duplicate AND outcome IN ('dispute', 'complaint') AND v_case_id IS NOT NULL THEN
        c := paynotify.case_record(notification_id, p_site, p_provider, p_event_kind, v_case_id,
                                   v_order_id, p_psp_txn_id, p_amount_minor, p_currency,
                                   p_case_status, p_case_reason, p_case_due,
                                   coalesce(p_case_closed, false),
                                   coalesce(p_case_reopens, false), p_case_time);
        order_id := c.order_id;
        detail := c.detail;
        IF c.order_id IS DISTINCT FROM v_order_id OR c.detail IS NOT NULL THEN
            UPDATE paynotify.notifications n
               SET order_id = c.order_id, outcome_detail = c.detail
             WHERE n.id = notification_id;
        END IF;
        event_id := paynotify.feed_append(notification_id, p_site, p_provider, c.order_id,
                                          p_event_kind, outcome, NULL, p_amount_minor,
                                          p_currency, NULL, false);
        wakeup := paynotify.wakeup_payload(event_id, notification_id, p_site, p_provider,
                                           c.order_id, p_event_kind, NULL, false);
        RETURN;
    END IF;

    IF duplicate OR outcome <> 'applied' THEN
        RETURN;         -- a duplicate, a flagged or a conflicting one: done
    END IF;

    -- 2. the order row (through apply_event and order_lock)
    a := paynotify.apply_event(p_site, v_order_id, p_event_kind, p_provider, p_psp_txn_id,
                               p_amount_minor, p_currency, p_refund_minor,
                               coalesce(p_refund_cumulative, false),
                               coalesce(p_weak_identity, false));
    outcome := a.outcome;
    order_id := a.order_id;
    order_status := a.order_status;
    detail := a.detail;
    IF a.outcome IS DISTINCT FROM 'applied' OR a.order_id IS DISTINCT FROM v_order_id
       OR a.detail IS NOT NULL THEN
        UPDATE paynotify.notifications n
           SET outcome = a.outcome, order_id = a.order_id, outcome_detail = a.detail
         WHERE n.id = notification_id;
    END IF;

    -- 3. the feed
    IF outcome IN ('applied', 'paid_after_close') THEN
        event_id := paynotify.feed_append(notification_id, p_site, p_provider, order_id,
                                          p_event_kind, outcome, order_status, p_amount_minor,
                                          p_currency, p_refund_minor, false);
        wakeup := paynotify.wakeup_payload(event_id, notification_id, p_site, p_provider,
                                           order_id, p_event_kind, order_status, false);
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------
-- A combine payment (WeChat Pay 合单支付): the envelope and each sub-order,
-- in the caller's one transaction (one statement).
--
--   the envelope: one row under p_site holding the raw bytes, event_kind
--       ignored, outcome combined (never applied, not reported), keyed by
--       the adapter from its signed content; a retry counts its deliveries.
--   each sub-order (p_subs: a jsonb array of the events the adapter made,
--       each with its own site, dedup key, kind, ids, amount and flag):
--       ingest() exactly as a single payment (dedup, flags, apply, feed),
--       with an empty raw_body; a row it stored new gets parent_id = the
--       envelope's id (a duplicate keeps the link of its first storing).
--       Every argument of ingest() is passed (schema 10's p_case_* too,
--       NULL when the sub-order has none, as for every payment), so that a
--       sub-order meets the very rules of a single event: its flag
--       (merchant_mismatch, foreign_site, missing_id, pending_confirmation,
--       ...), conflicting duplicates, the case path of a dispute or
--       complaint, apply_event() and the feed.
--
-- Sub-orders are ingested in the order sent; their orders are locked in
-- that order (the same for every delivery of the same notification).
-- One row per part: ord 0 the envelope, ord i the i-th sub-order.
CREATE OR REPLACE FUNCTION paynotify.ingest_combined(
    p_site text, p_provider text, p_dedup_key text, p_event_type text,
    p_psp_event_id text, p_psp_time text, p_key_id text, p_detail text,
    p_raw_headers jsonb, p_raw_body bytea, p_source text, p_subs jsonb)
RETURNS TABLE (ord integer, notification_id bigint, outcome text, duplicate boolean,
               deliveries integer, order_status text, event_id bigint, wakeup text,
               detail text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_parent bigint;
    s        record;
    r        record;
BEGIN
    INSERT INTO paynotify.notifications AS n
           (site, provider, dedup_key, event_kind, event_type, psp_event_id, psp_time,
            outcome, outcome_detail, raw_headers, raw_body, key_id, source)
    VALUES (p_site, p_provider, p_dedup_key, 'ignored', p_event_type, p_psp_event_id,
            p_psp_time, 'combined', p_detail, coalesce(p_raw_headers, '{}'), p_raw_body,
            p_key_id, coalesce(p_source, 'notification'))
    ON CONFLICT (site, provider, dedup_key) DO UPDATE
       SET deliveries = n.deliveries + 1, last_delivery_at = now()
    RETURNING n.id, n.deliveries, n.outcome_detail
         INTO v_parent, deliveries, detail;
    ord := 0;
    notification_id := v_parent;
    outcome := 'combined';
    duplicate := deliveries > 1;
    order_status := NULL;
    event_id := NULL;
    wakeup := NULL;
    RETURN NEXT;

    FOR s IN SELECT e.value AS v, e.ordinality::integer AS i
               FROM jsonb_array_elements(p_subs) WITH ORDINALITY e LOOP
        r := paynotify.ingest(s.v->>'site', p_provider, s.v->>'dedup_key',
                              s.v->>'event_kind', s.v->>'event_type', s.v->>'order_id',
                              s.v->>'psp_txn_id', s.v->>'psp_event_id',
                              (s.v->>'amount_minor')::bigint, s.v->>'currency',
                              (s.v->>'refund_minor')::bigint,
                              coalesce((s.v->>'refund_cumulative')::boolean, false),
                              s.v->>'psp_time', s.v->>'key_id', s.v->>'flag',
                              s.v->>'flag_detail', '{}'::jsonb, '\x'::bytea,
                              coalesce((s.v->>'weak_identity')::boolean, false), p_source,
                              s.v->>'case_id', s.v->>'case_status', s.v->>'case_reason',
                              (s.v->>'case_due')::bigint, (s.v->>'case_time')::bigint,
                              (s.v->>'case_closed')::boolean, (s.v->>'case_reopens')::boolean);
        IF NOT r.duplicate THEN
            UPDATE paynotify.notifications x SET parent_id = v_parent
             WHERE x.id = r.notification_id;
        END IF;
        ord := s.i;
        notification_id := r.notification_id;
        outcome := r.outcome;
        duplicate := r.duplicate;
        deliveries := r.deliveries;
        order_status := r.order_status;
        event_id := r.event_id;
        wakeup := r.wakeup;
        detail := r.detail;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- ---------------------------------------------------------------------------
-- Run a stored, re-verified notification through the rules again
-- (`paynotify replay --apply`; the dry run calls it in a transaction that
-- is rolled back).  Idempotent: a notification that was applied, needed
-- nothing, or is final for a human (duplicate_payment, paid_after_close,
-- conflicting_duplicate) stays as it is; one stored unknown_order,
-- amount_mismatch, txn_mismatch or flagged is applied once the order is
-- there and matches (and, if flagged, the re-verification no longer flags
-- it).  Same lock order as ingest: the notification row, then the order,
-- then the feed.
CREATE OR REPLACE FUNCTION paynotify.reapply(
    p_id bigint, p_event_kind text, p_order_id text, p_psp_txn_id text,
    p_amount_minor bigint, p_currency text, p_refund_minor bigint,
    p_refund_cumulative boolean, p_flag text, p_weak_identity boolean DEFAULT false,
    OUT outcome_before text, OUT outcome_now text, OUT order_status text,
    OUT order_id text, OUT event_id bigint, OUT wakeup text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    n          record;
    v_order_id text := p_order_id;
    a          record;
BEGIN
    -- 1. the notification row
    SELECT x.site, x.provider, x.outcome, x.order_id INTO n
      FROM paynotify.notifications x WHERE x.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'notification % does not exist', p_id;
    END IF;
    outcome_before := n.outcome;
    order_id := n.order_id;

    -- An event that needs a signed confirmation is never applied by a
    -- replay: one not settled goes (back) to pending_confirmation, for
    -- `paynotify query` to confirm (an order paid since, for instance).
    IF p_flag = 'pending_confirmation' THEN
        outcome_now := CASE WHEN n.outcome IN ('applied', 'already_applied', 'ignored',
                                               'duplicate_payment', 'paid_after_close',
                                               'conflicting_duplicate', 'refund_failed')
                            THEN n.outcome ELSE 'pending_confirmation' END;
        IF outcome_now IS DISTINCT FROM n.outcome THEN
            UPDATE paynotify.notifications x
               SET outcome = outcome_now,
                   outcome_detail = 'replayed: was ' || n.outcome
                                    || '; waits for a signed confirmation (paynotify query)'
             WHERE x.id = p_id;
        END IF;
        SELECT r.status INTO order_status FROM paynotify.order_rows(n.site) r
         WHERE r.order_id = n.order_id;
        RETURN;
    END IF;
    IF n.outcome IN ('applied', 'already_applied', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'dispute', 'complaint',
                     'combined')
       OR p_flag IS NOT NULL
       -- a dispute or complaint is no order transition: replay re-verifies it only
       OR p_event_kind IN ('dispute', 'complaint') THEN
        -- (combined: a combine payment's envelope; its sub-orders are rows of their own)
        outcome_now := CASE WHEN p_flag IS NOT NULL AND n.outcome NOT IN (
                                 'applied', 'already_applied', 'ignored', 'duplicate_payment',
                                 'paid_after_close', 'conflicting_duplicate', 'dispute',
                                 'complaint', 'combined')
                            THEN p_flag ELSE n.outcome END;
        -- nothing to apply: the order's status as it is (no lock)
        SELECT r.status INTO order_status FROM paynotify.order_rows(n.site) r
         WHERE r.order_id = n.order_id;
        RETURN;
    END IF;

    IF v_order_id IS NULL AND p_psp_txn_id IS NOT NULL THEN
        v_order_id := paynotify.order_by_txn(n.site, p_psp_txn_id);
    END IF;
    -- 2. the order row
    a := paynotify.apply_event(n.site, v_order_id, p_event_kind, n.provider, p_psp_txn_id,
                               p_amount_minor, p_currency, p_refund_minor,
                               coalesce(p_refund_cumulative, false),
                               coalesce(p_weak_identity, false));
    outcome_now := a.outcome;
    order_status := a.order_status;
    order_id := coalesce(a.order_id, n.order_id);
    IF outcome_now IS DISTINCT FROM n.outcome THEN
        UPDATE paynotify.notifications x
           SET outcome = outcome_now, order_id = coalesce(a.order_id, x.order_id),
               outcome_detail = 'replayed: was ' || n.outcome
                                || coalesce('; ' || a.detail, '')
         WHERE x.id = p_id;
    END IF;

    -- 3. the feed
    IF outcome_now IN ('applied', 'paid_after_close') THEN
        event_id := paynotify.feed_append(p_id, n.site, n.provider, order_id, p_event_kind,
                                          outcome_now, order_status, p_amount_minor, p_currency,
                                          p_refund_minor, true);
        wakeup := paynotify.wakeup_payload(event_id, p_id, n.site, n.provider, order_id,
                                           p_event_kind, order_status, true);
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------
-- Settle a stored event that waits for a signed confirmation (outcome
-- pending_confirmation: WeChat Pay v2 refund results), as `paynotify query`
-- decided from the provider's signed answer (docs/WECHATPAY.md "Refund
-- confirmation").  The caller re-derived the event from the stored raw
-- bytes and passes what it compared with the answer (p_key: the event's
-- own dedup key; order, PSP transaction, amounts); they must be the row's,
-- or nothing is done (an exception).  p_verdict:
--   confirmed      the answer confirms it: apply_event() with the weak-
--                  identity rules (an order of this site already paid with
--                  the same transaction, refunds not above what was paid),
--                  unless a row of the same event key is applied already;
--   pending        not final yet (PROCESSING, not found yet): stays
--                  pending_confirmation, p_detail recorded;
--   txn_mismatch, amount_mismatch, refund_failed
--                  the answer contradicts it: stored under that outcome with
--                  p_detail, never applied.
-- A row no longer pending (another run settled it) is left as it is.  Same
-- lock order as ingest: the notification row, the order, the feed.
CREATE OR REPLACE FUNCTION paynotify.confirm_refund(
    p_id bigint, p_key text, p_order_id text, p_psp_txn_id text, p_amount_minor bigint,
    p_refund_minor bigint, p_verdict text, p_detail text,
    OUT outcome text, OUT order_id text, OUT order_status text, OUT detail text,
    OUT event_id bigint, OUT wakeup text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    n       record;
    a       record;
    v_other bigint;
BEGIN
    -- 1. the notification row
    SELECT x.site, x.provider, x.dedup_key, x.event_kind, x.order_id, x.psp_txn_id,
           x.amount_minor, x.currency, x.refund_minor, x.refund_cumulative, x.outcome,
           x.outcome_detail
      INTO n FROM paynotify.notifications x WHERE x.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'notification % does not exist', p_id;
    END IF;
    order_id := n.order_id;
    IF n.outcome IS DISTINCT FROM 'pending_confirmation' THEN
        outcome := n.outcome;
        detail := n.outcome_detail;
        RETURN;
    END IF;
    IF n.event_kind IS DISTINCT FROM 'refund'
       OR NOT (n.dedup_key = p_key
               OR (left(n.dedup_key, 22 + length(p_key) + 1)
                       = '!pending_confirmation:' || p_key || ':'
                   AND length(n.dedup_key) = 22 + length(p_key) + 33))
       OR n.order_id IS DISTINCT FROM p_order_id OR n.psp_txn_id IS DISTINCT FROM p_psp_txn_id
       OR n.amount_minor IS DISTINCT FROM p_amount_minor
       OR n.refund_minor IS DISTINCT FROM p_refund_minor THEN
        RAISE EXCEPTION 'notification % is not the refund that was confirmed (stored %, %, %)',
                        p_id, n.dedup_key, n.order_id, n.psp_txn_id;
    END IF;

    IF p_verdict = 'pending' THEN
        UPDATE paynotify.notifications x SET outcome_detail = p_detail WHERE x.id = p_id;
        outcome := n.outcome;
        detail := p_detail;
        RETURN;
    ELSIF p_verdict IN ('txn_mismatch', 'amount_mismatch', 'refund_failed') THEN
        outcome := p_verdict;
        detail := p_detail;
        UPDATE paynotify.notifications x SET outcome = p_verdict, outcome_detail = p_detail
         WHERE x.id = p_id;
        RETURN;
    ELSIF p_verdict IS DISTINCT FROM 'confirmed' THEN
        RAISE EXCEPTION 'confirm_refund: unknown verdict %', p_verdict
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Another row of the same event already applied (its key is the
    -- event's own): once only.  (Two pending rows of one key differ in the
    -- content the answer is compared with, so only one can be confirmed.)
    SELECT x.id INTO v_other FROM paynotify.notifications x
     WHERE x.site = n.site AND x.provider = n.provider AND x.dedup_key = p_key
       AND x.id <> p_id AND x.outcome = 'applied';
    IF v_other IS NOT NULL THEN
        outcome := 'already_applied';
        detail := p_detail || '; applied before by notification ' || v_other;
        UPDATE paynotify.notifications x
           SET outcome = 'already_applied', outcome_detail = detail
         WHERE x.id = p_id;
        RETURN;
    END IF;

    -- 2. the order row: the rules of an event nothing signs as a whole
    a := paynotify.apply_event(n.site, n.order_id, n.event_kind, n.provider, n.psp_txn_id,
                               n.amount_minor, n.currency, n.refund_minor,
                               coalesce(n.refund_cumulative, false), true);
    outcome := a.outcome;
    order_id := a.order_id;
    order_status := a.order_status;
    detail := p_detail || coalesce('; ' || a.detail, '');
    UPDATE paynotify.notifications x
       SET outcome = a.outcome, order_id = coalesce(a.order_id, x.order_id),
           outcome_detail = detail
     WHERE x.id = p_id;

    -- 3. the feed
    IF outcome IN ('applied', 'paid_after_close') THEN
        event_id := paynotify.feed_append(p_id, n.site, n.provider, order_id, n.event_kind,
                                          outcome, order_status, n.amount_minor, n.currency,
                                          n.refund_minor, false);
        wakeup := paynotify.wakeup_payload(event_id, p_id, n.site, n.provider, order_id,
                                           n.event_kind, order_status, false);
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------
-- The feed's consumer interface (README "Event feed").  Plain function
-- calls, no session state: works through a transaction pooler.

-- Add a consumer group; it receives the transitions applied from now on.
-- Returns false when it already exists.
CREATE OR REPLACE FUNCTION paynotify.feed_subscribe(p_consumer text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO paynotify.feed_consumers (consumer) VALUES (p_consumer)
        ON CONFLICT (consumer) DO NOTHING;
    RETURN FOUND;
END;
$$;

-- Remove a consumer group and its unacknowledged events.  Returns how many
-- events were dropped.
CREATE OR REPLACE FUNCTION paynotify.feed_unsubscribe(p_consumer text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    DELETE FROM paynotify.feed_consumers WHERE consumer = p_consumer;
    DELETE FROM paynotify.feed WHERE consumer = p_consumer;
    GET DIAGNOSTICS v = ROW_COUNT;
    RETURN v;
END;
$$;

-- Claim up to p_max events for consumer group p_consumer, oldest first, for
-- p_lease_seconds.  At least once: an event comes back when its lease runs
-- out unacknowledged.  Ordered per order: an event is handed out only when
-- every earlier event of the same order has been acknowledged (so a batch
-- holds at most one event per order).  Concurrent claimers of one group
-- never get the same event while its lease runs (FOR UPDATE SKIP LOCKED).
-- Fenced (schema 12): each call draws one lease token (a random uuid),
-- stored on every event it claims and returned as lease_token; only
-- ack_events() with that token acknowledges them, so once an event has
-- been claimed again, the earlier claimer's acknowledgement is refused.
CREATE OR REPLACE FUNCTION paynotify.claim_events(
    p_consumer text, p_max integer, p_lease_seconds integer DEFAULT 60)
RETURNS TABLE (event_id bigint, site text, provider text, order_id text,
               notification_id bigint, event_kind text, outcome text, order_status text,
               amount_minor bigint, currency text, refund_minor bigint, replayed boolean,
               created_at timestamptz, claims integer, lease_token uuid)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_token uuid := gen_random_uuid();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM paynotify.feed_consumers c WHERE c.consumer = p_consumer) THEN
        RAISE EXCEPTION 'unknown feed consumer "%" (add it with paynotify.feed_subscribe())',
                        p_consumer USING ERRCODE = 'undefined_object';
    END IF;
    IF p_max IS NULL OR p_max < 1 OR p_max > 10000 THEN
        RAISE EXCEPTION 'claim_events: max must be 1 to 10000, not %', p_max
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
        RAISE EXCEPTION 'claim_events: lease must be 1 to 86400 seconds, not %', p_lease_seconds
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH pick AS (
        SELECT f.consumer, f.event_id
          FROM paynotify.feed f
         WHERE f.consumer = p_consumer
           AND (f.lease_until IS NULL OR f.lease_until < clock_timestamp())
           AND NOT EXISTS (SELECT 1 FROM paynotify.feed e
                            WHERE e.consumer = f.consumer AND e.site = f.site
                              AND e.order_id = f.order_id AND e.event_id < f.event_id)
         ORDER BY f.event_id
         LIMIT p_max
           FOR UPDATE OF f SKIP LOCKED
    ), claimed AS (
        UPDATE paynotify.feed f
           SET lease_until = clock_timestamp() + make_interval(secs => p_lease_seconds),
               claims = f.claims + 1, lease_token = v_token
          FROM pick
         WHERE f.consumer = pick.consumer AND f.event_id = pick.event_id
        RETURNING f.event_id, f.site, f.provider, f.order_id, f.notification_id, f.event_kind,
                  f.outcome, f.order_status, f.amount_minor, f.currency, f.refund_minor,
                  f.replayed, f.created_at, f.claims, f.lease_token
    )
    SELECT * FROM claimed ORDER BY event_id;
END;
$$;

-- Acknowledge claimed events (done with them): those of p_ids whose current
-- lease is p_lease_token (the token claim_events() returned with them) are
-- deleted for this group.  Returns how many were acknowledged.
--   - An id whose event is still in the feed under another lease (claimed
--     again since: this caller's lease ran out) or never claimed is
--     REFUSED: not deleted, added to feed_consumers.stale_acks (and
--     last_stale_ack_at) and named in a WARNING.  Its current claimer acks it.
--   - An id no longer in the feed (already acknowledged, by this token or
--     by a later claimer, or never an event of this group) is not counted
--     either way: nothing is out any more.
--   - A token whose lease ran out while nobody claimed the events again
--     still acknowledges them: no one else has been handed them.
--   - Without a token (the form before schema 12) the call is an error:
--     the caller cannot be told from a later claimer.  No ids (NULL or
--     empty, as array_agg over an empty claim gives): 0, whatever the token.
-- Against a concurrent claim the row lock decides: a claim that committed
-- first has changed the token, and the DELETE (re-checked on the new row
-- version) leaves the row alone.
CREATE OR REPLACE FUNCTION paynotify.ack_events(
    p_consumer text, p_ids bigint[], p_lease_token uuid DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_acked   integer;
    v_refused integer;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN 0;       -- an empty batch (array_agg of no rows is NULL)
    END IF;
    IF p_lease_token IS NULL THEN
        RAISE EXCEPTION 'ack_events: the lease_token that claim_events returned is required '
                        '(schema 12): paynotify.ack_events(consumer, ids, lease_token)'
              USING ERRCODE = 'null_value_not_allowed',
                    HINT = 'docs/OPERATIONS.md, upgrading to schema 12: a consumer passes the '
                           'lease_token column of its claim back with its acknowledgement';
    END IF;
    WITH d AS (
        DELETE FROM paynotify.feed f
         WHERE f.consumer = p_consumer AND f.event_id = ANY (p_ids)
           AND f.lease_token = p_lease_token
        RETURNING 1)
    SELECT count(*)::integer INTO v_acked FROM d;
    SELECT count(*)::integer INTO v_refused
      FROM paynotify.feed f
     WHERE f.consumer = p_consumer AND f.event_id = ANY (p_ids)
       AND f.lease_token IS DISTINCT FROM p_lease_token;
    IF v_refused > 0 THEN
        UPDATE paynotify.feed_consumers c
           SET stale_acks = c.stale_acks + v_refused, last_stale_ack_at = now()
         WHERE c.consumer = p_consumer;
        RAISE WARNING 'ack_events: % event(s) of consumer "%" refused: not held under this '
                      'lease_token (claimed again after its lease ran out, or never claimed)',
                      v_refused, p_consumer;
    END IF;
    RETURN v_acked;
END;
$$;

-- ---------------------------------------------------------------------------
-- The follow-up schedule (sql/017; docs/QUERY.md "Follow-up schedule"):
-- `paynotify query --due`.  Nothing here is on the receivers' path: rows are
-- made by the shop's INSERT of an order (the trigger) and by the sweep,
-- never by ingest().

-- How long after the n-th ask the next one comes (n = 0: after the order
-- was created): 1, 2, 5, 10, 30 minutes, then hourly.
CREATE OR REPLACE FUNCTION paynotify.follow_up_delay(p_attempts integer) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_attempts <= 0 THEN interval '1 minute'
                WHEN p_attempts = 1 THEN interval '2 minutes'
                WHEN p_attempts = 2 THEN interval '5 minutes'
                WHEN p_attempts = 3 THEN interval '10 minutes'
                WHEN p_attempts = 4 THEN interval '30 minutes'
                ELSE interval '1 hour' END
$$;

-- The shop inserted orders: a pending one is asked about a minute later
-- (and then by the backoff) unless its notification comes first.  Once per
-- statement, over its inserted rows (a transition table: a bulk INSERT of
-- many orders is one INSERT here, not one call per row).  SECURITY DEFINER
-- (owned by the schema's owner, a fixed search_path): the shop's role
-- needs no right on follow_ups, and an upgrade cannot make the shop's
-- INSERT fail for want of a grant.
CREATE OR REPLACE FUNCTION paynotify.follow_up_new_order() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO paynotify.follow_ups (site, order_id, ref, starts_at, next_ask_at)
    SELECT n.site, n.order_id, 0, n.created_at, n.created_at + paynotify.follow_up_delay(0)
      FROM new_orders n
     WHERE n.status = 'pending'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
CREATE OR REPLACE TRIGGER follow_up_new_order AFTER INSERT ON paynotify.orders
    REFERENCING NEW TABLE AS new_orders
    FOR EACH STATEMENT EXECUTE FUNCTION paynotify.follow_up_new_order();

-- Before a run claims: (1) delete the rows with nothing left to ask about
-- (the order is no longer pending and has no payment waiting for a
-- confirmation: it became final by a notification or an earlier answer, or
-- was deleted; a refund's confirmation was settled; a finished row older
-- than the window), never one another run holds: the due ones (so that none
-- is asked about) and the finished ones, each through its partial index; a
-- scheduled row that is not due yet waits until it is; (2) at most every 15
-- minutes (the first run after, for all sites; a run for one site, always,
-- that site's), add the pending orders created within the window that have
-- no row (made before schema 17, or inserted with triggers off): a read of
-- the whole orders table, which the trigger makes a safety net; (3) the
-- orders with a payment stored pending_confirmation within the window (a
-- legacy 2C2P form: its order's answer confirms it, whatever the order's
-- status; a finished row of the order asked before that form came is
-- scheduled again) and (4) the refunds stored pending_confirmation within
-- the window (their refund query), both through that outcome's partial
-- index.  p_window_seconds: the longest horizon of the configuration.
CREATE OR REPLACE FUNCTION paynotify.follow_up_sweep(
    p_site text, p_window_seconds bigint, OUT added integer, OUT dropped integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_since timestamptz := now() - make_interval(secs => p_window_seconds);
    v       integer;
    v_full  boolean;
BEGIN
    WITH d AS (
        DELETE FROM paynotify.follow_ups f
         WHERE (p_site IS NULL OR f.site = p_site)
           AND ((f.state = 'scheduled' AND f.next_ask_at <= now()
                 AND (f.claimed_until IS NULL OR f.claimed_until <= now()))
                OR f.state <> 'scheduled')
           AND ((f.ref = 0
                 AND NOT EXISTS (SELECT 1 FROM paynotify.orders o
                                  WHERE o.site = f.site AND o.order_id = f.order_id
                                    AND o.status = 'pending')
                 AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n
                                  WHERE n.site = f.site AND n.order_id = f.order_id
                                    AND n.outcome = 'pending_confirmation'
                                    AND n.event_kind = 'paid'))
             OR (f.ref > 0
                 AND NOT EXISTS (SELECT 1 FROM paynotify.notifications n
                                  WHERE n.id = f.ref AND n.outcome = 'pending_confirmation'))
             OR (f.state <> 'scheduled' AND f.starts_at < v_since))
        RETURNING 1)
    SELECT count(*)::integer INTO dropped FROM d;

    added := 0;
    IF p_site IS NOT NULL THEN
        v_full := true;
    ELSE
        UPDATE paynotify.follow_up_sweeps s SET full_at = now()
         WHERE s.full_at < now() - interval '15 minutes';
        v_full := FOUND;
    END IF;
    IF v_full THEN
        INSERT INTO paynotify.follow_ups (site, order_id, ref, starts_at, next_ask_at)
        SELECT o.site, o.order_id, 0, o.created_at, o.created_at + paynotify.follow_up_delay(0)
          FROM paynotify.orders o
         WHERE o.status = 'pending' AND o.created_at > v_since
           AND (p_site IS NULL OR o.site = p_site)
           AND NOT EXISTS (SELECT 1 FROM paynotify.follow_ups f
                            WHERE f.site = o.site AND f.order_id = o.order_id AND f.ref = 0)
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS v = ROW_COUNT;
        added := v;
    END IF;

    INSERT INTO paynotify.follow_ups AS f (site, order_id, ref, starts_at, next_ask_at)
    SELECT n.site, n.order_id, 0, max(n.received_at),
           max(n.received_at) + paynotify.follow_up_delay(0)
      FROM paynotify.notifications n
     WHERE n.outcome = 'pending_confirmation' AND n.event_kind = 'paid'
       AND n.received_at > v_since AND n.order_id IS NOT NULL
       AND (p_site IS NULL OR n.site = p_site)
       AND EXISTS (SELECT 1 FROM paynotify.orders o
                    WHERE o.site = n.site AND o.order_id = n.order_id)
     GROUP BY n.site, n.order_id
    ON CONFLICT (site, order_id, ref) DO UPDATE
       SET state = 'scheduled', starts_at = EXCLUDED.starts_at,
           next_ask_at = EXCLUDED.next_ask_at, attempts = 0
     WHERE f.state <> 'scheduled' AND f.last_asked_at < EXCLUDED.starts_at;
    GET DIAGNOSTICS v = ROW_COUNT;
    added := added + v;

    INSERT INTO paynotify.follow_ups (site, order_id, ref, starts_at, next_ask_at)
    SELECT n.site, coalesce(n.order_id, ''), n.id, n.received_at,
           n.received_at + paynotify.follow_up_delay(0)
      FROM paynotify.notifications n
     WHERE n.outcome = 'pending_confirmation' AND n.event_kind = 'refund'
       AND n.received_at > v_since AND (p_site IS NULL OR n.site = p_site)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v = ROW_COUNT;
    added := added + v;
END;
$$;

-- Claim the row due longest, unclaimed (or whose claimer's lease ran out):
-- FOR UPDATE SKIP LOCKED, so that two runs (hosts, timers) never take the
-- same row, and a lease of p_lease_seconds with a new token.  No row: none
-- is due.  (A row another run claimed between this statement's snapshot and
-- its lock fails the re-check and the LIMIT then yields nothing: tried
-- again while any row is due and free.)
CREATE OR REPLACE FUNCTION paynotify.follow_up_claim(
    p_site text, p_lease_seconds integer, p_claimer text)
RETURNS TABLE (site text, order_id text, ref bigint, attempts integer, starts_at timestamptz,
               next_ask_at timestamptz, claim_token uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_token uuid := gen_random_uuid();
    v_try   integer;
BEGIN
    FOR v_try IN 1..5 LOOP
        RETURN QUERY
        WITH c AS (
            SELECT f.site, f.order_id, f.ref FROM paynotify.follow_ups f
             WHERE f.state = 'scheduled' AND f.next_ask_at <= now()
               AND (f.claimed_until IS NULL OR f.claimed_until <= now())
               AND (p_site IS NULL OR f.site = p_site)
             ORDER BY f.next_ask_at
             LIMIT 1
             FOR UPDATE SKIP LOCKED)
        UPDATE paynotify.follow_ups f
           SET claim_token = v_token, claimed_by = p_claimer,
               claimed_until = clock_timestamp() + make_interval(secs => p_lease_seconds)
          FROM c
         WHERE f.site = c.site AND f.order_id = c.order_id AND f.ref = c.ref
        RETURNING f.site, f.order_id, f.ref, f.attempts, f.starts_at, f.next_ask_at,
                  f.claim_token;
        IF FOUND THEN
            RETURN;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM paynotify.follow_ups f
                        WHERE f.state = 'scheduled' AND f.next_ask_at <= now()
                          AND (f.claimed_until IS NULL OR f.claimed_until <= now())
                          AND (p_site IS NULL OR f.site = p_site)) THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;

-- Record the answer to a claimed row (only under its claim's token: a run
-- whose lease ran out and whose row another run claimed records nothing).
-- Final: done.  Otherwise asked again after follow_up_delay(attempts), at
-- the latest at the horizon (starts_at + p_horizon_seconds), and expired
-- once asked at or after it.  Returns the row's new state, or nothing.
CREATE OR REPLACE FUNCTION paynotify.follow_up_answered(
    p_site text, p_order_id text, p_ref bigint, p_token uuid, p_answer text, p_result text,
    p_final boolean, p_horizon_seconds bigint,
    OUT state text, OUT next_ask_at timestamptz, OUT attempts integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_horizon interval := make_interval(secs => p_horizon_seconds);
BEGIN
    UPDATE paynotify.follow_ups f
       SET attempts = f.attempts + 1, last_asked_at = now(),
           last_answer = left(p_answer, 200), last_result = left(p_result, 100),
           claim_token = NULL, claimed_by = NULL, claimed_until = NULL,
           state = CASE WHEN p_final THEN 'done'
                        WHEN now() >= f.starts_at + v_horizon THEN 'expired'
                        ELSE 'scheduled' END,
           next_ask_at = CASE WHEN p_final OR now() >= f.starts_at + v_horizon
                              THEN f.next_ask_at
                              ELSE least(now() + paynotify.follow_up_delay(f.attempts + 1),
                                         f.starts_at + v_horizon) END
     WHERE f.site = p_site AND f.order_id = p_order_id AND f.ref = p_ref
       AND f.claim_token = p_token
    RETURNING f.state, f.next_ask_at, f.attempts INTO state, next_ask_at, attempts;
END;
$$;

-- ---------------------------------------------------------------------------
-- `paynotify confirm` (sql/018): the right to ask the provider about one
-- order, at most once per p_min_interval_s over every worker and host.
-- True: this caller asks (the row is new, or its last ask is older than the
-- interval, and is now); false: someone asked within the interval, or is
-- asking now (a concurrent claim waits for the other's row, then sees it
-- fresh).  Never on the receivers' path.
CREATE OR REPLACE FUNCTION paynotify.confirm_claim(
    p_site text, p_order_id text, p_min_interval_s integer)
RETURNS boolean
LANGUAGE sql AS $$
    WITH c AS (
        INSERT INTO paynotify.confirm_asks AS a (site, order_id, asked_at)
        VALUES (p_site, p_order_id, now())
        ON CONFLICT (site, order_id) DO UPDATE
           SET asked_at = now(), asks = a.asks + 1
         WHERE a.asked_at < now() - make_interval(secs => p_min_interval_s)
        RETURNING true AS claimed)
    SELECT coalesce((SELECT claimed FROM c), false);
$$;

-- `paynotify confirm` (sql/018): one order of one site as the shop keeps it,
-- through order_rows() (a shop with its own table, docs/SHOP-ORDERS.md, is
-- answered from it; the stock order_rows() is one SELECT, inlined here: an
-- index probe).  SECURITY DEFINER (the schema's owner, a fixed search_path):
-- confirm connects with the receivers' login, which gets EXECUTE on this
-- one-order read and not on order_rows(), whose every-order listing is
-- `paynotify report`'s (the admin login's).
CREATE OR REPLACE FUNCTION paynotify.confirm_order(p_site text, p_order_id text)
RETURNS TABLE (site text, order_id text, status text, amount_minor bigint, currency text,
               psp text, psp_txn_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.site, o.order_id, o.status, o.amount_minor, o.currency, o.psp, o.psp_txn_id
      FROM paynotify.order_rows(p_site) o
     WHERE o.site = p_site AND o.order_id = p_order_id;
$$;

-- The site's replacements back in place of ours (see the top of the file).
DO $restore$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS kept, p.proname,
                    pg_get_function_identity_arguments(p.oid) AS args
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'paynotify_site_kept'
    LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS paynotify.%I(%s)', f.proname, f.args);
        EXECUTE format('ALTER FUNCTION %s SET SCHEMA paynotify', f.kept);
    END LOOP;
    -- A site that replaced order_lock() or order_update() (the orders live
    -- elsewhere) but not order_pay(), which came later (schema 8): ours
    -- would write paynotify.orders, so it declines instead (the general
    -- path then uses the site's functions).
    IF EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'paynotify' AND p.proname IN ('order_lock', 'order_update')
                  AND obj_description(p.oid, 'pg_proc') LIKE 'site:%')
       AND NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                        WHERE n.nspname = 'paynotify' AND p.proname = 'order_pay'
                          AND obj_description(p.oid, 'pg_proc') LIKE 'site:%') THEN
        CREATE OR REPLACE FUNCTION paynotify.order_pay(
            p_site text, p_order_id text, p_amount_minor bigint, p_currency text, p_psp text,
            p_psp_txn_id text)
        RETURNS boolean
        LANGUAGE sql AS 'SELECT false';
        COMMENT ON FUNCTION paynotify.order_pay(text, text, bigint, text, text, text) IS
            'declines: this site replaced order_lock/order_update but not order_pay';
    END IF;
END;
$restore$;
DROP SCHEMA paynotify_site_kept;

COMMIT;

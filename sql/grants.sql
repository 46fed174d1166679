-- paynotify grants: what each role may do on the schema's objects, as one
-- list.  `paynotify migrate` applies this file after functions.sql on every
-- run, as the schema's owner, once the roles of sql/roles.sql exist (a
-- database without them is left alone: migrate says so).  By hand, as
-- the owner:
--     psql -v ON_ERROR_STOP=1 -f sql/grants.sql
--
-- Exact and idempotent: in one transaction, every privilege the three
-- roles hold on the schema's tables, sequences and functions is revoked,
-- and the list below is granted.  Nothing else is touched (the shop's own
-- grants stay).  EXECUTE is revoked from PUBLIC (PostgreSQL's default
-- grants it on every new function).
--
-- EVERY table, sequence and function of schema paynotify is on the list,
-- once per role that may use it, or once with role NULL (only its owner
-- uses it).  A new object (a migration's table, a function of
-- functions.sql) adds its lines here; an object that is not on the list
-- makes migrate warn, and tests/integration/test_grants.py fails.  A name
-- on the list that does not exist is an error.  Functions are named
-- without their arguments: every function of that name is granted.
--
-- Why each right (derived from what each command's SQL does;
-- docs/DATABASE.md "What each grant is for"):
--   receivers   ingest()/ingest_combined() and what they call: insert a
--               notification or count a duplicate, lock (FOR UPDATE needs
--               UPDATE) and move the order, record a case, append to the
--               feed (feed_event_seq) for each subscribed consumer;
--               `paynotify confirm` connects as the receivers do: it reads
--               one order with confirm_order() (SECURITY DEFINER, through
--               order_rows()) and claims an ask with confirm_claim()
--   admin       a member of paynotify_receiver (query and reconcile --apply
--               ingest as the receivers do; resolve writes the resolution
--               columns with the receivers' table-wide UPDATE), and:
--               check-config reads schema_version; report runs order_rows();
--               replay --apply runs reapply(); query records its runs
--               (query_runs_id_seq) and settles refunds with confirm_refund();
--               purge copies and DELETEs notifications (its batch table needs
--               TEMPORARY on the database: roles.sql); stats reads the feed
--   consumer    claim_events() locks and leases feed rows (UPDATE),
--               ack_events() deletes them and counts a refused (stale)
--               acknowledgement in two columns of feed_consumers

BEGIN;

REVOKE ALL ON SCHEMA paynotify FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA paynotify FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA paynotify REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA paynotify
    FROM PUBLIC, paynotify_receiver, paynotify_admin, paynotify_consumer;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA paynotify
    FROM PUBLIC, paynotify_receiver, paynotify_admin, paynotify_consumer;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA paynotify
    FROM paynotify_receiver, paynotify_admin, paynotify_consumer;
GRANT USAGE ON SCHEMA paynotify TO paynotify_receiver, paynotify_admin, paynotify_consumer;

DO $grants$
DECLARE
    -- the list: name, kind, role (NULL: the owner only), privileges
    list text[] := ARRAY[
        -- tables
        ['schema_version',        'table',    'paynotify_admin',    'SELECT'],
        ['orders',                'table',    'paynotify_receiver', 'SELECT, UPDATE'],
        -- UPDATE: the columns ingest()/ingest_combined() write (a duplicate's count,
        -- an outcome's correction, a combine payment's parent); not the resolution
        -- columns, which only `paynotify resolve` writes
        ['notifications',         'table',    'paynotify_receiver',
         'SELECT, INSERT, UPDATE (deliveries, last_delivery_at, order_id, outcome, '
         'outcome_detail, parent_id)'],
        ['notifications',         'table',    'paynotify_admin',
         'DELETE, UPDATE (resolved_at, resolved_by, resolution_note, resolved_outcome)'],
        ['cases',                 'table',    'paynotify_receiver', 'SELECT, INSERT, UPDATE'],
        ['feed_consumers',        'table',    'paynotify_receiver', 'SELECT'],
        ['feed_consumers',        'table',    'paynotify_consumer',
         'SELECT (consumer, stale_acks), UPDATE (stale_acks, last_stale_ack_at)'],
        ['feed',                  'table',    'paynotify_receiver', 'INSERT'],
        ['feed',                  'table',    'paynotify_admin',    'SELECT'],
        ['feed',                  'table',    'paynotify_consumer', 'SELECT, UPDATE, DELETE'],
        ['query_runs',            'table',    'paynotify_admin',    'SELECT, INSERT'],
        -- the follow-up schedule (schema 17): query --due --apply sweeps, claims
        -- and answers; stats reads it.  The shop's INSERT of an order fires
        -- follow_up_new_order(), SECURITY DEFINER: the shop needs nothing here
        ['follow_ups',            'table',    'paynotify_admin',    'SELECT, INSERT, UPDATE, DELETE'],
        ['follow_up_sweeps',      'table',    'paynotify_admin',    'SELECT, UPDATE'],
        -- paynotify confirm's rate limit (schema 18): confirm connects as the
        -- receivers do and claims an ask with confirm_claim(); purge deletes
        -- the old rows
        ['confirm_asks',          'table',    'paynotify_receiver', 'SELECT, INSERT, UPDATE'],
        ['confirm_asks',          'table',    'paynotify_admin',    'SELECT, DELETE'],
        -- sequences
        ['feed_event_seq',        'sequence', 'paynotify_receiver', 'USAGE'],
        ['query_runs_id_seq',     'sequence', 'paynotify_admin',    'USAGE'],
        -- an identity column's: INSERT needs no grant on it
        ['notifications_id_seq',  'sequence', NULL,                 NULL],
        -- functions (EXECUTE)
        ['ingest',                'function', 'paynotify_receiver', 'EXECUTE'],
        ['ingest_combined',       'function', 'paynotify_receiver', 'EXECUTE'],
        ['apply_event',           'function', 'paynotify_receiver', 'EXECUTE'],
        ['order_lock',            'function', 'paynotify_receiver', 'EXECUTE'],
        ['order_update',          'function', 'paynotify_receiver', 'EXECUTE'],
        ['order_pay',             'function', 'paynotify_receiver', 'EXECUTE'],
        ['order_by_txn',          'function', 'paynotify_receiver', 'EXECUTE'],
        ['feed_append',           'function', 'paynotify_receiver', 'EXECUTE'],
        ['wakeup_payload',        'function', 'paynotify_receiver', 'EXECUTE'],
        ['notify_enabled',        'function', 'paynotify_receiver', 'EXECUTE'],
        ['money_text',            'function', 'paynotify_receiver', 'EXECUTE'],
        ['case_record',           'function', 'paynotify_receiver', 'EXECUTE'],
        ['reapply',               'function', 'paynotify_admin',    'EXECUTE'],
        ['order_rows',            'function', 'paynotify_admin',    'EXECUTE'],
        ['confirm_refund',        'function', 'paynotify_admin',    'EXECUTE'],
        ['follow_up_delay',       'function', 'paynotify_admin',    'EXECUTE'],
        ['follow_up_sweep',       'function', 'paynotify_admin',    'EXECUTE'],
        ['follow_up_claim',       'function', 'paynotify_admin',    'EXECUTE'],
        ['follow_up_answered',    'function', 'paynotify_admin',    'EXECUTE'],
        ['confirm_claim',         'function', 'paynotify_receiver', 'EXECUTE'],
        ['confirm_order',         'function', 'paynotify_receiver', 'EXECUTE'],
        -- the trigger function of the shop's INSERT (SECURITY DEFINER)
        ['follow_up_new_order',   'function', NULL,                 NULL],
        ['claim_events',          'function', 'paynotify_consumer', 'EXECUTE'],
        ['ack_events',            'function', 'paynotify_consumer', 'EXECUTE'],
        -- the owner adds and removes consumer groups
        ['feed_subscribe',        'function', NULL,                 NULL],
        ['feed_unsubscribe',      'function', NULL,                 NULL]
    ];
    g text[];
    f regprocedure;
    missing text;
BEGIN
    FOREACH g SLICE 1 IN ARRAY list LOOP
        IF g[2] IN ('table', 'sequence') THEN
            IF to_regclass(format('paynotify.%I', g[1])) IS NULL THEN
                RAISE EXCEPTION 'grants.sql names % paynotify.%, which does not exist',
                    g[2], g[1];
            END IF;
            IF g[3] IS NOT NULL THEN
                EXECUTE format('GRANT %s ON %s paynotify.%I TO %I', g[4], upper(g[2]), g[1],
                               g[3]);
            END IF;
        ELSE
            IF NOT EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = 'paynotify'::regnamespace
                                                   AND proname = g[1]) THEN
                RAISE EXCEPTION 'grants.sql names function paynotify.%, which does not exist',
                    g[1];
            END IF;
            IF g[3] IS NOT NULL THEN
                FOR f IN SELECT oid::regprocedure FROM pg_proc
                          WHERE pronamespace = 'paynotify'::regnamespace AND proname = g[1]
                LOOP
                    EXECUTE format('GRANT %s ON FUNCTION %s TO %I', g[4], f, g[3]);
                END LOOP;
            END IF;
        END IF;
    END LOOP;

    -- what the list does not name: only its owner can use it; say so
    SELECT string_agg(o, ', ' ORDER BY o) INTO missing FROM (
        SELECT 'paynotify.' || c.relname AS o FROM pg_class c
         WHERE c.relnamespace = 'paynotify'::regnamespace
           AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f')
           AND NOT EXISTS (SELECT 1 FROM generate_subscripts(list, 1) i
                            WHERE list[i][1] = c.relname AND list[i][2] <> 'function')
        UNION
        SELECT 'paynotify.' || p.proname || '()' FROM pg_proc p
         WHERE p.pronamespace = 'paynotify'::regnamespace
           AND NOT EXISTS (SELECT 1 FROM generate_subscripts(list, 1) i
                            WHERE list[i][1] = p.proname AND list[i][2] = 'function')) AS m;
    IF missing IS NOT NULL THEN
        RAISE WARNING 'no grant is decided for %: only the owner can use it', missing
            USING HINT = 'Add it to the list of sql/grants.sql.';
    END IF;
END;
$grants$;

COMMIT;

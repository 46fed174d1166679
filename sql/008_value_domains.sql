-- paynotify schema, version 8: the checked columns are domains.
--
-- notifications.event_kind, notifications.outcome, notifications.source and
-- orders.status, amount_minor, refunded_minor and currency keep exactly the
-- values they allowed (README "Storage"), and stay text or bigint to every
-- client (PostgreSQL sends a domain's base type); the check moves from the
-- table to the column's type:
--
--   paynotify.event_kind     paid refund closed failed pending ignored
--   paynotify.outcome        the outcomes of README "Outcomes"
--   paynotify.source         notification query statement
--   paynotify.order_status   pending paid partially_refunded refunded closed failed
--   paynotify.minor_units    bigint >= 0 (orders.amount_minor, refunded_minor)
--   paynotify.currency_code  three upper-case letters (orders.currency)
--
-- Why: PostgreSQL re-reads a table's CHECK constraints from their stored
-- text at the start of every INSERT or UPDATE that can touch the table
-- (four IN-lists and three more checks here, ~8 kB of node text); a domain's constraints are
-- read once per session.  That was a quarter of PostgreSQL's instructions
-- per notification (docs/PERFORMANCE.md, "The work per notification
-- inside PostgreSQL").  A value outside the list is still refused, by the
-- domain ("value for domain paynotify.outcome violates check constraint
-- ...") instead of the table's constraint.
--
-- The columns change type to a domain without a constraint first (binary
-- compatible: no rewrite of the table), the constraints are added NOT VALID
-- and then validated (one read of each table, inside this transaction).

BEGIN;

CREATE DOMAIN paynotify.event_kind AS text;
CREATE DOMAIN paynotify.outcome AS text;
CREATE DOMAIN paynotify.source AS text;
CREATE DOMAIN paynotify.order_status AS text;
CREATE DOMAIN paynotify.minor_units AS bigint;
CREATE DOMAIN paynotify.currency_code AS text;

ALTER TABLE paynotify.notifications
    DROP CONSTRAINT notifications_event_kind_check,
    DROP CONSTRAINT notifications_outcome_check,
    DROP CONSTRAINT notifications_source_check,
    ALTER COLUMN event_kind TYPE paynotify.event_kind,
    ALTER COLUMN outcome TYPE paynotify.outcome,
    ALTER COLUMN source TYPE paynotify.source;
ALTER TABLE paynotify.orders
    DROP CONSTRAINT orders_status_check,
    DROP CONSTRAINT orders_amount_minor_check,
    DROP CONSTRAINT orders_refunded_minor_check,
    DROP CONSTRAINT orders_currency_check,
    ALTER COLUMN status TYPE paynotify.order_status,
    ALTER COLUMN amount_minor TYPE paynotify.minor_units,
    ALTER COLUMN refunded_minor TYPE paynotify.minor_units,
    ALTER COLUMN currency TYPE paynotify.currency_code;

ALTER DOMAIN paynotify.event_kind ADD CONSTRAINT event_kind_check
    CHECK (VALUE IN ('paid', 'refund', 'closed', 'failed', 'pending', 'ignored')) NOT VALID;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch')) NOT VALID;
ALTER DOMAIN paynotify.source ADD CONSTRAINT source_check
    CHECK (VALUE IN ('notification', 'query', 'statement')) NOT VALID;
ALTER DOMAIN paynotify.order_status ADD CONSTRAINT order_status_check
    CHECK (VALUE IN ('pending', 'paid', 'partially_refunded', 'refunded', 'closed',
                     'failed')) NOT VALID;
ALTER DOMAIN paynotify.minor_units ADD CONSTRAINT minor_units_check
    CHECK (VALUE >= 0) NOT VALID;
ALTER DOMAIN paynotify.currency_code ADD CONSTRAINT currency_code_check
    CHECK (VALUE ~ '^[A-Z]{3}$') NOT VALID;

ALTER DOMAIN paynotify.event_kind VALIDATE CONSTRAINT event_kind_check;
ALTER DOMAIN paynotify.outcome VALIDATE CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.source VALIDATE CONSTRAINT source_check;
ALTER DOMAIN paynotify.order_status VALIDATE CONSTRAINT order_status_check;
ALTER DOMAIN paynotify.minor_units VALIDATE CONSTRAINT minor_units_check;
ALTER DOMAIN paynotify.currency_code VALIDATE CONSTRAINT currency_code_check;

INSERT INTO paynotify.schema_version (version) VALUES (8);

COMMIT;

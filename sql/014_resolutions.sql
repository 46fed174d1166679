-- paynotify schema, version 14: a person can acknowledge what `paynotify
-- report` lists (issue 24, item 7).  Follows version 13
-- (013_pending_confirmation.sql).
--
-- A shared Stripe account or Alipay app stores the other merchant's genuine
-- events as merchant_mismatch, as it should: a person must see them once.
-- Until now nothing could take such a row off `report`, so `report` (and
-- `purge`, which keeps every unresolved row) never exited 0.
-- `paynotify resolve` records who, when and why on each row:
--
--   resolved_at       when (the database's now() of the resolving transaction)
--   resolved_by       who: the database role (current_user, authenticated)
--                     and, when the environment names one, the login that
--                     ran the command ($SUDO_USER, else $USER; self-reported):
--                     "paynotify_admin (alice)"
--   resolution_note   why (--note, 1..1000 bytes)
--   resolved_outcome  the outcome the person looked at.  A resolution holds
--                     only while the row's outcome is still that one: when
--                     `replay --apply` or `query` later gives the row another
--                     outcome, `report` lists it again and `purge` keeps it
--                     (no trigger rewrites the audit columns; the receiver
--                     role never writes them).
--
-- The four are set together or not at all (CHECK).  Nothing is backfilled.
-- The admin role needs UPDATE on these columns (docs/DATABASE.md grants).

BEGIN;

ALTER TABLE paynotify.notifications
    ADD COLUMN resolved_at timestamptz,
    ADD COLUMN resolved_by text,
    ADD COLUMN resolution_note text,
    ADD COLUMN resolved_outcome paynotify.outcome;

ALTER TABLE paynotify.notifications
    ADD CONSTRAINT notifications_resolution_check
    CHECK ((resolved_at IS NULL AND resolved_by IS NULL AND resolution_note IS NULL
            AND resolved_outcome IS NULL)
        OR (resolved_at IS NOT NULL AND resolved_by IS NOT NULL
            AND resolution_note IS NOT NULL AND resolved_outcome IS NOT NULL
            AND octet_length(resolution_note) BETWEEN 1 AND 1000
            AND octet_length(resolved_by) BETWEEN 1 AND 300));

INSERT INTO paynotify.schema_version (version) VALUES (14);

COMMIT;

-- paynotify schema, version 16: a re-delivery's counter update stays HOT and
-- logs ~40 bytes; less WAL and CPU per new notification (issue 25,
-- docs/PERFORMANCE.md "Round 3").
--
-- A re-delivery counts itself in its stored row (deliveries + 1,
-- last_delivery_at = now()).  Until now that UPDATE rewrote a ~1.3 kB row
-- (the ~1.1 kB raw body is stored inline: PostgreSQL TOASTs only rows above
-- 2 kB), and logged it again: the pages were full (fillfactor 100), so most
-- new versions went to another page with a new entry in each of four
-- B-trees, and even a HOT update's WAL record carried the raw body (the
-- record leaves out only the unchanged prefix and suffix of the row, and
-- raw_body lay between deliveries, column 17, and last_delivery_at).
-- ~1.5 kB of WAL per duplicate, as much as a new notification.
--
--  1. deliveries becomes the table's last column (same name, type, default
--     and values): a re-delivery then changes only bytes after the raw body
--     (last_delivery_at ... deliveries), and its WAL record is those ~40
--     bytes.  Columns added by later migrations come after it and widen that
--     record by their size: keep large ones out of the changed span.
--     Clients that name their columns see no change; `SELECT *` and purge
--     archives list deliveries last (docs/OPERATIONS.md, restoring an
--     archive written before schema 16).  Rows with deliveries 1 (most) are
--     not touched; the others are updated once here.
--  2. fillfactor = 70: room on every page for the new versions of its
--     rows, so that the counter update is HOT (no new entry in any index).
--  3. notifications_received_idx becomes a BRIN index: received_at only
--     grows with the physical order of an append-mostly table, every reader
--     asks for a range (purge, replay --since/--until, report, reconcile,
--     query), and a B-tree entry per new notification was WAL and CPU on
--     the hot path for none of them.
--  4. notifications_resolution_check (schema 14) is a table CHECK, and
--     PostgreSQL parses a table CHECK's stored node text again at the start
--     of every INSERT or UPDATE of the table (ExecRelCheck, stringToNode;
--     docs/PERFORMANCE.md, schema 8): ~135,000 instructions per ingest,
--     a quarter of a duplicate's.  The byte limits go into two domains
--     (paynotify.resolution_note, 1..1000 bytes; paynotify.resolved_by,
--     1..300 bytes; compiled once per session) and the CHECK keeps only
--     "all four set or none", as num_nulls(...) IN (0, 4): the same rows
--     allowed, a node text a fraction of the size.
--
-- Not done, and why (docs/PERFORMANCE.md): moving the raw body out of the
-- row.  PostgreSQL 15 TOASTs a row only above its fixed 2 kB threshold,
-- whatever toast_tuple_target and the column's storage say (measured: a
-- 1.1 kB body stays inline with toast_tuple_target = 256); a table of its
-- own would change every reader of raw_body.
--
-- The table is not rewritten: the fillfactor applies to pages filled from
-- now on, the new column's default 1 costs nothing for the rows that have
-- it, and the old column is dropped without a rewrite (its bytes stay in
-- old rows until they change).  The index is rebuilt (a scan of the table,
-- under this migration's lock).

BEGIN;

-- 1. deliveries last
ALTER TABLE paynotify.notifications RENAME COLUMN deliveries TO deliveries_before_16;
ALTER TABLE paynotify.notifications ADD COLUMN deliveries integer NOT NULL DEFAULT 1;
UPDATE paynotify.notifications SET deliveries = deliveries_before_16
 WHERE deliveries_before_16 <> 1;
ALTER TABLE paynotify.notifications DROP COLUMN deliveries_before_16;

-- 2. room for HOT updates
ALTER TABLE paynotify.notifications SET (fillfactor = 70);

-- 3. received_at: ranges only

DROP INDEX paynotify.notifications_received_idx;
CREATE INDEX notifications_received_idx ON paynotify.notifications
    USING brin (received_at) WITH (pages_per_range = 32);

-- 4. the resolution CHECK, small; the byte limits as domains (as sql/008)
CREATE DOMAIN paynotify.resolution_note AS text;
CREATE DOMAIN paynotify.resolved_by AS text;
ALTER TABLE paynotify.notifications
    DROP CONSTRAINT notifications_resolution_check,
    ALTER COLUMN resolution_note TYPE paynotify.resolution_note,
    ALTER COLUMN resolved_by TYPE paynotify.resolved_by;
ALTER DOMAIN paynotify.resolution_note ADD CONSTRAINT resolution_note_check
    CHECK (octet_length(VALUE) BETWEEN 1 AND 1000) NOT VALID;
ALTER DOMAIN paynotify.resolved_by ADD CONSTRAINT resolved_by_check
    CHECK (octet_length(VALUE) BETWEEN 1 AND 300) NOT VALID;
ALTER DOMAIN paynotify.resolution_note VALIDATE CONSTRAINT resolution_note_check;
ALTER DOMAIN paynotify.resolved_by VALIDATE CONSTRAINT resolved_by_check;
ALTER TABLE paynotify.notifications
    ADD CONSTRAINT notifications_resolution_check
    CHECK (num_nulls(resolved_at, resolved_by, resolution_note, resolved_outcome) IN (0, 4));

INSERT INTO paynotify.schema_version (version) VALUES (16);

COMMIT;

-- paynotify schema, version 4: the ingest path never caches a sequential scan.
--
-- Version 4 set enable_seqscan = off on ingest() and reapply(): a generic
-- plan cached on empty tables must never become a walk of the table.  The
-- attribute is now part of their definition in sql/functions.sql (and
-- ingest() dedups through INSERT ... ON CONFLICT, which uses the unique
-- index by construction).  This file only records the version.

BEGIN;

INSERT INTO paynotify.schema_version (version) VALUES (4);

COMMIT;

-- paynotify schema, version 4: the ingest path never caches a sequential scan.
--
-- PL/pgSQL caches the plans of its statements per session, and after five
-- executions may keep a generic plan.  On a fresh installation the tables
-- are empty when the receivers' sessions start; a generic plan made then is
-- a sequential scan (as cheap as anything on an empty table) and stays for
-- the life of the session, so every later ingest would read every
-- notification of the table: slower with each notification, until
-- statement_timeout turns every answer into "retry later".
--
-- Every lookup these functions make is by a unique or indexed key, so an
-- index scan is always the right plan: the functions run with
-- enable_seqscan off, which makes the planner choose the index whatever the
-- statistics say.  (force_custom_plan would also do, at the price of
-- planning every statement on every call.)

BEGIN;

ALTER FUNCTION paynotify.ingest(text, text, text, text, text, text, text, text, bigint, text,
                                bigint, boolean, text, text, text, text, jsonb, bytea)
    SET enable_seqscan = off;
ALTER FUNCTION paynotify.reapply(bigint, text, text, text, bigint, text, bigint, boolean, text)
    SET enable_seqscan = off;

INSERT INTO paynotify.schema_version (version) VALUES (4);

COMMIT;

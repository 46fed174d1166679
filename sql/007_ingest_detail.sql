-- paynotify schema, version 7: ingest() returns the outcome's detail.
--
-- ingest() gains the OUT column detail (the stored row's outcome_detail:
-- why an event was not applied, amounts in major units), which the
-- receivers write in their log line.  CREATE OR REPLACE cannot change a
-- function's result type, so the old one is dropped here; sql/functions.sql,
-- which `paynotify migrate` applies after this file, creates the new one.
-- Its arguments are unchanged, so callers that name the columns they read
-- (the receivers of every release since version 5) work with either.

BEGIN;

DROP FUNCTION IF EXISTS paynotify.ingest(text, text, text, text, text, text, text, text, bigint,
                                         text, bigint, boolean, text, text, text, text, jsonb,
                                         bytea, boolean, text);

INSERT INTO paynotify.schema_version (version) VALUES (7);

COMMIT;

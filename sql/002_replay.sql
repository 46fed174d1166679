-- paynotify schema, version 2: replaying stored notifications.
--
-- Version 2 added the function paynotify.reapply(), which `paynotify
-- replay` calls.  Functions now live in sql/functions.sql (one current
-- definition each); this file only records the version, so that databases
-- that applied it and new ones agree.

BEGIN;

INSERT INTO paynotify.schema_version (version) VALUES (2);

COMMIT;

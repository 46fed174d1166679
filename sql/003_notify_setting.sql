-- paynotify schema, version 3: the LISTEN/NOTIFY signal can be turned off.
--
-- Version 3 added paynotify.notify_enabled() (the setting paynotify.notify)
-- and made ingest() and reapply() honour it.  Functions now live in
-- sql/functions.sql; the wake-up signal is no longer sent inside the
-- payment transaction (README "Event feed").  This file only records the
-- version.

BEGIN;

INSERT INTO paynotify.schema_version (version) VALUES (3);

COMMIT;

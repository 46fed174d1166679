-- paynotify schema, version 6: paynotify.query_runs, one row per run of
-- `paynotify query` (docs/QUERY.md), so that `paynotify stats` can export
-- when the last run happened and what it found.  Written by the query
-- command only (never on the receivers' path); old rows can be deleted at
-- will.

BEGIN;

CREATE TABLE paynotify.query_runs (
    id           bigserial   PRIMARY KEY,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    dry_run      boolean     NOT NULL,
    site         text,                  -- the --site filter, NULL for all
    provider     text,                  -- the --provider filter, NULL for all
    orders       integer     NOT NULL,  -- orders selected
    asked        integer     NOT NULL,  -- requests sent (one per order and provider)
    final        integer     NOT NULL,  -- verified final answers (paid, closed, failed)
    applied      integer     NOT NULL,  -- of those, ingested with outcome applied
    waiting      integer     NOT NULL,  -- provider knows the order, not final
    not_found    integer     NOT NULL,
    refused      integer     NOT NULL,  -- answers that did not verify
    errors       integer     NOT NULL,  -- transport errors, timeouts, 5xx, unusable credentials
    attention    integer     NOT NULL,  -- outcomes or states a human must look at
    exit_code    integer     NOT NULL
);

CREATE INDEX query_runs_finished_idx ON paynotify.query_runs (finished_at);

INSERT INTO paynotify.schema_version (version) VALUES (6);

COMMIT;

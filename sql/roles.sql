-- paynotify roles: create (or complete) the database roles, once per
-- database, as a superuser (docs/DATABASE.md "Roles and grants"):
--
--     sudo -u postgres psql -d shop -v ON_ERROR_STOP=1 -f /usr/share/paynotify/sql/roles.sql
--
-- Idempotent: a role that exists is kept (its password and settings too)
-- and only given what is missing.  Not a numbered file: `paynotify
-- migrate` never runs it (the schema's owner cannot create roles); what
-- each role may do on the schema's objects is sql/grants.sql, which
-- migrate applies on every run.
--
--   paynotify_owner     LOGIN: owns the schema, runs `paynotify migrate`
--                       (CONNECT and CREATE on this database)
--   paynotify_receiver  NOLOGIN: what the receivers need (grants.sql)
--   paynotify_admin     NOLOGIN: the admin commands; a member of
--                       paynotify_receiver (query and reconcile --apply
--                       ingest as the receivers do); TEMPORARY on this
--                       database (purge's batch table)
--   paynotify_consumer  NOLOGIN: the shop's consumers of the event feed
--   paynotify           LOGIN, IN ROLE paynotify_receiver: the receivers'
--                       login (peer authentication: the system user paynotify)
--   paynotify_ops       LOGIN, IN ROLE paynotify_admin: the admin commands'
--                       login (the system user paynotify's timers, and root,
--                       through a pg_ident.conf map)
--
-- The shop's own role gets the feed with `GRANT paynotify_consumer TO shop;`.

BEGIN;

DO $roles$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM (VALUES
        ('paynotify_owner',    true),
        ('paynotify_receiver', false),
        ('paynotify_admin',    false),
        ('paynotify_consumer', false),
        ('paynotify',          true),
        ('paynotify_ops',      true)) AS t(name, login)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.name) THEN
            EXECUTE format('CREATE ROLE %I %s', r.name, CASE WHEN r.login THEN 'LOGIN'
                                                             ELSE 'NOLOGIN' END);
        END IF;
    END LOOP;
    EXECUTE format('GRANT CONNECT, CREATE ON DATABASE %I TO paynotify_owner',
                   current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO paynotify_receiver, paynotify_admin, '
                   'paynotify_consumer', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO paynotify_admin', current_database());
END;
$roles$;

GRANT paynotify_receiver TO paynotify_admin;
GRANT paynotify_receiver TO paynotify;
GRANT paynotify_admin TO paynotify_ops;

COMMIT;

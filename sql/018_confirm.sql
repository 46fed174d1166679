-- paynotify schema, version 18: the rate limit of `paynotify confirm`, the
-- endpoint the shop's backend asks "is this order paid?" when the buyer
-- returns before the notification (issue 26, item 6; docs/SHOP-ORDERS.md
-- "The buyer returns: confirm").
--
-- One row per order that confirm has asked its provider about, with the
-- time of the last ask.  confirm_claim() (sql/functions.sql) takes the right
-- to ask with one INSERT .. ON CONFLICT .. DO UPDATE .. WHERE asked_at is
-- older than the site's confirm.min_interval_s: a concurrent second claim
-- of the same order waits for the first one's row and then finds it fresh,
-- so several workers and hosts ask at most once per interval between them.
-- No foreign key (the receivers' UPDATE of an order must not pay for one);
-- `paynotify purge` deletes rows older than a day.
--
-- Rights (docs/DATABASE.md): the receivers' role, which confirm connects
-- as, gets SELECT, INSERT, UPDATE, DELETE here and EXECUTE on
-- confirm_claim(); nothing else changes.

BEGIN;

CREATE TABLE paynotify.confirm_asks (
    site      text        NOT NULL,
    order_id  text        NOT NULL,
    asked_at  timestamptz NOT NULL DEFAULT now(),
    asks      integer     NOT NULL DEFAULT 1 CHECK (asks >= 1),
    PRIMARY KEY (site, order_id)
);

-- purge's read: the old rows
CREATE INDEX confirm_asks_asked_at_idx ON paynotify.confirm_asks (asked_at);

INSERT INTO paynotify.schema_version (version) VALUES (18);

COMMIT;

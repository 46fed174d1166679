-- paynotify schema, version 11: three outcomes, so that `paynotify report`
-- lists only what needs a person (README "Where each outcome goes"; docs/PROVIDERS.md
-- "Every event type").
--
--   foreign_site   a genuine Stripe event of a sibling site on the same
--                  Stripe account: its object's metadata carries another
--                  configured site's marker (stripe.site_metadata).  That
--                  site receives the same event at its own endpoint; here
--                  it is stored, counted and never applied, and it is not
--                  on `report` (a marker that names no configured site, or
--                  none at all, stays merchant_mismatch, for a person).
--   unhandled      a genuine event of a type paynotify has no handling for
--                  (a type it does not know, or one it knows but does not
--                  act on yet): stored with its event_type, acknowledged,
--                  counted per type by `paynotify stats` and the live
--                  metrics, listed by `paynotify report --unhandled`.  The
--                  type is notifications.event_type (the provider's word:
--                  Stripe's type, WeChat Pay v3's event_type, Alipay's
--                  trade_status or msg_method, ...); no new column.
--   refund_failed  a refund result that says the refund did not happen
--                  (WeChat Pay v2 refund_status CHANGE / REFUNDCLOSE, v3
--                  REFUND.ABNORMAL / REFUND.CLOSED): on `report`, for a
--                  person, with a detail that says so (before, a v2 one was
--                  txn_mismatch "order paid by transaction X").
--
-- Rows stored before keep their outcomes (ignored, txn_mismatch): nothing
-- is rewritten here; `paynotify replay --apply` re-derives a row's outcome
-- from its raw bytes where it is not final.
--
-- The domain's CHECK is replaced by the full list (sql/008 style: NOT VALID,
-- then validated inside this transaction).

BEGIN;

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch', 'combined',
                     'missing_id', 'dispute', 'complaint', 'foreign_site', 'unhandled',
                     'refund_failed')) NOT VALID;
ALTER DOMAIN paynotify.outcome VALIDATE CONSTRAINT outcome_check;

-- What `paynotify report` reads: the rows that need a person.  Foreign and
-- unhandled rows leave that index (a shared Stripe account makes every
-- sibling's payment a foreign row here); `paynotify report --unhandled`
-- reads the unhandled rows of the last N days through their own index.
-- A combine payment's envelope (combined, schema 9) is never on `report`
-- either (its sub-orders are rows of their own): out of the index too.
DROP INDEX paynotify.notifications_attention_idx;
CREATE INDEX notifications_attention_idx ON paynotify.notifications (outcome)
    WHERE outcome NOT IN ('applied', 'already_applied', 'ignored', 'foreign_site', 'unhandled',
                          'combined');
CREATE INDEX notifications_unhandled_idx ON paynotify.notifications (received_at)
    WHERE outcome = 'unhandled';

INSERT INTO paynotify.schema_version (version) VALUES (11);

COMMIT;

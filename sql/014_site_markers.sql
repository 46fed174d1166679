-- paynotify schema, version 14: the outcome foreign_site (issue 23,
-- "several sites on one provider identity").
--
--   foreign_site   a genuine notification of a sibling site: another
--                  configured site of the same provider identity (the same
--                  key or secret and signed merchant ids; Stripe: the same
--                  account) whose site marker from signed data the event
--                  carries (2c2p.site_marker, wechatpay.site_attach,
--                  alipay.site_passback, stripe.site_metadata).  Stored,
--                  acknowledged, counted (paynotify stats, the live
--                  metrics), never applied, and not on `paynotify report`:
--                  the sibling's own copy is that site's business.  A marked
--                  site's event with no marker, or one naming no configured
--                  site, stays merchant_mismatch, for a person.
--
-- Branch i22-report defines the same outcome (schema 11) for Stripe's
-- sibling-site case; the lists are meant to be merged into one.
--
-- Rows stored before keep their outcomes: nothing is rewritten here.  The
-- domain's CHECK is replaced by the full list (sql/008 style: NOT VALID, then
-- validated inside this transaction); the attention index that `report`
-- reads leaves the foreign rows out.

BEGIN;

ALTER DOMAIN paynotify.outcome DROP CONSTRAINT outcome_check;
ALTER DOMAIN paynotify.outcome ADD CONSTRAINT outcome_check
    CHECK (VALUE IN ('applied', 'already_applied', 'unknown_order', 'amount_mismatch',
                     'merchant_mismatch', 'mode_mismatch', 'ignored', 'duplicate_payment',
                     'paid_after_close', 'conflicting_duplicate', 'txn_mismatch',
                     'foreign_site')) NOT VALID;
ALTER DOMAIN paynotify.outcome VALIDATE CONSTRAINT outcome_check;

DROP INDEX paynotify.notifications_attention_idx;
CREATE INDEX notifications_attention_idx ON paynotify.notifications (outcome)
    WHERE outcome NOT IN ('applied', 'already_applied', 'ignored', 'foreign_site');

INSERT INTO paynotify.schema_version (version) VALUES (14);

COMMIT;

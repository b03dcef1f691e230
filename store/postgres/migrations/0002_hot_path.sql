-- 0002: lighter rows on the hot path. Every hold row and every journal entry
-- is written by the statement that updates its account's row (Hold, Settle,
-- the sweep, Credit), so the account exists and is locked; the foreign-key
-- trigger each insert ran checked it again, for about 15% of the database's
-- CPU per hold+settle pair (bench/pgprobe.sh). Import's verification checks
-- copied rows against their accounts. RenewLeases finds holds by their
-- primary key, so the owner index was only ever written.
ALTER TABLE holds DROP CONSTRAINT holds_account_fkey;
ALTER TABLE journal DROP CONSTRAINT journal_account_fkey;
DROP INDEX holds_owner;

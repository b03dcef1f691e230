-- 0003: key spend limits, spend kept per key, low-balance thresholds, and
-- what Generation and Journal ranges read.
--
-- The journal index is built over the whole journal, with writes to it
-- blocked meanwhile: on large books, run `relay migrate` before starting the
-- new replicas. The session's statement timeout would cut the build short.
SET LOCAL statement_timeout = 0;

-- A key's settings (label .. allow) and its spend, which the ledger keeps in
-- the statements that move its account's credit: spent in the period that
-- began at period_start (NULL: none yet), held by its open holds.
ALTER TABLE keys
	ADD COLUMN label        text NOT NULL DEFAULT '',
	ADD COLUMN limit_nano   bigint NOT NULL DEFAULT 0 CHECK (limit_nano >= 0),
	ADD COLUMN reset        text NOT NULL DEFAULT '' CHECK (reset IN ('', 'daily', 'weekly', 'monthly')),
	ADD COLUMN expires      timestamptz,
	ADD COLUMN allow        text[] NOT NULL DEFAULT '{}',
	ADD COLUMN spent        bigint NOT NULL DEFAULT 0,
	ADD COLUMN held         bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
	ADD COLUMN period_start timestamptz;
-- Room on each page for the key's new row versions (HOT updates: no index
-- entry per hold and settle).
ALTER TABLE keys SET (fillfactor = 90);

ALTER TABLE accounts ADD COLUMN alert_below bigint NOT NULL DEFAULT 0 CHECK (alert_below >= 0);
CREATE INDEX accounts_alert ON accounts (id) WHERE alert_below > 0;

-- keyed: the hold is counted on its key (its amount in held, its charge in
-- spent); false for a hold naming no key of its account, and for holds
-- taken before this migration.
ALTER TABLE holds ADD COLUMN keyed boolean NOT NULL DEFAULT false;

-- A released call leaves no journal entry: its outcome keeps what
-- Generation shows of it.
ALTER TABLE outcomes
	ADD COLUMN key_id   text NOT NULL DEFAULT '',
	ADD COLUMN model    text NOT NULL DEFAULT '',
	ADD COLUMN route    text NOT NULL DEFAULT '',
	ADD COLUMN endpoint text NOT NULL DEFAULT '';

CREATE INDEX journal_time ON journal (account, time);

-- relay_period_start is store.PeriodStart: when the period of p_reset that
-- contains p_t began (UTC; weeks begin on Monday); NULL for no reset.
CREATE FUNCTION relay_period_start(p_reset text, p_t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE p_reset
	WHEN 'daily'   THEN date_trunc('day',   p_t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
	WHEN 'weekly'  THEN date_trunc('week',  p_t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
	WHEN 'monthly' THEN date_trunc('month', p_t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
END;

-- relay_spent_at is a key's spend in the period that contains p_t: 0 once
-- a later period than p_start has begun.
CREATE FUNCTION relay_spent_at(p_reset text, p_start timestamptz, p_spent bigint, p_t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN relay_period_start(p_reset, p_t) > coalesce(p_start, '-infinity') THEN 0 ELSE p_spent END;

-- relay_hold is Hold: it reserves p_amount of the account's available
-- credit and, when p_key names a key of the account, of that key's limit in
-- the period that contains p_created (rolling the key into that period),
-- and writes the hold row; both or neither. It answers NULL when the hold
-- was taken, else why not: 'missing' (no account), 'ended' (the request id
-- has an outcome), or 'account N' or 'key N', N being what remains of that
-- limit in nano-USD (a key's never below 0). A request id with an open
-- hold fails on the holds' primary key. A key is found by its id alone
-- (IS NOT DISTINCT FROM, never an index condition, checks its account),
-- whatever the planner makes of keys_account.
--
-- A hold that fits is one statement: the account's conditional UPDATE
-- locks its row (re-checking the newest committed balance), then the key's
-- conditional UPDATE locks the key's row (k reads a: second, as in every
-- statement that locks both) and reserves its limit, and the hold row is
-- written if k did or there is no key. kk reads the key in the statement's
-- snapshot, so a hold the last committed spend refuses writes nothing; one
-- that only the key's newest row refuses (its room taken while this waited
-- for the account's lock) gives the account's reservation back, under the
-- key's lock. A refusal is explained from the newest committed rows; should
-- they fit by then (credit freed meanwhile), the statement runs again.
CREATE FUNCTION relay_hold(p_request text, p_account text, p_amount bigint, p_key text,
	p_model text, p_route text, p_endpoint text, p_created timestamptz, p_owner text, p_lease_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_took    boolean; -- the account's credit was reserved
	v_held    boolean; -- the hold was taken
	v_balance bigint;
	v_held_by bigint;
	v_limit   bigint;
	v_spent   bigint;
BEGIN
	FOR attempt IN 1..3 LOOP
		WITH kk AS (
			SELECT limit_nano, relay_spent_at(reset, period_start, spent, p_created) + held + p_amount AS would
			FROM keys WHERE id = p_key AND account IS NOT DISTINCT FROM p_account),
		a AS (
			UPDATE accounts SET held = held + p_amount
			WHERE id = p_account AND balance > 0 AND balance - held >= p_amount
			  AND NOT EXISTS (SELECT 1 FROM outcomes WHERE request_id = p_request)
			  AND NOT EXISTS (SELECT 1 FROM kk WHERE limit_nano > 0 AND would > limit_nano)
			RETURNING id),
		k AS (
			UPDATE keys SET held = keys.held + p_amount,
				spent = relay_spent_at(keys.reset, keys.period_start, keys.spent, p_created),
				period_start = greatest(keys.period_start, relay_period_start(keys.reset, p_created))
			FROM a WHERE keys.id = p_key AND keys.account IS NOT DISTINCT FROM a.id
			  AND (keys.limit_nano = 0 OR
			       relay_spent_at(keys.reset, keys.period_start, keys.spent, p_created) + keys.held + p_amount <= keys.limit_nano)
			RETURNING 1),
		h AS (
			INSERT INTO holds (request_id, account, key_id, model, route, endpoint, amount, created, owner, lease_until, keyed)
			SELECT p_request, a.id, p_key, p_model, p_route, p_endpoint, p_amount, p_created, p_owner,
				now() + p_lease_ms * interval '1 millisecond', EXISTS (SELECT 1 FROM k)
			FROM a
			WHERE EXISTS (SELECT 1 FROM k) OR NOT EXISTS (SELECT 1 FROM kk)
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM a), EXISTS (SELECT 1 FROM h) INTO v_took, v_held;
		IF v_held THEN
			RETURN NULL;
		END IF;
		IF v_took THEN
			-- The key's newest row refused: the account's reservation goes
			-- back, and the refusal is read under the key's lock (or, if its
			-- limit was raised meanwhile, the statement runs again).
			UPDATE accounts SET held = held - p_amount WHERE id = p_account;
			SELECT limit_nano, relay_spent_at(reset, period_start, spent, p_created), held INTO v_limit, v_spent, v_held_by
			FROM keys WHERE id = p_key AND account IS NOT DISTINCT FROM p_account FOR UPDATE;
			IF FOUND AND v_limit > 0 AND v_spent + v_held_by + p_amount > v_limit THEN
				RETURN 'key ' || greatest(v_limit - v_spent - v_held_by, 0);
			END IF;
			CONTINUE;
		END IF;
		SELECT balance, held INTO v_balance, v_held_by FROM accounts WHERE id = p_account;
		IF NOT FOUND THEN
			RETURN 'missing';
		END IF;
		IF EXISTS (SELECT 1 FROM outcomes WHERE request_id = p_request) THEN
			RETURN 'ended';
		END IF;
		IF v_balance <= 0 OR v_balance - v_held_by < p_amount THEN
			RETURN 'account ' || (v_balance - v_held_by);
		END IF;
		SELECT limit_nano, relay_spent_at(reset, period_start, spent, p_created), held INTO v_limit, v_spent, v_held_by
		FROM keys WHERE id = p_key AND account IS NOT DISTINCT FROM p_account;
		IF FOUND AND v_limit > 0 AND v_spent + v_held_by + p_amount > v_limit THEN
			RETURN 'key ' || greatest(v_limit - v_spent - v_held_by, 0);
		END IF;
		-- The rows changed since the statement's snapshot: again.
	END LOOP;
	RAISE EXCEPTION 'relay_hold: the hold of % was neither taken nor refused in three tries', p_request
		USING ERRCODE = '40001';
END $$;

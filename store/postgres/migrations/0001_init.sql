-- 0001: the ledger. Amounts are bigint nano-USD; ids sort bytewise (COLLATE "C")
-- so that account paging matches the Badger store's order.
CREATE TABLE accounts (
	id      text COLLATE "C" PRIMARY KEY,
	balance bigint NOT NULL DEFAULT 0,
	held    bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
	seq     bigint NOT NULL DEFAULT 0,
	created timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE journal (
	account       text COLLATE "C" NOT NULL REFERENCES accounts (id),
	seq           bigint NOT NULL,
	kind          text NOT NULL,
	request_id    text NOT NULL DEFAULT '',
	key_id        text NOT NULL DEFAULT '',
	model         text NOT NULL DEFAULT '',
	route         text NOT NULL DEFAULT '',
	endpoint      text NOT NULL DEFAULT '',
	usage         jsonb NOT NULL DEFAULT '{}',
	hold_amount   bigint NOT NULL DEFAULT 0,
	amount        bigint NOT NULL,
	balance_after bigint NOT NULL,
	time          timestamptz NOT NULL DEFAULT now(),
	note          text NOT NULL DEFAULT '',
	PRIMARY KEY (account, seq)
);

CREATE TABLE holds (
	request_id  text PRIMARY KEY,
	account     text COLLATE "C" NOT NULL REFERENCES accounts (id),
	key_id      text NOT NULL DEFAULT '',
	model       text NOT NULL DEFAULT '',
	route       text NOT NULL DEFAULT '',
	endpoint    text NOT NULL DEFAULT '',
	amount      bigint NOT NULL CHECK (amount >= 0),
	created     timestamptz NOT NULL,
	owner       text NOT NULL,
	lease_until timestamptz NOT NULL
);
CREATE INDEX holds_lease ON holds (lease_until);
CREATE INDEX holds_owner ON holds (owner);

-- How each hold ended; what makes Settle and Release exactly once.
CREATE TABLE outcomes (
	request_id  text PRIMARY KEY,
	account     text COLLATE "C" NOT NULL,
	state       text NOT NULL,
	hold_amount bigint NOT NULL,
	charge      bigint NOT NULL DEFAULT 0,
	seq         bigint NOT NULL DEFAULT 0,
	owner       text NOT NULL DEFAULT '',
	reason      text NOT NULL DEFAULT '',
	time        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE keys (
	id      text PRIMARY KEY,
	hash    text NOT NULL UNIQUE,
	account text COLLATE "C" NOT NULL REFERENCES accounts (id),
	route   text NOT NULL,
	exclude text[] NOT NULL DEFAULT '{}',
	revoked boolean NOT NULL DEFAULT false,
	created timestamptz NOT NULL
);
CREATE INDEX keys_account ON keys (account);

CREATE TABLE jobs (
	request_id text PRIMARY KEY,
	account    text COLLATE "C" NOT NULL REFERENCES accounts (id),
	key_id     text NOT NULL DEFAULT '',
	model      text NOT NULL DEFAULT '',
	route      text NOT NULL DEFAULT '',
	line       text NOT NULL DEFAULT '',
	amount     bigint NOT NULL CHECK (amount >= 0),
	refunded   boolean NOT NULL DEFAULT false,
	created    timestamptz NOT NULL
);

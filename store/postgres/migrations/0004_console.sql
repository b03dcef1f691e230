-- 0004: the web console's logins and sessions.

-- A login is an account holder's sign-in: an email (lower-cased) bound to
-- one account. password_hash is the KDF's PHC string ('' until set);
-- setup_hash the SHA-256 hex of the one-time set-password token (NULL when
-- none; unique, so SetPassword finds its login by it in one lookup).
CREATE TABLE logins (
	email         text PRIMARY KEY,
	account       text NOT NULL REFERENCES accounts (id),
	password_hash text NOT NULL DEFAULT '',
	setup_hash    text UNIQUE,
	setup_expires timestamptz,
	created       timestamptz NOT NULL,
	updated       timestamptz NOT NULL,
	CHECK ((setup_hash IS NULL) = (setup_expires IS NULL))
);
CREATE INDEX logins_account ON logins (account);

-- A signed-in console session; id is the SHA-256 hex of the cookie's
-- secret. An operator's session has no email or account.
CREATE TABLE console_sessions (
	id       text PRIMARY KEY,
	operator boolean NOT NULL,
	email    text NOT NULL DEFAULT '',
	account  text NOT NULL DEFAULT '',
	csrf     text NOT NULL,
	created  timestamptz NOT NULL,
	seen     timestamptz NOT NULL,
	expires  timestamptz NOT NULL
);
-- SetPassword ends a login's sessions.
CREATE INDEX console_sessions_email ON console_sessions (email) WHERE email <> '';

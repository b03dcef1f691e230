package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/store"
)

const loginCols = `email, account, password_hash, coalesce(setup_hash, ''), setup_expires, created, updated`

func scanLogin(row pgx.Row) (store.Login, error) {
	var (
		l       store.Login
		expires *time.Time
	)
	if err := row.Scan(&l.Email, &l.Account, &l.PasswordHash, &l.SetupHash, &expires, &l.Created, &l.Updated); err != nil {
		return store.Login{}, err
	}
	if expires != nil {
		l.SetupExpires = expires.UTC()
	}
	l.Created, l.Updated = l.Created.UTC(), l.Updated.UTC()
	return l, nil
}

// IssueLogin creates or keeps the login of email on account and sets its
// setup token (see store.Console) in one upsert, which changes a login only
// when it is account's. ErrNotFound for an unknown account (the foreign
// key), ErrExists when the login is another account's.
func (s *Store) IssueLogin(ctx context.Context, email, account, setupHash string, expires, now time.Time) (store.Login, error) {
	email, err := store.NormalizeEmail(email)
	if err != nil {
		return store.Login{}, fmt.Errorf("postgres: issue login: %w", err)
	}
	if store.CheckAccountID(account) != nil {
		return store.Login{}, fmt.Errorf("postgres: account %q: %w", store.ClipNote(account), store.ErrNotFound)
	}
	if err := store.CheckKeyHash(setupHash); err != nil {
		return store.Login{}, fmt.Errorf("postgres: issue login: setup hash: %w", err)
	}
	l, err := scanLogin(s.pool.QueryRow(ctx, `
INSERT INTO logins (email, account, setup_hash, setup_expires, created, updated) VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (email) DO UPDATE SET setup_hash = excluded.setup_hash, setup_expires = excluded.setup_expires, updated = excluded.updated
WHERE logins.account = excluded.account
RETURNING `+loginCols, email, account, setupHash, exactTime(expires), stamp(now)))
	if isNoRows(err) {
		// The login is another account's, unless account does not exist.
		var known bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, account).Scan(&known); err != nil {
			return store.Login{}, mapErr("issue login", err)
		}
		if !known {
			return store.Login{}, fmt.Errorf("postgres: account %q: %w", account, store.ErrNotFound)
		}
		return store.Login{}, fmt.Errorf("postgres: login %q is another account's: %w", email, store.ErrExists)
	}
	if err != nil {
		return store.Login{}, mapErr(fmt.Sprintf("login %q", email), err)
	}
	return l, nil
}

// Login returns the login of email; ErrNotFound if none.
func (s *Store) Login(ctx context.Context, email string) (store.Login, error) {
	l, err := scanLogin(s.pool.QueryRow(ctx, `SELECT `+loginCols+` FROM logins WHERE email = $1`, email))
	if isNoRows(err) {
		return store.Login{}, fmt.Errorf("postgres: login %q: %w", store.ClipNote(email), store.ErrNotFound)
	}
	if err != nil {
		return store.Login{}, mapErr("login", err)
	}
	return l, nil
}

// SetPassword uses the setup token of setupHash once (see store.Console):
// one UPDATE … WHERE setup_hash = $1 AND setup_expires > now, which
// row-locks the login (of two racing uses, the second finds the token gone),
// and the deletion of the login's sessions, in one transaction.
func (s *Store) SetPassword(ctx context.Context, setupHash, passwordHash string, now time.Time) (store.Login, error) {
	notFound := fmt.Errorf("postgres: set password: setup token: %w", store.ErrNotFound)
	if store.CheckKeyHash(setupHash) != nil {
		return store.Login{}, notFound
	}
	if passwordHash == "" {
		return store.Login{}, errors.New("postgres: set password: the password hash is empty")
	}
	var l store.Login
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		l, err = scanLogin(tx.QueryRow(ctx, `
UPDATE logins SET password_hash = $2, setup_hash = NULL, setup_expires = NULL, updated = $3
WHERE setup_hash = $1 AND setup_expires > $3
RETURNING `+loginCols, setupHash, passwordHash, stamp(now)))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM console_sessions WHERE email = $1`, l.Email)
		return err
	})
	if isNoRows(err) {
		return store.Login{}, notFound
	}
	if err != nil {
		return store.Login{}, mapErr("set password", err)
	}
	return l, nil
}

// ListLogins lists the logins of account, or every login when account is
// "", by email (bytewise).
func (s *Store) ListLogins(ctx context.Context, account string) ([]store.Login, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+loginCols+` FROM logins WHERE $1 = '' OR account = $1 ORDER BY email COLLATE "C"`, account)
	if err != nil {
		return nil, mapErr("list logins", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Login, error) { return scanLogin(r) })
	if err != nil {
		return nil, mapErr("list logins", err)
	}
	return out, nil
}

const sessionCols = `id, operator, email, account, csrf, created, seen, expires`

func scanSession(row pgx.Row) (store.Session, error) {
	var x store.Session
	if err := row.Scan(&x.ID, &x.Operator, &x.Email, &x.Account, &x.CSRF, &x.Created, &x.Seen, &x.Expires); err != nil {
		return store.Session{}, err
	}
	x.Created, x.Seen, x.Expires = x.Created.UTC(), x.Seen.UTC(), x.Expires.UTC()
	return x, nil
}

// PutSession stores a new session (store.CheckSession); ErrExists for its
// id again.
func (s *Store) PutSession(ctx context.Context, x store.Session) error {
	x, err := store.CheckSession(x)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO console_sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		x.ID, x.Operator, x.Email, x.Account, x.CSRF, exactTime(x.Created), exactTime(x.Seen), exactTime(x.Expires))
	if err != nil {
		return mapErr("session", err)
	}
	return nil
}

// Session returns the session id; ErrNotFound if none.
func (s *Store) Session(ctx context.Context, id string) (store.Session, error) {
	x, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM console_sessions WHERE id = $1`, id))
	if isNoRows(err) {
		return store.Session{}, fmt.Errorf("postgres: session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, mapErr("session", err)
	}
	return x, nil
}

// TouchSession sets the session's Seen; ErrNotFound if none.
func (s *Store) TouchSession(ctx context.Context, id string, seen time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE console_sessions SET seen = $2 WHERE id = $1`, id, exactTime(seen))
	if err != nil {
		return mapErr("touch session", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: session: %w", store.ErrNotFound)
	}
	return nil
}

// DeleteSession ends the session; one that does not exist is no error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE id = $1`, id); err != nil {
		return mapErr("delete session", err)
	}
	return nil
}

// PurgeSessions deletes the sessions that expired (expires ≤ now) or went
// idle (seen ≤ idleBefore) and reports how many.
func (s *Store) PurgeSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE expires <= $1 OR seen <= $2`, exactTime(now), exactTime(idleBefore))
	if err != nil {
		return 0, mapErr("purge sessions", err)
	}
	return int(tag.RowsAffected()), nil
}

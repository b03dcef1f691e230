package badger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/store"
)

// The web console's records (doc.go has the layout): login/<email> is the
// login, setup/<setup hash> the email of the login whose one-time token it
// is (SetPassword's one lookup), sess/<id> a session and
// lsess/<email>\x00<id> (empty) the index of a login's sessions, which
// SetPassword ends. A session's two keys expire with it (badger's TTL at
// its Expires), so sessions nobody purges still go.

const (
	prefixLogin    = "login/"
	prefixSetup    = "setup/"
	prefixSession  = "sess/"
	prefixLoginSes = "lsess/"
)

func loginKey(email string) []byte { return prefixed(prefixLogin, email, 0) }
func setupKey(hash string) []byte  { return prefixed(prefixSetup, hash, 0) }
func sessionKey(id string) []byte  { return prefixed(prefixSession, id, 0) }

// loginSessionsPrefix is lsess/<email>\x00: an address has no NUL, so one
// login's prefix never covers another's keys.
func loginSessionsPrefix(email string) []byte {
	return append(prefixed(prefixLoginSes, email, 1), 0)
}

func loginSessionKey(email, id string) []byte {
	return append(loginSessionsPrefix(email), id...)
}

// loginRec is a console login. Login v1: email, account, password hash,
// setup hash, setup expires, created, updated.
type loginRec struct {
	Email, Account, PasswordHash, SetupHash string
	SetupExpires, Created, Updated          time.Time
}

func (r loginRec) api() store.Login {
	return store.Login{Email: r.Email, Account: r.Account, PasswordHash: r.PasswordHash, SetupHash: r.SetupHash,
		SetupExpires: r.SetupExpires, Created: r.Created, Updated: r.Updated}
}

func (r *loginRec) fields(e enc) enc {
	e.str(r.Email)
	e.str(r.Account)
	e.str(r.PasswordHash)
	e.str(r.SetupHash)
	e.time("setup_expires", r.SetupExpires)
	e.time("created", r.Created)
	e.time("updated", r.Updated)
	return e
}

func (r *loginRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagLoginV1, r.fields)
}

func (r *loginRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagLoginV1)
	if err == nil && isJSON { // no build wrote one in JSON
		err = fmt.Errorf("store: decode %q: record is JSON, want %s", key, tagName(tagLoginV1))
	}
	if err != nil {
		return err
	}
	r.Email = d.str("email")
	r.Account = d.str("account")
	r.PasswordHash = d.str("password_hash")
	r.SetupHash = d.str("setup_hash")
	r.SetupExpires = d.time("setup_expires")
	r.Created = d.time("created")
	r.Updated = d.time("updated")
	return d.close(key)
}

// sessionRec is a console session. Session v1: id, operator, email,
// account, CSRF token, created, seen, expires.
type sessionRec struct {
	ID             string
	Operator       bool
	Email, Account string
	CSRF           string
	Created, Seen  time.Time
	Expires        time.Time
}

func (r sessionRec) api() store.Session {
	return store.Session{ID: r.ID, Operator: r.Operator, Email: r.Email, Account: r.Account, CSRF: r.CSRF,
		Created: r.Created, Seen: r.Seen, Expires: r.Expires}
}

func (r *sessionRec) fields(e enc) enc {
	e.str(r.ID)
	e.boolean(r.Operator)
	e.str(r.Email)
	e.str(r.Account)
	e.str(r.CSRF)
	e.time("created", r.Created)
	e.time("seen", r.Seen)
	e.time("expires", r.Expires)
	return e
}

func (r *sessionRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagSessionV1, r.fields)
}

func (r *sessionRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagSessionV1)
	if err == nil && isJSON { // no build wrote one in JSON
		err = fmt.Errorf("store: decode %q: record is JSON, want %s", key, tagName(tagSessionV1))
	}
	if err != nil {
		return err
	}
	r.ID = d.str("id")
	r.Operator = d.boolean("operator")
	r.Email = d.str("email")
	r.Account = d.str("account")
	r.CSRF = d.str("csrf")
	r.Created = d.time("created")
	r.Seen = d.time("seen")
	r.Expires = d.time("expires")
	return d.close(key)
}

func putLogin(txn *badger.Txn, r *loginRec) error {
	return put(txn, loginKey(r.Email), r.encode)
}

// loadLogin reads the login of email; ErrNotFound if none.
func loadLogin(txn *badger.Txn, email string) (r loginRec, err error) {
	key := loginKey(email)
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	if errors.Is(err, badger.ErrKeyNotFound) {
		return r, fmt.Errorf("store: login %q: %w", email, store.ErrNotFound)
	}
	return r, err
}

// putSession writes the session and its login's index entry, both expiring
// when the session does: badger's TTL is whole seconds, rounded up, so an
// entry outlives its session by under a second (callers check Expires).
func putSession(txn *badger.Txn, r *sessionRec) error {
	key := sessionKey(r.ID)
	val, err := r.encode(key)
	if err != nil {
		return err
	}
	expiresAt := uint64(max(r.Expires.Unix(), 0)) + 1
	if err := txn.SetEntry(&badger.Entry{Key: key, Value: val, ExpiresAt: expiresAt}); err != nil {
		return err
	}
	if r.Email == "" {
		return nil
	}
	return txn.SetEntry(&badger.Entry{Key: loginSessionKey(r.Email, r.ID), Value: []byte{}, ExpiresAt: expiresAt})
}

// loadSession reads the session id; ErrNotFound if none.
func loadSession(txn *badger.Txn, id string) (r sessionRec, err error) {
	key := sessionKey(id)
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	if errors.Is(err, badger.ErrKeyNotFound) {
		return r, fmt.Errorf("store: session: %w", store.ErrNotFound)
	}
	return r, err
}

// deleteSession deletes the session and its index entry.
func deleteSession(txn *badger.Txn, r *sessionRec) error {
	if err := txn.Delete(sessionKey(r.ID)); err != nil {
		return err
	}
	if r.Email == "" {
		return nil
	}
	return txn.Delete(loginSessionKey(r.Email, r.ID))
}

// IssueLogin creates or keeps the login of email on account and sets its
// setup token (see store.Console), in one transaction: the account, the
// login and the token's index entry (the earlier token's is deleted).
func (b *Store) IssueLogin(ctx context.Context, email, account, setupHash string, expires, now time.Time) (store.Login, error) {
	email, err := store.NormalizeEmail(email)
	if err != nil {
		return store.Login{}, fmt.Errorf("store: issue login: %w", err)
	}
	if store.CheckAccountID(account) != nil {
		return store.Login{}, fmt.Errorf("store: account %q: %w", store.ClipNote(account), store.ErrNotFound)
	}
	if err := store.CheckKeyHash(setupHash); err != nil {
		return store.Login{}, fmt.Errorf("store: issue login: setup hash: %w", err)
	}
	now, expires = now.UTC(), expires.UTC()
	var rec loginRec
	err = b.update(ctx, func(txn *badger.Txn) error {
		if _, err := loadAccount(txn, account); err != nil {
			return err
		}
		var err error
		rec, err = loadLogin(txn, email)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rec = loginRec{Email: email, Account: account, Created: now}
		case err != nil:
			return err
		case rec.Account != account:
			return fmt.Errorf("store: login %q is another account's: %w", email, store.ErrExists)
		case rec.SetupHash != "" && rec.SetupHash != setupHash:
			if err := txn.Delete(setupKey(rec.SetupHash)); err != nil {
				return err
			}
		}
		if ok, err := exists(txn, setupKey(setupHash)); err != nil || (ok && rec.SetupHash != setupHash) {
			if err == nil {
				err = fmt.Errorf("store: issue login: setup hash: %w", store.ErrExists)
			}
			return err
		}
		rec.SetupHash, rec.SetupExpires, rec.Updated = setupHash, expires, now
		if err := putLogin(txn, &rec); err != nil {
			return err
		}
		return txn.Set(setupKey(setupHash), []byte(email))
	})
	if err != nil {
		return store.Login{}, err
	}
	return rec.api(), nil
}

// Login returns the login of email; ErrNotFound if none.
func (b *Store) Login(ctx context.Context, email string) (store.Login, error) {
	var rec loginRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = loadLogin(txn, email)
		return err
	})
	if err != nil {
		return store.Login{}, err
	}
	return rec.api(), nil
}

// SetPassword uses the setup token of setupHash once (see store.Console):
// the login, the token's index entry and the login's sessions change in one
// transaction.
func (b *Store) SetPassword(ctx context.Context, setupHash, passwordHash string, now time.Time) (store.Login, error) {
	notFound := fmt.Errorf("store: set password: setup token: %w", store.ErrNotFound)
	if store.CheckKeyHash(setupHash) != nil {
		return store.Login{}, notFound
	}
	if passwordHash == "" {
		return store.Login{}, errors.New("store: set password: the password hash is empty")
	}
	var rec loginRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		var email string
		err := getValue(txn, setupKey(setupHash), func(v []byte) error { email = string(v); return nil })
		if errors.Is(err, badger.ErrKeyNotFound) {
			return notFound
		}
		if err != nil {
			return err
		}
		if rec, err = loadLogin(txn, email); err != nil {
			return err
		}
		if rec.SetupHash != setupHash || !now.Before(rec.SetupExpires) {
			return notFound
		}
		rec.PasswordHash, rec.SetupHash, rec.SetupExpires, rec.Updated = passwordHash, "", time.Time{}, now.UTC()
		if err := putLogin(txn, &rec); err != nil {
			return err
		}
		if err := txn.Delete(setupKey(setupHash)); err != nil {
			return err
		}
		return endLoginSessions(txn, email)
	})
	if err != nil {
		return store.Login{}, err
	}
	return rec.api(), nil
}

// endLoginSessions deletes every session of the login email.
func endLoginSessions(txn *badger.Txn, email string) error {
	prefix := loginSessionsPrefix(email)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	var keys [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := txn.Delete(sessionKey(string(k[len(prefix):]))); err != nil {
			return err
		}
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// ListLogins lists the logins of account, or every login when account is
// "", by email. It reads every login: there is one per account holder.
func (b *Store) ListLogins(ctx context.Context, account string) ([]store.Login, error) {
	var out []store.Login
	err := b.view(ctx, func(txn *badger.Txn) error {
		return eachRecord(ctx, txn, prefixLogin, func(key, val []byte) error {
			var r loginRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			if account == "" || r.Account == account {
				out = append(out, r.api())
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil // in key order, which is email order
}

// PutSession stores a new session (store.CheckSession); ErrExists for its
// id again.
func (b *Store) PutSession(ctx context.Context, s store.Session) error {
	s, err := store.CheckSession(s)
	if err != nil {
		return err
	}
	rec := sessionRec{ID: s.ID, Operator: s.Operator, Email: s.Email, Account: s.Account, CSRF: s.CSRF,
		Created: s.Created, Seen: s.Seen, Expires: s.Expires}
	return b.update(ctx, func(txn *badger.Txn) error {
		ok, err := exists(txn, sessionKey(s.ID))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("store: session: %w", store.ErrExists)
		}
		return putSession(txn, &rec)
	})
}

// Session returns the session id; ErrNotFound if none (or gone with its
// TTL).
func (b *Store) Session(ctx context.Context, id string) (store.Session, error) {
	var rec sessionRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = loadSession(txn, id)
		return err
	})
	if err != nil {
		return store.Session{}, err
	}
	return rec.api(), nil
}

// TouchSession sets the session's Seen; ErrNotFound if none.
func (b *Store) TouchSession(ctx context.Context, id string, seen time.Time) error {
	return b.update(ctx, func(txn *badger.Txn) error {
		rec, err := loadSession(txn, id)
		if err != nil {
			return err
		}
		rec.Seen = seen.UTC()
		return putSession(txn, &rec)
	})
}

// DeleteSession ends the session; one that does not exist is no error.
func (b *Store) DeleteSession(ctx context.Context, id string) error {
	return b.update(ctx, func(txn *badger.Txn) error {
		rec, err := loadSession(txn, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return deleteSession(txn, &rec)
	})
}

// purgeBatch bounds the sessions one transaction of PurgeSessions deletes,
// well inside badger's transaction size.
const purgeBatch = 1000

// PurgeSessions deletes the sessions that expired (Expires ≤ now) or went
// idle (Seen ≤ idleBefore), purgeBatch to a transaction, and reports how
// many.
func (b *Store) PurgeSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	total := 0
	for {
		n, err := b.purgeSome(ctx, now, idleBefore)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// purgeSome deletes at most purgeBatch of the sessions PurgeSessions
// deletes, in one transaction.
func (b *Store) purgeSome(ctx context.Context, now, idleBefore time.Time) (int, error) {
	var n int
	err := b.update(ctx, func(txn *badger.Txn) error {
		n = 0
		var doomed []sessionRec
		err := eachRecord(ctx, txn, prefixSession, func(key, val []byte) error {
			var r sessionRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			if !r.Expires.After(now) || !r.Seen.After(idleBefore) {
				doomed = append(doomed, r)
			}
			if len(doomed) == purgeBatch {
				return errBatchFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errBatchFull) {
			return err
		}
		for i := range doomed {
			if err := deleteSession(txn, &doomed[i]); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	return n, err
}

// errBatchFull stops purgeSome's scan once it has a batch.
var errBatchFull = errors.New("batch full")

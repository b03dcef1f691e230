package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const keyCols = `id, hash, account, route, exclude, revoked, created, label, limit_nano, reset, expires, allow, spent, held, period_start`

func scanKey(row pgx.Row) (store.Key, error) {
	var (
		k                   store.Key
		limit, spent, held  int64
		expires, periodFrom *time.Time
	)
	if err := row.Scan(&k.ID, &k.Hash, &k.Account, &k.Route, &k.Exclude, &k.Revoked, &k.Created,
		&k.Label, &limit, &k.Reset, &expires, &k.Allow, &spent, &held, &periodFrom); err != nil {
		return store.Key{}, err
	}
	if len(k.Exclude) == 0 {
		k.Exclude = nil
	}
	if len(k.Allow) == 0 {
		k.Allow = nil
	}
	if expires != nil {
		k.Expires = expires.UTC()
	}
	if periodFrom != nil {
		k.PeriodStart = periodFrom.UTC()
	}
	k.Created = k.Created.UTC()
	k.Limit, k.Spent, k.Held = pricing.Nano(limit), pricing.Nano(spent), pricing.Nano(held)
	return k, nil
}

// orNull is t, or NULL for the zero time.
func orNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = exactTime(t)
	return &t
}

// nonNil is a list PostgreSQL keeps as an array, never NULL.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// CreateKey stores k (whose Hash is set) with its settings (label, limit,
// reset, expiry, allow-list) and no spend. Its account must exist
// (ErrNotFound); a duplicate hash or id returns ErrExists (the unique
// constraints decide, so two replicas cannot both create it).
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return err
	}
	if err := store.CheckKeySettings(&k); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO keys (id, hash, account, route, exclude, revoked, created, label, limit_nano, reset, expires, allow)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		k.ID, k.Hash, k.Account, k.Route, nonNil(k.Exclude), k.Revoked, stamp(k.Created),
		k.Label, int64(k.Limit), k.Reset, orNull(k.Expires), nonNil(k.Allow))
	if err != nil {
		return mapErr(fmt.Sprintf("key %q", k.ID), err)
	}
	return nil
}

// UpdateKey changes the settings u sets of the key with this id and
// returns the key; ErrNotFound if no key has the id. Its spend, its period
// and its open holds are kept: a lower limit refuses the next hold that
// does not fit, and a new reset period starts with the next hold in a
// later period. It locks only the key's row, and holds nothing else while
// it does, so it cannot deadlock with the ledger's statements.
func (s *Store) UpdateKey(ctx context.Context, id string, u store.KeyUpdate) (store.Key, error) {
	// Check the settings u sets, as CreateKey would.
	c := store.Key{ID: id}
	var (
		label, reset *string
		limit        *int64
		allow        []string
	)
	if u.Label != nil {
		c.Label, label = *u.Label, u.Label
	}
	if u.Limit != nil {
		c.Limit = *u.Limit
		limit = (*int64)(u.Limit)
	}
	if u.Reset != nil {
		c.Reset, reset = *u.Reset, u.Reset
	}
	if u.Allow != nil {
		c.Allow = *u.Allow
	}
	if err := store.CheckKeySettings(&c); err != nil {
		return store.Key{}, err
	}
	if u.Allow != nil {
		allow = nonNil(c.Allow)
	}
	var expires *time.Time
	if u.Expires != nil {
		expires = orNull(*u.Expires)
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE keys SET label = coalesce($2, label), limit_nano = coalesce($3, limit_nano),
	reset = coalesce($4, reset), expires = CASE WHEN $5 THEN $6::timestamptz ELSE expires END, allow = coalesce($7, allow)
WHERE id = $1 RETURNING `+keyCols, id, label, limit, reset, u.Expires != nil, expires, allow))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, fmt.Errorf("postgres: key %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Key{}, mapErr("update key", err)
	}
	return k, nil
}

// KeyByHash returns the key with this hash, revoked or not; ErrNotFound if
// there is none.
func (s *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if store.CheckKeyHash(hash) != nil {
		return store.Key{}, fmt.Errorf("postgres: key by hash: %w", store.ErrNotFound)
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM keys WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, fmt.Errorf("postgres: key by hash: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Key{}, mapErr("key by hash", err)
	}
	return k, nil
}

// ListKeys lists the keys of account ("" lists all), oldest first, revoked
// ones included. An unknown account returns ErrNotFound.
func (s *Store) ListKeys(ctx context.Context, account string) ([]store.Key, error) {
	if account != "" {
		if _, err := s.Balance(ctx, account); err != nil {
			return nil, err
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+` FROM keys WHERE $1 = '' OR account = $1 ORDER BY created, id`, account)
	if err != nil {
		return nil, mapErr("list keys", err)
	}
	var out []store.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			rows.Close()
			return nil, mapErr("list keys", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list keys", err)
	}
	return out, nil
}

// RevokeKey marks the key revoked and returns it; revoking a revoked key
// changes nothing. ErrNotFound if no key has the id.
func (s *Store) RevokeKey(ctx context.Context, id string) (store.Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE keys SET revoked = true WHERE id = $1 RETURNING `+keyCols, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, fmt.Errorf("postgres: key %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Key{}, mapErr("revoke key", err)
	}
	return k, nil
}

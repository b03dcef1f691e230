package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/store"
)

const keyCols = `id, hash, account, route, exclude, revoked, created`

func scanKey(row pgx.Row) (store.Key, error) {
	var k store.Key
	if err := row.Scan(&k.ID, &k.Hash, &k.Account, &k.Route, &k.Exclude, &k.Revoked, &k.Created); err != nil {
		return store.Key{}, err
	}
	if len(k.Exclude) == 0 {
		k.Exclude = nil
	}
	k.Created = k.Created.UTC()
	return k, nil
}

// CreateKey stores k (whose Hash is set). Its account must exist
// (ErrNotFound); a duplicate hash or id returns ErrExists (the unique
// constraints decide, so two replicas cannot both create it).
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return err
	}
	exclude := k.Exclude
	if exclude == nil {
		exclude = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO keys (`+keyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Hash, k.Account, k.Route, exclude, k.Revoked, stamp(k.Created))
	if err != nil {
		return mapErr(fmt.Sprintf("key %q", k.ID), err)
	}
	return nil
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

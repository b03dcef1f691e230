package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"sort"

	"github.com/dgraph-io/badger/v4"
)

// CreateKey stores k, whose Hash is already set (HashKey of the plaintext).
// Its account must exist (ErrNotFound); its Route must be set; a duplicate
// hash or id returns ErrExists. A zero k.Created is set to now.
func (b *Store) CreateKey(ctx context.Context, k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return err
	}
	if k.Created.IsZero() {
		k.Created = now()
	}
	k.Created = k.Created.UTC()
	rec := keyRecOf(k)
	return b.update(ctx, func(txn *badger.Txn) error {
		if _, err := loadAccount(txn, k.Account); err != nil {
			return err
		}
		for _, c := range []struct {
			key   []byte
			field string
		}{{keyKey(k.Hash), "hash"}, {keyIDKey(k.ID), "id"}} {
			ok, err := exists(txn, c.key)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("store: key %q: %s: %w", k.ID, c.field, store.ErrExists)
			}
		}
		if err := putKey(txn, &rec); err != nil {
			return err
		}
		return txn.Set(keyIDKey(k.ID), []byte(k.Hash))
	})
}

// KeyByHash returns the key with this hash, revoked or not (the caller
// refuses revoked keys); ErrNotFound if there is none.
func (b *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if store.CheckKeyHash(hash) != nil {
		return store.Key{}, fmt.Errorf("store: key by hash: %w", store.ErrNotFound)
	}
	var rec keyRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = getKey(txn, keyKey(hash))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: key by hash: %w", store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return store.Key{}, err
	}
	return rec.api(), nil
}

// ListKeys lists the keys of account, or of every account when account is
// "", oldest first, revoked ones included. An unknown account returns
// ErrNotFound.
func (b *Store) ListKeys(ctx context.Context, account string) ([]store.Key, error) {
	var out []store.Key
	err := b.view(ctx, func(txn *badger.Txn) error {
		if account != "" {
			if _, err := loadAccount(txn, account); err != nil {
				return err
			}
		}
		prefix := []byte(prefixKey)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			var rec keyRec
			if err := it.Item().Value(func(v []byte) error { return rec.decode(it.Item().Key(), v) }); err != nil {
				return err
			}
			if account == "" || rec.Account == account {
				out = append(out, rec.api())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RevokeKey marks the key with this id revoked and returns it; revoking a
// revoked key changes nothing. ErrNotFound if no key has the id.
func (b *Store) RevokeKey(ctx context.Context, id string) (store.Key, error) {
	var rec keyRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		rec = keyRec{}
		item, err := txn.Get(keyIDKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: key %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		hash, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if rec, err = getKey(txn, keyKey(string(hash))); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("store: key %q: id points at a missing hash: %w", id, store.ErrNotFound)
			}
			return err
		}
		if rec.Revoked {
			return nil
		}
		rec.Revoked = true
		return putKey(txn, &rec)
	})
	if err != nil {
		return store.Key{}, err
	}
	return rec.api(), nil
}

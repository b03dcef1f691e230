package badger

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"

	"github.com/dgraph-io/badger/v4"
)

// CreateKey stores k, whose Hash is already set (HashKey of the plaintext),
// with its settings (label, limit, reset, expiry, allow-list: checkSettings)
// and no spend. Its account must exist (ErrNotFound); its Route must be
// set; a duplicate hash or id returns ErrExists. A zero k.Created is set to
// now.
func (b *Store) CreateKey(ctx context.Context, k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return err
	}
	if k.Created.IsZero() {
		k.Created = now()
	}
	k.Created = k.Created.UTC()
	rec := keyRecOf(k)
	if err := checkSettings(&rec); err != nil {
		return err
	}
	// Under the account's stripe, like every writer of a key record, so
	// that Hold's copy of the key (publishKey) is the committed one.
	defer b.lock(k.Account)()
	err := b.update(ctx, func(txn *badger.Txn) error {
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
	if err != nil {
		return err
	}
	b.publishKey(&rec)
	return nil
}

// checkSettings checks a key record's settings and puts them in the form
// the ledger keeps (store.CheckKeySettings).
func checkSettings(r *keyRec) error {
	k := store.Key{ID: r.ID, Label: r.Label, Limit: pricing.Nano(r.Limit), Reset: r.Reset, Expires: r.Expires, Allow: r.Allow}
	if err := store.CheckKeySettings(&k); err != nil {
		return err
	}
	r.Expires, r.Allow = k.Expires, k.Allow
	return nil
}

// KeyByHash returns the key with this hash, revoked or not (the caller
// refuses revoked keys); ErrNotFound if there is none. Its spend is the
// ledger's; Held counts its holds open in this process.
func (b *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if store.CheckKeyHash(hash) != nil {
		return store.Key{}, fmt.Errorf("store: key by hash: %w", store.ErrNotFound)
	}
	var rec keyRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = getKeySpent(txn, keyKey(hash))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: key by hash: %w", store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return store.Key{}, err
	}
	return b.mem.keyView(rec), nil
}

// ListKeys lists the keys of account, or of every account when account is
// "", oldest first, revoked ones included. An unknown account returns
// ErrNotFound.
func (b *Store) ListKeys(ctx context.Context, account string) ([]store.Key, error) {
	var recs []keyRec
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
			if account != "" && rec.Account != account {
				continue
			}
			var err error
			if rec.spend, err = getSpend(txn, rec.ID); err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Key, len(recs))
	for i, r := range recs {
		out[i] = b.mem.keyView(r)
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
	return b.changeKey(ctx, id, func(r *keyRec) (bool, error) {
		if r.Revoked {
			return false, nil
		}
		r.Revoked = true
		return true, nil
	})
}

// UpdateKey changes the settings u sets of the key with this id and returns
// the key; ErrNotFound if no key has the id. Its spend, its period and its
// open holds are kept: a lower limit refuses the next hold that does not
// fit, and a new reset period starts with the next hold in a later period.
func (b *Store) UpdateKey(ctx context.Context, id string, u store.KeyUpdate) (store.Key, error) {
	return b.changeKey(ctx, id, func(r *keyRec) (bool, error) {
		if u.Label != nil {
			r.Label = *u.Label
		}
		if u.Limit != nil {
			r.Limit = int64(*u.Limit)
		}
		if u.Reset != nil {
			r.Reset = *u.Reset
		}
		if u.Expires != nil {
			r.Expires = *u.Expires
		}
		if u.Allow != nil {
			r.Allow = *u.Allow
		}
		return true, checkSettings(r)
	})
}

// changeKey applies change to the key with this id, in a transaction under
// its account's stripe (every writer of a key record takes it: see
// keyMem), and writes it back when change reports a change.
func (b *Store) changeKey(ctx context.Context, id string, change func(*keyRec) (bool, error)) (store.Key, error) {
	if err := store.CheckID("key", id); err != nil {
		return store.Key{}, fmt.Errorf("store: key %q: %w", id, store.ErrNotFound)
	}
	var rec keyRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = keyByID(txn, id)
		return err
	})
	if err != nil {
		return store.Key{}, err
	}
	account := rec.Account // a key never changes account
	defer b.lock(account)()
	changed := false
	err = b.update(ctx, func(txn *badger.Txn) error {
		var err error
		if rec, err = keyByID(txn, id); err != nil {
			return err
		}
		if changed, err = change(&rec); err != nil || !changed {
			return err
		}
		return putKey(txn, &rec)
	})
	if err != nil {
		return store.Key{}, err
	}
	if changed {
		b.publishKey(&rec)
	}
	return b.mem.keyView(rec), nil
}

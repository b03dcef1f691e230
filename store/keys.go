package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"
)

// Shapes of generated keys.
const (
	KeyPrefix   = "sk-"  // every plaintext key starts with it
	KeyIDPrefix = "key_" // every key id starts with it
	keyChars    = 48     // base62 characters after KeyPrefix (≈285 bits)
	keyIDChars  = 12     // base62 characters after KeyIDPrefix
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewKey makes a new API key: plaintext is "sk-" and 48 base62 characters
// from crypto/rand, shown to the operator once and never stored; id is
// "key_" and 12 base62 characters, the public name safe for logs; hash is
// HashKey(plaintext), what the store keeps.
func NewKey() (plaintext, id, hash string, err error) {
	secret, err := randomBase62(keyChars)
	if err != nil {
		return "", "", "", fmt.Errorf("store: new key: %w", err)
	}
	idPart, err := randomBase62(keyIDChars)
	if err != nil {
		return "", "", "", fmt.Errorf("store: new key id: %w", err)
	}
	plaintext = KeyPrefix + secret
	return plaintext, KeyIDPrefix + idPart, HashKey(plaintext), nil
}

// HashKey is the lowercase hex SHA-256 of a plaintext key, the form keys are
// stored and looked up in.
func HashKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// randomBase62 draws n uniform base62 characters from crypto/rand, rejecting
// bytes ≥ 248 so that every character is equally likely.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, c := range buf {
			if c >= 248 { // 248 = 4 × 62
				continue
			}
			out = append(out, base62[c%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// CreateKey stores k, whose Hash is already set (HashKey of the plaintext).
// Its account must exist (ErrNotFound); its Route must be set; a duplicate
// hash or id returns ErrExists. A zero k.Created is set to now.
func (b *Badger) CreateKey(ctx context.Context, k Key) error {
	if err := CheckID("key", k.ID); err != nil {
		return err
	}
	if err := CheckKeyHash(k.Hash); err != nil {
		return err
	}
	if err := CheckAccountID(k.Account); err != nil {
		return err
	}
	if k.Route == "" {
		return fmt.Errorf("store: key %q: route is empty (a route name or %q)", k.ID, AutoRoute)
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
				return fmt.Errorf("store: key %q: %s: %w", k.ID, c.field, ErrExists)
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
func (b *Badger) KeyByHash(ctx context.Context, hash string) (Key, error) {
	if CheckKeyHash(hash) != nil {
		return Key{}, fmt.Errorf("store: key by hash: %w", ErrNotFound)
	}
	var rec keyRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = getKey(txn, keyKey(hash))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: key by hash: %w", ErrNotFound)
		}
		return err
	})
	if err != nil {
		return Key{}, err
	}
	return rec.api(), nil
}

// ListKeys lists the keys of account, or of every account when account is
// "", oldest first, revoked ones included. An unknown account returns
// ErrNotFound.
func (b *Badger) ListKeys(ctx context.Context, account string) ([]Key, error) {
	var out []Key
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
func (b *Badger) RevokeKey(ctx context.Context, id string) (Key, error) {
	var rec keyRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		rec = keyRec{}
		item, err := txn.Get(keyIDKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: key %q: %w", id, ErrNotFound)
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
				return fmt.Errorf("store: key %q: id points at a missing hash: %w", id, ErrNotFound)
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
		return Key{}, err
	}
	return rec.api(), nil
}

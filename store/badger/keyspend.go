package badger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// # Key limits
//
// A hold with a key id of its account reserves against the key's limit as
// against the account's credit, in the same step under the same lock: Hold
// keeps each key it meets in memory with its account (keyMem: its records
// as last committed and the sum of its open holds), and admits the hold
// only if both cover it; else neither is touched. Settle adds the charge to
// the key's spend record in the transaction that takes it from the
// account. So concurrency cannot take a key past its limit any more than
// an account past its credit; an overrun can, by the same bound. A hold
// dated in a later period than the key's (a reset: daily, weekly, monthly
// in UTC) first starts that period in the ledger, spend 0, in a
// transaction of its own under the account's stripe: one per key per
// period. The first Hold of a key in a process reads it, as for an account;
// a key id that names no key of the account limits nothing (and is
// remembered as such until CreateKey). A key's open holds are never
// written: like an account's, they end with their process, and recovery
// releases them, so a new process starts with the key's Held at 0.

// A key's spend is kept beside its account's credit (see "Key
// limits" above): its spend record holds the spend of its period and the
// period's start, written by the Settle that charges a call of the key (in
// the transaction that takes the charge from the account) and by the Hold
// that starts a new period; its open holds are counted in memory
// (keyMem.held), like the account's, so Hold decides on both under the
// account's lock.

// admit returns the acctMem of hr's account with its record loaded and its
// mu held, for Hold to decide on; and the keyMem of hr's key when it names
// a key of the account, loaded and in the period of hr.Created (nil when
// it names none). Usually it only takes mu. The first Hold of an account or
// of a key in this process reads them from the ledger, and the first Hold
// in a key's new period rolls the period there (spend 0 from the new
// start), under the account's stripe, which keeps every writer out; that
// transaction is at most one per key per period.
func (b *Store) admit(ctx context.Context, hr *holdRec) (*acctMem, *keyMem, error) {
	a := b.mem.account(hr.Account)
	a.mu.Lock()
	if k, ok := a.ready(hr); ok {
		return a, k, nil
	}
	a.mu.Unlock()
	defer b.lock(hr.Account)()
	a.mu.Lock()
	if err := b.prepare(ctx, a, hr); err != nil {
		a.mu.Unlock()
		return nil, nil, err
	}
	k, _ := a.ready(hr)
	return a, k, nil
}

// ready reports whether Hold can decide on hr with a as it is (a.mu held):
// the account and hr's key are loaded and the key is in hr's period. k is
// the key, nil when hr names none of the account's.
func (a *acctMem) ready(hr *holdRec) (k *keyMem, ok bool) {
	if !a.loaded {
		return nil, false
	}
	if hr.KeyID == "" {
		return nil, true
	}
	k = a.keys[hr.KeyID]
	switch {
	case k == nil || !k.loaded:
		return nil, false
	case !k.exists:
		return nil, true
	case rolls(&k.rec, hr.Created):
		return nil, false
	}
	return k, true
}

// rolls reports whether a hold created at begins a new period of the key:
// its period starts after the key's. (A hold dated in an earlier period
// than the key's counts in the key's.)
func rolls(k *keyRec, at time.Time) bool {
	return k.Reset != store.ResetNever && store.PeriodStart(k.Reset, at).After(k.spend.PeriodStart)
}

// left is what the key's limit leaves for a new hold: the limit less the
// period's spend and the open holds; below zero after an overrun or a
// lowered limit. Spent and held are never negative.
func (k *keyMem) left() int64 {
	used := k.rec.spend.Spent + k.held
	if used < 0 { // overflowed: no limit is that high
		used = math.MaxInt64
	}
	return k.rec.Limit - used
}

// prepare loads what hr needs of the ledger into a and rolls its key's
// period, with the account's stripe and a.mu held.
func (b *Store) prepare(ctx context.Context, a *acctMem, hr *holdRec) error {
	var k *keyMem
	if hr.KeyID != "" {
		if k = a.keys[hr.KeyID]; k == nil {
			if a.keys == nil {
				a.keys = make(map[string]*keyMem)
			}
			k = &keyMem{}
			a.keys[hr.KeyID] = k
		}
	}
	if !a.loaded || (k != nil && !k.loaded) {
		var (
			acct   accountRec
			key    keyRec
			exists bool
		)
		err := b.view(ctx, func(txn *badger.Txn) error {
			var err error
			if acct, err = loadAccount(txn, hr.Account); err != nil || k == nil {
				return err
			}
			key, err = keyByID(txn, hr.KeyID)
			exists = err == nil && key.Account == hr.Account
			if errors.Is(err, store.ErrNotFound) {
				err = nil // a key id that names no key limits nothing
			}
			return err
		})
		if err != nil {
			return err
		}
		a.rec, a.loaded = acct, true
		if k != nil {
			k.loaded, k.exists = true, exists
			if exists {
				k.rec = key
			}
		}
	}
	if k == nil || !k.exists || !rolls(&k.rec, hr.Created) {
		return nil
	}
	next := spendRec{PeriodStart: store.PeriodStart(k.rec.Reset, hr.Created)}
	if err := b.update(ctx, func(txn *badger.Txn) error { return putSpend(txn, hr.KeyID, &next) }); err != nil {
		k.loaded = false
		return fmt.Errorf("store: key %q: starting its period: %w", hr.KeyID, err)
	}
	k.rec.spend = next
	return nil
}

// keyOf returns the spend record of the key h reserved against as this
// process last committed it, and whether it is loaded (else the ledger's
// must be read); the zero record when h reserved against no key. The
// caller holds the account's stripe, so no writer changes it meanwhile.
func (b *Store) keyOf(h *openHold) (spendRec, bool) {
	if h.key == nil {
		return spendRec{}, false
	}
	a := b.mem.account(h.rec.Account)
	a.mu.Lock()
	defer a.mu.Unlock()
	return h.key.rec.spend, h.key.loaded
}

// spend adds charge to the period's spend of the key k (nil: none; last
// and loaded as keyOf returned them) of the hold hr in txn, and returns
// the record it wrote, or nil when it wrote none.
func spend(txn *badger.Txn, hr *holdRec, k *keyMem, last spendRec, loaded bool, charge pricing.Nano) (*spendRec, error) {
	if k == nil {
		return nil, nil
	}
	rec := last
	if !loaded {
		var err error
		if rec, err = getSpend(txn, hr.KeyID); err != nil {
			return nil, err
		}
	}
	rec.Spent += int64(charge)
	if rec.Spent < 0 { // overflowed: it stays at the most it can say
		rec.Spent = math.MaxInt64
	}
	if err := putSpend(txn, hr.KeyID, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// keyByID reads the key with this id and its spend; ErrNotFound if there
// is none.
func keyByID(txn *badger.Txn, id string) (keyRec, error) {
	item, err := txn.Get(keyIDKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return keyRec{}, fmt.Errorf("store: key %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return keyRec{}, err
	}
	hash, err := item.ValueCopy(nil)
	if err != nil {
		return keyRec{}, err
	}
	rec, err := getKeySpent(txn, keyKey(string(hash)))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return keyRec{}, fmt.Errorf("store: key %q: id points at a missing hash: %w", id, store.ErrNotFound)
	}
	return rec, err
}

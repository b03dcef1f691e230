package badger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

var (
	_ store.KeyLimits = (*Store)(nil)
	_ store.Books     = (*Store)(nil)
)

// Generation is the call requestID of account as its outcome and its
// journal entry have it: a settled or recovered call's usage, note and key
// are its entry's; a released call has no entry, and its outcome keeps its
// key, model, route and endpoint (outcome v3; a release written before has
// none). ErrNotFound if the call has not ended, never existed or is
// another account's.
func (b *Store) Generation(ctx context.Context, account, requestID string) (store.Generation, error) {
	notFound := fmt.Errorf("store: generation %q: %w", requestID, store.ErrNotFound)
	if store.CheckID("request", requestID) != nil || store.CheckAccountID(account) != nil {
		return store.Generation{}, notFound
	}
	var g store.Generation
	err := b.view(ctx, func(txn *badger.Txn) error {
		o, err := getOutcome(txn, doneKey(requestID))
		if errors.Is(err, badger.ErrKeyNotFound) || (err == nil && o.Account != account) {
			return notFound
		}
		if err != nil {
			return err
		}
		g = store.Generation{RequestID: requestID, Account: o.Account, KeyID: o.KeyID, Model: o.Model,
			Route: o.Route, Endpoint: o.Endpoint, State: o.State, HoldAmount: pricing.Nano(o.HoldAmount),
			Charge: pricing.Nano(o.Charge), Note: o.Reason, Time: o.Time}
		if o.Seq == 0 { // released: no journal entry
			return nil
		}
		key := journalKey(account, o.Seq)
		var e entryRec
		err = getValue(txn, key, func(val []byte) error { return e.decode(key, val) })
		if err == nil && e.RequestID != requestID {
			err = fmt.Errorf("it is an entry of request %q", e.RequestID)
		}
		if err != nil {
			return fmt.Errorf("store: generation %q: journal entry %d of account %q: %w", requestID, o.Seq, account, err)
		}
		g.KeyID, g.Model, g.Route, g.Endpoint = e.KeyID, e.Model, e.Route, e.Endpoint
		g.Usage, g.HoldAmount, g.Note = e.Usage.api(), pricing.Nano(e.HoldAmount), e.Note
		return nil
	})
	if err != nil {
		return store.Generation{}, err
	}
	g.Estimated = g.State == store.OutcomeSettled && store.Estimated(g.Note)
	return g, nil
}

// Journal calls fn with the account's entries whose time is in [from, to),
// in sequence order, from one snapshot; it stops at fn's first error and
// returns it. It reads the account's whole journal: entry times follow the
// clock, which may step back, so they are not an index. ErrNotFound for an
// unknown account.
func (b *Store) Journal(ctx context.Context, account string, from, to time.Time, fn func(store.Entry) error) error {
	if store.CheckAccountID(account) != nil {
		return fmt.Errorf("store: account %q: %w", account, store.ErrNotFound)
	}
	return b.view(ctx, func(txn *badger.Txn) error {
		if _, err := loadAccount(txn, account); err != nil {
			return err
		}
		return eachRecord(ctx, txn, string(journalPrefix(account)), func(key, val []byte) error {
			var e entryRec
			if err := e.decode(key, val); err != nil {
				return err
			}
			if e.Time.Before(from) || !e.Time.Before(to) {
				return nil
			}
			return fn(e.api())
		})
	})
}

// SetAlert sets the account's low-balance threshold (0: none) and returns
// the account; ErrNotFound for an unknown account.
func (b *Store) SetAlert(ctx context.Context, account string, below pricing.Nano) (store.Account, error) {
	if below < 0 {
		return store.Account{}, fmt.Errorf("store: account %q: alert threshold %d nano-USD is negative", account, below)
	}
	if store.CheckAccountID(account) != nil {
		return store.Account{}, fmt.Errorf("store: account %q: %w", account, store.ErrNotFound)
	}
	defer b.lock(account)()
	var acct accountRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		var err error
		if acct, err = loadAccount(txn, account); err != nil {
			return err
		}
		acct.AlertBelow = int64(below)
		return putAccount(txn, &acct)
	})
	if err := b.afterWrite(account, &acct, err); err != nil {
		return store.Account{}, err
	}
	return b.mem.view(acct), nil
}

// AccountsBelowAlert counts the accounts whose available credit (balance
// less every open hold) is under their threshold. It reads every account.
func (b *Store) AccountsBelowAlert(ctx context.Context) (int, error) {
	n := 0
	err := b.view(ctx, func(txn *badger.Txn) error {
		n = 0
		return eachRecord(ctx, txn, prefixAccount, func(key, val []byte) error {
			var r accountRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			if a := b.mem.view(r); a.AlertBelow > 0 && a.Available() < a.AlertBelow {
				n++
			}
			return nil
		})
	})
	return n, err
}

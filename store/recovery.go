package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// RecoverHolds resolves the holds a process that ended left open: every open
// hold whose Owner is not this process's owner is released, with a
// KindRecovery journal entry (Amount 0, HoldAmount set) and an Outcome in
// state OutcomeRecovered. The call behind such a hold can no longer settle
// (the connection to the client died with that process), and its usage is
// unknown, so the customer is not charged for an answer they may never have
// received. Call it once after OpenBadger and before serving; holds this
// process takes meanwhile are never touched.
func (b *Badger) RecoverHolds(ctx context.Context) (released int, err error) {
	holds, err := b.OpenHolds(ctx)
	if err != nil {
		return 0, err
	}
	for _, h := range holds {
		if h.Owner == b.owner {
			continue
		}
		ok, err := b.recoverHold(ctx, h)
		if err != nil {
			return released, err
		}
		if ok {
			released++
			b.log.Info("store: released a hold left by an ended process",
				"request_id", h.RequestID, "account", h.Account, "hold_nano", int64(h.Amount), "owner", h.Owner)
		}
	}
	return released, nil
}

// RecoveryNote is the note of the KindRecovery entry of a hold owned by
// owner.
func RecoveryNote(owner string) string {
	return "hold released at start-up: owner " + owner + " ended without settling"
}

func (b *Badger) recoverHold(ctx context.Context, h Hold) (bool, error) {
	defer b.lock(h.Account)()
	var done bool
	err := b.update(ctx, func(txn *badger.Txn) error {
		done = false
		hr, acct, err := openHold(txn, h.RequestID, h.Account)
		if errors.Is(err, ErrAlreadySettled) || errors.Is(err, ErrNoHold) {
			return nil // ended since OpenHolds read it
		}
		if err != nil {
			return err
		}
		if hr.Owner == b.owner {
			return nil
		}
		note := clip(RecoveryNote(hr.Owner))
		acct.Held -= hr.Amount
		e, err := journal(txn, &acct, entryRec{
			Kind: KindRecovery, RequestID: hr.RequestID, KeyID: hr.KeyID, Model: hr.Model,
			Route: hr.Route, Endpoint: hr.Endpoint, HoldAmount: hr.Amount, Amount: 0, Note: note,
		})
		if err != nil {
			return err
		}
		done = true
		return closeHold(txn, hr, outcomeRec{State: OutcomeRecovered, Seq: e.Seq, Reason: note})
	})
	return done, err
}

// OpenHolds lists every open hold, oldest first.
func (b *Badger) OpenHolds(ctx context.Context) ([]Hold, error) {
	var out []Hold
	err := b.view(ctx, func(txn *badger.Txn) error {
		return eachHold(txn, func(hr holdRec) { out = append(out, hr.api()) })
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].RequestID < out[j].RequestID
	})
	return out, nil
}

// HeldTotal sums the open holds of account ("" sums every account's), read
// from the holds themselves; it equals Account.Held in a consistent store.
func (b *Badger) HeldTotal(ctx context.Context, account string) (pricing.Nano, error) {
	var sum pricing.Nano
	err := b.view(ctx, func(txn *badger.Txn) error {
		return eachHold(txn, func(hr holdRec) {
			if account == "" || hr.Account == account {
				sum += pricing.Nano(hr.Amount)
			}
		})
	})
	return sum, err
}

func eachHold(txn *badger.Txn, fn func(holdRec)) error {
	prefix := []byte(prefixHold)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		var hr holdRec
		if err := it.Item().Value(func(v []byte) error { return hr.decode(it.Item().Key(), v) }); err != nil {
			return err
		}
		fn(hr)
	}
	return nil
}

// AuditReport is one account's books, read in one consistent snapshot.
type AuditReport struct {
	Account     Account
	Entries     int
	LastSeq     uint64       // the last entry's sequence number
	Credits     pricing.Nano // Σ KindCredit amounts
	Charges     pricing.Nano // Σ KindCharge amounts, as a positive number
	Refunds     pricing.Nano // Σ KindRefund amounts
	Journal     pricing.Nano // Σ every entry's signed amount
	OpenHolds   int
	HeldByHolds pricing.Nano // Σ the open holds' amounts
	Problems    []string     // every broken invariant; empty when the books hold
}

// Err is nil when the books hold, or an error listing every problem.
func (r AuditReport) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	errs := make([]error, len(r.Problems))
	for i, p := range r.Problems {
		errs[i] = errors.New(p)
	}
	return fmt.Errorf("store: audit of account %q: %w", r.Account.ID, errors.Join(errs...))
}

// Audit reads the account's journal and holds and checks the invariants:
// the balance equals the sum of the journal's amounts; every entry's
// BalanceAfter equals the running sum; sequence numbers run 1, 2, 3 … up to
// the account's counter; Held equals the sum of the open holds. Problems are
// reported in the result, not as the error, which is for failing to read.
func (b *Badger) Audit(ctx context.Context, account string) (AuditReport, error) {
	var r AuditReport
	err := b.view(ctx, func(txn *badger.Txn) error {
		r = AuditReport{}
		acct, err := loadAccount(txn, account)
		if err != nil {
			return err
		}
		r.Account = acct.api()
		prefix := journalPrefix(account)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			key := it.Item().KeyCopy(nil)
			seq, err := journalSeq(account, key)
			if err != nil {
				return err
			}
			var e entryRec
			if err := it.Item().Value(func(v []byte) error { return e.decode(key, v) }); err != nil {
				return err
			}
			r.Entries++
			if seq != r.LastSeq+1 || e.Seq != seq {
				r.Problems = append(r.Problems, fmt.Sprintf("entry key seq %d (record seq %d) follows seq %d", seq, e.Seq, r.LastSeq))
			}
			r.LastSeq = seq
			r.Journal += pricing.Nano(e.Amount)
			switch e.Kind {
			case KindCredit:
				r.Credits += pricing.Nano(e.Amount)
			case KindCharge:
				r.Charges -= pricing.Nano(e.Amount)
			case KindRefund:
				r.Refunds += pricing.Nano(e.Amount)
			case KindRecovery:
				if e.Amount != 0 {
					r.Problems = append(r.Problems, fmt.Sprintf("recovery entry %d moves %d nano-USD", seq, e.Amount))
				}
			default:
				r.Problems = append(r.Problems, fmt.Sprintf("entry %d has unknown kind %q", seq, e.Kind))
			}
			if pricing.Nano(e.BalanceAfter) != r.Journal {
				r.Problems = append(r.Problems, fmt.Sprintf("entry %d: balance_after %d, running sum %d", seq, e.BalanceAfter, r.Journal))
			}
		}
		if r.LastSeq != acct.Seq {
			r.Problems = append(r.Problems, fmt.Sprintf("last entry seq %d, account counter %d", r.LastSeq, acct.Seq))
		}
		if r.Journal != r.Account.Balance {
			r.Problems = append(r.Problems, fmt.Sprintf("balance %d, journal sum %d", r.Account.Balance, r.Journal))
		}
		if err := eachHold(txn, func(hr holdRec) {
			if hr.Account == account {
				r.OpenHolds++
				r.HeldByHolds += pricing.Nano(hr.Amount)
			}
		}); err != nil {
			return err
		}
		if r.HeldByHolds != r.Account.Held {
			r.Problems = append(r.Problems, fmt.Sprintf("held %d, open holds sum %d", r.Account.Held, r.HeldByHolds))
		}
		return nil
	})
	return r, err
}

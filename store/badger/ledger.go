package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// # Transactions
//
// Every balance change, its journal entry, the counter and the outcome of
// the hold it ends commit in one badger transaction, or not at all. Badger
// transactions are optimistic (serialisable snapshot isolation): a commit
// whose reads were changed by another commit fails with ErrConflict. To
// keep that from failing calls under load, the writers of an account and
// of its keys (CreateAccount, Credit, SetAlert, Settle, Release,
// RefundJob, recovery; CreateKey, UpdateKey, RevokeKey, and the Hold that
// starts a key's period) are serialised inside the process by one of 256
// striped mutexes (FNV-1a of the account id), and a
// transaction that still conflicts — on a key shared by two accounts, such
// as a request id reused across them — is retried, at most 64 times. Two
// hundred concurrent settles on one account therefore run one after another
// against the real balance, and none fails spuriously. Settle, Release and
// RefundJob ignore cancellation of their context: the call has happened and
// its books must close. They wait for their commit (and its fsync when
// SyncWrites is on). Settle reads the account and the request id's outcome
// key and writes three keys: the journal entry, the account and the
// outcome, and a fourth, the key's spend record, for a call of a key;
// Release writes the outcome alone.
//
// Exactly once: Settle and Release end a hold under its account's stripe,
// write done/<request id> in the transaction that charges it (checking it
// is not there), and only then remove the hold from memory, so a second
// Settle or Release finds the outcome and returns ErrAlreadySettled; a
// hold taken again on an ended id is refused when it ends (see holdlog.go).
// RefundJob sets the job's Refunded flag in the transaction that credits
// the refund.
//
// # The overrun bound
//
// Settle takes the charge in full even when the real usage cost more than
// the hold (the quote is the most a call can cost, so this should be rare:
// a plugin's estimate, a stream settled from a documented estimate). That is
// the only way a balance goes below zero. It is bounded: Hold refuses any
// hold, even a zero one, while the balance is at or below zero, and otherwise
// admits only what Available (balance − open holds) covers. So each call can
// take at most its own overrun (charge − hold) beyond the credit it was
// admitted on, a negative balance is at most the sum of the overruns of the
// calls that were in flight together (one call's, when calls run one at a
// time), and no call is admitted on credit already owed.

// CreateAccount creates an empty account; ErrExists if it is present.
func (b *Store) CreateAccount(ctx context.Context, id string) (store.Account, error) {
	if err := store.CheckAccountID(id); err != nil {
		return store.Account{}, err
	}
	defer b.lock(id)()
	var out accountRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		ok, err := exists(txn, accountKey(id))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("store: account %q: %w", id, store.ErrExists)
		}
		out = accountRec{ID: id, Created: now()}
		return putAccount(txn, &out)
	})
	if err := b.afterWrite(id, &out, err); err != nil {
		return store.Account{}, err
	}
	return out.api(), nil
}

// Credit adds amount (> 0) to the account's balance, creating the account if
// it does not exist, and journals a KindCredit entry.
func (b *Store) Credit(ctx context.Context, account string, amount pricing.Nano, note string) (store.Entry, error) {
	if err := store.CheckAccountID(account); err != nil {
		return store.Entry{}, err
	}
	if amount <= 0 {
		return store.Entry{}, fmt.Errorf("store: credit to account %q: amount %d nano-USD is not positive", account, amount)
	}
	defer b.lock(account)()
	var (
		out  entryRec
		acct accountRec
	)
	err := b.update(ctx, func(txn *badger.Txn) error {
		var err error
		acct, err = loadAccount(txn, account)
		if errors.Is(err, store.ErrNotFound) {
			acct, err = accountRec{ID: account, Created: now()}, nil
		}
		if err != nil {
			return err
		}
		bal, err := addBalance(account, pricing.Nano(acct.Balance), amount)
		if err != nil {
			return err
		}
		acct.Balance = int64(bal)
		out, err = journal(txn, &acct, entryRec{Kind: store.KindCredit, Amount: int64(amount), Note: store.ClipNote(note)})
		return err
	})
	if err := b.afterWrite(account, &acct, err); err != nil {
		return store.Entry{}, err
	}
	return out.api(), nil
}

// Hold reserves h.Amount (≥ 0) of the account's available credit under
// h.RequestID and, when h.KeyID names a key of the account, of that key's
// spend limit. The account must exist (ErrNotFound); a request id with an
// open hold returns ErrExists. A balance at or below zero is always
// insufficient, even for a zero hold; otherwise Available() below h.Amount
// is; and so is a key whose limit, less its spend in the period of
// h.Created and its open holds, is below h.Amount. Each returns
// *InsufficientError with the numbers and the limit that refused; a refused
// hold reserves nothing anywhere. A key without a limit (0) limits nothing
// but still counts its spend; a key id that names no key of the account is
// ignored. h.Owner is always set to this process's owner; a zero h.Created
// to now.
//
// Hold works in memory and does not touch badger (see holdlog.go): it
// decides on the account's last committed balance and the key's last
// committed spend, appends the hold to the hold log, so that it survives a
// crash, and counts it in the account's and the key's Held. Only the first
// Hold of an account or a key in this process reads it, and the first in a
// key's new period writes the period (admit). It does not read the ledger,
// so it cannot see that a request id has already ended; the hold's Settle
// or Release does, and refuses it with ErrExists.
func (b *Store) Hold(ctx context.Context, h store.Hold) error {
	if err := store.CheckHold(h); err != nil {
		return err
	}
	h.Owner = b.owner
	if h.Created.IsZero() {
		h.Created = now()
	}
	h.Created = h.Created.UTC()
	rec := holdRecOf(h)
	val, err := rec.encode(holdKey(rec.RequestID))
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return errClosed
	}
	a, k, err := b.admit(ctx, &rec)
	if errors.Is(err, badger.ErrDBClosed) { // Close ran since the check above
		return errClosed
	}
	if err != nil {
		return err
	}
	defer a.mu.Unlock()
	s := b.mem.stripe(rec.RequestID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.holds[rec.RequestID]; ok {
		return fmt.Errorf("store: hold %q: request id: %w", rec.RequestID, store.ErrExists)
	}
	balance := pricing.Nano(a.rec.Balance)
	available := balance - pricing.Nano(a.rec.Held+a.held)
	if balance <= 0 || available < h.Amount {
		return &store.InsufficientError{Needed: h.Amount, Available: available, Limit: store.LimitAccount}
	}
	if k != nil && k.rec.Limit > 0 {
		if left := k.left(); left < rec.Amount {
			return &store.InsufficientError{Needed: h.Amount, Available: pricing.Nano(max(0, left)), Limit: store.LimitKey}
		}
	}
	seg, err := b.holdLog.append(val)
	if err != nil {
		return fmt.Errorf("store: hold %q: %w", rec.RequestID, err)
	}
	s.holds[rec.RequestID] = &openHold{rec: rec, seg: seg, key: k}
	a.held += rec.Amount // cannot overflow: held ≤ balance
	if k != nil {
		k.held += rec.Amount // cannot overflow: held ≤ the account's
	}
	return nil
}

// Settle charges the call and releases its hold, exactly once per request
// id; a hold that reserved against a key adds the charge to the key's
// spend in its period, in the same transaction. The charge is taken in
// full even when it is above the hold: this is the only way a balance (or
// a key's spend) goes past what admission allowed, and each call takes at
// most its own overrun (Charge − hold) beyond it, because a new hold is
// refused while the balance is at or below zero (see "The overrun bound" above). A
// second Settle, or a Settle after Release, returns ErrAlreadySettled; an
// unknown request id ErrNoHold; a negative charge an error; a hold taken
// on a request id that had already ended ErrExists, and that hold is
// dropped uncharged.
//
// Settle does not give up when ctx is cancelled: the call has happened and
// its books must close (a client that went away must not cancel its charge).
func (b *Store) Settle(ctx context.Context, s store.Settlement) (store.Entry, error) {
	ctx = context.WithoutCancel(ctx)
	if err := store.CheckSettlement(s); err != nil {
		return store.Entry{}, err
	}
	h, unlock, err := b.takeHold(ctx, s.RequestID, s.Account)
	if err != nil {
		return store.Entry{}, err
	}
	defer unlock()
	hr := &h.rec
	var (
		out  entryRec
		acct accountRec
		key  *spendRec // the key's spend with the charge: nil for no key
	)
	last, lastLoaded := b.keyOf(h)
	err = b.update(ctx, func(txn *badger.Txn) error {
		if err := notEnded(txn, hr.RequestID); err != nil {
			return err
		}
		var err error
		if acct, err = loadAccount(txn, hr.Account); err != nil {
			return err
		}
		if key, err = spend(txn, hr, h.key, last, lastLoaded, s.Charge); err != nil {
			return err
		}
		bal, err := addBalance(acct.ID, pricing.Nano(acct.Balance), -s.Charge)
		if err != nil {
			return err
		}
		acct.Balance = int64(bal)
		out, err = journal(txn, &acct, entryRec{
			Kind: store.KindCharge, RequestID: hr.RequestID, KeyID: hr.KeyID, Model: hr.Model,
			Route: hr.Route, Endpoint: hr.Endpoint, Usage: usageRecOf(s.Usage),
			HoldAmount: hr.Amount, Amount: -int64(s.Charge), Note: store.ClipNote(s.Note),
		})
		if err != nil {
			return err
		}
		return putEnded(txn, hr, outcomeRec{State: store.OutcomeSettled, Charge: int64(s.Charge), Seq: out.Seq, Reason: store.ClipNote(s.Note)})
	})
	if err != nil {
		return store.Entry{}, b.failedEnd(h, err)
	}
	b.endHold(h, &acct, key)
	return out.api(), nil
}

// Release drops a hold without charging (the call failed). It writes no
// journal entry, since no money moves, but records the Outcome with the
// reason. A later Settle or Release returns ErrAlreadySettled; an unknown
// request id ErrNoHold. Like Settle, it does not give up when ctx is
// cancelled.
func (b *Store) Release(ctx context.Context, requestID, reason string) error {
	ctx = context.WithoutCancel(ctx)
	if err := store.CheckID("request", requestID); err != nil {
		return err
	}
	h, unlock, err := b.takeHold(ctx, requestID, "")
	if err != nil {
		return err
	}
	defer unlock()
	err = b.update(ctx, func(txn *badger.Txn) error {
		if err := notEnded(txn, requestID); err != nil {
			return err
		}
		return putEnded(txn, &h.rec, outcomeRec{State: store.OutcomeReleased, Reason: store.ClipNote(reason)})
	})
	if err != nil {
		return b.failedEnd(h, err)
	}
	b.endHold(h, nil, nil)
	return nil
}

// takeHold finds the open hold of requestID and takes its account's stripe,
// which every end of the hold takes, so the hold stays open until the caller
// ends it and unlocks. account, when set, must be the hold's. A request id
// with no open hold returns ErrAlreadySettled if it has ended, else
// ErrNoHold.
func (b *Store) takeHold(ctx context.Context, requestID, account string) (*openHold, func(), error) {
	if account == "" {
		h, ok := b.mem.hold(requestID)
		if !ok {
			return nil, nil, b.endedErr(ctx, requestID)
		}
		account = h.rec.Account
	}
	unlock := b.lock(account)
	h, ok := b.mem.hold(requestID)
	switch {
	case !ok:
		unlock()
		return nil, nil, b.endedErr(ctx, requestID)
	case h.rec.Account != account:
		unlock()
		return nil, nil, fmt.Errorf("store: hold %q belongs to account %q, not %q", requestID, h.rec.Account, account)
	}
	return h, unlock, nil
}

// errEndedBefore is what notEnded returns inside a transaction: the hold was
// taken on a request id that had already ended.
var errEndedBefore = errors.New("request id has already ended")

// notEnded checks, in the transaction that ends a hold, that its request id
// has not ended before: Hold does not read the ledger, so it cannot refuse
// an id that has.
func notEnded(txn *badger.Txn, requestID string) error {
	ok, err := exists(txn, doneKey(requestID))
	if err == nil && ok {
		err = errEndedBefore
	}
	return err
}

// failedEnd handles the error of a transaction that was to end h: a hold on
// a request id that had already ended is dropped (ErrExists); after any
// other error the hold stays open, to be released, and the account is read
// afresh from the ledger by the next Hold.
func (b *Store) failedEnd(h *openHold, err error) error {
	if errors.Is(err, errEndedBefore) {
		b.endHold(h, nil, nil)
		return fmt.Errorf("store: hold %q: the request id already has an outcome; this hold is dropped: %w", h.rec.RequestID, store.ErrExists)
	}
	b.forget(h.rec.Account)
	return err
}

// putEnded writes the outcome of the hold hr (state and the state-specific
// fields of o set by the caller).
func putEnded(txn *badger.Txn, hr *holdRec, o outcomeRec) error {
	o.RequestID, o.Account, o.HoldAmount, o.Owner, o.Time = hr.RequestID, hr.Account, hr.Amount, hr.Owner, now()
	o.KeyID, o.Model, o.Route, o.Endpoint = hr.KeyID, hr.Model, hr.Route, hr.Endpoint
	return putOutcome(txn, &o)
}

// Balance returns the account; ErrNotFound if it does not exist. Held is
// the sum of the open holds.
func (b *Store) Balance(ctx context.Context, account string) (store.Account, error) {
	a, err := b.loaded(ctx, account)
	if err != nil {
		return store.Account{}, err
	}
	defer a.mu.Unlock()
	return a.api(), nil
}

// Charges lists the account's journal entries (credits, charges, refunds,
// recoveries), newest first, at most limit (≤ 0 means 100). An unknown
// account returns ErrNotFound.
func (b *Store) Charges(ctx context.Context, account string, limit int) ([]store.Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []store.Entry
	err := b.view(ctx, func(txn *badger.Txn) error {
		if _, err := loadAccount(txn, account); err != nil {
			return err
		}
		prefix := journalPrefix(account)
		opts := badger.DefaultIteratorOptions
		opts.Reverse = true
		opts.Prefix = prefix
		opts.PrefetchSize = min(limit, 100)
		it := txn.NewIterator(opts)
		defer it.Close()
		// Past every key of the prefix: the sequence number is 8 bytes.
		it.Seek(append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, 9)...))
		for ; it.ValidForPrefix(prefix) && len(out) < limit; it.Next() {
			var e entryRec
			if err := it.Item().Value(func(v []byte) error { return e.decode(it.Item().Key(), v) }); err != nil {
				return err
			}
			out = append(out, e.api())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Outcome returns how the hold of requestID ended; ErrNotFound if it is
// still open or never existed.
func (b *Store) Outcome(ctx context.Context, requestID string) (store.Outcome, error) {
	var out outcomeRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = getOutcome(txn, doneKey(requestID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: outcome of %q: %w", requestID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return completeSettled(txn, &out)
	})
	if err != nil {
		return store.Outcome{}, err
	}
	return out.api(), nil
}

// completeSettled fills in a settled outcome v2 (compact) from its journal
// entry: the hold amount and the note are the entry's. Other outcomes are
// complete already.
func completeSettled(txn *badger.Txn, out *outcomeRec) error {
	if !out.compact {
		return nil
	}
	key := journalKey(out.Account, out.Seq)
	var e entryRec
	err := getValue(txn, key, func(val []byte) error { return e.decode(key, val) })
	if errors.Is(err, badger.ErrKeyNotFound) {
		err = store.ErrNotFound
	}
	if err == nil && (e.Kind != store.KindCharge || e.RequestID != out.RequestID) {
		err = fmt.Errorf("it is a %s entry of request %q", e.Kind, e.RequestID)
	}
	if err != nil {
		return fmt.Errorf("store: outcome of %q: journal entry %d of account %q: %w", out.RequestID, out.Seq, out.Account, err)
	}
	out.HoldAmount, out.Reason = e.HoldAmount, e.Note
	return nil
}

// endedErr explains why requestID has no open hold: ErrAlreadySettled if
// it has ended, ErrNoHold if it was never held.
func (b *Store) endedErr(ctx context.Context, requestID string) error {
	var ended bool
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		ended, err = exists(txn, doneKey(requestID))
		return err
	})
	switch {
	case err != nil:
		return err
	case ended:
		return fmt.Errorf("store: request %q: %w", requestID, store.ErrAlreadySettled)
	}
	return fmt.Errorf("store: request %q: %w", requestID, store.ErrNoHold)
}

// loadAccount reads an account; ErrNotFound if it does not exist.
func loadAccount(txn *badger.Txn, id string) (accountRec, error) {
	acct, err := getAccount(txn, accountKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return acct, fmt.Errorf("store: account %q: %w", id, store.ErrNotFound)
	}
	return acct, err
}

// journal appends e to acct's journal with the next sequence number and the
// balance acct now has, and writes acct: the balance change, the entry and
// the counter commit together or not at all.
func journal(txn *badger.Txn, acct *accountRec, e entryRec) (entryRec, error) {
	acct.Seq++
	e.Seq = acct.Seq
	e.Account = acct.ID
	e.BalanceAfter = acct.Balance
	e.Time = now()
	if err := putEntry(txn, &e); err != nil {
		return entryRec{}, err
	}
	if err := putAccount(txn, acct); err != nil {
		return entryRec{}, err
	}
	return e, nil
}

// ListAccounts lists the accounts whose id sorts after after, in id order,
// at most limit (≤ 0 or above MaxAccountPage: MaxAccountPage). Held counts
// the open holds as Balance does; it loads nothing into memory.
func (b *Store) ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error) {
	if limit <= 0 || limit > store.MaxAccountPage {
		limit = store.MaxAccountPage
	}
	var recs []accountRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		prefix := []byte(prefixAccount)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchSize = min(limit, 100)
		it := txn.NewIterator(opts)
		defer it.Close()
		start := prefix
		if after != "" {
			start = append(accountKey(after), 0) // the first key past after's
		}
		for it.Seek(start); it.ValidForPrefix(prefix) && len(recs) < limit; it.Next() {
			key := it.Item().KeyCopy(nil)
			var r accountRec
			if err := it.Item().Value(func(v []byte) error { return r.decode(key, v) }); err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Account, len(recs))
	for i, r := range recs {
		out[i] = b.mem.view(r)
	}
	return out, nil
}

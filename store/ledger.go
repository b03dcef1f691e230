package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// ErrHoldNotWritten is what Settle and Release return for a request whose
// Hold succeeded but whose write then failed (an I/O error after Hold had
// returned; see Hold): the call was admitted, but there is no hold to settle
// or release and nothing can be charged for it. The error wraps the cause.
var ErrHoldNotWritten = errors.New("hold was admitted but its write failed")

// Outcome states: how a hold ended.
const (
	OutcomeSettled   = "settled"   // Settle charged the call
	OutcomeReleased  = "released"  // Release dropped it (the call failed)
	OutcomeRecovered = "recovered" // RecoverHolds dropped it at start-up
)

// Outcome is the audit record of a hold that ended, kept under its request
// id for as long as the store lives. It is what makes Settle and Release
// exactly-once, and it is the only trace a released hold leaves (a release
// writes no journal entry because it moves no money).
type Outcome struct {
	RequestID  string
	Account    string
	State      string       // OutcomeSettled, OutcomeReleased or OutcomeRecovered
	HoldAmount pricing.Nano // the amount the hold reserved
	Charge     pricing.Nano // what Settle charged; 0 otherwise
	Seq        uint64       // the journal entry's sequence number; 0 for a release
	Owner      string       // the process that took the hold; not kept for a settled call
	Reason     string       // Release's reason, Settle's note, or the recovery note
	Time       time.Time
}

// CreateAccount creates an empty account; ErrExists if it is present.
func (b *Badger) CreateAccount(ctx context.Context, id string) (Account, error) {
	if err := checkAccountID(id); err != nil {
		return Account{}, err
	}
	defer b.lock(id)()
	var out accountRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		ok, err := exists(txn, accountKey(id))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("store: account %q: %w", id, ErrExists)
		}
		out = accountRec{ID: id, Created: now()}
		return putAccount(txn, &out)
	})
	if err != nil {
		return Account{}, err
	}
	return out.api(), nil
}

// Credit adds amount (> 0) to the account's balance, creating the account if
// it does not exist, and journals a KindCredit entry.
func (b *Badger) Credit(ctx context.Context, account string, amount pricing.Nano, note string) (Entry, error) {
	if err := checkAccountID(account); err != nil {
		return Entry{}, err
	}
	if amount <= 0 {
		return Entry{}, fmt.Errorf("store: credit to account %q: amount %d nano-USD is not positive", account, amount)
	}
	defer b.lock(account)()
	var out entryRec
	err := b.update(ctx, func(txn *badger.Txn) error {
		acct, err := loadAccount(txn, account)
		if errors.Is(err, ErrNotFound) {
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
		out, err = journal(txn, &acct, entryRec{Kind: KindCredit, Amount: int64(amount), Note: clip(note)})
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	return out.api(), nil
}

// Hold reserves h.Amount (≥ 0) of the account's available credit under
// h.RequestID. The account must exist (ErrNotFound); a request id that is
// held or has ended returns ErrExists. A balance at or below zero is always
// insufficient, even for a zero hold; otherwise Available() below h.Amount
// is. Both return *InsufficientError with the numbers. h.Owner is always
// set to this process's owner (see RecoverHolds); a zero h.Created to now.
//
// Hold returns once its transaction has passed badger's conflict check and
// has its commit timestamp, without waiting for the write (see doc.go,
// "Holds without waiting for the disk"): every later transaction, of this
// account or any other, starts only after the write has been applied, so it
// sees the hold. Should the write fail, the error is logged with the request
// id and the request's Settle or Release returns ErrHoldNotWritten.
func (b *Badger) Hold(ctx context.Context, h Hold) error {
	if err := checkID("request", h.RequestID); err != nil {
		return err
	}
	if err := checkAccountID(h.Account); err != nil {
		return err
	}
	if h.Amount < 0 {
		return fmt.Errorf("store: hold %q: amount %d nano-USD is negative", h.RequestID, h.Amount)
	}
	h.Owner = b.owner
	if h.Created.IsZero() {
		h.Created = now()
	}
	h.Created = h.Created.UTC()
	rec := holdRecOf(h)
	// The account's stripe keeps every other writer of its record out; the
	// request id's stripe keeps a second Hold of the same id (on another
	// account) out, so that nothing this transaction reads can change before
	// it commits and the commit cannot conflict.
	defer b.lock(h.Account)()
	defer lockStripe(&b.requests, h.RequestID)()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.writes.begin(rec.RequestID); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			b.writes.end(rec.RequestID, nil)
		}
	}()
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	if err := holdTxn(txn, &rec); err != nil {
		return err
	}
	if b.beforeHoldCommit != nil {
		b.beforeHoldCommit(rec.RequestID)
	}
	id, account, amount := rec.RequestID, rec.Account, rec.Amount
	committed = true
	txn.CommitWith(func(err error) { b.holdWritten(id, account, amount, err) })
	return nil
}

// holdTxn checks and writes the hold r in txn: the account exists, the
// request id is new, the credit is there.
func holdTxn(txn *badger.Txn, r *holdRec) error {
	akey := accountKey(r.Account)
	acct, err := getAccount(txn, akey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("store: account %q: %w", r.Account, ErrNotFound)
	}
	if err != nil {
		return err
	}
	hkey := holdKey(r.RequestID)
	for _, k := range [...][]byte{hkey, doneKey(r.RequestID)} {
		ok, err := exists(txn, k)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("store: hold %q: request id: %w", r.RequestID, ErrExists)
		}
	}
	a := acct.api()
	if a.Balance <= 0 || a.Available() < pricing.Nano(r.Amount) {
		return &InsufficientError{Needed: pricing.Nano(r.Amount), Available: a.Available()}
	}
	acct.Held += r.Amount // cannot overflow: Held+Amount ≤ Balance
	val, err := r.encode(hkey)
	if err != nil {
		return err
	}
	if err := txn.Set(hkey, val); err != nil {
		return err
	}
	if val, err = acct.encode(akey); err != nil {
		return err
	}
	return txn.Set(akey, val)
}

// holdWritten runs when the write of a hold's commit has ended, in a
// goroutine of badger's. A failed write is logged, with the request id, and
// remembered for the request's Settle or Release.
func (b *Badger) holdWritten(requestID, account string, amount int64, err error) {
	if err != nil {
		b.log.Error("store: a hold was admitted but its write failed; its call cannot be settled",
			"request_id", requestID, "account", account, "hold_nano", amount, "error", err.Error())
	}
	b.writes.end(requestID, err)
}

// noHold turns the ErrNoHold of requestID into ErrHoldNotWritten when the
// write of its hold failed after Hold had returned, waiting for that write
// to end if it has not yet. Any other error is returned as it is.
func (b *Badger) noHold(requestID string, err error) error {
	if !errors.Is(err, ErrNoHold) {
		return err
	}
	if cause := b.writes.lost(requestID); cause != nil {
		return fmt.Errorf("store: request %q: %w: %w", requestID, ErrHoldNotWritten, cause)
	}
	return err
}

// Settle charges the call and releases its hold, exactly once per request
// id. The charge is taken in full even when it is above the hold: this is
// the only way a balance goes below zero, and each call takes at most its
// own overrun (Charge − hold) beyond what admission allowed, because a new
// hold is refused while the balance is at or below zero (see doc.go). A second Settle, or a
// Settle after Release, returns ErrAlreadySettled; an unknown request id
// ErrNoHold; a negative charge an error.
//
// Settle does not give up when ctx is cancelled: the call has happened and
// its books must close (a client that went away must not cancel its charge).
func (b *Badger) Settle(ctx context.Context, s Settlement) (Entry, error) {
	ctx = context.WithoutCancel(ctx)
	if err := checkID("request", s.RequestID); err != nil {
		return Entry{}, err
	}
	if s.Charge < 0 {
		return Entry{}, fmt.Errorf("store: settle %q: charge %d nano-USD is negative", s.RequestID, s.Charge)
	}
	account := s.Account
	var err error
	if account == "" {
		if account, err = b.holdAccount(ctx, s.RequestID); err != nil {
			return Entry{}, b.noHold(s.RequestID, err)
		}
	}
	defer b.lock(account)()
	var out entryRec
	err = b.update(ctx, func(txn *badger.Txn) error {
		hr, acct, err := openHold(txn, s.RequestID, account)
		if err != nil {
			return err
		}
		acct.Held -= hr.Amount
		bal, err := addBalance(acct.ID, pricing.Nano(acct.Balance), -s.Charge)
		if err != nil {
			return err
		}
		acct.Balance = int64(bal)
		out, err = journal(txn, &acct, entryRec{
			Kind: KindCharge, RequestID: hr.RequestID, KeyID: hr.KeyID, Model: hr.Model,
			Route: hr.Route, Endpoint: hr.Endpoint, Usage: usageRecOf(s.Usage),
			HoldAmount: hr.Amount, Amount: -int64(s.Charge), Note: clip(s.Note),
		})
		if err != nil {
			return err
		}
		return closeHold(txn, hr, outcomeRec{State: OutcomeSettled, Charge: int64(s.Charge), Seq: out.Seq, Reason: clip(s.Note)})
	})
	if err != nil {
		return Entry{}, b.noHold(s.RequestID, err)
	}
	return out.api(), nil
}

// Release drops a hold without charging (the call failed). It writes no
// journal entry, since no money moves, but records the Outcome with the
// reason. A later Settle or Release returns ErrAlreadySettled; an unknown
// request id ErrNoHold. Like Settle, it does not give up when ctx is
// cancelled.
func (b *Badger) Release(ctx context.Context, requestID, reason string) error {
	ctx = context.WithoutCancel(ctx)
	if err := checkID("request", requestID); err != nil {
		return err
	}
	account, err := b.holdAccount(ctx, requestID)
	if err != nil {
		return b.noHold(requestID, err)
	}
	defer b.lock(account)()
	err = b.update(ctx, func(txn *badger.Txn) error {
		hr, acct, err := openHold(txn, requestID, account)
		if err != nil {
			return err
		}
		acct.Held -= hr.Amount
		if err := putAccount(txn, &acct); err != nil {
			return err
		}
		return closeHold(txn, hr, outcomeRec{State: OutcomeReleased, Reason: clip(reason)})
	})
	return b.noHold(requestID, err)
}

// Balance returns the account; ErrNotFound if it does not exist.
func (b *Badger) Balance(ctx context.Context, account string) (Account, error) {
	var out accountRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = loadAccount(txn, account)
		return err
	})
	if err != nil {
		return Account{}, err
	}
	return out.api(), nil
}

// Charges lists the account's journal entries (credits, charges, refunds,
// recoveries), newest first, at most limit (≤ 0 means 100). An unknown
// account returns ErrNotFound.
func (b *Badger) Charges(ctx context.Context, account string, limit int) ([]Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []Entry
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
func (b *Badger) Outcome(ctx context.Context, requestID string) (Outcome, error) {
	var out outcomeRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = getOutcome(txn, doneKey(requestID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("store: outcome of %q: %w", requestID, ErrNotFound)
		}
		if err != nil || !out.compact {
			return err
		}
		// A settled outcome v2: the hold amount and the note are the
		// journal entry's.
		key := journalKey(out.Account, out.Seq)
		var e entryRec
		err = getValue(txn, key, func(val []byte) error { return e.decode(key, val) })
		if errors.Is(err, badger.ErrKeyNotFound) {
			err = ErrNotFound
		}
		if err == nil && (e.Kind != KindCharge || e.RequestID != requestID) {
			err = fmt.Errorf("it is a %s entry of request %q", e.Kind, e.RequestID)
		}
		if err != nil {
			return fmt.Errorf("store: outcome of %q: journal entry %d of account %q: %w", requestID, out.Seq, out.Account, err)
		}
		out.HoldAmount, out.Reason = e.HoldAmount, e.Note
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	return out.api(), nil
}

// holdAccount finds the account of the hold of requestID, so that the caller
// can take the account's stripe before the transaction that ends the hold.
// A hold that has ended returns ErrAlreadySettled, one that never existed
// ErrNoHold.
func (b *Badger) holdAccount(ctx context.Context, requestID string) (string, error) {
	var account string
	err := b.view(ctx, func(txn *badger.Txn) error {
		hr, err := getHold(txn, holdKey(requestID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return endedErr(txn, requestID)
		}
		account = hr.Account
		return err
	})
	return account, err
}

// openHold loads the open hold of requestID and its account inside a
// read-write transaction, under the stripe of account.
func openHold(txn *badger.Txn, requestID, account string) (holdRec, accountRec, error) {
	hr, err := getHold(txn, holdKey(requestID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return hr, accountRec{}, endedErr(txn, requestID)
	}
	if err != nil {
		return hr, accountRec{}, err
	}
	if hr.Account != account {
		// A request id is never reused once held, so this is damage.
		return hr, accountRec{}, fmt.Errorf("store: hold %q belongs to account %q, expected %q", requestID, hr.Account, account)
	}
	acct, err := loadAccount(txn, account)
	if err != nil {
		return hr, acct, err
	}
	return hr, acct, nil
}

// closeHold deletes the hold and writes its outcome (state and the
// state-specific fields of o set by the caller).
func closeHold(txn *badger.Txn, hr holdRec, o outcomeRec) error {
	o.RequestID, o.Account, o.HoldAmount, o.Owner, o.Time = hr.RequestID, hr.Account, hr.Amount, hr.Owner, now()
	if err := txn.Delete(holdKey(hr.RequestID)); err != nil {
		return err
	}
	return putOutcome(txn, &o)
}

// endedErr explains why requestID has no open hold.
func endedErr(txn *badger.Txn, requestID string) error {
	ok, err := exists(txn, doneKey(requestID))
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("store: request %q: %w", requestID, ErrAlreadySettled)
	}
	return fmt.Errorf("store: request %q: %w", requestID, ErrNoHold)
}

// loadAccount reads an account; ErrNotFound if it does not exist.
func loadAccount(txn *badger.Txn, id string) (accountRec, error) {
	acct, err := getAccount(txn, accountKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return acct, fmt.Errorf("store: account %q: %w", id, ErrNotFound)
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

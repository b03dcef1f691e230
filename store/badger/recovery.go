package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"sort"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// # Recovery after a crash
//
// Every hold records the Owner (boot id) of the process that took it. A hold
// whose process ended cannot settle: the client's connection and the usage
// went with it. At start-up RecoverHolds reads the hold log segments that
// earlier processes left and releases every hold in them whose request id
// has no outcome, writing a KindRecovery journal entry (Amount 0,
// HoldAmount the hold, Note "hold released at start-up: owner <x> ended
// without settling") and an Outcome in state "recovered"; then it deletes
// the segments. It does the same for the hold/<id> keys an older build left
// in the ledger, which that build also counted in the account record's
// Held, and takes them out of it. We release rather than charge: the usage
// is unknown, and the customer must not pay for a call whose answer they
// may never have received. Until then such a hold reserves nothing: its
// credit was in the memory of the process that ended. The rule is safe
// because badger lets one process open a directory at a time, so every
// segment found at start-up belongs to a process that has ended. A
// PostgreSQL implementation shared by several replicas keeps holds in the
// database instead, and needs a liveness check per owner before applying
// it.

// RecoverHolds resolves the holds that processes which have ended left
// open: those in their hold log segments whose request id has no outcome
// (the call neither settled nor was released before the process ended), and
// those an older build kept in the ledger (hold/<id>; this build never
// writes one). Each is released with a KindRecovery journal entry (Amount
// 0, HoldAmount set) and an Outcome in state OutcomeRecovered. The call
// behind such a hold can no longer settle (the connection to the client
// died with that process), and its usage is unknown, so the customer is not
// charged for an answer they may never have received. The segments are then
// deleted. Call it once after Open and before serving; holds this
// process takes meanwhile are never touched.
func (b *Store) RecoverHolds(ctx context.Context) (released int, err error) {
	legacy, err := b.ledgerHolds(ctx)
	if err != nil {
		return 0, err
	}
	logged, torn, err := b.holdLog.readOrphans()
	if err != nil {
		return 0, err
	}
	for _, problem := range torn {
		b.log.Warn("store: hold log: a damaged frame ends a segment; no hold after it can be recovered", "problem", problem)
	}
	for i, hr := range append(legacy, logged...) {
		inLedger := i < len(legacy)
		ok, err := b.recoverHold(ctx, hr, inLedger)
		if !inLedger && errors.Is(err, store.ErrNotFound) {
			// Its account is gone (a machine crash can keep the log's page
			// and lose the commit that made the account): nothing is held
			// for it, and it must not stop the start.
			b.log.Error("store: a hold left by an ended process names an unknown account; not recorded",
				"request_id", hr.RequestID, "account", hr.Account, "hold_nano", hr.Amount, "owner", hr.Owner)
			continue
		}
		if err != nil {
			return released, err
		}
		if ok {
			released++
			b.log.Info("store: released a hold left by an ended process",
				"request_id", hr.RequestID, "account", hr.Account, "hold_nano", hr.Amount, "owner", hr.Owner)
		}
	}
	return released, b.holdLog.removeOrphans()
}

// recoverHold releases hr, read from a hold log segment or, when inLedger,
// from the ledger, where an older build also counted it in the account's
// Held. It reports false when the hold had ended meanwhile (a logged hold
// that settled or was released before its process ended).
func (b *Store) recoverHold(ctx context.Context, hr holdRec, inLedger bool) (bool, error) {
	defer b.lock(hr.Account)()
	var (
		done bool
		acct accountRec
	)
	err := b.update(ctx, func(txn *badger.Txn) error {
		done = false
		var err error
		if inLedger {
			hr, err = getHold(txn, holdKey(hr.RequestID))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil // ended since ledgerHolds read it
			}
			if err == nil {
				err = txn.Delete(holdKey(hr.RequestID))
			}
		} else if err = notEnded(txn, hr.RequestID); errors.Is(err, errEndedBefore) {
			return nil // it ended before its process did
		}
		if err != nil {
			return err
		}
		if acct, err = loadAccount(txn, hr.Account); err != nil {
			return err
		}
		if inLedger {
			acct.Held -= hr.Amount
		}
		note := store.ClipNote(store.RecoveryNote(hr.Owner))
		e, err := journal(txn, &acct, entryRec{
			Kind: store.KindRecovery, RequestID: hr.RequestID, KeyID: hr.KeyID, Model: hr.Model,
			Route: hr.Route, Endpoint: hr.Endpoint, HoldAmount: hr.Amount, Amount: 0, Note: note,
		})
		if err != nil {
			return err
		}
		done = true
		return putEnded(txn, &hr, outcomeRec{State: store.OutcomeRecovered, Seq: e.Seq, Reason: note})
	})
	var wrote *accountRec
	if done {
		wrote = &acct
	}
	return done, b.afterWrite(hr.Account, wrote, err)
}

// OpenHolds lists every open hold, oldest first: this process's, and those
// an older build left in the ledger that RecoverHolds has not yet released.
// (The holds in the hold log segments of ended processes hold no credit:
// they are read only by RecoverHolds.)
func (b *Store) OpenHolds(ctx context.Context) ([]store.Hold, error) {
	legacy, err := b.ledgerHolds(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.Hold, 0, len(legacy))
	for _, hr := range legacy {
		out = append(out, hr.api())
	}
	b.mem.holdsOf("", func(h *openHold) { out = append(out, h.rec.api()) })
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
func (b *Store) HeldTotal(ctx context.Context, account string) (pricing.Nano, error) {
	holds, err := b.OpenHolds(ctx)
	if err != nil {
		return 0, err
	}
	var sum pricing.Nano
	for _, h := range holds {
		if account == "" || h.Account == account {
			sum += h.Amount
		}
	}
	return sum, nil
}

// ledgerHolds reads the holds an older build kept in the ledger.
func (b *Store) ledgerHolds(ctx context.Context) ([]holdRec, error) {
	var out []holdRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		out = out[:0]
		return eachHold(txn, func(hr holdRec) { out = append(out, hr) })
	})
	return out, err
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

// Audit reads the account's journal and holds and checks the invariants:
// the balance equals the sum of the journal's amounts; every entry's
// BalanceAfter equals the running sum; sequence numbers run 1, 2, 3 … up to
// the account's counter; Held equals the sum of the open holds, in the
// ledger (an older build's) and in memory; the account Hold sees in memory
// is the ledger's; and so are the account's keys Hold has met, each held
// the sum of the open holds reserved against it. Problems are
// reported in the result, not as the error, which is for failing to read.
func (b *Store) Audit(ctx context.Context, account string) (store.AuditReport, error) {
	// The stripe keeps writers out, and the account's mu Hold, so that the
	// ledger, the account as Hold sees it and the open holds are one view.
	defer b.lock(account)()
	a := b.mem.account(account)
	a.mu.Lock()
	defer a.mu.Unlock()
	var r store.AuditReport
	err := b.view(ctx, func(txn *badger.Txn) error {
		r = store.AuditReport{}
		acct, err := loadAccount(txn, account)
		if err != nil {
			return err
		}
		r.Account = acct.api()
		if err := auditJournal(txn, account, &r); err != nil {
			return err
		}
		if r.LastSeq != acct.Seq {
			r.Problems = append(r.Problems, fmt.Sprintf("last entry seq %d, account counter %d", r.LastSeq, acct.Seq))
		}
		if r.Journal != r.Account.Balance {
			r.Problems = append(r.Problems, fmt.Sprintf("balance %d, journal sum %d", r.Account.Balance, r.Journal))
		}
		ledgerHeld, err := auditLedgerHolds(txn, account, acct, &r)
		if err != nil {
			return err
		}
		memHeld, err := b.auditMemory(txn, a, &r)
		if err != nil {
			return err
		}
		if a.loaded && (a.rec.Balance != acct.Balance || a.rec.Held != acct.Held || a.rec.Seq != acct.Seq) {
			r.Problems = append(r.Problems, fmt.Sprintf("Hold sees balance %d, held %d, seq %d; the ledger has %d, %d, %d",
				a.rec.Balance, a.rec.Held, a.rec.Seq, acct.Balance, acct.Held, acct.Seq))
		}
		r.Account.Held += pricing.Nano(a.held)
		r.HeldByHolds = ledgerHeld + memHeld
		return nil
	})
	return r, err
}

// auditJournal reads the account's journal in sequence order into r: the
// count, the last sequence number, the sums by kind, and each entry's
// problems (a gap in the sequence, an unknown kind, a recovery that moves
// money, a balance_after that is not the running sum).
func auditJournal(txn *badger.Txn, account string, r *store.AuditReport) error {
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
		case store.KindCredit:
			r.Credits += pricing.Nano(e.Amount)
		case store.KindCharge:
			r.Charges -= pricing.Nano(e.Amount)
		case store.KindRefund:
			r.Refunds += pricing.Nano(e.Amount)
		case store.KindRecovery:
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
	return nil
}

// auditLedgerHolds counts the account's holds kept in the ledger (by an
// older build) into r, checks them against the account's held, and
// returns their sum.
func auditLedgerHolds(txn *badger.Txn, account string, acct accountRec, r *store.AuditReport) (pricing.Nano, error) {
	var held pricing.Nano
	if err := eachHold(txn, func(hr holdRec) {
		if hr.Account == account {
			r.OpenHolds++
			held += pricing.Nano(hr.Amount)
		}
	}); err != nil {
		return 0, err
	}
	if held != pricing.Nano(acct.Held) {
		r.Problems = append(r.Problems, fmt.Sprintf("held in the ledger %d, its holds sum %d", acct.Held, held))
	}
	return held, nil
}

// auditMemory checks the holds open in this process on the account a (its
// mu held) against a's held and its keys' (auditKeys), and returns their
// sum.
func (b *Store) auditMemory(txn *badger.Txn, a *acctMem, r *store.AuditReport) (pricing.Nano, error) {
	var sum pricing.Nano
	keyHeld := make(map[*keyMem]int64)
	b.mem.holdsOf(r.Account.ID, func(h *openHold) {
		r.OpenHolds++
		sum += pricing.Nano(h.rec.Amount)
		if h.key != nil {
			keyHeld[h.key] += h.rec.Amount
		}
	})
	if sum != pricing.Nano(a.held) {
		r.Problems = append(r.Problems, fmt.Sprintf("held in memory %d, open holds sum %d", a.held, sum))
	}
	return sum, auditKeys(txn, a, keyHeld, r)
}

// auditKeys checks the keys Hold has met on the account a (its mu held):
// each one's held is the sum of the open holds against it (held, by key),
// and its records, when loaded, are the ledger's.
func auditKeys(txn *badger.Txn, a *acctMem, held map[*keyMem]int64, r *store.AuditReport) error {
	for id, k := range a.keys {
		if k.held != held[k] {
			r.Problems = append(r.Problems, fmt.Sprintf("key %q: held in memory %d, its open holds sum %d", id, k.held, held[k]))
		}
		if !k.loaded || !k.exists {
			continue
		}
		rec, err := keyByID(txn, id)
		if err != nil {
			return err
		}
		m, l := &k.rec, &rec
		if l.spend.Spent != m.spend.Spent || !l.spend.PeriodStart.Equal(m.spend.PeriodStart) || l.Limit != m.Limit || l.Reset != m.Reset {
			r.Problems = append(r.Problems, fmt.Sprintf("key %q: Hold sees spent %d since %v, limit %d %q; the ledger has %d since %v, limit %d %q",
				id, m.spend.Spent, m.spend.PeriodStart, m.Limit, m.Reset, l.spend.Spent, l.spend.PeriodStart, l.Limit, l.Reset))
		}
	}
	return nil
}

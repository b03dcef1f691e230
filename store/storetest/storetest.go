package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Store is what the kit tests: all of store.Store.
type Store = store.Store

// Options tunes Run.
type Options struct {
	// Crash makes the owner of s's open holds die abruptly (as kill -9
	// would) and returns a store on the same books on which the
	// implementation's recovery of such holds has run: for Badger, close
	// and reopen the directory under a new owner and call RecoverHolds; for
	// a shared database, let the holds' lease expire and sweep them from
	// another replica. s then belongs to Crash (close it or not); the kit
	// closes the returned store. Every store recovers such holds
	// (RecoverHolds), so nil fails the recovery subtest.
	Crash func(t *testing.T, s Store) Store
	// Callers is the number of goroutines in the concurrency subtests; 0
	// means 64.
	Callers int
	// Peers, if set, opens n more stores on s's books: other replicas of a
	// shared database. The concurrency subtests spread their callers over
	// s and two peers, so that the races cross replicas, not only
	// goroutines of one. The kit closes the peers. Nil runs them on s
	// alone.
	Peers func(t *testing.T, s Store, n int) []Store
	// Claims are the optional interfaces of package store (Allotter,
	// Exporter) that the store implements. The Capabilities subtest fails
	// a store that lacks one it claims or has one it does not claim; the
	// subtests of a claimed one fail when the store is not one, and those
	// of one not claimed are skipped.
	Claims []Capability
}

const usd = pricing.NanoPerUSD

// Run runs every behaviour of the store contract as a subtest of t, each on
// a fresh, empty store from open.
func Run(t *testing.T, open func(t *testing.T) Store, opts Options) {
	t.Helper()
	if opts.Callers <= 0 {
		opts.Callers = 64
	}
	k := &kit{open: open, opts: opts}
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Credit", k.credit},
		{"Capabilities", k.capabilities},
		{"CreateAccount", k.createAccount},
		{"Hold", k.hold},
		{"Insufficient", k.insufficient},
		{"SettleOnce", k.settleOnce},
		{"SettleAccount", k.settleAccount},
		{"Release", k.release},
		{"Overrun", k.overrun},
		{"Journal", k.journal},
		{"Keys", k.keys},
		{"ListAccounts", k.listAccounts},
		{"Jobs", k.jobs},
		{"RefundJobOnce", k.refundJobOnce},
		{"ConcurrentHolds", k.concurrentHolds},
		{"ConcurrentSettle", k.concurrentSettle},
		{"ConcurrentMixed", k.concurrentMixed},
		{"ConcurrentCreate", k.concurrentCreate},
		{"Recovery", k.recovery},
		{"Export", k.export},
		{"KeyLimit", k.keyLimit},
		{"KeySpend", k.keySpend},
		{"UpdateKey", k.updateKey},
		{"ConcurrentKeyLimit", k.concurrentKeyLimit},
		{"Generation", k.generation},
		{"JournalRange", k.journalRange},
		{"Alert", k.alert},
		{"Console", k.console},
		{"Allotments", k.allotments},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := k.open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			k.handedOff = false
			t.Cleanup(func() {
				if k.handedOff { // Crash owns it
					return
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// kit runs the subtests, one at a time.
type kit struct {
	open func(t *testing.T) Store
	opts Options
	// handedOff: the subtest's store was given to Crash, which owns it.
	handedOff bool
}

var ctx = context.Background()

// spread is the store the concurrency subtests' caller i uses: s, or s and
// its peers in turn (Options.Peers).
func (k *kit) spread(t *testing.T, s Store) func(i int) Store {
	t.Helper()
	if k.opts.Peers == nil {
		return func(int) Store { return s }
	}
	hs := append([]Store{s}, k.opts.Peers(t, s, 2)...)
	for _, h := range hs[1:] {
		t.Cleanup(func() {
			if err := h.Close(); err != nil {
				t.Errorf("Close a peer: %v", err)
			}
		})
	}
	return func(i int) Store { return hs[i%len(hs)] }
}

func mustCredit(t *testing.T, s Store, account string, amount pricing.Nano) store.Entry {
	t.Helper()
	e, err := s.Credit(ctx, account, amount, "test credit")
	if err != nil {
		t.Fatalf("Credit(%q, %d): %v", account, amount, err)
	}
	return e
}

func holdOf(account, reqID string, amount pricing.Nano) store.Hold {
	return store.Hold{RequestID: reqID, Account: account, KeyID: "key_kit", Model: "kit-model",
		Route: "kit-route", Endpoint: pricing.EndpointChat, Amount: amount}
}

func mustHold(t *testing.T, s Store, account, reqID string, amount pricing.Nano) {
	t.Helper()
	if err := s.Hold(ctx, holdOf(account, reqID, amount)); err != nil {
		t.Fatalf("Hold(%q, %q, %d): %v", account, reqID, amount, err)
	}
}

func mustSettle(t *testing.T, s Store, reqID string, charge pricing.Nano) store.Entry {
	t.Helper()
	e, err := s.Settle(ctx, store.Settlement{RequestID: reqID, Charge: charge})
	if err != nil {
		t.Fatalf("Settle(%q, %d): %v", reqID, charge, err)
	}
	return e
}

func mustBalance(t *testing.T, s Store, account string) store.Account {
	t.Helper()
	a, err := s.Balance(ctx, account)
	if err != nil {
		t.Fatalf("Balance(%q): %v", account, err)
	}
	return a
}

// wantAccount fails t unless the account's balance and held are as given.
func wantAccount(t *testing.T, s Store, account string, balance, held pricing.Nano) {
	t.Helper()
	a := mustBalance(t, s, account)
	if a.ID != account || a.Balance != balance || a.Held != held {
		t.Errorf("account %q: balance %d, held %d (id %q); want balance %d, held %d",
			account, a.Balance, a.Held, a.ID, balance, held)
	}
	if a.Available() != a.Balance-a.Held {
		t.Errorf("account %q: Available %d is not balance − held", account, a.Available())
	}
}

// books reads the whole journal of account and fails t unless it holds:
// newest first by Seq, each BalanceAfter the one before plus its Amount,
// credits − charges + refunds = the balance, and recoveries of amount 0.
// It returns the entries, newest first.
func books(t *testing.T, s Store, account string) []store.Entry {
	t.Helper()
	const limit = 100_000
	entries, err := s.Charges(ctx, account, limit)
	if err != nil {
		t.Fatalf("Charges(%q): %v", account, err)
	}
	a := mustBalance(t, s, account)
	var credits, charges, refunds, running pricing.Nano
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Account != account {
			t.Errorf("journal of %q lists an entry of %q: %+v", account, e.Account, e)
		}
		if i < len(entries)-1 && e.Seq <= entries[i+1].Seq {
			t.Errorf("journal not newest first: seq %d listed before seq %d", entries[i+1].Seq, e.Seq)
		}
		switch e.Kind {
		case store.KindCredit:
			if e.Amount <= 0 {
				t.Errorf("credit entry of %d: %+v", e.Amount, e)
			}
			credits += e.Amount
		case store.KindCharge:
			if e.Amount > 0 {
				t.Errorf("charge entry adds %d: %+v", e.Amount, e)
			}
			charges -= e.Amount
		case store.KindRefund:
			if e.Amount < 0 {
				t.Errorf("refund entry takes %d: %+v", e.Amount, e)
			}
			refunds += e.Amount
		case store.KindRecovery:
			if e.Amount != 0 {
				t.Errorf("recovery entry moves %d: %+v", e.Amount, e)
			}
		default:
			t.Errorf("journal entry of unknown kind %q: %+v", e.Kind, e)
		}
		running += e.Amount
		if e.BalanceAfter != running {
			t.Errorf("entry seq %d (%s %d): balance after %d, want %d", e.Seq, e.Kind, e.Amount, e.BalanceAfter, running)
		}
	}
	if got := credits - charges + refunds; got != a.Balance {
		t.Errorf("account %q: credits %d − charges %d + refunds %d = %d, but the balance is %d",
			account, credits, charges, refunds, got, a.Balance)
	}
	return entries
}

// wantErr fails t unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// --- helpers ---------------------------------------------------------------

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

// --- ledger ----------------------------------------------------------------

// Credit creates the account, adds exactly the amount, journals it, and
// refuses an amount that is not positive.
func (k *kit) credit(t *testing.T, s Store) {
	if _, err := s.Balance(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Balance of an account never credited: %v, want ErrNotFound", err)
	}
	e := mustCredit(t, s, "acme", 3*usd)
	if e.Kind != store.KindCredit || e.Account != "acme" || e.Amount != 3*usd || e.BalanceAfter != 3*usd ||
		e.Note != "test credit" || e.Seq == 0 || e.Time.IsZero() {
		t.Errorf("first credit entry %+v", e)
	}
	e2 := mustCredit(t, s, "acme", 1)
	if e2.Amount != 1 || e2.BalanceAfter != 3*usd+1 || e2.Seq <= e.Seq {
		t.Errorf("second credit entry %+v after %+v", e2, e)
	}
	for _, amount := range []pricing.Nano{0, -1, -usd} {
		if _, err := s.Credit(ctx, "acme", amount, "bad"); err == nil {
			t.Errorf("Credit of %d succeeded", amount)
		}
	}
	wantAccount(t, s, "acme", 3*usd+1, 0)
	if a := mustBalance(t, s, "acme"); a.Created.IsZero() {
		t.Errorf("account without a creation time: %+v", a)
	}
	if entries := books(t, s, "acme"); len(entries) != 2 {
		t.Errorf("journal has %d entries, want 2: %+v", len(entries), entries)
	}
}

// CreateAccount creates an empty account once.
func (k *kit) createAccount(t *testing.T, s Store) {
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "acme" || a.Balance != 0 || a.Held != 0 || a.Created.IsZero() {
		t.Errorf("new account %+v", a)
	}
	_, err = s.CreateAccount(ctx, "acme")
	wantErr(t, "second CreateAccount", err, store.ErrExists)
	wantAccount(t, s, "acme", 0, 0)
	mustCredit(t, s, "beta", usd)
	_, err = s.CreateAccount(ctx, "beta")
	wantErr(t, "CreateAccount of a credited account", err, store.ErrExists)
	wantAccount(t, s, "beta", usd, 0)
	if entries, err := s.Charges(ctx, "acme", 0); err != nil || len(entries) != 0 {
		t.Errorf("journal of a new account: %+v, %v", entries, err)
	}
}

// Hold reserves credit without moving the balance, and refuses a request
// id that already has an open hold, and an unknown account.
func (k *kit) hold(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustHold(t, s, "acme", "req_1", 2*usd)
	mustHold(t, s, "acme", "req_2", 3*usd)
	wantAccount(t, s, "acme", 10*usd, 5*usd)
	if a := mustBalance(t, s, "acme"); a.Available() != 5*usd {
		t.Errorf("available %d, want 5 USD", a.Available())
	}
	err := s.Hold(ctx, holdOf("acme", "req_1", usd))
	wantErr(t, "Hold on a request id with an open hold", err, store.ErrExists)
	err = s.Hold(ctx, holdOf("nobody", "req_3", 1))
	wantErr(t, "Hold on an unknown account", err, store.ErrNotFound)
	if err := s.Hold(ctx, holdOf("acme", "req_neg", -1)); err == nil {
		t.Error("Hold of a negative amount succeeded")
	}
	mustHold(t, s, "acme", "req_zero", 0) // a zero hold on a positive balance is fine
	wantAccount(t, s, "acme", 10*usd, 5*usd)
	if entries := books(t, s, "acme"); len(entries) != 1 {
		t.Errorf("holds wrote journal entries: %+v", entries)
	}
}

// A hold the available credit cannot cover is refused with the numbers;
// a balance at or below zero refuses every hold, even a zero one.
func (k *kit) insufficient(t *testing.T, s Store) {
	insufficient := func(what string, h store.Hold, needed, available pricing.Nano) {
		t.Helper()
		err := s.Hold(ctx, h)
		var ie *store.InsufficientError
		if !errors.As(err, &ie) || !errors.Is(err, store.ErrInsufficient) {
			t.Errorf("%s: %v, want *InsufficientError wrapping ErrInsufficient", what, err)
			return
		}
		if ie.Needed != needed || ie.Available != available {
			t.Errorf("%s: needed %d, available %d; want %d and %d", what, ie.Needed, ie.Available, needed, available)
		}
	}
	if _, err := s.CreateAccount(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	insufficient("zero hold on a zero balance", holdOf("empty", "req_z", 0), 0, 0)
	insufficient("hold on a zero balance", holdOf("empty", "req_z1", 1), 1, 0)

	mustCredit(t, s, "acme", 5*usd)
	mustHold(t, s, "acme", "req_1", 3*usd)
	insufficient("hold above available", holdOf("acme", "req_2", 2*usd+1), 2*usd+1, 2*usd)
	mustHold(t, s, "acme", "req_2", 2*usd) // exactly the rest
	insufficient("hold with all credit held", holdOf("acme", "req_3", 1), 1, 0)
	wantAccount(t, s, "acme", 5*usd, 5*usd)
	// A refused request id is not taken: it can hold once there is credit.
	if err := s.Release(ctx, "req_1", "failed"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_3", 1)
	wantAccount(t, s, "acme", 5*usd, 2*usd+1)

	// Below zero (an overrun): every hold is refused, even a zero one.
	mustCredit(t, s, "debt", usd)
	mustHold(t, s, "debt", "req_d", usd)
	mustSettle(t, s, "req_d", 2*usd)
	insufficient("zero hold on a negative balance", holdOf("debt", "req_d2", 0), 0, -usd)
	insufficient("hold on a negative balance", holdOf("debt", "req_d3", 1), 1, -usd)
	wantAccount(t, s, "debt", -usd, 0)
}

// Settle charges once and releases the rest of the hold; a second Settle,
// or one after Release, is ErrAlreadySettled; a Settle without a hold
// ErrNoHold.
func (k *kit) settleOnce(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustHold(t, s, "acme", "req_1", 2*usd)
	mustHold(t, s, "acme", "req_2", usd)
	usage := pricing.Usage{InputTokens: 120, OutputTokens: 34}
	e, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Charge: 700_000_001, Usage: usage, Note: "kit note"})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Entry{Seq: e.Seq, Kind: store.KindCharge, RequestID: "req_1", Account: "acme", KeyID: "key_kit",
		Model: "kit-model", Route: "kit-route", Endpoint: pricing.EndpointChat, Usage: usage, HoldAmount: 2 * usd,
		Amount: -700_000_001, BalanceAfter: 10*usd - 700_000_001, Time: e.Time, Note: "kit note"}
	if fmt.Sprint(e) != fmt.Sprint(want) || e.Time.IsZero() {
		t.Errorf("charge entry\n got %+v\nwant %+v", e, want)
	}
	wantAccount(t, s, "acme", 10*usd-700_000_001, usd)

	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_1", Charge: 1})
	wantErr(t, "second Settle", err, store.ErrAlreadySettled)
	err = s.Release(ctx, "req_1", "late")
	wantErr(t, "Release after Settle", err, store.ErrAlreadySettled)
	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_none", Charge: 1})
	wantErr(t, "Settle without a hold", err, store.ErrNoHold)
	if err := s.Release(ctx, "req_2", "failed"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_2", Charge: 1})
	wantErr(t, "Settle after Release", err, store.ErrAlreadySettled)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_neg", Charge: -1}); err == nil {
		t.Error("Settle with a negative charge succeeded")
	}

	// A zero charge settles too, and journals a charge of 0.
	mustHold(t, s, "acme", "req_3", usd)
	if e := mustSettle(t, s, "req_3", 0); e.Amount != 0 || e.HoldAmount != usd {
		t.Errorf("zero charge entry %+v", e)
	}
	wantAccount(t, s, "acme", 10*usd-700_000_001, 0)
	if entries := books(t, s, "acme"); len(entries) != 3 {
		t.Errorf("journal has %d entries, want credit and two charges: %+v", len(entries), entries)
	}
}

// A Settlement naming its account settles as without it; naming another
// account is an error and charges nothing.
func (k *kit) settleAccount(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 5*usd)
	mustCredit(t, s, "beta", 5*usd)
	mustHold(t, s, "acme", "req_1", usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "beta", Charge: usd}); err == nil {
		t.Error("Settle naming the wrong account succeeded")
	}
	wantAccount(t, s, "beta", 5*usd, 0)
	wantAccount(t, s, "acme", 5*usd, usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "acme", Charge: usd / 2}); err != nil {
		t.Fatalf("Settle naming the hold's account: %v", err)
	}
	wantAccount(t, s, "acme", 5*usd-usd/2, 0)
	books(t, s, "acme")
	books(t, s, "beta")
}

// Release returns the hold's credit and charges nothing.
func (k *kit) release(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 4*usd)
	mustHold(t, s, "acme", "req_1", 3*usd)
	if err := s.Release(ctx, "req_1", "upstream failed"); err != nil {
		t.Fatal(err)
	}
	wantAccount(t, s, "acme", 4*usd, 0)
	err := s.Release(ctx, "req_1", "again")
	wantErr(t, "second Release", err, store.ErrAlreadySettled)
	err = s.Release(ctx, "req_none", "x")
	wantErr(t, "Release without a hold", err, store.ErrNoHold)
	mustHold(t, s, "acme", "req_2", 4*usd) // all the credit is back
	wantAccount(t, s, "acme", 4*usd, 4*usd)
	for _, e := range books(t, s, "acme") {
		if e.Kind == store.KindCharge {
			t.Errorf("a release charged: %+v", e)
		}
	}
}

// A charge above its hold is taken in full, even below zero.
func (k *kit) overrun(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 2*usd)
	mustHold(t, s, "acme", "req_1", usd)
	mustHold(t, s, "acme", "req_2", usd)
	if e := mustSettle(t, s, "req_1", 1_500_000_000); e.Amount != -1_500_000_000 || e.HoldAmount != usd || e.BalanceAfter != 500_000_000 {
		t.Errorf("overrun entry %+v", e)
	}
	wantAccount(t, s, "acme", 500_000_000, usd)
	if e := mustSettle(t, s, "req_2", 3*usd); e.Amount != -3*usd || e.BalanceAfter != -2_500_000_000 {
		t.Errorf("overrun below zero %+v", e)
	}
	wantAccount(t, s, "acme", -2_500_000_000, 0)
	books(t, s, "acme")
	// Credit brings it back above zero, and holds work again.
	mustCredit(t, s, "acme", 3*usd)
	mustHold(t, s, "acme", "req_3", 500_000_000)
	wantAccount(t, s, "acme", 500_000_000, 500_000_000)
}

// The journal lists an account's entries newest first, at most limit, and
// sums exactly to its balance; other accounts' entries are not in it.
func (k *kit) journal(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustCredit(t, s, "beta", 7*usd)
	var want []string // kinds and ids, oldest first
	want = append(want, "credit:")
	for i := range 12 {
		id := fmt.Sprintf("req_%02d", i)
		mustHold(t, s, "acme", id, usd)
		mustHold(t, s, "beta", "beta_"+id, usd)
		if i%4 == 3 {
			if err := s.Release(ctx, id, "failed"); err != nil {
				t.Fatal(err)
			}
		} else {
			mustSettle(t, s, id, pricing.Nano(i)*10_000_001+1)
			want = append(want, "charge:"+id)
		}
		mustSettle(t, s, "beta_"+id, 3)
		if i == 5 {
			mustCredit(t, s, "acme", 1)
			want = append(want, "credit:")
		}
	}
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 123}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RefundJob(ctx, "vid_1", "failed"); err != nil || !ok {
		t.Fatalf("RefundJob: %v, %v", ok, err)
	}
	want = append(want, "refund:vid_1")

	entries := books(t, s, "acme")
	if len(entries) != len(want) {
		t.Fatalf("journal has %d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		if got, w := e.Kind+":"+e.RequestID, want[len(want)-1-i]; got != w {
			t.Errorf("journal[%d] = %s, want %s (newest first)", i, got, w)
		}
	}
	top, err := s.Charges(ctx, "acme", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 3 || top[0].Seq != entries[0].Seq || top[2].Seq != entries[2].Seq {
		t.Errorf("Charges(limit 3): %+v, want the three newest", top)
	}
	if entries[0].BalanceAfter != mustBalance(t, s, "acme").Balance {
		t.Errorf("newest entry's balance after %d is not the balance", entries[0].BalanceAfter)
	}
	if beta := books(t, s, "beta"); len(beta) != 13 {
		t.Errorf("beta's journal has %d entries, want 13", len(beta))
	}
	_, err = s.Charges(ctx, "nobody", 10)
	wantErr(t, "Charges of an unknown account", err, store.ErrNotFound)
}

// --- keys and accounts -----------------------------------------------------

// Keys are found by hash, unique by hash and id, listed per account and
// all, and revoked.
func (k *kit) keys(t *testing.T, s Store) {
	for _, a := range []string{"acme", "beta"} {
		if _, err := s.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	created := []store.Key{
		testKey("key_a1", "acme", store.AutoRoute, "openai", "anthropic"),
		testKey("key_a2", "acme", "fast"),
		testKey("key_b1", "beta", "cheap"),
	}
	for _, key := range created {
		if err := s.CreateKey(ctx, key); err != nil {
			t.Fatalf("CreateKey %s: %v", key.ID, err)
		}
	}
	for _, key := range created {
		got, err := s.KeyByHash(ctx, key.Hash)
		if err != nil {
			t.Fatalf("KeyByHash %s: %v", key.ID, err)
		}
		if got.ID != key.ID || got.Hash != key.Hash || got.Account != key.Account || got.Route != key.Route ||
			fmt.Sprint(got.Exclude) != fmt.Sprint(key.Exclude) || got.Revoked || got.Created.IsZero() {
			t.Errorf("KeyByHash %s:\n got %+v\nwant %+v", key.ID, got, key)
		}
	}
	_, err := s.KeyByHash(ctx, store.HashKey("unknown"))
	wantErr(t, "KeyByHash of an unknown hash", err, store.ErrNotFound)

	dupHash := created[0]
	dupHash.ID = "key_other"
	wantErr(t, "CreateKey with a duplicate hash", s.CreateKey(ctx, dupHash), store.ErrExists)
	dupID := testKey("key_a1", "acme", "fast")
	dupID.Hash = store.HashKey("another secret")
	wantErr(t, "CreateKey with a duplicate id", s.CreateKey(ctx, dupID), store.ErrExists)
	wantErr(t, "CreateKey on an unknown account", s.CreateKey(ctx, testKey("key_x", "nobody", "fast")), store.ErrNotFound)

	listKeys(t, s)
	revokeKeys(t, s, created)
}

// testKey is a key of the keys test, its secret made from its id.
func testKey(id, account, route string, exclude ...string) store.Key {
	return store.Key{ID: id, Hash: store.HashKey("secret-" + id), Account: account, Route: route, Exclude: exclude}
}

// listKeys lists the keys test's keys per account and all, in id order.
func listKeys(t *testing.T, s Store) {
	ids := func(keys []store.Key, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			out = append(out, k.ID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(s.ListKeys(ctx, "acme")); got != "[key_a1 key_a2]" {
		t.Errorf("ListKeys(acme) = %s", got)
	}
	if got := ids(s.ListKeys(ctx, "beta")); got != "[key_b1]" {
		t.Errorf("ListKeys(beta) = %s", got)
	}
	if got := ids(s.ListKeys(ctx, "")); got != "[key_a1 key_a2 key_b1]" {
		t.Errorf("ListKeys(all) = %s", got)
	}
	_, err := s.ListKeys(ctx, "nobody")
	wantErr(t, "ListKeys of an unknown account", err, store.ErrNotFound)
}

// revokeKeys revokes the keys test's key_a2: found revoked by hash and in
// the list, the others not; revoking again is no error.
func revokeKeys(t *testing.T, s Store, created []store.Key) {
	r, err := s.RevokeKey(ctx, "key_a2")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "key_a2" || !r.Revoked || r.Hash != created[1].Hash || r.Account != "acme" {
		t.Errorf("RevokeKey returned %+v", r)
	}
	if got, err := s.KeyByHash(ctx, created[1].Hash); err != nil || !got.Revoked {
		t.Errorf("a revoked key by hash: %+v, %v; want it, revoked", got, err)
	}
	if got, err := s.KeyByHash(ctx, created[0].Hash); err != nil || got.Revoked {
		t.Errorf("another key after a revoke: %+v, %v", got, err)
	}
	if again, err := s.RevokeKey(ctx, "key_a2"); err != nil || !again.Revoked {
		t.Errorf("revoking twice: %+v, %v", again, err)
	}
	_, err = s.RevokeKey(ctx, "key_unknown")
	wantErr(t, "RevokeKey of an unknown id", err, store.ErrNotFound)
	keys, err := s.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 2 || keys[0].Revoked || !keys[1].Revoked {
		t.Errorf("ListKeys after a revoke: %+v, %v", keys, err)
	}
}

// ListAccounts pages through the accounts in id order.
func (k *kit) listAccounts(t *testing.T, s Store) {
	if got, err := s.ListAccounts(ctx, "", 10); err != nil || len(got) != 0 {
		t.Errorf("ListAccounts of an empty store: %+v, %v", got, err)
	}
	names := []string{"delta", "alpha", "echo", "charlie", "bravo", "golf", "foxtrot"}
	for i, n := range names {
		mustCredit(t, s, n, pricing.Nano(i+1)*usd)
	}
	mustHold(t, s, "charlie", "req_c", usd)
	var pages [][]string
	var all []store.Account
	after := ""
	for range len(names) + 1 {
		page, err := s.ListAccounts(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("page of %d accounts, limit 3", len(page))
		}
		var ids []string
		for _, a := range page {
			ids = append(ids, a.ID)
		}
		pages = append(pages, ids)
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
	if got := fmt.Sprint(pages); got != "[[alpha bravo charlie] [delta echo foxtrot] [golf]]" {
		t.Errorf("pages %s", got)
	}
	for _, a := range all {
		want := mustBalance(t, s, a.ID)
		if a.Balance != want.Balance || a.Held != want.Held {
			t.Errorf("listed %+v, Balance says %+v", a, want)
		}
	}
	if len(all) == 7 && (all[1].Balance != 5*usd || all[2].Held != usd) {
		t.Errorf("listed bravo %+v, charlie %+v", all[1], all[2])
	}
	for _, limit := range []int{0, -1, store.MaxAccountPage + 1} {
		if got, err := s.ListAccounts(ctx, "", limit); err != nil || len(got) != len(names) {
			t.Errorf("ListAccounts(limit %d): %d accounts, %v; want all %d", limit, len(got), err, len(names))
		}
	}
	if got, err := s.ListAccounts(ctx, "c", 2); err != nil || len(got) != 2 || got[0].ID != "charlie" || got[1].ID != "delta" {
		t.Errorf(`ListAccounts(after "c", 2): %+v, %v`, got, err)
	}
}

// --- jobs ------------------------------------------------------------------

// A job is stored once and read back; its refund credits its amount once.
func (k *kit) jobs(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 2*usd)
	mustHold(t, s, "acme", "vid_1", 1_500_000_000)
	mustSettle(t, s, "vid_1", 1_500_000_000) // the fee, at acceptance
	job := store.Job{RequestID: "vid_1", Account: "acme", KeyID: "key_kit", Model: "video-1", Route: "r",
		Line: "line-1", Amount: 1_500_000_000}
	if err := s.PutJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, "vid_1")
	if err != nil {
		t.Fatal(err)
	}
	job.Created = got.Created
	if !got.Created.Equal(job.Created) || got.Created.IsZero() || fmt.Sprint(got) != fmt.Sprint(job) {
		t.Errorf("Job:\n got %+v\nwant %+v", got, job)
	}
	wantErr(t, "PutJob of a duplicate", s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 1}), store.ErrExists)
	wantErr(t, "PutJob on an unknown account", s.PutJob(ctx, store.Job{RequestID: "vid_2", Account: "nobody", Amount: 1}), store.ErrNotFound)
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_3", Account: "acme", Amount: -1}); err == nil {
		t.Error("PutJob of a negative amount succeeded")
	}
	_, err = s.Job(ctx, "vid_unknown")
	wantErr(t, "Job of an unknown id", err, store.ErrNotFound)
	_, err = s.RefundJob(ctx, "vid_unknown", "x")
	wantErr(t, "RefundJob of an unknown id", err, store.ErrNotFound)

	wantAccount(t, s, "acme", 500_000_000, 0)
	if ok, err := s.RefundJob(ctx, "vid_1", "provider reported failure"); err != nil || !ok {
		t.Fatalf("RefundJob: %v, %v", ok, err)
	}
	if ok, err := s.RefundJob(ctx, "vid_1", "again"); err != nil || ok {
		t.Errorf("second RefundJob: %v, %v; want false, nil", ok, err)
	}
	if j, err := s.Job(ctx, "vid_1"); err != nil || !j.Refunded {
		t.Errorf("job after its refund: %+v, %v", j, err)
	}
	wantAccount(t, s, "acme", 2*usd, 0)
	entries := books(t, s, "acme")
	e := entries[0]
	if len(entries) != 3 || e.Kind != store.KindRefund || e.RequestID != "vid_1" || e.Amount != 1_500_000_000 ||
		e.BalanceAfter != 2*usd || e.Note != "provider reported failure" || e.Model != "video-1" {
		t.Errorf("journal after the refund: %+v", entries)
	}
}

// Many concurrent refunds of one job credit it once.
func (k *kit) refundJobOnce(t *testing.T, s Store) {
	mustCredit(t, s, "acme", usd)
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 700_000_000}); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		wins  atomic.Int64
	)
	for range k.opts.Callers {
		wg.Go(func() {
			<-start
			ok, err := s.RefundJob(ctx, "vid_1", "failed")
			if err != nil {
				t.Errorf("RefundJob: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent RefundJob calls refunded, want exactly 1", wins.Load())
	}
	wantAccount(t, s, "acme", 1_700_000_000, 0)
	if entries := books(t, s, "acme"); len(entries) != 2 {
		t.Errorf("journal after concurrent refunds: %+v", entries)
	}
}

// --- concurrency -----------------------------------------------------------

// Concurrent holds against scarce credit admit exactly what it covers:
// never more (no credit is spent twice), and no caller is refused while
// credit for it remains (every refusal is a true 402).
func (k *kit) concurrentHolds(t *testing.T, s Store) {
	const each = usd
	credits := 5*usd + 400_000_000 // covers five holds, not six
	callers := max(k.opts.Callers, 12)
	at := k.spread(t, s)
	mustCredit(t, s, "acme", credits)
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		admitted = make(chan string, callers)
		refused  atomic.Int64
	)
	for i := range callers {
		wg.Go(func() {
			<-start
			id := fmt.Sprintf("req_%04d", i)
			err := at(i).Hold(ctx, holdOf("acme", id, each))
			var ie *store.InsufficientError
			switch {
			case err == nil:
				admitted <- id
			case errors.As(err, &ie):
				if ie.Needed != each || ie.Available >= each {
					t.Errorf("%s refused with needed %d, available %d", id, ie.Needed, ie.Available)
				}
				refused.Add(1)
			default:
				t.Errorf("Hold %s: %v", id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(admitted)
	var ids []string
	for id := range admitted {
		ids = append(ids, id)
	}
	if len(ids) != 5 || refused.Load() != int64(callers-5) {
		t.Fatalf("%d admitted, %d refused; want 5 and %d", len(ids), refused.Load(), callers-5)
	}
	wantAccount(t, s, "acme", credits, 5*each)

	// Settle them all at once, one over its hold.
	var charged atomic.Int64
	for i, id := range ids {
		wg.Go(func() {
			charge := pricing.Nano(i+1)*300_000_000 + 7 // the last one overruns
			if _, err := at(i).Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: charge}); err != nil {
				t.Errorf("Settle %s: %v", id, err)
				return
			}
			charged.Add(int64(charge))
		})
	}
	wg.Wait()
	wantAccount(t, s, "acme", credits-pricing.Nano(charged.Load()), 0)
	if entries := books(t, s, "acme"); len(entries) != 6 {
		t.Errorf("journal has %d entries, want a credit and 5 charges", len(entries))
	}
}

// Concurrent Settles and Releases of one hold: exactly one ends it, every
// other gets ErrAlreadySettled, and the charge is taken once.
func (k *kit) concurrentSettle(t *testing.T, s Store) {
	at := k.spread(t, s)
	mustCredit(t, s, "acme", 10*usd)
	const rounds = 5
	var wantBalance = 10 * usd
	for r := range rounds {
		id := fmt.Sprintf("req_%d", r)
		mustHold(t, s, "acme", id, usd)
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			settled  atomic.Int64
			released atomic.Int64
		)
		for i := range k.opts.Callers {
			wg.Go(func() {
				<-start
				var err error
				if r%2 == 1 && i%4 == 0 { // odd rounds race releases against settles
					if err = at(i).Release(ctx, id, "failed"); err == nil {
						released.Add(1)
					}
				} else if _, err = at(i).Settle(ctx, store.Settlement{RequestID: id, Charge: 600_000_000}); err == nil {
					settled.Add(1)
				}
				if err != nil && !errors.Is(err, store.ErrAlreadySettled) {
					t.Errorf("round %d: %v, want nil or ErrAlreadySettled", r, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if settled.Load()+released.Load() != 1 {
			t.Fatalf("round %d: %d settles and %d releases succeeded, want exactly one end", r, settled.Load(), released.Load())
		}
		if settled.Load() == 1 {
			wantBalance -= 600_000_000
		}
		wantAccount(t, s, "acme", wantBalance, 0)
	}
	books(t, s, "acme")
}

// Many accounts, all operations at once: every account's books hold and
// nothing stays held.
func (k *kit) concurrentMixed(t *testing.T, s Store) {
	const accounts = 4
	perAccount := max(k.opts.Callers/2, 8)
	at := k.spread(t, s)
	for a := range accounts {
		mustCredit(t, s, fmt.Sprintf("acct_%d", a), 10*usd)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for a := range accounts {
		for i := range perAccount {
			wg.Go(func() {
				<-start
				account := fmt.Sprintf("acct_%d", a)
				id := fmt.Sprintf("%s_req_%d", account, i)
				// The hold and its end go to different replicas.
				if err := at(i).Hold(ctx, holdOf(account, id, usd)); err != nil {
					if !errors.Is(err, store.ErrInsufficient) {
						t.Errorf("Hold %s: %v", id, err)
					}
					return
				}
				var err error
				end := at(i + a + 1)
				switch i % 3 {
				case 0:
					_, err = end.Settle(ctx, store.Settlement{RequestID: id, Charge: 400_000_000})
				case 1:
					err = end.Release(ctx, id, "failed")
				default:
					if _, err = end.Credit(ctx, account, 1, ""); err == nil {
						_, err = end.Settle(ctx, store.Settlement{RequestID: id, Account: account, Charge: usd + 1})
					}
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for a := range accounts {
		account := fmt.Sprintf("acct_%d", a)
		if got := mustBalance(t, s, account); got.Held != 0 {
			t.Errorf("%s: %d still held", account, got.Held)
		}
		books(t, s, account)
	}
}

// race runs fn(i) for i in [0, n) on n goroutines released together.
func race(n int, fn func(i int)) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// Concurrent first credits of one new account all count; concurrent
// creations of one account, one key or one job, and concurrent holds on one
// request id, succeed once and answer ErrExists to the rest.
func (k *kit) concurrentCreate(t *testing.T, s Store) {
	n := k.opts.Callers
	at := k.spread(t, s)
	race(n, func(i int) {
		if _, err := at(i).Credit(ctx, "fresh", pricing.Nano(i+1), ""); err != nil {
			t.Errorf("Credit %d: %v", i, err)
		}
	})
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2), 0)
	if entries := books(t, s, "fresh"); len(entries) != n {
		t.Errorf("%d journal entries for %d credits", len(entries), n)
	}

	once := func(what string, fn func(i int) error) {
		t.Helper()
		var ok atomic.Int64
		race(n, func(i int) {
			switch err := fn(i); {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, store.ErrExists):
				t.Errorf("%s: %v, want nil or ErrExists", what, err)
			}
		})
		if ok.Load() != 1 {
			t.Errorf("%s: %d of %d concurrent calls succeeded, want 1", what, ok.Load(), n)
		}
	}
	once("CreateAccount", func(i int) error {
		_, err := at(i).CreateAccount(ctx, "acme")
		return err
	})
	once("CreateKey with one hash", func(i int) error {
		return at(i).CreateKey(ctx, store.Key{ID: fmt.Sprintf("key_%d", i), Hash: store.HashKey("one secret"), Account: "acme", Route: "r"})
	})
	once("CreateKey with one id", func(i int) error {
		return at(i).CreateKey(ctx, store.Key{ID: "key_one", Hash: store.HashKey(fmt.Sprintf("secret %d", i)), Account: "acme", Route: "r"})
	})
	if keys, err := s.ListKeys(ctx, "acme"); err != nil || len(keys) != 2 {
		t.Errorf("keys after the races: %+v, %v; want 2", keys, err)
	}
	once("PutJob", func(i int) error {
		return at(i).PutJob(ctx, store.Job{RequestID: "vid_1", Account: "fresh", Amount: pricing.Nano(i)})
	})
	once("Hold on one request id", func(i int) error {
		return at(i).Hold(ctx, holdOf("fresh", "req_1", 7))
	})
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2), 7)
	mustSettle(t, s, "req_1", 7)
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2)-7, 0)
	books(t, s, "fresh")
}

// --- recovery --------------------------------------------------------------

// The holds of an owner that died are released, each with a KindRecovery
// entry of amount 0, never charged; what was settled stays settled.
func (k *kit) recovery(t *testing.T, s Store) {
	if k.opts.Crash == nil {
		t.Fatal("storetest: Options.Crash is nil: every store recovers the holds of owners that died, and the kit must be told how this one's die")
	}
	mustCredit(t, s, "acme", 10*usd)
	mustCredit(t, s, "beta", 10*usd)
	mustHold(t, s, "acme", "settled", usd)
	mustHold(t, s, "acme", "released", usd)
	mustHold(t, s, "acme", "lost_1", 2*usd)
	mustHold(t, s, "acme", "lost_2", 3*usd)
	mustHold(t, s, "beta", "lost_3", 4*usd)
	mustSettle(t, s, "settled", 500_000_000)
	if err := s.Release(ctx, "released", "failed"); err != nil {
		t.Fatal(err)
	}

	k.handedOff = true
	after := k.opts.Crash(t, s)
	if after == nil {
		t.Fatal("Crash returned a nil store")
	}
	t.Cleanup(func() {
		if err := after.Close(); err != nil {
			t.Errorf("Close of the store after the crash: %v", err)
		}
	})
	wantAccount(t, after, "acme", 9_500_000_000, 0)
	wantAccount(t, after, "beta", 10*usd, 0)

	lost := map[string]pricing.Nano{"lost_1": 2 * usd, "lost_2": 3 * usd, "lost_3": 4 * usd}
	found := map[string]int{}
	for _, account := range []string{"acme", "beta"} {
		for _, e := range books(t, after, account) {
			switch e.Kind {
			case store.KindRecovery:
				found[e.RequestID]++
				if want, ok := lost[e.RequestID]; !ok || e.HoldAmount != want || e.Amount != 0 ||
					e.KeyID != "key_kit" || e.Model != "kit-model" || e.Route != "kit-route" {
					t.Errorf("recovery entry %+v: want one of the lost holds, its hold amount, key, model and route, amount 0", e)
				}
			case store.KindCharge:
				if e.RequestID != "settled" {
					t.Errorf("charge entry after the crash: %+v", e)
				}
			}
		}
	}
	for id := range lost {
		if found[id] != 1 {
			t.Errorf("%d recovery entries for %s, want 1", found[id], id)
		}
	}
	if found["settled"]+found["released"] != 0 {
		t.Errorf("ended holds recovered: %v", found)
	}
	for id := range lost {
		_, err := after.Settle(ctx, store.Settlement{RequestID: id, Charge: 1})
		wantErr(t, "Settle of a recovered hold", err, store.ErrAlreadySettled)
	}
	wantAccount(t, after, "acme", 9_500_000_000, 0)
	// The recovered credit can be held again.
	mustHold(t, after, "acme", "new", 9_500_000_000)
	mustSettle(t, after, "new", usd)
	wantAccount(t, after, "acme", 8_500_000_000, 0)
	books(t, after, "acme")
}

// --- export ----------------------------------------------------------------

// exported is what a store.Sink received, and in what order.
type exported struct {
	sections []int // 0 accounts … 5 logins, per record
	accounts []store.ExportedAccount
	keys     []store.Key
	entries  []store.Entry
	jobs     []store.Job
	outcomes []store.Outcome
	logins   []store.Login
}

func (x *exported) Account(a store.ExportedAccount) error {
	x.sections, x.accounts = append(x.sections, 0), append(x.accounts, a)
	return nil
}
func (x *exported) Key(k store.Key) error {
	x.sections, x.keys = append(x.sections, 1), append(x.keys, k)
	return nil
}
func (x *exported) Entry(e store.Entry) error {
	x.sections, x.entries = append(x.sections, 2), append(x.entries, e)
	return nil
}
func (x *exported) Job(j store.Job) error {
	x.sections, x.jobs = append(x.sections, 3), append(x.jobs, j)
	return nil
}
func (x *exported) Outcome(o store.Outcome) error {
	x.sections, x.outcomes = append(x.sections, 4), append(x.outcomes, o)
	return nil
}
func (x *exported) Login(l store.Login) error {
	x.sections, x.logins = append(x.sections, 5), append(x.logins, l)
	return nil
}

// A store that is a store.Exporter gives every record as its API shows it,
// in store.Sink's order: accounts by id with their journal counter (Held
// counting open holds), keys by hash, each account's journal oldest first
// (accounts in id order, though "acme-eu/" sorts before "acme/"), jobs and
// outcomes by request id (console logins: see the Console group). A store
// that does not claim Exporter skips this subtest.
func (k *kit) export(t *testing.T, s Store) {
	ex := claimed[store.Exporter](t, k, s, Exporter)
	seedExport(t, s)
	var x exported
	if err := ex.Export(ctx, &x); err != nil {
		t.Fatalf("Export: %v", err)
	}
	for i := 1; i < len(x.sections); i++ {
		if x.sections[i] < x.sections[i-1] {
			t.Fatalf("records out of order: section %d after %d (record %d)", x.sections[i], x.sections[i-1], i)
		}
	}
	exportedAccounts(t, s, &x)
	exportedKeys(t, s, &x)
	exportedJobsAndOutcomes(t, s, &x)
}

// seedExport fills the store with a little of everything Export writes:
// accounts (one without entries), keys (one revoked, one with exclusions),
// a settled, a released and an open hold, and video jobs (one refunded).
func seedExport(t *testing.T, s Store) {
	mustCredit(t, s, "acme-eu", 5*usd)
	mustCredit(t, s, "acme", 10*usd)
	if _, err := s.CreateAccount(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"acme", "acme-eu", "acme"} {
		key := store.Key{ID: fmt.Sprintf("key_%d", i), Hash: store.HashKey(fmt.Sprintf("secret %d", i)), Account: a, Route: store.AutoRoute}
		if i == 1 {
			key.Exclude = []string{"m1", "m2"}
		}
		if err := s.CreateKey(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeKey(ctx, "key_2"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_settled", usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_settled", Charge: 400_000_001,
		Usage: pricing.Usage{InputTokens: 10, OutputTokens: 20}, Note: "estimated"}); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme-eu", "req_released", usd)
	if err := s.Release(ctx, "req_released", "upstream 500"); err != nil {
		t.Fatal(err)
	}
	for _, j := range []store.Job{
		{RequestID: "vid_2", Account: "acme", Model: "v", Route: "r", Line: "sim", Amount: usd},
		{RequestID: "vid_1", Account: "acme", KeyID: "key_0", Model: "v", Route: "r", Line: "sim", Amount: 2 * usd},
	} {
		if err := s.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RefundJob(ctx, "vid_1", "provider failed"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_open", usd/4)

}

// exportedAccounts checks the accounts exported against ListAccounts, and
// their journal entries against the journals, oldest first.
func exportedAccounts(t *testing.T, s Store, x *exported) {
	accounts, err := s.ListAccounts(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.accounts) != len(accounts) {
		t.Fatalf("%d accounts exported, ListAccounts has %d", len(x.accounts), len(accounts))
	}
	var want []store.Entry
	for i, a := range accounts {
		es := books(t, s, a.ID)
		var last uint64
		if len(es) > 0 {
			last = es[0].Seq
		}
		if x.accounts[i].Account != a || x.accounts[i].LastSeq != last {
			t.Errorf("account %d exported as %+v; ListAccounts has %+v, the journal ends at %d", i, x.accounts[i], a, last)
		}
		for j := len(es) - 1; j >= 0; j-- {
			want = append(want, es[j])
		}
	}
	if x.accounts[0].ID != "acme" || x.accounts[0].Held != usd/4 || x.accounts[1].ID != "acme-eu" {
		t.Errorf("accounts exported: %+v", x.accounts)
	}
	if len(x.entries) != len(want) {
		t.Errorf("%d journal entries exported, the journals have %d", len(x.entries), len(want))
	}
	for i := range min(len(x.entries), len(want)) {
		if x.entries[i] != want[i] {
			t.Errorf("journal entry %d exported as\n %+v\nthe journal has\n %+v", i, x.entries[i], want[i])
		}
	}
}

// exportedKeys checks the keys exported, in hash order, against KeyByHash.
func exportedKeys(t *testing.T, s Store, x *exported) {
	if len(x.keys) != 3 {
		t.Errorf("%d keys exported, want 3", len(x.keys))
	}
	for i, key := range x.keys {
		if i > 0 && x.keys[i-1].Hash >= key.Hash {
			t.Errorf("keys not in hash order at %d", i)
		}
		got, err := s.KeyByHash(ctx, key.Hash)
		if err != nil || got.ID != key.ID || got.Account != key.Account || got.Route != key.Route ||
			fmt.Sprint(got.Exclude) != fmt.Sprint(key.Exclude) || got.Revoked != key.Revoked || !got.Created.Equal(key.Created) {
			t.Errorf("key %s exported as %+v; KeyByHash has %+v, %v", key.ID, key, got, err)
		}
	}
}

// exportedJobsAndOutcomes checks the jobs exported against Job, and the
// outcomes of the settled and released holds.
func exportedJobsAndOutcomes(t *testing.T, s Store, x *exported) {
	if len(x.jobs) != 2 || x.jobs[0].RequestID != "vid_1" || x.jobs[1].RequestID != "vid_2" {
		t.Fatalf("jobs exported: %+v", x.jobs)
	}
	for _, j := range x.jobs {
		if got, err := s.Job(ctx, j.RequestID); err != nil || got != j {
			t.Errorf("job exported as %+v; Job has %+v, %v", j, got, err)
		}
	}
	if len(x.outcomes) != 2 {
		t.Fatalf("outcomes exported: %+v", x.outcomes)
	}
	if o := x.outcomes[0]; o.RequestID != "req_released" || o.Account != "acme-eu" || o.State != store.OutcomeReleased ||
		o.HoldAmount != usd || o.Reason != "upstream 500" || o.Time.IsZero() {
		t.Errorf("released outcome exported as %+v", o)
	}
	if o := x.outcomes[1]; o.RequestID != "req_settled" || o.Account != "acme" || o.State != store.OutcomeSettled ||
		o.HoldAmount != usd || o.Charge != 400_000_001 || o.Seq != 2 || o.Reason != "estimated" || o.Time.IsZero() {
		t.Errorf("settled outcome exported as %+v", o)
	}
}

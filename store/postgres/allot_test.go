package postgres

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

// TestAllotAndCarve: an allotment is a hold like any; a carve moves part of
// it into a call's own hold (the account's held unchanged, the key's held
// and spend counting it), which settles like any; a carve larger than what
// is left, from no allotment or from an ended one, or of an ended request
// id, is refused and writes nothing; the allotment's release gives back
// only what was not carved; the books stay exact.
func TestAllotAndCarve(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{Owner: "one", RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 100*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, s, store.Key{ID: "key_t", Account: "acme"})
	allot := store.Hold{RequestID: "allot_1", Account: "acme", Endpoint: "allotment", Amount: 10 * usd}
	if err := s.Allot(ctx, allot); err != nil {
		t.Fatal(err)
	}
	if n := s.liveCount("acme"); n != 0 {
		t.Fatalf("an allotment counts as %d calls of the account, want 0", n)
	}
	if err := s.Carve(ctx, "allot_1", hold("acme", "call_1", 3*usd)); err != nil {
		t.Fatal(err)
	}
	if n := s.liveCount("acme"); n != 1 {
		t.Fatalf("a carved hold counts as %d calls, want 1", n)
	}
	held := func(wantAccount, wantKey pricing.Nano) {
		t.Helper()
		a, err := s.Balance(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if k := keyOf(t, s, "key_t"); a.Held != wantAccount || k.Held != wantKey {
			t.Fatalf("held: account %v key %v, want %v and %v", a.Held, k.Held, wantAccount, wantKey)
		}
		audit(t, s, "acme")
	}
	held(10*usd, 3*usd)
	amounts := map[string]pricing.Nano{}
	hs, err := s.OpenHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		amounts[h.RequestID] = h.Amount
	}
	if amounts["allot_1"] != 7*usd || amounts["call_1"] != 3*usd {
		t.Fatalf("open holds %v, want allot_1 7 USD and call_1 3 USD", amounts)
	}

	// Refusals write nothing.
	for _, tc := range []struct {
		from, id string
		amount   pricing.Nano
		want     error
	}{
		{"allot_1", "call_big", 7*usd + 1, store.ErrNoHold},
		{"allot_none", "call_x", 1, store.ErrNoHold},
	} {
		if err := s.Carve(ctx, tc.from, hold("acme", tc.id, tc.amount)); !errors.Is(err, tc.want) {
			t.Fatalf("carve %s from %s: %v, want %v", tc.id, tc.from, err, tc.want)
		}
	}
	held(10*usd, 3*usd)

	e, err := s.Settle(ctx, store.Settlement{RequestID: "call_1", Account: "acme", Charge: 2 * usd})
	if err != nil {
		t.Fatal(err)
	}
	if e.Amount != -2*usd || e.BalanceAfter != 98*usd || e.HoldAmount != 3*usd || e.KeyID != "key_t" {
		t.Fatalf("the carved call's charge entry: %+v", e)
	}
	held(7*usd, 0)
	if k := keyOf(t, s, "key_t"); k.Spent != 2*usd {
		t.Fatalf("key spent %v, want 2 USD", k.Spent)
	}
	if err := s.Carve(ctx, "allot_1", hold("acme", "call_1", 1)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a carve of a settled request id: %v, want ErrExists", err)
	}

	// Concurrent carves never take more than the allotment has.
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			err := s.Carve(ctx, "allot_1", hold("acme", fmt.Sprint("many_", i), usd/4))
			switch {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, store.ErrNoHold):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 28 {
		t.Fatalf("%d carves of 0.25 USD from 7 USD, want 28", ok.Load())
	}
	held(7*usd, 7*usd)

	// The allotment's release gives back what is left of it (nothing
	// here), and the carved holds end on their own.
	if err := s.Release(ctx, "allot_1", "idle"); err != nil {
		t.Fatal(err)
	}
	held(7*usd, 7*usd)
	if err := s.Carve(ctx, "allot_1", hold("acme", "late", 0)); !errors.Is(err, store.ErrNoHold) {
		t.Fatalf("a carve from a released allotment: %v, want ErrNoHold", err)
	}
	for i := range 40 {
		err := s.Release(ctx, fmt.Sprint("many_", i), "test")
		if err != nil && !errors.Is(err, store.ErrNoHold) {
			t.Fatal(err)
		}
	}
	held(0, 0)
	if a, _ := s.Balance(ctx, "acme"); a.Balance != 98*usd {
		t.Fatalf("balance %v, want 98 USD", a.Balance)
	}
}

// TestCarvesBesideOtherReplicasNoDeadlock: one replica carves out of an
// allotment and holds on the same key in its batches while another holds
// and settles on that key: a carve locks the account before the key, as
// every other statement does, so nothing deadlocks, every call is
// charged and the books audit clean.
func TestCarvesBesideOtherReplicasNoDeadlock(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	before := deadlocks(t, dsn)
	r0 := openStore(t, dsn, Options{Owner: "r0", MaxConns: 8, RenewEvery: -1})
	r1 := openStore(t, dsn, Options{Owner: "r1", MaxConns: 8, RenewEvery: -1})
	if _, err := r0.Credit(ctx, "acme", 1000*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, r0, store.Key{ID: "key_t", Account: "acme"})
	if err := r0.Allot(ctx, store.Hold{RequestID: "allot_0", Account: "acme", Endpoint: "allotment", Amount: 100 * usd}); err != nil {
		t.Fatal(err)
	}
	const per = 300
	var charged atomic.Int64
	var wg sync.WaitGroup
	run := func(r *Store, name string, carve bool) {
		for i := range per {
			id := fmt.Sprint(name, "_", i)
			var err error
			if carve && i%3 != 0 {
				err = r.Carve(ctx, "allot_0", hold("acme", id, cent))
			} else {
				err = r.Hold(ctx, hold("acme", id, cent))
			}
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			if _, err := r.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: cent / 2}); err != nil {
				t.Errorf("settle %s: %v", id, err)
				return
			}
			charged.Add(int64(cent / 2))
		}
	}
	for w := range 6 {
		wg.Go(func() { run(r0, fmt.Sprint("a", w), true) })
		wg.Go(func() { run(r1, fmt.Sprint("b", w), false) })
	}
	wg.Wait()
	if err := r0.Release(ctx, "allot_0", "test"); err != nil {
		t.Fatal(err)
	}
	audit(t, r0, "acme")
	acct, err := r0.Balance(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if acct.Held != 0 || acct.Balance != 1000*usd-pricing.Nano(charged.Load()) {
		t.Fatalf("balance %v held %v, want %v held 0", acct.Balance, acct.Held, 1000*usd-pricing.Nano(charged.Load()))
	}
	_ = r0.Close()
	_ = r1.Close()
	if n := deadlocks(t, dsn) - before; n != 0 {
		t.Errorf("%d deadlocks", n)
	}
}

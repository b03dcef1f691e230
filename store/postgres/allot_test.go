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

// TestAllotmentsLive: the kit checks what an allotment does to the books
// (storetest, "Allotments"); here, what this replica renews. An allotment
// is renewed but does not count as a call of the account (liveCount, which
// decides a settle's linger); a carved hold counts until it ends; a carve
// tried again after its answer was lost finds its hold (ErrExists) and
// leaves it renewed.
func TestAllotmentsLive(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{Owner: "one", RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 100*usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Allot(ctx, store.Hold{RequestID: "allot_1", Account: "acme", Endpoint: "allotment", Amount: 10 * usd}); err != nil {
		t.Fatal(err)
	}
	live := func(want int) {
		t.Helper()
		if n := s.liveCount("acme"); n != want {
			t.Fatalf("%d calls of the account live, want %d", n, want)
		}
	}
	live(0)
	if err := s.Carve(ctx, "allot_1", hold("acme", "call_1", usd)); err != nil {
		t.Fatal(err)
	}
	live(1)
	// The first try's answer lost (ErrUnavailable): it was dropped.
	s.dropLive("call_1")
	live(0)
	if err := s.Carve(ctx, "allot_1", hold("acme", "call_1", usd)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("the same carve again: %v, want ErrExists", err)
	}
	live(1)
	if n, err := s.RenewLeases(ctx); err != nil || n != 2 {
		t.Fatalf("renewed %d holds (%v), want the allotment and the call's", n, err)
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "call_1", Account: "acme", Charge: usd}); err != nil {
		t.Fatal(err)
	}
	live(0)
	if err := s.Release(ctx, "allot_1", "ended"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RenewLeases(ctx); err != nil || n != 0 {
		t.Fatalf("renewed %d holds (%v) after every hold ended", n, err)
	}
	audit(t, s, "acme")
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

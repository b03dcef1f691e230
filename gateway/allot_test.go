package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

// countingStore counts the holds and carves a replica sends.
type countingStore struct {
	Store
	holds, carves atomic.Int32
	carveDelay    atomic.Int64 // a carve waits this long first (time.Duration)
}

func (s *countingStore) Hold(ctx context.Context, h store.Hold) error {
	s.holds.Add(1)
	return s.Store.Hold(ctx, h)
}

func (s *countingStore) Allot(ctx context.Context, h store.Hold) error {
	return s.Store.(store.Allotter).Allot(ctx, h)
}

func (s *countingStore) HoldAdmitted(ctx context.Context, h store.Hold) error {
	return s.Store.(store.Allotter).HoldAdmitted(ctx, h)
}

func (s *countingStore) Carve(ctx context.Context, from string, h store.Hold) error {
	s.carves.Add(1)
	time.Sleep(time.Duration(s.carveDelay.Load())) // the slow carve under test
	return s.Store.(store.Allotter).Carve(ctx, from, h)
}

// allotEnv is an env on PostgreSQL (it skips without RELAY_TEST_POSTGRES)
// with account acme ($100) and a key of it, and a replica whose holds
// overlap and are allotted, its store counted.
func allotEnv(t *testing.T) (e, r *env, cs *countingStore, key string) {
	pgtest.Need(t)
	e = newEnvOn(t, store.DriverPostgres)
	e.account("acme", "100")
	key = e.key("acme", "standard")
	cs = &countingStore{}
	r = e.replica(func(s Store) Store { cs.Store = s; return cs })
	r.gw.bill.ForceOverlap(cs)
	return e, r, cs, key
}

// TestAllotmentOnPostgres: on PostgreSQL, once an account's balance shows
// ample credit, its calls are admitted against an allotment and their holds
// carved out of it, none held on the way upstream; a key with a spend limit
// still holds; every call is charged, the books audit clean, and Drain
// gives the allotment's rest back.
func TestAllotmentOnPostgres(t *testing.T) {
	t.Parallel()
	e, r, cs, key := allotEnv(t)
	call := func(k string) {
		t.Helper()
		if st, _, data := r.do("POST", "/v1/chat/completions", k, chatBody("modelf-flash", "hello")); st != 200 {
			t.Fatalf("call: %d %s", st, data)
		}
	}
	call(key) // holds first: no balance seen yet
	r.gw.bill.WaitSettled(context.Background(), "acme")
	call(key) // overlaps its hold, and takes an allotment for the next calls
	testwait.For(t, 15*time.Second, "an allotment is taken", func() bool { return r.gw.bill.Allotted("acme") })
	holds := cs.holds.Load()
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { call(key) })
	}
	wg.Wait()
	r.gw.bill.WaitSettled(context.Background(), "acme") // each settle waited for its carve
	if got := cs.holds.Load() - holds; got != 0 {
		t.Fatalf("%d of %d calls held in the store on the way; want 0", got, n)
	}
	if got := cs.carves.Load(); got != n {
		t.Fatalf("%d carves for %d calls", got, n)
	}
	a := e.balance("acme")
	if a.Held <= 0 {
		t.Fatalf("held %v: the allotment is not counted", a.Held)
	}

	// A key with a spend limit holds each call in the store.
	limited, _ := e.keyWith("acme", "standard", store.Key{Limit: 50 * pricing.NanoPerUSD, Reset: store.ResetMonthly})
	holds = cs.holds.Load()
	call(limited)
	if cs.holds.Load() != holds+1 {
		t.Fatal("a call of a key with a spend limit did not hold in the store")
	}

	if err := r.gw.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	a = e.balance("acme")
	if a.Held != 0 {
		t.Fatalf("after Drain: held %v, want 0", a.Held)
	}
	entries, err := e.charges("acme", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var charged pricing.Nano
	calls := 0
	for _, en := range entries {
		if en.Kind == store.KindCharge {
			charged -= en.Amount
			calls++
		}
	}
	if calls != n+3 || a.Balance != 100*pricing.NanoPerUSD-charged {
		t.Fatalf("%d charges summing %v, balance %v; want %d calls and 100 − charges", calls, charged, a.Balance, n+3)
	}
	rep, err := e.store.Audit(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSlowCarveLeavesTheStream: a stream whose hold's carve is slow (the
// store unavailable and retried) ends without waiting for it; its settle
// follows the carve in the background, and the call is charged once.
func TestSlowCarveLeavesTheStream(t *testing.T) {
	t.Parallel()
	e, r, cs, key := allotEnv(t)
	testwait.For(t, 15*time.Second, "an allotment is taken", func() bool {
		if st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello")); st != 200 {
			t.Fatalf("call: %d %s", st, data)
		}
		r.gw.bill.WaitSettled(context.Background(), "acme")
		return r.gw.bill.Allotted("acme")
	})
	before, err := e.charges("acme", 1000)
	if err != nil {
		t.Fatal(err)
	}
	const delay = 5 * time.Second
	cs.carveDelay.Store(int64(delay))
	t0 := time.Now()
	st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello", `"stream":true`))
	if took := time.Since(t0); st != 200 || took >= delay-time.Second {
		t.Fatalf("the stream: %d after %v (its carve takes %v) %s", st, took, delay, data)
	}
	if cs.carves.Load() == 0 {
		t.Fatal("the stream was not admitted against the allotment")
	}
	cs.carveDelay.Store(0)
	testwait.For(t, 15*time.Second, "the stream is charged once its carve lands", func() bool {
		after, err := e.charges("acme", 1000)
		return err == nil && len(after) == len(before)+1 && after[0].Kind == store.KindCharge
	})
	if err := r.gw.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := e.balance("acme"); a.Held != 0 {
		t.Fatalf("after Drain: held %v", a.Held)
	}
}

package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

// fakeAllotStore records allotments, carves and releases.
type fakeAllotStore struct {
	gate     chan struct{} // when set, Allot waits for it
	mu       sync.Mutex
	allots   map[string]pricing.Nano // open allotments: what is left
	released []string
	allotErr error
	// downReleases: the next so many Releases meet an unavailable store.
	downReleases int
}

func (f *fakeAllotStore) Allot(_ context.Context, h store.Hold) error {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.allotErr != nil {
		return f.allotErr
	}
	f.allots[h.RequestID] = h.Amount
	return nil
}

func (f *fakeAllotStore) Carve(_ context.Context, from string, h store.Hold) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	left, ok := f.allots[from]
	if !ok || left < h.Amount {
		return store.ErrNoHold
	}
	f.allots[from] = left - h.Amount
	return nil
}

func (f *fakeAllotStore) HoldAdmitted(context.Context, store.Hold) error { return nil }

func (f *fakeAllotStore) Release(_ context.Context, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.downReleases > 0 {
		f.downReleases--
		return store.ErrUnavailable
	}
	if _, ok := f.allots[id]; !ok {
		return store.ErrNoHold
	}
	delete(f.allots, id)
	f.released = append(f.released, id)
	return nil
}

func (f *fakeAllotStore) state() (open int, released []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.allots), append([]string(nil), f.released...)
}

// TestAllotmentsAdmitWhatTheyHold: an account's first call finds no
// allotment and takes one in the background; calls are then admitted
// against it until what is left cannot cover the next, which retires it
// (released once its carves have returned) and takes another; an allotment
// no call uses is released after the idle time; close releases the rest
// and takes no more.
func TestAllotmentsAdmitWhatTheyHold(t *testing.T) {
	f := &fakeAllotStore{allots: map[string]pricing.Nano{}}
	a := newAllotments(f, t.Logf)
	a.idle = 300 * time.Millisecond
	now := time.Now()
	if al := a.take("acme", 10, 100, now); al != nil {
		t.Fatal("the first call was admitted before any allotment was taken")
	}
	eventually(t, "an allotment is taken", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
	var first *allotment
	for i := range 10 {
		al := a.take("acme", 10, 100, time.Now())
		if al == nil {
			t.Fatalf("call %d of 10 at 10 each was refused by an allotment of 100", i)
		}
		if first == nil {
			first = al
		} else if al != first {
			t.Fatal("calls were admitted against two allotments")
		}
	}
	if al := a.take("acme", 1, 100, time.Now()); al != nil {
		t.Fatal("a call was admitted against an allotment with nothing left")
	}
	if _, rel := f.state(); len(rel) != 0 {
		t.Fatalf("an allotment was released with its carves pending: %v", rel)
	}
	for range 10 {
		a.carved(first, f.Carve(context.Background(), first.id, store.Hold{Amount: 10}))
	}
	eventually(t, "the used-up allotment is released", func() bool { _, rel := f.state(); return len(rel) == 1 && rel[0] == first.id })
	eventually(t, "a second allotment is taken", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
	eventually(t, "the idle allotment is released", func() bool { open, rel := f.state(); return open == 0 && len(rel) == 2 })

	a.close(context.Background())
	if al := a.take("acme", 1, 100, time.Now()); al != nil {
		t.Fatal("admitted after close")
	}
	time.Sleep(20 * time.Millisecond)
	if open, _ := f.state(); open != 0 {
		t.Fatal("an allotment was taken after close")
	}
}

// TestAllotmentsStopWhenTheStoreIsDown: a carve that meets an unavailable
// store retires every allotment at once (their calls hold in the database,
// which refuses them while it is down), none is taken for a while, and
// each is released once its carves have returned; a refused allotment
// admits nothing.
func TestAllotmentsStopWhenTheStoreIsDown(t *testing.T) {
	f := &fakeAllotStore{allots: map[string]pricing.Nano{}}
	a := newAllotments(f, t.Logf)
	for _, acct := range []string{"acme", "beta"} {
		a.take(acct, 1, 100, time.Now())
		eventually(t, "an allotment of "+acct, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open[acct] != nil })
	}
	al := a.take("acme", 1, 100, time.Now())
	if al == nil {
		t.Fatal("not admitted")
	}
	a.down()
	for _, acct := range []string{"acme", "beta"} {
		if got := a.take(acct, 1, 100, time.Now()); got != nil {
			t.Fatalf("%s admitted in memory while the store is down", acct)
		}
	}
	eventually(t, "beta's allotment, with no carve pending, is released", func() bool { open, _ := f.state(); return open == 1 })
	a.carved(al, store.ErrUnavailable)
	eventually(t, "acme's is released once its carve returned", func() bool { open, _ := f.state(); return open == 0 })
	time.Sleep(20 * time.Millisecond)
	a.mu.Lock()
	taking := len(a.taking)
	a.mu.Unlock()
	if taking != 0 {
		t.Fatal("an allotment was taken while the store was down")
	}

	// A release that meets the store down is tried again until it lands.
	f.mu.Lock()
	f.downReleases = 3
	f.mu.Unlock()
	a.downUntil = time.Time{}
	a.take("acme", 1, 100, time.Now())
	eventually(t, "an allotment once the store is back", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
	a.close(context.Background())
	if open, _ := f.state(); open != 0 {
		t.Fatal("an allotment whose release met the store down stayed open")
	}

	g := newAllotments(&fakeAllotStore{allots: map[string]pricing.Nano{}, allotErr: &store.InsufficientError{Limit: store.LimitAccount}}, t.Logf)
	g.take("acme", 1, 100, time.Now())
	eventually(t, "the refused allotment is given up", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.taking) == 0 })
	if got := g.take("acme", 1, 100, time.Now()); got != nil {
		t.Fatal("admitted against a refused allotment")
	}
}

// TestAllotmentsCloseReleasesALateOne: an allotment whose Allot returns
// after close began is released, not kept, and close waits for it.
func TestAllotmentsCloseReleasesALateOne(t *testing.T) {
	f := &fakeAllotStore{allots: map[string]pricing.Nano{}, gate: make(chan struct{})}
	a := newAllotments(f, t.Logf)
	a.take("acme", 1, 100, time.Now())
	closed := make(chan struct{})
	go func() { a.close(context.Background()); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned with an Allot under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(f.gate)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return after the Allot did")
	}
	if open, rel := f.state(); open != 0 || len(rel) != 1 {
		t.Fatalf("after close: %d allotments open, %d released; want 0 and 1", open, len(rel))
	}
	if al := a.take("acme", 1, 100, time.Now()); al != nil {
		t.Fatal("admitted after close")
	}
}

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
	time.Sleep(time.Duration(s.carveDelay.Load()))
	return s.Store.(store.Allotter).Carve(ctx, from, h)
}

// allotEnv is an env on PostgreSQL (it skips without RELAY_TEST_POSTGRES)
// with account acme ($100) and a key of it, and a replica whose holds
// overlap and are allotted, its store counted.
func allotEnv(t *testing.T) (e, r *env, cs *countingStore, key string) {
	pgtest.Need(t)
	t.Setenv(envStoreVar, store.DriverPostgres)
	e = newEnv(t)
	e.account("acme", "100")
	key = e.key("acme", "standard")
	cs = &countingStore{}
	r = e.replica(func(s Store) Store { cs.Store = s; return cs })
	r.gw.overlap = true
	r.gw.allot = newAllotments(cs, t.Logf)
	r.gw.allot.retrier = r.gw.retrier
	return e, r, cs, key
}

// TestAllotmentOnPostgres: on PostgreSQL, once an account's balance shows
// ample credit, its calls are admitted against an allotment and their holds
// carved out of it, none held on the way upstream; a key with a spend limit
// still holds; every call is charged, the books audit clean, and Drain
// gives the allotment's rest back.
func TestAllotmentOnPostgres(t *testing.T) {
	e, r, cs, key := allotEnv(t)
	call := func(k string) {
		t.Helper()
		if st, _, data := r.do("POST", "/v1/chat/completions", k, chatBody("modelf-flash", "hello")); st != 200 {
			t.Fatalf("call: %d %s", st, data)
		}
	}
	call(key) // holds first: no balance seen yet
	r.gw.settling.wait(context.Background(), "acme")
	call(key) // overlaps its hold, and takes an allotment for the next calls
	eventually(t, "an allotment is taken", func() bool {
		r.gw.allot.mu.Lock()
		defer r.gw.allot.mu.Unlock()
		return r.gw.allot.open["acme"] != nil
	})
	holds := cs.holds.Load()
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { call(key) })
	}
	wg.Wait()
	r.gw.settling.wait(context.Background(), "acme") // each settle waited for its carve
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
	e, r, cs, key := allotEnv(t)
	for i := 0; i < 50; i++ {
		if st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello")); st != 200 {
			t.Fatalf("call: %d %s", st, data)
		}
		r.gw.settling.wait(context.Background(), "acme")
		r.gw.allot.mu.Lock()
		ready := r.gw.allot.open["acme"] != nil
		r.gw.allot.mu.Unlock()
		if ready {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	eventually(t, "the stream is charged once its carve lands", func() bool {
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

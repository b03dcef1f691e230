package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// watchedHolds wraps a store: each Hold first waits, up to wait, for the
// providers to have seen more requests than before the call (base), notes
// whether they did, then takes the hold (or, with refuse set, refuses it
// for credit). base is the test's to set before each call: counted when
// Hold begins instead, an overlapped request that reached the provider
// before the hold's goroutine ran (a loaded machine) would not count.
type watchedHolds struct {
	Store
	upstream func() int64 // requests the providers have seen
	base     atomic.Int64 // upstream() before the call
	wait     time.Duration
	refuse   atomic.Bool
	overlaps atomic.Int32 // holds during which the upstream request arrived
	done     atomic.Int64 // UnixNano when the last Hold returned
}

func (s *watchedHolds) Hold(ctx context.Context, h store.Hold) error {
	defer func() { s.done.Store(time.Now().UnixNano()) }()
	n := s.base.Load()
	testwait.Holds(s.wait, func() bool { return s.upstream() != n })
	if s.upstream() > n {
		s.overlaps.Add(1)
		time.Sleep(50 * time.Millisecond) // a slow commit, after the provider has answered
	}
	if s.refuse.Load() {
		return &store.InsufficientError{Needed: h.Amount, Limit: store.LimitAccount}
	}
	return s.Store.Hold(ctx, h)
}

// TestHoldOverlapsUpstream: where holds commit in a database, a call of an
// account that plainly has the credit sends its hold and its upstream
// request at once; nothing reaches the client before the hold is taken, a
// refused hold is the answer (nothing charged, the provider's answer
// dropped), and after a refusal the account's calls hold first again.
func TestHoldOverlapsUpstream(t *testing.T) {
	// Not parallel: its overlap counts depend on when each request arrives.
	// Its store keeps a hold that goes first for up to a second on purpose
	// (watchedHolds): not a ledger behind (billing.max_store_wait).
	e := newEnv(t, func(c *config.Config) { c.Billing.MaxStoreWait = 10 * time.Second })
	e.account("acme", "100")
	key := e.key("acme", "standard")
	// A call that holds first waits wait out; an overlapped call's request
	// must reach the provider within it, on a loaded CI machine under -race.
	w := &watchedHolds{wait: time.Second, upstream: func() int64 {
		var n int64
		for _, s := range e.sims {
			n += s.Requests()
		}
		return n
	}}
	r := e.replica(func(s Store) Store { w.Store = s; return w })
	r.gw.bill.ForceOverlap(nil)
	call := func(extra ...string) (int, []byte) {
		w.base.Store(w.upstream())
		st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello", extra...))
		return st, data
	}

	// No balance seen yet: the first call holds, then goes upstream.
	if st, data := call(); st != 200 {
		t.Fatalf("first call: %d %s", st, data)
	}
	if n := w.overlaps.Load(); n != 0 {
		t.Fatalf("the first call overlapped its hold (%d); no balance was seen yet", n)
	}
	r.gw.bill.WaitSettled(context.Background(), "acme")

	// Its settle showed $100: the next call's hold goes beside its request.
	if st, data := call(); st != 200 {
		t.Fatalf("second call: %d %s", st, data)
	}
	if n := w.overlaps.Load(); n != 1 {
		t.Fatalf("overlapped holds: %d, want 1", n)
	}
	r.gw.bill.WaitSettled(context.Background(), "acme")

	// A stream: its first byte comes after the hold is taken.
	t0 := time.Now()
	w.base.Store(w.upstream())
	req, _ := http.NewRequest("POST", r.url+"/v1/chat/completions", strings.NewReader(chatBody("modelf-flash", "hello", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	headers := time.Now()
	if _, err := io.ReadAll(resp.Body); err != nil { // to its end: the stream settles before it
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || w.overlaps.Load() != 2 {
		t.Fatalf("stream: %d, overlapped holds %d", resp.StatusCode, w.overlaps.Load())
	}
	if held := time.Unix(0, w.done.Load()); headers.Before(held) || held.Before(t0) {
		t.Fatalf("the stream's headers came at %v, its hold returned at %v", headers.Sub(t0), held.Sub(t0))
	}
	r.gw.bill.WaitSettled(context.Background(), "acme")
	before := e.balance("acme")
	entries, err := e.charges("acme", 100)
	if err != nil {
		t.Fatal(err)
	}

	// A refused hold: the caller gets 402 though the provider answered,
	// and nothing is charged or left held.
	w.refuse.Store(true)
	reached := w.upstream()
	st, data := call()
	if st != http.StatusPaymentRequired || w.overlaps.Load() != 3 || w.upstream() != reached+1 {
		t.Fatalf("refused hold: %d %s (overlapped %d, provider requests %d → %d)", st, data, w.overlaps.Load(), reached, w.upstream())
	}
	if _, typ, _ := errBody(t, data); typ != "insufficient_quota" {
		t.Fatalf("refused hold: type %q, want insufficient_quota", typ)
	}
	after := e.balance("acme")
	if after.Balance != before.Balance || after.Held != 0 {
		t.Fatalf("after a refused hold: balance %v held %v, want %v held 0", after.Balance, after.Held, before.Balance)
	}
	if got, _ := e.charges("acme", 100); len(got) != len(entries) {
		t.Fatalf("journal: %d entries after a refused hold, want %d", len(got), len(entries))
	}

	// The refusal ends overlap for the account until a settle shows its
	// balance again.
	w.refuse.Store(false)
	if st, data := call(); st != 200 || w.overlaps.Load() != 3 {
		t.Fatalf("after a refusal: %d %s, overlapped holds %d, want 3", st, data, w.overlaps.Load())
	}
	r.gw.bill.WaitSettled(context.Background(), "acme")

	// A hold refused while the provider is still working ends the upstream
	// request then, not when the provider answers.
	for _, s := range e.sims {
		s.SetOptions(sim.Options{Latency: 5 * time.Second})
	}
	w.refuse.Store(true)
	t0 = time.Now()
	if st, data := call(); st != http.StatusPaymentRequired || w.overlaps.Load() != 4 {
		t.Fatalf("refused beside a slow provider: %d %s, overlapped holds %d, want 4", st, data, w.overlaps.Load())
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("a refused hold waited %v for the provider", d)
	}
}

// panicTransport panics on every upstream request, once the account's
// hold is taken (held says so; it may go beside the request).
type panicTransport struct{ held func() bool }

func (p panicTransport) RoundTrip(*http.Request) (*http.Response, error) {
	testwait.Holds(5*time.Second, p.held)
	panic("upstream transport")
}

// panicHolds panics in every Hold.
type panicHolds struct{ Store }

func (panicHolds) Hold(context.Context, store.Hold) error { panic("store hold") }

// TestHoldReleasedAfterPanic: a panic on the way upstream, after the hold
// is taken, still releases it (the router recovers the panic: 500), held
// first or beside the request; a panic in a Hold beside the request fails
// the call with 500 and leaves the process serving.
func TestHoldReleasedAfterPanic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "100")
	key := e.key("acme", "standard")
	serve := func(st Store, tr http.RoundTripper, overlap bool) *env {
		r := *e
		r.logs = &lockedBuffer{}
		gw, err := New(Options{Config: e.cfg, Store: st, Plugins: e.host, Logger: discardLogger(), Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		if overlap {
			gw.bill.ForceOverlap(nil)
		}
		gw.bill.SawBalance("acme", 1_000_000*pricing.NanoPerUSD) // ample for any hold
		r.serve(gw)
		t.Cleanup(r.srv.Close)
		return &r
	}
	for _, overlap := range []bool{false, true} {
		held := func() bool {
			a, err := e.store.Balance(context.Background(), "acme")
			return err == nil && a.Held > 0
		}
		r := serve(e.store, panicTransport{held}, overlap)
		st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello"))
		if st != http.StatusInternalServerError {
			t.Fatalf("overlap %v: %d %s, want 500", overlap, st, data)
		}
		if a := e.balance("acme"); a.Held != 0 || a.Balance != 100*pricing.NanoPerUSD {
			t.Fatalf("overlap %v: after a panic upstream: balance %v held %v, want 100 held 0", overlap, a.Balance, a.Held)
		}
		if n := r.gw.bill.OpenHolds(); n != 0 {
			t.Fatalf("overlap %v: %d open holds counted, want 0", overlap, n)
		}
	}
	r := serve(panicHolds{e.store}, nil, true)
	if st, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello")); st != http.StatusInternalServerError {
		t.Fatalf("a Hold that panics beside the request: %d %s, want 500", st, data)
	}
	if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello")); st != 200 {
		t.Fatalf("after a Hold panicked: %d %s", st, data)
	}
}

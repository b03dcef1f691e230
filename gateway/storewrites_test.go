package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/holder"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// heldSettles is a store whose Settle waits until gate is closed: a ledger
// that has fallen behind.
type heldSettles struct {
	Store
	gate chan struct{}
	n    *atomic.Int32 // counts the settles sent, if set
}

func (h heldSettles) Settle(ctx context.Context, s store.Settlement) (store.Entry, error) {
	if h.n != nil {
		h.n.Add(1)
	}
	<-h.gate
	return h.Store.Settle(ctx, s)
}

// TestStoreBehindRefusesNewCalls: while a ledger write has been under way
// longer than billing.max_store_wait, a new call is refused at once with
// 503 store_unavailable and Retry-After, in the error shape, before
// anything is sent upstream, and counted; once the write lands calls are
// admitted again, and every call answered is charged once.
func TestStoreBehindRefusesNewCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.Billing.MaxStoreWait = 100 * time.Millisecond })
	e.account("acme", "5")
	key := e.key("acme", "economy")
	gate := make(chan struct{})
	r := e.replica(func(s Store) Store { return heldSettles{Store: s, gate: gate} })
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()

	body := chatBody("modelf-flash", "the ledger is slow")
	status, hdr, data := r.do("POST", "/v1/chat/completions", key, body)
	if status != 200 {
		t.Fatalf("first call: %d %s", status, data)
	}
	rids := []string{hdr.Get("X-Request-Id")}
	testwait.For(t, 15*time.Second, "the first call's settle under way past max_store_wait", func() bool {
		return r.gw.bill.Backlog().State(time.Now()).Oldest > 150*time.Millisecond
	})
	sent := r.requests()
	status, hdr, data = r.do("POST", "/v1/chat/completions", key, body)
	var eb apierr.Body
	if err := json.Unmarshal(data, &eb); err != nil || status != 503 || eb.Error.Code != "store_unavailable" ||
		eb.Error.Type != "service_unavailable_error" || hdr.Get("Retry-After") != "2" || !strings.Contains(eb.Error.Message, "behind") {
		t.Fatalf("a call while the ledger is behind: %d %q %s (Retry-After %q)", status, err, data, hdr.Get("Retry-After"))
	}
	for line, n := range r.requests() {
		if n != sent[line] {
			t.Fatalf("the refused call reached line %s's provider", line)
		}
	}
	if n := r.gw.bill.Backlog().Refused(); n != 1 {
		t.Fatalf("relay_store_behind_refused_total %d, want 1", n)
	}

	close(gate)
	testwait.For(t, 15*time.Second, "the held settle lands", func() bool { return r.gw.bill.Backlog().State(time.Now()).Writes == 0 })
	status, hdr, data = r.do("POST", "/v1/chat/completions", key, body)
	if status != 200 {
		t.Fatalf("a call once the ledger caught up: %d %s", status, data)
	}
	rids = append(rids, hdr.Get("X-Request-Id"))
	if err := r.gw.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkEachChargedOnce(t, e, rids)
	if n := r.gw.bill.Uncharged(); n != 0 {
		t.Fatalf("relay_calls_uncharged_total %v", n)
	}
}

// TestSlowSettleDoesNotHoldTheStream: a stream whose settle waits in a
// ledger that has fallen behind ends for its client anyway (after
// streamSettleWait), its settle followed in the background, not sent
// again; a read of its generation made meanwhile waits for that settle
// and finds the call charged once.
func TestSlowSettleDoesNotHoldTheStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	gate := make(chan struct{})
	var settles atomic.Int32
	r := e.replica(func(s Store) Store { return heldSettles{Store: s, gate: gate, n: &settles} })
	var opened atomic.Bool
	fallback := time.AfterFunc(20*time.Second, func() { opened.Store(true); close(gate) })
	defer fallback.Stop()

	status, hdr, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "slow ledger", `"stream":true`))
	if opened.Load() {
		t.Fatal("the stream ended only once its settle could land")
	}
	if status != 200 || !strings.Contains(string(data), "data: [DONE]") {
		t.Fatalf("stream: %d %.300s", status, data)
	}
	rid := hdr.Get("X-Request-Id")
	if fallback.Stop() {
		time.AfterFunc(200*time.Millisecond, func() { close(gate) })
	}
	status, _, data = r.do("GET", "/v1/generations/"+rid, key, nil)
	var gen holder.GenerationInfo
	if err := json.Unmarshal(data, &gen); err != nil || status != 200 || gen.Status != store.OutcomeSettled {
		t.Fatalf("the generation read while its settle was on its way: %d %v %s", status, err, data)
	}
	if n := settles.Load(); n != 1 {
		t.Fatalf("the settle was sent %d times, want once", n)
	}
	checkEachChargedOnce(t, e, []string{rid})
}

// queuedHolds is a store whose Hold waits in a queue that never moves
// until its caller gives up, as a PostgreSQL lane behind a slow batch.
type queuedHolds struct{ Store }

func (q queuedHolds) Hold(ctx context.Context, h store.Hold) error {
	<-ctx.Done()
	return fmt.Errorf("hold %q: %w: %w", h.RequestID, store.ErrUnavailable, ctx.Err())
}

// TestQueuedHoldGivesUp: a hold still queued after billing.max_store_wait
// is given up, unsent, and its call refused with 503 store_unavailable
// (the ledger is behind, not down), counted, nothing sent upstream or
// held.
func TestQueuedHoldGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.Billing.MaxStoreWait = 100 * time.Millisecond })
	e.account("acme", "5")
	key := e.key("acme", "economy")
	r := e.replica(func(s Store) Store { return queuedHolds{s} })
	sent := r.requests()
	t0 := time.Now()
	status, hdr, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "queued"))
	var eb apierr.Body
	if err := json.Unmarshal(data, &eb); err != nil || status != 503 || eb.Error.Code != "store_unavailable" ||
		hdr.Get("Retry-After") != "2" || !strings.Contains(eb.Error.Message, "hold waited") {
		t.Fatalf("a call whose hold stayed queued: %d %v %s", status, err, data)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("refused after %v", d)
	}
	for line, n := range r.requests() {
		if n != sent[line] {
			t.Fatalf("the refused call reached line %s's provider", line)
		}
	}
	if n := r.gw.bill.Backlog().Refused(); n != 1 {
		t.Fatalf("relay_store_behind_refused_total %d, want 1", n)
	}
	if a := e.balance("acme"); a.Held != 0 || a.Balance != 5_000_000_000 {
		t.Fatalf("after the refusal: %+v", a)
	}
}

// downReleases is a store whose Release reports the database unavailable
// while down is set.
type downReleases struct {
	Store
	down  *atomic.Bool
	tries *atomic.Int32
}

func (d downReleases) Release(ctx context.Context, rid, reason string) error {
	d.tries.Add(1)
	if d.down.Load() {
		return fmt.Errorf("release %q: %w", rid, store.ErrUnavailable)
	}
	return d.Store.Release(ctx, rid, reason)
}

// TestFailedCallDoesNotWaitForItsRelease: a call that fails after its hold
// (the provider answers 400) gets its answer at once when the release
// meets the store unavailable; the release is tried again in the
// background until it lands, and the drain waits for it. Nothing is
// charged and nothing stays held.
func TestFailedCallDoesNotWaitForItsRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	var down atomic.Bool
	var tries atomic.Int32
	down.Store(true)
	r := e.replica(func(s Store) Store { return downReleases{Store: s, down: &down, tries: &tries} })
	defer down.Store(false)
	for _, s := range e.sims {
		s.SetOptions(sim.Options{Status: 400})
	}
	t0 := time.Now()
	status, _, data := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "refused upstream"))
	if status != 400 {
		t.Fatalf("the provider's 400: got %d %s", status, data)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the failed call was answered after %v: it waited for its release", d)
	}
	testwait.For(t, 15*time.Second, "the release tried again", func() bool { return tries.Load() >= 2 })
	if a := e.balance("acme"); a.Held == 0 {
		t.Fatal("the hold is gone while every release met the store unavailable")
	}
	down.Store(false)
	if err := r.gw.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := e.balance("acme"); a.Held != 0 || a.Balance != 5_000_000_000 {
		t.Fatalf("after the release landed: %+v", a)
	}
}

// TestEarlyRefusalsAreWarnings: a call refused before any work (here, the
// ledger behind) gets its access line as a warning, "request refused:
// store_unavailable", which the process log aggregates; answered calls
// keep the INFO "request" line.
func TestEarlyRefusalsAreWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.Billing.MaxStoreWait = 50 * time.Millisecond })
	e.account("acme", "5")
	key := e.key("acme", "economy")
	gate := make(chan struct{})
	r := e.replica(func(s Store) Store { return heldSettles{Store: s, gate: gate} })
	defer close(gate)
	status, hdr, _ := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "one"))
	answered := hdr.Get("X-Request-Id")
	testwait.For(t, 15*time.Second, "the settle under way past max_store_wait", func() bool {
		return r.gw.bill.Backlog().State(time.Now()).Oldest > 100*time.Millisecond
	})
	status2, hdr2, _ := r.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "two"))
	if status != 200 || status2 != 503 {
		t.Fatalf("statuses %d then %d, want 200 then 503", status, status2)
	}
	refused := hdr2.Get("X-Request-Id")
	var sawAnswered, sawRefused bool
	for l := range strings.Lines(r.logs.String()) {
		switch {
		case strings.Contains(l, answered):
			sawAnswered = strings.Contains(l, `"level":"INFO","msg":"request"`)
		case strings.Contains(l, refused):
			sawRefused = strings.Contains(l, `"level":"WARN","msg":"request refused: store_unavailable"`) && strings.Contains(l, `"status":503`)
		}
	}
	if !sawAnswered || !sawRefused {
		t.Fatalf("access lines: answered as INFO request %v, refused as WARN %v:\n%s", sawAnswered, sawRefused, r.logs.String())
	}
}

package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// Hold does not wait for its write, yet many concurrent holds on one account
// never reserve more than the balance: exactly ⌊balance / amount⌋ of them
// succeed and every other one is refused as insufficient.
func TestHoldsNeverOverReserve(t *testing.T) {
	cases := []struct {
		name    string
		sync    bool
		balance pricing.Nano
		amount  pricing.Nano
		callers int
	}{
		{"not a multiple", false, 1_000_003, 10_000, 400},
		{"exact multiple, fsync", true, 64 * usd, 1 * usd, 200},
		{"one fits", false, 999, 999, 100},
		{"none fits", false, 998, 999, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := openAt(t, t.TempDir(), "", tc.sync)
			credit(t, b, "acme", tc.balance)
			var (
				wg       sync.WaitGroup
				start    = make(chan struct{})
				admitted = make(chan string, tc.callers)
				refused  atomic.Int64
			)
			for i := range tc.callers {
				wg.Go(func() {
					<-start
					id := fmt.Sprintf("req_%04d", i)
					err := b.Hold(ctx, Hold{RequestID: id, Account: "acme", Amount: tc.amount})
					switch {
					case err == nil:
						admitted <- id
					case errors.Is(err, ErrInsufficient):
						refused.Add(1)
					default:
						t.Errorf("Hold %s: %v", id, err)
					}
				})
			}
			close(start)
			wg.Wait()
			close(admitted)
			want := int(tc.balance / tc.amount)
			if len(admitted) != want || refused.Load() != int64(tc.callers-want) {
				t.Fatalf("%d admitted, %d refused; want %d and %d", len(admitted), refused.Load(), want, tc.callers-want)
			}
			a := balance(t, b, "acme")
			if a.Held != pricing.Nano(want)*tc.amount || a.Held > a.Balance {
				t.Fatalf("account %+v: held must be %d and at most the balance", a, pricing.Nano(want)*tc.amount)
			}
			for id := range admitted {
				wg.Go(func() {
					if _, err := b.Settle(ctx, Settlement{RequestID: id, Account: "acme", Charge: tc.amount / 2}); err != nil {
						t.Errorf("Settle %s: %v", id, err)
					}
				})
			}
			wg.Wait()
			r := audit(t, b, "acme")
			if r.Account.Held != 0 || r.Account.Balance != tc.balance-pricing.Nano(want)*(tc.amount/2) {
				t.Errorf("after settling: %+v", r.Account)
			}
		})
	}
}

// A Settle right after its Hold, in the same goroutine, finds the hold: its
// transaction starts only once the hold's write has been applied.
func TestHoldThenSettleAtOnce(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", fsync), func(t *testing.T) {
			ctx := context.Background()
			b := openAt(t, t.TempDir(), "", fsync)
			credit(t, b, "acme", usd)
			const callers, each = 8, 50
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("req_%d_%d", c, i)
						if err := b.Hold(ctx, Hold{RequestID: id, Account: "acme", Amount: 1000}); err != nil {
							t.Errorf("Hold %s: %v", id, err)
							return
						}
						if _, err := b.Settle(ctx, Settlement{RequestID: id, Account: "acme", Charge: 7}); err != nil {
							t.Errorf("Settle %s right after its Hold: %v", id, err)
							return
						}
						if i%2 == 0 { // and a Release, which looks the account up
							rid := id + "_r"
							if err := b.Hold(ctx, Hold{RequestID: rid, Account: "acme", Amount: 1000}); err != nil {
								t.Errorf("Hold %s: %v", rid, err)
								return
							}
							if err := b.Release(ctx, rid, "failed"); err != nil {
								t.Errorf("Release %s right after its Hold: %v", rid, err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			r := audit(t, b, "acme")
			if r.Account.Balance != usd-callers*each*7 || r.Account.Held != 0 {
				t.Errorf("account %+v", r.Account)
			}
		})
	}
}

// syncBuffer is a log destination for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// When the write of a hold fails after Hold has returned, the failure is
// logged at error level with the request id, and the request's Settle and
// Release say so (ErrHoldNotWritten with the cause) instead of ErrNoHold.
// The failure here is real: a write slipped in between the hold's reads and
// its commit, so badger refuses the commit, and says so only to the
// callback.
func TestHoldWriteFails(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	credit(t, b, "acme", usd)
	b.beforeHoldCommit = func(requestID string) {
		if requestID != "req_lost" {
			return
		}
		// Rewrite the account record as it is: it changes nothing, but the
		// hold read it, so its commit now conflicts.
		if err := b.db.Update(func(txn *badger.Txn) error {
			acct, err := loadAccount(txn, "acme")
			if err != nil {
				return err
			}
			return putAccount(txn, &acct)
		}); err != nil {
			t.Error(err)
		}
	}
	if err := b.Hold(ctx, Hold{RequestID: "req_lost", Account: "acme", Amount: 1000}); err != nil {
		t.Fatalf("Hold returns before its write: %v", err)
	}
	_, err = b.Settle(ctx, Settlement{RequestID: "req_lost", Account: "acme", Charge: 10})
	if !errors.Is(err, ErrHoldNotWritten) || !errors.Is(err, badger.ErrConflict) || errors.Is(err, ErrNoHold) || !strings.Contains(err.Error(), `"req_lost"`) {
		t.Errorf("Settle of a hold whose write failed: %v, want ErrHoldNotWritten wrapping the cause", err)
	}
	if _, err := b.Settle(ctx, Settlement{RequestID: "req_lost", Charge: 10}); !errors.Is(err, ErrHoldNotWritten) {
		t.Errorf("Settle without the account: %v, want ErrHoldNotWritten", err)
	}
	if err := b.Release(ctx, "req_lost", "failed"); !errors.Is(err, ErrHoldNotWritten) {
		t.Errorf("Release: %v, want ErrHoldNotWritten", err)
	}
	if _, err := b.Settle(ctx, Settlement{RequestID: "req_never", Account: "acme"}); !errors.Is(err, ErrNoHold) {
		t.Errorf("Settle of an id never held: %v, want ErrNoHold", err)
	}
	log := logs.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "request_id=req_lost") || !strings.Contains(log, "hold_nano=1000") {
		t.Errorf("the failed write was not logged at error level with its request id:\n%s", log)
	}
	if a := balance(t, b, "acme"); a.Held != 0 || a.Balance != usd {
		t.Errorf("a hold that was not written changed the account: %+v", a)
	}
	hold(t, b, "acme", "req_next", 1000)
	if _, err := b.Settle(ctx, Settlement{RequestID: "req_next", Account: "acme", Charge: 10}); err != nil {
		t.Errorf("the next hold: %v", err)
	}
	audit(t, b, "acme")
}

// The failed ids are remembered in a bounded set, oldest forgotten first.
func TestHoldWritesBounded(t *testing.T) {
	var w holdWrites
	w.init()
	cause := errors.New("disk on fire")
	for i := range maxLostHolds + 10 {
		id := fmt.Sprintf("req_%d", i)
		if err := w.begin(id); err != nil {
			t.Fatal(err)
		}
		w.end(id, cause)
	}
	if len(w.lostErr) != maxLostHolds || len(w.lostIDs) != maxLostHolds {
		t.Fatalf("%d failures remembered (%d ids), want %d", len(w.lostErr), len(w.lostIDs), maxLostHolds)
	}
	if w.lost("req_0") != nil || w.lost("req_9") != nil || w.lost("req_10") != cause || w.lost(fmt.Sprintf("req_%d", maxLostHolds+9)) != cause {
		t.Error("the oldest failures must be the ones forgotten")
	}
	if w.inFlight != 0 || len(w.pending) != 0 {
		t.Errorf("%d in flight, pending %v, after every write ended", w.inFlight, w.pending)
	}
}

// Close waits for the holds in progress and their writes: every Hold that
// returned nil is on disk when the store is opened again, and a Hold after
// Close fails.
func TestCloseWaitsForHoldWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{SyncWrites: true, Owner: "first", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, b, "acme", usd)
	var (
		wg   sync.WaitGroup
		held atomic.Int64
		sum  atomic.Int64
		ran  = make(chan struct{}, 8)
	)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				amount := int64(1 + i%7)
				err := b.Hold(ctx, Hold{RequestID: fmt.Sprintf("req_%d_%d", c, i), Account: "acme", Amount: pricing.Nano(amount)})
				if err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("Hold while closing: %v, want errClosed", err)
					}
					return
				}
				held.Add(1)
				sum.Add(amount)
				if i == 10 {
					ran <- struct{}{}
				}
			}
		})
	}
	for range 8 {
		<-ran
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if b.writes.inFlight != 0 {
		t.Errorf("Close returned with %d hold writes in flight", b.writes.inFlight)
	}
	if err := b.Hold(ctx, Hold{RequestID: "req_after", Account: "acme", Amount: 1}); !errors.Is(err, errClosed) {
		t.Errorf("Hold after Close: %v, want errClosed", err)
	}

	again := openAt(t, dir, "second", false)
	holds, err := again.OpenHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(holds)) != held.Load() {
		t.Errorf("%d holds on disk, %d returned nil", len(holds), held.Load())
	}
	r := audit(t, again, "acme")
	if int64(r.Account.Held) != sum.Load() {
		t.Errorf("held %d on disk, holds that returned nil sum to %d", r.Account.Held, sum.Load())
	}
}

package store

import (
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

// SettleOrdered returns before its write, yet everything read after it
// returns sees the charge: the balance, the outcome, the journal; and it is
// exactly-once like Settle.
func TestSettleOrderedReadsSeeTheCharge(t *testing.T) {
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	for i := range 50 {
		id := fmt.Sprintf("req_%d", i)
		hold(t, b, "acme", id, 1000)
		e, w, err := b.SettleOrdered(ctx, Settlement{RequestID: id, Account: "acme", Charge: 7, Usage: pricing.Usage{InputTokens: 3}})
		if err != nil {
			t.Fatalf("SettleOrdered %s: %v", id, err)
		}
		if e.Amount != -7 || e.RequestID != id || e.HoldAmount != 1000 {
			t.Errorf("entry %+v", e)
		}
		// Read before waiting for the write.
		a := balance(t, b, "acme")
		if want := usd - pricing.Nano(7*(i+1)); a.Balance != want || a.Held != 0 {
			t.Fatalf("after SettleOrdered %s, before its write ended: balance %d held %d, want %d held 0", id, a.Balance, a.Held, want)
		}
		o, err := b.Outcome(ctx, id)
		if err != nil || o.State != OutcomeSettled || o.Charge != 7 {
			t.Fatalf("outcome of %s: %+v, %v", id, o, err)
		}
		if err := w.Wait(); err != nil {
			t.Fatalf("write of %s: %v", id, err)
		}
		if _, _, err := b.SettleOrdered(ctx, Settlement{RequestID: id, Account: "acme", Charge: 7}); !errors.Is(err, ErrAlreadySettled) {
			t.Errorf("second SettleOrdered of %s: %v, want ErrAlreadySettled", id, err)
		}
	}
	if _, _, err := b.SettleOrdered(ctx, Settlement{RequestID: "req_never", Account: "acme"}); !errors.Is(err, ErrNoHold) {
		t.Errorf("SettleOrdered of an id never held: %v, want ErrNoHold", err)
	}
	if _, _, err := b.SettleOrdered(ctx, Settlement{RequestID: "req_0", Account: "acme", Charge: -1}); err == nil {
		t.Error("a negative charge was accepted")
	}
	// Without the account, it looks the hold up.
	hold(t, b, "acme", "req_noacct", 10)
	if _, w, err := b.SettleOrdered(ctx, Settlement{RequestID: "req_noacct", Charge: 10}); err != nil || w.Wait() != nil {
		t.Fatalf("SettleOrdered without the account: %v", err)
	}
	r := audit(t, b, "acme")
	if r.Account.Balance != usd-350-10 {
		t.Errorf("balance %d after the charges", r.Account.Balance)
	}
}

// Many callers holding and settling on one account without waiting for the
// writes: the books add up, and no charge is lost or doubled.
func TestSettleOrderedConcurrent(t *testing.T) {
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	var (
		wg      sync.WaitGroup
		charged atomic.Int64
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("req_%d_%d", g, i)
				if err := b.Hold(ctx, Hold{RequestID: id, Account: "acme", Amount: 500}); err != nil {
					t.Errorf("Hold: %v", err)
					return
				}
				charge := int64(1 + (g*100+i)%97)
				_, w, err := b.SettleOrdered(ctx, Settlement{RequestID: id, Account: "acme", Charge: pricing.Nano(charge)})
				if err != nil {
					t.Errorf("SettleOrdered: %v", err)
					return
				}
				if err := w.Wait(); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				charged.Add(charge)
			}
		})
	}
	wg.Wait()
	r := audit(t, b, "acme")
	if r.Account.Balance != usd-pricing.Nano(charged.Load()) || r.Account.Held != 0 {
		t.Errorf("account %+v after charging %d", r.Account, charged.Load())
	}
}

// When the write of an ordered settle fails, Wait says so with the cause,
// the failure is logged at error level with the request id, and nothing of
// the transaction is written: the hold is still open, its credit still held,
// and it can be released (as RecoverHolds would at the next start-up). The
// failure is real: a write slipped in between the settle's reads and its
// commit, so badger refuses the commit and says so only to the callback.
func TestSettleOrderedWriteFails(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	credit(t, b, "acme", usd)
	hold(t, b, "acme", "req_lost", 1000)
	b.beforeSettleCommit = func(string) {
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
	_, w, err := b.SettleOrdered(ctx, Settlement{RequestID: "req_lost", Account: "acme", Charge: 10})
	if err != nil {
		t.Fatalf("SettleOrdered returns before its write: %v", err)
	}
	err = w.Wait()
	if !errors.Is(err, badger.ErrConflict) || !strings.Contains(err.Error(), `"req_lost"`) {
		t.Errorf("Wait of a failed write: %v, want the cause with the request id", err)
	}
	log := logs.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "request_id=req_lost") || !strings.Contains(log, "charge_nano=10") {
		t.Errorf("the failed write was not logged at error level with its request id:\n%s", log)
	}
	b.beforeSettleCommit = nil
	if a := balance(t, b, "acme"); a.Held != 1000 || a.Balance != usd {
		t.Errorf("a settle that was not written changed the account: %+v", a)
	}
	if _, err := b.Outcome(ctx, "req_lost"); !errors.Is(err, ErrNotFound) {
		t.Errorf("outcome of a settle that was not written: %v, want ErrNotFound", err)
	}
	if err := b.Release(ctx, "req_lost", "settle write failed"); err != nil {
		t.Errorf("Release of the hold left open: %v", err)
	}
	audit(t, b, "acme")
}

// Close waits for the ordered settles in progress and their writes: every
// SettleOrdered that returned nil is on disk when the store is opened again,
// and one that starts after Close fails.
func TestCloseWaitsForSettleWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{SyncWrites: true, Owner: "first", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, b, "acme", usd)
	var (
		wg      sync.WaitGroup
		settled atomic.Int64
		ran     = make(chan struct{}, 4)
	)
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("req_%d_%d", c, i)
				if err := b.Hold(ctx, Hold{RequestID: id, Account: "acme", Amount: 5}); err != nil {
					return // closed
				}
				_, _, err := b.SettleOrdered(ctx, Settlement{RequestID: id, Account: "acme", Charge: 1})
				if err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("SettleOrdered while closing: %v, want errClosed", err)
					}
					return
				}
				settled.Add(1)
				if i == 10 {
					ran <- struct{}{}
				}
			}
		})
	}
	for range 4 {
		<-ran
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	again := openAt(t, dir, "first", false)
	r := audit(t, again, "acme")
	if got := int64(usd - r.Account.Balance); got != settled.Load() {
		t.Errorf("%d nano-USD charged on disk, %d ordered settles returned nil", got, settled.Load())
	}
}

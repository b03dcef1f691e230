package backlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"golang.org/x/time/rate"
)

var errDown = errors.New("store unavailable")

func isDown(err error) bool { return errors.Is(err, errDown) }

// TestTrackerBounds: the writes under way are counted and the oldest is
// the first begun that has not ended, whatever order they end in; Admit
// refuses past either bound and counts its refusals.
func TestTrackerBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := NewTracker(3, time.Second)
	a := tr.Begin(t0)
	b := tr.Begin(t0.Add(100 * time.Millisecond))
	c := tr.Begin(t0.Add(200 * time.Millisecond))
	if s := tr.State(t0.Add(500 * time.Millisecond)); s.Writes != 3 || s.Oldest != 500*time.Millisecond {
		t.Fatalf("state %+v, want 3 writes, the oldest 500ms", s)
	}
	if _, ok := tr.Admit(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("refused at 3 writes of at most 3, the oldest under a second")
	}
	d := tr.Begin(t0.Add(300 * time.Millisecond))
	if _, ok := tr.Admit(t0.Add(500 * time.Millisecond)); ok {
		t.Fatal("admitted with 4 writes under way, bound 3")
	}
	b.End()
	a.End()
	if s := tr.State(t0.Add(time.Second)); s.Writes != 2 || s.Oldest != 800*time.Millisecond {
		t.Fatalf("after the two oldest ended: %+v, want 2 writes, the oldest 800ms (c)", s)
	}
	if _, ok := tr.Admit(t0.Add(1300 * time.Millisecond)); ok {
		t.Fatal("admitted with the oldest write under way for 1.1s, bound 1s")
	}
	c.End()
	d.End()
	var nilWrite *Write
	nilWrite.End()
	if s, ok := tr.Admit(t0.Add(time.Hour)); !ok || s.Writes != 0 || s.Oldest != 0 {
		t.Fatalf("with nothing under way: %+v admitted %v", s, ok)
	}
	if n := tr.Refused(); n != 2 {
		t.Fatalf("refused %d, want 2", n)
	}
	if _, ok := NewTracker(-1, -1).Admit(t0); !ok {
		t.Fatal("a tracker without bounds refused")
	}
}

// TestRetrierTriesAgainWhileDown: a write that meets the store down is
// tried again until it lands; one refused for another reason is not; a
// retry spends the shared budget's tokens and reports each retry.
func TestRetrierTriesAgainWhileDown(t *testing.T) {
	r := NewRetrier(isDown)
	var retries atomic.Int32
	r.OnRetry = func(string) { retries.Add(1) }
	var firsts atomic.Int32
	r.OnFirstFailure = func(string, string, error) { firsts.Add(1) }
	n := 0
	err, tries := r.Do(context.Background(), "settle", "req_1", func() error {
		if n++; n < 3 {
			return errDown
		}
		return nil
	})
	if err != nil || tries != 3 || retries.Load() != 2 || firsts.Load() != 1 {
		t.Fatalf("err %v after %d tries, %d retries reported, %d first failures; want nil, 3, 2, 1", err, tries, retries.Load(), firsts.Load())
	}
	refused := errors.New("no hold")
	err, tries = r.Do(context.Background(), "settle", "req_2", func() error { return refused })
	if err != refused || tries != 1 {
		t.Fatalf("a refused write: %v after %d tries, want it at once", err, tries)
	}
}

// TestRetrierStopsWithItsContext: a write tried again while the store
// stays down ends when its context does, with both errors.
func TestRetrierStopsWithItsContext(t *testing.T) {
	r := NewRetrier(isDown)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err, tries := r.Do(ctx, "carve", "req_1", func() error { return errDown })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errDown) || tries < 2 {
		t.Fatalf("%v after %d tries; want the deadline and the store's error, after a retry or more", err, tries)
	}
}

// TestRetrierCoalesces: two tries of the same write at once run it once;
// another request id's runs on its own.
func TestRetrierCoalesces(t *testing.T) {
	r := NewRetrier(isDown)
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	op := func() error {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.Do(context.Background(), "settle", "req_1", op) })
	<-started
	second := make(chan error, 1)
	go func() { err, _ := r.Do(context.Background(), "settle", "req_1", op); second <- err }()
	other := make(chan struct{})
	go func() { r.Do(context.Background(), "settle", "req_2", func() error { return nil }); close(other) }()
	<-other // not held up by req_1's write
	// The second req_1 joins the first: nothing in it runs until the
	// first's op returns.
	select {
	case err := <-second:
		t.Fatalf("the second try of req_1 returned (%v) before the first's write ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("req_1's write ran %d times, want once", n)
	}
}

// TestRetryBudgetAdapts: each retry the store does not answer halves the
// shared rate, down to its floor, and each one it answers doubles it, up
// to its ceiling: while the store is down, the retries of every write
// together are a trickle.
func TestRetryBudgetAdapts(t *testing.T) {
	r := NewRetrier(isDown)
	if r.Budget() != budgetMax {
		t.Fatalf("budget %v at start, want %v", r.Budget(), budgetMax)
	}
	for range 20 {
		r.adjust(false)
	}
	if r.Budget() != budgetMin {
		t.Fatalf("budget %v after 20 unanswered retries, want the floor %v", r.Budget(), budgetMin)
	}
	r.adjust(true)
	if r.Budget() != 2*budgetMin {
		t.Fatalf("budget %v after one answered retry, want %v", r.Budget(), 2*budgetMin)
	}
	for range 20 {
		r.adjust(true)
	}
	if r.Budget() != budgetMax {
		t.Fatalf("budget %v after 20 answered retries, want the ceiling %v", r.Budget(), budgetMax)
	}
}

// TestRaiseForgivesTheFloorsDebt: tokens booked at the floor by writes
// waiting through an outage, then cancelled in any order (rate.Limiter
// gives a cancelled booking back only when no later one was made), are
// not owed at the raised rate: the first booking after a raise waits one
// token's time at the new rate, not the floor's whole queue.
func TestRaiseForgivesTheFloorsDebt(t *testing.T) {
	r := NewRetrier(isDown)
	for range 20 {
		r.adjust(false)
	}
	booked := make([]*rate.Reservation, 500)
	for i := range booked {
		booked[i] = r.budget.Load().Reserve()
	}
	for i := range booked { // oldest first: none is given back
		booked[i].Cancel()
	}
	r.adjust(true)
	if d := r.budget.Load().Reserve().Delay(); d > time.Second/(2*budgetMin) {
		t.Fatalf("first booking after the raise to %v/s waits %v", r.Budget(), d)
	}
}

// TestRetriesShareTheBudget: with the budget at its floor, many writes
// failing at once are tried again at no more than the floor's rate in
// all, not each at its own backoff.
func TestRetriesShareTheBudget(t *testing.T) {
	r := NewRetrier(isDown)
	for range 20 {
		r.adjust(false)
	}
	r.budget.Load().SetBurst(1)
	var retries atomic.Int32
	r.OnRetry = func(string) { retries.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { r.Do(ctx, "settle", string(rune('a'+i)), func() error { return errDown }) })
	}
	if !testwait.Holds(time.Second, func() bool { return r.Waiting() == 50 }) {
		t.Errorf("%d writes waiting for their next try, want the 50", r.Waiting())
	}
	wg.Wait()
	if n := r.Waiting(); n != 0 {
		t.Fatalf("%d writes waiting after every Do returned", n)
	}
	// 2 s at 5 per second and a burst of one: at most 11 retries (the
	// limiter may let one more through as the context ends).
	if n := retries.Load(); n > 12 {
		t.Fatalf("50 writes made %d retries in 2 s under a budget of %v/s", n, float64(budgetMin))
	}
}

// TestRetriesCatchUpAfterAnOutage: writes that waited through an outage,
// their tokens booked at the budget's floor, go at the rate the budget
// climbs back to once the store answers, not one every 200 ms.
func TestRetriesCatchUpAfterAnOutage(t *testing.T) {
	r := NewRetrier(isDown)
	var up atomic.Bool
	op := func() error {
		if !up.Load() {
			return errDown
		}
		return nil
	}
	const writes = 500
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() { r.Do(context.Background(), "settle", fmt.Sprint(i), op) })
	}
	// The outage: every retry unanswered drives the budget to its floor,
	// where 500 writes would book their tokens 100 s apart in all.
	if !testwait.Holds(5*time.Second, func() bool { return r.Budget() == budgetMin }) {
		t.Fatalf("budget %v during the outage, want the floor %v", r.Budget(), float64(budgetMin))
	}
	time.Sleep(time.Second) // the outage lasts: the writes book their tokens at the floor
	up.Store(true)
	back := time.Now()
	wg.Wait()
	// At most one backoff (5 s) and the climb from 5/s: well under 100 s.
	if d := time.Since(back); d > 15*time.Second {
		t.Fatalf("%d writes took %v to land once the store answered", writes, d)
	}
	t.Logf("%d writes landed %v after the store answered", writes, time.Since(back).Round(time.Millisecond))
}

package billing

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
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
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAllotStore{allots: map[string]pricing.Nano{}}
		a := newAllotments(f, t.Logf, randomID)
		a.idle = 300 * time.Millisecond
		now := time.Now()
		if al := a.take("acme", 10, 100, now); al != nil {
			t.Fatal("the first call was admitted before any allotment was taken")
		}
		testwait.For(t, 15*time.Second, "an allotment is taken", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
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
		testwait.For(t, 15*time.Second, "the used-up allotment is released", func() bool { _, rel := f.state(); return len(rel) == 1 && rel[0] == first.id })
		testwait.For(t, 15*time.Second, "a second allotment is taken", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
		testwait.For(t, 15*time.Second, "the idle allotment is released", func() bool { open, rel := f.state(); return open == 0 && len(rel) == 2 })

		a.close(context.Background())
		if al := a.take("acme", 1, 100, time.Now()); al != nil {
			t.Fatal("admitted after close")
		}
		synctest.Wait() // every goroutine done or blocked: a late allotment would show
		if open, _ := f.state(); open != 0 {
			t.Fatal("an allotment was taken after close")
		}
	})
}

// TestAllotmentsStopWhenTheStoreIsDown: a carve that meets an unavailable
// store retires every allotment at once (their calls hold in the database,
// which refuses them while it is down), none is taken for a while, and
// each is released once its carves have returned; a refused allotment
// admits nothing.
func TestAllotmentsStopWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAllotStore{allots: map[string]pricing.Nano{}}
		a := newAllotments(f, t.Logf, randomID)
		for _, acct := range []string{"acme", "beta"} {
			a.take(acct, 1, 100, time.Now())
			testwait.For(t, 15*time.Second, "an allotment of "+acct, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open[acct] != nil })
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
		testwait.For(t, 15*time.Second, "beta's allotment, with no carve pending, is released", func() bool { open, _ := f.state(); return open == 1 })
		a.carved(al, store.ErrUnavailable)
		testwait.For(t, 15*time.Second, "acme's is released once its carve returned", func() bool { open, _ := f.state(); return open == 0 })
		synctest.Wait() // every goroutine done or blocked: a late allotment would show
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
		testwait.For(t, 15*time.Second, "an allotment once the store is back", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.open["acme"] != nil })
		a.close(context.Background())
		if open, _ := f.state(); open != 0 {
			t.Fatal("an allotment whose release met the store down stayed open")
		}

		g := newAllotments(&fakeAllotStore{allots: map[string]pricing.Nano{}, allotErr: &store.InsufficientError{Limit: store.LimitAccount}}, t.Logf, randomID)
		g.take("acme", 1, 100, time.Now())
		testwait.For(t, 15*time.Second, "the refused allotment is given up", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.taking) == 0 })
		if got := g.take("acme", 1, 100, time.Now()); got != nil {
			t.Fatal("admitted against a refused allotment")
		}
	})
}

// TestAllotmentsCloseReleasesALateOne: an allotment whose Allot returns
// after close began is released, not kept, and close waits for it.
func TestAllotmentsCloseReleasesALateOne(t *testing.T) {
	t.Parallel()
	f := &fakeAllotStore{allots: map[string]pricing.Nano{}, gate: make(chan struct{})}
	a := newAllotments(f, t.Logf, randomID)
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

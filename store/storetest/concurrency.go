package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Concurrent holds against scarce credit admit exactly what it covers:
// never more (no credit is spent twice), and no caller is refused while
// credit for it remains (every refusal is a true 402).
func (k *kit) concurrentHolds(t *testing.T, s Store) {
	const each = usd
	credits := 5*usd + 400_000_000 // covers five holds, not six
	callers := max(k.opts.Callers, 12)
	at := k.spread(t, s)
	mustCredit(t, s, "acme", credits)
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		admitted = make(chan string, callers)
		refused  atomic.Int64
	)
	for i := range callers {
		wg.Go(func() {
			<-start
			id := fmt.Sprintf("req_%04d", i)
			err := at(i).Hold(ctx, holdOf("acme", id, each))
			var ie *store.InsufficientError
			switch {
			case err == nil:
				admitted <- id
			case errors.As(err, &ie):
				if ie.Needed != each || ie.Available >= each {
					t.Errorf("%s refused with needed %d, available %d", id, ie.Needed, ie.Available)
				}
				refused.Add(1)
			default:
				t.Errorf("Hold %s: %v", id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(admitted)
	var ids []string
	for id := range admitted {
		ids = append(ids, id)
	}
	if len(ids) != 5 || refused.Load() != int64(callers-5) {
		t.Fatalf("%d admitted, %d refused; want 5 and %d", len(ids), refused.Load(), callers-5)
	}
	wantAccount(t, s, "acme", credits, 5*each)

	// Settle them all at once, one over its hold.
	var charged atomic.Int64
	for i, id := range ids {
		wg.Go(func() {
			charge := pricing.Nano(i+1)*300_000_000 + 7 // the last one overruns
			if _, err := at(i).Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: charge}); err != nil {
				t.Errorf("Settle %s: %v", id, err)
				return
			}
			charged.Add(int64(charge))
		})
	}
	wg.Wait()
	wantAccount(t, s, "acme", credits-pricing.Nano(charged.Load()), 0)
	if entries := books(t, s, "acme"); len(entries) != 6 {
		t.Errorf("journal has %d entries, want a credit and 5 charges", len(entries))
	}
}

// Concurrent Settles and Releases of one hold: exactly one ends it, every
// other gets ErrAlreadySettled, and the charge is taken once.
func (k *kit) concurrentSettle(t *testing.T, s Store) {
	at := k.spread(t, s)
	mustCredit(t, s, "acme", 10*usd)
	const rounds = 5
	var wantBalance = 10 * usd
	for r := range rounds {
		id := fmt.Sprintf("req_%d", r)
		mustHold(t, s, "acme", id, usd)
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			settled  atomic.Int64
			released atomic.Int64
		)
		for i := range k.opts.Callers {
			wg.Go(func() {
				<-start
				var err error
				if r%2 == 1 && i%4 == 0 { // odd rounds race releases against settles
					if err = at(i).Release(ctx, id, "failed"); err == nil {
						released.Add(1)
					}
				} else if _, err = at(i).Settle(ctx, store.Settlement{RequestID: id, Charge: 600_000_000}); err == nil {
					settled.Add(1)
				}
				if err != nil && !errors.Is(err, store.ErrAlreadySettled) {
					t.Errorf("round %d: %v, want nil or ErrAlreadySettled", r, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if settled.Load()+released.Load() != 1 {
			t.Fatalf("round %d: %d settles and %d releases succeeded, want exactly one end", r, settled.Load(), released.Load())
		}
		if settled.Load() == 1 {
			wantBalance -= 600_000_000
		}
		wantAccount(t, s, "acme", wantBalance, 0)
	}
	books(t, s, "acme")
}

// Many accounts, all operations at once: every account's books hold and
// nothing stays held.
func (k *kit) concurrentMixed(t *testing.T, s Store) {
	const accounts = 4
	perAccount := max(k.opts.Callers/2, 8)
	at := k.spread(t, s)
	for a := range accounts {
		mustCredit(t, s, fmt.Sprintf("acct_%d", a), 10*usd)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for a := range accounts {
		for i := range perAccount {
			wg.Go(func() {
				<-start
				account := fmt.Sprintf("acct_%d", a)
				id := fmt.Sprintf("%s_req_%d", account, i)
				// The hold and its end go to different replicas.
				if err := at(i).Hold(ctx, holdOf(account, id, usd)); err != nil {
					if !errors.Is(err, store.ErrInsufficient) {
						t.Errorf("Hold %s: %v", id, err)
					}
					return
				}
				var err error
				end := at(i + a + 1)
				switch i % 3 {
				case 0:
					_, err = end.Settle(ctx, store.Settlement{RequestID: id, Charge: 400_000_000})
				case 1:
					err = end.Release(ctx, id, "failed")
				default:
					if _, err = end.Credit(ctx, account, 1, ""); err == nil {
						_, err = end.Settle(ctx, store.Settlement{RequestID: id, Account: account, Charge: usd + 1})
					}
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for a := range accounts {
		account := fmt.Sprintf("acct_%d", a)
		if got := mustBalance(t, s, account); got.Held != 0 {
			t.Errorf("%s: %d still held", account, got.Held)
		}
		books(t, s, account)
	}
}

// race runs fn(i) for i in [0, n) on n goroutines released together.
func race(n int, fn func(i int)) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// Concurrent first credits of one new account all count; concurrent
// creations of one account, one key or one job, and concurrent holds on one
// request id, succeed once and answer ErrExists to the rest.
func (k *kit) concurrentCreate(t *testing.T, s Store) {
	n := k.opts.Callers
	at := k.spread(t, s)
	race(n, func(i int) {
		if _, err := at(i).Credit(ctx, "fresh", pricing.Nano(i+1), ""); err != nil {
			t.Errorf("Credit %d: %v", i, err)
		}
	})
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2), 0)
	if entries := books(t, s, "fresh"); len(entries) != n {
		t.Errorf("%d journal entries for %d credits", len(entries), n)
	}

	once := func(what string, fn func(i int) error) {
		t.Helper()
		var ok atomic.Int64
		race(n, func(i int) {
			switch err := fn(i); {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, store.ErrExists):
				t.Errorf("%s: %v, want nil or ErrExists", what, err)
			}
		})
		if ok.Load() != 1 {
			t.Errorf("%s: %d of %d concurrent calls succeeded, want 1", what, ok.Load(), n)
		}
	}
	once("CreateAccount", func(i int) error {
		_, err := at(i).CreateAccount(ctx, "acme")
		return err
	})
	once("CreateKey with one hash", func(i int) error {
		return at(i).CreateKey(ctx, store.Key{ID: fmt.Sprintf("key_%d", i), Hash: store.HashKey("one secret"), Account: "acme", Route: "r"})
	})
	once("CreateKey with one id", func(i int) error {
		return at(i).CreateKey(ctx, store.Key{ID: "key_one", Hash: store.HashKey(fmt.Sprintf("secret %d", i)), Account: "acme", Route: "r"})
	})
	if keys, err := s.ListKeys(ctx, "acme"); err != nil || len(keys) != 2 {
		t.Errorf("keys after the races: %+v, %v; want 2", keys, err)
	}
	once("PutJob", func(i int) error {
		return at(i).PutJob(ctx, store.Job{RequestID: "vid_1", Account: "fresh", Amount: pricing.Nano(i)})
	})
	once("Hold on one request id", func(i int) error {
		return at(i).Hold(ctx, holdOf("fresh", "req_1", 7))
	})
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2), 7)
	mustSettle(t, s, "req_1", 7)
	wantAccount(t, s, "fresh", pricing.Nano(n*(n+1)/2)-7, 0)
	books(t, s, "fresh")
}

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

// allotments: a store that takes allotments (store.Allotter) keeps them as
// holds: a carve moves part of one into a call's own hold, the account's
// held unchanged and the key's held counting it, which settles like any;
// a carve larger than what is left or from no open allotment is refused
// with ErrNoHold and writes nothing, one of an ended request id with
// ErrExists; concurrent carves never take more than the allotment has;
// its release gives back only what was not carved. A store that does not
// claim Allotter (its holds commit where the gateway runs) skips.
func (k *kit) allotments(t *testing.T, s Store) {
	al := claimed[store.Allotter](t, k, s, Allotter)
	mustCredit(t, s, "acme", 100*usd)
	key := mustKey(t, s, store.Key{ID: "key_a", Account: "acme"})
	if err := al.Allot(ctx, store.Hold{RequestID: "allot_1", Account: "acme", Endpoint: "allotment", Amount: 10 * usd}); err != nil {
		t.Fatal(err)
	}
	held := func(account, keyHeld pricing.Nano) {
		t.Helper()
		a, err := s.Balance(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if a.Held != account {
			t.Fatalf("account held %v, want %v", a.Held, account)
		}
		wantKeySpend(t, s, key.Hash, mustKeyByHash(t, s, key.Hash).Spent, keyHeld)
	}
	carve := func(from, id string, amount pricing.Nano) error {
		return al.Carve(ctx, from, keyHold("acme", "key_a", id, amount, march))
	}
	if err := carve("allot_1", "call_1", 3*usd); err != nil {
		t.Fatal(err)
	}
	held(10*usd, 3*usd)
	for _, tc := range []struct {
		from, id string
		amount   pricing.Nano
	}{
		{"allot_1", "call_big", 7*usd + 1},
		{"allot_none", "call_x", 1},
	} {
		if err := carve(tc.from, tc.id, tc.amount); !errors.Is(err, store.ErrNoHold) {
			t.Fatalf("carve %s of %v from %s: %v, want ErrNoHold", tc.id, tc.amount, tc.from, err)
		}
	}
	held(10*usd, 3*usd)

	e, err := s.Settle(ctx, store.Settlement{RequestID: "call_1", Account: "acme", Charge: 2 * usd})
	if err != nil {
		t.Fatal(err)
	}
	if e.Amount != -2*usd || e.BalanceAfter != 98*usd || e.HoldAmount != 3*usd || e.KeyID != "key_a" {
		t.Fatalf("the carved call's charge entry: %+v", e)
	}
	held(7*usd, 0)
	wantKeySpend(t, s, key.Hash, 2*usd, 0)
	if err := carve("allot_1", "call_1", 1); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a carve of a settled request id: %v, want ErrExists", err)
	}
	k.allotmentRest(t, s, carve, held)
	k.holdAdmitted(t, s, al, held)
}

// allotmentRest is allotments' second half: the 7 USD left of allot_1
// carved concurrently, then its release.
func (k *kit) allotmentRest(t *testing.T, s Store, carve func(from, id string, amount pricing.Nano) error, held func(account, keyHeld pricing.Nano)) {
	var carved atomic.Int32
	var wg sync.WaitGroup
	for i := range k.opts.Callers {
		wg.Go(func() {
			switch err := carve("allot_1", fmt.Sprint("many_", i), usd/10); {
			case err == nil:
				carved.Add(1)
			case !errors.Is(err, store.ErrNoHold):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	want := min(int32(k.opts.Callers), 70)
	if carved.Load() != want {
		t.Fatalf("%d concurrent carves of 0.1 USD from 7 USD took %d, want %d", k.opts.Callers, carved.Load(), want)
	}
	if err := s.Release(ctx, "allot_1", "ended"); err != nil {
		t.Fatal(err)
	}
	held(pricing.Nano(want)*usd/10, pricing.Nano(want)*usd/10)
	if err := carve("allot_1", "late", 0); !errors.Is(err, store.ErrNoHold) {
		t.Fatalf("a carve from a released allotment: %v, want ErrNoHold", err)
	}
	for i := range k.opts.Callers {
		if err := s.Release(ctx, fmt.Sprint("many_", i), "test"); err != nil && !errors.Is(err, store.ErrNoHold) {
			t.Fatal(err)
		}
	}
	held(0, 0)
	if a, _ := s.Balance(ctx, "acme"); a.Balance != 98*usd {
		t.Fatalf("balance %v, want 98 USD", a.Balance)
	}
	r, err := s.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// holdAdmitted: a call admitted against an allotment that is gone is held
// without a credit check (HoldAdmitted), even beyond the available
// credit, counted in the account's and the key's held, and settled like
// any; an ended request id is ErrExists, an unknown account ErrNotFound.
func (k *kit) holdAdmitted(t *testing.T, s Store, al store.Allotter, held func(account, keyHeld pricing.Nano)) {
	big := keyHold("acme", "key_a", "admitted_1", 500*usd, march) // the balance is 98 USD
	if err := al.HoldAdmitted(ctx, big); err != nil {
		t.Fatalf("HoldAdmitted beyond the credit: %v", err)
	}
	held(500*usd, 500*usd)
	if err := al.HoldAdmitted(ctx, big); !errors.Is(err, store.ErrExists) {
		t.Fatalf("HoldAdmitted of a request id with a hold: %v, want ErrExists", err)
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "admitted_1", Account: "acme", Charge: usd}); err != nil {
		t.Fatal(err)
	}
	held(0, 0)
	if err := al.HoldAdmitted(ctx, big); !errors.Is(err, store.ErrExists) {
		t.Fatalf("HoldAdmitted of a settled request id: %v, want ErrExists", err)
	}
	if err := al.HoldAdmitted(ctx, keyHold("nobody", "", "admitted_2", usd, march)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("HoldAdmitted on an unknown account: %v, want ErrNotFound", err)
	}
}

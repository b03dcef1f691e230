package storetest

import (
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The holds of an owner that died are released, each with a KindRecovery
// entry of amount 0, never charged; what was settled stays settled.
func (k *kit) recovery(t *testing.T, s Store) {
	if k.opts.Crash == nil {
		t.Fatal("storetest: Options.Crash is nil: every store recovers the holds of owners that died, and the kit must be told how this one's die")
	}
	mustCredit(t, s, "acme", 10*usd)
	mustCredit(t, s, "beta", 10*usd)
	mustHold(t, s, "acme", "settled", usd)
	mustHold(t, s, "acme", "released", usd)
	mustHold(t, s, "acme", "lost_1", 2*usd)
	mustHold(t, s, "acme", "lost_2", 3*usd)
	mustHold(t, s, "beta", "lost_3", 4*usd)
	mustSettle(t, s, "settled", 500_000_000)
	if err := s.Release(ctx, "released", "failed"); err != nil {
		t.Fatal(err)
	}

	k.handedOff = true
	after := k.opts.Crash(t, s)
	if after == nil {
		t.Fatal("Crash returned a nil store")
	}
	t.Cleanup(func() {
		if err := after.Close(); err != nil {
			t.Errorf("Close of the store after the crash: %v", err)
		}
	})
	wantAccount(t, after, "acme", 9_500_000_000, 0)
	wantAccount(t, after, "beta", 10*usd, 0)

	lost := map[string]pricing.Nano{"lost_1": 2 * usd, "lost_2": 3 * usd, "lost_3": 4 * usd}
	found := map[string]int{}
	for _, account := range []string{"acme", "beta"} {
		for _, e := range books(t, after, account) {
			switch e.Kind {
			case store.KindRecovery:
				found[e.RequestID]++
				if want, ok := lost[e.RequestID]; !ok || e.HoldAmount != want || e.Amount != 0 ||
					e.KeyID != "key_kit" || e.Model != "kit-model" || e.Route != "kit-route" {
					t.Errorf("recovery entry %+v: want one of the lost holds, its hold amount, key, model and route, amount 0", e)
				}
			case store.KindCharge:
				if e.RequestID != "settled" {
					t.Errorf("charge entry after the crash: %+v", e)
				}
			}
		}
	}
	for id := range lost {
		if found[id] != 1 {
			t.Errorf("%d recovery entries for %s, want 1", found[id], id)
		}
	}
	if found["settled"]+found["released"] != 0 {
		t.Errorf("ended holds recovered: %v", found)
	}
	for id := range lost {
		_, err := after.Settle(ctx, store.Settlement{RequestID: id, Charge: 1})
		wantErr(t, "Settle of a recovered hold", err, store.ErrAlreadySettled)
	}
	wantAccount(t, after, "acme", 9_500_000_000, 0)
	// The recovered credit can be held again.
	mustHold(t, after, "acme", "new", 9_500_000_000)
	mustSettle(t, after, "new", usd)
	wantAccount(t, after, "acme", 8_500_000_000, 0)
	books(t, after, "acme")
}

package badger

import (
	"context"
	"github.com/modelrelay/modelrelay/store"
	"testing"
)

// A settlement may name its hold's account (saving a lookup); a wrong
// account is refused and charges no one.
func TestSettleWithAccount(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	ctx := context.Background()
	credit(t, b, "acme", 1000)
	credit(t, b, "other", 1000)
	hold(t, b, "acme", "req_a", 300)
	hold(t, b, "acme", "req_b", 300)

	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_a", Account: "other", Charge: 100}); err == nil {
		t.Fatal("settling against the wrong account must fail")
	}
	if a, o := balance(t, b, "acme"), balance(t, b, "other"); a.Balance != 1000 || a.Held != 600 || o.Balance != 1000 || o.Held != 0 {
		t.Fatalf("a refused settlement moved money: acme %+v other %+v", a, o)
	}
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_a", Account: "acme", Charge: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_b", Charge: 50}); err != nil { // looked up
		t.Fatal(err)
	}
	if a := balance(t, b, "acme"); a.Balance != 850 || a.Held != 0 {
		t.Fatalf("acme %+v, want balance 850, nothing held", a)
	}
	if err := audit(t, b, "acme").Err(); err != nil {
		t.Fatal(err)
	}
}

package badger

import (
	"context"
	"errors"
	"github.com/modelrelay/modelrelay/store"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

func TestRecoverHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	crashWithHolds(t, dir, "boot-A")

	// Second process on the same directory.
	second := openAt(t, dir, "boot-B", false)
	hold(t, second, "acme", "mine", usd) // taken before recovery runs: never touched
	// The first process's holds ended with it: they hold no credit, and
	// wait in its hold log for recovery to record them.
	if total, err := second.HeldTotal(ctx, ""); err != nil || total != usd {
		t.Fatalf("HeldTotal before recovery: %d, %v; want 1 USD", total, err)
	}
	released, err := second.RecoverHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if released != 3 {
		t.Fatalf("released %d holds, want 3", released)
	}
	open, err := second.OpenHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].RequestID != "mine" || open[0].Owner != "boot-B" {
		t.Fatalf("open holds after recovery: %+v", open)
	}
	t.Run("acme first", func(t *testing.T) { checkRecoveredHold(t, second, "acme", "lost_1", 2*usd) })
	t.Run("acme second", func(t *testing.T) { checkRecoveredHold(t, second, "acme", "lost_2", 3*usd) })
	t.Run("beta", func(t *testing.T) { checkRecoveredHold(t, second, "beta", "lost_3", 4*usd) })

	if a := balance(t, second, "acme"); a.Balance != 9_500_000_000 || a.Held != usd {
		t.Errorf("acme after recovery: %+v, want balance 9.5 USD, held 1 USD", a)
	}
	if a := balance(t, second, "beta"); a.Balance != 10*usd || a.Held != 0 {
		t.Errorf("beta after recovery: %+v, want balance 10 USD, nothing held", a)
	}
	audit(t, second, "acme")
	audit(t, second, "beta")

	// Running it again finds nothing, and this process's hold still settles.
	if again, err := second.RecoverHolds(ctx); err != nil || again != 0 {
		t.Errorf("second RecoverHolds: %d, %v", again, err)
	}
	if _, err := second.Settle(ctx, store.Settlement{RequestID: "mine", Charge: usd}); err != nil {
		t.Errorf("settling this process's hold: %v", err)
	}
	audit(t, second, "acme")
}

// crashWithHolds is a first process in dir, of the owner given: it credits
// acme and beta 10 USD each, takes four holds, settles one (0.5 USD of
// acme's 1 USD) and "crashes" with lost_1 (acme, 2 USD), lost_2 (acme,
// 3 USD) and lost_3 (beta, 4 USD) open. It closes the store: an abrupt exit
// leaves the same records.
func crashWithHolds(t *testing.T, dir, owner string) {
	t.Helper()
	first, err := Open(dir, Options{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if first.Owner() != owner {
		t.Fatalf("owner %q", first.Owner())
	}
	credit(t, first, "acme", 10*usd)
	credit(t, first, "beta", 10*usd)
	hold(t, first, "acme", "settled", usd)
	hold(t, first, "acme", "lost_1", 2*usd)
	hold(t, first, "acme", "lost_2", 3*usd)
	hold(t, first, "beta", "lost_3", 4*usd)
	if _, err := first.Settle(context.Background(), store.Settlement{RequestID: "settled", Charge: 500_000_000}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkRecoveredHold wants the hold of request, which boot-A left open, to
// have a recovery entry in account's journal that moves no money, a
// recovered outcome of the same sequence number, and to refuse a late
// Settle.
func checkRecoveredHold(t *testing.T, b *Store, account, request string, amount pricing.Nano) {
	t.Helper()
	ctx := context.Background()
	entries, err := b.Charges(ctx, account, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found *store.Entry
	for i := range entries {
		if entries[i].RequestID == request {
			found = &entries[i]
		}
	}
	if found == nil {
		t.Fatalf("no journal entry for %s", request)
	}
	if found.Kind != store.KindRecovery || found.Amount != 0 || found.HoldAmount != amount ||
		found.Note != "hold released at start-up: owner boot-A ended without settling" ||
		found.Model != "m" || found.KeyID != "key_test" {
		t.Errorf("recovery entry %+v", *found)
	}
	o, err := b.Outcome(ctx, request)
	if err != nil {
		t.Fatal(err)
	}
	if o.State != store.OutcomeRecovered || o.HoldAmount != amount || o.Owner != "boot-A" || o.Seq != found.Seq {
		t.Errorf("outcome %+v", o)
	}
	if _, err := b.Settle(ctx, store.Settlement{RequestID: request, Charge: 1}); !errors.Is(err, store.ErrAlreadySettled) {
		t.Errorf("late Settle: %v, want ErrAlreadySettled", err)
	}
}

func TestOpenBadgerOptions(t *testing.T) {
	t.Parallel()
	if _, err := Open("", Options{}); err == nil {
		t.Error("Open with no dir and not in memory succeeded")
	}
	mem, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if len(mem.Owner()) != 32 {
		t.Errorf("random owner %q, want 32 hex characters", mem.Owner())
	}
	credit(t, mem, "acme", usd)
	audit(t, mem, "acme")
	other, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if other.Owner() == mem.Owner() {
		t.Error("two stores drew the same random owner")
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// One directory, one process.
	dir := t.TempDir()
	openAt(t, dir, "x", false)
	if b, err := Open(dir, Options{}); err == nil {
		b.Close()
		t.Error("a second Open on a directory in use succeeded")
	}
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const usd = pricing.NanoPerUSD

func hold(account, id string, amount pricing.Nano) store.Hold {
	return store.Hold{RequestID: id, Account: account, KeyID: "key_t", Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Amount: amount}
}

func audit(t *testing.T, s *Store, account string) store.AuditReport {
	t.Helper()
	r, err := s.Audit(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLeaseExpiryRecovery: a replica that dies leaves holds that another
// releases once — and only once — their lease has really run out: not
// before, never charged, each with a recovery entry, the books exact.
func TestLeaseExpiryRecovery(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	const lease = 2 * time.Second
	dead := openStore(t, dsn, Options{Owner: "dead", Lease: lease, RenewEvery: -1})
	other := openStore(t, dsn, Options{Owner: "other", Lease: lease, RenewEvery: -1})
	if _, err := dead.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := dead.Hold(ctx, hold("acme", fmt.Sprint("dead_", i), usd)); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Hold(ctx, hold("acme", "alive", 2*usd)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = dead.Close() // as kill -9 would: nothing settled, nothing renewed

	// Within the lease, nothing is swept (checked only while the lease
	// surely still runs, so a slow machine cannot make this flaky).
	if n, err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	} else if time.Since(start) < lease/2 && n != 0 {
		t.Fatalf("swept %d holds before their lease ran out", n)
	}
	// The live replica renews its own hold meanwhile; the dead one's age.
	released := 0
	deadline := time.Now().Add(60 * time.Second)
	for released < 3 && time.Now().Before(deadline) {
		if _, err := other.RenewLeases(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := other.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released += n
		time.Sleep(200 * time.Millisecond)
	}
	if released != 3 {
		t.Fatalf("released %d of the dead replica's 3 holds", released)
	}
	if el := time.Since(start); el < lease {
		t.Fatalf("holds released after %v, before the %v lease ran out", el, lease)
	}
	a, _ := other.Balance(ctx, "acme")
	if a.Balance != 10*usd || a.Held != 2*usd {
		t.Fatalf("after recovery: %+v, want balance 10 USD, held 2 USD (the live hold)", a)
	}
	for i := range 3 {
		o, err := other.Outcome(ctx, fmt.Sprint("dead_", i))
		if err != nil || o.State != store.OutcomeRecovered || o.Owner != "dead" || o.HoldAmount != usd {
			t.Fatalf("outcome of dead_%d: %+v, %v", i, o, err)
		}
		if _, err := other.Settle(ctx, store.Settlement{RequestID: fmt.Sprint("dead_", i), Charge: 1}); !errors.Is(err, store.ErrAlreadySettled) {
			t.Fatalf("a late settle of a recovered hold: %v, want ErrAlreadySettled", err)
		}
	}
	if _, err := other.Settle(ctx, store.Settlement{RequestID: "alive", Charge: usd}); err != nil {
		t.Fatalf("the live replica's hold was swept: %v", err)
	}
	r := audit(t, other, "acme")
	if r.Entries != 5 || r.Account.Balance != 9*usd || r.Account.Held != 0 {
		t.Fatalf("books %+v, want 5 entries (credit, 3 recoveries, 1 charge), balance 9 USD", r)
	}
}

// TestRenewKeepsHolds: a hold whose lease the owner renews is not swept,
// even when it had been about to run out.
func TestRenewKeepsHolds(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := openStore(t, dsn, Options{Owner: "a", Lease: time.Minute, RenewEvery: -1})
	other := openStore(t, dsn, Options{Owner: "b", RenewEvery: -1})
	if _, err := s.Credit(ctx, "acme", usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, hold("acme", "r1", usd)); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	if n, err := s.RenewLeases(ctx); err != nil || n != 1 {
		t.Fatalf("RenewLeases: %d, %v", n, err)
	}
	if n, err := other.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep after renewal released %d (%v), want 0", n, err)
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "r1", Charge: usd}); err != nil {
		t.Fatal(err)
	}
}

// TestSweepOneAtATimeInBatches: while another session holds the sweep lock
// a sweep does nothing and returns at once; then one sweep releases every
// expired hold across several batches.
func TestSweepOneAtATimeInBatches(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := openStore(t, dsn, Options{Owner: "a", RenewEvery: -1, SweepBatch: 7})
	if _, err := s.Credit(ctx, "acme", 100*usd, "c"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := s.Hold(ctx, hold("acme", fmt.Sprint("h", i), usd/2)); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_lock($1)`, sweepLock); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sweep(ctx); err != nil || got != 0 {
		t.Fatalf("Sweep while another sweeps: %d, %v; want 0", got, err)
	}
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_unlock($1)`, sweepLock); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sweep(ctx); err != nil || got != n {
		t.Fatalf("Sweep: %d, %v; want %d", got, err, n)
	}
	r := audit(t, s, "acme")
	if r.Account.Held != 0 || r.Account.Balance != 100*usd || r.Entries != n+1 {
		t.Fatalf("books %+v", r)
	}
}

// TestSweepRacesSettle: holds whose lease ran out while their owner still
// settles them are each charged exactly once, whether the settle or the
// sweep came first (a settle after the sweep is a late settle), and the
// books balance.
func TestSweepRacesSettle(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	owner := openStore(t, dsn, Options{Owner: "a", RenewEvery: -1})
	sweeper := openStore(t, dsn, Options{Owner: "b", RenewEvery: -1, SweepBatch: 5})
	if _, err := owner.Credit(ctx, "acme", 100*usd, "c"); err != nil {
		t.Fatal(err)
	}
	const n = 60
	for i := range n {
		if err := owner.Hold(ctx, hold("acme", fmt.Sprint("h", i), usd)); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	var (
		wg      sync.WaitGroup
		settled int
		mu      sync.Mutex
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Error(err)
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := owner.Settle(ctx, store.Settlement{RequestID: fmt.Sprint("h", i), Charge: usd / 4})
			switch {
			case err == nil:
				mu.Lock()
				settled++
				mu.Unlock()
			case !errors.Is(err, store.ErrAlreadySettled):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r := audit(t, owner, "acme")
	recovered := r.Entries - 1 - settled
	if r.Account.Held != 0 || settled != n || r.Charges != n*usd/4 || r.Account.Balance != 100*usd-n*usd/4 {
		t.Fatalf("settled %d, books %+v", settled, r)
	}
	t.Logf("%d settled, %d of them after the sweep released their hold", settled, recovered)
}

// TestBackgroundLoop: with the store's own loop running, a live replica's
// hold outlives several leases (renewed), and a closed replica's hold is
// swept by the other's loop without anyone calling Sweep.
func TestBackgroundLoop(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	const lease = 3 * time.Second
	opts := Options{Lease: lease, RenewEvery: 200 * time.Millisecond, SweepEvery: 300 * time.Millisecond}
	opts.Owner = "live"
	live := openStore(t, dsn, opts)
	opts.Owner = "dead"
	dead := openStore(t, dsn, opts)
	if _, err := live.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := live.Hold(ctx, hold("acme", "live_1", usd)); err != nil {
		t.Fatal(err)
	}
	if err := dead.Hold(ctx, hold("acme", "dead_1", 2*usd)); err != nil {
		t.Fatal(err)
	}
	_ = dead.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a, err := live.Balance(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if a.Held == usd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed replica's hold was not swept: %+v", a)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(lease + time.Second) // the live hold must outlive its first lease
	if _, err := live.Settle(ctx, store.Settlement{RequestID: "live_1", Charge: usd}); err != nil {
		t.Fatalf("the live replica's renewed hold: %v", err)
	}
	o, err := live.Outcome(ctx, "dead_1")
	if err != nil || o.State != store.OutcomeRecovered {
		t.Fatalf("outcome of the dead hold: %+v, %v", o, err)
	}
	audit(t, live, "acme")
}

// TestHoldOnEndedID: a request id that has ended cannot be held again (a
// replayed request id is refused at admission, and nothing is reserved).
func TestHoldOnEndedID(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := openStore(t, dsn, Options{RenewEvery: -1})
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"settle", "release"} {
		id := "req_" + end
		if err := s.Hold(ctx, hold("acme", id, usd)); err != nil {
			t.Fatal(err)
		}
		if err := s.Hold(ctx, hold("acme", id, usd)); !errors.Is(err, store.ErrExists) {
			t.Fatalf("a second hold on an open id: %v, want ErrExists", err)
		}
		var err error
		if end == "settle" {
			_, err = s.Settle(ctx, store.Settlement{RequestID: id, Charge: usd})
		} else {
			err = s.Release(ctx, id, "failed")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Hold(ctx, hold("acme", id, usd)); !errors.Is(err, store.ErrExists) {
			t.Fatalf("a hold on an id that ended (%s): %v, want ErrExists", end, err)
		}
	}
	r := audit(t, s, "acme")
	if r.Account.Held != 0 || r.Account.Balance != 9*usd {
		t.Fatalf("books %+v", r)
	}
}

// TestLateSettleAfterRecovery: a replica cut off from the database for
// longer than its lease finds, when it comes back, that another replica
// released its hold. The call was answered, so its settle still charges it
// — once: a replay is ErrAlreadySettled, and the books balance; the charge
// counts in its key's spend.
func TestLateSettleAfterRecovery(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	cut := openStore(t, dsn, Options{Owner: "cut", Lease: time.Second, RenewEvery: -1})
	other := openStore(t, dsn, Options{Owner: "other", Lease: time.Second, RenewEvery: -1})
	if _, err := cut.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, cut, store.Key{ID: "key_t", Account: "acme", Limit: 5 * usd})
	if err := cut.Hold(ctx, hold("acme", "late", 2*usd)); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	if n, err := other.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the one expired hold", n, err)
	}
	if k := keyOf(t, other, "key_t"); k.Held != 0 || k.Spent != 0 {
		t.Fatalf("key after the sweep: %+v", k)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = cut.Settle(ctx, store.Settlement{RequestID: "late", Account: "acme", Charge: 3 * usd, Note: "n"})
		}()
	}
	wg.Wait()
	charged := 0
	for _, err := range errs {
		switch {
		case err == nil:
			charged++
		case !errors.Is(err, store.ErrAlreadySettled):
			t.Fatalf("late Settle: %v", err)
		}
	}
	if charged != 1 {
		t.Fatalf("%d of 4 racing late settles charged; want exactly 1", charged)
	}
	r := audit(t, other, "acme")
	if r.Account.Balance != 7*usd || r.Account.Held != 0 || r.OpenHolds != 0 {
		t.Fatalf("after the late settle: %+v", r.Account)
	}
	if k := keyOf(t, other, "key_t"); k.Held != 0 || k.Spent != 3*usd {
		t.Fatalf("key after the late settle: %+v; want 3 USD spent", k)
	}
	o, err := other.Outcome(ctx, "late")
	if err != nil || o.State != store.OutcomeSettled || o.Charge != 3*usd {
		t.Fatalf("Outcome = %+v, %v; want settled for 3 USD", o, err)
	}
	es, err := other.Charges(ctx, "acme", 10)
	if err != nil || len(es) != 3 || es[0].Kind != store.KindCharge || es[0].KeyID != "key_t" || es[1].Kind != store.KindRecovery {
		t.Fatalf("journal = %+v, %v; want credit, recovery, charge (with the hold's key)", es, err)
	}
}

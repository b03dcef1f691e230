package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/cutproxy"
	"github.com/modelrelay/modelrelay/store"
)

// TestHangingDatabaseBoundsEveryStep: a database that stops answering
// without closing its connections (a hung server, a network dropping
// packets) fails every step that ignores its caller's cancellation —
// Release, a Settle without its account, RefundJob — as unavailable within
// the op timeout, instead of holding its goroutine and a pool connection
// until TCP gives up. Once the database answers again, the step goes
// through.
func TestHangingDatabaseBoundsEveryStep(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	other := openStore(t, dsn, Options{Owner: "other", RenewEvery: -1})
	if _, err := other.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := cutproxy.Start(t, u.Host)
	u.Host = p.Addr()
	s := openStore(t, u.String(), Options{Owner: "hung", StatementTimeout: 100 * time.Millisecond, RenewEvery: -1})
	// Connections that lost bytes to the stall are out of step with the
	// server (which may wait for the rest of a message forever): cut them
	// before s closes its pool, which would wait 15 s for each to say goodbye.
	t.Cleanup(p.Cut)
	for _, id := range []string{"released", "settled"} {
		if err := s.Hold(ctx, hold("acme", id, usd)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutJob(ctx, store.Job{RequestID: "job", Account: "acme", Amount: usd, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}

	p.Stall()
	steps := map[string]func(context.Context) error{
		"Release": func(ctx context.Context) error { return s.Release(ctx, "released", "done") },
		"Settle": func(ctx context.Context) error {
			_, err := s.Settle(ctx, store.Settlement{RequestID: "settled", Charge: usd / 2})
			return err
		},
		"RefundJob": func(ctx context.Context) error {
			_, err := s.RefundJob(ctx, "job", "failed")
			return err
		},
	}
	errc := make(chan error, len(steps))
	start := time.Now()
	for name, step := range steps {
		go func() {
			// The caller's context is cancelled at once: the step
			// ignores that, but not its own bound.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := step(cctx); !errors.Is(err, store.ErrUnavailable) {
				errc <- fmt.Errorf("%s against a hung database: %v, want ErrUnavailable", name, err)
				return
			}
			errc <- nil
		}()
	}
	for range steps {
		select {
		case err := <-errc:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(s.opTimeout + 10*time.Second):
			t.Fatalf("a step still waits %v after the database hung (op timeout %v)", time.Since(start), s.opTimeout)
		}
	}
	t.Logf("every step failed as unavailable within %v (op timeout %v)", time.Since(start), s.opTimeout)
	p.Unstall()
	start = time.Now()

	// The database answers again: the steps land, each once.
	for name, step := range steps {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := step(ctx)
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("%s once the database answers: %v", name, err)
			}
		}
	}
	t.Logf("every step landed %v after the database answered again", time.Since(start))
	r := audit(t, other, "acme")
	if want := 10*usd - usd/2 + usd; r.Account.Balance != want || r.Account.Held != 0 || r.OpenHolds != 0 {
		t.Fatalf("books after the hang: %+v, want balance %d", r, want)
	}
}

// TestSettleRetriesADeadlock: a settle that PostgreSQL aborts as one side
// of a deadlock (here with a transaction that locks the account, then the
// hold, the other way round from a settle) is sent again — the abort rolled
// it back whole — and charges once.
func TestSettleRetriesADeadlock(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := openStore(t, dsn, Options{Owner: "d", RenewEvery: -1})
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, hold("acme", "x", usd)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The settle's side waits the default 1 s before it checks for a
	// deadlock, this side 30 s: the settle is the one aborted.
	for _, sql := range []string{`SET LOCAL deadlock_timeout = '30s'`, `SELECT 1 FROM accounts WHERE id = 'acme' FOR UPDATE`} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		e   store.Entry
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := s.Settle(ctx, store.Settlement{RequestID: "x", Account: "acme", Charge: usd / 2})
		done <- result{e, err}
	}()
	waitForLockWaiters(t, s, 1)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM holds WHERE request_id = 'x' FOR UPDATE`); err != nil {
		t.Fatalf("the other side of the deadlock was aborted, not the settle: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.e.Amount != -usd/2 {
		t.Fatalf("Settle aborted by a deadlock = %+v, %v; want it sent again and charged", r.e, r.err)
	}
	if a := audit(t, s, "acme"); a.Account.Balance != 10*usd-usd/2 || a.Account.Held != 0 {
		t.Fatalf("books after the deadlock: %+v", a)
	}
}

// waitForLockWaiters waits until n of the database's sessions wait for a
// lock.
func waitForLockWaiters(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock, want %d", waiting, n)
		}
	}
}

// TestPingBesideABusyPool: readiness asks the database on a connection of
// its own, so a replica whose pool is all taken by calls is still ready;
// a database that is gone is not, and one that is back is again.
func TestPingBesideABusyPool(t *testing.T) {
	dsn := freshDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := cutproxy.Start(t, u.Host)
	u.Host = p.Addr()
	s := openStore(t, u.String(), Options{MaxConns: 1, RenewEvery: -1})
	t.Cleanup(p.Cut)
	c, err := s.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return s.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("Ping with the pool's one connection taken: %v", err)
	}
	p.Cut()
	if err := ping(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping of a database that is gone: %v, want ErrUnavailable", err)
	}
	p.Restore(t)
	if err := ping(); err != nil {
		t.Fatalf("Ping once the database is back: %v", err)
	}
	// The database restarts between two probes: the kept connection is
	// broken, the server is back, and the probe says so at once.
	p.Cut()
	p.Restore(t)
	if err := ping(); err != nil {
		t.Fatalf("Ping after the database restarted between probes: %v", err)
	}
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const cent = usd / 100

// mustCreateKey creates a key with id on account and returns it as stored.
func mustCreateKey(t *testing.T, s *Store, k store.Key) store.Key {
	t.Helper()
	k.Hash, k.Route = store.HashKey("secret-"+k.ID), store.AutoRoute
	if err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return keyOf(t, s, k.ID)
}

// keyOf reads the key with id.
func keyOf(t *testing.T, s *Store, id string) store.Key {
	t.Helper()
	k, err := s.KeyByHash(context.Background(), store.HashKey("secret-"+id))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPeriodStartInSQL: relay_period_start, which Hold rolls a key's period
// by, is store.PeriodStart: UTC days, weeks from Monday, months — across
// week, month, year and leap-day edges, and for times given in another
// zone.
func TestPeriodStartInSQL(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	tokyo := time.FixedZone("JST", 9*3600)
	var times []time.Time
	for _, base := range []time.Time{
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), // a Sunday, first of a month
		time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), // a Monday
		time.Date(2025, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), // a leap day
		time.Date(2026, 11, 27, 3, 0, 0, 0, tokyo),    // the day before, in UTC
	} {
		for h := -30; h <= 30; h += 7 {
			times = append(times, base.Add(time.Duration(h)*time.Hour), base.Add(time.Duration(h)*time.Hour-time.Microsecond))
		}
	}
	for _, reset := range []string{store.ResetDaily, store.ResetWeekly, store.ResetMonthly} {
		for _, at := range times {
			var got time.Time
			if err := s.pool.QueryRow(ctx, `SELECT relay_period_start($1, $2)`, reset, at).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := store.PeriodStart(reset, at); !got.Equal(want) {
				t.Errorf("%s period of %v: %v in SQL, %v in Go", reset, at, got.UTC(), want)
			}
		}
	}
	var none *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT relay_period_start('', now())`).Scan(&none); err != nil || none != nil {
		t.Errorf("no reset: %v, %v; want NULL", none, err)
	}
}

// TestKeyLimitThreeReplicas: 200 callers over three replicas (three pools
// on one database) call with a key limited to 0.10 USD a month, on an
// account with plenty: each holds 1 cent and settles at once, some above
// the hold, some below, some not at all (released), while the operator
// changes the key's label. The key never spends more than its limit plus
// the overruns, its spend is exactly the charges, nothing stays held, the
// audit is clean and no statement deadlocked. Next month it spends again.
func TestKeyLimitThreeReplicas(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	before := deadlocks(t, dsn)
	var replicas [3]*Store
	for i := range replicas {
		replicas[i] = openStore(t, dsn, Options{Owner: fmt.Sprint("r", i), MaxConns: 8, RenewEvery: -1})
	}
	s := replicas[0]
	if _, err := s.Credit(ctx, "acme", 100*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, s, store.Key{ID: "key_l", Account: "acme", Limit: 10 * cent, Reset: store.ResetMonthly})
	const callers = 200
	var (
		wg    sync.WaitGroup
		tally keyLimitTally
		start = make(chan struct{})
		stop  = make(chan struct{})
	)
	relabelled := make(chan struct{})
	go func() { // the operator, meanwhile
		defer close(relabelled)
		relabel(t, replicas[:], "key_l", stop)
	}()
	for i := range callers {
		wg.Go(func() {
			<-start
			tally.call(t, replicas[i%3], i)
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	// Else it may still be updating when the replicas close.
	<-relabelled
	if tally.admitted.Load()+tally.refused.Load() != callers || tally.admitted.Load() < 9 { // nine holds of 1 cent always fit, whatever overran
		t.Fatalf("admitted %d, refused %d of %d", tally.admitted.Load(), tally.refused.Load(), callers)
	}
	charged := pricing.Nano(tally.charged.Load())
	k := keyOf(t, replicas[1], "key_l")
	if k.Spent != charged || k.Held != 0 {
		t.Errorf("key spent %s, held %s; the charges were %s", k.Spent, k.Held, charged)
	}
	if bound := 10*cent + pricing.Nano(tally.overran.Load())*limitOverrun; k.Spent > bound {
		t.Errorf("the key spent %s, above its limit plus the overruns (%s)", k.Spent, bound)
	}
	r := audit(t, replicas[2], "acme")
	if r.Account.Held != 0 || r.Charges != charged {
		t.Errorf("books %+v, charged %d", r, charged)
	}
	// April: a new period, from nothing.
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if err := replicas[2].Hold(ctx, store.Hold{RequestID: "req_april", Account: "acme", KeyID: "key_l", Amount: 10 * cent, Created: april}); err != nil {
		t.Fatalf("a hold in the next period: %v", err)
	}
	if k := keyOf(t, s, "key_l"); k.Spent != 0 || k.Held != 10*cent || !k.PeriodStart.Equal(april) {
		t.Errorf("after the roll: %+v", k)
	}
	// A deadlock's victim counts it when it flushes its statistics, at
	// the latest when its session ends.
	for _, r := range replicas {
		_ = r.Close()
	}
	if n := deadlocks(t, dsn) - before; n != 0 {
		t.Errorf("%d deadlocks", n)
	}
}

// limitOverrun is what a keyLimitTally call that overruns charges above its
// 1 cent hold.
const limitOverrun = 1234

// keyLimitTally counts what keyLimitTally.call's callers met.
type keyLimitTally struct {
	admitted, refused, overran atomic.Int64
	charged                    atomic.Int64 // nano-USD
}

// call is caller i: it holds 1 cent on key_l of acme in March 2026 and, if
// admitted, settles above the hold (i%3 == 0), below it (1) or releases it
// (2). A refusal is counted only if it is the key's limit with the right
// numbers; anything else fails the test.
func (c *keyLimitTally) call(t *testing.T, r *Store, i int) {
	ctx := context.Background()
	march := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	id := fmt.Sprint("req_", i)
	h := store.Hold{RequestID: id, Account: "acme", KeyID: "key_l", Model: "m", Endpoint: pricing.EndpointChat, Amount: cent, Created: march}
	err := r.Hold(ctx, h)
	var ie *store.InsufficientError
	switch {
	case err == nil:
		c.admitted.Add(1)
	case errors.As(err, &ie) && ie.Limit == store.LimitKey && ie.Needed == cent && ie.Available >= 0 && ie.Available < cent:
		c.refused.Add(1)
		return
	default:
		t.Errorf("Hold %s: %v", id, err)
		return
	}
	var charge pricing.Nano
	switch i % 3 {
	case 0:
		charge = cent + limitOverrun
		c.overran.Add(1)
	case 1:
		charge = cent / 3
	default:
		if err := r.Release(ctx, id, "upstream 500"); err != nil {
			t.Error(err)
		}
		return
	}
	if _, err := r.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: charge}); err != nil {
		t.Error(err)
		return
	}
	c.charged.Add(int64(charge))
}

// relabel changes the key's label, round the replicas, until stop closes.
func relabel(t *testing.T, replicas []*Store, keyID string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		label := fmt.Sprint("label ", i)
		if _, err := replicas[i%len(replicas)].UpdateKey(context.Background(), keyID, store.KeyUpdate{Label: &label}); err != nil {
			t.Error(err)
			return
		}
	}
}

// deadlocks is the number of deadlocks the database has seen, once every
// other session on it has ended.
func deadlocks(t *testing.T, dsn string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var others int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d other sessions stayed on the database", others)
		}
	}
	var n int64
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeyOfAnotherAccount: a hold whose key belongs to another account is
// not counted on that key (the key limits nothing), and its end leaves the
// key alone.
func TestKeyOfAnotherAccount(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	for _, a := range []string{"acme", "beta"} {
		if _, err := s.Credit(ctx, a, 10*usd, "c"); err != nil {
			t.Fatal(err)
		}
	}
	mustCreateKey(t, s, store.Key{ID: "key_a", Account: "acme", Limit: cent})
	for _, id := range []string{"req_1", "req_2"} {
		if err := s.Hold(ctx, store.Hold{RequestID: id, Account: "beta", KeyID: "key_a", Amount: usd}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "beta", Charge: usd}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "req_2", "x"); err != nil {
		t.Fatal(err)
	}
	if k := keyOf(t, s, "key_a"); k.Spent != 0 || k.Held != 0 {
		t.Errorf("key of acme after beta's calls: %+v", k)
	}
	audit(t, s, "acme")
	audit(t, s, "beta")
}

// TestHoldFromBeforeKeyLimits: a hold taken before migration 0003 (not
// counted on its key) ends without touching the key: settled, released or
// swept.
func TestHoldFromBeforeKeyLimits(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, s, store.Key{ID: "key_t", Account: "acme", Limit: 5 * usd})
	for _, id := range []string{"old_1", "old_2", "old_3"} {
		if err := s.Hold(ctx, hold("acme", id, usd)); err != nil {
			t.Fatal(err)
		}
	}
	// As an older build left them.
	exec(t, s.dsn, `UPDATE holds SET keyed = false`)
	exec(t, s.dsn, `UPDATE keys SET held = 0`)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "old_1", Account: "acme", Charge: 30 * cent}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "old_2", "x"); err != nil {
		t.Fatal(err)
	}
	exec(t, s.dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep: %d, %v", n, err)
	}
	if k := keyOf(t, s, "key_t"); k.Spent != 0 || k.Held != 0 {
		t.Errorf("key after the old holds ended: %+v", k)
	}
	audit(t, s, "acme")
}

// TestGenerationOfRecoveredCall: a call whose hold a sweep released reads
// back as recovered, with its model and key from the recovery entry, and
// uncharged.
func TestGenerationOfRecoveredCall(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, hold("acme", "req_r", usd)); err != nil {
		t.Fatal(err)
	}
	exec(t, s.dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep: %d, %v", n, err)
	}
	g, err := s.Generation(ctx, "acme", "req_r")
	if err != nil || g.State != store.OutcomeRecovered || g.Model != "m" || g.KeyID != "key_t" || g.Charge != 0 ||
		g.HoldAmount != usd || g.Estimated {
		t.Errorf("Generation of a recovered call: %+v, %v", g, err)
	}
}

// TestKeyRefusesUnderItsLock: a hold that the key's committed spend admits
// when its statement begins, but whose room another hold takes while it
// waits for the account's row, is refused by the key's newest row: the
// account's reservation goes back, and the refusal says what remains.
func TestKeyRefusesUnderItsLock(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, s, store.Key{ID: "key_l", Account: "acme", Limit: 10 * cent})
	// Another replica's hold, in a transaction left open on the account's
	// row, as its statement would run.
	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	for _, q := range []string{
		`UPDATE accounts SET held = held + $1 WHERE id = 'acme'`,
		`UPDATE keys SET held = held + $1 WHERE id = 'key_l'`,
		`INSERT INTO holds (request_id, account, key_id, amount, created, owner, lease_until, keyed)
		 VALUES ('req_other', 'acme', 'key_l', $1, now(), 'other', now() + interval '1 minute', true)`,
	} {
		if _, err := other.Exec(ctx, q, int64(9*cent)); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		errc <- s.Hold(ctx, store.Hold{RequestID: "req_mine", Account: "acme", KeyID: "key_l", Amount: 5 * cent})
	}()
	// Once the hold waits for the account's row, the other commits.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%relay_hold%' AND datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold never waited for the account's row")
		}
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var ie *store.InsufficientError
	if err := <-errc; !errors.As(err, &ie) || ie.Limit != store.LimitKey || ie.Available != cent || ie.Needed != 5*cent {
		t.Fatalf("Hold: %v, want the key's refusal with 1 cent remaining", err)
	}
	r := audit(t, s, "acme")
	if r.Account.Held != 9*cent || r.OpenHolds != 1 {
		t.Errorf("books %+v: want only the other hold's 9 cents held", r)
	}
	if k := keyOf(t, s, "key_l"); k.Held != 9*cent {
		t.Errorf("key %+v", k)
	}
}

// TestRefusalWaitsForNothing: a hold that the committed books refuse, by
// the account's credit or by the key's spend, is answered at once, even
// while another transaction holds the account's row: it writes nothing,
// so a client that keeps calling on a spent key or an empty account never
// queues behind the calls that pass.
func TestRefusalWaitsForNothing(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", usd, "c"); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, s, store.Key{ID: "key_l", Account: "acme", Limit: 10 * cent})
	if err := s.Hold(ctx, store.Hold{RequestID: "req_0", Account: "acme", KeyID: "key_l", Amount: 10 * cent}); err != nil {
		t.Fatal(err)
	}
	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `SELECT 1 FROM accounts WHERE id = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var ie *store.InsufficientError
	err = s.Hold(short, store.Hold{RequestID: "req_key", Account: "acme", KeyID: "key_l", Amount: 1})
	if !errors.As(err, &ie) || ie.Limit != store.LimitKey || ie.Available != 0 {
		t.Errorf("a hold on a spent key: %v", err)
	}
	err = s.Hold(short, store.Hold{RequestID: "req_acct", Account: "acme", Amount: usd})
	if !errors.As(err, &ie) || ie.Limit != store.LimitAccount || ie.Available != 90*cent {
		t.Errorf("a hold above the account's credit: %v", err)
	}
}

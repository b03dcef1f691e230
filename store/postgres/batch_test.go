package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// queueBatch makes lane l look busy (a batch in flight), starts each of
// ops (all of l) in its own goroutine in order, waiting until each is
// queued, and returns a function that sends the queue as one batch and
// waits for every op's result.
func queueBatch(t *testing.T, s *Store, account string, ops ...func() error) func() []error {
	t.Helper()
	s.batch.mu.Lock()
	s.batch.lanes[account] = &lane{running: true}
	s.batch.mu.Unlock()
	errs := make([]chan error, len(ops))
	for i, op := range ops {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- op() }()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.batch.mu.Lock()
			n := len(s.batch.lanes[account].queued)
			s.batch.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("op %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return func() []error {
		s.drain(account, s.nextBatch(account, nil))
		out := make([]error, len(errs))
		for i, c := range errs {
			out[i] = <-c
		}
		return out
	}
}

// TestBatchAdmitsInArrivalOrder: holds sent together are checked in the
// order they came, each against what the ones before it left, as one by one;
// settles sent together end each hold once.
func TestBatchAdmitsInArrivalOrder(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 3*usd, "c"); err != nil {
		t.Fatal(err)
	}
	send := queueBatch(t, s, "acme",
		func() error { return s.Hold(ctx, hold("acme", "req_a", 2*usd)) },
		func() error { return s.Hold(ctx, hold("acme", "req_b", 2*usd)) },
		func() error { return s.Hold(ctx, hold("acme", "req_c", usd)) },
	)
	errs := send()
	var ie *store.InsufficientError
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want req_a and req_c held", errs)
	}
	if !errors.As(errs[1], &ie) || ie.Needed != 2*usd || ie.Available != usd || ie.Limit != store.LimitAccount {
		t.Fatalf("req_b: %v, want the account's refusal needing 2 USD with the 1 USD req_a left", errs[1])
	}
	send = queueBatch(t, s, "acme",
		func() error {
			_, err := s.Settle(ctx, store.Settlement{RequestID: "req_a", Account: "acme", Charge: usd / 2})
			return err
		},
		func() error {
			_, err := s.Settle(ctx, store.Settlement{RequestID: "req_a", Account: "acme", Charge: usd / 2})
			return err
		},
		func() error {
			_, err := s.Settle(ctx, store.Settlement{RequestID: "req_never", Account: "acme", Charge: usd})
			return err
		},
	)
	errs = send()
	if errs[0] != nil || !errors.Is(errs[1], store.ErrAlreadySettled) || !errors.Is(errs[2], store.ErrNoHold) {
		t.Fatalf("settles: %v, want nil, ErrAlreadySettled, ErrNoHold", errs)
	}
	a, err := s.Balance(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*usd - usd/2; a.Balance != want || a.Held != usd {
		t.Fatalf("balance %d held %d, want %d and %d", a.Balance, a.Held, want, usd)
	}
	audit(t, s, "acme")
}

// TestBatchFallsBackOneByOne: a statement that fails rolls the whole batch
// back, and its operations run again alone: the duplicate request id gets
// ErrExists, every other operation its own answer, and nothing is lost or
// counted twice.
func TestBatchFallsBackOneByOne(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, hold("acme", "req_old", usd)); err != nil {
		t.Fatal(err)
	}
	send := queueBatch(t, s, "acme",
		func() error { return s.Hold(ctx, hold("acme", "req_a", usd)) },
		func() error { return s.Hold(ctx, hold("acme", "req_old", usd)) }, // open already: a unique violation
		func() error { return s.Hold(ctx, hold("acme", "req_a", usd)) },   // the same again
		func() error { return s.Hold(ctx, hold("acme", "req_b", usd)) },
	)
	errs := send()
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("errors %v: want req_a and req_b held", errs)
	}
	if !errors.Is(errs[1], store.ErrExists) || !errors.Is(errs[2], store.ErrExists) {
		t.Fatalf("duplicate holds: %v, %v, want ErrExists", errs[1], errs[2])
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_old", Account: "acme", Charge: 3 * usd, Usage: pricing.Usage{InputTokens: 7}}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Balance(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.Balance != 7*usd || a.Held != 2*usd {
		t.Fatalf("balance %d held %d, want 7 USD and 2 USD", a.Balance, a.Held)
	}
	audit(t, s, "acme")
}

// TestBatchCancelWhileQueued: a Hold whose context ends while it waits for
// the batch in flight is taken out of the queue and never sent.
func TestBatchCancelWhileQueued(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	send := queueBatch(t, s, "acme",
		func() error { return s.Hold(cctx, hold("acme", "req_gone", usd)) },
		func() error { return s.Hold(ctx, hold("acme", "req_kept", usd)) },
	)
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.batch.mu.Lock()
		n := len(s.batch.lanes["acme"].queued)
		s.batch.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled hold stayed queued")
		}
	}
	errs := send()
	if !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("cancelled hold: %v, want context.Canceled", errs[0])
	}
	if errs[1] != nil {
		t.Fatal(errs[1])
	}
	if _, err := s.Outcome(ctx, "req_gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancelled hold's outcome: %v, want none", err)
	}
	if total, err := s.HeldTotal(ctx, "acme"); err != nil || total != usd {
		t.Fatalf("held %d (%v), want only req_kept's 1 USD", total, err)
	}
	if ids := s.liveIDs(); len(ids) != 1 || ids[0] != "req_kept" {
		t.Fatalf("renewing %v, want [req_kept]", ids)
	}
}

// TestSettleLingersOnlyWithCompany: a settle waits for others to share its
// commit only while other calls of its account run on this replica, and the
// account's next hold takes it along at once; alone, it goes at once.
func TestSettleLingersOnlyWithCompany(t *testing.T) {
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1, SettleLinger: time.Hour})
	ctx := context.Background()
	if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	settle := func(id string) chan error {
		c := make(chan error, 1)
		go func() {
			_, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: usd / 10})
			c <- err
		}()
		return c
	}
	for _, id := range []string{"req_a", "req_b"} {
		if err := s.Hold(ctx, hold("acme", id, usd)); err != nil {
			t.Fatal(err)
		}
	}
	done := settle("req_a") // req_b still runs: req_a lingers
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.batch.mu.Lock()
		n := 0
		if l := s.batch.lanes["acme"]; l != nil {
			n = len(l.queued)
		}
		s.batch.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the settle with company did not wait in its lane")
		}
	}
	// The next hold of the account takes the lingering settle along at
	// once (the linger is an hour).
	if err := s.Hold(ctx, hold("acme", "req_c", usd)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hold did not take the lingering settle along")
	}
	if err := s.Release(ctx, "req_c", "test"); err != nil {
		t.Fatal(err)
	}
	select { // req_b is alone now
	case err := <-settle("req_b"):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a settle with no company lingered")
	}
	audit(t, s, "acme")
}

// TestBatchSettlesAsOneByOne: a batch sends its settles first, as one
// statement (settlesSQL) while no request id comes twice, then its holds,
// and leaves exactly the books the same operations leave one at a time in
// that order: the same answers, charge entries (sequence numbers and
// running balances included), outcomes, balances and key spend, for
// settles above, below and at their hold, on two keys and none, beside a
// replay, a request id never held and holds that arrived between them.
func TestBatchSettlesAsOneByOne(t *testing.T) {
	ctx := context.Background()
	type op struct {
		settle bool
		run    func() error
	}
	settle := func(s *Store, id string, charge pricing.Nano) op {
		return op{true, func() error {
			_, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: charge,
				Usage: pricing.Usage{InputTokens: int64(charge / cent), OutputTokens: 3}, Note: "note " + id})
			return err
		}}
	}
	holdOn := func(s *Store, id, key string, amount pricing.Nano) op {
		return op{false, func() error {
			return s.Hold(ctx, store.Hold{RequestID: id, Account: "acme", KeyID: key, Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Amount: amount})
		}}
	}
	// setup funds s, opens five holds and returns the batch's operations
	// in their order of arrival.
	setup := func(s *Store) []op {
		if _, err := s.Credit(ctx, "acme", 10*usd, "c"); err != nil {
			t.Fatal(err)
		}
		mustCreateKey(t, s, store.Key{ID: "key_a", Account: "acme"})
		mustCreateKey(t, s, store.Key{ID: "key_b", Account: "acme", Limit: 10 * usd})
		for i, id := range []string{"req_1", "req_2", "req_3", "req_4", "req_5"} {
			if err := holdOn(s, id, []string{"key_a", "key_b", "", "key_a", "key_b"}[i], usd).run(); err != nil {
				t.Fatal(err)
			}
		}
		return []op{
			holdOn(s, "req_6", "key_b", 4*usd), // arrived before the settles, checked after them: refused
			settle(s, "req_1", 3*usd),          // above its hold
			settle(s, "req_2", usd/3),          // below
			settle(s, "req_3", usd),            // at, on no key
			holdOn(s, "req_7", "key_a", usd),
			settle(s, "req_never", usd), // no hold: ErrNoHold
			settle(s, "req_2", usd),     // a replay in the same batch: ErrAlreadySettled
			settle(s, "req_4", 0),       // free
			settle(s, "req_5", 7*usd/4),
			holdOn(s, "req_8", "", 3*usd), // more than the settles' 6.08 USD and req_7 leave
		}
	}
	batched := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ops := setup(batched)
	runs := make([]func() error, len(ops))
	for i, o := range ops {
		runs[i] = o.run
	}
	errsBatched := queueBatch(t, batched, "acme", runs...)()

	alone := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	ops = setup(alone)
	errsAlone := make([]error, len(ops))
	for _, settles := range []bool{true, false} {
		for i, o := range ops {
			if o.settle == settles {
				errsAlone[i] = o.run()
			}
		}
	}
	for i := range errsAlone {
		if fmt.Sprint(errsAlone[i]) != fmt.Sprint(errsBatched[i]) {
			t.Fatalf("op %d: batched %v, alone %v", i, errsBatched[i], errsAlone[i])
		}
	}
	var ie *store.InsufficientError
	var ie6 *store.InsufficientError
	if !errors.As(errsBatched[0], &ie6) || errsBatched[4] != nil || !errors.Is(errsBatched[5], store.ErrNoHold) || !errors.Is(errsBatched[6], store.ErrAlreadySettled) || !errors.As(errsBatched[9], &ie) {
		t.Fatalf("batched: %v", errsBatched)
	}
	for _, s := range []*Store{batched, alone} { // the hold taken ends the same way
		for _, o := range []op{settle(s, "req_7", usd/2)} {
			if err := o.run(); err != nil {
				t.Fatal(err)
			}
		}
	}
	books := func(s *Store) (out []string) {
		err := s.Journal(ctx, "acme", time.Time{}, time.Now().Add(time.Hour), func(e store.Entry) error {
			out = append(out, fmt.Sprintf("%d %s %s %s %d %d %d %+v %q", e.Seq, e.Kind, e.RequestID, e.KeyID, e.HoldAmount, e.Amount, e.BalanceAfter, e.Usage, e.Note))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Balance(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("balance %d held %d", a.Balance, a.Held))
		for _, id := range []string{"key_a", "key_b"} {
			k := keyOf(t, s, id)
			out = append(out, fmt.Sprintf("%s spent %d held %d", id, k.Spent, k.Held))
		}
		rows, err := s.pool.Query(ctx, `SELECT request_id, state, hold_amount, charge, seq, reason FROM outcomes ORDER BY request_id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, state, reason string
			var hold, charge, seq int64
			if err := rows.Scan(&id, &state, &hold, &charge, &seq, &reason); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("outcome %s %s %d %d %d %q", id, state, hold, charge, seq, reason))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := books(batched), books(alone)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("batched books:\n%s\none at a time:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(want) < 16 {
		t.Fatalf("books too short to compare: %q", want)
	}
	audit(t, batched, "acme")
}

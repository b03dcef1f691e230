package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

// Two hundred concurrent holds of 1 USD against 5 USD: exactly five are
// admitted, none fails for any other reason, and after settling them the
// balance is exactly the credits plus the journal.
func TestConcurrentHoldsOneAccount(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	const (
		callers = 200
		credits = 5 * usd
		each    = 1 * usd
	)
	credit(t, b, "acme", credits)
	ids, refused := raceHolds(t, b, callers, each)
	if len(ids) != int(credits/each) || refused != callers-len(ids) {
		t.Fatalf("%d admitted and %d refused, want %d and %d", len(ids), refused, credits/each, callers-credits/each)
	}
	if a := balance(t, b, "acme"); a.Held != credits || a.Available() != 0 {
		t.Fatalf("after the holds: %+v, want all credit held", a)
	}
	charged := settleConcurrently(t, b, ids)
	checkBooksAddUp(t, b, credits, charged)
}

// raceHolds has callers goroutines hold each against acme at once, and
// returns the request ids admitted and how many were refused as
// insufficient. Any other failure, or an insufficient error with the wrong
// numbers, fails the test.
func raceHolds(t *testing.T, b *Store, callers int, each pricing.Nano) (admittedIDs []string, refusedCount int) {
	t.Helper()
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		admitted = make(chan string, callers)
		refused  atomic.Int64
		failures = make(chan error, callers)
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id := fmt.Sprintf("req_%03d", i)
			err := b.Hold(context.Background(), store.Hold{RequestID: id, Account: "acme", Model: "m", Amount: each})
			var ie *store.InsufficientError
			switch {
			case err == nil:
				admitted <- id
			case errors.As(err, &ie):
				if ie.Needed != each || ie.Available < 0 || ie.Available >= each {
					failures <- fmt.Errorf("%s: insufficient with wrong numbers %+v", id, *ie)
				}
				refused.Add(1)
			default:
				failures <- fmt.Errorf("%s: %w", id, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(admitted)
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	for id := range admitted {
		admittedIDs = append(admittedIDs, id)
	}
	return admittedIDs, int(refused.Load())
}

// settleConcurrently settles the holds all at once at different charges
// (0.3 … 1.5 USD: the last overruns its 1 USD hold) and returns the total
// charged.
func settleConcurrently(t *testing.T, b *Store, ids []string) pricing.Nano {
	t.Helper()
	var wg sync.WaitGroup
	var charged atomic.Int64
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			charge := pricing.Nano(i+1) * 300_000_000
			if _, err := b.Settle(context.Background(), store.Settlement{RequestID: id, Charge: charge}); err != nil {
				t.Errorf("Settle %s: %v", id, err)
				return
			}
			charged.Add(int64(charge))
		}()
	}
	wg.Wait()
	return pricing.Nano(charged.Load())
}

// checkBooksAddUp wants acme's balance to be exactly the credits less the
// charges, by Audit and by the journal as the API lists it, and no hold
// left open.
func checkBooksAddUp(t *testing.T, b *Store, credits, charged pricing.Nano) {
	t.Helper()
	ctx := context.Background()
	r := audit(t, b, "acme")
	if want := credits - charged; r.Account.Balance != want {
		t.Errorf("balance %d, want credits − charges = %d", r.Account.Balance, want)
	}
	if r.Credits != credits || r.Charges != charged {
		t.Errorf("audit %+v does not add up", r)
	}
	entries, err := b.Charges(ctx, "acme", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var credited, others pricing.Nano
	for _, e := range entries {
		if e.Kind == store.KindCredit {
			credited += e.Amount
		} else {
			others += e.Amount
		}
	}
	if credited != credits || r.Account.Balance != credited+others {
		t.Errorf("balance %d, want credits %d + other journal amounts %d", r.Account.Balance, credited, others)
	}
	if r.OpenHolds != 0 || r.Account.Held != 0 {
		t.Errorf("%d holds (%d held) still open", r.OpenHolds, r.Account.Held)
	}
	if holds, err := b.OpenHolds(ctx); err != nil || len(holds) != 0 {
		t.Errorf("OpenHolds: %d, %v", len(holds), err)
	}
}

// Many accounts, mixed operations, all at once: every account's books hold.
func TestConcurrentMixedAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	const accounts, perAccount = 8, 40
	for a := range accounts {
		credit(t, b, fmt.Sprintf("acct_%d", a), 20*usd)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for a := range accounts {
		for i := range perAccount {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				account := fmt.Sprintf("acct_%d", a)
				id := fmt.Sprintf("%s_req_%d", account, i)
				if err := b.Hold(ctx, store.Hold{RequestID: id, Account: account, Amount: usd}); err != nil {
					if !errors.Is(err, store.ErrInsufficient) {
						t.Errorf("Hold %s: %v", id, err)
					}
					return
				}
				var err error
				switch i % 3 {
				case 0:
					_, err = b.Settle(ctx, store.Settlement{RequestID: id, Charge: 400_000_000})
				case 1:
					err = b.Release(ctx, id, "failed")
				default:
					_, err = b.Credit(ctx, account, 1, "")
					if err == nil {
						_, err = b.Settle(ctx, store.Settlement{RequestID: id, Charge: usd + 1})
					}
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	for a := range accounts {
		r := audit(t, b, fmt.Sprintf("acct_%d", a))
		if r.OpenHolds != 0 {
			t.Errorf("acct_%d: %d holds open", a, r.OpenHolds)
		}
	}
	if total, err := b.HeldTotal(ctx, ""); err != nil || total != 0 {
		t.Errorf("HeldTotal: %d, %v", total, err)
	}
}

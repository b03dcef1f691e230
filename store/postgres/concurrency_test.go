package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// TestScarceCreditThreeReplicas: 500 goroutines spread over three replicas
// (three pools on one database) hold 1 USD each against 10 USD of credit:
// exactly 10 are admitted, the rest get *InsufficientError, and after every
// admitted call settles (some above their hold) the journal sums exactly to
// credits − charges.
func TestScarceCreditThreeReplicas(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	var replicas [3]*Store
	for i := range replicas {
		replicas[i] = openStore(t, dsn, Options{Owner: fmt.Sprint("r", i), MaxConns: 8, RenewEvery: -1})
	}
	if _, err := replicas[0].Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	const callers = 500
	var (
		wg                sync.WaitGroup
		admitted, refused atomic.Int64
		start             = make(chan struct{})
		charged           atomic.Int64
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := replicas[i%3]
			<-start
			id := fmt.Sprint("req_", i)
			err := s.Hold(ctx, hold("acme", id, usd))
			var ie *store.InsufficientError
			switch {
			case err == nil:
				admitted.Add(1)
				charge := usd - 1
				if i%2 == 0 {
					charge = usd + 7 // an overrun, taken in full
				}
				if _, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: charge}); err != nil {
					t.Error(err)
					return
				}
				charged.Add(int64(charge))
			case errors.As(err, &ie):
				refused.Add(1)
				if ie.Needed != usd || ie.Available >= usd {
					t.Errorf("refusal %+v: available covers the hold", ie)
				}
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	r := audit(t, replicas[1], "acme")
	if admitted.Load()+refused.Load() != callers {
		t.Fatalf("admitted %d + refused %d != %d", admitted.Load(), refused.Load(), callers)
	}
	if r.Charges != pricing.Nano(charged.Load()) || r.Account.Balance != 10*usd-pricing.Nano(charged.Load()) || r.Account.Held != 0 {
		t.Fatalf("books %+v, charged %d", r, charged.Load())
	}
	// Ten 1 USD holds fit in 10 USD; charges of usd−1 leave 10 nano-USD,
	// too little for an eleventh. Overruns of 7 nano-USD can make the tenth
	// refused (nine of them leave 1 USD − 63), never the ninth.
	if admitted.Load() < 9 || admitted.Load() > 10 {
		t.Fatalf("admitted %d against 10 USD of 1 USD holds, want 9 or 10", admitted.Load())
	}
	if r.Account.Balance < -(usd + 7) {
		t.Fatalf("balance %d: more than one call's overrun below zero", r.Account.Balance)
	}
}

// TestScarceCreditHoldsOnly: with no settles in between, 500 concurrent
// 1 USD holds over three replicas against 10 USD admit exactly 10.
func TestScarceCreditHoldsOnly(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	var replicas [3]*Store
	for i := range replicas {
		replicas[i] = openStore(t, dsn, Options{Owner: fmt.Sprint("r", i), MaxConns: 8, RenewEvery: -1})
	}
	if _, err := replicas[0].Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		admitted atomic.Int64
	)
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := replicas[i%3].Hold(ctx, hold("acme", fmt.Sprint("req_", i), usd))
			if err == nil {
				admitted.Add(1)
			} else if !errors.Is(err, store.ErrInsufficient) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 10 {
		t.Fatalf("admitted %d holds of 1 USD against 10 USD", admitted.Load())
	}
	r := audit(t, replicas[2], "acme")
	if r.Account.Held != 10*usd || r.OpenHolds != 10 {
		t.Fatalf("books %+v", r)
	}
}

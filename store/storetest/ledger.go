package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Credit creates the account, adds exactly the amount, journals it, and
// refuses an amount that is not positive.
func (k *kit) credit(t *testing.T, s Store) {
	if _, err := s.Balance(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Balance of an account never credited: %v, want ErrNotFound", err)
	}
	e := mustCredit(t, s, "acme", 3*usd)
	if e.Kind != store.KindCredit || e.Account != "acme" || e.Amount != 3*usd || e.BalanceAfter != 3*usd ||
		e.Note != "test credit" || e.Seq == 0 || e.Time.IsZero() {
		t.Errorf("first credit entry %+v", e)
	}
	e2 := mustCredit(t, s, "acme", 1)
	if e2.Amount != 1 || e2.BalanceAfter != 3*usd+1 || e2.Seq <= e.Seq {
		t.Errorf("second credit entry %+v after %+v", e2, e)
	}
	for _, amount := range []pricing.Nano{0, -1, -usd} {
		if _, err := s.Credit(ctx, "acme", amount, "bad"); err == nil {
			t.Errorf("Credit of %d succeeded", amount)
		}
	}
	wantAccount(t, s, "acme", 3*usd+1, 0)
	if a := mustBalance(t, s, "acme"); a.Created.IsZero() {
		t.Errorf("account without a creation time: %+v", a)
	}
	if entries := books(t, s, "acme"); len(entries) != 2 {
		t.Errorf("journal has %d entries, want 2: %+v", len(entries), entries)
	}
}

// CreateAccount creates an empty account once.
func (k *kit) createAccount(t *testing.T, s Store) {
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "acme" || a.Balance != 0 || a.Held != 0 || a.Created.IsZero() {
		t.Errorf("new account %+v", a)
	}
	_, err = s.CreateAccount(ctx, "acme")
	wantErr(t, "second CreateAccount", err, store.ErrExists)
	wantAccount(t, s, "acme", 0, 0)
	mustCredit(t, s, "beta", usd)
	_, err = s.CreateAccount(ctx, "beta")
	wantErr(t, "CreateAccount of a credited account", err, store.ErrExists)
	wantAccount(t, s, "beta", usd, 0)
	if entries, err := s.Charges(ctx, "acme", 0); err != nil || len(entries) != 0 {
		t.Errorf("journal of a new account: %+v, %v", entries, err)
	}
}

// Hold reserves credit without moving the balance, and refuses a request
// id that already has an open hold, and an unknown account.
func (k *kit) hold(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustHold(t, s, "acme", "req_1", 2*usd)
	mustHold(t, s, "acme", "req_2", 3*usd)
	wantAccount(t, s, "acme", 10*usd, 5*usd)
	if a := mustBalance(t, s, "acme"); a.Available() != 5*usd {
		t.Errorf("available %d, want 5 USD", a.Available())
	}
	err := s.Hold(ctx, holdOf("acme", "req_1", usd))
	wantErr(t, "Hold on a request id with an open hold", err, store.ErrExists)
	err = s.Hold(ctx, holdOf("nobody", "req_3", 1))
	wantErr(t, "Hold on an unknown account", err, store.ErrNotFound)
	if err := s.Hold(ctx, holdOf("acme", "req_neg", -1)); err == nil {
		t.Error("Hold of a negative amount succeeded")
	}
	mustHold(t, s, "acme", "req_zero", 0) // a zero hold on a positive balance is fine
	wantAccount(t, s, "acme", 10*usd, 5*usd)
	if entries := books(t, s, "acme"); len(entries) != 1 {
		t.Errorf("holds wrote journal entries: %+v", entries)
	}
}

// A hold the available credit cannot cover is refused with the numbers;
// a balance at or below zero refuses every hold, even a zero one.
func (k *kit) insufficient(t *testing.T, s Store) {
	insufficient := func(what string, h store.Hold, needed, available pricing.Nano) {
		t.Helper()
		err := s.Hold(ctx, h)
		var ie *store.InsufficientError
		if !errors.As(err, &ie) || !errors.Is(err, store.ErrInsufficient) {
			t.Errorf("%s: %v, want *InsufficientError wrapping ErrInsufficient", what, err)
			return
		}
		if ie.Needed != needed || ie.Available != available {
			t.Errorf("%s: needed %d, available %d; want %d and %d", what, ie.Needed, ie.Available, needed, available)
		}
	}
	if _, err := s.CreateAccount(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	insufficient("zero hold on a zero balance", holdOf("empty", "req_z", 0), 0, 0)
	insufficient("hold on a zero balance", holdOf("empty", "req_z1", 1), 1, 0)

	mustCredit(t, s, "acme", 5*usd)
	mustHold(t, s, "acme", "req_1", 3*usd)
	insufficient("hold above available", holdOf("acme", "req_2", 2*usd+1), 2*usd+1, 2*usd)
	mustHold(t, s, "acme", "req_2", 2*usd) // exactly the rest
	insufficient("hold with all credit held", holdOf("acme", "req_3", 1), 1, 0)
	wantAccount(t, s, "acme", 5*usd, 5*usd)
	// A refused request id is not taken: it can hold once there is credit.
	if err := s.Release(ctx, "req_1", "failed"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_3", 1)
	wantAccount(t, s, "acme", 5*usd, 2*usd+1)

	// Below zero (an overrun): every hold is refused, even a zero one.
	mustCredit(t, s, "debt", usd)
	mustHold(t, s, "debt", "req_d", usd)
	mustSettle(t, s, "req_d", 2*usd)
	insufficient("zero hold on a negative balance", holdOf("debt", "req_d2", 0), 0, -usd)
	insufficient("hold on a negative balance", holdOf("debt", "req_d3", 1), 1, -usd)
	wantAccount(t, s, "debt", -usd, 0)
}

// Settle charges once and releases the rest of the hold; a second Settle,
// or one after Release, is ErrAlreadySettled; a Settle without a hold
// ErrNoHold.
func (k *kit) settleOnce(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustHold(t, s, "acme", "req_1", 2*usd)
	mustHold(t, s, "acme", "req_2", usd)
	usage := pricing.Usage{InputTokens: 120, OutputTokens: 34}
	e, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Charge: 700_000_001, Usage: usage, Note: "kit note"})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Entry{Seq: e.Seq, Kind: store.KindCharge, RequestID: "req_1", Account: "acme", KeyID: "key_kit",
		Model: "kit-model", Route: "kit-route", Endpoint: pricing.EndpointChat, Usage: usage, HoldAmount: 2 * usd,
		Amount: -700_000_001, BalanceAfter: 10*usd - 700_000_001, Time: e.Time, Note: "kit note"}
	if fmt.Sprint(e) != fmt.Sprint(want) || e.Time.IsZero() {
		t.Errorf("charge entry\n got %+v\nwant %+v", e, want)
	}
	wantAccount(t, s, "acme", 10*usd-700_000_001, usd)

	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_1", Charge: 1})
	wantErr(t, "second Settle", err, store.ErrAlreadySettled)
	err = s.Release(ctx, "req_1", "late")
	wantErr(t, "Release after Settle", err, store.ErrAlreadySettled)
	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_none", Charge: 1})
	wantErr(t, "Settle without a hold", err, store.ErrNoHold)
	if err := s.Release(ctx, "req_2", "failed"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Settle(ctx, store.Settlement{RequestID: "req_2", Charge: 1})
	wantErr(t, "Settle after Release", err, store.ErrAlreadySettled)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_neg", Charge: -1}); err == nil {
		t.Error("Settle with a negative charge succeeded")
	}

	// A zero charge settles too, and journals a charge of 0.
	mustHold(t, s, "acme", "req_3", usd)
	if e := mustSettle(t, s, "req_3", 0); e.Amount != 0 || e.HoldAmount != usd {
		t.Errorf("zero charge entry %+v", e)
	}
	wantAccount(t, s, "acme", 10*usd-700_000_001, 0)
	if entries := books(t, s, "acme"); len(entries) != 3 {
		t.Errorf("journal has %d entries, want credit and two charges: %+v", len(entries), entries)
	}
}

// A Settlement naming its account settles as without it; naming another
// account is an error and charges nothing.
func (k *kit) settleAccount(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 5*usd)
	mustCredit(t, s, "beta", 5*usd)
	mustHold(t, s, "acme", "req_1", usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "beta", Charge: usd}); err == nil {
		t.Error("Settle naming the wrong account succeeded")
	}
	wantAccount(t, s, "beta", 5*usd, 0)
	wantAccount(t, s, "acme", 5*usd, usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "acme", Charge: usd / 2}); err != nil {
		t.Fatalf("Settle naming the hold's account: %v", err)
	}
	wantAccount(t, s, "acme", 5*usd-usd/2, 0)
	books(t, s, "acme")
	books(t, s, "beta")
}

// Release returns the hold's credit and charges nothing.
func (k *kit) release(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 4*usd)
	mustHold(t, s, "acme", "req_1", 3*usd)
	if err := s.Release(ctx, "req_1", "upstream failed"); err != nil {
		t.Fatal(err)
	}
	wantAccount(t, s, "acme", 4*usd, 0)
	err := s.Release(ctx, "req_1", "again")
	wantErr(t, "second Release", err, store.ErrAlreadySettled)
	err = s.Release(ctx, "req_none", "x")
	wantErr(t, "Release without a hold", err, store.ErrNoHold)
	mustHold(t, s, "acme", "req_2", 4*usd) // all the credit is back
	wantAccount(t, s, "acme", 4*usd, 4*usd)
	for _, e := range books(t, s, "acme") {
		if e.Kind == store.KindCharge {
			t.Errorf("a release charged: %+v", e)
		}
	}
}

// A charge above its hold is taken in full, even below zero.
func (k *kit) overrun(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 2*usd)
	mustHold(t, s, "acme", "req_1", usd)
	mustHold(t, s, "acme", "req_2", usd)
	if e := mustSettle(t, s, "req_1", 1_500_000_000); e.Amount != -1_500_000_000 || e.HoldAmount != usd || e.BalanceAfter != 500_000_000 {
		t.Errorf("overrun entry %+v", e)
	}
	wantAccount(t, s, "acme", 500_000_000, usd)
	if e := mustSettle(t, s, "req_2", 3*usd); e.Amount != -3*usd || e.BalanceAfter != -2_500_000_000 {
		t.Errorf("overrun below zero %+v", e)
	}
	wantAccount(t, s, "acme", -2_500_000_000, 0)
	books(t, s, "acme")
	// Credit brings it back above zero, and holds work again.
	mustCredit(t, s, "acme", 3*usd)
	mustHold(t, s, "acme", "req_3", 500_000_000)
	wantAccount(t, s, "acme", 500_000_000, 500_000_000)
}

// The journal lists an account's entries newest first, at most limit, and
// sums exactly to its balance; other accounts' entries are not in it.
func (k *kit) journal(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustCredit(t, s, "beta", 7*usd)
	var want []string // kinds and ids, oldest first
	want = append(want, "credit:")
	for i := range 12 {
		id := fmt.Sprintf("req_%02d", i)
		mustHold(t, s, "acme", id, usd)
		mustHold(t, s, "beta", "beta_"+id, usd)
		if i%4 == 3 {
			if err := s.Release(ctx, id, "failed"); err != nil {
				t.Fatal(err)
			}
		} else {
			mustSettle(t, s, id, pricing.Nano(i)*10_000_001+1)
			want = append(want, "charge:"+id)
		}
		mustSettle(t, s, "beta_"+id, 3)
		if i == 5 {
			mustCredit(t, s, "acme", 1)
			want = append(want, "credit:")
		}
	}
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 123}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RefundJob(ctx, "vid_1", "failed"); err != nil || !ok {
		t.Fatalf("RefundJob: %v, %v", ok, err)
	}
	want = append(want, "refund:vid_1")

	entries := books(t, s, "acme")
	if len(entries) != len(want) {
		t.Fatalf("journal has %d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		if got, w := e.Kind+":"+e.RequestID, want[len(want)-1-i]; got != w {
			t.Errorf("journal[%d] = %s, want %s (newest first)", i, got, w)
		}
	}
	top, err := s.Charges(ctx, "acme", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 3 || top[0].Seq != entries[0].Seq || top[2].Seq != entries[2].Seq {
		t.Errorf("Charges(limit 3): %+v, want the three newest", top)
	}
	if entries[0].BalanceAfter != mustBalance(t, s, "acme").Balance {
		t.Errorf("newest entry's balance after %d is not the balance", entries[0].BalanceAfter)
	}
	if beta := books(t, s, "beta"); len(beta) != 13 {
		t.Errorf("beta's journal has %d entries, want 13", len(beta))
	}
	_, err = s.Charges(ctx, "nobody", 10)
	wantErr(t, "Charges of an unknown account", err, store.ErrNotFound)
}

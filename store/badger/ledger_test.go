package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

func TestHoldSettleRelease(t *testing.T) {
	t.Parallel()
	usage := pricing.Usage{InputTokens: 1200, CacheReadTokens: 300, OutputTokens: 450}
	cases := []struct {
		name        string
		credit      pricing.Nano
		hold        pricing.Nano
		release     bool // Release instead of Settle
		charge      pricing.Nano
		wantBalance pricing.Nano
		wantKinds   []string // journal, newest first
	}{
		{name: "settle below hold", credit: 10 * usd, hold: 2 * usd, charge: 1_500_000_000,
			wantBalance: 8_500_000_000, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "settle exactly the hold", credit: 10 * usd, hold: 2 * usd, charge: 2 * usd,
			wantBalance: 8 * usd, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "settle zero charge", credit: 10 * usd, hold: 2 * usd, charge: 0,
			wantBalance: 10 * usd, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "settle above hold within balance", credit: 10 * usd, hold: 2 * usd, charge: 3 * usd,
			wantBalance: 7 * usd, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "overrun goes negative", credit: 1 * usd, hold: 1 * usd, charge: 1_500_000_000,
			wantBalance: -500_000_000, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "one nano", credit: 1, hold: 1, charge: 1,
			wantBalance: 0, wantKinds: []string{store.KindCharge, store.KindCredit}},
		{name: "release charges nothing", credit: 10 * usd, hold: 2 * usd, release: true,
			wantBalance: 10 * usd, wantKinds: []string{store.KindCredit}},
		{name: "zero hold released", credit: 10 * usd, hold: 0, release: true,
			wantBalance: 10 * usd, wantKinds: []string{store.KindCredit}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := openTemp(t)
			credit(t, b, "acme", tc.credit)
			hold(t, b, "acme", "req_1", tc.hold)
			if a := balance(t, b, "acme"); a.Held != tc.hold || a.Balance != tc.credit {
				t.Fatalf("after hold: balance %d held %d, want %d and %d", a.Balance, a.Held, tc.credit, tc.hold)
			}
			var wantOutcome store.Outcome
			if tc.release {
				if err := b.Release(ctx, "req_1", "upstream 503"); err != nil {
					t.Fatalf("Release: %v", err)
				}
				wantOutcome = store.Outcome{State: store.OutcomeReleased, Reason: "upstream 503"}
			} else {
				e, err := b.Settle(ctx, store.Settlement{RequestID: "req_1", Charge: tc.charge, Usage: usage, Note: "n"})
				if err != nil {
					t.Fatalf("Settle: %v", err)
				}
				want := store.Entry{Seq: 2, Kind: store.KindCharge, RequestID: "req_1", Account: "acme", KeyID: "key_test",
					Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Usage: usage, HoldAmount: tc.hold,
					Amount: -tc.charge, BalanceAfter: tc.wantBalance, Time: e.Time, Note: "n"}
				if e != want {
					t.Errorf("Settle entry:\n got %+v\nwant %+v", e, want)
				}
				if e.Time.IsZero() {
					t.Error("Settle entry has no time")
				}
				wantOutcome = store.Outcome{State: store.OutcomeSettled, Charge: tc.charge, Seq: 2, Reason: "n"}
			}
			a := balance(t, b, "acme")
			if a.Balance != tc.wantBalance || a.Held != 0 {
				t.Errorf("balance %d held %d, want %d and 0", a.Balance, a.Held, tc.wantBalance)
			}
			entries, err := b.Charges(ctx, "acme", 0)
			if err != nil {
				t.Fatalf("Charges: %v", err)
			}
			var kinds []string
			for _, e := range entries {
				kinds = append(kinds, e.Kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.wantKinds) {
				t.Errorf("journal kinds %v, want %v", kinds, tc.wantKinds)
			}
			o, err := b.Outcome(ctx, "req_1")
			if err != nil {
				t.Fatalf("Outcome: %v", err)
			}
			wantOutcome.RequestID, wantOutcome.Account, wantOutcome.HoldAmount = "req_1", "acme", tc.hold
			wantOutcome.Time = o.Time
			if wantOutcome.State != store.OutcomeSettled { // a settled call's journal entry is its record
				wantOutcome.Owner = b.Owner()
			}
			if o != wantOutcome {
				t.Errorf("Outcome:\n got %+v\nwant %+v", o, wantOutcome)
			}
			audit(t, b, "acme")
		})
	}
}

func TestSettleExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		first   func(b *Store) error
		second  func(b *Store) error
		wantErr error
	}{
		{"settle twice",
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			store.ErrAlreadySettled},
		{"settle after release",
			func(b *Store) error { return b.Release(ctx, "r", "failed") },
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			store.ErrAlreadySettled},
		{"release after settle",
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			func(b *Store) error { return b.Release(ctx, "r", "late") },
			store.ErrAlreadySettled},
		{"release twice",
			func(b *Store) error { return b.Release(ctx, "r", "failed") },
			func(b *Store) error { return b.Release(ctx, "r", "failed") },
			store.ErrAlreadySettled},
		{"hold again after settle", // Hold cannot see it; the settle can (TestHoldOnEndedRequestID)
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			func(b *Store) error {
				if err := b.Hold(ctx, store.Hold{RequestID: "r", Account: "acme", Amount: 1}); err != nil {
					return err
				}
				_, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 1})
				return err
			},
			store.ErrExists},
		{"hold again while open",
			func(b *Store) error { return nil },
			func(b *Store) error { return b.Hold(ctx, store.Hold{RequestID: "r", Account: "acme", Amount: 1}) },
			store.ErrExists},
		{"settle unknown",
			func(b *Store) error { return nil },
			func(b *Store) error {
				_, err := b.Settle(ctx, store.Settlement{RequestID: "other", Charge: 1})
				return err
			},
			store.ErrNoHold},
		{"release unknown",
			func(b *Store) error { return nil },
			func(b *Store) error { return b.Release(ctx, "other", "x") },
			store.ErrNoHold},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := openTemp(t)
			credit(t, b, "acme", 10*usd)
			hold(t, b, "acme", "r", usd)
			if err := tc.first(b); err != nil {
				t.Fatalf("first: %v", err)
			}
			before := balance(t, b, "acme")
			if err := tc.second(b); !errors.Is(err, tc.wantErr) {
				t.Fatalf("second: %v, want %v", err, tc.wantErr)
			}
			if after := balance(t, b, "acme"); after != before {
				t.Errorf("the refused call changed the account: %+v → %+v", before, after)
			}
			audit(t, b, "acme")
		})
	}
}

func TestSettleConcurrentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", 10*usd)
	hold(t, b, "acme", "r", usd)
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				_, errs[i] = b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 700_000_000})
			} else {
				errs[i] = b.Release(ctx, "r", "racing")
			}
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrAlreadySettled):
			t.Errorf("call %d: %v, want nil or ErrAlreadySettled", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d calls ended the hold, want exactly 1", wins)
	}
	o, err := b.Outcome(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := 10 * usd
	if o.State == store.OutcomeSettled {
		want -= 700_000_000
	}
	if a := balance(t, b, "acme"); a.Balance != want || a.Held != 0 {
		t.Errorf("balance %d held %d, want %d and 0 (outcome %s)", a.Balance, a.Held, want, o.State)
	}
	audit(t, b, "acme")
}

func TestHoldRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		setup   func(t *testing.T, b *Store)
		hold    store.Hold
		wantErr error
		want    *store.InsufficientError // when the error is insufficient credit
		wantMsg string
	}{
		{name: "zero balance, zero hold",
			setup: func(t *testing.T, b *Store) {
				if _, err := b.CreateAccount(ctx, "acme"); err != nil {
					t.Fatal(err)
				}
			},
			hold: store.Hold{RequestID: "r", Account: "acme", Amount: 0}, wantErr: store.ErrInsufficient,
			want: &store.InsufficientError{Needed: 0, Available: 0, Limit: store.LimitAccount}, wantMsg: "needed 0 USD, available 0 USD"},
		{name: "zero balance",
			setup: func(t *testing.T, b *Store) {
				if _, err := b.CreateAccount(ctx, "acme"); err != nil {
					t.Fatal(err)
				}
			},
			hold: store.Hold{RequestID: "r", Account: "acme", Amount: 5}, wantErr: store.ErrInsufficient,
			want: &store.InsufficientError{Needed: 5, Available: 0, Limit: store.LimitAccount}},
		{name: "open holds take the credit",
			setup: func(t *testing.T, b *Store) {
				credit(t, b, "acme", usd)
				hold(t, b, "acme", "first", 600_000_000)
			},
			hold: store.Hold{RequestID: "r", Account: "acme", Amount: 500_000_000}, wantErr: store.ErrInsufficient,
			want: &store.InsufficientError{Needed: 500_000_000, Available: 400_000_000, Limit: store.LimitAccount}, wantMsg: "needed 0.5 USD, available 0.4 USD"},
		{name: "one nano short",
			setup: func(t *testing.T, b *Store) { credit(t, b, "acme", usd) },
			hold:  store.Hold{RequestID: "r", Account: "acme", Amount: usd + 1}, wantErr: store.ErrInsufficient,
			want: &store.InsufficientError{Needed: usd + 1, Available: usd, Limit: store.LimitAccount}},
		{name: "negative balance after an overrun",
			setup: func(t *testing.T, b *Store) {
				credit(t, b, "acme", usd)
				hold(t, b, "acme", "first", usd)
				if _, err := b.Settle(ctx, store.Settlement{RequestID: "first", Charge: 1_250_000_000}); err != nil {
					t.Fatal(err)
				}
			},
			hold: store.Hold{RequestID: "r", Account: "acme", Amount: 0}, wantErr: store.ErrInsufficient,
			want: &store.InsufficientError{Needed: 0, Available: -250_000_000, Limit: store.LimitAccount}},
		{name: "unknown account",
			hold: store.Hold{RequestID: "r", Account: "nobody", Amount: 1}, wantErr: store.ErrNotFound},
		{name: "negative amount",
			setup: func(t *testing.T, b *Store) { credit(t, b, "acme", usd) },
			hold:  store.Hold{RequestID: "r", Account: "acme", Amount: -1}, wantMsg: "amount -1 nano-USD is negative"},
		{name: "empty request id",
			setup: func(t *testing.T, b *Store) { credit(t, b, "acme", usd) },
			hold:  store.Hold{Account: "acme", Amount: 1}, wantMsg: "request id is empty"},
		{name: "account id with a slash",
			hold: store.Hold{RequestID: "r", Account: "a/b", Amount: 1}, wantMsg: "contains '/'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := openTemp(t)
			if tc.setup != nil {
				tc.setup(t, b)
			}
			var before store.Account
			if tc.hold.Account == "acme" {
				before = balance(t, b, "acme")
			}
			err := b.Hold(ctx, tc.hold)
			if err == nil {
				t.Fatal("Hold succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Hold: %v, want %v", err, tc.wantErr)
			}
			if tc.want != nil {
				var ie *store.InsufficientError
				if !errors.As(err, &ie) {
					t.Fatalf("Hold: %v is not an *InsufficientError", err)
				}
				if *ie != *tc.want {
					t.Errorf("InsufficientError %+v, want %+v", *ie, *tc.want)
				}
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Hold error %q does not contain %q", err, tc.wantMsg)
			}
			if tc.hold.Account == "acme" {
				if after := balance(t, b, "acme"); after != before {
					t.Errorf("refused hold changed the account: %+v → %+v", before, after)
				}
				audit(t, b, "acme")
			}
		})
	}
}

func TestOverrunBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	hold(t, b, "acme", "a", usd)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "a", Charge: 1_300_000_000, Note: "estimate above quote"}); err != nil {
		t.Fatal(err)
	}
	if a := balance(t, b, "acme"); a.Balance != -300_000_000 {
		t.Fatalf("balance %d, want -300000000 (the whole overrun)", a.Balance)
	}
	// Nothing is admitted until the debt is paid.
	if err := b.Hold(ctx, store.Hold{RequestID: "b", Account: "acme", Amount: 0}); !errors.Is(err, store.ErrInsufficient) {
		t.Fatalf("hold on a negative balance: %v, want ErrInsufficient", err)
	}
	credit(t, b, "acme", 300_000_000)
	if err := b.Hold(ctx, store.Hold{RequestID: "b", Account: "acme", Amount: 0}); !errors.Is(err, store.ErrInsufficient) {
		t.Fatalf("hold on a zero balance: %v, want ErrInsufficient", err)
	}
	credit(t, b, "acme", 1)
	hold(t, b, "acme", "b", 1)
	audit(t, b, "acme")
}

func TestSettleRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	hold(t, b, "acme", "r", 10)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: -1}); err == nil || !strings.Contains(err.Error(), "charge -1 nano-USD is negative") {
		t.Errorf("negative charge: %v", err)
	}
	if _, err := b.Settle(ctx, store.Settlement{Charge: 1}); err == nil || !strings.Contains(err.Error(), "request id is empty") {
		t.Errorf("empty request id: %v", err)
	}
	if a := balance(t, b, "acme"); a.Held != 10 || a.Balance != usd {
		t.Errorf("refused settles changed the account: %+v", a)
	}
	// Settlement ignores a cancelled context: the call happened.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Settle(cctx, store.Settlement{RequestID: "r", Charge: 7}); err != nil {
		t.Fatalf("Settle with a cancelled context: %v", err)
	}
	if err := b.Hold(cctx, store.Hold{RequestID: "s", Account: "acme", Amount: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("Hold with a cancelled context: %v, want context.Canceled", err)
	}
	audit(t, b, "acme")
}

func TestCreditAndAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	for _, amount := range []pricing.Nano{0, -1} {
		if _, err := b.Credit(ctx, "acme", amount, ""); err == nil || !strings.Contains(err.Error(), "is not positive") {
			t.Errorf("Credit(%d): %v, want a not-positive error", amount, err)
		}
	}
	if _, err := b.Balance(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Balance of a missing account: %v, want ErrNotFound", err)
	}
	e, err := b.Credit(ctx, "acme", 3*usd, "top-up")
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 1 || e.Kind != store.KindCredit || e.Amount != 3*usd || e.BalanceAfter != 3*usd || e.Note != "top-up" || e.Account != "acme" {
		t.Errorf("credit entry %+v", e)
	}
	if _, err := b.CreateAccount(ctx, "acme"); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateAccount of an existing account: %v, want ErrExists", err)
	}
	a, err := b.CreateAccount(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "beta" || a.Balance != 0 || a.Held != 0 || a.Created.IsZero() {
		t.Errorf("new account %+v", a)
	}
	if _, err := b.Credit(ctx, "acme", pricing.Nano(1<<63-1), ""); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("overflowing credit: %v", err)
	}
	e, err = b.Credit(ctx, "acme", 2*usd, strings.Repeat("é", 1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Note) > store.MaxNoteLen || !strings.HasPrefix(e.Note, "éé") {
		t.Errorf("long note kept as %d bytes", len(e.Note))
	}
	if r := audit(t, b, "acme"); r.Credits != 5*usd || r.Entries != 2 {
		t.Errorf("audit %+v", r)
	}
}

func TestAccountIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	cases := []struct {
		name, id, wantMsg string
	}{
		{"empty", "", "account id is empty"},
		{"slash", "acme/other", "contains '/'"},
		{"newline", "acme\n", "control character"},
		{"invalid utf-8", "acme\xff", "not valid UTF-8"},
		{"too long", strings.Repeat("a", store.MaxIDLen+1), "more than 256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Credit(ctx, tc.id, 1, ""); err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Credit(%q): %v, want an error containing %q", tc.id, err, tc.wantMsg)
			}
			if _, err := b.CreateAccount(ctx, tc.id); err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("CreateAccount(%q): %v, want an error containing %q", tc.id, err, tc.wantMsg)
			}
		})
	}
	if _, err := b.CreateAccount(ctx, "ok: acct_ü-1.2@x"); err != nil {
		t.Errorf("a printable id was refused: %v", err)
	}
}

func TestChargesOrderAndLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	for i := 1; i <= 120; i++ {
		credit(t, b, "acme", pricing.Nano(i))
	}
	credit(t, b, "acme2", 1) // a neighbouring account id must not leak in
	cases := []struct {
		name  string
		limit int
		want  int
	}{
		{"default", 0, 100},
		{"negative means default", -5, 100},
		{"three", 3, 3},
		{"more than there are", 500, 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.Charges(ctx, "acme", tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d entries, want %d", len(got), tc.want)
			}
			for i, e := range got {
				if e.Seq != uint64(120-i) || e.Amount != pricing.Nano(120-i) || e.Account != "acme" {
					t.Fatalf("entry %d: seq %d amount %d account %q, want seq and amount %d", i, e.Seq, e.Amount, e.Account, 120-i)
				}
			}
		})
	}
	if _, err := b.Charges(ctx, "nobody", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Charges of an unknown account: %v, want ErrNotFound", err)
	}
}

// Sequence numbers whose bytes are 0xff still list newest first: the reverse
// seek starts past every 8-byte sequence number of the prefix.
func TestChargesHighSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	const base = uint64(0xffffffffffffff00)
	if err := b.db.Update(func(txn *badger.Txn) error {
		return putAccount(txn, &accountRec{ID: "acme", Seq: base, Created: now()})
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		credit(t, b, "acme", pricing.Nano(i))
	}
	got, err := b.Charges(ctx, "acme", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != base+3 || got[1].Seq != base+2 || got[0].Amount != 3 {
		t.Errorf("Charges = %+v, want seqs %d and %d", got, base+3, base+2)
	}
}

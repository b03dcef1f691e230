package storetest

import (
	"fmt"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// exported is what a store.Sink received, and in what order.
type exported struct {
	sections []int // 0 accounts … 5 logins, per record
	accounts []store.ExportedAccount
	keys     []store.Key
	entries  []store.Entry
	jobs     []store.Job
	outcomes []store.Outcome
	logins   []store.Login
}

func (x *exported) Account(a store.ExportedAccount) error {
	x.sections, x.accounts = append(x.sections, 0), append(x.accounts, a)
	return nil
}
func (x *exported) Key(k store.Key) error {
	x.sections, x.keys = append(x.sections, 1), append(x.keys, k)
	return nil
}
func (x *exported) Entry(e store.Entry) error {
	x.sections, x.entries = append(x.sections, 2), append(x.entries, e)
	return nil
}
func (x *exported) Job(j store.Job) error {
	x.sections, x.jobs = append(x.sections, 3), append(x.jobs, j)
	return nil
}
func (x *exported) Outcome(o store.Outcome) error {
	x.sections, x.outcomes = append(x.sections, 4), append(x.outcomes, o)
	return nil
}
func (x *exported) Login(l store.Login) error {
	x.sections, x.logins = append(x.sections, 5), append(x.logins, l)
	return nil
}

// A store that is a store.Exporter gives every record as its API shows it,
// in store.Sink's order: accounts by id with their journal counter (Held
// counting open holds), keys by hash, each account's journal oldest first
// (accounts in id order, though "acme-eu/" sorts before "acme/"), jobs and
// outcomes by request id (console logins: see the Console group). A store
// that does not claim Exporter skips this subtest.
func (k *kit) export(t *testing.T, s Store) {
	ex := claimed[store.Exporter](t, k, s, Exporter)
	seedExport(t, s)
	var x exported
	if err := ex.Export(ctx, &x); err != nil {
		t.Fatalf("Export: %v", err)
	}
	for i := 1; i < len(x.sections); i++ {
		if x.sections[i] < x.sections[i-1] {
			t.Fatalf("records out of order: section %d after %d (record %d)", x.sections[i], x.sections[i-1], i)
		}
	}
	exportedAccounts(t, s, &x)
	exportedKeys(t, s, &x)
	exportedJobsAndOutcomes(t, s, &x)
}

// seedExport fills the store with a little of everything Export writes:
// accounts (one without entries), keys (one revoked, one with exclusions),
// a settled, a released and an open hold, and video jobs (one refunded).
func seedExport(t *testing.T, s Store) {
	mustCredit(t, s, "acme-eu", 5*usd)
	mustCredit(t, s, "acme", 10*usd)
	if _, err := s.CreateAccount(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"acme", "acme-eu", "acme"} {
		key := store.Key{ID: fmt.Sprintf("key_%d", i), Hash: store.HashKey(fmt.Sprintf("secret %d", i)), Account: a, Route: store.AutoRoute}
		if i == 1 {
			key.Exclude = []string{"m1", "m2"}
		}
		if err := s.CreateKey(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeKey(ctx, "key_2"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_settled", usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_settled", Charge: 400_000_001,
		Usage: pricing.Usage{InputTokens: 10, OutputTokens: 20}, Note: "estimated"}); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme-eu", "req_released", usd)
	if err := s.Release(ctx, "req_released", "upstream 500"); err != nil {
		t.Fatal(err)
	}
	for _, j := range []store.Job{
		{RequestID: "vid_2", Account: "acme", Model: "v", Route: "r", Line: "sim", Amount: usd},
		{RequestID: "vid_1", Account: "acme", KeyID: "key_0", Model: "v", Route: "r", Line: "sim", Amount: 2 * usd},
	} {
		if err := s.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RefundJob(ctx, "vid_1", "provider failed"); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "acme", "req_open", usd/4)

}

// exportedAccounts checks the accounts exported against ListAccounts, and
// their journal entries against the journals, oldest first.
func exportedAccounts(t *testing.T, s Store, x *exported) {
	accounts, err := s.ListAccounts(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.accounts) != len(accounts) {
		t.Fatalf("%d accounts exported, ListAccounts has %d", len(x.accounts), len(accounts))
	}
	var want []store.Entry
	for i, a := range accounts {
		es := books(t, s, a.ID)
		var last uint64
		if len(es) > 0 {
			last = es[0].Seq
		}
		if x.accounts[i].Account != a || x.accounts[i].LastSeq != last {
			t.Errorf("account %d exported as %+v; ListAccounts has %+v, the journal ends at %d", i, x.accounts[i], a, last)
		}
		for j := len(es) - 1; j >= 0; j-- {
			want = append(want, es[j])
		}
	}
	if x.accounts[0].ID != "acme" || x.accounts[0].Held != usd/4 || x.accounts[1].ID != "acme-eu" {
		t.Errorf("accounts exported: %+v", x.accounts)
	}
	if len(x.entries) != len(want) {
		t.Errorf("%d journal entries exported, the journals have %d", len(x.entries), len(want))
	}
	for i := range min(len(x.entries), len(want)) {
		if x.entries[i] != want[i] {
			t.Errorf("journal entry %d exported as\n %+v\nthe journal has\n %+v", i, x.entries[i], want[i])
		}
	}
}

// exportedKeys checks the keys exported, in hash order, against KeyByHash.
func exportedKeys(t *testing.T, s Store, x *exported) {
	if len(x.keys) != 3 {
		t.Errorf("%d keys exported, want 3", len(x.keys))
	}
	for i, key := range x.keys {
		if i > 0 && x.keys[i-1].Hash >= key.Hash {
			t.Errorf("keys not in hash order at %d", i)
		}
		got, err := s.KeyByHash(ctx, key.Hash)
		if err != nil || got.ID != key.ID || got.Account != key.Account || got.Route != key.Route ||
			fmt.Sprint(got.Exclude) != fmt.Sprint(key.Exclude) || got.Revoked != key.Revoked || !got.Created.Equal(key.Created) {
			t.Errorf("key %s exported as %+v; KeyByHash has %+v, %v", key.ID, key, got, err)
		}
	}
}

// exportedJobsAndOutcomes checks the jobs exported against Job, and the
// outcomes of the settled and released holds.
func exportedJobsAndOutcomes(t *testing.T, s Store, x *exported) {
	if len(x.jobs) != 2 || x.jobs[0].RequestID != "vid_1" || x.jobs[1].RequestID != "vid_2" {
		t.Fatalf("jobs exported: %+v", x.jobs)
	}
	for _, j := range x.jobs {
		if got, err := s.Job(ctx, j.RequestID); err != nil || got != j {
			t.Errorf("job exported as %+v; Job has %+v, %v", j, got, err)
		}
	}
	if len(x.outcomes) != 2 {
		t.Fatalf("outcomes exported: %+v", x.outcomes)
	}
	if o := x.outcomes[0]; o.RequestID != "req_released" || o.Account != "acme-eu" || o.State != store.OutcomeReleased ||
		o.HoldAmount != usd || o.Reason != "upstream 500" || o.Time.IsZero() {
		t.Errorf("released outcome exported as %+v", o)
	}
	if o := x.outcomes[1]; o.RequestID != "req_settled" || o.Account != "acme" || o.State != store.OutcomeSettled ||
		o.HoldAmount != usd || o.Charge != 400_000_001 || o.Seq != 2 || o.Reason != "estimated" || o.Time.IsZero() {
		t.Errorf("settled outcome exported as %+v", o)
	}
}

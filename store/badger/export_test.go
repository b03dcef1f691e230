package badger

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// collect is a store.Sink that keeps everything, and the order it came in.
type collect struct {
	order    []string // "account", "key", … per record
	accounts []store.ExportedAccount
	keys     []store.Key
	entries  []store.Entry
	jobs     []store.Job
	outcomes []store.Outcome
	logins   []store.Login
	failAt   int // > 0: the failAt-th record is refused
	err      error
}

func (c *collect) seen(kind string) error {
	c.order = append(c.order, kind)
	if c.failAt > 0 && len(c.order) == c.failAt {
		return c.err
	}
	return nil
}

func (c *collect) Account(a store.ExportedAccount) error {
	c.accounts = append(c.accounts, a)
	return c.seen("account")
}
func (c *collect) Key(k store.Key) error {
	c.keys = append(c.keys, k)
	return c.seen("key")
}
func (c *collect) Entry(e store.Entry) error {
	c.entries = append(c.entries, e)
	return c.seen("entry")
}
func (c *collect) Job(j store.Job) error {
	c.jobs = append(c.jobs, j)
	return c.seen("job")
}
func (c *collect) Outcome(o store.Outcome) error {
	c.outcomes = append(c.outcomes, o)
	return c.seen("outcome")
}
func (c *collect) Login(l store.Login) error {
	c.logins = append(c.logins, l)
	return c.seen("login")
}

func TestExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	seedExport(t, b)

	var c collect
	if err := b.Export(ctx, &c); err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{"account": 0, "key": 1, "entry": 2, "job": 3, "outcome": 4}
	if !slices.IsSortedFunc(c.order, func(x, y string) int { return rank[x] - rank[y] }) {
		t.Errorf("sections out of order: %v", c.order)
	}
	checkExportedAccounts(t, b, c.accounts)
	checkExportedKeys(t, b, c.keys)
	checkExportedJournal(t, b, c.entries)
	checkExportedJobs(t, b, c.jobs, c.outcomes)

	t.Run("held counts the holds open in this process", func(t *testing.T) {
		hold(t, b, "acme", "req_open", usd)
		c := collect{}
		if err := b.Export(ctx, &c); err != nil {
			t.Fatal(err)
		}
		if c.accounts[0].Held != usd {
			t.Errorf("Held with an open hold: %s", c.accounts[0].Held)
		}
	})
	t.Run("a sink's error stops the export and is returned", func(t *testing.T) {
		boom := errors.New("boom")
		c := collect{failAt: 5, err: boom}
		if err := b.Export(ctx, &c); !errors.Is(err, boom) || len(c.order) != 5 {
			t.Errorf("Export with a failing sink: %v after %d records", err, len(c.order))
		}
	})
}

// seedExport writes three accounts ("acme-eu/" sorts before "acme/", so the
// journal must still come in account id order), three keys, a settled and a
// released hold, and two jobs, one refunded.
func seedExport(t *testing.T, b *Store) {
	t.Helper()
	ctx := context.Background()
	credit(t, b, "acme-eu", 5*usd)
	credit(t, b, "acme", 10*usd)
	if _, err := b.CreateAccount(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	for i, acct := range []string{"acme", "acme-eu", "acme"} {
		_, id, hash, err := store.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		k := store.Key{ID: id, Hash: hash, Account: acct, Route: store.AutoRoute}
		if i == 1 {
			k.Exclude = []string{"m1", "m2"}
		}
		if err := b.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	hold(t, b, "acme", "req_settled", usd)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_settled", Charge: 400_000_000,
		Usage: pricing.Usage{InputTokens: 10, OutputTokens: 20}, Note: "estimated"}); err != nil {
		t.Fatal(err)
	}
	hold(t, b, "acme-eu", "req_released", usd)
	if err := b.Release(ctx, "req_released", "upstream 500"); err != nil {
		t.Fatal(err)
	}
	if err := b.PutJob(ctx, store.Job{RequestID: "vid_2", Account: "acme", Model: "v", Route: "r", Line: "sim", Amount: usd}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Model: "v", Route: "r", Line: "sim", Amount: 2 * usd}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RefundJob(ctx, "vid_1", "provider failed"); err != nil {
		t.Fatal(err)
	}
}

// checkExportedAccounts wants the accounts by id, each as Balance has it,
// with the journal counter Audit reports.
func checkExportedAccounts(t *testing.T, b *Store, accounts []store.ExportedAccount) {
	t.Helper()
	ids := []string{}
	for _, a := range accounts {
		ids = append(ids, a.ID)
		want := balance(t, b, a.ID)
		r := audit(t, b, a.ID)
		if a.Account != want || a.LastSeq != r.LastSeq {
			t.Errorf("account %+v; Balance %+v, last seq %d", a, want, r.LastSeq)
		}
	}
	if want := []string{"acme", "acme-eu", "zeta"}; !slices.Equal(ids, want) {
		t.Errorf("accounts %v, want %v", ids, want)
	}
}

// checkExportedKeys wants the three keys by hash, each as KeyByHash has it.
func checkExportedKeys(t *testing.T, b *Store, keys []store.Key) {
	t.Helper()
	byHash := func(x, y store.Key) int { return strings.Compare(x.Hash, y.Hash) }
	if len(keys) != 3 || !slices.IsSortedFunc(keys, byHash) {
		t.Errorf("%d keys, want 3 in hash order", len(keys))
	}
	for _, k := range keys {
		got, err := b.KeyByHash(context.Background(), k.Hash)
		if err != nil || !keysEqual(got, k) {
			t.Errorf("exported key %s differs from KeyByHash: %v", k.ID, err)
		}
	}
}

// checkExportedJournal wants the journal account by account, each oldest
// first, as Charges has it.
func checkExportedJournal(t *testing.T, b *Store, entries []store.Entry) {
	t.Helper()
	var want []store.Entry
	for _, id := range []string{"acme", "acme-eu", "zeta"} {
		es, err := b.Charges(context.Background(), id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(es)
		want = append(want, es...)
	}
	if !slices.Equal(entries, want) {
		t.Errorf("journal:\n got %+v\nwant %+v", entries, want)
	}
}

// checkExportedJobs wants the jobs by request id and the outcomes complete,
// as Outcome has them.
func checkExportedJobs(t *testing.T, b *Store, jobs []store.Job, outcomes []store.Outcome) {
	t.Helper()
	if len(jobs) != 2 || jobs[0].RequestID != "vid_1" || !jobs[0].Refunded || jobs[1].Refunded {
		t.Errorf("jobs %+v", jobs)
	}
	if len(outcomes) != 2 || outcomes[0].RequestID != "req_released" || outcomes[1].RequestID != "req_settled" {
		t.Fatalf("outcomes %+v", outcomes)
	}
	for _, o := range outcomes {
		got, err := b.Outcome(context.Background(), o.RequestID)
		if err != nil || got != o {
			t.Errorf("exported outcome %+v; Outcome %+v, %v", o, got, err)
		}
	}
	if s := outcomes[1]; s.HoldAmount != usd || s.Reason != "estimated" || s.Charge != 400_000_000 {
		t.Errorf("settled outcome not completed from its journal entry: %+v", s)
	}
}

func keysEqual(a, b store.Key) bool {
	return a.ID == b.ID && a.Hash == b.Hash && a.Account == b.Account && a.Route == b.Route &&
		slices.Equal(a.Exclude, b.Exclude) && a.Revoked == b.Revoked && a.Created.Equal(b.Created)
}

// A journal entry whose account does not exist is damage: Export says so
// rather than leave it behind.
func TestExportRefusesOrphanJournal(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	if err := b.db.Update(func(txn *badger.Txn) error {
		return putEntry(txn, &entryRec{Seq: 1, Kind: store.KindCredit, Account: "ghost", Amount: 1, BalanceAfter: 1})
	}); err != nil {
		t.Fatal(err)
	}
	err := b.Export(context.Background(), &collect{})
	if err == nil || !strings.Contains(err.Error(), "the journal has 2 entries, and 1 belong to accounts that exist") {
		t.Errorf("Export with an orphan journal entry: %v", err)
	}
}

// Open names a ledger in use as ErrLocked.
func TestOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openAt(t, dir, "", false)
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

// A damaged key record stops the export with an error that does not show
// the key's hash (it is the record's badger key).
func TestExportDamagedKeyHidesHash(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	hash := store.HashKey("secret")
	if err := b.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keyKey(hash), []byte{tagKeyV1, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
	err := b.Export(context.Background(), &collect{})
	if err == nil || strings.Contains(err.Error(), hash) || !strings.Contains(err.Error(), `"key/<hash>"`) {
		t.Errorf("Export of a damaged key record: %v", err)
	}
}

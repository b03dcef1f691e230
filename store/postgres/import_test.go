package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// books is an export held in memory, given in store.Sink's order.
type books struct {
	accounts []store.ExportedAccount
	keys     []store.Key
	entries  []store.Entry
	jobs     []store.Job
	outcomes []store.Outcome
	logins   []store.Login
	failAt   int // > 0: Export fails after giving this many records
}

var errExportFailed = errors.New("export failed")

func (b *books) Export(ctx context.Context, to store.Sink) error {
	n := 0
	give := func(err error) error {
		n++
		if err == nil && b.failAt > 0 && n >= b.failAt {
			return errExportFailed
		}
		return err
	}
	for _, a := range b.accounts {
		if err := give(to.Account(a)); err != nil {
			return err
		}
	}
	for _, k := range b.keys {
		if err := give(to.Key(k)); err != nil {
			return err
		}
	}
	for _, e := range b.entries {
		if err := give(to.Entry(e)); err != nil {
			return err
		}
	}
	for _, j := range b.jobs {
		if err := give(to.Job(j)); err != nil {
			return err
		}
	}
	for _, o := range b.outcomes {
		if err := give(to.Outcome(o)); err != nil {
			return err
		}
	}
	for _, l := range b.logins {
		if err := give(to.Login(l)); err != nil {
			return err
		}
	}
	return nil
}

// Export of a books is a copy, so that tests can change one.
func (b *books) clone() *books {
	return &books{accounts: slices.Clone(b.accounts), keys: slices.Clone(b.keys), entries: slices.Clone(b.entries),
		jobs: slices.Clone(b.jobs), outcomes: slices.Clone(b.outcomes), logins: slices.Clone(b.logins), failAt: b.failAt}
}

// journal appends entries to account a of bk (amounts in order), keeping
// balance_after, the counter and the balance right.
func (bk *books) journal(i int, base time.Time, kinds []string, amounts []pricing.Nano) {
	a := &bk.accounts[i]
	for j, amt := range amounts {
		a.LastSeq++
		a.Balance += amt
		e := store.Entry{Seq: a.LastSeq, Kind: kinds[j%len(kinds)], Account: a.ID, Amount: amt, BalanceAfter: a.Balance,
			Time: base.Add(time.Duration(a.LastSeq) * 1001 * time.Nanosecond), Note: fmt.Sprintf("entry %d", a.LastSeq)}
		if e.Kind == store.KindCharge {
			e.RequestID, e.KeyID, e.Model, e.Route, e.Endpoint = fmt.Sprintf("req_%s_%d", a.ID, a.LastSeq), "key_1", "m", "r", pricing.EndpointChat
			e.Usage = pricing.Usage{InputTokens: 10, CacheReadTokens: 3, OutputTokens: int64(a.LastSeq), Images: 1, SizeTier: "1K", Seconds: 2, Resolution: "720p", Requests: 1}
			e.HoldAmount = -amt + 1
		}
		if e.Kind == store.KindRecovery {
			e.Amount, e.BalanceAfter = 0, e.BalanceAfter-amt
			a.Balance -= amt
			e.HoldAmount = 7
		}
		bk.entries = append(bk.entries, e)
	}
}

// sampleBooks are books with every kind of record, and more journal entries
// than one COPY batch carries.
func sampleBooks() *books {
	base := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC) // nanoseconds PostgreSQL cuts to microseconds
	bk := &books{accounts: []store.ExportedAccount{
		{Account: store.Account{ID: "acme", Created: base, AlertBelow: 5 * usd}},
		{Account: store.Account{ID: "acme-eu", Created: base.Add(time.Second)}},
		{Account: store.Account{ID: "zeta", Created: base.Add(2 * time.Second)}},
	}}
	bk.journal(0, base, []string{store.KindCredit}, []pricing.Nano{100 * usd})
	many := make([]pricing.Nano, importBatch+150)
	for i := range many {
		many[i] = -pricing.Nano(1000 + i)
	}
	bk.journal(0, base, []string{store.KindCharge, store.KindRecovery, store.KindCharge}, many)
	bk.journal(0, base, []string{store.KindRefund}, []pricing.Nano{usd / 2})
	bk.journal(1, base, []string{store.KindCredit, store.KindCharge}, []pricing.Nano{5 * usd, -7 * usd}) // an overrun: negative balance
	_, id, hash, _ := store.NewKey()
	bk.keys = append(bk.keys, store.Key{ID: id, Hash: hash, Account: "acme", Route: store.AutoRoute, Created: base.Add(3 * time.Second),
		Label: "ci runner", Limit: 2 * usd, Reset: store.ResetMonthly, Expires: base.AddDate(1, 0, 0), Allow: []string{"10.0.0.0/8", "2001:db8::/32"},
		Spent: usd / 3, PeriodStart: store.PeriodStart(store.ResetMonthly, base)})
	_, id, hash, _ = store.NewKey()
	bk.keys = append(bk.keys, store.Key{ID: id, Hash: hash, Account: "acme-eu", Route: "fast", Exclude: []string{"m1", "m2"}, Revoked: true, Created: base.Add(4 * time.Second)})
	slices.SortFunc(bk.keys, func(x, y store.Key) int { return strings.Compare(x.Hash, y.Hash) })
	bk.jobs = []store.Job{
		{RequestID: "vid_1", Account: "acme", KeyID: "key_1", Model: "v", Route: "r", Line: "sim", Amount: usd / 2, Refunded: true, Created: base.Add(5 * time.Second)},
		{RequestID: "vid_2", Account: "acme", Model: "v", Amount: 0, Created: base.Add(6 * time.Second)},
	}
	bk.outcomes = []store.Outcome{
		{RequestID: "req_acme_2", Account: "acme", State: store.OutcomeSettled, HoldAmount: 1001, Charge: 1000, Seq: 2, Reason: "entry 2", Time: base.Add(7 * time.Second)},
		{RequestID: "req_gone", Account: "acme-eu", State: store.OutcomeReleased, HoldAmount: usd, Owner: "boot-A", Reason: "upstream 500", Time: base.Add(8 * time.Second)},
	}
	bk.logins = []store.Login{
		{Email: "alice@example.com", Account: "acme", PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
			Created: base.Add(9 * time.Second), Updated: base.Add(10 * time.Second)},
		{Email: "bob@example.com", Account: "acme-eu", SetupHash: store.HashKey("rls-bob"), SetupExpires: base.Add(time.Hour),
			Created: base.Add(11 * time.Second), Updated: base.Add(11 * time.Second)},
	}
	return bk
}

// truncated is bk as PostgreSQL keeps it: times to the microsecond.
func truncated(bk *books) *books {
	c := bk.clone()
	for i := range c.accounts {
		c.accounts[i].Created = exactTime(c.accounts[i].Created)
	}
	for i := range c.keys {
		c.keys[i].Created = exactTime(c.keys[i].Created)
		c.keys[i].Expires = exactTime(c.keys[i].Expires)
	}
	for i := range c.entries {
		c.entries[i].Time = exactTime(c.entries[i].Time)
	}
	for i := range c.jobs {
		c.jobs[i].Created = exactTime(c.jobs[i].Created)
	}
	for i := range c.outcomes {
		c.outcomes[i].Time = exactTime(c.outcomes[i].Time)
	}
	for i := range c.logins {
		l := &c.logins[i]
		l.SetupExpires, l.Created, l.Updated = exactTime(l.SetupExpires), exactTime(l.Created), exactTime(l.Updated)
	}
	return c
}

// exportAll reads s's export into a books.
func exportAll(t *testing.T, s *Store) *books {
	t.Helper()
	var got books
	if err := s.Export(context.Background(), (*bookSink)(&got)); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return &got
}

type bookSink books

func (b *bookSink) Account(a store.ExportedAccount) error {
	b.accounts = append(b.accounts, a)
	return nil
}
func (b *bookSink) Key(k store.Key) error {
	b.keys = append(b.keys, k)
	return nil
}
func (b *bookSink) Entry(e store.Entry) error {
	b.entries = append(b.entries, e)
	return nil
}
func (b *bookSink) Job(j store.Job) error {
	b.jobs = append(b.jobs, j)
	return nil
}
func (b *bookSink) Outcome(o store.Outcome) error {
	b.outcomes = append(b.outcomes, o)
	return nil
}
func (b *bookSink) Login(l store.Login) error {
	b.logins = append(b.logins, l)
	return nil
}

func equalBooks(t *testing.T, got, want *books) {
	t.Helper()
	if !slices.Equal(got.accounts, want.accounts) {
		t.Errorf("accounts:\n got %+v\nwant %+v", got.accounts, want.accounts)
	}
	if !slices.EqualFunc(got.keys, want.keys, func(a, b store.Key) bool {
		return a.ID == b.ID && a.Hash == b.Hash && a.Account == b.Account && a.Route == b.Route &&
			slices.Equal(a.Exclude, b.Exclude) && a.Revoked == b.Revoked && a.Created.Equal(b.Created) &&
			a.Label == b.Label && a.Limit == b.Limit && a.Reset == b.Reset && a.Expires.Equal(b.Expires) &&
			slices.Equal(a.Allow, b.Allow) && a.Spent == b.Spent && a.Held == b.Held && a.PeriodStart.Equal(b.PeriodStart)
	}) {
		t.Errorf("keys differ:\n got %+v\nwant %+v", got.keys, want.keys)
	}
	if len(got.entries) != len(want.entries) {
		t.Errorf("%d journal entries, want %d", len(got.entries), len(want.entries))
	}
	for i := range min(len(got.entries), len(want.entries)) {
		if got.entries[i] != want.entries[i] {
			t.Errorf("journal entry %d:\n got %+v\nwant %+v", i, got.entries[i], want.entries[i])
			break
		}
	}
	if !slices.Equal(got.jobs, want.jobs) {
		t.Errorf("jobs:\n got %+v\nwant %+v", got.jobs, want.jobs)
	}
	if !slices.Equal(got.outcomes, want.outcomes) {
		t.Errorf("outcomes:\n got %+v\nwant %+v", got.outcomes, want.outcomes)
	}
	if !slices.Equal(got.logins, want.logins) {
		t.Errorf("logins:\n got %+v\nwant %+v", got.logins, want.logins)
	}
}

// mustBeEmpty fails unless s holds no books.
func mustBeEmpty(t *testing.T, s *Store) {
	t.Helper()
	if err := s.CheckEmpty(context.Background()); err != nil {
		t.Errorf("the store is not empty: %v", err)
	}
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	src := sampleBooks()
	n, err := s.Import(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ImportCounts{Accounts: 3, Keys: 2, Entries: int64(len(src.entries)), Jobs: 2, Outcomes: 2, Logins: 2}); n != want {
		t.Errorf("Import counts %+v, want %+v", n, want)
	}
	equalBooks(t, exportAll(t, s), truncated(src))
	for _, a := range src.accounts {
		r, err := s.Audit(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Err() != nil || r.LastSeq != a.LastSeq || r.Account.Balance != a.Balance {
			t.Errorf("audit of %s: %v, last seq %d, balance %s; want %d, %s", a.ID, r.Err(), r.LastSeq, r.Account.Balance, a.LastSeq, a.Balance)
		}
	}
	// The journal goes on from the imported counter.
	before := src.accounts[0]
	if err := s.Hold(ctx, store.Hold{RequestID: "after_copy", Account: "acme", Amount: usd}); err != nil {
		t.Fatal(err)
	}
	e, err := s.Settle(ctx, store.Settlement{RequestID: "after_copy", Charge: usd / 4})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != before.LastSeq+1 || e.BalanceAfter != before.Balance-usd/4 {
		t.Errorf("first entry after the import: seq %d, balance after %s; want %d, %s", e.Seq, e.BalanceAfter, before.LastSeq+1, before.Balance-usd/4)
	}
	if r, err := s.Audit(ctx, "acme"); err != nil || r.Err() != nil {
		t.Errorf("audit after a settle: %v %v", err, r.Err())
	}

	// A second import into these books is refused, and changes nothing.
	again := exportAll(t, s)
	_, err = s.Import(ctx, sampleBooks())
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), `3 accounts (the first "acme")`) {
		t.Errorf("Import into books: %v", err)
	}
	equalBooks(t, exportAll(t, s), again)
}

// Books that do not hold are refused before anything is committed, and so is
// an export that fails part way, after rows were written.
func TestImportRefused(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	cases := []struct {
		name   string
		change func(*books)
		want   string
	}{
		{"open holds", func(b *books) { b.accounts[1].Held = 1 }, `account "acme-eu" has open holds (0.000000001 USD held)`},
		{"counter ahead", func(b *books) { b.accounts[2].LastSeq = 1 }, `journal of account "zeta": the last entry is 0, the account's counter 1`},
		{"balance off", func(b *books) { b.accounts[2].Balance = 1 }, `account "zeta": balance 0.000000001 USD, its journal sums to 0 USD`},
		{"gap", func(b *books) { b.entries = slices.Delete(b.entries, 3, 4) }, `journal of account "acme": entry 5 follows entry 3`},
		{"balance after", func(b *books) { b.entries[2].BalanceAfter++ }, `journal of account "acme": entry 3 has balance_after`},
		{"recovery moves money", func(b *books) { b.entries[2].Amount, b.entries[2].BalanceAfter = -1, b.entries[1].BalanceAfter-1 }, "recovery entry 3 moves"},
		{"unknown kind", func(b *books) { b.entries[0].Kind = "gift" }, `unknown kind "gift"`},
		{"unknown account", func(b *books) { b.jobs[0].Account = "nobody" }, `job "vid_1": account "nobody" is not in the export`},
		{"bad hash", func(b *books) { b.keys[0].Hash = strings.ToUpper(b.keys[0].Hash) }, "not lowercase hex"},
		{"key holds", func(b *books) { b.keys[1].Held = 1 }, "has open holds (0.000000001 USD held)"},
		{"key reset", func(b *books) { b.keys[0].Reset = "hourly" }, `limit reset "hourly"`},
		{"negative threshold", func(b *books) { b.accounts[0].AlertBelow = -1 }, "alert threshold -0.000000001 USD is negative"},
		{"login of no account", func(b *books) { b.logins[1].Account = "nobody" }, `login "bob@example.com": account "nobody" is not in the export`},
		{"login not lower-cased", func(b *books) { b.logins[0].Email = "Alice@example.com" }, "not a lower-cased bare address"},
		{"setup hash without expiry", func(b *books) { b.logins[1].SetupExpires = time.Time{} }, "needs both its hash and its expiry"},
		{"duplicate account", func(b *books) { b.accounts = append(b.accounts, b.accounts[2]) }, `account "zeta" is exported twice`},
		{"export fails after a batch", func(b *books) { b.failAt = len(b.accounts) + len(b.keys) + importBatch + 10 }, errExportFailed.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bk := sampleBooks()
			tc.change(bk)
			_, err := s.Import(ctx, bk)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Import: %v; want an error containing %q", err, tc.want)
			}
			mustBeEmpty(t, s)
		})
	}
	// An account given after the journal began.
	bk := sampleBooks()
	order := &books{accounts: bk.accounts[:1], entries: bk.entries[:1]}
	late := &lateAccount{books: order, late: bk.accounts[2]}
	if _, err := s.Import(ctx, late); err == nil || !strings.Contains(err.Error(), "out of order: accounts after journal") {
		t.Errorf("Import with an account after the journal: %v", err)
	}
	mustBeEmpty(t, s)
}

// lateAccount gives its books, then one more account.
type lateAccount struct {
	*books
	late store.ExportedAccount
}

func (l *lateAccount) Export(ctx context.Context, to store.Sink) error {
	if err := l.books.Export(ctx, to); err != nil {
		return err
	}
	return to.Account(l.late)
}

func TestCheckEmpty(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, freshDSN(t), Options{RenewEvery: -1})
	mustBeEmpty(t, s)
	// An outcome alone (it names no account row) still makes books.
	exec(t, s.dsn, `INSERT INTO outcomes (request_id, account, state, hold_amount) VALUES ('r', 'a', 'released', 1)`)
	if err := s.CheckEmpty(ctx); !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "1 hold outcome") {
		t.Errorf("CheckEmpty with an outcome: %v", err)
	}
	if _, err := s.Credit(ctx, "acme", usd, ""); err != nil {
		t.Fatal(err)
	}
	err := s.CheckEmpty(ctx)
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), `1 account (the first "acme"), 1 journal entry, 1 hold outcome`) {
		t.Errorf("CheckEmpty with books: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/badger"
	"github.com/modelrelay/modelrelay/store/postgres"
	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

const usd = pricing.NanoPerUSD

var quiet = slog.New(slog.DiscardHandler)

// newDatabase creates a database of its own on $RELAY_TEST_POSTGRES (the
// test skips when it is unset), dropped when the test ends, and returns its
// URL.
func newDatabase(t *testing.T) string { return pgtest.Database(t, "relay_test_copy") }

// source is what buildSource made.
type source struct {
	dataDir  string
	hashes   []string // every key's hash
	requests []string // every request id with an outcome after the copy
	jobs     []string
}

// buildSource writes a Badger ledger in a data_dir, as two gateway processes
// would have: accounts, credits, settled (one over its hold) and released
// holds, video jobs (one refunded), keys (one revoked, one with
// exclusions), a hold the second process recovered from the first, and a
// hold the second left open for the copy to recover.
func buildSource(t *testing.T) source {
	t.Helper()
	ctx := context.Background()
	src := source{dataDir: t.TempDir()}
	ledger := filepath.Join(src.dataDir, "ledger")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := badger.Open(ledger, badger.Options{Owner: "boot-1", Logger: quiet})
	must(err)
	for _, c := range []struct {
		account string
		amount  pricing.Nano
	}{{"acme", 10 * usd}, {"acme-eu", 5 * usd}, {"beta", 3 * usd}, {"acme", 250_000_001}} {
		_, err := b.Credit(ctx, c.account, c.amount, "credit for "+c.account)
		must(err)
	}
	_, err = b.CreateAccount(ctx, "zeta") // no journal at all
	must(err)
	key := func(account, route string, exclude []string, settings store.Key) store.Key {
		_, id, hash, err := store.NewKey()
		must(err)
		k := settings
		k.ID, k.Hash, k.Account, k.Route, k.Exclude = id, hash, account, route, exclude
		must(b.CreateKey(ctx, k))
		src.hashes = append(src.hashes, hash)
		return k
	}
	// k1 has every setting, and spends (in the month of the test's clock).
	k1 := key("acme", store.AutoRoute, nil, store.Key{Label: "agent", Limit: 100 * usd, Reset: store.ResetMonthly,
		Expires: time.Now().AddDate(1, 0, 0), Allow: []string{"10.0.0.0/8"}})
	key("acme", "fast", []string{"m1", "m2"}, store.Key{})
	_, err = b.RevokeKey(ctx, key("beta", "fast", nil, store.Key{}).ID)
	must(err)
	hold := func(b *badger.Store, account, id string, amount pricing.Nano, endpoint string) {
		t.Helper()
		must(b.Hold(ctx, store.Hold{RequestID: id, Account: account, KeyID: k1.ID, Model: "model-x", Route: "fast", Endpoint: endpoint, Amount: amount}))
		src.requests = append(src.requests, id)
	}
	settle := func(b *badger.Store, id string, charge pricing.Nano, u pricing.Usage, note string) {
		t.Helper()
		_, err := b.Settle(ctx, store.Settlement{RequestID: id, Charge: charge, Usage: u, Note: note})
		must(err)
	}
	hold(b, "acme", "req_settled", usd, pricing.EndpointChat)
	settle(b, "req_settled", 437_123_456, pricing.Usage{InputTokens: 1200, CacheReadTokens: 50, OutputTokens: 300}, "stream cut: estimated")
	hold(b, "acme-eu", "req_overrun", usd, pricing.EndpointChat)
	settle(b, "req_overrun", 1_200_000_000, pricing.Usage{InputTokens: 9000, OutputTokens: 4000}, "")
	hold(b, "beta", "req_released", usd/2, pricing.EndpointChat)
	must(b.Release(ctx, "req_released", "upstream 502"))
	for _, v := range []struct {
		id     string
		amount pricing.Nano
	}{{"vid_ok", 2 * usd}, {"vid_failed", 1_500_000_000}} {
		hold(b, "acme", v.id, v.amount, pricing.EndpointVideo)
		settle(b, v.id, v.amount, pricing.Usage{Seconds: 5, Resolution: "720p"}, "")
		must(b.PutJob(ctx, store.Job{RequestID: v.id, Account: "acme", KeyID: k1.ID, Model: "video-x", Route: "fast", Line: "sim", Amount: v.amount}))
		src.jobs = append(src.jobs, v.id)
	}
	refunded, err := b.RefundJob(ctx, "vid_failed", "provider failed")
	must(err)
	if !refunded {
		t.Fatal("vid_failed was not refunded")
	}
	hold(b, "acme-eu", "req_crash_1", usd/4, pricing.EndpointChat) // left open: the process "crashes"
	must(b.Close())

	b, err = badger.Open(ledger, badger.Options{Owner: "boot-2", Logger: quiet})
	must(err)
	if n, err := b.RecoverHolds(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverHolds: %d, %v; want 1", n, err)
	}
	hold(b, "beta", "req_crash_2", usd/10, pricing.EndpointResponses) // left open for the copy
	addLogins(t, b)
	must(b.Close())
	return src
}

// addLogins gives acme two console logins: one signed up (with a session,
// which a copy leaves behind), one with its setup link pending.
func addLogins(t *testing.T, b *badger.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	for _, email := range []string{"alice@example.com", "bob@example.com"} {
		if _, err := b.IssueLogin(ctx, email, "acme", store.HashKey("rls-"+email), now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.SetPassword(ctx, store.HashKey("rls-alice@example.com"), "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", now); err != nil {
		t.Fatal(err)
	}
	err := b.PutSession(ctx, store.Session{ID: store.HashKey("cookie"), Email: "alice@example.com", Account: "acme", CSRF: "c", Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoreCopy(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	src := buildSource(t)
	var out bytes.Buffer
	if err := copyStore(ctx, "badger:"+src.dataDir, dsn, &out, quiet); err != nil {
		t.Fatalf("copy: %v\n%s", err, out.String())
	}
	printed := out.String()
	t.Logf("relay store copy printed:\n%s", printed)
	for _, want := range []string{
		"released 1 hold left open by a process that ended",
		"copied " + filepath.Join(src.dataDir, "ledger") + " into PostgreSQL database",
		"accounts        4\n", "keys            3\n", "jobs            2\n", "hold outcomes   7\n", "console logins  2\n",
		"total balance   14.612876545 USD\n", // acme 7.812876545, acme-eu 3.8, beta 3
		"verified:",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, h := range src.hashes {
		if strings.Contains(printed, h) {
			t.Error("the output shows a key hash")
		}
	}

	b, err := badger.Open(filepath.Join(src.dataDir, "ledger"), badger.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, dsn, postgres.Options{RenewEvery: -1})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	checkCopy(t, src, b, pg)
	pg.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// The command itself, into a second database: the source is closed,
	// and its holds were recovered by the copy above.
	dsn2 := newDatabase(t)
	cmd := exec.Command(relayBin, "store", "copy", "-from", "badger:"+src.dataDir, "-to", dsn2)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("relay store copy: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "verified:") || !strings.Contains(stdout.String(), "total balance   14.612876545 USD") ||
		strings.Contains(stdout.String(), "released") {
		t.Errorf("relay store copy printed:\n%s", stdout.String())
	}
	for _, h := range src.hashes {
		if strings.Contains(stdout.String()+stderr.String(), h) {
			t.Error("relay store copy shows a key hash")
		}
	}
	pg2, err := postgres.Open(ctx, dsn2, postgres.Options{RenewEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pg2.Close()
	if a, err := pg2.Balance(ctx, "acme"); err != nil || a.Balance != 10*usd+250_000_001-437_123_456-2*usd {
		t.Errorf("acme in the second copy: %+v, %v", a, err)
	}
	// Again into the same database: refused, exit status 1.
	again := exec.Command(relayBin, "store", "copy", "-from", "badger:"+src.dataDir, "-to", dsn2)
	msg, err := again.CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		!strings.Contains(string(msg), `the database already holds books: it has 4 accounts (the first "acme")`) {
		t.Errorf("a second copy into the same database: %v\n%s", err, msg)
	}
}

// checkCopy compares the source and the copy through the store interfaces.
func checkCopy(t *testing.T, src source, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	checkCopiedAccounts(t, b, pg)
	checkCopiedKeys(t, b, pg)
	checkCopiedJobs(t, src, b, pg)
	checkCopiedOutcomes(t, src, b, pg)
	checkCopiedLogins(t, b, pg)
	checkCopyTakesCalls(t, pg)
}

// checkCopiedAccounts wants the source's four accounts in the copy, each
// with the same balance, journal and audit.
func checkCopiedAccounts(t *testing.T, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	want, err := b.ListAccounts(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pg.ListAccounts(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 4 || len(got) != len(want) {
		t.Fatalf("accounts: %d in the copy, %d in the source (want 4)", len(got), len(want))
	}
	for i, a := range want {
		a.Created = at(a.Created)
		if got[i] != a {
			t.Errorf("account %d: got %+v, want %+v", i, got[i], a)
		}
		bal, err := pg.Balance(ctx, a.ID)
		if err != nil || bal != a {
			t.Errorf("Balance(%s): %+v, %v; want %+v", a.ID, bal, err, a)
		}
		checkCopiedJournal(t, b, pg, a.ID)
	}
}

// checkCopiedJournal wants the copy to hold account id's journal entries
// as the source does, and both to pass the audit alike, with no open hold.
func checkCopiedJournal(t *testing.T, b *badger.Store, pg *postgres.Store, id string) {
	t.Helper()
	ctx := context.Background()
	we, err := b.Charges(ctx, id, 10000)
	if err != nil {
		t.Fatal(err)
	}
	ge, err := pg.Charges(ctx, id, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ge) != len(we) {
		t.Errorf("%s: %d entries in the copy, %d in the source", id, len(ge), len(we))
	}
	for j := range min(len(ge), len(we)) {
		w := we[j]
		w.Time = at(w.Time)
		if ge[j] != w {
			t.Errorf("%s entry %d:\n got %+v\nwant %+v", id, w.Seq, ge[j], w)
		}
	}
	ra, err := b.Audit(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := pg.Audit(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rg.Err() != nil || ra.Err() != nil || rg.Entries != ra.Entries || rg.LastSeq != ra.LastSeq || rg.Journal != ra.Journal ||
		rg.Journal != rg.Account.Balance || rg.OpenHolds != 0 {
		t.Errorf("%s: audit of the copy %+v (%v), of the source %+v (%v)", id, rg, rg.Err(), ra, ra.Err())
	}
}

// checkCopiedKeys wants the source's three keys in the copy, with their
// hashes, flags and exclusions.
func checkCopiedKeys(t *testing.T, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	wk, err := b.ListKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	gk, err := pg.ListKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(wk) != 3 || len(gk) != len(wk) {
		t.Fatalf("keys: %d in the copy, %d in the source (want 3)", len(gk), len(wk))
	}
	revoked, excluded := 0, 0
	for _, w := range wk {
		w.Created = at(w.Created)
		i := slices.IndexFunc(gk, func(k store.Key) bool { return k.ID == w.ID })
		if i < 0 || !sameKey(gk[i], w) {
			t.Errorf("key %s differs in the copy", w.ID)
		}
		k, err := pg.KeyByHash(ctx, w.Hash)
		if err != nil || !sameKey(k, w) {
			t.Errorf("KeyByHash of key %s in the copy: %v", w.ID, err)
		}
		if k.Revoked {
			revoked++
		}
		if slices.Equal(k.Exclude, []string{"m1", "m2"}) {
			excluded++
		}
	}
	if revoked != 1 || excluded != 1 {
		t.Errorf("%d revoked keys, %d with exclusions; want 1 and 1", revoked, excluded)
	}
}

// checkCopiedJobs wants the source's video jobs in the copy, the refunded
// one refunded.
func checkCopiedJobs(t *testing.T, src source, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	for _, id := range src.jobs {
		w, err := b.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		w.Created = at(w.Created)
		if g, err := pg.Job(ctx, id); err != nil || g != w {
			t.Errorf("job %s: %+v, %v; want %+v", id, g, err, w)
		}
	}
	if j, _ := pg.Job(ctx, "vid_failed"); !j.Refunded {
		t.Error("the refunded job is not refunded in the copy")
	}
}

// checkCopiedOutcomes wants the source's request outcomes in the copy,
// each in the state the source's story left it.
func checkCopiedOutcomes(t *testing.T, src source, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	states := map[string]string{}
	for _, id := range src.requests {
		w, err := b.Outcome(ctx, id)
		if err != nil {
			t.Fatalf("Outcome(%s) in the source: %v", id, err)
		}
		w.Time = at(w.Time)
		g, err := pg.Outcome(ctx, id)
		if err != nil || g != w {
			t.Errorf("outcome of %s:\n got %+v, %v\nwant %+v", id, g, err, w)
		}
		states[id] = g.State
	}
	if states["req_crash_1"] != store.OutcomeRecovered || states["req_crash_2"] != store.OutcomeRecovered ||
		states["req_released"] != store.OutcomeReleased || states["req_overrun"] != store.OutcomeSettled {
		t.Errorf("outcome states in the copy: %v", states)
	}
}

// checkCopyTakesCalls holds and settles a call on the copy: the journal
// goes on from the copied counter and the audit still passes.
func checkCopyTakesCalls(t *testing.T, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	before, err := pg.Audit(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Hold(ctx, store.Hold{RequestID: "req_after_copy", Account: "acme", KeyID: "k", Model: "m", Route: "r", Amount: usd}); err != nil {
		t.Fatal(err)
	}
	e, err := pg.Settle(ctx, store.Settlement{RequestID: "req_after_copy", Account: "acme", Charge: 123})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != before.LastSeq+1 || e.BalanceAfter != before.Account.Balance-123 {
		t.Errorf("the first entry after the copy: seq %d, balance after %s; want seq %d, %s",
			e.Seq, e.BalanceAfter, before.LastSeq+1, before.Account.Balance-123)
	}
	if r, err := pg.Audit(ctx, "acme"); err != nil || r.Err() != nil || r.Entries != before.Entries+1 {
		t.Errorf("audit after a call on the copy: %+v, %v, %v", r, err, r.Err())
	}
}

// checkCopiedLogins compares the console logins of the source and the
// copy, hashes and all, and finds no session in the copy.
func checkCopiedLogins(t *testing.T, b *badger.Store, pg *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	wl, err := b.ListLogins(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	gl, err := pg.ListLogins(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(wl) != 2 || len(gl) != len(wl) {
		t.Fatalf("logins: %d in the copy, %d in the source (want 2)", len(gl), len(wl))
	}
	for i, w := range wl {
		w.SetupExpires, w.Created, w.Updated = at(w.SetupExpires), at(w.Created), at(w.Updated)
		if gl[i] != w {
			t.Errorf("login %d:\n got %+v\nwant %+v", i, gl[i], w)
		}
	}
	if _, err := pg.Session(ctx, store.HashKey("cookie")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a console session was copied: %v", err)
	}
}

func sameKey(a, b store.Key) bool {
	return a.ID == b.ID && a.Hash == b.Hash && a.Account == b.Account && a.Route == b.Route &&
		slices.Equal(a.Exclude, b.Exclude) && a.Revoked == b.Revoked && a.Created.Equal(b.Created) &&
		a.Label == b.Label && a.Limit == b.Limit && a.Reset == b.Reset && at(a.Expires).Equal(at(b.Expires)) &&
		slices.Equal(a.Allow, b.Allow) && a.Spent == b.Spent && a.Held == b.Held && a.PeriodStart.Equal(b.PeriodStart)
}

// A copy into books is refused before either side changes: the source's
// open hold is not even recovered.
func TestStoreCopyRefusesBooks(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	src := buildSource(t)
	pg, err := postgres.Open(ctx, dsn, postgres.Options{RenewEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := pg.Credit(ctx, "other", usd, "live books"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = copyStore(ctx, "badger:"+src.dataDir, dsn, &out, quiet)
	if !errors.Is(err, postgres.ErrNotEmpty) || !strings.Contains(err.Error(), `1 account (the first "other"), 1 journal entry`) {
		t.Fatalf("copy into books: %v", err)
	}
	if out.Len() > 0 {
		t.Errorf("a refused copy printed %q", out.String())
	}
	accts, err := pg.ListAccounts(ctx, "", 0)
	if err != nil || len(accts) != 1 || accts[0].ID != "other" || accts[0].Balance != usd {
		t.Errorf("the destination changed: %+v, %v", accts, err)
	}
	if es, err := pg.Charges(ctx, "other", 10); err != nil || len(es) != 1 {
		t.Errorf("the destination's journal changed: %+v, %v", es, err)
	}
	if keys, err := pg.ListKeys(ctx, ""); err != nil || len(keys) != 0 {
		t.Errorf("keys in the destination: %d, %v", len(keys), err)
	}
	b, err := badger.Open(filepath.Join(src.dataDir, "ledger"), badger.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Outcome(ctx, "req_crash_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the source changed: the open hold has an outcome (%v)", err)
	}
}

// A ledger another store has open (a running gateway) is refused, clearly,
// before the destination is touched.
func TestStoreCopyLockedSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := badger.Open(filepath.Join(dir, "ledger"), badger.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Credit(context.Background(), "acme", usd, ""); err != nil {
		t.Fatal(err)
	}
	err = copyStore(context.Background(), "badger:"+dir, "postgres://nobody@127.0.0.1:1/none", &bytes.Buffer{}, quiet)
	if !errors.Is(err, badger.ErrLocked) || !strings.Contains(err.Error(), "the ledger is in use by another process; stop the gateway that has it open") {
		t.Fatalf("copy of a ledger in use: %v", err)
	}
	t.Logf("copy of a ledger in use: %v", err)
}

func TestLedgerDir(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	ledger := filepath.Join(data, "ledger")
	b, err := badger.Open(ledger, badger.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	both := t.TempDir()
	for _, d := range []string{both, filepath.Join(both, "ledger")} {
		b, err := badger.Open(d, badger.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	empty := t.TempDir()
	cases := []struct {
		name, dir, want, err string
	}{
		{"data_dir", data, ledger, ""},
		{"ledger", ledger, ledger, ""},
		{"both", both, "", "is ambiguous"},
		{"none", empty, "", "no Badger ledger there"},
		{"missing", filepath.Join(empty, "nope"), "", "no Badger ledger there"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ledgerDir(tc.dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ledgerDir(%s): %q, %v; want an error containing %q", tc.dir, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ledgerDir(%s): %q, %v; want %q", tc.dir, got, err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(empty, "nope")); !os.IsNotExist(err) {
		t.Error("ledgerDir created the directory it looked for")
	}
	for _, from := range []string{"./data", "badger:", "postgres://x"} {
		if err := copyStore(context.Background(), from, "postgres://127.0.0.1:1/x", &bytes.Buffer{}, quiet); err == nil || !strings.Contains(err.Error(), "want badger:DIR") {
			t.Errorf("-from %q: %v", from, err)
		}
	}
	for _, to := range []string{"", "mysql://x", "host=127.0.0.1"} {
		err := copyStore(context.Background(), "badger:"+data, to, &bytes.Buffer{}, quiet)
		if err == nil || !strings.Contains(err.Error(), "-to:") {
			t.Errorf("-to %q: %v", to, err)
		}
	}
}

// memBooks is an export and its audits, held in memory.
type memBooks struct {
	accounts []store.ExportedAccount
	keys     []store.Key
	entries  []store.Entry
	jobs     []store.Job
	outcomes []store.Outcome
	logins   []store.Login
	problems map[string][]string // audit problems by account
}

func (m *memBooks) Export(ctx context.Context, to store.Sink) error {
	for _, a := range m.accounts {
		if err := to.Account(a); err != nil {
			return err
		}
	}
	for _, k := range m.keys {
		if err := to.Key(k); err != nil {
			return err
		}
	}
	for _, e := range m.entries {
		if err := to.Entry(e); err != nil {
			return err
		}
	}
	for _, j := range m.jobs {
		if err := to.Job(j); err != nil {
			return err
		}
	}
	for _, o := range m.outcomes {
		if err := to.Outcome(o); err != nil {
			return err
		}
	}
	for _, l := range m.logins {
		if err := to.Login(l); err != nil {
			return err
		}
	}
	return nil
}

func (m *memBooks) Audit(ctx context.Context, account string) (store.AuditReport, error) {
	r := store.AuditReport{Problems: m.problems[account]}
	for _, a := range m.accounts {
		if a.ID == account {
			r.Account = a.Account
		}
	}
	for _, e := range m.entries {
		if e.Account == account {
			r.Entries++
			r.LastSeq = e.Seq
			r.Journal += e.Amount
		}
	}
	return r, nil
}

func (m *memBooks) clone() *memBooks {
	return &memBooks{accounts: slices.Clone(m.accounts), keys: slices.Clone(m.keys), entries: slices.Clone(m.entries),
		jobs: slices.Clone(m.jobs), outcomes: slices.Clone(m.outcomes), logins: slices.Clone(m.logins), problems: map[string][]string{}}
}

// verifyCopy finds every kind of difference, names records by id, never
// shows a key hash, and takes the microseconds PostgreSQL keeps as equal.
func TestVerifyCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 6_007_008, time.UTC)
	hash := strings.Repeat("ab", 32)
	src := &memBooks{
		accounts: []store.ExportedAccount{
			{Account: store.Account{ID: "acme", Balance: 7 * usd, Created: t0}, LastSeq: 2},
			{Account: store.Account{ID: "beta", Balance: 2 * usd, Created: t0}, LastSeq: 1},
		},
		keys: []store.Key{{ID: "key_1", Hash: hash, Account: "acme", Route: "auto", Created: t0}},
		entries: []store.Entry{
			{Seq: 1, Kind: store.KindCredit, Account: "acme", Amount: 10 * usd, BalanceAfter: 10 * usd, Time: t0},
			{Seq: 2, Kind: store.KindCharge, Account: "acme", Amount: -3 * usd, BalanceAfter: 7 * usd, Time: t0, Note: "n"},
			{Seq: 1, Kind: store.KindCredit, Account: "beta", Amount: 2 * usd, BalanceAfter: 2 * usd, Time: t0},
		},
		jobs:     []store.Job{{RequestID: "vid_1", Account: "acme", Amount: usd, Created: t0}},
		outcomes: []store.Outcome{{RequestID: "req_1", Account: "acme", State: store.OutcomeSettled, Charge: 3 * usd, Seq: 2, Time: t0}},
		problems: map[string][]string{},
	}
	same := src.clone()
	for i := range same.entries {
		same.entries[i].Time = at(t0)
	}
	rep, err := verifyCopy(ctx, src, same)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("equal books: %v, %q", err, rep.Problems)
	}
	if rep.Accounts != 2 || rep.Keys != 1 || rep.Entries != 3 || rep.Jobs != 1 || rep.Outcomes != 1 || rep.Balance != 9*usd {
		t.Errorf("report %+v", rep)
	}

	dst := src.clone()
	dst.keys[0].Revoked = true
	dst.keys[0].Spent = usd / 2
	dst.accounts[0].AlertBelow = usd
	dst.entries[1].Note = "m"
	dst.entries[1].Time = t0.Add(time.Microsecond)
	dst.jobs = nil
	dst.outcomes = append(dst.outcomes, store.Outcome{RequestID: "req_2", Account: "beta", State: store.OutcomeReleased})
	dst.problems["beta"] = []string{"balance 1, journal sum 2"}
	dst.accounts[1].Balance = usd
	rep, err = verifyCopy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`account "acme": alert threshold is 0 USD in the source, 1 USD in the destination`,
		`account "beta": balance is 2 USD in the source, 1 USD in the destination`,
		`account "beta": the destination's audit: balance 1, journal sum 2`,
		`account "beta": audit: balance is 2 USD in the source, 1 USD in the destination`,
		`key "key_1" of account "acme": revoked is false in the source, true in the destination`,
		`key "key_1" of account "acme": spend is 0 USD in the source, 0.5 USD in the destination`,
		`journal entry 2 of account "acme": time is 2025-01-02T03:04:05.006007Z in the source, 2025-01-02T03:04:05.006008Z in the destination`,
		`journal entry 2 of account "acme": note is "n" in the source, "m" in the destination`,
		`job "vid_1" is in the source only`,
		`outcome of "req_2" is in the destination only`,
	}
	if !slices.Equal(rep.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(rep.Problems, "\n"), strings.Join(want, "\n"))
	}
	var printed bytes.Buffer
	rep.print(&printed)
	if !strings.Contains(printed.String(), "verification FAILED: 10 problems") || strings.Contains(printed.String(), hash) {
		t.Errorf("printed:\n%s", printed.String())
	}
	// A key whose hash differs is two keys, one on each side, named by id.
	dst = src.clone()
	dst.keys[0].Hash = strings.Repeat("cd", 32)
	rep, _ = verifyCopy(ctx, src, dst)
	printed.Reset()
	rep.print(&printed)
	if len(rep.Problems) != 2 || !strings.Contains(printed.String(), `key "key_1" of account "acme" is in the source only`) ||
		strings.Contains(printed.String(), hash) || strings.Contains(printed.String(), dst.keys[0].Hash) {
		t.Errorf("a key with another hash:\n%s", printed.String())
	}
}

// verifyCopy counts and compares console logins, and reports a hash that
// differs without showing either.
func TestVerifyCopyLogins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 6_007_008, time.UTC)
	src := &memBooks{
		accounts: []store.ExportedAccount{{Account: store.Account{ID: "acme", Created: t0}}},
		logins: []store.Login{
			{Email: "alice@example.com", Account: "acme", PasswordHash: "$argon2id$secret-phc", Created: t0, Updated: t0},
			{Email: "bob@example.com", Account: "acme", SetupHash: store.HashKey("rls-secret"), SetupExpires: t0, Created: t0, Updated: t0},
		},
		problems: map[string][]string{},
	}
	rep, err := verifyCopy(ctx, src, src.clone())
	if err != nil || len(rep.Problems) != 0 || rep.Logins != 2 {
		t.Fatalf("equal books: %v, %d logins, %q", err, rep.Logins, rep.Problems)
	}
	dst := src.clone()
	dst.logins[0].PasswordHash = "$argon2id$other-phc"
	dst.logins[0].Updated = t0.Add(time.Second)
	dst.logins[1].SetupHash = store.HashKey("rls-other")
	rep, err = verifyCopy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`console login "alice@example.com" of account "acme": updated is 2025-01-02T03:04:05.006007Z in the source, 2025-01-02T03:04:06.006007Z in the destination`,
		`console login "alice@example.com" of account "acme": the password hash differs`,
		`console login "bob@example.com" of account "acme": the setup token's hash differs`,
	}
	if !slices.Equal(rep.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(rep.Problems, "\n"), strings.Join(want, "\n"))
	}
	var printed bytes.Buffer
	rep.print(&printed)
	for _, secret := range []string{"phc", src.logins[1].SetupHash, dst.logins[1].SetupHash} {
		if strings.Contains(printed.String(), secret) {
			t.Errorf("the report shows a hash:\n%s", printed.String())
		}
	}
}

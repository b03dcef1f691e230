package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/badger"
	"github.com/modelrelay/modelrelay/store/postgres"
)

// runStore runs `relay store copy`.
func runStore(args []string) error {
	_, rest, err := subcommand(args, "store", "copy")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("store copy", flag.ContinueOnError)
	from := fs.String("from", "", "the source: badger:DIR, where DIR is a data_dir (whose ledger is DIR/ledger) or a ledger")
	to := fs.String("to", "", "the destination: a postgres:// URL of an empty database (default $"+store.DatabaseURLEnv+")")
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return exitCode(2)
	}
	if err := noArgs("store copy", pos); err != nil {
		return err
	}
	if *to == "" {
		*to = os.Getenv(store.DatabaseURLEnv)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return copyStore(ctx, *from, *to, os.Stdout, log)
}

// copyStore copies the Badger ledger from names (badger:DIR) into the empty
// PostgreSQL database at dsn, checks the copy against its source and writes
// a summary to out. In order: it opens the ledger (which takes its lock, so
// a gateway running on it makes the copy fail), opens and migrates the
// destination and checks that it holds no books, releases the holds that
// ended processes left (as relay serve does at start) and refuses if any
// hold is still open, imports in one transaction, and verifies. A refusal
// before the import changes neither side.
func copyStore(ctx context.Context, from, dsn string, out io.Writer, log *slog.Logger) error {
	dir, ok := strings.CutPrefix(from, store.DriverBadger+":")
	if !ok || dir == "" {
		return fmt.Errorf("store copy: -from: want badger:DIR (a data_dir or its ledger), got %q", from)
	}
	ledger, err := ledgerDir(dir)
	if err != nil {
		return err
	}
	dest, err := describeDSN(dsn)
	if err != nil {
		return err
	}
	src, err := badger.Open(ledger, badger.Options{SyncWrites: true, Logger: log})
	if errors.Is(err, badger.ErrLocked) {
		return fmt.Errorf("store copy: the source %s: %w; stop the gateway that has it open (one process at a time may open a Badger ledger), then copy", ledger, badger.ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("store copy: open the source: %w", err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 4, StatementTimeout: -1, RenewEvery: -1, Logger: log})
	if err != nil {
		return fmt.Errorf("store copy: open the destination %s: %w", dest, err)
	}
	defer dst.Close()
	if err := dst.CheckEmpty(ctx); err != nil {
		return fmt.Errorf("store copy: the destination %s: %w; a copy goes only into an empty database", dest, err)
	}
	released, err := src.RecoverHolds(ctx)
	if err != nil {
		return fmt.Errorf("store copy: release the holds ended processes left in the source: %w", err)
	}
	if released > 0 {
		fmt.Fprintf(out, "released %d %s left open by a process that ended (as relay serve does at start)\n", released, plural(int64(released), "hold", "holds"))
	}
	holds, err := src.OpenHolds(ctx)
	if err != nil {
		return fmt.Errorf("store copy: the source's open holds: %w", err)
	}
	if len(holds) > 0 {
		return fmt.Errorf("store copy: the source still has %d open %s (the first %q, account %q); they must end before a copy",
			len(holds), plural(int64(len(holds)), "hold", "holds"), holds[0].RequestID, holds[0].Account)
	}
	if _, err := dst.Import(ctx, src); err != nil {
		return fmt.Errorf("store copy: nothing was copied: %w", err)
	}
	rep, err := verifyCopy(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("store copy: the copy into %s is committed, but checking it failed: %w", dest, err)
	}
	fmt.Fprintf(out, "copied %s into %s\n", ledger, dest)
	rep.print(out)
	if len(rep.Problems) > 0 {
		return fmt.Errorf("store copy: the copy in %s does not match its source; drop and re-create that database before copying again", dest)
	}
	return nil
}

// ledgerDir resolves the DIR of badger:DIR to a ledger directory (one with
// badger's MANIFEST): DIR/ledger, when DIR is a data_dir, or DIR itself.
func ledgerDir(dir string) (string, error) {
	isLedger := func(d string) bool {
		fi, err := os.Stat(filepath.Join(d, "MANIFEST"))
		return err == nil && fi.Mode().IsRegular()
	}
	inData, direct := filepath.Join(dir, "ledger"), dir
	switch a, b := isLedger(inData), isLedger(direct); {
	case a && b:
		return "", fmt.Errorf("store copy: -from badger:%s is ambiguous: both %s and %s are Badger ledgers; name the one to copy", dir, inData, direct)
	case a:
		return inData, nil
	case b:
		return direct, nil
	}
	return "", fmt.Errorf("store copy: -from badger:%s: no Badger ledger there (neither %s nor %s has a MANIFEST)", dir, inData, direct)
}

// describeDSN names the database of dsn for messages: host, port and
// database, never the user's password.
func describeDSN(dsn string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		if dsn == "" {
			return "", fmt.Errorf("store copy: -to: required, a postgres:// URL (or set %s)", store.DatabaseURLEnv)
		}
		return "", errors.New("store copy: -to: want a postgres:// or postgresql:// URL")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", errors.New("store copy: -to: not a PostgreSQL URL that parses")
	}
	return fmt.Sprintf("PostgreSQL database %q on %s:%d", cfg.Database, cfg.Host, cfg.Port), nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// books is what verifyCopy reads of each side.
type books interface {
	store.Exporter
	Audit(ctx context.Context, account string) (store.AuditReport, error)
}

// maxProblems bounds the problems a copyReport lists; it counts the rest.
const maxProblems = 50

// copyReport is what verifyCopy found: the source's counts and total
// balance, and every difference.
type copyReport struct {
	Accounts, Keys, Entries, Jobs, Outcomes, Logins int64
	Balance                                         pricing.Nano // Σ the source's balances
	BalanceOverflows                                bool         // Σ is beyond int64 nano-USD
	Problems                                        []string     // at most maxProblems
	More                                            int          // problems beyond those
}

func (r *copyReport) problem(format string, args ...any) {
	if len(r.Problems) >= maxProblems {
		r.More++
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *copyReport) print(w io.Writer) {
	total := r.Balance.String() + " USD"
	if r.BalanceOverflows {
		total = "beyond 9223372036.854775807 USD (too large to sum exactly)"
	}
	fmt.Fprintf(w, "  accounts        %d\n  keys            %d\n  journal entries %d\n  jobs            %d\n  hold outcomes   %d\n  console logins  %d\n  total balance   %s\n",
		r.Accounts, r.Keys, r.Entries, r.Jobs, r.Outcomes, r.Logins, total)
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "verified: both sides hold the same accounts (balance, held, journal counter), journal entries, keys, jobs, hold outcomes and console logins, and every account's audit is clean on both")
		return
	}
	fmt.Fprintf(w, "verification FAILED: %d %s\n", len(r.Problems)+r.More, plural(int64(len(r.Problems)+r.More), "problem", "problems"))
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  "+p)
	}
	if r.More > 0 {
		fmt.Fprintf(w, "  … and %d more\n", r.More)
	}
}

// verifyCopy reads both sides' exports side by side, in store.Sink's order,
// and compares them record by record (a merge join: a record on one side
// only is reported, and the comparison goes on), and audits every account
// on both sides: each audit must be clean, and they must agree (balance,
// held, open holds, entries, last sequence number, Σ journal, credits,
// charges, refunds). Times compare at the microsecond PostgreSQL keeps. The
// report never holds a key hash. Nothing is held in memory but one record
// of each side.
func verifyCopy(ctx context.Context, src, dst books) (copyReport, error) {
	var rep copyReport
	nextA, stopA, errA := pull(ctx, src)
	defer stopA()
	nextB, stopB, errB := pull(ctx, dst)
	defer stopB()
	a, okA := nextA()
	b, okB := nextB()
	for okA || okB {
		c := 0
		switch {
		case !okB:
			c = -1
		case !okA:
			c = 1
		default:
			c = compareRecords(a, b)
		}
		switch {
		case c < 0:
			rep.count(a)
			rep.problem("%s is in the source only", a.name())
			a, okA = nextA()
		case c > 0:
			rep.problem("%s is in the destination only", b.name())
			b, okB = nextB()
		default:
			rep.count(a)
			rep.diff(a, b)
			if a.sec == secAccount {
				if err := rep.audit(ctx, a.acct.ID, src, dst); err != nil {
					return rep, err
				}
			}
			a, okA = nextA()
			b, okB = nextB()
		}
	}
	if err := errA(); err != nil {
		return rep, fmt.Errorf("read the source: %w", err)
	}
	if err := errB(); err != nil {
		return rep, fmt.Errorf("read the destination: %w", err)
	}
	return rep, nil
}

// count counts a record of the source.
func (r *copyReport) count(x record) {
	switch x.sec {
	case secAccount:
		r.Accounts++
		sum := r.Balance + x.acct.Balance
		if (x.acct.Balance > 0 && sum < r.Balance) || (x.acct.Balance < 0 && sum > r.Balance) {
			r.BalanceOverflows = true
		}
		r.Balance = sum
	case secKey:
		r.Keys++
	case secEntry:
		r.Entries++
	case secJob:
		r.Jobs++
	case secOutcome:
		r.Outcomes++
	case secLogin:
		r.Logins++
	}
}

// audit audits account on both sides and compares the reports.
func (r *copyReport) audit(ctx context.Context, account string, src, dst books) error {
	ra, err := src.Audit(ctx, account)
	if err != nil {
		return fmt.Errorf("audit account %q in the source: %w", account, err)
	}
	rb, err := dst.Audit(ctx, account)
	if err != nil {
		return fmt.Errorf("audit account %q in the destination: %w", account, err)
	}
	for _, p := range ra.Problems {
		r.problem("account %q: the source's audit: %s", account, p)
	}
	for _, p := range rb.Problems {
		r.problem("account %q: the destination's audit: %s", account, p)
	}
	r.fields(fmt.Sprintf("account %q: audit", account),
		field{"balance", ra.Account.Balance, rb.Account.Balance},
		field{"held", ra.Account.Held, rb.Account.Held},
		field{"open holds", ra.OpenHolds, rb.OpenHolds},
		field{"entries", ra.Entries, rb.Entries},
		field{"last seq", ra.LastSeq, rb.LastSeq},
		field{"Σ journal", ra.Journal, rb.Journal},
		field{"credits", ra.Credits, rb.Credits},
		field{"charges", ra.Charges, rb.Charges},
		field{"refunds", ra.Refunds, rb.Refunds},
	)
	return nil
}

// field is one field of a record on both sides.
type field struct {
	name string
	a, b any
}

// fields reports each field of what that differs. Values are comparable
// (a list is compared as its %q text); times compare at the microsecond.
func (r *copyReport) fields(what string, fs ...field) {
	for _, f := range fs {
		if ta, ok := f.a.(time.Time); ok {
			if tb, ok := f.b.(time.Time); ok && at(ta).Equal(at(tb)) {
				continue
			}
		} else if f.a == f.b {
			continue
		}
		r.problem("%s: %s is %s in the source, %s in the destination", what, f.name, show(f.a), show(f.b))
	}
}

func show(v any) string {
	switch v := v.(type) {
	case pricing.Nano:
		return v.String() + " USD"
	case string:
		return fmt.Sprintf("%q", v)
	case time.Time:
		return at(v).Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%+v", v)
}

// at is t as PostgreSQL keeps it: UTC, to the microsecond.
func at(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// diff reports how two records with the same identity differ.
func (r *copyReport) diff(a, b record) {
	switch a.sec {
	case secAccount:
		x, y := a.acct, b.acct
		r.fields(a.name(),
			field{"balance", x.Balance, y.Balance},
			field{"held", x.Held, y.Held},
			field{"journal counter", x.LastSeq, y.LastSeq},
			field{"created", x.Created, y.Created},
			field{"alert threshold", x.AlertBelow, y.AlertBelow})
	case secKey:
		x, y := a.key, b.key
		r.fields(a.name(),
			field{"id", x.ID, y.ID},
			field{"account", x.Account, y.Account},
			field{"route", x.Route, y.Route},
			field{"exclusions", fmt.Sprintf("%q", x.Exclude), fmt.Sprintf("%q", y.Exclude)},
			field{"revoked", x.Revoked, y.Revoked},
			field{"created", x.Created, y.Created},
			field{"label", x.Label, y.Label},
			field{"limit", x.Limit, y.Limit},
			field{"limit reset", x.Reset, y.Reset},
			field{"expiry", x.Expires, y.Expires},
			field{"allow-list", fmt.Sprintf("%q", x.Allow), fmt.Sprintf("%q", y.Allow)},
			field{"spend", x.Spent, y.Spent},
			field{"held", x.Held, y.Held},
			field{"period start", x.PeriodStart, y.PeriodStart})
	case secEntry:
		x, y := a.entry, b.entry
		r.fields(a.name(),
			field{"kind", x.Kind, y.Kind},
			field{"request id", x.RequestID, y.RequestID},
			field{"key id", x.KeyID, y.KeyID},
			field{"model", x.Model, y.Model},
			field{"route", x.Route, y.Route},
			field{"endpoint", x.Endpoint, y.Endpoint},
			field{"usage", x.Usage, y.Usage},
			field{"hold", x.HoldAmount, y.HoldAmount},
			field{"amount", x.Amount, y.Amount},
			field{"balance after", x.BalanceAfter, y.BalanceAfter},
			field{"time", x.Time, y.Time},
			field{"note", x.Note, y.Note})
	case secJob:
		x, y := a.job, b.job
		r.fields(a.name(),
			field{"account", x.Account, y.Account},
			field{"key id", x.KeyID, y.KeyID},
			field{"model", x.Model, y.Model},
			field{"route", x.Route, y.Route},
			field{"line", x.Line, y.Line},
			field{"amount", x.Amount, y.Amount},
			field{"refunded", x.Refunded, y.Refunded},
			field{"created", x.Created, y.Created})
	case secOutcome:
		x, y := a.outcome, b.outcome
		r.fields(a.name(),
			field{"account", x.Account, y.Account},
			field{"state", x.State, y.State},
			field{"hold", x.HoldAmount, y.HoldAmount},
			field{"charge", x.Charge, y.Charge},
			field{"seq", x.Seq, y.Seq},
			field{"owner", x.Owner, y.Owner},
			field{"reason", x.Reason, y.Reason},
			field{"time", x.Time, y.Time})
	case secLogin:
		x, y := a.login, b.login
		r.fields(a.name(),
			field{"account", x.Account, y.Account},
			field{"setup expiry", x.SetupExpires, y.SetupExpires},
			field{"created", x.Created, y.Created},
			field{"updated", x.Updated, y.Updated})
		// Hashes are compared, never shown.
		if x.PasswordHash != y.PasswordHash {
			r.problem("%s: the password hash differs", a.name())
		}
		if x.SetupHash != y.SetupHash {
			r.problem("%s: the setup token's hash differs", a.name())
		}
	}
}

// Sections of an export, in store.Sink's order.
const (
	secAccount = iota
	secKey
	secEntry
	secJob
	secOutcome
	secLogin
)

// record is one record of an export.
type record struct {
	sec     int
	acct    store.ExportedAccount
	key     store.Key
	entry   store.Entry
	job     store.Job
	outcome store.Outcome
	login   store.Login
}

// name names the record for a report: ids, never a key hash.
func (x record) name() string {
	switch x.sec {
	case secAccount:
		return fmt.Sprintf("account %q", x.acct.ID)
	case secKey:
		return fmt.Sprintf("key %q of account %q", x.key.ID, x.key.Account)
	case secEntry:
		return fmt.Sprintf("journal entry %d of account %q", x.entry.Seq, x.entry.Account)
	case secJob:
		return fmt.Sprintf("job %q", x.job.RequestID)
	case secLogin:
		return fmt.Sprintf("console login %q of account %q", x.login.Email, x.login.Account)
	}
	return fmt.Sprintf("outcome of %q", x.outcome.RequestID)
}

// compareRecords orders records as store.Sink does: by section, then id
// (bytewise), key hash, or account and sequence number.
func compareRecords(a, b record) int {
	if c := cmp.Compare(a.sec, b.sec); c != 0 {
		return c
	}
	switch a.sec {
	case secAccount:
		return strings.Compare(a.acct.ID, b.acct.ID)
	case secKey:
		return strings.Compare(a.key.Hash, b.key.Hash)
	case secEntry:
		if c := strings.Compare(a.entry.Account, b.entry.Account); c != 0 {
			return c
		}
		return cmp.Compare(a.entry.Seq, b.entry.Seq)
	case secJob:
		return strings.Compare(a.job.RequestID, b.job.RequestID)
	case secLogin:
		return strings.Compare(a.login.Email, b.login.Email)
	}
	return strings.Compare(a.outcome.RequestID, b.outcome.RequestID)
}

// errStopped ends an export whose reader stopped reading.
var errStopped = errors.New("stopped reading the export")

// pull turns ex's export into a reader of one record at a time: next
// returns the next record (false at the end), stop ends the export early,
// and result is its error once next has returned false.
func pull(ctx context.Context, ex store.Exporter) (next func() (record, bool), stop func(), result func() error) {
	var err error
	next, stop = iter.Pull(func(yield func(record) bool) {
		err = ex.Export(ctx, recordSink(yield))
	})
	return next, stop, func() error {
		if errors.Is(err, errStopped) {
			return nil
		}
		return err
	}
}

// recordSink is a store.Sink that yields each record.
type recordSink func(record) bool

func (y recordSink) give(x record) error {
	if !y(x) {
		return errStopped
	}
	return nil
}

func (y recordSink) Account(a store.ExportedAccount) error {
	return y.give(record{sec: secAccount, acct: a})
}
func (y recordSink) Key(k store.Key) error     { return y.give(record{sec: secKey, key: k}) }
func (y recordSink) Entry(e store.Entry) error { return y.give(record{sec: secEntry, entry: e}) }
func (y recordSink) Job(j store.Job) error     { return y.give(record{sec: secJob, job: j}) }
func (y recordSink) Outcome(o store.Outcome) error {
	return y.give(record{sec: secOutcome, outcome: o})
}
func (y recordSink) Login(l store.Login) error { return y.give(record{sec: secLogin, login: l}) }

package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// ErrNotEmpty is returned by Import and CheckEmpty when the database already
// holds books: a copy is never merged into live books.
var ErrNotEmpty = errors.New("the database already holds books")

// importBatch is how many rows one COPY of Import carries.
const importBatch = 2000

// importLockTimeout bounds Import's wait for its table locks (a client in a
// long transaction on the database).
const importLockTimeout = 10 * time.Second

// ImportCounts is what Import wrote.
type ImportCounts struct {
	Accounts, Keys, Entries, Jobs, Outcomes, Logins int64
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CheckEmpty returns nil when the store holds no books (no account, key,
// journal entry, hold, job, outcome or console login), and otherwise an error wrapping
// ErrNotEmpty that says what it found.
func (s *Store) CheckEmpty(ctx context.Context) error {
	err := checkEmpty(ctx, s.pool)
	if err != nil && !errors.Is(err, ErrNotEmpty) {
		return mapErr("check empty", err)
	}
	return err
}

func checkEmpty(ctx context.Context, q querier) error {
	var (
		accounts, keys, entries, holds, jobs, outcomes, logins int64
		first                                                  *string
	)
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM accounts), (SELECT min(id) FROM accounts),
	(SELECT count(*) FROM keys), (SELECT count(*) FROM journal), (SELECT count(*) FROM holds),
	(SELECT count(*) FROM jobs), (SELECT count(*) FROM outcomes), (SELECT count(*) FROM logins)`).
		Scan(&accounts, &first, &keys, &entries, &holds, &jobs, &outcomes, &logins)
	if err != nil {
		return err
	}
	var found []string
	for _, c := range []struct {
		n         int64
		one, many string
	}{{accounts, "account", "accounts"}, {keys, "key", "keys"}, {entries, "journal entry", "journal entries"},
		{holds, "open hold", "open holds"}, {jobs, "job", "jobs"}, {outcomes, "hold outcome", "hold outcomes"},
		{logins, "console login", "console logins"}} {
		switch {
		case c.n == 1:
			found = append(found, "1 "+c.one)
		case c.n > 1:
			found = append(found, fmt.Sprintf("%d %s", c.n, c.many))
		}
		if c.one == "account" && c.n > 0 && first != nil {
			found[0] += fmt.Sprintf(" (the first %q)", *first)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("postgres: %w: it has %s", ErrNotEmpty, strings.Join(found, ", "))
}

// Import copies the books of from into this store, which must be empty
// (ErrNotEmpty otherwise), and returns how many records it wrote. It runs
// in one transaction, so a failed import leaves the store empty: it locks
// every table against writers (waiting at most 10 s for a client that has
// one in use), checks that they are empty, streams from's export into them
// by COPY in batches of 2,000 rows, and commits. Ids, key hashes, sequence
// numbers, balances, balance_after, usage, notes, flags and times are kept
// (times at the microsecond PostgreSQL keeps), and each account's counter
// is its LastSeq, so its next entry continues the numbering.
//
// Keys keep their settings and their spend (Spent in the period from
// PeriodStart), accounts their low-balance threshold, console logins their
// password hash and any pending setup token (sessions are not copied).
//
// It refuses, before anything is committed, books that do not hold: an
// account or key with open holds (Held ≠ 0: end or recover them first),
// key settings CreateKey would refuse, a journal
// whose sequence numbers do not run 1, 2, 3 … up to the account's LastSeq,
// an entry whose balance_after is not the running sum or of an unknown
// kind, a recovery entry that moves money, a balance that is not its
// journal's sum, a key, entry or job of an account not given before it, and
// records out of store.Sink's order.
func (s *Store) Import(ctx context.Context, from store.Exporter) (ImportCounts, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ImportCounts{}, mapErr("import", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	for _, stmt := range []string{
		`SET LOCAL statement_timeout = 0`,
		fmt.Sprintf(`SET LOCAL lock_timeout = %d`, importLockTimeout.Milliseconds()),
		`LOCK TABLE accounts, keys, journal, holds, jobs, outcomes, logins IN EXCLUSIVE MODE`,
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
				return ImportCounts{}, fmt.Errorf("postgres: import: the tables stayed in use by another client for %s (is a relay serve running on this database?): %w", importLockTimeout, err)
			}
			return ImportCounts{}, mapErr("import", err)
		}
	}
	if err := checkEmpty(ctx, tx); err != nil {
		if errors.Is(err, ErrNotEmpty) {
			return ImportCounts{}, fmt.Errorf("postgres: import refused: %w", err)
		}
		return ImportCounts{}, mapErr("import", err)
	}
	im := &importer{ctx: ctx, tx: tx, accounts: make(map[string]*tally)}
	if err := from.Export(ctx, im); err != nil {
		return ImportCounts{}, fmt.Errorf("postgres: import: %w", err)
	}
	if err := im.flush(); err != nil {
		return ImportCounts{}, fmt.Errorf("postgres: import: %w", err)
	}
	if err := im.finish(); err != nil {
		return ImportCounts{}, fmt.Errorf("postgres: import: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return ImportCounts{}, mapErr("import: commit", err)
	}
	return im.n, nil
}

// Sections of an export, in store.Sink's order.
const (
	secAccounts = iota
	secKeys
	secJournal
	secJobs
	secOutcomes
	secLogins
)

var sections = [...]struct {
	table string
	cols  []string
}{
	secAccounts: {"accounts", []string{"id", "balance", "held", "seq", "created", "alert_below"}},
	secKeys: {"keys", []string{"id", "hash", "account", "route", "exclude", "revoked", "created",
		"label", "limit_nano", "reset", "expires", "allow", "spent", "held", "period_start"}},
	secJournal: {"journal", []string{"account", "seq", "kind", "request_id", "key_id", "model", "route", "endpoint",
		"usage", "hold_amount", "amount", "balance_after", "time", "note"}},
	secJobs:     {"jobs", []string{"request_id", "account", "key_id", "model", "route", "line", "amount", "refunded", "created"}},
	secOutcomes: {"outcomes", []string{"request_id", "account", "state", "hold_amount", "charge", "seq", "owner", "reason", "time"}},
	secLogins:   {"logins", []string{"email", "account", "password_hash", "setup_hash", "setup_expires", "created", "updated"}},
}

// tally is what Import checks of an account's journal as it streams past.
type tally struct {
	lastSeq uint64 // the account's counter, as exported
	balance int64
	seq     uint64 // the last entry seen
	sum     int64  // Σ the amounts seen
}

// importer is the store.Sink of Import: it checks each record and buffers
// rows of the current section, written by one COPY per batch.
type importer struct {
	ctx      context.Context
	tx       pgx.Tx
	sec      int
	rows     [][]any
	accounts map[string]*tally
	n        ImportCounts
}

// add buffers row of section sec, writing the rows of an earlier section
// first (an account's row must be there before its keys and journal).
func (im *importer) add(sec int, row []any) error {
	if sec < im.sec {
		return fmt.Errorf("the export is out of order: %s after %s", sections[sec].table, sections[im.sec].table)
	}
	if sec != im.sec {
		if err := im.flush(); err != nil {
			return err
		}
		im.sec = sec
	}
	im.rows = append(im.rows, row)
	if len(im.rows) >= importBatch {
		return im.flush()
	}
	return nil
}

// flush writes the buffered rows by COPY.
func (im *importer) flush() error {
	if len(im.rows) == 0 {
		return nil
	}
	s := sections[im.sec]
	n, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{s.table}, s.cols, pgx.CopyFromRows(im.rows))
	if err != nil {
		return mapErr("copy into "+s.table, err)
	}
	if n != int64(len(im.rows)) {
		return fmt.Errorf("copy into %s: %d of %d rows written", s.table, n, len(im.rows))
	}
	im.rows = im.rows[:0]
	return nil
}

// account returns the tally of an account given before, or an error naming
// what referred to it.
func (im *importer) account(id, what string) (*tally, error) {
	t := im.accounts[id]
	if t == nil {
		return nil, fmt.Errorf("%s: account %q is not in the export (or comes after it)", what, id)
	}
	return t, nil
}

func (im *importer) Account(a store.ExportedAccount) error {
	if err := store.CheckAccountID(a.ID); err != nil {
		return err
	}
	if im.accounts[a.ID] != nil {
		return fmt.Errorf("account %q is exported twice", a.ID)
	}
	if a.Held != 0 {
		return fmt.Errorf("account %q has open holds (%s USD held): end or recover them before the copy", a.ID, a.Held)
	}
	if a.LastSeq > math.MaxInt64 {
		return fmt.Errorf("account %q: journal counter %d does not fit a bigint", a.ID, a.LastSeq)
	}
	if a.AlertBelow < 0 {
		return fmt.Errorf("account %q: alert threshold %s USD is negative", a.ID, a.AlertBelow)
	}
	im.accounts[a.ID] = &tally{lastSeq: a.LastSeq, balance: int64(a.Balance)}
	im.n.Accounts++
	return im.add(secAccounts, []any{a.ID, int64(a.Balance), int64(0), int64(a.LastSeq), exactTime(a.Created), int64(a.AlertBelow)})
}

func (im *importer) Key(k store.Key) error {
	if err := store.CheckID("key", k.ID); err != nil {
		return err
	}
	if err := store.CheckKeyHash(k.Hash); err != nil {
		return fmt.Errorf("key %q: %w", k.ID, err)
	}
	if _, err := im.account(k.Account, fmt.Sprintf("key %q", k.ID)); err != nil {
		return err
	}
	if k.Route == "" {
		return fmt.Errorf("key %q: route is empty", k.ID)
	}
	if err := store.CheckKeySettings(&k); err != nil {
		return err
	}
	if k.Held != 0 {
		return fmt.Errorf("key %q has open holds (%s USD held): end or recover them before the copy", k.ID, k.Held)
	}
	if k.Spent < 0 {
		return fmt.Errorf("key %q: spend %s USD is negative", k.ID, k.Spent)
	}
	im.n.Keys++
	return im.add(secKeys, []any{k.ID, k.Hash, k.Account, k.Route, nonNil(k.Exclude), k.Revoked, exactTime(k.Created),
		k.Label, int64(k.Limit), k.Reset, orNull(k.Expires), nonNil(k.Allow), int64(k.Spent), int64(0), orNull(k.PeriodStart)})
}

func (im *importer) Entry(e store.Entry) error {
	t, err := im.account(e.Account, fmt.Sprintf("journal entry %d", e.Seq))
	if err != nil {
		return err
	}
	if e.Seq != t.seq+1 {
		return fmt.Errorf("journal of account %q: entry %d follows entry %d", e.Account, e.Seq, t.seq)
	}
	switch e.Kind {
	case store.KindCredit, store.KindCharge, store.KindRefund:
	case store.KindRecovery:
		if e.Amount != 0 {
			return fmt.Errorf("journal of account %q: recovery entry %d moves %s USD", e.Account, e.Seq, e.Amount)
		}
	default:
		return fmt.Errorf("journal of account %q: entry %d has unknown kind %q", e.Account, e.Seq, e.Kind)
	}
	sum := t.sum + int64(e.Amount)
	if (e.Amount > 0 && sum < t.sum) || (e.Amount < 0 && sum > t.sum) {
		return fmt.Errorf("journal of account %q: the sum overflows at entry %d", e.Account, e.Seq)
	}
	if int64(e.BalanceAfter) != sum {
		return fmt.Errorf("journal of account %q: entry %d has balance_after %s USD, the running sum is %s USD",
			e.Account, e.Seq, e.BalanceAfter, pricing.Nano(sum))
	}
	t.seq, t.sum = e.Seq, sum
	usage, err := usageJSON(e.Usage)
	if err != nil {
		return err
	}
	im.n.Entries++
	return im.add(secJournal, []any{e.Account, int64(e.Seq), e.Kind, e.RequestID, e.KeyID, e.Model, e.Route, e.Endpoint,
		string(usage), int64(e.HoldAmount), int64(e.Amount), int64(e.BalanceAfter), exactTime(e.Time), e.Note})
}

func (im *importer) Job(j store.Job) error {
	if err := store.CheckID("job request", j.RequestID); err != nil {
		return err
	}
	if _, err := im.account(j.Account, fmt.Sprintf("job %q", j.RequestID)); err != nil {
		return err
	}
	if j.Amount < 0 {
		return fmt.Errorf("job %q: amount %s USD is negative", j.RequestID, j.Amount)
	}
	im.n.Jobs++
	return im.add(secJobs, []any{j.RequestID, j.Account, j.KeyID, j.Model, j.Route, j.Line, int64(j.Amount), j.Refunded, exactTime(j.Created)})
}

func (im *importer) Outcome(o store.Outcome) error {
	if err := store.CheckID("request", o.RequestID); err != nil {
		return err
	}
	if o.Seq > math.MaxInt64 {
		return fmt.Errorf("outcome of %q: sequence number %d does not fit a bigint", o.RequestID, o.Seq)
	}
	im.n.Outcomes++
	return im.add(secOutcomes, []any{o.RequestID, o.Account, o.State, int64(o.HoldAmount), int64(o.Charge), int64(o.Seq),
		o.Owner, o.Reason, exactTime(o.Time)})
}

func (im *importer) Login(l store.Login) error {
	email, err := store.NormalizeEmail(l.Email)
	if err != nil || email != l.Email {
		return fmt.Errorf("login %q: not a lower-cased bare address", store.ClipNote(l.Email))
	}
	if _, err := im.account(l.Account, fmt.Sprintf("login %q", l.Email)); err != nil {
		return err
	}
	var setup *string
	switch {
	case l.SetupHash == "" && !l.SetupExpires.IsZero(), l.SetupHash != "" && l.SetupExpires.IsZero():
		return fmt.Errorf("login %q: a setup token needs both its hash and its expiry", l.Email)
	case l.SetupHash != "":
		if err := store.CheckKeyHash(l.SetupHash); err != nil {
			return fmt.Errorf("login %q: setup hash: %w", l.Email, err)
		}
		setup = &l.SetupHash
	}
	im.n.Logins++
	return im.add(secLogins, []any{l.Email, l.Account, l.PasswordHash, setup, orNull(l.SetupExpires),
		exactTime(l.Created), exactTime(l.Updated)})
}

// finish checks that every account's journal reached its counter and sums
// to its balance.
func (im *importer) finish() error {
	ids := make([]string, 0, len(im.accounts))
	for id := range im.accounts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := im.accounts[id]
		if t.seq != t.lastSeq {
			return fmt.Errorf("journal of account %q: the last entry is %d, the account's counter %d", id, t.seq, t.lastSeq)
		}
		if t.sum != t.balance {
			return fmt.Errorf("account %q: balance %s USD, its journal sums to %s USD", id, pricing.Nano(t.balance), pricing.Nano(t.sum))
		}
	}
	return nil
}

// exactTime is t as PostgreSQL keeps it: UTC, to the microsecond (the zero
// time stays the zero time, where stamp would make it now).
func exactTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

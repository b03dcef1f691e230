package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const entryCols = `account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, time, note`

func scanEntry(row pgx.Row) (store.Entry, error) {
	var (
		e                   store.Entry
		seq                 int64
		usage               []byte
		hold, amount, after int64
	)
	if err := row.Scan(&e.Account, &seq, &e.Kind, &e.RequestID, &e.KeyID, &e.Model, &e.Route, &e.Endpoint,
		&usage, &hold, &amount, &after, &e.Time, &e.Note); err != nil {
		return store.Entry{}, err
	}
	if len(usage) > 0 {
		if err := json.Unmarshal(usage, &e.Usage); err != nil {
			return store.Entry{}, fmt.Errorf("postgres: journal entry %d of %q: usage: %w", seq, e.Account, err)
		}
	}
	e.Seq, e.HoldAmount, e.Amount, e.BalanceAfter = uint64(seq), pricing.Nano(hold), pricing.Nano(amount), pricing.Nano(after)
	e.Time = e.Time.UTC()
	return e, nil
}

// CreateAccount creates an empty account; ErrExists if it is present.
func (s *Store) CreateAccount(ctx context.Context, id string) (store.Account, error) {
	if err := store.CheckAccountID(id); err != nil {
		return store.Account{}, err
	}
	var a store.Account
	err := s.pool.QueryRow(ctx, `INSERT INTO accounts (id) VALUES ($1) ON CONFLICT (id) DO NOTHING RETURNING id, created`, id).
		Scan(&a.ID, &a.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Account{}, fmt.Errorf("postgres: account %q: %w", id, store.ErrExists)
	}
	if err != nil {
		return store.Account{}, mapErr("create account", err)
	}
	a.Created = a.Created.UTC()
	return a, nil
}

// Credit adds amount (> 0) to the account's balance, creating the account if
// it does not exist, and journals a KindCredit entry, in one statement.
func (s *Store) Credit(ctx context.Context, account string, amount pricing.Nano, note string) (store.Entry, error) {
	if err := store.CheckAccountID(account); err != nil {
		return store.Entry{}, err
	}
	if amount <= 0 {
		return store.Entry{}, fmt.Errorf("postgres: credit to account %q: amount %d nano-USD is not positive", account, amount)
	}
	// The upsert row-locks the account; the journal entry takes the
	// sequence number and balance it produced.
	row := s.pool.QueryRow(ctx, `
WITH a AS (
	INSERT INTO accounts AS acc (id, balance, seq) VALUES ($1, $2::bigint, 1)
	ON CONFLICT (id) DO UPDATE SET balance = acc.balance + EXCLUDED.balance, seq = acc.seq + 1
	RETURNING id, balance, seq)
INSERT INTO journal (account, seq, kind, amount, balance_after, note)
SELECT id, seq, 'credit', $2::bigint, balance, $3::text FROM a
RETURNING `+entryCols, account, int64(amount), store.ClipNote(note))
	e, err := scanEntry(row)
	if err != nil {
		return store.Entry{}, mapErr("credit", err)
	}
	return e, nil
}

// holdSQL takes a hold with relay_hold (migration 0003): the account's
// credit and its key's limit are checked and reserved, and the hold row
// written, in one statement, which answers why not when it does not.
const holdSQL = `SELECT relay_hold($1, $2, $3::bigint, $4, $5, $6, $7, $8::timestamptz, $9, $10::bigint)`

// carveSQL is Carve: the allotment's row (request id $11, of account $2)
// gives up $3 if it holds that much, the key's spend counts the hold (its
// period rolled as relay_hold rolls it; no limit is checked: Allotter) and
// the hold row is written, all or nothing. The account's row is not
// changed (its held already counts the allotment) but it is locked first
// (acc, an InitPlan of src), as every statement that locks an account and
// its key does: a carve that locked the key first would deadlock with a
// settle of the same key. The allotment's row lock orders concurrent
// carves of it; READ COMMITTED re-checks its amount against the newest
// committed row. It answers NULL when the hold was taken, else 'ended'
// (the request id has an outcome), 'held' (it has a hold: an earlier try
// landed, its answer lost — answered, not a unique violation that would
// roll the whole batch back) or 'short'.
const carveSQL = `
WITH acc AS (
	SELECT id FROM accounts WHERE id = $2::text FOR NO KEY UPDATE),
src AS (
	UPDATE holds SET amount = amount - $3::bigint
	WHERE request_id = $11::text AND account = $2::text AND amount >= $3::bigint
	  AND EXISTS (SELECT 1 FROM acc)
	  AND NOT EXISTS (SELECT 1 FROM outcomes WHERE request_id = $1::text)
	  AND NOT EXISTS (SELECT 1 FROM holds WHERE request_id = $1::text)
	RETURNING account),
k AS (
	UPDATE keys SET held = keys.held + $3::bigint,
		spent = relay_spent_at(keys.reset, keys.period_start, keys.spent, $8::timestamptz),
		period_start = greatest(keys.period_start, relay_period_start(keys.reset, $8::timestamptz))
	FROM src WHERE keys.id = $4::text AND keys.account IS NOT DISTINCT FROM src.account
	RETURNING 1),
h AS (
	INSERT INTO holds (request_id, account, key_id, model, route, endpoint, amount, created, owner, lease_until, keyed)
	SELECT $1::text, src.account, $4::text, $5::text, $6::text, $7::text, $3::bigint, $8::timestamptz, $9::text,
		now() + $10::bigint * interval '1 millisecond', EXISTS (SELECT 1 FROM k)
	FROM src
	RETURNING 1)
SELECT CASE WHEN EXISTS (SELECT 1 FROM h) THEN NULL
	WHEN EXISTS (SELECT 1 FROM outcomes WHERE request_id = $1::text) THEN 'ended'
	WHEN EXISTS (SELECT 1 FROM holds WHERE request_id = $1::text) THEN 'held'
	ELSE 'short' END`

// admittedSQL is HoldAdmitted: the hold row is written and counted in the
// account's held and its key's, as relay_hold does but with no check of
// the credit or the limit (the call was admitted against an allotment
// that held it), the account's row first, then the key's, as every
// statement locks them. It answers NULL when the hold was taken, 'ended'
// when the request id has an outcome, 'held' when it has a hold already
// (as carveSQL), 'missing' when the account does not exist.
const admittedSQL = `
WITH a AS (
	UPDATE accounts SET held = held + $3::bigint
	WHERE id = $2::text AND NOT EXISTS (SELECT 1 FROM outcomes WHERE request_id = $1::text)
	  AND NOT EXISTS (SELECT 1 FROM holds WHERE request_id = $1::text)
	RETURNING id),
k AS (
	UPDATE keys SET held = keys.held + $3::bigint,
		spent = relay_spent_at(keys.reset, keys.period_start, keys.spent, $8::timestamptz),
		period_start = greatest(keys.period_start, relay_period_start(keys.reset, $8::timestamptz))
	FROM a WHERE keys.id = $4::text AND keys.account IS NOT DISTINCT FROM a.id
	RETURNING 1),
h AS (
	INSERT INTO holds (request_id, account, key_id, model, route, endpoint, amount, created, owner, lease_until, keyed)
	SELECT $1::text, a.id, $4::text, $5::text, $6::text, $7::text, $3::bigint, $8::timestamptz, $9::text,
		now() + $10::bigint * interval '1 millisecond', EXISTS (SELECT 1 FROM k)
	FROM a
	RETURNING 1)
SELECT CASE WHEN EXISTS (SELECT 1 FROM h) THEN NULL
	WHEN EXISTS (SELECT 1 FROM outcomes WHERE request_id = $1::text) THEN 'ended'
	WHEN EXISTS (SELECT 1 FROM holds WHERE request_id = $1::text) THEN 'held'
	ELSE 'missing' END`

func (s *Store) holdArgs(h store.Hold) []any {
	return []any{h.RequestID, h.Account, int64(h.Amount), h.KeyID, h.Model, h.Route, h.Endpoint,
		stamp(h.Created), s.owner, s.lease.Milliseconds()}
}

// holdStatement is op's statement, a hold's (holdSQL) or a carve's
// (carveSQL, which takes the allotment's request id after a hold's
// arguments), with its arguments.
func (s *Store) holdStatement(op *ledgerOp) (string, []any) {
	switch op.kind {
	case opCarve:
		return carveSQL, append(s.holdArgs(op.hold), op.from)
	case opAdmitted:
		return admittedSQL, s.holdArgs(op.hold)
	}
	return holdSQL, s.holdArgs(op.hold)
}

// settleSQL charges a call and ends its hold, returning the charge entry,
// or no row if the request id has no open hold (see Settle). The charge
// counts in the spend of the key the hold was counted on (keyed), in the
// key's period (only a Hold rolls it); the key's row is locked after the
// account's (k reads a) and found by its id alone.
const settleSQL = `
WITH h AS (
	DELETE FROM holds WHERE request_id = $1 AND ($2::text = '' OR account = $2::text) RETURNING *),
a AS (
	UPDATE accounts acc SET balance = acc.balance - $3::bigint, held = acc.held - h.amount, seq = acc.seq + 1
	FROM h WHERE acc.id = h.account
	RETURNING acc.id, acc.balance, acc.seq),
k AS (
	UPDATE keys SET held = keys.held - h.amount, spent = keys.spent + $3::bigint
	FROM h, a WHERE h.keyed AND keys.id = h.key_id),
o AS (
	INSERT INTO outcomes (request_id, account, state, hold_amount, charge, seq, owner, reason)
	SELECT h.request_id, h.account, 'settled', h.amount, $3::bigint, a.seq, h.owner, $5::text FROM h, a
	ON CONFLICT (request_id) DO NOTHING)
INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, note)
SELECT a.id, a.seq, 'charge', h.request_id, h.key_id, h.model, h.route, h.endpoint, $4::jsonb, h.amount, -$3::bigint, a.balance, $5::text
FROM a, h
RETURNING ` + entryCols

// settlesSQL is settleSQL for several settles of one account ($1) at
// once, as a batch carries them in a row: the request ids, charges, usages
// and notes are arrays ($2–$5, in the batch's order, no request id twice).
// The holds found are deleted, the account charged and its held lowered by
// their sums, each key by its own, and each charge entry gets the sequence
// number and balance it would have had one statement at a time (the
// running sums in the batch's order). It returns the charge entries; a
// request id with no open hold has none, as settleSQL returns no row. One
// statement instead of one per settle: the executor's start-up is most of
// a settle's database CPU, and a busy account's batch carries many.
const settlesSQL = `
WITH s AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY AS s(request_id, charge, usage, note, ord)),
h AS (
	DELETE FROM holds USING s WHERE holds.request_id = s.request_id AND holds.request_id = ANY($2::text[]) AND holds.account = $1::text
	RETURNING holds.request_id, holds.account, holds.key_id, holds.model, holds.route, holds.endpoint, holds.amount,
		holds.owner, holds.keyed, s.charge, s.usage, s.note, s.ord),
t AS (
	SELECT count(*) AS n, coalesce(sum(charge), 0)::bigint AS charge, coalesce(sum(amount), 0)::bigint AS amount FROM h),
a AS (
	UPDATE accounts acc SET balance = acc.balance - t.charge, held = acc.held - t.amount, seq = acc.seq + t.n
	FROM t WHERE acc.id = $1::text AND t.n > 0
	RETURNING acc.id, acc.balance + t.charge AS before, acc.seq - t.n AS seq0),
e AS (
	SELECT h.*, a.id AS acct, a.seq0 + row_number() OVER w AS seq, (a.before - sum(h.charge) OVER w)::bigint AS balance_after
	FROM h, a WINDOW w AS (ORDER BY h.ord)),
k AS (
	UPDATE keys SET held = keys.held - x.amount, spent = keys.spent + x.charge
	FROM (SELECT key_id, sum(amount)::bigint AS amount, sum(charge)::bigint AS charge FROM e WHERE keyed GROUP BY key_id) x
	WHERE keys.id = x.key_id),
o AS (
	INSERT INTO outcomes (request_id, account, state, hold_amount, charge, seq, owner, reason)
	SELECT request_id, account, 'settled', amount, charge, seq, owner, note FROM e
	ON CONFLICT (request_id) DO NOTHING)
INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, note)
SELECT acct, seq, 'charge', request_id, key_id, model, route, endpoint, usage::jsonb, amount, -charge, balance_after, note
FROM e ORDER BY ord
RETURNING ` + entryCols

// settlesArgs are settlesSQL's arguments for ops, settles of one account.
func settlesArgs(ops []*ledgerOp) []any {
	ids, charges, usages, notes := make([]string, len(ops)), make([]int64, len(ops)), make([]string, len(ops)), make([]string, len(ops))
	for i, op := range ops {
		ids[i], charges[i], usages[i], notes[i] = op.settle.RequestID, int64(op.settle.Charge), string(op.usage), store.ClipNote(op.settle.Note)
	}
	return []any{ops[0].settle.Account, ids, charges, usages, notes}
}

func settleArgs(st store.Settlement, usage []byte) []any {
	return []any{st.RequestID, st.Account, int64(st.Charge), usage, store.ClipNote(st.Note)}
}

// Hold reserves h.Amount of the account's available credit and, when
// h.KeyID names a key of the account, of that key's spend limit in the
// period that contains h.Created (zero: now), in one statement (sent with
// the account's other holds and settles of the moment, see batch.go):
// relay_hold updates the account's row (which row-locks it and, at READ
// COMMITTED, re-checks the condition against the newest committed row),
// then the key's the same way, and writes the hold row; all commit together
// or not at all. A request id with an open hold, or one that has already
// ended, returns ErrExists; an unknown account ErrNotFound; too little
// credit or limit *store.InsufficientError naming which. A key of another
// account limits nothing.
//
// The outcome check sees the statement's snapshot: a Hold that races the
// Settle of the same request id (which the gateway never does: its request
// ids are unique) can open a hold on an ended id. The outcome inserts of
// Settle, Release and the sweep therefore keep the first outcome (ON
// CONFLICT DO NOTHING), so that such a hold can still end and its credit
// is never locked for good.
//
// A Hold that returns an error leaves nothing this replica renews: should
// the hold have landed all the same (an unavailable database that committed
// it, the answer lost), its lease runs out and a sweep releases it (see
// RenewLeases).
func (s *Store) Hold(ctx context.Context, h store.Hold) error {
	return s.hold(ctx, &ledgerOp{kind: opHold, hold: h}, false)
}

// Allot takes h as an allotment (store.Allotter): a hold like Hold's, which
// this replica renews without counting it as a call of the account (see
// liveCount).
func (s *Store) Allot(ctx context.Context, h store.Hold) error {
	return s.hold(ctx, &ledgerOp{kind: opHold, hold: h}, true)
}

// Carve moves h.Amount out of the open allotment from into h, a hold of its
// own (store.Allotter), in one statement batched like Hold's (carveSQL).
func (s *Store) Carve(ctx context.Context, from string, h store.Hold) error {
	if err := store.CheckID("allotment", from); err != nil {
		return err
	}
	return s.hold(ctx, &ledgerOp{kind: opCarve, hold: h, from: from}, false)
}

// HoldAdmitted takes h without checking the account's credit or the key's
// limit (store.Allotter): the hold of a call admitted against an
// allotment that is gone, batched like Hold's (admittedSQL).
func (s *Store) HoldAdmitted(ctx context.Context, h store.Hold) error {
	return s.hold(ctx, &ledgerOp{kind: opAdmitted, hold: h}, false)
}

// hold runs op, a Hold, an Allot, a Carve or a HoldAdmitted of op.hold, and makes its hold
// this replica's to renew unless it fails.
func (s *Store) hold(ctx context.Context, op *ledgerOp, allotment bool) (err error) {
	h := op.hold
	if err := store.CheckHold(h); err != nil {
		return err
	}
	if s.addLive(h.RequestID, h.Account, allotment) {
		defer func() {
			// A carve tried again after its answer was lost finds its
			// hold already there (ErrExists): the caller takes it as
			// landed, and it stays this replica's to renew.
			if err != nil && (op.kind == opHold || !errors.Is(err, store.ErrExists)) {
				s.dropLive(h.RequestID)
			}
		}()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.do(ctx, h.Account, op)
	if op.err != nil {
		return mapErr(fmt.Sprintf("hold %q", h.RequestID), op.err)
	}
	return refusal(op, op.answer)
}

// refusal is the error of relay_hold's (or carveSQL's) answer for op: nil
// when it took the hold.
func refusal(op *ledgerOp, answer string) error {
	h := op.hold
	why, n, _ := strings.Cut(answer, " ")
	switch why {
	case "":
		return nil
	case "short":
		return fmt.Errorf("postgres: carve %q: the allotment %q is not open or holds less than %d nano-USD: %w",
			h.RequestID, op.from, h.Amount, store.ErrNoHold)
	case "missing":
		return fmt.Errorf("postgres: hold %q: account %q: %w", h.RequestID, h.Account, store.ErrNotFound)
	case "ended":
		return fmt.Errorf("postgres: hold %q: the request id already has an outcome: %w", h.RequestID, store.ErrExists)
	case "held":
		return fmt.Errorf("postgres: hold %q: the request id already has a hold: %w", h.RequestID, store.ErrExists)
	case store.LimitAccount, store.LimitKey:
		if available, err := strconv.ParseInt(n, 10, 64); err == nil {
			return &store.InsufficientError{Needed: h.Amount, Available: pricing.Nano(available), Limit: why}
		}
	}
	return fmt.Errorf("postgres: hold %q: relay_hold answered %q", h.RequestID, store.ClipNote(answer))
}

// Settle charges the call and releases its hold, exactly once per request
// id, in one statement (batched like Hold's): the hold row is deleted (of
// two racing settles the second blocks on the row, then finds none), the
// account charged in full
// (even above the hold), the journal entry and the outcome written. A
// replay returns ErrAlreadySettled; an unknown request id ErrNoHold. It
// does not give up when ctx is cancelled: the call has happened. Unless it
// fails with ErrUnavailable (to be tried again), this replica no longer
// renews the hold's lease.
func (s *Store) Settle(ctx context.Context, st store.Settlement) (store.Entry, error) {
	e, err := s.settle(ctx, st)
	if !errors.Is(err, ErrUnavailable) {
		s.dropLive(st.RequestID)
	}
	return e, err
}

func (s *Store) settle(ctx context.Context, st store.Settlement) (store.Entry, error) {
	if err := store.CheckSettlement(st); err != nil {
		return store.Entry{}, err
	}
	usage, err := usageJSON(st.Usage)
	if err != nil {
		return store.Entry{}, err
	}
	op := &ledgerOp{kind: opSettle, settle: st, usage: usage}
	account := st.Account
	if account == "" {
		// Without the account there is no batch to join: the statement
		// finds the hold's account itself.
		ctx, cancel := s.detach(ctx)
		defer cancel()
		s.runOne(ctx, op)
	} else {
		// Waiting in the lane is not failing: the settle keeps its
		// place until its batch goes (each batch is bounded by
		// opTimeout, and one that meets the database unavailable fails
		// the queue behind it, see nextBatch). A deadline here would
		// turn a busy database's queue into retries, each joining the
		// same queue again.
		s.do(context.WithoutCancel(ctx), account, op)
	}
	switch {
	case op.err != nil:
		return store.Entry{}, mapErr(fmt.Sprintf("settle %q", st.RequestID), op.err)
	case !op.landed:
		// Bounded from here, not from before the lane's wait.
		ctx, cancel := s.detach(ctx)
		defer cancel()
		return s.lateSettle(ctx, st, usage)
	}
	return op.entry, nil
}

// lateSettle charges a call whose hold a sweep released because its
// owner's lease ran out — this replica, cut off from the database for
// longer than the lease, whose call was nevertheless answered. The call
// happened, so it is charged (only by the hold's owner: no other replica
// knows its usage, and Badger's recovered holds belong to processes that
// ended, so this never applies there): in one short transaction the recovered outcome becomes
// settled (its row lock makes this once: a second late settle waits, then
// finds no recovered outcome), the account is charged, the charge counted
// in its key's spend (the sweep gave back the key's hold) and the charge
// entry written after the recovery entry. Any other request id without a hold is
// endedErr's.
func (s *Store) lateSettle(ctx context.Context, st store.Settlement, usage []byte) (store.Entry, error) {
	var e store.Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var account string
		var holdAmount int64
		err := tx.QueryRow(ctx, `SELECT account, hold_amount FROM outcomes
WHERE request_id = $1 AND state = 'recovered' AND owner = $3 AND ($2::text = '' OR account = $2::text) FOR UPDATE`,
			st.RequestID, st.Account, s.owner).Scan(&account, &holdAmount)
		if err != nil {
			return err
		}
		e, err = scanEntry(tx.QueryRow(ctx, `
WITH r AS (
	SELECT key_id, model, route, endpoint FROM journal
	WHERE account = $1 AND request_id = $2 AND kind = 'recovery' ORDER BY seq DESC LIMIT 1),
a AS (
	UPDATE accounts SET balance = balance - $3::bigint, seq = seq + 1 WHERE id = $1
	RETURNING id, balance, seq),
k AS (
	UPDATE keys SET spent = keys.spent + $3::bigint FROM a, r WHERE keys.id = r.key_id AND keys.account IS NOT DISTINCT FROM a.id)
INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, note)
SELECT a.id, a.seq, 'charge', $2, coalesce(r.key_id, ''), coalesce(r.model, ''), coalesce(r.route, ''), coalesce(r.endpoint, ''),
	$4::jsonb, $5::bigint, -$3::bigint, a.balance, $6::text
FROM a LEFT JOIN r ON true
RETURNING `+entryCols, account, st.RequestID, int64(st.Charge), usage, holdAmount, store.ClipNote(st.Note)))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE outcomes SET state = 'settled', charge = $2, seq = $3, reason = $4, time = now() WHERE request_id = $1`,
			st.RequestID, int64(st.Charge), int64(e.Seq), store.ClipNote(st.Note))
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Entry{}, s.endedErr(ctx, st.RequestID, st.Account)
	case err != nil:
		return store.Entry{}, mapErr(fmt.Sprintf("settle %q", st.RequestID), err)
	}
	s.log.Warn("postgres: charged a call whose hold had been released when its lease ran out",
		"request_id", st.RequestID, "account", e.Account, "charge_nano", st.Charge)
	return e, nil
}

// Release drops a hold without charging: the hold row is deleted, the
// account's and its key's held lowered and the outcome written (with the
// call's key, model, route and endpoint, for Generation), in one
// statement; no journal entry, since no money moves. A later Settle or Release returns
// ErrAlreadySettled; an unknown request id ErrNoHold. Whatever it returns,
// this replica no longer renews the hold's lease: should the release not
// land, the hold runs out and a sweep releases it.
func (s *Store) Release(ctx context.Context, requestID, reason string) error {
	defer s.dropLive(requestID)
	ctx, cancel := s.detach(ctx)
	defer cancel()
	if err := store.CheckID("request", requestID); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
WITH h AS (
	DELETE FROM holds WHERE request_id = $1 RETURNING *),
a AS (
	UPDATE accounts acc SET held = acc.held - h.amount FROM h WHERE acc.id = h.account RETURNING acc.id),
k AS (
	UPDATE keys SET held = keys.held - h.amount FROM h, a WHERE h.keyed AND keys.id = h.key_id)
INSERT INTO outcomes (request_id, account, state, hold_amount, owner, reason, key_id, model, route, endpoint)
SELECT h.request_id, h.account, 'released', h.amount, h.owner, $2::text, h.key_id, h.model, h.route, h.endpoint FROM h, a
ON CONFLICT (request_id) DO NOTHING`, requestID, store.ClipNote(reason))
	if err != nil {
		return mapErr(fmt.Sprintf("release %q", requestID), err)
	}
	if tag.RowsAffected() == 0 {
		return s.endedErr(ctx, requestID, "")
	}
	return nil
}

// endedErr explains why requestID had no open hold (of account, if set).
func (s *Store) endedErr(ctx context.Context, requestID, account string) error {
	var (
		holder *string
		ended  bool
	)
	err := s.pool.QueryRow(ctx, `SELECT (SELECT account FROM holds WHERE request_id = $1), EXISTS (SELECT 1 FROM outcomes WHERE request_id = $1)`,
		requestID).Scan(&holder, &ended)
	switch {
	case err != nil:
		return mapErr(fmt.Sprintf("request %q", requestID), err)
	case holder != nil && account != "" && *holder != account:
		return fmt.Errorf("postgres: hold %q belongs to account %q, not %q", requestID, *holder, account)
	case ended:
		return fmt.Errorf("postgres: request %q: %w", requestID, store.ErrAlreadySettled)
	}
	return fmt.Errorf("postgres: request %q: %w", requestID, store.ErrNoHold)
}

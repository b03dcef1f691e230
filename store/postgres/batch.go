package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/store"
)

// One batch in flight per account.
//
// Every Hold and Settle updates its account's row, and the row stays locked
// until the commit is flushed, so one account's statements run one at a
// time whatever the pool's size; callers that queue on the row wake on every
// commit and re-check it (a convoy slower than one caller alone). So a
// replica sends at most one batch of an account's operations at a time:
// those that arrive meanwhile wait in memory and go together in the next
// batch, as one pipeline of statements, which PostgreSQL runs as one
// implicit transaction (one round trip, one row lock, one commit flush).
// Inside it each statement sees the ones before it: the batch's settles go
// first, as one statement (settlesSQL), then its holds, each checked in
// arrival order against the balance the settles and every earlier hold
// left: exactly what the same operations one at a time in that order would
// have admitted, an order they could have run in, since all of them were
// waiting at once (see queueBatch). Nothing is answered before its batch
// commits.
//
// Holds and settles share the account's batches, so a settle costs no commit
// of its own while the account has traffic: a settle that finds the account
// idle while other calls of it are running on this replica lingers
// (Options.SettleLinger), and the next hold to come takes it along at once
// — a hold never waits for a linger. With holds and settles in separate
// batches, each batch waited at the server for the other's row lock and
// every call paid two commits: at 1,000 calls/s on one account a hold took
// 1.9 ms at p50 against 1.2 ms sharing (RATIONALE.md).
//
// A batch that fails for any reason other than a lost database rolls back
// whole, and its operations run again one by one (each then fails or
// succeeds on its own: a duplicate request id, a deadlock with a sweep). A
// lost database fails every operation of the batch with ErrUnavailable, as
// it would fail each statement alone.

// maxBatch bounds the operations of one batch. A lane takes everything
// queued up to it, so a lane under backlog sends full batches, not more
// round trips: its settles go as one statement however many they are. Not
// more: a batch holds its account's row lock until it commits, and on
// three replicas of one account batches of 1,024 made the others'
// statements wait past the statement timeout (RATIONALE.md, "A store that
// falls behind").
const maxBatch = 128

type opKind uint8

const (
	opHold opKind = iota
	opSettle
	opCarve // a hold carved out of an allotment (Carve): queued as holds are
	// opAdmitted: the hold of a call admitted against an allotment that is
	// gone (HoldAdmitted), taken without a credit check
	opAdmitted
)

// ledgerOp is one Hold or Settle waiting for, or carried by, a batch.
type ledgerOp struct {
	kind   opKind
	hold   store.Hold
	settle store.Settlement
	usage  []byte // the settlement's usage, as JSON
	from   string // a carve: the allotment's request id

	// Results, set before done is closed.
	landed bool        // a settle: charged
	answer string      // a hold: relay_hold's answer ("": taken)
	entry  store.Entry // a settle's charge entry
	err    error
	done   chan struct{}
}

// lane is one account's operations waiting for their batch.
type lane struct {
	queued  []*ledgerOp
	running bool // a batch of the account is in flight
	// lingering: a settle's linger timer is set (see do); the lane is
	// kept until it fires.
	lingering bool
}

// batcher queues each account's operations while a batch of that account
// is in flight or its settles linger.
type batcher struct {
	mu sync.Mutex
	// lanes holds the accounts with a batch in flight or operations
	// waiting; an idle account is absent.
	lanes map[string]*lane
}

// do runs op in a batch of its account and waits for it. While it still
// waits in the queue, a cancelled ctx takes it out and returns ctx's error:
// nothing was sent. Once sent it is waited for (each statement is bounded
// by the statement timeout).
func (s *Store) do(ctx context.Context, account string, op *ledgerOp) {
	op.done = make(chan struct{})
	b := &s.batch
	b.mu.Lock()
	l := b.lanes[account]
	if l == nil {
		l = &lane{}
		b.lanes[account] = l
	}
	l.queued = append(l.queued, op)
	switch {
	case l.running:
		b.mu.Unlock()
		s.await(ctx, account, op)
		return
	case op.kind == opSettle && s.settleLinger > 0 && s.liveCount(account) > 1:
		// Other calls of the account are running here: a hold or a
		// settle of theirs will come, and this one waits a moment to
		// share their commit (the gateway's client does not wait for it).
		if !l.lingering {
			l.lingering = true
			time.AfterFunc(s.settleLinger, func() { s.lingered(account) })
		}
		b.mu.Unlock()
		s.await(ctx, account, op)
		return
	}
	l.running = true
	ops := takeBatch(l)
	b.mu.Unlock()
	down := s.runBatch(ops)
	if next := s.nextBatch(account, down); next != nil {
		go s.drain(account, next)
	}
	<-op.done // in ops, unless more than maxBatch settles lingered before it
}

// await waits for op, queued in account's lane, to be done; a ctx cancelled
// first takes it out of the queue if it is still there.
func (s *Store) await(ctx context.Context, account string, op *ledgerOp) {
	select {
	case <-op.done:
		return
	case <-ctx.Done():
	}
	b := &s.batch
	b.mu.Lock()
	if l := b.lanes[account]; l != nil {
		if i := slices.Index(l.queued, op); i >= 0 {
			l.queued = slices.Delete(l.queued, i, i+1)
			b.mu.Unlock()
			op.err = ctx.Err()
			return
		}
	}
	b.mu.Unlock()
	<-op.done
}

// lingered sends account's lingering settles, unless a batch took them.
func (s *Store) lingered(account string) {
	b := &s.batch
	b.mu.Lock()
	l := b.lanes[account]
	l.lingering = false
	if l.running || len(l.queued) == 0 {
		if !l.running {
			delete(b.lanes, account)
		}
		b.mu.Unlock()
		return
	}
	l.running = true
	ops := takeBatch(l)
	b.mu.Unlock()
	s.drain(account, ops)
}

// takeBatch takes the first maxBatch operations queued in l; b.mu is held.
func takeBatch(l *lane) []*ledgerOp {
	if len(l.queued) <= maxBatch { // the usual case: all of them, no copy
		ops := l.queued
		l.queued = nil
		return ops
	}
	n := maxBatch
	ops := slices.Clone(l.queued[:n])
	l.queued = slices.Delete(l.queued, 0, n)
	return ops
}

// nextBatch takes the operations queued for account, at most maxBatch, or
// marks its lane idle and returns nil if there are none. down is the error
// of the batch just sent if it met the database unavailable: then every
// operation still queued fails with it at once, as it would in its own
// batch, instead of each waiting for a batch of its own to time out in
// turn: their callers back off (the gateway's retries share one budget),
// and a lane never holds a queue that only a dead database stands behind.
func (s *Store) nextBatch(account string, down error) []*ledgerOp {
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lanes[account]
	if down != nil {
		for _, op := range l.queued {
			op.landed, op.answer, op.entry, op.err = false, "", store.Entry{}, down
			close(op.done)
		}
		l.queued = nil
	}
	if len(l.queued) == 0 {
		l.running = false
		if !l.lingering {
			delete(b.lanes, account)
		}
		return nil
	}
	return takeBatch(l)
}

func (s *Store) drain(account string, ops []*ledgerOp) {
	for ops != nil {
		ops = s.nextBatch(account, s.runBatch(ops))
	}
}

// runBatch sends ops as one pipeline and answers each. A single operation
// goes alone: a statement outside a transaction block is its own. It
// returns the error of a batch that met the database unavailable (see
// nextBatch), else nil.
func (s *Store) runBatch(ops []*ledgerOp) (down error) {
	defer func() {
		for _, op := range ops {
			close(op.done)
		}
	}()
	ctx := context.Background()
	if s.opTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opTimeout)
		defer cancel()
	}
	if len(ops) == 1 {
		s.runOne(ctx, ops[0])
		return unavailable(ops[0].err)
	}
	b := &pgx.Batch{}
	s.queueBatch(b, ops)
	err := s.pool.SendBatch(ctx, b).Close()
	if err == nil {
		return nil
	}
	if unavailable(err) != nil {
		for _, op := range ops {
			op.landed, op.answer, op.entry, op.err = false, "", store.Entry{}, err
		}
		return err
	}
	for _, op := range ops {
		s.runOne(ctx, op)
	}
	return nil
}

// unavailable is err if it says the database is unavailable (not a
// conflict: that is the statement's own), else nil.
func unavailable(err error) error {
	if err != nil && !isConflict(err) && errors.Is(mapErr("", err), ErrUnavailable) {
		return err
	}
	return nil
}

// runOne runs op's statement on its own, up to conflictTries times while it
// meets a deadlock or a serialization failure (rolled back whole, so safe
// to send again; a sweep that locks a hold row, then its account, can meet
// a carve that locks them the other way round).
func (s *Store) runOne(ctx context.Context, op *ledgerOp) {
	for try := 1; ; try++ {
		op.landed, op.answer, op.entry, op.err = false, "", store.Entry{}, nil
		switch op.kind {
		case opHold, opCarve, opAdmitted:
			sql, args := s.holdStatement(op)
			op.held(s.pool.QueryRow(ctx, sql, args...))
		case opSettle:
			op.settled(scanEntry(s.pool.QueryRow(ctx, settleSQL, settleArgs(op.settle, op.usage)...)))
		}
		if try == conflictTries || !isConflict(op.err) || ctx.Err() != nil {
			return
		}
		time.Sleep(time.Duration(try) * time.Millisecond)
	}
}

// queueOp adds op's statement to b, with what reads its result.
func (s *Store) queueOp(b *pgx.Batch, op *ledgerOp) {
	switch op.kind {
	case opHold, opCarve, opAdmitted:
		sql, args := s.holdStatement(op)
		b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
			op.held(row)
			return op.err
		})
	case opSettle:
		b.Queue(settleSQL, settleArgs(op.settle, op.usage)...).QueryRow(func(row pgx.Row) error {
			op.settled(scanEntry(row))
			return op.err
		})
	}
}

// queueBatch adds ops' statements to b: the settles first, in their order,
// as few settlesSQL as can carry them (one, unless a request id comes
// twice), then the holds in their order. Every operation of a batch was
// waiting at once, and none is answered before the batch commits, so this
// is an order they could have run in one at a time; a settle is never of a
// hold in its own batch (its Hold returned first). Settles first: the holds
// are checked against the balance the settles leave, and the settles, a
// busy account's batch carrying many, cost one statement's start-up.
func (s *Store) queueBatch(b *pgx.Batch, ops []*ledgerOp) {
	var settles, holds []*ledgerOp
	for _, op := range ops {
		if op.kind == opSettle {
			settles = append(settles, op)
		} else {
			holds = append(holds, op)
		}
	}
	for len(settles) > 0 {
		n := 1
		for n < len(settles) && !slices.ContainsFunc(settles[:n], func(o *ledgerOp) bool { return o.settle.RequestID == settles[n].settle.RequestID }) {
			n++
		}
		if n == 1 {
			s.queueOp(b, settles[0])
		} else {
			s.queueSettles(b, settles[:n])
		}
		settles = settles[n:]
	}
	for _, op := range holds {
		s.queueOp(b, op)
	}
}

// queueSettles adds settlesSQL for ops, settles of one account with no
// request id twice, to b: each op gets its entry, or none (no open hold, as
// settled says of no row).
func (s *Store) queueSettles(b *pgx.Batch, ops []*ledgerOp) {
	b.Queue(settlesSQL, settlesArgs(ops)...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanEntry(rows)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(ops, func(o *ledgerOp) bool { return o.settle.RequestID == e.RequestID })
			if i < 0 {
				return fmt.Errorf("postgres: a batch's settles returned an entry for %q, which none of them names", store.ClipNote(e.RequestID))
			}
			ops[i].landed, ops[i].entry = true, e
		}
		return rows.Err()
	})
}

// held records relay_hold's answer (NULL: taken).
func (op *ledgerOp) held(row pgx.Row) {
	var answer *string
	if op.err = row.Scan(&answer); op.err != nil {
		return
	}
	op.answer = ""
	if answer != nil {
		op.answer = *answer
	}
}

// settled records a settle statement's result: no row means no hold to
// settle, which is not an error of the batch.
func (op *ledgerOp) settled(e store.Entry, err error) {
	switch {
	case err == nil:
		op.landed, op.entry = true, e
	case errors.Is(err, pgx.ErrNoRows):
		op.landed = false
	default:
		op.err = err
	}
}

package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/store"
)

// One batch of holds and one of settles in flight per account.
//
// Every Hold and Settle updates its account's row, and the row stays locked
// until the commit is flushed, so one account's statements run one at a
// time whatever the pool's size; callers that queue on the row wake on every
// commit and re-check it (a convoy slower than one caller alone). So a
// replica sends at most one batch of an account's holds and one of its
// settles at a time: the operations that arrive meanwhile wait in memory
// and go together in the next batch of their kind, as one pipeline of the
// same single statements, which PostgreSQL runs as one implicit transaction
// (one round trip, one row lock, one commit flush). Inside it each statement
// sees the ones before it, so each hold is checked, in arrival order,
// against the balance every earlier hold and settle left: exactly what the
// same statements one by one would have admitted. Nothing is answered
// before its batch commits.
//
// Holds and settles have a lane each so that a hold — the one a caller
// waits for before its call goes upstream — never queues in memory behind
// settles: it goes to the server at once and waits there, at most, for the
// one settle batch holding the row. A settle that finds its lane idle
// while other calls of its account are running on this replica lingers
// (Options.SettleLinger) for their settles to share its commit.
//
// A batch that fails for any reason other than a lost database rolls back
// whole, and its operations run again one by one (each then fails or
// succeeds on its own: a duplicate request id, a deadlock with a sweep). A
// lost database fails every operation of the batch with ErrUnavailable, as
// it would fail each statement alone.

// maxBatch bounds the operations of one batch.
const maxBatch = 128

type opKind uint8

const (
	opHold opKind = iota
	opSettle
)

// ledgerOp is one Hold or Settle waiting for, or carried by, a batch.
type ledgerOp struct {
	kind   opKind
	hold   store.Hold
	settle store.Settlement
	usage  []byte // the settlement's usage, as JSON

	// Results, set before done is closed.
	landed bool        // a settle: charged
	answer string      // a hold: relay_hold's answer ("": taken)
	entry  store.Entry // a settle's charge entry
	err    error
	done   chan struct{}
}

// lane is where an operation waits: an account's holds and its settles
// each have one batch in flight at a time.
type lane struct {
	account string
	settle  bool
}

// batcher queues each account's operations while a batch of that account
// is in flight.
type batcher struct {
	mu sync.Mutex
	// queued holds, per account with a batch in flight, the operations that
	// wait for the next; an account is absent when it has none in flight.
	queued map[lane][]*ledgerOp
}

// do runs op in a batch of its lane and waits for it. While it still
// waits in the queue, a cancelled ctx takes it out and returns ctx's error:
// nothing was sent. Once sent it is waited for (each statement is bounded
// by the statement timeout).
func (s *Store) do(ctx context.Context, account string, op *ledgerOp) {
	op.done = make(chan struct{})
	l := lane{account: account, settle: op.kind == opSettle}
	b := &s.batch
	b.mu.Lock()
	if q, busy := b.queued[l]; busy {
		b.queued[l] = append(q, op)
		b.mu.Unlock()
		select {
		case <-op.done:
		case <-ctx.Done():
			b.mu.Lock()
			q := b.queued[l]
			if i := slices.Index(q, op); i >= 0 {
				b.queued[l] = slices.Delete(q, i, i+1)
				b.mu.Unlock()
				op.err = ctx.Err()
				return
			}
			b.mu.Unlock()
			<-op.done
		}
		return
	}
	if l.settle && s.settleLinger > 0 && s.liveCount(account) > 1 {
		// Other calls of the account are running here: their settles
		// will come, and this one waits a moment to share their commit
		// (the gateway's client does not wait for it).
		b.queued[l] = []*ledgerOp{op}
		b.mu.Unlock()
		time.AfterFunc(s.settleLinger, func() { s.drain(l, s.nextBatch(l)) })
		<-op.done
		return
	}
	b.queued[l] = nil
	b.mu.Unlock()
	s.runBatch([]*ledgerOp{op})
	if next := s.nextBatch(l); next != nil {
		go s.drain(l, next)
	}
}

// nextBatch takes the operations queued in l, at most maxBatch, or marks
// the lane idle and returns nil if there are none.
func (s *Store) nextBatch(l lane) []*ledgerOp {
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queued[l]
	if len(q) == 0 {
		delete(b.queued, l)
		return nil
	}
	n := min(len(q), maxBatch)
	ops := slices.Clone(q[:n])
	b.queued[l] = slices.Delete(q, 0, n)
	return ops
}

func (s *Store) drain(l lane, ops []*ledgerOp) {
	for ; ops != nil; ops = s.nextBatch(l) {
		s.runBatch(ops)
	}
}

// runBatch sends ops as one pipeline and answers each. A single operation
// goes alone: a statement outside a transaction block is its own.
func (s *Store) runBatch(ops []*ledgerOp) {
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
		return
	}
	b := &pgx.Batch{}
	for _, op := range ops {
		s.queueOp(b, op)
	}
	err := s.pool.SendBatch(ctx, b).Close()
	if err == nil {
		return
	}
	for _, op := range ops {
		op.landed, op.answer, op.entry, op.err = false, "", store.Entry{}, nil
	}
	if errors.Is(mapErr("", err), ErrUnavailable) {
		for _, op := range ops {
			op.err = err
		}
		return
	}
	for _, op := range ops {
		s.runOne(ctx, op)
	}
}

// runOne runs op's statement on its own.
func (s *Store) runOne(ctx context.Context, op *ledgerOp) {
	switch op.kind {
	case opHold:
		op.held(s.pool.QueryRow(ctx, holdSQL, s.holdArgs(op.hold)...))
	case opSettle:
		op.settled(scanEntry(s.pool.QueryRow(ctx, settleSQL, settleArgs(op.settle, op.usage)...)))
	}
}

// queueOp adds op's statement to b, with what reads its result.
func (s *Store) queueOp(b *pgx.Batch, op *ledgerOp) {
	switch op.kind {
	case opHold:
		b.Queue(holdSQL, s.holdArgs(op.hold)...).QueryRow(func(row pgx.Row) error {
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

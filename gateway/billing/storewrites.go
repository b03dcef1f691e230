package billing

import (
	"context"
	"errors"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/backlog"
	"github.com/modelrelay/modelrelay/internal/logagg"
	"github.com/modelrelay/modelrelay/store"
)

// The ledger's writes and the admission they decide (gateway/backlog).
//
// Every try of a hold, carve, settle or release a call makes is counted as
// under way while the store has it (holdWrite); the writes an answered call
// still owes go through storeWrite, which tries them again while the store
// is unavailable, under the replica's one retry budget. Admit refuses
// a new call before it does any work while the writes under way pass
// billing.max_store_backlog or the oldest has waited
// billing.max_store_wait, and storeHold gives up a hold still queued after
// max_store_wait: so a replica never admits more calls than its store can
// book, and a store that falls behind sees its load fall instead of its
// queue grow.

// newStoreWrites sets up l's write tracking from its config.
func (l *Ledger) newStoreWrites() {
	b := l.cfg.Billing
	l.writes = backlog.NewTracker(b.MaxStoreBacklog, b.MaxStoreWait)
	l.retrier = backlog.NewRetrier(func(err error) bool { return errors.Is(err, store.ErrUnavailable) })
	l.retrier.OnRetry = func(what string) { l.met.storeRetries.WithLabelValues(what).Inc() }
	l.retrier.OnFirstFailure = func(what, rid string, err error) {
		// One line per write would be a storm: the log aggregates
		// repeated warnings (cmd/relay), and the metrics count them.
		l.log.Warn(what+": the store is unavailable; retrying until it answers", "request_id", rid, "error", err.Error())
	}
	l.life, l.endLife = context.WithCancel(context.Background())
}

// Admit refuses a new call while the store is behind (see above): the
// gateway asks it before it does any work for a charged call, and answers
// its error (503 store_unavailable, Retry-After).
func (l *Ledger) Admit() error {
	s, ok := l.writes.Admit(time.Now())
	if ok {
		return nil
	}
	return apierr.EarlyRefusal("store_unavailable", apierr.StoreRetryAfter,
		"the ledger is behind (%d writes under way, the oldest for %s); nothing was charged, retry after %d seconds",
		s.Writes, s.Oldest.Round(time.Millisecond), apierr.StoreRetryAfter)
}

// storeWrite runs op, the store write what of request rid, each try counted
// as under way (holdWrite), and again while the store is unavailable,
// until ctx ends (retries back off under the replica's shared budget;
// concurrent writes of the same what and rid are one). A retry that
// answers ErrAlreadySettled found that an earlier try, reported
// unavailable, had landed: that is success.
func (l *Ledger) storeWrite(ctx context.Context, what, rid string, op func() error) error {
	return l.storeRetry(ctx, what, rid, func() error { return l.holdWrite(op) })
}

// storeRetry is storeWrite for an op that counts its own tries as under way.
func (l *Ledger) storeRetry(ctx context.Context, what, rid string, op func() error) error {
	err, tries := l.retrier.Do(ctx, what, rid, op)
	if tries > 1 && errors.Is(err, store.ErrAlreadySettled) {
		err = nil
	}
	if tries > 1 && err == nil {
		l.log.Debug(what+": the store answered again", "request_id", rid, "tries", tries)
	}
	return err
}

// holdWrite runs op, one try of a store write, counted as under way while
// it runs: a write waiting for its next try is not (the store is not
// working on it; relay_store_retrying counts it). A hold the caller waits
// for is tried once: a hold the store cannot take now is the call's 503.
func (l *Ledger) holdWrite(op func() error) error {
	w := l.writes.Begin(time.Now())
	defer w.End()
	return op()
}

// uncharged records that call rid was answered and its charge could not be
// written (relay_calls_uncharged_total): the gateway stopped before the
// store answered, or the store refused the write for good. It stays at 0
// unless something is wrong; the log line says which.
func (l *Ledger) uncharged(rid, what string, err error) {
	l.met.uncharged.Add(1)
	// Each such line is written, never folded into a count: its request
	// id is what reconciles the books.
	l.log.Error(what+": the call was answered and its charge could not be written", "request_id", rid, "error", err.Error(), logagg.Each)
}

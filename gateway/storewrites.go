package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// is unavailable, under the replica's one retry budget. admitStore refuses
// a new call before it does any work while the writes under way pass
// billing.max_store_backlog or the oldest has waited
// billing.max_store_wait, and storeHold gives up a hold still queued after
// max_store_wait: so a replica never admits more calls than its store can
// book, and a store that falls behind sees its load fall instead of its
// queue grow.

// newStoreWrites sets up g's write tracking from its config.
func (g *Gateway) newStoreWrites() {
	b := g.cfg.Billing
	g.writes = backlog.NewTracker(b.MaxStoreBacklog, b.MaxStoreWait)
	g.retrier = backlog.NewRetrier(func(err error) bool { return errors.Is(err, store.ErrUnavailable) })
	g.retrier.OnRetry = func(what string) { g.met.storeRetries.WithLabelValues(what).Inc() }
	g.retrier.OnFirstFailure = func(what, rid string, err error) {
		// One line per write would be a storm: the log aggregates
		// repeated warnings (cmd/relay), and the metrics count them.
		g.log.Warn(what+": the store is unavailable; retrying until it answers", "request_id", rid, "error", err.Error())
	}
	g.life, g.endLife = context.WithCancel(context.Background())
}

// admitStore refuses a new call while the store is behind (see above).
func (g *Gateway) admitStore() error {
	s, ok := g.writes.Admit(time.Now())
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
func (g *Gateway) storeWrite(ctx context.Context, what, rid string, op func() error) error {
	return g.storeRetry(ctx, what, rid, func() error { return g.holdWrite(op) })
}

// storeRetry is storeWrite for an op that counts its own tries as under way.
func (g *Gateway) storeRetry(ctx context.Context, what, rid string, op func() error) error {
	err, tries := g.retrier.Do(ctx, what, rid, op)
	if tries > 1 && errors.Is(err, store.ErrAlreadySettled) {
		err = nil
	}
	if tries > 1 && err == nil {
		g.log.Debug(what+": the store answered again", "request_id", rid, "tries", tries)
	}
	return err
}

// holdWrite runs op, one try of a store write, counted as under way while
// it runs: a write waiting for its next try is not (the store is not
// working on it; relay_store_retrying counts it). A hold the caller waits
// for is tried once: a hold the store cannot take now is the call's 503.
func (g *Gateway) holdWrite(op func() error) error {
	w := g.writes.Begin(time.Now())
	defer w.End()
	return op()
}

// uncharged records that call rid was answered and its charge could not be
// written (relay_calls_uncharged_total): the gateway stopped before the
// store answered, or the store refused the write for good. It stays at 0
// unless something is wrong; the log line says which.
func (g *Gateway) uncharged(rid, what string, err error) {
	g.met.uncharged.Inc()
	// Each such line is written, never folded into a count: its request
	// id is what reconciles the books.
	g.log.Error(what+": the call was answered and its charge could not be written", "request_id", rid, "error", err.Error(), logagg.Each)
}

// registerStoreWrites registers the series of the ledger's writes on m.
func (m *metrics) registerStoreWrites(g *Gateway) {
	m.uncharged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "relay_calls_uncharged_total", Help: "Calls answered whose charge could not be written: the gateway stopped before the store answered, or the store refused the write for good. 0 unless something is wrong; the error log names each.",
	})
	m.reg.MustRegister(m.uncharged)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_store_backlog", Help: "Ledger writes under way: holds, carves, settles and releases waiting in the store's queue or being sent (billing.max_store_backlog).",
	}, func() float64 { return float64(g.writes.State(time.Now()).Writes) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_store_backlog_age_seconds", Help: "How long the oldest ledger write under way has waited (billing.max_store_wait).",
	}, func() float64 { return g.writes.State(time.Now()).Oldest.Seconds() }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "relay_store_behind_refused_total", Help: "Relayed calls refused with 503 store_unavailable because the ledger's writes were behind: at admission, before any work (billing.max_store_backlog, billing.max_store_wait), or when their hold waited in the store's queue past billing.max_store_wait.",
	}, func() float64 { return float64(g.writes.Refused()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_store_retrying", Help: "Ledger writes waiting to be tried again after the store answered that it is unavailable.",
	}, func() float64 { return float64(g.retrier.Waiting()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_store_retry_budget", Help: "Ledger writes per second the replica's shared retry budget lets be tried again now: it halves on each retry the store does not answer and doubles on each it does.",
	}, g.retrier.Budget))
}

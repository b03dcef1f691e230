package billing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/modelrelay/modelrelay/gateway/backlog"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
)

// Store is what the ledger needs of the store: the hold, settle and
// release of a call. A Store that is also a store.Allotter (PostgreSQL)
// admits calls against allotments (allot.go).
type Store interface {
	Hold(ctx context.Context, h store.Hold) error
	Settle(ctx context.Context, s store.Settlement) (store.Entry, error)
	Release(ctx context.Context, requestID, reason string) error
}

// InProcess is implemented by a Store whose ledger is inside the process
// (Badger): its Hold never waits in a queue and its Settle does not end
// early for a context's deadline (its books must close), so the ledger
// does not give them one — a deadline costs a timer and three
// allocations per write.
type InProcess interface{ InProcess() bool }

// inProcess reports whether s is an InProcess store.
func inProcess(s Store) bool {
	ip, ok := s.(InProcess)
	return ok && ip.InProcess()
}

// Pricer prices a call's usage with its model's plugin: *plugins.Host.
type Pricer interface {
	Settle(ctx context.Context, req abi.SettleRequest) (abi.SettleResult, error)
	Catalog() *plugins.Catalog
}

// Options wires a Ledger.
type Options struct {
	// Config is the gateway's, resolved: billing.* and store.driver.
	Config config.Config
	Store  Store
	Prices Pricer
	// Logger receives the ledger's errors. Default slog.Default().
	Logger *slog.Logger
	// Now is the gateway's clock, the settle's time. Default time.Now.
	Now func() time.Time
	// Shared is the Redis the replicas share, for read-after-answer on
	// every replica (shared.go). Default nil: this process's own.
	Shared *shared.Client
	// NewID makes a request id ("req_…"); an allotment's id is made of
	// one. Default: "req_" and 16 random hex digits.
	NewID func() string
	// ObservePlugin records a plugin call's duration (the gateway's
	// relay_plugin_call_duration_seconds). Default: not recorded.
	ObservePlugin func(model, op string, t0 time.Time)
}

// Ledger takes, settles and releases the holds of the calls of one
// gateway, and follows the writes it owes the store. The zero value is not
// usable: New.
type Ledger struct {
	cfg           config.Config
	store         Store
	prices        Pricer
	log           *slog.Logger
	now           func() time.Time
	shared        sharedSettles // the replicas' calls settling (shared.go)
	observePlugin func(model, op string, t0 time.Time)
	newID         func() string
	met           *metrics

	settling *settling // calls answered but not yet settled, per account
	streams  *streamsEnding
	// seen and overlap: a hold goes beside its upstream request
	// (overlap.go).
	seen    *creditSeen
	overlap bool
	allot   *allotments // nil: calls hold in the store (allot.go)

	// The ledger's writes under way, their retries, and what ends the
	// retries when the gateway stops (storewrites.go).
	writes  *backlog.Tracker
	retrier *backlog.Retrier
	life    context.Context
	endLife context.CancelFunc
	// bg counts the settles and releases left to the background: the
	// drain waits for them like any call (Wait).
	bg sync.WaitGroup
	// work runs them, and the holds and carves beside a call (workers.go).
	work *workers
	// local: the store is InProcess; its writes get no deadline.
	local bool
}

// New builds a Ledger.
func New(o Options) *Ledger {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	if o.ObservePlugin == nil {
		o.ObservePlugin = func(string, string, time.Time) {}
	}
	l := &Ledger{
		cfg:           o.Config,
		store:         o.Store,
		prices:        o.Prices,
		log:           o.Logger,
		now:           o.Now,
		shared:        sharedSettles{o.Shared},
		observePlugin: o.ObservePlugin,
		newID:         o.NewID,
		met:           newMetrics(),
		settling:      newSettling(),
		streams:       newStreamsEnding(),
		seen:          newCreditSeen(),
		overlap:       overlapsHolds(o.Config),
		work:          newWorkers(),
		local:         inProcess(o.Store),
	}
	l.newStoreWrites()
	if st, ok := o.Store.(AllotStore); ok && l.overlap && allotsCredit(o.Config) {
		l.allot = newAllotments(st, l.log.Warn, l.newID)
		l.allot.retrier = l.retrier
	}
	return l
}

// randomID is the default Options.NewID.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// Wait waits for the settles and releases left to the background (the
// drain's, once no call is in flight) to end.
func (l *Ledger) Wait() { l.bg.Wait() }

// Stop ends the writes still tried again: each answered call among them is
// counted and logged as uncharged (storewrites.go), which takes them a
// moment. The drain calls it when its time is up.
func (l *Ledger) Stop() { l.endLife() }

// Close retires every allotment and waits until ctx ends for their
// releases: on the drain. On a timeout each is released once the carves
// of the calls still running return.
func (l *Ledger) Close(ctx context.Context) {
	if l.allot != nil {
		l.allot.close(ctx)
	}
}

// StoreRetryFor bounds how long a write whose answer waits for it (a video
// job's settle, charged before its answer, and its job's record) is tried
// again while the store is unavailable.
const StoreRetryFor = 5 * time.Minute

// WriteOwed runs op, a store write of request rid the call's answer waits
// for (what names it in the metrics and logs: "job"), each try counted as
// under way, and again while the store is unavailable, for up to
// StoreRetryFor or until the gateway stops.
func (l *Ledger) WriteOwed(what, rid string, op func() error) error {
	ctx, cancel := context.WithTimeout(l.life, StoreRetryFor)
	defer cancel()
	return l.storeWrite(ctx, what, rid, op)
}

// WaitSettled waits until the calls of account answered before it was
// called, on this replica and (with Redis) on every other, have settled,
// or until ctx ends or settleWaitMax has passed: an admin or key holder's
// read of the account waits for it, so that it shows their charges.
func (l *Ledger) WaitSettled(ctx context.Context, account string) {
	start := time.Now()
	l.settling.wait(ctx, account)
	l.shared.wait(ctx, account, start)
}

// WaitStream waits until the stream of request rid, a call of account,
// has settled (or released its hold), or until ctx ends or settleWaitMax
// has passed; it reports whether rid was such a stream of this process,
// not yet ended. Another account's stream is not waited for.
func (l *Ledger) WaitStream(ctx context.Context, rid, account string) bool {
	return l.streams.wait(ctx, rid, account)
}

// Backlog is the ledger's writes under way (relay_store_backlog).
func (l *Ledger) Backlog() *backlog.Tracker { return l.writes }

// OpenHolds is how many holds this process took and has not yet settled or
// released (relay_open_holds).
func (l *Ledger) OpenHolds() int64 { return l.met.openHolds.Load() }

// Uncharged is how many calls were answered whose charge could not be
// written (relay_calls_uncharged_total).
func (l *Ledger) Uncharged() uint64 { return l.met.uncharged.Load() }

// ForceOverlap makes holds overlap the upstream request whatever the store,
// and with st not nil admits them against allotments in st: for tests that
// run the gateway on a store of their own. It must be called before any
// call.
func (l *Ledger) ForceOverlap(st AllotStore) {
	l.overlap = true
	if st != nil {
		l.allot = newAllotments(st, l.log.Warn, l.newID)
		l.allot.retrier = l.retrier
	}
}

// SawBalance records account's balance as a settle would have shown it
// (overlap.go): for tests.
func (l *Ledger) SawBalance(account string, balance pricing.Nano) {
	l.seen.saw(account, balance, time.Now())
}

// Allotted reports whether account has an allotment open on this replica
// (allot.go).
func (l *Ledger) Allotted(account string) bool {
	if l.allot == nil {
		return false
	}
	l.allot.mu.Lock()
	defer l.allot.mu.Unlock()
	return l.allot.open[account] != nil
}

package billing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
)

// Call is what the ledger knows of a relayed call: who pays, for what, and
// what its quote holds.
type Call struct {
	RequestID string
	// Key is the caller's key: its account pays, its spend limit bounds.
	Key store.Key
	// Model is the model as the catalogue held it when the call was
	// admitted: its published prices are the fallback charge's.
	Model    pricing.Model
	Route    string
	Endpoint string // pricing.Endpoint*
	// Params are the call's parameters as admitted, after the plugin's
	// Set: the settle prices with them.
	Params []abi.Param
	Amount pricing.Nano // the quote: what the call may cost, held
	// Admitted is the gateway's clock at the quote: the hold's time.
	Admitted time.Time
	// ChargedFirst: the call is settled before its answer goes out (a
	// video job, whose job the store records first); its hold never goes
	// beside the upstream request.
	ChargedFirst bool
}

// Ticket is one call's hold, from Hold to its settle or release.
//
// Its methods are the handler's, called one at a time; what is left to the
// background (a detached settle or release) owns the hold from then on and
// reads nothing the handler may still change.
type Ticket struct {
	l *Ledger
	c Call

	held bool // the hold is taken
	// carve is the carve of the hold out of an allotment (allot.go), nil
	// when the call held in the store; it is waited for before the
	// hold's settle or release.
	carve    *carving
	settled  bool     // the charge is written (see Settle)
	answered *pending // the answer went out before the settle (see Answering)
	// detached: the settle goes on in the background, which owns the hold
	// from then on (see SettleAnswered).
	detached bool
	// shared is answered in Redis, for the other replicas' admin reads
	// (sharedSettles.begin); "" when not recorded.
	shared string

	// A hold beside the upstream request (Pending): its outcome, and the
	// upstream request's context, which ends when the hold is refused.
	outcome chan error
	sendCtx context.Context
	waited  bool
	err     error
}

// Hold holds c's quote and returns its ticket; a refused hold is the error
// the caller gets (402, or 503 when the ledger is behind or down), and the
// ticket is not held.
//
// Where holds commit in a database (overlaps), the hold's commit and the
// upstream request go at once: Hold returns with the hold under way
// (Pending); the caller sends with SendContext, then Wait is the hold's
// outcome. Either way nothing may reach the client before the hold is
// taken, and a refused hold is the call's answer, as if it had been made
// first: the upstream request, if it was sent, is cancelled and its answer
// dropped. A call admitted against an allotment is held at once, in
// memory, its hold carved out of the allotment in the background.
func (l *Ledger) Hold(ctx context.Context, c Call) (*Ticket, error) {
	t := &Ticket{l: l, c: c}
	h := t.storeHold()
	overlap := l.overlaps(c)
	if overlap && l.allot != nil {
		if al := l.allot.take(c.Key.Account, c.Amount, l.seen.share(c.Key.Account, allotShare), time.Now()); al != nil {
			t.carve = l.carveHold(al, h)
			_ = t.record(nil) // taken, in memory
			return t, nil
		}
	}
	if !overlap {
		return t, t.record(l.storeHold(ctx, h))
	}
	// A refused hold ends the upstream request at once (the gateway counts a
	// cancelled try against no line); a taken one leaves it to the call.
	sendCtx, stop := context.WithCancel(ctx)
	held := make(chan error, 1)
	t.sendCtx, t.outcome = sendCtx, held
	l.work.run(func() {
		err := errHoldPanicked
		defer func() {
			if r := recover(); r != nil { // as the router's PanicHandler would have
				l.log.Error("store hold panicked", "request_id", h.RequestID, "panic", apierr.Bound(fmt.Sprint(r), apierr.MaxMessage))
			}
			if err != nil {
				stop()
			}
			held <- err
		}()
		err = l.storeHold(ctx, h)
	})
	return t, nil
}

// Pending reports whether t's hold goes beside the upstream request: the
// caller sends with SendContext, then waits for the hold (Wait) before any
// of the answer reaches the client.
func (t *Ticket) Pending() bool { return t.outcome != nil }

// SendContext is the context of the upstream request sent beside a
// pending hold: it ends at once when the hold is refused.
func (t *Ticket) SendContext() context.Context { return t.sendCtx }

// Wait waits for a pending hold and returns its outcome: nil when it is
// taken, else the error the caller gets. A ticket whose hold is not
// pending was taken in Hold: nil. The outcome is the call's even when the
// caller waits for it on a panic's way out.
func (t *Ticket) Wait() error {
	if t.outcome == nil {
		return nil
	}
	if !t.waited {
		t.waited = true
		t.err = t.record(<-t.outcome)
	}
	return t.err
}

// errHoldPanicked is the outcome of a hold whose store call panicked
// beside the upstream request (the goroutine recovers it, as the router
// does a handler's): the call fails with 500.
var errHoldPanicked = errors.New("gateway: the store's Hold did not return")

// storeHold is the hold of t's quote.
func (t *Ticket) storeHold() store.Hold {
	c := &t.c
	return store.Hold{
		RequestID: c.RequestID,
		Account:   c.Key.Account,
		KeyID:     c.Key.ID,
		Model:     c.Model.ID,
		Route:     c.Route,
		Endpoint:  c.Endpoint,
		Amount:    c.Amount,
		Created:   c.Admitted,
	}
}

// storeHold writes h, timed; it reads nothing of the call (it may run
// beside the upstream request).
//
// A hold still waiting in the store's queue after billing.max_store_wait
// leaves it unsent and the call is refused (the ledger is behind), as it
// would have been at admission had it come a moment later.
func (l *Ledger) storeHold(ctx context.Context, h store.Hold) error {
	t0 := time.Now()
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if d := l.cfg.Billing.MaxStoreWait; d > 0 && !l.local {
		hctx, cancel = context.WithTimeout(ctx, d)
	}
	err := l.holdWrite(func() error { return l.store.Hold(hctx, h) })
	waited := hctx.Err() != nil && ctx.Err() == nil
	cancel()
	l.met.holdDur.Observe(time.Since(t0).Seconds())
	if err != nil && waited && errors.Is(err, context.DeadlineExceeded) {
		l.writes.Refuse()
		return apierr.Refusal("store_unavailable", apierr.StoreRetryAfter,
			"the ledger is behind (the call's hold waited %s in its queue); nothing was charged, retry after %d seconds",
			time.Since(t0).Round(time.Millisecond), apierr.StoreRetryAfter)
	}
	l.storeDown(err)
	return err
}

// record records the outcome err of t's hold (storeHold): t.held when it
// was taken, else the error the caller gets.
func (t *Ticket) record(err error) error {
	l, c := t.l, &t.c
	if err == nil {
		t.held = true
		l.met.openHolds.Add(1)
		return nil
	}
	if l.overlap && (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInsufficient)) {
		l.seen.forget(c.Key.Account) // refused: the account's calls hold first again
	}
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit", "the account %q has no credit", c.Key.Account)
	}
	if ie := (*store.InsufficientError)(nil); errors.As(err, &ie) && ie.Limit == store.LimitKey {
		return apierr.KeyLimit(ie, &c.Key, c.Admitted)
	}
	return err
}

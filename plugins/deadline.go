package plugins

import (
	"context"
	"sync/atomic"
	"time"
)

// deadlines hands out the contexts guest calls run under. A call must end
// within the call timeout (wazero closes the instance at the context's
// deadline), but a context.WithTimeout per call costs a timer and four
// allocations — a tenth of a whole admit. Calls that start within one tick
// share a context whose deadline is timeout + tick after the tick began, so
// every call gets between timeout and timeout + tick, and the host makes at
// most one context per tick instead of one per call.
//
// The shared context does not carry the request's cancellation: a guest
// call is bounded by the timeout anyway, and a caller that has gone away is
// seen when the call returns (version.fail checks the request's context).
type deadlines struct {
	timeout, tick time.Duration
	cur           atomic.Pointer[sharedDeadline]
}

type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc // never needed: the deadline releases ctx
	start  time.Time          // calls starting before start+tick may share ctx
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, tick: max(timeout/10, time.Millisecond)}
}

// context returns a context whose deadline is at least timeout and at most
// timeout + tick after now (the caller's reading of the clock).
func (d *deadlines) context(now time.Time) context.Context {
	if c := d.cur.Load(); c != nil && now.Sub(c.start) < d.tick {
		return c.ctx
	}
	// The context's timer releases it at its deadline; cancelling it any
	// earlier would stop the calls still running under it.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout+d.tick))
	d.cur.Store(&sharedDeadline{ctx: ctx, cancel: cancel, start: now})
	return ctx
}

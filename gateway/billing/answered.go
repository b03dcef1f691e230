package billing

import (
	"context"
	"errors"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// Answering records that t's JSON answer goes out before its settle: the
// admin reads of the account, on this replica and (with Redis) on the
// others, wait for the settle from now on (WaitSettled). The settle, or
// Finish, ends it.
func (t *Ticket) Answering(ctx context.Context) {
	t.answered = t.l.settling.begin(t.c.Key.Account)
	t.shared = t.l.shared.begin(ctx, t.c.Key.Account, t.c.RequestID)
}

// BeginStream records that t's stream is under way: a read of its
// generation waits for its settle (or release) from now on (WaitStream).
// EndStream, deferred, ends it unless the settle went to the background,
// which ends it there.
func (t *Ticket) BeginStream() { t.l.streams.begin(t.c.RequestID, t.c.Key.Account) }

// EndStream ends what BeginStream began, unless the settle went to the
// background (SettleAnswered), which ends it there.
func (t *Ticket) EndStream() {
	if !t.detached {
		t.l.streams.end(t.c.RequestID)
	}
}

// streamSettleWait is how long a stream's end waits for its settle before
// leaving it to the background (SettleAnswered).
const streamSettleWait = time.Second

// SettleAnswered settles a call whose answer the client already has (a JSON
// answer, a stream to its last event), as Settle does, but lets its
// handler return without waiting for the write whenever it can: the call
// is detached and the settle goes on in the background, with
// storeWrite's retries, until the store answers. Should the store refuse
// it for good (no hold to settle), the hold, if any, is released; should
// the gateway stop first, the hold is left to the lease sweep (or the
// restart's recovery); either way the call is counted in
// relay_calls_uncharged_total. The drain waits for it like any call.
//
// A JSON answer (Answering: the admin reads of the account wait for its
// settle, see settling) is always detached, so that its connection
// serves the caller's next request at once instead of after the ledger's
// write — a database round trip and commit on PostgreSQL, which a
// keep-alive client's next call would otherwise wait for. A stream's
// response ends when its handler returns, and a client that has seen the
// end may read its charge: it is settled first, and detached only when
// the store is unavailable, its settle takes longer than streamSettleWait
// (a reader of its generation then waits for it, see streamsEnding), or
// its hold's carve is still retrying (allot.go), so that neither the
// stream nor the connection waits long for the database. It returns the
// error of a settle that failed for good, nil when the call is settled or
// detached: then st.Charge is its charge. st is the call's settlement,
// already priced (Price).
func (t *Ticket) SettleAnswered(ctx context.Context, st store.Settlement) error {
	l := t.l
	ctx = context.WithoutCancel(ctx)
	// A stream's settle is waited for up to streamSettleWait; one that
	// takes longer (the ledger is behind) is not sent again but followed
	// in the background. A stream whose hold's carve is still retrying
	// (the store is unavailable) is detached at once; the goroutine waits
	// for the carve.
	var first chan error
	if t.answered == nil && t.carve.landedWithin(carveWaitMax) {
		first = make(chan error, 1)
		l.work.run(func() { first <- l.holdWrite(func() error { return l.writeSettle(ctx, st) }) })
		timer := time.NewTimer(streamSettleWait)
		select {
		case err := <-first:
			timer.Stop()
			switch {
			case err == nil:
				t.recordSettled(st)
				return nil
			case !errors.Is(err, store.ErrUnavailable):
				l.uncharged(t.c.RequestID, "settle", err)
				return err
			}
			first = nil // tried again in the background
		case <-timer.C:
		}
	}
	// From here the goroutine owns the hold; it reads nothing of t that
	// the handler may still change.
	t.detached = true
	l.bg.Add(1)
	d := detached{
		rid: t.c.RequestID, account: t.c.Key.Account, model: t.c.Model.ID, route: t.c.Route,
		answered: t.answered, shared: t.shared, carve: t.carve,
	}
	l.work.run(func() { l.settleDetached(ctx, d, st, first) })
	return nil
}

// detached is what the background settle of a call needs of its ticket.
type detached struct {
	rid, account, model, route string
	answered                   *pending
	shared                     string
	carve                      *carving
}

// settleDetached writes st, d's settlement, in the background, after d's
// carve (SettleAnswered). first, if not nil, is a try already under way.
func (l *Ledger) settleDetached(ctx context.Context, d detached, st store.Settlement, first chan error) {
	defer l.bg.Done()
	d.carve.wait()
	// Tried until the store answers: the call was answered, so it
	// is charged once the store is back (or counted uncharged if the
	// gateway stops first, when its hold is left to the lease sweep
	// or the restart's recovery).
	// A stream's try under way (counted as under way by its own
	// holdWrite) is the first.
	try := func() error {
		if first != nil {
			err := <-first
			first = nil
			return err
		}
		return l.holdWrite(func() error { return l.writeSettle(ctx, st) })
	}
	err := l.storeRetry(l.life, "settle", d.rid, try)
	switch {
	case err == nil:
		l.met.openHolds.Add(-1)
		l.met.observeSettle(d.model, d.route, st.Usage, st.Charge)
	case errors.Is(err, store.ErrUnavailable):
		l.uncharged(d.rid, "settle", err)
	default:
		// Refused for good (no hold to settle): nothing is left to
		// charge; the hold, if any, is released.
		l.uncharged(d.rid, "settle", err)
		l.release(ctx, d.rid)
	}
	if d.answered != nil {
		l.settling.end(d.account, d.answered)
		l.shared.end(d.account, d.shared)
	} else {
		l.streams.end(d.rid) // a read of its generation waited for this
	}
}

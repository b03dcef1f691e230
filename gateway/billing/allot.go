package billing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/modelrelay/modelrelay/gateway/backlog"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Allotments: calls admitted in memory against credit set aside in the
// database.
//
// Where the store is an Allotter (PostgreSQL), a call that may overlap its
// hold (overlaps: an account that plainly has the credit, a key with no
// spend limit, an answer that is not a video job) is admitted against an
// allotment instead: a hold this replica took of 1/allotShare of the
// account's balance as it last saw it. The admission is a subtraction in
// memory; the call's own hold is carved out of the allotment (Carve) beside
// its upstream request, and the call waits for that carve only before it
// settles or releases, after its answer is out. So no call of such an
// account waits for a database commit before its answer: at 1,000 calls/s
// a hold's commit was most of what PostgreSQL added to a call's latency
// (BENCHMARKS.md).
//
// Nothing of the books changes. The allotment is an ordinary hold, counted
// in the account's held, renewed with this replica's lease, released when
// it is used up or idle for allotIdle (what was not carved goes back), on
// Drain, or, should this replica die, by another's sweep once the lease
// has run out. No replica can admit beyond what its allotments hold, so
// replicas together never admit beyond the account's credit; a carved hold
// settles, is recovered and is audited like any other. What an allotment
// costs: while it lasts, the account's held shows it whole, and a hold
// that is not carved (another key, another replica) sees that much less
// available — at most 1/allotShare of the balance per replica, and only
// for accounts with overlapMargin times the call's hold.
//
// A hold, carve or settle that meets the store unavailable retires every
// allotment at once (storeDown), so that the next calls hold in the
// database and, while it is down, are refused with 503 as before; a carve
// that met it is tried again until the store answers (storeWrite). A carve
// the allotment cannot cover (it was swept) takes the call's hold without
// a credit check (store.Allotter.HoldAdmitted): the call is charged.

// allotShare: an allotment is 1/allotShare of the account's balance last
// seen. Since an account allots only with overlapMargin times a call's
// hold, an allotment covers at least overlapMargin/allotShare calls.
const allotShare = 100

// allotIdle is how long an allotment no call has used is kept.
const allotIdle = 10 * time.Second

// allotEndpoint is the endpoint an allotment's hold records.
const allotEndpoint = "allotment"

// AllotStore is what allotments need of the store: store/postgres.
type AllotStore interface {
	store.Allotter
	Release(ctx context.Context, requestID, reason string) error
}

// A store.Store that is a store.Allotter has what allotments need: the
// Ledger's type assertion finds it in every store that provides allotments
// (store/postgres guards its store.Allotter).
var _ AllotStore = (interface {
	store.Store
	store.Allotter
})(nil)

// allotments are this replica's open allotments, one per account at most
// that calls are admitted against, and those retired but still carving.
type allotments struct {
	st      AllotStore
	newID   func() string    // a request id ("req_…"), an allotment's is made of
	retrier *backlog.Retrier // the ledger's, shared by every store write
	log     func(msg string, args ...any)
	idle    time.Duration // allotIdle; shorter in tests
	// releaseFor: allotReleaseFor; shorter in tests
	releaseFor time.Duration
	mu         sync.Mutex
	open       map[string]*allotment // by account
	all        map[*allotment]bool   // open and retired, until their release starts
	// taking: accounts whose allotment is being taken; cool: accounts
	// whose last one was refused, until when no other is tried.
	taking map[string]bool
	cool   map[string]time.Time
	// downUntil: the store met unavailable (down); no allotment is taken
	// before then.
	downUntil time.Time
	closed    bool          // close was called: no allotment is taken or kept
	busy      int           // allots and releases running
	quiet     chan struct{} // closed when busy falls to 0 (made by close)
}

// allotRetry is how long after the store met unavailable, or refused an
// account's allotment, none is taken (for any account, or for that one).
const allotRetry = 2 * time.Second

// allotment is one allotment's hold, as this replica accounts for it.
type allotment struct {
	id      string
	account string
	left    pricing.Nano // not yet promised to a call
	carving int          // calls admitted whose carve has not returned
	used    time.Time
	retired bool // no new calls; released once carving is 0
	timer   *time.Timer
}

func newAllotments(st AllotStore, log func(string, ...any), newID func() string) *allotments {
	return &allotments{st: st, newID: newID, retrier: backlog.NewRetrier(func(err error) bool { return errors.Is(err, store.ErrUnavailable) }), log: log, idle: allotIdle, releaseFor: allotReleaseFor, open: map[string]*allotment{}, all: map[*allotment]bool{},
		taking: map[string]bool{}, cool: map[string]time.Time{}}
}

// take admits a call of account whose hold is amount against the account's
// allotment, if it has one with that much left, and returns it. Otherwise
// it returns nil and, unless one is already being taken, takes a new
// allotment of size in the background for the account's next calls (the
// one used up is retired).
func (a *allotments) take(account string, amount, size pricing.Nano, now time.Time) *allotment {
	a.mu.Lock()
	defer a.mu.Unlock()
	if al := a.open[account]; al != nil {
		if al.left >= amount {
			al.left -= amount
			al.carving++
			al.used = now
			return al
		}
		a.retireLocked(al)
	}
	if a.closed || a.taking[account] || now.Before(a.downUntil) || size < amount {
		return nil
	}
	if until, ok := a.cool[account]; ok {
		if now.Before(until) {
			return nil
		}
		delete(a.cool, account)
	}
	a.taking[account] = true
	a.busy++
	go a.allot(account, size)
	return nil
}

// allot takes an allotment of size for account.
func (a *allotments) allot(account string, size pricing.Nano) {
	al := &allotment{id: "allot_" + strings.TrimPrefix(a.newID(), "req_"), account: account, left: size, used: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.st.Allot(ctx, store.Hold{RequestID: al.id, Account: account, Endpoint: allotEndpoint, Amount: size, Created: time.Now()})
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.doneLocked()
	delete(a.taking, account)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		a.downUntil = time.Now().Add(allotRetry)
		return
	case err != nil:
		// Refused (the credit went meanwhile): the account's calls hold
		// in the database.
		a.cool[account] = time.Now().Add(allotRetry)
		return
	}
	a.all[al] = true
	if a.closed || time.Now().Before(a.downUntil) {
		a.retireLocked(al) // taken as the replica stops, or the store went away meanwhile
		return
	}
	if old := a.open[account]; old != nil {
		a.retireLocked(old)
	}
	a.open[account] = al
	al.timer = time.AfterFunc(a.idle, func() { a.expire(al) })
}

// doneLocked records the end of an allot or a release.
func (a *allotments) doneLocked() {
	if a.busy--; a.busy == 0 && a.quiet != nil {
		close(a.quiet)
		a.quiet = nil
	}
}

// expire retires al if no call used it for a.idle, else looks again when
// that has passed since its last use.
func (a *allotments) expire(al *allotment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if al.retired {
		return
	}
	if wait := a.idle - time.Since(al.used); wait > 0 {
		al.timer.Reset(wait)
		return
	}
	a.retireLocked(al)
}

// carved records that the carve of a call admitted against al has
// returned err (nil: the call's hold is in the store).
func (a *allotments) carved(al *allotment, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al.carving--
	if err != nil {
		a.retireLocked(al)
	}
	a.releaseIfDoneLocked(al)
}

// retireLocked stops admitting calls against al and releases it once its
// carves have returned.
func (a *allotments) retireLocked(al *allotment) {
	if al.retired {
		return
	}
	al.retired = true
	if a.open[al.account] == al {
		delete(a.open, al.account)
	}
	if al.timer != nil {
		al.timer.Stop()
	}
	a.releaseIfDoneLocked(al)
}

// releaseIfDoneLocked releases al, retired, once no carve of it is
// pending: what was not carved goes back to the account. A release that
// fails leaves the allotment to the lease sweep.
func (a *allotments) releaseIfDoneLocked(al *allotment) {
	if !al.retired || al.carving > 0 || !a.all[al] {
		return
	}
	delete(a.all, al)
	a.busy++
	go func() {
		err := a.release(al.id)
		if err != nil && !errors.Is(err, store.ErrAlreadySettled) {
			a.log("release allotment: its lease runs out and a sweep releases it", "allotment", al.id, "error", err.Error())
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.doneLocked()
	}()
}

// allotReleaseFor bounds how long an allotment's release is tried again
// while the store is unavailable; past it, the lease sweep releases it.
const allotReleaseFor = 30 * time.Second

// release releases the allotment id, trying again while the store is
// unavailable (a brief outage), under the shared retry budget, for up to
// a.releaseFor.
func (a *allotments) release(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.releaseFor)
	defer cancel()
	err, _ := a.retrier.Do(ctx, "release", id, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return a.st.Release(ctx, id, "allotment ended")
	})
	return err
}

// close retires every allotment, takes no more, and waits until ctx ends
// for the allots and releases under way: on Drain. An allotment with a
// carve still pending (Drain timed out) is released when it returns.
func (a *allotments) close(ctx context.Context) {
	a.mu.Lock()
	a.closed = true
	for al := range a.all {
		a.retireLocked(al)
	}
	for a.busy > 0 {
		if a.quiet == nil {
			a.quiet = make(chan struct{})
		}
		quiet := a.quiet
		a.mu.Unlock()
		select {
		case <-quiet:
		case <-ctx.Done():
			return
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
}

// down records that the store met unavailable: every allotment stops
// admitting at once, and none is taken for allotRetry (see storeDown).
func (a *allotments) down() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.downUntil = time.Now().Add(allotRetry)
	for _, o := range a.open {
		a.retireLocked(o)
	}
}

// storeDown retires every allotment if err says the store is unavailable
// (a hold, a settle or a carve met it), so that no call is admitted in
// memory while the database may be down.
func (l *Ledger) storeDown(err error) {
	if l.allot != nil && errors.Is(err, store.ErrUnavailable) {
		l.allot.down()
	}
}

// carving is a call's carve, which runs beside its upstream request:
// done is closed when it has returned.
type carving struct{ done chan struct{} }

// wait waits for the carve, if the call has one, to return.
func (cv *carving) wait() {
	if cv != nil {
		<-cv.done
	}
}

// carveWaitMax is how long a stream's settle or a failed call's release
// waits in its handler for the call's carve before leaving it to the
// background: a carve takes milliseconds unless the store is unavailable.
const carveWaitMax = time.Second

// landedWithin waits up to d for the carve, if the call has one, to
// return, and reports whether it has.
func (cv *carving) landedWithin(d time.Duration) bool {
	if cv == nil {
		return true
	}
	select {
	case <-cv.done:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cv.done:
		return true
	case <-t.C:
		return false
	}
}

// carveHold carves h, the hold of a call admitted against al, out of al,
// in the background, trying again while the store is unavailable until it
// answers: the call's answer does not wait for it, so it must land. A carve
// al cannot cover (the allotment is gone: this replica was cut off from
// the database past its lease and a sweep released it) takes the call's
// hold without a credit check (HoldAdmitted): the call was admitted
// against credit the allotment held, and is charged like any. Neither
// try has a deadline of its own: waiting in the store's queue is not
// failing (the store bounds each statement it sends, and admission bounds
// the queue, see storewrites.go).
func (l *Ledger) carveHold(al *allotment, h store.Hold) *carving {
	cv := &carving{done: make(chan struct{})}
	l.work.run(func() {
		defer close(cv.done)
		err := l.storeWrite(l.life, "carve", h.RequestID, func() error {
			t0 := time.Now()
			err := l.allot.st.Carve(l.life, al.id, h)
			l.met.carveDur.Observe(time.Since(t0).Seconds())
			l.storeDown(err)
			return err
		})
		// ErrExists: the request id already has its hold, or an outcome:
		// an earlier try landed and its answer was lost with the
		// connection (request ids are never reused).
		if errors.Is(err, store.ErrExists) {
			err = nil
		}
		l.allot.carved(al, err)
		if errors.Is(err, store.ErrNoHold) {
			err = l.storeWrite(l.life, "hold", h.RequestID, func() error {
				err := l.allot.st.HoldAdmitted(l.life, h)
				l.storeDown(err)
				return err
			})
			if errors.Is(err, store.ErrExists) {
				err = nil
			}
		}
		if err != nil {
			// The call's settle (or release) finds no hold and says
			// whether an answered call went uncharged (storewrites.go).
			l.log.Error("carve: the call's hold could not be written", "request_id", h.RequestID, "error", err.Error())
		}
	})
	return cv
}

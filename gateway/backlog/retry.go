package backlog

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// Bounds of a Retrier's backoff and budget.
const (
	// Each write waits backoffMin after its first failure, then twice as
	// long after each further one, up to backoffMax, each wait drawn at
	// random from its upper half (jitter: writes that failed together do
	// not come back together).
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// The shared budget lets retries through at between budgetMin and
	// budgetMax per second (a burst of budgetBurst), starting at the top.
	budgetMin   = 5
	budgetMax   = 2000
	budgetBurst = 200
)

// Retrier runs store writes, trying one again while it fails with an error
// Retry says may pass. Its retries share one budget (see the package doc).
type Retrier struct {
	// Retry reports whether err may pass (the store is unavailable).
	Retry func(err error) bool
	// OnRetry, if set, is called before each retry of a write of kind
	// what; OnFirstFailure once per write whose first try failed so.
	OnRetry        func(what string)
	OnFirstFailure func(what, key string, err error)

	// budget is replaced, not re-rated, when its rate goes up (see adjust);
	// it is swapped under mu and read without it.
	budget  atomic.Pointer[rate.Limiter]
	waiting atomic.Int64 // writes between tries
	mu      sync.Mutex   // orders a rate change after a retry's outcome; guards raised
	// raised is closed when the budget's rate goes up: a retry waiting
	// for a token booked at the old rate books again (rate.Limiter keeps
	// a reservation's time when its limit changes).
	raised chan struct{}
	group  singleflight.Group
}

// NewRetrier returns a Retrier that tries again while retry(err) holds.
func NewRetrier(retry func(error) bool) *Retrier {
	r := &Retrier{Retry: retry, raised: make(chan struct{})}
	r.budget.Store(rate.NewLimiter(budgetMax, budgetBurst))
	return r
}

// Waiting is how many writes wait for their next try now.
func (r *Retrier) Waiting() int64 { return r.waiting.Load() }

// Budget is the retries per second the shared budget lets through now.
func (r *Retrier) Budget() float64 { return float64(r.budget.Load().Limit()) }

// Do runs op, and again while it fails with an error r.Retry accepts,
// until ctx ends; it returns op's last error (ctx's error if ctx ended
// first, joined with the last failure) and how many times op ran. Two Do
// of the same what and key at once run op once: the second waits for the
// first's outcome (key is the write's request id; op must be the same
// write).
func (r *Retrier) Do(ctx context.Context, what, key string, op func() error) (err error, tries int) {
	type outcome struct {
		err   error
		tries int
	}
	v, _, _ := r.group.Do(what+"\x00"+key, func() (any, error) {
		err, tries := r.do(ctx, what, key, op)
		return outcome{err, tries}, nil
	})
	o := v.(outcome)
	return o.err, o.tries
}

func (r *Retrier) do(ctx context.Context, what, key string, op func() error) (error, int) {
	err := op()
	if err == nil || !r.Retry(err) {
		return err, 1
	}
	if r.OnFirstFailure != nil {
		r.OnFirstFailure(what, key, err)
	}
	tries := 1
	for wait := backoffMin; ; wait = min(2*wait, backoffMax) {
		if werr := r.pause(ctx, wait/2+rand.N(wait/2+1)); werr != nil {
			return errors.Join(werr, err), tries
		}
		if r.OnRetry != nil {
			r.OnRetry(what)
		}
		err = op()
		tries++
		r.adjust(err == nil || !r.Retry(err))
		if err == nil || !r.Retry(err) {
			return err, tries
		}
	}
}

// pause waits d, then for a token of the budget, or until ctx ends (its
// error). A token booked while the rate was low is booked again when the
// rate goes up: after an outage the writes that waited go at the rate the
// store now takes, not the trickle they booked at.
func (r *Retrier) pause(ctx context.Context, d time.Duration) error {
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	if err := sleep(ctx, d); err != nil {
		return err
	}
	for {
		r.mu.Lock()
		raised := r.raised
		res := r.budget.Load().Reserve() // OK: the burst is not 0
		r.mu.Unlock()
		t := time.NewTimer(res.Delay())
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			t.Stop()
			res.Cancel()
			return ctx.Err()
		case <-raised:
			t.Stop()
			res.Cancel()
		}
	}
}

// adjust doubles the budget's rate after a retry that the store answered,
// halves it after one it did not.
//
// A raise starts a new limiter rather than re-rating the old one: the
// writes that waited at the floor each booked a token there, and
// rate.Limiter gives a cancelled booking's token back only when no later
// one was made, so when they all book again the old limiter would still
// owe every token booked before — at 10/s, 50 s for 500 writes — and the
// first retry that could raise the rate again would wait behind them.
// The new limiter keeps what the old one had in hand, never a debt.
func (r *Retrier) adjust(answered bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.budget.Load()
	old := float64(cur.Limit())
	l := max(old/2, budgetMin)
	if answered {
		l = min(2*old, budgetMax)
	}
	if l <= old {
		cur.SetLimit(rate.Limit(l))
		return
	}
	next := rate.NewLimiter(rate.Limit(l), cur.Burst())
	if spent := cur.Burst() - int(max(0, cur.Tokens())); spent > 0 {
		next.ReserveN(time.Now(), spent) // start with what cur had in hand
	}
	r.budget.Store(next)
	close(r.raised)
	r.raised = make(chan struct{})
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

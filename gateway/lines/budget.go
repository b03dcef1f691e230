package lines

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// rolling counts two kinds of event (a and b) over a sliding window of n
// buckets of width each: the window is the current bucket and the n−1
// before it. It is not safe for concurrent use; its owner locks.
type rolling struct {
	width   time.Duration
	buckets []pair
	head    int64 // bucket number (time/width) of the newest bucket
	sum     pair
}

type pair struct{ a, b int64 }

func newRolling(window time.Duration, n int) rolling {
	width := max(window/time.Duration(n), time.Millisecond)
	return rolling{width: width, buckets: make([]pair, n)}
}

// advance drops the buckets that have left the window by now.
func (r *rolling) advance(now time.Time) {
	k := now.UnixNano() / int64(r.width)
	if k <= r.head {
		return
	}
	n := int64(len(r.buckets))
	if k-r.head >= n {
		clear(r.buckets)
		r.sum = pair{}
	} else {
		for h := r.head + 1; h <= k; h++ {
			old := &r.buckets[h%n]
			r.sum.a -= old.a
			r.sum.b -= old.b
			*old = pair{}
		}
	}
	r.head = k
}

func (r *rolling) add(now time.Time, a, b int64) {
	r.advance(now)
	cur := &r.buckets[r.head%int64(len(r.buckets))]
	cur.a += a
	cur.b += b
	r.sum.a += a
	r.sum.b += b
}

func (r *rolling) totals(now time.Time) (a, b int64) {
	r.advance(now)
	return r.sum.a, r.sum.b
}

// budgetWindow is the sliding window of the retry budget.
const budgetWindow = 10 * time.Second

// retryBudget bounds the retries of the whole gateway (Finagle's
// RetryBudget): over the last budgetWindow, retries may not exceed ratio ×
// first tries + floor. A call refused a retry answers with its last failure.
type retryBudget struct {
	ratio float64
	floor float64 // retries allowed per window whatever the traffic

	mu      sync.Mutex
	win     rolling // a: first tries, b: retries
	refused atomic.Uint64
}

func newRetryBudget(rc config.RetryConfig) *retryBudget {
	return &retryBudget{
		ratio: rc.BudgetRatio,
		floor: max(rc.BudgetMinPerSecond, 0) * budgetWindow.Seconds(),
		win:   newRolling(budgetWindow, 10),
	}
}

// first records a call's first try.
func (b *retryBudget) first(now time.Time) {
	b.mu.Lock()
	b.win.add(now, 1, 0)
	b.mu.Unlock()
}

// retry takes one retry from the budget, or reports that none is left.
func (b *retryBudget) retry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	firsts, retries := b.win.totals(now)
	if float64(retries+1) > b.ratio*float64(firsts)+b.floor {
		b.refused.Add(1)
		return false
	}
	b.win.add(now, 0, 1)
	return true
}

// panicMode admits the share of calls sent to the least-bad lines when
// every line of a pool is open, and rate-limits the log line saying so.
type panicMode struct {
	share float64
	seen  atomic.Uint64 // calls that found their pool in panic with a live line
	sent  atomic.Uint64 // of which admitted

	mu     sync.Mutex
	logged map[string]time.Time // pool (route/model) → last log
}

// panicLogEvery is the least time between two "panic" log lines of a pool.
const panicLogEvery = 10 * time.Second

func newPanicMode(share float64) *panicMode {
	return &panicMode{share: share, logged: map[string]time.Time{}}
}

// admit reports whether this call is one of the share sent on: call n
// (from 1) is admitted iff floor(n×share) > floor((n−1)×share), so exactly
// floor(N×share) of any first N calls are, evenly spread.
func (p *panicMode) admit() bool {
	if p.share <= 0 {
		return false
	}
	n := p.seen.Add(1)
	ok := math.Floor(float64(n)*p.share) > math.Floor(float64(n-1)*p.share)
	if ok {
		p.sent.Add(1)
	}
	return ok
}

// shouldLog reports whether pool's panic is due to be logged now.
func (p *panicMode) shouldLog(pool string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if last, ok := p.logged[pool]; ok && now.Sub(last) < panicLogEvery {
		return false
	}
	p.logged[pool] = now
	return true
}

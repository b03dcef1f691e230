package gateway

import (
	"math"
	"math/rand/v2"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Shedding under overload.
//
// Past its capacity, a gateway that admits every call serves fewer of them
// than at capacity: each call in progress is a goroutine with its buffers,
// the live heap climbs to memory_limit, the collector runs back to back, and
// every call waits seconds (BENCHMARKS.md, "Overload"). Bounding the calls in
// progress cannot tell a call waiting for the CPU from one waiting for a
// 30-second completion, which costs nothing but memory (RATIONALE.md).
//
// What does tell them apart is the Go scheduler: a goroutine waiting for the
// provider is not runnable, one waiting for the CPU is. The runtime records
// how long each goroutine stayed runnable before it ran
// (/sched/latencies:seconds, one run in eight). Every shedWindow, the first
// relayed call reads that histogram and takes the 99th percentile of the
// window as the gateway's queueing delay: the median stays at microseconds
// even past capacity, because most runs follow a handoff that runs at once
// (RATIONALE.md, "Overload"). Once the delay has stayed above the target for
// shedInterval (so that a stall of the machine, a collection or a burst does
// not count), a share of new relayed calls is refused at once with 503 and
// Retry-After, before any work is done for them: the share grows while the
// delay stays above the target and shrinks once it is back under it. Calls
// already admitted are never refused.
const (
	shedWindow     = 25 * time.Millisecond
	shedInterval   = 100 * time.Millisecond // time above target before shedding starts
	shedQuantile   = 0.99                   // of the window's runs: the queueing delay
	shedMinRuns    = 8                      // fewer runs recorded in a window: no evidence of overload
	shedScale      = 1 << 16                // the share is p/shedScale
	shedMax        = shedScale * 95 / 100   // never refuse every call
	shedStart      = shedScale * 5 / 100    // the first share, and the least step up
	shedFloor      = shedScale / 100        // below this the shedder stops
	shedRetryAfter = 1                      // seconds, in Retry-After
)

// shedder decides which new calls to refuse.
type shedder struct {
	target time.Duration // <= 0: never shed
	p      atomic.Uint32 // the share of new calls refused, of shedScale
	epoch  time.Time     // the origin of next and last: the monotonic clock, which no clock step moves
	next   atomic.Int64  // ns since epoch: the end of the current window
	last   atomic.Int64  // ns since epoch: the last reading
	delay  atomic.Int64  // the last window's queueing delay, ns (for /metrics)
	shed   atomic.Uint64 // calls refused so far

	mu         sync.Mutex // one caller steps at a time; the rest go on
	sample     []rtmetrics.Sample
	prev       []uint64  // the histogram's counts at the last reading
	aboveSince time.Time // start of the run of windows above target; zero if none
}

func newShedder(target time.Duration) *shedder {
	s := &shedder{target: target}
	if target <= 0 {
		return s
	}
	s.sample = []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}}
	rtmetrics.Read(s.sample)
	if s.sample[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		s.target = 0 // not recorded by this runtime: never shed
		return s
	}
	s.prev = append([]uint64(nil), s.sample[0].Value.Float64Histogram().Counts...)
	s.epoch = time.Now()
	s.next.Store(int64(shedWindow))
	return s
}

// since is now in ns since epoch (monotonic when now is from time.Now).
func (s *shedder) since(now time.Time) int64 { return int64(now.Sub(s.epoch)) }

// sinceLast is how long before now the histogram was last read.
func (s *shedder) sinceLast(now time.Time) time.Duration {
	return time.Duration(s.since(now) - s.last.Load())
}

// refuse reports whether to refuse a new call arriving at now, and counts it
// if so. Once per shedWindow, one caller first measures the window and
// updates the share.
func (s *shedder) refuse(now time.Time) bool {
	if s.target <= 0 {
		return false
	}
	if t := s.since(now); t >= s.next.Load() && s.mu.TryLock() {
		if t >= s.next.Load() { // not done by another caller meanwhile
			s.measure(now)
		}
		s.mu.Unlock()
	}
	p := s.p.Load()
	if p == 0 || rand.Uint32N(shedScale) >= p {
		return false
	}
	s.shed.Add(1)
	return true
}

// measure reads the scheduler's histogram and steps on the window since the
// last reading. A window longer than shedInterval had no relayed call for a
// while: what its runs waited is old news (the end of a burst drained, say)
// and says nothing of now, so the share only decays, as it would have in
// each window of the gap. (Calls slower than that are no overload a gateway
// sees: past capacity they arrive faster than they are served.) s.mu held.
func (s *shedder) measure(now time.Time) {
	rtmetrics.Read(s.sample)
	h := s.sample[0].Value.Float64Histogram()
	if gap := s.sinceLast(now); gap > shedInterval {
		s.idle(int(gap / shedWindow))
	} else {
		s.step(now, windowQuantile(s.prev, h.Counts, h.Buckets, shedQuantile))
	}
	copy(s.prev, h.Counts)
	t := s.since(now)
	s.last.Store(t)
	s.next.Store(t + int64(shedWindow))
}

// idle decays the share as windows windows under the target would. s.mu
// held.
func (s *shedder) idle(windows int) {
	s.aboveSince = time.Time{}
	s.delay.Store(0)
	s.p.Store(decayN(s.p.Load(), windows))
}

// decayN is windows steps of decay.
func decayN(p uint32, windows int) uint32 {
	for ; windows > 0 && p > 0; windows-- {
		p = decay(p)
	}
	return p
}

// decay is one window's step down of the share: an eighth, to 0 under
// shedFloor.
func decay(p uint32) uint32 {
	p -= p / 8
	if p < shedFloor {
		return 0
	}
	return p
}

// share is the share of new calls being refused, in [0, 1]: with no call
// for over shedInterval, what the next call will find (measure decays it).
func (s *shedder) share() float64 {
	p := s.p.Load()
	if s.target > 0 {
		if gap := s.sinceLast(time.Now()); gap > shedInterval {
			p = decayN(p, int(gap/shedWindow))
		}
	}
	return float64(p) / shedScale
}

// queueDelay is the last window's queueing delay; 0 with no call for over
// shedInterval (nothing measured since).
func (s *shedder) queueDelay() time.Duration {
	if s.target > 0 && s.sinceLast(time.Now()) > shedInterval {
		return 0
	}
	return time.Duration(s.delay.Load())
}

// step updates the share from the queueing delay of the window ending at
// now: up by a quarter (at least shedStart) while the delay is above the
// target, once it has been for shedInterval; down by an eighth otherwise.
// s.mu held.
func (s *shedder) step(now time.Time, delay time.Duration) {
	s.delay.Store(int64(delay))
	p := s.p.Load()
	if delay > s.target {
		if s.aboveSince.IsZero() {
			s.aboveSince = now.Add(-shedWindow)
		}
		if p == 0 && now.Sub(s.aboveSince) < shedInterval {
			return
		}
		// Multiplicative, so that a large overload is met within a few
		// windows, with a least step so that a small share grows.
		p = min(max(p+shedStart, p+p/4), shedMax)
	} else {
		s.aboveSince = time.Time{}
		p = decay(p)
	}
	s.p.Store(p)
}

// windowQuantile is the q-quantile of the runs counted between two readings
// of a cumulative histogram (the lower bound of the bucket it falls in), or
// 0 when the window holds fewer than shedMinRuns.
func windowQuantile(prev, cur []uint64, buckets []float64, q float64) time.Duration {
	var n uint64
	for i := range cur {
		if cur[i] < prev[i] { // the runtime's counts only grow; if not, no evidence
			return 0
		}
		n += cur[i] - prev[i]
	}
	if n < shedMinRuns {
		return 0
	}
	var seen uint64
	for i := range cur {
		seen += cur[i] - prev[i]
		if float64(seen) >= q*float64(n) {
			lo := buckets[i]
			if lo <= 0 || math.IsInf(lo, 0) {
				return 0
			}
			return time.Duration(lo * float64(time.Second))
		}
	}
	return 0
}

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// A virtual CPU the hypervisor does not run stalls everything on it: on the
// benchmark host a stall of 20–60 ms comes a few times a minute, and
// /proc/stat charges it as steal when the CPU runs again (a task switched in
// before a 47.5 ms stall was charged 151 µs of CPU time for it, seen with
// `perf sched`). At 1,000 calls a second one such stall delays 50–100 calls,
// and two or three in a 20 s window set its p99, whatever the target.
//
// stallWatch samples the steal counters of the CPUs the load runs on while a
// measurement runs, so that the report can give, beside every percentile,
// the percentiles of the calls no stall touched.

// stallSample is how often the counters are read: a read of /proc/stat costs
// about 18 µs on the load generator's CPU, 0.4% of it at this period.
const stallSample = 5 * time.Millisecond

// stallDrain is the least time after a stall during which calls are still
// counted as touched by it: the calls that arrived during the stall are
// served after it, and the ones after them wait for that backlog (at half a
// CPU's load it takes as long again as the stall). A stall of more than half
// of it is given twice its own length.
const stallDrain = 100 * time.Millisecond

// tickDur is one USER_HZ tick, the unit of /proc/stat's steal.
const tickDur = time.Second / userHZ

// span is a time interval [from, to].
type span struct{ from, to time.Time }

type stallWatch struct {
	cpus  []int
	stop  chan struct{}
	done  chan struct{}
	spans []span // stalls, widened by the reading's uncertainty and the drain
	ticks int64  // steal charged to the CPUs while watching
	err   error  // the first read that failed; no spans after it
}

// watchStalls starts sampling the steal of cpus; nil when there are none.
func watchStalls(cpus []int) *stallWatch {
	if len(cpus) == 0 {
		return nil
	}
	w := &stallWatch{cpus: cpus, stop: make(chan struct{}), done: make(chan struct{})}
	prev, err := readSteals(cpus)
	if err != nil {
		w.err = err
		close(w.done)
		return w
	}
	go w.run(prev, time.Now())
	return w
}

func (w *stallWatch) run(prev []int64, at time.Time) {
	defer close(w.done)
	t := time.NewTicker(stallSample)
	defer t.Stop()
	for stopped := false; !stopped; {
		select {
		case <-w.stop:
			stopped = true // one more reading: steal charged since the last
		case <-t.C:
		}
		cur, err := readSteals(w.cpus)
		now := time.Now()
		if err != nil {
			w.err = err
			return
		}
		for i := range cur {
			if d := cur[i] - prev[i]; d > 0 {
				w.ticks += d
				w.spans = append(w.spans, stallSpan(at, now, d))
			}
		}
		prev, at = cur, now
	}
}

// stallSpan is the time a stall of d ticks, charged between two readings
// taken at a and b, can have touched calls in. It ended before b. It lasted
// less than d+1 ticks (the counter shows whole ticks) and was charged at
// most a tick after it ended (at the CPU's next tick or switch), so it began
// no earlier than d+2 ticks before a. The calls after it wait for the
// backlog (stallDrain).
func stallSpan(a, b time.Time, d int64) span {
	length := time.Duration(d+1) * tickDur
	return span{from: a.Add(-length - tickDur), to: b.Add(max(stallDrain, 2*length))}
}

// end stops the sampling and returns the stall spans seen.
func (w *stallWatch) end() ([]span, int64, error) {
	if w == nil {
		return nil, 0, nil
	}
	select {
	case <-w.done:
	default:
		close(w.stop)
		<-w.done
	}
	return w.spans, w.ticks, w.err
}

// call is an answered call's start and latency.
type call struct {
	start time.Time
	lat   time.Duration
}

// touched reports whether the call was in flight during any of the spans,
// sorted by from.
func (c call) touched(spans []span) bool {
	end := c.start.Add(c.lat)
	for _, s := range spans {
		if s.from.After(end) {
			return false
		}
		if !s.to.Before(c.start) {
			return true
		}
	}
	return false
}

// Clear is the latency of the calls no stall touched.
type Clear struct {
	Lat      Lat    `json:"latency"`
	Calls    uint64 `json:"calls"`    // answered calls clear of every stall
	Excluded uint64 `json:"excluded"` // answered calls a stall touched
	Stalls   int    `json:"stalls"`   // stall spans: a reading that found steal charged to a CPU, one per CPU
	Ticks    int64  `json:"ticks"`    // steal charged over the measurement, in ticks of 10 ms
}

// clearOf summarises the calls no span touched, with vegeta's metrics.
func clearOf(calls []call, spans []span, ticks int64) *Clear {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var m vegeta.Metrics
	c := &Clear{Stalls: len(spans), Ticks: ticks}
	for _, k := range calls {
		if k.touched(spans) {
			c.Excluded++
			continue
		}
		c.Calls++
		m.Add(&vegeta.Result{Timestamp: k.start, Latency: k.lat, Code: http.StatusOK})
	}
	m.Close()
	if c.Calls > 0 {
		c.Lat = latOf(&m)
	}
	return c
}

// readSteals reads the steal counters of cpus from one read of /proc/stat.
func readSteals(cpus []int) ([]int64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := parseSteals(f, cpus)
	if err != nil {
		return nil, fmt.Errorf("/proc/stat: %w", err)
	}
	return n, nil
}

// summary is the log's note on c: "" for nil.
func (c *Clear) summary() string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("; %d stalls (%d ticks): clear p99 %v, %d calls excluded", c.Stalls, c.Ticks, c.Lat.P99, c.Excluded)
}

// writeCalls writes calls as CSV: start (Unix ns), latency (ns), one call a
// line, in the order they were answered.
func writeCalls(name string, calls []call) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "start_unix_ns,latency_ns")
	for _, c := range calls {
		fmt.Fprintf(w, "%d,%d\n", c.start.UnixNano(), c.lat.Nanoseconds())
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

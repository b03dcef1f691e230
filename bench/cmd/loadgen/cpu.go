package main

import (
	"fmt"
	"time"
)

// CPU is the CPU time per call of the processes one measurement's calls ran
// through: the target's own (a hop; 0 for direct, which has none) and the
// provider's. Both run on the CPU the systems under test share, so their sum
// is how busy each call keeps it; a hop that keeps it busier queues every
// call behind more work in any burst, and its tail grows first. For
// gateway-pg, DB is the CPU time of the PostgreSQL server processes serving
// its database (its connections' backends), which run outside the pinning,
// on whichever CPU the server may use.
type CPU struct {
	Hop      time.Duration `json:"hop_ns"`
	Provider time.Duration `json:"provider_ns"`
	DB       time.Duration `json:"db_ns,omitempty"`
}

// cpuMeter starts counting the CPU time of the provider (-sim-pid), of t's
// process and, for gateway-pg, of its database's backends; the function it
// returns divides what they ran meanwhile by the calls made. Without
// -sim-pid, or when a process cannot be read, the result is nil.
func (b *bench) cpuMeter(t target) func(calls uint64) *CPU {
	none := func(uint64) *CPU { return nil }
	if b.simPID == 0 {
		return none
	}
	db := ""
	if t.Name == gatewayPG {
		db = b.s.PGDB
	}
	read := func() (hop, provider time.Duration, backends map[int]time.Duration, err error) {
		if t.PID > 0 {
			if hop, err = readCPU(t.PID); err != nil {
				return 0, 0, nil, fmt.Errorf("%s (pid %d): %w", t.Name, t.PID, err)
			}
		}
		if provider, err = readCPU(b.simPID); err != nil {
			return 0, 0, nil, fmt.Errorf("provider (pid %d): %w", b.simPID, err)
		}
		if db != "" {
			if backends, err = readBackends(db); err != nil {
				return 0, 0, nil, fmt.Errorf("database %s: %w", db, err)
			}
		}
		return hop, provider, backends, nil
	}
	h0, p0, d0, err := read()
	if err != nil {
		b.logf("cpu per call: %v", err)
		return none
	}
	return func(calls uint64) *CPU {
		h1, p1, d1, err := read()
		if err != nil {
			b.logf("cpu per call: %v", err)
			return nil
		}
		if calls == 0 || h1 < h0 || p1 < p0 {
			return nil // no calls, or a thread exited with more time than the window added
		}
		n := time.Duration(calls)
		return &CPU{Hop: (h1 - h0) / n, Provider: (p1 - p0) / n, DB: backendsRan(d0, d1) / n}
	}
}

// backendsRan is the CPU time the server processes of after ran since
// before: a process not in before (a connection opened meanwhile) counts
// from its start; one that ended meanwhile is not counted.
func backendsRan(before, after map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, t := range after {
		if t0, ok := before[pid]; ok && t0 <= t {
			t -= t0
		}
		sum += t
	}
	return sum
}

// summary is the CPU per call for the log line; "" if not measured.
func (c *CPU) summary() string {
	switch {
	case c == nil:
		return ""
	case c.Hop == 0:
		return fmt.Sprintf("; cpu/call provider %s", micros(c.Provider))
	case c.DB > 0:
		return fmt.Sprintf("; cpu/call hop %s database %s provider %s", micros(c.Hop), micros(c.DB), micros(c.Provider))
	}
	return fmt.Sprintf("; cpu/call hop %s provider %s", micros(c.Hop), micros(c.Provider))
}

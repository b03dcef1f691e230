package main

import (
	"fmt"
	"time"
)

// CPU is the CPU time per call of the processes one measurement's calls ran
// through: the target's own (a hop; 0 for direct, which has none) and the
// provider's. Both run on the CPU the systems under test share, so their sum
// is how busy each call keeps it; a hop that keeps it busier queues every
// call behind more work in any burst, and its tail grows first.
type CPU struct {
	Hop      time.Duration `json:"hop_ns"`
	Provider time.Duration `json:"provider_ns"`
}

// cpuMeter starts counting the CPU time of the provider (-sim-pid) and of
// t's process; the function it returns divides what they ran meanwhile by
// the calls made. Without -sim-pid, or when a process cannot be read, the
// result is nil.
func (b *bench) cpuMeter(t target) func(calls uint64) *CPU {
	none := func(uint64) *CPU { return nil }
	if b.simPID == 0 {
		return none
	}
	read := func() (hop, provider time.Duration, err error) {
		if t.PID > 0 {
			if hop, err = readCPU(t.PID); err != nil {
				return 0, 0, fmt.Errorf("%s (pid %d): %w", t.Name, t.PID, err)
			}
		}
		if provider, err = readCPU(b.simPID); err != nil {
			return 0, 0, fmt.Errorf("provider (pid %d): %w", b.simPID, err)
		}
		return hop, provider, nil
	}
	h0, p0, err := read()
	if err != nil {
		b.logf("cpu per call: %v", err)
		return none
	}
	return func(calls uint64) *CPU {
		h1, p1, err := read()
		if err != nil {
			b.logf("cpu per call: %v", err)
			return nil
		}
		if calls == 0 || h1 < h0 || p1 < p0 {
			return nil // no calls, or a thread exited with more time than the window added
		}
		n := time.Duration(calls)
		return &CPU{Hop: (h1 - h0) / n, Provider: (p1 - p0) / n}
	}
}

// summary is the CPU per call for the log line; "" if not measured.
func (c *CPU) summary() string {
	if c == nil {
		return ""
	}
	if c.Hop == 0 {
		return fmt.Sprintf("; cpu/call provider %s", micros(c.Provider))
	}
	return fmt.Sprintf("; cpu/call hop %s provider %s", micros(c.Hop), micros(c.Provider))
}

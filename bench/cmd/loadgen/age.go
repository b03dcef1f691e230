package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// AgeRun is one gateway's ageing, the phase that runs before the others:
// its throughput fresh, then AgeCalls calls as fast as Conns connections
// go (its ledger grown accordingly) and a step past its capacity, so that
// every later figure is the sustained one, not a fresh process's. The
// throughput phase's figure against Fresh is the target "sustained within
// 10% of fresh".
type AgeRun struct {
	Target       string        `json:"target"`
	Fresh        float64       `json:"fresh_throughput"` // answered calls/s, fresh, Conns connections
	FreshSuccess float64       `json:"fresh_success"`
	Calls        uint64        `json:"calls"`     // calls the ageing sent, the fresh measurement's included
	Answered     uint64        `json:"answered"`  // of which answered 2xx: at least AgeCalls before the step
	Took         time.Duration `json:"took"`      // the ageing's calls (not the fresh measurement nor the step)
	Rate         float64       `json:"rate"`      // answered calls/s while ageing (not the fresh measurement nor the step)
	StepRate     int           `json:"step_rate"` // the step past capacity: offered calls/s, open loop
	StepSent     uint64        `json:"step_sent"`
	StepAnswered float64       `json:"step_answered_per_s"`
	StepSuccess  float64       `json:"step_success"`
	Before       *Gauges       `json:"before,omitempty"`
	After        *Gauges       `json:"after,omitempty"`
	Errors       []string      `json:"errors,omitempty"`
}

// Gauges are what grows in a gateway as it serves calls, read from its
// /metrics and its /proc status.
type Gauges struct {
	Goroutines float64 `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	RSS        int64   `json:"rss_bytes"`
}

// settleAfterStep is how long the ageing waits after the step before it
// reads what grew.
const settleAfterStep = 5 * time.Second

// ageChunk is how long one attack of the ageing lasts: progress is logged
// between them.
const ageChunk = 15 * time.Second

// age ages each gateway in turn (see AgeRun).
func (b *bench) age(ctx context.Context, targets []target, res *Results) {
	n := uint64(b.s.Conns)
	for _, t := range targets {
		if !isGateway(t.Name) || ctx.Err() != nil {
			continue
		}
		r := AgeRun{Target: t.Name, Before: b.gauges(ctx, t)}
		c := newClient(b.s.Conns, b.s.Conns, b.s.Timeout)
		if b.s.Warmup > 0 {
			b.attack(ctx, c, t, vegeta.Rate{}, b.s.Warmup, n, n, false)
		}
		m := b.attack(ctx, c, t, vegeta.Rate{}, b.s.TPDuration, n, n, false)
		r.Fresh, r.FreshSuccess = m.all.Throughput, m.all.Success
		r.Calls, r.Answered = m.all.Requests, answered(m)
		r.Errors = append(r.Errors, m.all.Errors...)
		b.logf("age %-10s fresh %.0f/s success %.4f; ageing to %d calls", t.Name, r.Fresh, r.FreshSuccess, b.s.AgeCalls)
		t0, before := time.Now(), r.Answered
		chunk := min(ageChunk, 10*b.s.TPDuration)
		// Served means answered: a gateway that refuses part of the
		// calls (gateway-pg past its ledger's pace) is aged as long as it
		// takes to answer AgeCalls, not merely to be sent them.
		for r.Answered < b.s.AgeCalls && ctx.Err() == nil {
			m := b.attack(ctx, c, t, vegeta.Rate{}, chunk, n, n, false)
			r.Calls += m.all.Requests
			r.Answered += answered(m)
			r.Errors = append(r.Errors, m.all.Errors...)
			b.logf("age %-10s %d calls answered of %d, %.0f/s in the last %v", t.Name, r.Answered, r.Calls, m.all.Throughput, chunk)
		}
		r.Took = time.Since(t0)
		if r.Took > 0 {
			r.Rate = float64(r.Answered-before) / r.Took.Seconds()
		}
		c.CloseIdleConnections()
		// The step: open loop at StepFactor × the fresh figure, more than
		// the gateway can answer; what it cannot it refuses at once.
		r.StepRate = max(1, int(r.Fresh*b.s.StepFactor))
		sc := newClient(0, int(min(b.s.MaxWorkers, 4096)), b.s.Timeout)
		m = b.attack(ctx, sc, t, vegeta.Rate{Freq: r.StepRate, Per: time.Second}, b.s.StepDuration, n, b.s.MaxWorkers, false)
		sc.CloseIdleConnections()
		r.StepSent, r.StepAnswered, r.StepSuccess = m.all.Requests, m.all.Throughput, m.all.Success
		r.Calls += m.all.Requests
		r.Answered += answered(m)
		// What stays grown, not what the step left in flight: read after
		// the connections it opened have closed and its calls ended.
		select {
		case <-ctx.Done():
		case <-time.After(settleAfterStep):
		}
		r.After = b.gauges(ctx, t)
		r.Errors = firstErrors(dedup(r.Errors))
		res.Age = append(res.Age, r)
		b.logf("age %-10s %d calls (%d answered) in %v; step at %d/s: %.0f/s answered, success %.4f",
			t.Name, r.Calls, r.Answered, r.Took.Round(time.Second), r.StepRate, r.StepAnswered, r.StepSuccess)
		b.pause(ctx)
	}
}

// answered is how many of m's calls were answered 2xx.
func answered(m *tally) uint64 { return m.answered.Requests }

// gauges reads t's goroutines and heap in use from its /metrics and its
// RSS from /proc; nil when the metrics cannot be read.
func (b *bench) gauges(ctx context.Context, t target) *Gauges {
	g, err := readGauges(ctx, t.URL+"/metrics")
	if err != nil {
		b.logf("gauges of %s: %v", t.Name, err)
		return nil
	}
	if t.PID > 0 {
		if m, err := readMemStatus(t.PID); err == nil {
			g.RSS = m.RSS
		}
	}
	return g
}

func readGauges(ctx context.Context, url string) (*Gauges, error) {
	return scrape(ctx, url, parseGauges)
}

// parseGauges reads go_goroutines and go_memstats_heap_inuse_bytes from a
// Prometheus text exposition.
func parseGauges(r io.Reader) (*Gauges, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	gauge := func(name string) (float64, error) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
			return 0, fmt.Errorf("metrics: no %s gauge", name)
		}
		return f.GetMetric()[0].GetGauge().GetValue(), nil
	}
	var g Gauges
	if g.Goroutines, err = gauge("go_goroutines"); err != nil {
		return nil, err
	}
	if g.HeapInuse, err = gauge("go_memstats_heap_inuse_bytes"); err != nil {
		return nil, err
	}
	return &g, nil
}

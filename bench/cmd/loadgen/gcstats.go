package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// GC is what the gateway's garbage collector did during one measurement,
// read from the gateway's /metrics before and after it. On the CPU the
// gateway shares with the provider, each collection's background work is a
// burst the calls around it wait behind (RATIONALE.md, "Less for the collector"),
// and the collections come as often as the bytes allocated per call fill the
// heap's headroom: the two numbers that say how much of a run's tail is the
// gateway's own.
type GC struct {
	Collections uint64 `json:"collections"`
	AllocBytes  uint64 `json:"alloc_bytes"` // allocated during the measurement; per call: ÷ its requests
}

// goMetrics are the two runtime counters GC is computed from.
type goMetrics struct {
	collections uint64 // go_gc_duration_seconds' count
	allocBytes  uint64 // go_memstats_alloc_bytes_total
}

// gcMeter reads a gateway's /metrics now; the function it returns reads
// them again and returns the difference. Targets other than the gateways (no
// Go metrics of theirs are served) and failed reads give nil.
func (b *bench) gcMeter(ctx context.Context, t target) func() *GC {
	none := func() *GC { return nil }
	if !isGateway(t.Name) {
		return none
	}
	url := t.URL + "/metrics"
	m0, err := readGoMetrics(ctx, url)
	if err != nil {
		b.logf("gc per call: %v", err)
		return none
	}
	return func() *GC {
		m1, err := readGoMetrics(ctx, url)
		if err != nil {
			b.logf("gc per call: %v", err)
			return nil
		}
		if m1.collections < m0.collections || m1.allocBytes < m0.allocBytes {
			return nil // another process answered (a restart)
		}
		return &GC{Collections: m1.collections - m0.collections, AllocBytes: m1.allocBytes - m0.allocBytes}
	}
}

// readGoMetrics fetches url (Prometheus text format) and returns the Go
// runtime's collection count and bytes allocated.
func readGoMetrics(ctx context.Context, url string) (goMetrics, error) {
	return scrape(ctx, url, parseGoMetrics)
}

// scrape fetches url, a Prometheus text exposition, within 5 s, and reads
// it with parse.
func scrape[T any](ctx context.Context, url string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return zero, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return zero, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return zero, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return parse(resp.Body)
}

// parseGoMetrics reads the collection count and bytes allocated from a
// Prometheus text exposition (client_golang's Go collector names them).
func parseGoMetrics(r io.Reader) (goMetrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return goMetrics{}, fmt.Errorf("metrics: %w", err)
	}
	var m goMetrics
	gc, ok := fams["go_gc_duration_seconds"]
	if !ok || len(gc.GetMetric()) != 1 || gc.GetMetric()[0].GetSummary() == nil {
		return goMetrics{}, fmt.Errorf("metrics: no go_gc_duration_seconds summary")
	}
	m.collections = gc.GetMetric()[0].GetSummary().GetSampleCount()
	alloc, ok := fams["go_memstats_alloc_bytes_total"]
	if !ok || len(alloc.GetMetric()) != 1 || alloc.GetMetric()[0].GetCounter() == nil {
		return goMetrics{}, fmt.Errorf("metrics: no go_memstats_alloc_bytes_total counter")
	}
	m.allocBytes = uint64(alloc.GetMetric()[0].GetCounter().GetValue())
	return m, nil
}

// summary is the collector's share of calls calls for the log line; "" if
// not measured.
func (g *GC) summary(calls uint64) string {
	if g == nil || calls == 0 {
		return ""
	}
	return fmt.Sprintf("; gc %d collections, %.1f KB allocated/call", g.Collections, float64(g.AllocBytes)/float64(calls)/1000)
}

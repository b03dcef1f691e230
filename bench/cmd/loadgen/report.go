package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Micro is what the report takes from the micro-benchmarks.
type Micro struct {
	// PluginNs is the median ns/op of plugins.BenchmarkRequest: the plugin
	// time of one relayed request (Admit, Select, Settle; metered, deadline on).
	PluginNs      float64 `json:"plugin_ns"`
	PluginSamples int     `json:"plugin_samples"`
	// Ledger is both stores' BenchmarkHoldSettle, case by case.
	Ledger []LedgerMicro `json:"ledger,omitempty"`
}

func microSummary(samples []microSample) *Micro {
	m := &Micro{Ledger: ledgerMicro(samples)}
	if ns, n, ok := microMedian(samples, "/plugins", "Request"); ok {
		m.PluginNs, m.PluginSamples = ns, n
	}
	if m.PluginSamples == 0 && len(m.Ledger) == 0 {
		return nil
	}
	return m
}

// Limits of the gateway's overhead over the bare proxy.
const (
	limitP50Ratio     = 1.25                   // gateway overhead p50 ≤ 1.25 × the proxy's, at 1,000/s
	limitP99          = time.Millisecond       // gateway overhead p99 ≤ 1 ms, at 1,000/s
	limitThroughput   = 0.9                    // gateway ≥ 0.9 × the proxy's max throughput
	limitTTFB         = 500 * time.Microsecond // streaming TTFB overhead p50
	minAnswered       = 0.999                  // a latency target counts only if the gateway answered this share at its rate
	limitPluginNs     = 30_000.0               // plugin time per request
	limitRSS          = 200_000_000            // bytes with 1,000 open streams
	targetRate        = 1000
	targetOpenStreams = 1000
)

func medianDur(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(math.Round(median(f)))
}

// medianLat is the field-wise median of summaries.
func medianLat(ls []Lat) Lat {
	ls = slices.DeleteFunc(slices.Clone(ls), Lat.none) // rounds with no call answered
	if len(ls) == 0 {
		return Lat{}
	}
	pick := func(f func(Lat) time.Duration) time.Duration {
		v := make([]time.Duration, len(ls))
		for i, l := range ls {
			v[i] = f(l)
		}
		return medianDur(v)
	}
	return Lat{
		P50: pick(func(l Lat) time.Duration { return l.P50 }),
		P90: pick(func(l Lat) time.Duration { return l.P90 }),
		P99: pick(func(l Lat) time.Duration { return l.P99 }),
		Max: pick(func(l Lat) time.Duration { return l.Max }),
	}
}

// none reports a measurement with no call answered: every latency is zero.
func (l Lat) none() bool { return l == Lat{} }

// msOf is ms(d), one of l's latencies, or "—" when l has none.
func msOf(l Lat, d time.Duration) string {
	if l.none() {
		return "—"
	}
	return ms(d)
}

func (l Lat) sub(o Lat) Lat {
	return Lat{P50: l.P50 - o.P50, P90: l.P90 - o.P90, P99: l.P99 - o.P99, Max: l.Max - o.Max}
}

// latAgg is the median over rounds of one target at one rate.
type latAgg struct {
	Lat      Lat
	Success  float64
	Sent     float64
	Requests uint64
	Stolen   *float64
	Clear    *clearAgg // nil when no round watched for stalls
	CPU      *CPU      // medians of hop and provider over the rounds that read them; nil if none
	GC       *gcAgg    // the gateway's collector, summed over the rounds that read it; nil if none
	Errors   []string
	ok       bool
}

// gcAgg is the gateway's collections and bytes allocated, summed over the
// rounds, with the calls they were made for.
type gcAgg struct {
	Collections, Bytes, Calls uint64
}

// clearAgg is the calls no stall touched, over the rounds: the median of
// their latencies, the sums of the counts.
type clearAgg struct {
	Lat             Lat
	Calls, Excluded uint64
	Stalls          int
	Ticks           int64
}

// excludedShare is the share of the answered calls a stall touched.
func (c *clearAgg) excludedShare() float64 {
	return float64(c.Excluded) / float64(max(c.Calls+c.Excluded, 1))
}

func aggLatency(runs []LatencyRun, name string, rate int) latAgg {
	var a latAgg
	var ls []Lat
	var succ, sent, stolen []float64
	var clear []Lat
	var hop, provider, db []time.Duration
	for _, r := range runs {
		if r.Target != name || r.Rate != rate {
			continue
		}
		stolen = appendStolen(stolen, r.Stolen)
		if c := r.CPU; c != nil {
			hop, provider, db = append(hop, c.Hop), append(provider, c.Provider), append(db, c.DB)
		}
		if g := r.GC; g != nil {
			if a.GC == nil {
				a.GC = &gcAgg{}
			}
			a.GC.Collections += g.Collections
			a.GC.Bytes += g.AllocBytes
			a.GC.Calls += r.Requests
		}
		if c := r.Clear; c != nil {
			if a.Clear == nil {
				a.Clear = &clearAgg{}
			}
			clear = append(clear, c.Lat)
			a.Clear.Calls += c.Calls
			a.Clear.Excluded += c.Excluded
			a.Clear.Stalls += c.Stalls
			a.Clear.Ticks += c.Ticks
		}
		ls = append(ls, r.Lat)
		succ = append(succ, r.Success)
		sent = append(sent, r.Sent)
		a.Requests += r.Requests
		a.Errors = append(a.Errors, r.Errors...)
	}
	if len(ls) == 0 {
		return a
	}
	a.Lat, a.Success, a.Sent, a.Stolen, a.ok = medianLat(ls), median(succ), median(sent), medianStolen(stolen), true
	if a.Clear != nil {
		a.Clear.Lat = medianLat(clear)
	}
	if len(hop) > 0 {
		a.CPU = &CPU{Hop: medianDur(hop), Provider: medianDur(provider), DB: medianDur(db)}
	}
	a.Errors = dedup(a.Errors)
	return a
}

type tpAgg struct {
	Throughput, Success float64
	Lat                 Lat
	Stolen              *float64
	Errors              []string
	ok                  bool
}

func aggThroughput(runs []ThroughputRun, name string) tpAgg {
	var a tpAgg
	var tp, succ, stolen []float64
	var ls []Lat
	for _, r := range runs {
		if r.Target != name {
			continue
		}
		stolen = appendStolen(stolen, r.Stolen)
		tp = append(tp, r.Throughput)
		succ = append(succ, r.Success)
		ls = append(ls, r.Lat)
		a.Errors = append(a.Errors, r.Errors...)
	}
	if len(tp) == 0 {
		return a
	}
	a.Throughput, a.Success, a.Lat, a.Stolen, a.ok = median(tp), median(succ), medianLat(ls), medianStolen(stolen), true
	a.Errors = dedup(a.Errors)
	return a
}

type streamAgg struct {
	TTFB, Total Lat
	Success     float64
	Streams     uint64
	Stolen      *float64
	Errors      []string
	ok          bool
}

func aggStream(runs []StreamRun, name string) streamAgg {
	var a streamAgg
	var t1, t2 []Lat
	var succ, stolen []float64
	for _, r := range runs {
		if r.Target != name {
			continue
		}
		stolen = appendStolen(stolen, r.Stolen)
		t1 = append(t1, r.TTFB)
		t2 = append(t2, r.Total)
		succ = append(succ, r.Success)
		a.Streams += r.Streams
		a.Errors = append(a.Errors, r.Errors...)
	}
	if len(t1) == 0 {
		return a
	}
	a.TTFB, a.Total, a.Success, a.Stolen, a.ok = medianLat(t1), medianLat(t2), median(succ), medianStolen(stolen), true
	a.Errors = dedup(a.Errors)
	return a
}

func appendStolen(v []float64, f *float64) []float64 {
	if f != nil {
		v = append(v, *f)
	}
	return v
}

// medianStolen is the median of the rounds that measured steal, nil if none did.
func medianStolen(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	m := median(v)
	return &m
}

// stolenCell is a stolen share as "1.2%", "—" when not measured.
func stolenCell(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}

// ratio is a/b as "1.23×", or "n/a" when b is not positive (the proxy's
// overhead can measure ≤ 0 within noise).
func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func signedMs(d time.Duration) string { return fmt.Sprintf("%+.3f ms", float64(d)/1e6) }

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func pct(f float64) string { return fmt.Sprintf("%.2f%%", f*100) }

// verdict is "met" or "**missed**".
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// targetNames are the targets in the order the tables show them.
var targetNames = []string{"direct", "proxy", "control", "gateway", gatewayX, gatewayPG}

// hasStolen reports whether any measurement read the SUT CPU's steal.
func hasStolen(res *Results) bool {
	return slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.Stolen != nil }) ||
		slices.ContainsFunc(res.Throughput, func(r ThroughputRun) bool { return r.Stolen != nil }) ||
		slices.ContainsFunc(res.Stream, func(r StreamRun) bool { return r.Stolen != nil })
}

// hasTarget reports whether the run measured the target name in the
// latency, throughput or stream phase.
func hasTarget(res *Results, name string) bool {
	return slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.Target == name }) ||
		slices.ContainsFunc(res.Throughput, func(r ThroughputRun) bool { return r.Target == name }) ||
		slices.ContainsFunc(res.Stream, func(r StreamRun) bool { return r.Target == name })
}

// hasPG reports whether the run measured gateway-pg.
func hasPG(res *Results) bool { return hasTarget(res, gatewayPG) }

// hasX reports whether the run measured gateway-x.
func hasX(res *Results) bool { return hasTarget(res, gatewayX) }

// hasControl reports whether the run measured the A/A control.
func hasControl(res *Results) bool { return hasTarget(res, "control") }

package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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

// Limits of issue 9.
const (
	limitP50Ratio     = 1.25                   // gateway overhead p50 ≤ 1.25 × the proxy's, at 1,000/s
	limitP99          = time.Millisecond       // gateway overhead p99 ≤ 1 ms, at 1,000/s
	limitThroughput   = 0.75                   // gateway ≥ 0.75 × the proxy's max throughput
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
var targetNames = []string{"direct", "proxy", "control", "gateway", gatewayPG}

// hasStolen reports whether any measurement read the SUT CPU's steal.
func hasStolen(res *Results) bool {
	return slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.Stolen != nil }) ||
		slices.ContainsFunc(res.Throughput, func(r ThroughputRun) bool { return r.Stolen != nil }) ||
		slices.ContainsFunc(res.Stream, func(r StreamRun) bool { return r.Stolen != nil })
}

// hasPG reports whether the run measured gateway-pg.
func hasPG(res *Results) bool {
	is := func(name string) bool { return name == gatewayPG }
	return slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return is(r.Target) }) ||
		slices.ContainsFunc(res.Throughput, func(r ThroughputRun) bool { return is(r.Target) }) ||
		slices.ContainsFunc(res.Stream, func(r StreamRun) bool { return is(r.Target) })
}

// hasControl reports whether the run measured the A/A control.
func hasControl(res *Results) bool {
	is := func(name string) bool { return name == "control" }
	return slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return is(r.Target) }) ||
		slices.ContainsFunc(res.Throughput, func(r ThroughputRun) bool { return is(r.Target) }) ||
		slices.ContainsFunc(res.Stream, func(r StreamRun) bool { return is(r.Target) })
}

// renderReport writes the markdown tables.
func renderReport(res *Results) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	renderIntro(p, res)
	renderLatency(p, res)
	renderThroughput(p, res)
	renderStreaming(p, res)
	renderRSS(p, res)
	renderPeak(p, res)
	renderTargets(p, res)
	renderLedgerMicro(p, res)
	renderErrors(p, res)
	return w.String()
}

// renderIntro says what the targets are and how to read the tables.
func renderIntro(p func(string, ...any), res *Results) {
	s := res.Settings
	p("## Load (loadgen, %s)\n\n", res.Started.Format(time.RFC3339))
	p("Targets: **direct** = the simulated provider (`relay sim -latency %s`), **proxy** = a bare "+
		"`httputil.ReverseProxy` in front of it (the floor), **gateway** = ModelRelay in front of it. "+
		"Every value is the median over %d round(s); the targets' order changes every round (a Williams design: each runs right after each other equally often). "+
		"Overhead = hop − direct at the same percentile; **gw/proxy** = gateway overhead ÷ proxy overhead.\n\n",
		s.SimLatency, s.Rounds)
	if s.Accounts > 1 {
		p("Each gateway's calls are spread over **%d accounts**, one key each, taken in turn.\n\n", s.Accounts)
	}
	if hasPG(res) {
		p("**gateway-pg** is a second ModelRelay, configured as **gateway** but with its ledger in PostgreSQL (database `%s` on a server "+
			"of the same machine, reached through its unix socket, synchronous_commit **%s**) instead of embedded Badger; **pg/proxy** = its "+
			"overhead ÷ the proxy's, **pg − gw** = its overhead minus the Badger gateway's. The PostgreSQL server is not pinned: its processes "+
			"run on whichever CPU it may use (the header says which), while Badger's work is inside the gateway's process.\n\n", s.PGDB, s.PGSync)
	}
	if hasControl(res) {
		p("**control** is a second bare proxy, the same program as **proxy** in front of the same provider, measured the same way: " +
			"the A/A test. **control/proxy** would be 1.00× on a quiet machine; how far it is from 1.00× is a lower bound on how far this run's noise " +
			"alone moves a ratio, and a gw/proxy ratio within " +
			"that distance of a limit is not a verdict on the gateway. The targets below hold each verdict against the widest the two proxies " +
			"disagreed in any round, and give the range over rounds.\n\n")
	}
	if hasStolen(res) {
		p("**stolen** is the share of each measurement's time the hypervisor took from CPU %d, where the systems under test run "+
			"(`/proc/stat`, median over the rounds). While it is taken nothing there runs: a stall of tens of milliseconds "+
			"sets a p99 by itself, for whichever target was being measured. A verdict below whose measurements lost more than "+
			"%.0f%% (%.0f%% for p99, which the slowest 1%% of calls decide) is marked noisy.\n\n", s.SUTCPU, stolenLimit*100, stolenLimitP99*100)
	}

	if j := res.Jitter; j != nil {
		p("Noise floor: 1 ms sleeps on the load generator's CPU wake up late by p50 %s, p99 %s, max %s (%v of sleeps). "+
			"Latency percentiles at or below these values are the machine's, not the targets'.\n\n",
			ms(j.P50), ms(j.P99), ms(j.Max), s.Jitter)
	}
}

// renderLatency is the fixed-rate latency table, with the CPU, GC and stall-free tables after it.
func renderLatency(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Latency) == 0 {
		return
	}
	p("### Fixed-rate latency\n\n")
	p("Small non-streaming chat call (`%s`, max_tokens 64), open loop (vegeta), %v per rate and target after a %v warm-up at that rate. "+
		"Latencies are the answered (2xx) calls'; **success** is the share answered (past its capacity the gateway refuses calls with 503 `overloaded`).\n\n",
		s.Model, s.Duration, s.Warmup)
	p("| rate/s | target | p50 | p90 | p99 | max | success | sent/s | stolen | overhead p50 | overhead p90 | overhead p99 | overhead max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range s.Rates {
		d := aggLatency(res.Latency, "direct", rate)
		px := aggLatency(res.Latency, "proxy", rate)
		for _, name := range targetNames {
			a := aggLatency(res.Latency, name, rate)
			if !a.ok {
				continue
			}
			over := "— | — | — | —"
			if name != "direct" && d.ok && !a.Lat.none() && !d.Lat.none() {
				o := a.Lat.sub(d.Lat)
				over = fmt.Sprintf("%s | %s | %s | %s", signedMs(o.P50), signedMs(o.P90), signedMs(o.P99), signedMs(o.Max))
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %.0f | %s | %s |\n", rate, name, msOf(a.Lat, a.Lat.P50), msOf(a.Lat, a.Lat.P90),
				msOf(a.Lat, a.Lat.P99), msOf(a.Lat, a.Lat.Max), pct(a.Success), a.Sent, stolenCell(a.Stolen), over)
		}
		for _, r := range ratioRows {
			if g := aggLatency(res.Latency, r[0], rate); g.ok && px.ok && d.ok && !g.Lat.none() && !px.Lat.none() && !d.Lat.none() {
				og, op := g.Lat.sub(d.Lat), px.Lat.sub(d.Lat)
				p("| %d | **%s** | | | | | | | | %s | %s | %s | %s |\n", rate, r[1],
					ratio(float64(og.P50), float64(op.P50)), ratio(float64(og.P90), float64(op.P90)),
					ratio(float64(og.P99), float64(op.P99)), ratio(float64(og.Max), float64(op.Max)))
			}
		}
		// Both gateways' overheads over the same direct: the difference
		// is the PostgreSQL ledger's share.
		if g, pg := aggLatency(res.Latency, "gateway", rate), aggLatency(res.Latency, gatewayPG, rate); g.ok && pg.ok && !g.Lat.none() && !pg.Lat.none() {
			o := pg.Lat.sub(g.Lat)
			p("| %d | **pg − gw** | | | | | | | | %s | %s | %s | %s |\n", rate, signedMs(o.P50), signedMs(o.P90), signedMs(o.P99), signedMs(o.Max))
		}
	}
	p("\n")
	renderCPU(p, res)
	renderGC(p, res)
	renderClear(p, res)
}

// renderThroughput is the maximum throughput table.
func renderThroughput(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Throughput) == 0 {
		return
	}
	p("### Maximum throughput\n\n")
	p("As fast as possible (vegeta rate 0) with %d workers on %d keep-alive connections, %v per target after a %v warm-up.\n\n",
		s.Conns, s.Conns, s.TPDuration, s.Warmup)
	p("| target | requests/s | success | p50 | p99 | stolen | ÷ proxy | ÷ gateway |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	px, gw := aggThroughput(res.Throughput, "proxy"), aggThroughput(res.Throughput, "gateway")
	for _, name := range targetNames {
		a := aggThroughput(res.Throughput, name)
		if !a.ok {
			continue
		}
		r, rg := "—", "—"
		if name != "proxy" && px.ok {
			r = ratio(a.Throughput, px.Throughput)
		}
		if name == gatewayPG && gw.ok {
			rg = ratio(a.Throughput, gw.Throughput)
		}
		p("| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", name, a.Throughput, pct(a.Success), msOf(a.Lat, a.Lat.P50), msOf(a.Lat, a.Lat.P99), stolenCell(a.Stolen), r, rg)
	}
	p("\n")
}

// renderStreaming is the streaming table.
func renderStreaming(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Stream) == 0 {
		return
	}
	p("### Streaming\n\n")
	p("Streamed chat call, %d content chunks %v apart from the provider; %d streams started per second (open loop) for %v per target after a %v warm-up. "+
		"TTFB = until the first complete SSE event; total = until `data: [DONE]`.\n\n",
		s.Chunks, s.ChunkGap, s.StreamRate, s.StreamDuration, s.Warmup)
	p("| target | TTFB p50 | TTFB p99 | total p50 | total p99 | success | streams | stolen | TTFB overhead p50 | TTFB overhead p99 | total overhead p50 | total overhead p99 |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	d := aggStream(res.Stream, "direct")
	for _, name := range targetNames {
		a := aggStream(res.Stream, name)
		if !a.ok {
			continue
		}
		over := "— | — | — | —"
		if name != "direct" && d.ok && !a.TTFB.none() && !d.TTFB.none() {
			o1, o2 := a.TTFB.sub(d.TTFB), a.Total.sub(d.Total)
			over = fmt.Sprintf("%s | %s | %s | %s", signedMs(o1.P50), signedMs(o1.P99), signedMs(o2.P50), signedMs(o2.P99))
		}
		p("| %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", name, msOf(a.TTFB, a.TTFB.P50), msOf(a.TTFB, a.TTFB.P99), msOf(a.Total, a.Total.P50), msOf(a.Total, a.Total.P99),
			pct(a.Success), a.Streams, stolenCell(a.Stolen), over)
	}
	for _, r := range ratioRows {
		if g, px := aggStream(res.Stream, r[0]), aggStream(res.Stream, "proxy"); g.ok && px.ok && d.ok && !g.TTFB.none() && !px.TTFB.none() && !d.TTFB.none() {
			g1, g2, p1, p2 := g.TTFB.sub(d.TTFB), g.Total.sub(d.Total), px.TTFB.sub(d.TTFB), px.Total.sub(d.Total)
			p("| **%s** | | | | | | | | %s | %s | %s | %s |\n", r[1], ratio(float64(g1.P50), float64(p1.P50)), ratio(float64(g1.P99), float64(p1.P99)),
				ratio(float64(g2.P50), float64(p2.P50)), ratio(float64(g2.P99), float64(p2.P99)))
		}
	}
	p("\n")
}

// renderRSS is the memory table of the open-streams test, split by kind of mapping when smaps was read.
func renderRSS(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.RSS) == 0 {
		return
	}
	p("### Memory with %d concurrent open streams\n\n", s.OpenStreams)
	p("Streams opened at %d/s against a provider that sends one chunk per second; VmRSS sampled 8 times, 250 ms apart, once every stream had its first event.\n\n", s.OpenRate)
	p("| process | VmRSS idle | VmRSS with streams open (max) | of which anonymous / file-backed | opened | failed | still open after sampling | VmHWM |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.RSS {
		p("| %s | %s | %s | %s / %s | %d | %d | %d | %s |\n", r.Target, mb(r.Before), mb(r.During), mb(r.Anon), mb(r.File),
			r.Opened, r.Failed, r.OpenNow, mb(r.HWM))
	}
	p("\n")
	if slices.ContainsFunc(res.RSS, func(r RSSRun) bool { return r.Parts != nil }) {
		p("The same sample by kind of mapping (`/proc/PID/smaps`): anonymous data is the Go heap (with the plugins' guest memories), stacks and the runtime's own; anonymous code is native code compiled at run time (wazero's, from the plugins); data files are the other mapped files and shared memory (the gateway's are the ledger's tables and logs and the hold log).\n\n")
		p("| process | anonymous data | anonymous code | data files | program and libraries |\n")
		p("|---|---:|---:|---:|---:|\n")
		for _, r := range res.RSS {
			if r.Parts != nil {
				p("| %s | %s | %s | %s | %s |\n", r.Target, mb(r.Parts.Data), mb(r.Parts.Code), mb(r.Parts.Files), mb(r.Parts.Program))
			}
		}
		p("\n")
	}
}

// renderPeak is the peak RSS of each process after each phase.
func renderPeak(p func(string, ...any), res *Results) {
	if len(res.Peak) == 0 {
		return
	}
	p("### Peak RSS (VmHWM) after each phase\n\n")
	var procs, phases []string
	hwm := map[[2]string]int64{}
	last := map[string]PeakRSS{}
	for _, pk := range res.Peak {
		if !slices.Contains(procs, pk.Process) {
			procs = append(procs, pk.Process)
		}
		if !slices.Contains(phases, pk.Phase) {
			phases = append(phases, pk.Phase)
		}
		hwm[[2]string{pk.Process, pk.Phase}] = pk.HWM
		last[pk.Process] = pk
	}
	p("| process | %s | VmRSS at the end: anonymous / file-backed |\n|---|%s---:|\n", strings.Join(phases, " | "), strings.Repeat("---:|", len(phases)))
	for _, pr := range procs {
		var cells []string
		for _, ph := range phases {
			if v, ok := hwm[[2]string{pr, ph}]; ok {
				cells = append(cells, mb(v))
			} else {
				cells = append(cells, "—")
			}
		}
		l := last[pr]
		p("| %s | %s | %s / %s |\n", pr, strings.Join(cells, " | "), mb(l.Anon), mb(l.File))
	}
	p("\n")
}

// renderTargets is the verdict tables: issue 9's, and issue 28's when gateway-pg ran.
func renderTargets(p func(string, ...any), res *Results) {
	s := res.Settings
	p("### Targets (issue 9)\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, row := range targetRows(res) {
		p("| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	p("\n")
	if hasPG(res) {
		p("### Targets (issue 28): the ledger on PostgreSQL, synchronous_commit %s\n\n", s.PGSync)
		p("gateway-pg against the Badger gateway of the same run. Added = overhead over direct at the same percentile.\n\n")
		p("| target | measured | verdict |\n|---|---|---|\n")
		for _, row := range pgTargetRows(res) {
			p("| %s | %s | %s |\n", row[0], row[1], row[2])
		}
		p("\n")
	}
}

// renderErrors lists the errors seen, when there were any.
func renderErrors(p func(string, ...any), res *Results) {
	errs := allErrors(res)
	if len(errs) == 0 {
		return
	}
	p("### Errors seen\n\n")
	for _, e := range errs {
		p("- %s\n", strings.ReplaceAll(e, "\n", " "))
	}
	p("\n")
}

// renderClear is the latency table again, of the calls no stall touched.
func renderClear(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.Clear != nil }) {
		return
	}
	s := res.Settings
	p("#### The calls no stall touched\n\n")
	p("The same measurements, without the calls a stall of the load generator's or the targets' CPU could have delayed. "+
		"The load generator read both CPUs' steal every %v; a reading that found steal charged marks a **stall**, and every "+
		"call in flight from a tick before the stall could have begun (its ticks, plus one for the counter's rounding) until %v "+
		"after it ended (twice its length, if longer: the calls that came meanwhile wait for the backlog) is **excluded**. "+
		"The percentiles below are the other calls' (medians over the rounds); **stalls**, **stolen** (both CPUs, in 10 ms ticks) and **excluded** "+
		"are totals over the rounds. The raw percentiles above are the verdicts'; the targets give this p99 for information. "+
		"A stall shorter than a tick can go unseen, so these are an upper bound on what the targets add on a quiet host.\n\n", stallSample, stallDrain)
	p("| rate/s | target | stalls | stolen | excluded | p50 | p90 | p99 | max | overhead p50 | overhead p99 | overhead max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range s.Rates {
		d := aggLatency(res.Latency, "direct", rate)
		for _, name := range targetNames {
			a := aggLatency(res.Latency, name, rate)
			if !a.ok || a.Clear == nil {
				continue
			}
			c := a.Clear
			over := "— | — | —"
			if name != "direct" && d.Clear != nil && !c.Lat.none() && !d.Clear.Lat.none() {
				o := c.Lat.sub(d.Clear.Lat)
				over = fmt.Sprintf("%s | %s | %s", signedMs(o.P50), signedMs(o.P99), signedMs(o.Max))
			}
			p("| %d | %s | %d | %d ms | %s | %s | %s | %s | %s | %s |\n", rate, name, c.Stalls, c.Ticks*int64(tickDur/time.Millisecond),
				pct(c.excludedShare()), msOf(c.Lat, c.Lat.P50), msOf(c.Lat, c.Lat.P90), msOf(c.Lat, c.Lat.P99), msOf(c.Lat, c.Lat.Max), over)
		}
	}
	p("\n")
}

// renderCPU is the CPU time per call of each target's processes, from the
// runs that measured it (-sim-pid).
func renderCPU(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.CPU != nil }) {
		return
	}
	p("#### CPU time per call\n\n")
	p("The CPU time the target's own process (**hop**) and the provider ran during each measurement, divided by the calls made " +
		"(the sum over their threads of `/proc/PID/task/*/schedstat`, medians over the rounds). Both run on the CPU the systems under test share: " +
		"**total** is how long each call keeps it busy, and the busier it is the longer any burst of work (a collection, a stall) " +
		"keeps calls waiting, so a hop's tail grows with its total before its median does.\n\n")
	if hasPG(res) {
		p("**database** is, for gateway-pg, the CPU time of the PostgreSQL processes serving its database (its connections' backends, " +
			"which do the statements and, with synchronous_commit on, their own WAL flushes; the server's shared WAL writer is not counted). " +
			"They are not pinned: they may run on the load generator's CPU as well as on the targets'. **total** adds them in; " +
			"**+ database ÷ gateway's** is gateway-pg's hop and database against the Badger gateway's hop, whose ledger runs inside it.\n\n")
	}
	p("| rate/s | target | hop | database | provider | total | hop ÷ proxy's | + database ÷ gateway's |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range res.Settings.Rates {
		px := aggLatency(res.Latency, "proxy", rate).CPU
		gw := aggLatency(res.Latency, "gateway", rate).CPU
		for _, name := range targetNames {
			c := aggLatency(res.Latency, name, rate).CPU
			if c == nil {
				continue
			}
			hop, db, total, vs, vg := "—", "—", micros(c.Provider), "—", "—"
			if name != "direct" {
				total = "—" // a hop whose process was not read: no total
				if c.Hop > 0 {
					hop, total = micros(c.Hop), micros(c.Hop+c.DB+c.Provider)
					if px != nil && px.Hop > 0 {
						vs = ratio(float64(c.Hop), float64(px.Hop))
					}
				}
			}
			if name == gatewayPG {
				db = micros(c.DB)
				if gw != nil && gw.Hop > 0 && c.Hop > 0 {
					vg = ratio(float64(c.Hop+c.DB), float64(gw.Hop))
				}
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", rate, name, hop, db, micros(c.Provider), total, vs, vg)
		}
	}
	p("\n")
}

// renderGC is the gateway's collector at each rate, from the runs that read
// its /metrics.
func renderGC(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.GC != nil }) {
		return
	}
	p("#### The gateway's collector\n\n")
	p("Garbage collections the gateway ran during its measurements and the bytes it allocated per call (`go_gc_duration_seconds` and " +
		"`go_memstats_alloc_bytes_total` from its `/metrics` before and after each, summed over the rounds). Each collection's background " +
		"work is a burst of CPU on the CPU the provider shares; they come as often as the bytes allocated fill the heap's headroom.\n\n")
	p("| rate/s | target | collections | calls | calls per collection | allocated per call |\n|---:|---|---:|---:|---:|---:|\n")
	for _, rate := range res.Settings.Rates {
		for _, name := range []string{"gateway", gatewayPG} {
			g := aggLatency(res.Latency, name, rate).GC
			if g == nil || g.Calls == 0 {
				continue
			}
			per := "—"
			if g.Collections > 0 {
				per = fmt.Sprintf("%d", g.Calls/g.Collections)
			}
			p("| %d | %s | %d | %d | %s | %.1f KB |\n", rate, name, g.Collections, g.Calls, per, float64(g.Bytes)/float64(g.Calls)/1000)
		}
	}
	p("\n")
}

func micros(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// targetRows evaluates the limits of issue 9 against the medians.
func targetRows(res *Results) [][3]string {
	l := newLatencyTargets(res)
	rows := [][3]string{l.p50Row(), l.p99Row()}
	if row, ok := l.clearRow(); ok {
		rows = append(rows, row)
	}
	rows = append(rows, throughputRow(res), streamRow(res), pluginRow(res))
	return append(rows, rssRows(res)...)
}

// notMeasured is the row of a target the run did not measure.
func notMeasured(name string) [3]string { return [3]string{name, "not measured", "—"} }

// latencyTargets are the fixed-rate medians at the targets' rate, and how
// far the control measured from the proxy in each round.
type latencyTargets struct {
	d, px, g, c            latAgg
	p50Spreads, p99Spreads []float64
}

func newLatencyTargets(res *Results) *latencyTargets {
	l := &latencyTargets{
		d: aggLatency(res.Latency, "direct", targetRate), px: aggLatency(res.Latency, "proxy", targetRate),
		g: aggLatency(res.Latency, "gateway", targetRate), c: aggLatency(res.Latency, "control", targetRate),
	}
	// A target with no call answered has no latency to compare.
	for _, a := range []*latAgg{&l.d, &l.px, &l.g, &l.c} {
		a.ok = a.ok && !a.Lat.none()
	}
	// The control's spread in each round, on each target's terms.
	has := func(m map[string]Lat, names ...string) bool {
		for _, n := range names {
			if _, ok := m[n]; !ok {
				return false
			}
		}
		return true
	}
	l.p50Spreads = perRound(res.Latency, atTargetRate, func(m map[string]Lat) (float64, bool) {
		op := m["proxy"].P50 - m["direct"].P50
		if !has(m, "direct", "proxy", "control") || op <= 0 {
			return 0, false
		}
		return float64(m["control"].P50-m["direct"].P50)/float64(op) - 1, true
	})
	l.p99Spreads = perRound(res.Latency, atTargetRate, func(m map[string]Lat) (float64, bool) {
		return float64(m["control"].P99 - m["proxy"].P99), has(m, "proxy", "control")
	})
	return l
}

// answered is ok, unless the gateway refused calls (503 overloaded) at the
// targets' rate: the latencies are the answered calls', and a gateway that
// refused some did not carry the rate, whatever the others' latency. The
// string says so.
func (l *latencyTargets) answered(ok bool) (bool, string) {
	if l.g.Success < minAnswered {
		return false, fmt.Sprintf(" (the gateway answered only %s of the calls)", pct(l.g.Success))
	}
	return ok, ""
}

func (l *latencyTargets) p50Row() [3]string {
	d, px, g, c := l.d, l.px, l.g, l.c
	name := "overhead p50 at 1,000 req/s ≤ 1.25× the bare proxy's"
	if d.ok && px.ok && g.ok {
		og, op := g.Lat.P50-d.Lat.P50, px.Lat.P50-d.Lat.P50
		ok, short := l.answered(float64(og) <= limitP50Ratio*float64(max(op, 0)))
		m := fmt.Sprintf("gateway %s, proxy %s: %s", signedMs(og), signedMs(op), ratio(float64(og), float64(op)))
		v := verdict(ok)
		if c.ok && op > 0 {
			oc := c.Lat.P50 - d.Lat.P50
			m += fmt.Sprintf("; control %s: %s", signedMs(oc), ratio(float64(oc), float64(op)))
			m += spreadRange(l.p50Spreads, "", func(f float64) string { return fmt.Sprintf("%.2f×", 1+f) })
			v += noise(float64(og)/float64(op)-limitP50Ratio, widest(l.p50Spreads, float64(oc)/float64(op)-1))
		}
		v += short + stolenNote(stolenLimit, d.Stolen, px.Stolen, c.Stolen, g.Stolen)
		return [3]string{name, m, v}
	}
	return notMeasured(name)
}

func (l *latencyTargets) p99Row() [3]string {
	d, px, g, c := l.d, l.px, l.g, l.c
	name := "overhead p99 at 1,000 req/s ≤ 1.0 ms"
	if d.ok && g.ok {
		og := g.Lat.P99 - d.Lat.P99
		m := fmt.Sprintf("gateway %s (proxy %s", signedMs(og), signedMs(px.Lat.P99-d.Lat.P99))
		ok, short := l.answered(og <= limitP99)
		v := verdict(ok)
		if c.ok && px.ok {
			m += fmt.Sprintf(", control %s", signedMs(c.Lat.P99-d.Lat.P99))
			m += spreadRange(l.p99Spreads, "control − proxy ", func(f float64) string { return signedMs(time.Duration(f)) })
			v += noise(float64(og-limitP99), widest(l.p99Spreads, float64(c.Lat.P99-px.Lat.P99)))
		}
		v += short + stolenNote(stolenLimitP99, d.Stolen, px.Stolen, c.Stolen, g.Stolen)
		return [3]string{name, m + ")", v}
	}
	return notMeasured(name)
}

// clearRow is the p99 target again, of the calls no stall touched, for
// information; ok is false when no call was clear of stalls to compare.
func (l *latencyTargets) clearRow() (row [3]string, ok bool) {
	d, px, g, c := l.d, l.px, l.g, l.c
	name := "the same, of the calls no stall touched"
	if d.ok && g.ok && d.Clear != nil && g.Clear != nil && !d.Clear.Lat.none() && !g.Clear.Lat.none() {
		og := g.Clear.Lat.P99 - d.Clear.Lat.P99
		m := fmt.Sprintf("gateway %s", signedMs(og))
		if px.ok && px.Clear != nil && !px.Clear.Lat.none() {
			m += fmt.Sprintf(" (proxy %s", signedMs(px.Clear.Lat.P99-d.Clear.Lat.P99))
			if c.ok && c.Clear != nil && !c.Clear.Lat.none() {
				m += fmt.Sprintf(", control %s", signedMs(c.Clear.Lat.P99-d.Clear.Lat.P99))
			}
			m += ")"
		}
		m += fmt.Sprintf("; %s of the gateway's calls excluded", pct(g.Clear.excludedShare()))
		ok, short := l.answered(og <= limitP99)
		v := "for information: " + verdict(ok) + short
		if g.Clear.excludedShare() > maxExcluded {
			v += fmt.Sprintf(" (more than %s of the calls excluded: not a p99 of the run)", pct(maxExcluded))
		}
		return [3]string{name, m, v}, true
	}
	return row, false
}

func throughputRow(res *Results) [3]string {
	name := "max throughput ≥ 0.75× the bare proxy's"
	if tp, tg := aggThroughput(res.Throughput, "proxy"), aggThroughput(res.Throughput, "gateway"); tp.ok && tg.ok && tp.Throughput > 0 {
		m := fmt.Sprintf("gateway %.0f/s, proxy %.0f/s: %s", tg.Throughput, tp.Throughput, ratio(tg.Throughput, tp.Throughput))
		v := verdict(tg.Throughput >= limitThroughput*tp.Throughput)
		tc := aggThroughput(res.Throughput, "control")
		if tc.ok {
			spreads := throughputSpreads(res)
			m += fmt.Sprintf("; control %.0f/s: %s", tc.Throughput, ratio(tc.Throughput, tp.Throughput))
			m += spreadRange(spreads, "", func(f float64) string { return fmt.Sprintf("%.2f×", 1+f) })
			v += noise(tg.Throughput/tp.Throughput-limitThroughput, widest(spreads, tc.Throughput/tp.Throughput-1))
		}
		v += stolenNote(stolenLimit, tp.Stolen, tc.Stolen, tg.Stolen)
		return [3]string{name, m, v}
	}
	return notMeasured(name)
}

func streamRow(res *Results) [3]string {
	name := "streaming TTFB overhead p50 ≤ 0.5 ms"
	if sd, sg := aggStream(res.Stream, "direct"), aggStream(res.Stream, "gateway"); sd.ok && sg.ok && !sd.TTFB.none() && !sg.TTFB.none() {
		og := sg.TTFB.P50 - sd.TTFB.P50
		m := fmt.Sprintf("gateway %s", signedMs(og))
		v := verdict(og <= limitTTFB)
		sp, sc := aggStream(res.Stream, "proxy"), aggStream(res.Stream, "control")
		if sp.ok && !sp.TTFB.none() {
			m += fmt.Sprintf(" (proxy %s", signedMs(sp.TTFB.P50-sd.TTFB.P50))
			if sc.ok && !sc.TTFB.none() {
				spreads := perRound(res.Stream, func(r StreamRun) (int, string, Lat, bool) {
					return r.Round, r.Target, r.TTFB, !r.TTFB.none()
				}, func(m map[string]Lat) (float64, bool) {
					p, okp := m["proxy"]
					c, okc := m["control"]
					return float64(c.P50 - p.P50), okp && okc
				})
				m += fmt.Sprintf(", control %s", signedMs(sc.TTFB.P50-sd.TTFB.P50))
				m += spreadRange(spreads, "control − proxy ", func(f float64) string { return signedMs(time.Duration(f)) })
				v += noise(float64(og-limitTTFB), widest(spreads, float64(sc.TTFB.P50-sp.TTFB.P50)))
			}
			m += ")"
		}
		v += stolenNote(stolenLimit, sd.Stolen, sp.Stolen, sc.Stolen, sg.Stolen)
		return [3]string{name, m, v}
	}
	return notMeasured(name)
}

func pluginRow(res *Results) [3]string {
	name := "plugin time ≤ 30 µs per request"
	if res.Micro != nil && res.Micro.PluginSamples > 0 {
		return [3]string{name, fmt.Sprintf("%.1f µs (plugins BenchmarkRequest, median of %d)", res.Micro.PluginNs/1000, res.Micro.PluginSamples),
			verdict(res.Micro.PluginNs <= limitPluginNs)}
	}
	return notMeasured(name)
}

func rssRows(res *Results) [][3]string {
	var rows [][3]string
	name := "RSS ≤ 200 MB with 1,000 open streams"
	measured := false
	for _, r := range res.RSS {
		if r.Target != "gateway" {
			continue
		}
		measured = true
		m := fmt.Sprintf("%s with %d streams open", mb(r.During), r.Opened)
		ok := r.During <= limitRSS && r.Opened >= targetOpenStreams
		if r.Opened < targetOpenStreams {
			m += fmt.Sprintf(" (fewer than %d)", targetOpenStreams)
		}
		rows = append(rows, [3]string{name, m, verdict(ok)})
	}
	if !measured {
		rows = append(rows, notMeasured(name))
	}
	return rows
}

// atTargetRate picks a latency run's round, target and latency for
// perRound, when it ran at the targets' rate and answered calls.
func atTargetRate(r LatencyRun) (int, string, Lat, bool) {
	return r.Round, r.Target, r.Lat, r.Rate == targetRate && !r.Lat.none()
}

// throughputSpreads is how far the control's throughput was from the
// proxy's in each round, as a ratio less 1.
func throughputSpreads(res *Results) []float64 {
	return perRound(res.Throughput, func(r ThroughputRun) (int, string, float64, bool) {
		return r.Round, r.Target, r.Throughput, true
	}, func(m map[string]float64) (float64, bool) {
		p, okp := m["proxy"]
		c, okc := m["control"]
		return c/p - 1, okp && okc && p > 0
	})
}

// perRound returns, for each round (in order) that measured the targets f
// needs, how far the control measured from the proxy on f's terms; f gets
// that round's values by target. key picks a run's round, target and value,
// and whether it has one.
func perRound[R, V any](runs []R, key func(R) (round int, target string, v V, ok bool), f func(map[string]V) (float64, bool)) []float64 {
	by := map[int]map[string]V{}
	for _, r := range runs {
		round, target, v, ok := key(r)
		if !ok {
			continue
		}
		if by[round] == nil {
			by[round] = map[string]V{}
		}
		by[round][target] = v
	}
	var out []float64
	for _, round := range slices.Sorted(maps.Keys(by)) {
		if v, ok := f(by[round]); ok {
			out = append(out, v)
		}
	}
	return out
}

// widest is the spread of largest magnitude, or median when there is none:
// the noise a verdict is held against is the most two identical proxies
// disagreed in any round, not only the median round.
func widest(spreads []float64, median float64) float64 {
	w := median
	for _, v := range spreads {
		if math.Abs(v) > math.Abs(w) {
			w = v
		}
	}
	return w
}

// spreadRange is ", per round <label>a to b" for more than one round, a and
// b in format.
func spreadRange(spreads []float64, label string, format func(float64) string) string {
	if len(spreads) < 2 {
		return ""
	}
	return fmt.Sprintf(", per round %s%s to %s", label, format(slices.Min(spreads)), format(slices.Max(spreads)))
}

// noise is the note a verdict gets when the A/A control says this run
// cannot decide it: when two identical proxies measured apart (spread) at
// least as far as the gateway's figure is from its limit (margin), in the
// same unit. "" otherwise, and when they measured exactly alike.
func noise(margin, spread float64) string {
	if spread != 0 && math.Abs(spread) >= math.Abs(margin) {
		return " (within the A/A spread)"
	}
	return ""
}

// stolenLimit is the share of the SUT CPU's time the hypervisor may take
// during a measurement before the verdicts that use it are marked noisy;
// stolenLimitP99 the same for a p99, which the slowest 1% of calls decide,
// so that a stall of 1% of the window can set it.
const (
	stolenLimit    = 0.05
	stolenLimitP99 = 0.01
)

// maxExcluded is the most of a target's calls the stalls may touch for the
// rest to stand for it.
const maxExcluded = 0.10

// stolenNote marks a verdict whose measurements lost more than limit of the
// SUT CPU to the hypervisor (the largest of them), "" otherwise.
func stolenNote(limit float64, stolen ...*float64) string {
	worst := -1.0
	for _, f := range stolen {
		if f != nil {
			worst = max(worst, *f)
		}
	}
	if worst <= limit {
		return ""
	}
	return fmt.Sprintf(" (noisy: %.0f%% of the SUT CPU stolen)", worst*100)
}

func allErrors(res *Results) []string {
	var out []string
	add := func(prefix string, errs []string) {
		for _, e := range errs {
			out = append(out, prefix+": "+e)
		}
	}
	for _, r := range res.Latency {
		add(fmt.Sprintf("latency %s %d/s", r.Target, r.Rate), r.Errors)
	}
	for _, r := range res.Throughput {
		add("throughput "+r.Target, r.Errors)
	}
	for _, r := range res.Stream {
		add("stream "+r.Target, r.Errors)
	}
	for _, r := range res.RSS {
		add("rss "+r.Target, r.Errors)
	}
	out = dedup(out)
	if len(out) > 30 {
		out = append(out[:30], fmt.Sprintf("… and %d more", len(out)-30))
	}
	return out
}

// ratioRows are the hops whose overhead the report divides by the bare
// proxy's, each with its row's name.
var ratioRows = [][2]string{{"gateway", "gw/proxy"}, {gatewayPG, "pg/proxy"}, {"control", "control/proxy"}}

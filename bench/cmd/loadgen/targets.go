package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

func micros(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// targetRows evaluates the overhead limits against the medians.
func targetRows(res *Results) [][3]string {
	l := newLatencyTargets(res)
	rows := [][3]string{l.p50Row(), l.p99Row()}
	if row, ok := l.clearRow(); ok {
		rows = append(rows, row)
	}
	rows = append(rows, throughputRow(res), streamRow(res), pluginRow(res))
	rows = append(rows, rssRows(res)...)
	rows = append(rows, cpuRow(res))
	return append(rows, sustainedRows(res)...)
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
	name := "max throughput ≥ 0.9× the bare proxy's"
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
				spreads := streamSpreads(res)
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

// streamSpreads is how far the control's p50 time to first event was from
// the proxy's in each round, in nanoseconds.
func streamSpreads(res *Results) []float64 {
	return perRound(res.Stream, func(r StreamRun) (int, string, Lat, bool) {
		return r.Round, r.Target, r.TTFB, !r.TTFB.none()
	}, func(m map[string]Lat) (float64, bool) {
		p, okp := m["proxy"]
		c, okc := m["control"]
		return float64(c.P50 - p.P50), okp && okc
	})
}

// latencySpreads is how far the control measured from the proxy in each
// round, at the targets' rate, on the percentile pick reads, in
// nanoseconds.
func latencySpreads(res *Results, pick func(Lat) time.Duration) []float64 {
	return perRound(res.Latency, atTargetRate, func(m map[string]Lat) (float64, bool) {
		p, okp := m["proxy"]
		c, okc := m["control"]
		return float64(pick(c) - pick(p)), okp && okc
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
var ratioRows = [][2]string{{"gateway", "gw/proxy"}, {gatewayX, "x/proxy"}, {gatewayPG, "pg/proxy"}, {"control", "control/proxy"}}

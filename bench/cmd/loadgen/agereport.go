package main

import (
	"fmt"
	"time"
)

// limitSustained: a gateway's throughput after its ageing is at least this
// share of its fresh throughput.
const limitSustained = 0.9

// renderAge is the ageing table: each gateway fresh, what it served, the
// step past its capacity, what grew, and its sustained throughput (the
// throughput phase's, measured after the ageing) against the fresh one.
func renderAge(p func(string, ...any), res *Results) {
	if len(res.Age) == 0 {
		return
	}
	s := res.Settings
	p("### Sustained, not fresh\n\n")
	p("Before any other phase each gateway answered %d calls as fast as %d connections go (its ledger grown accordingly), "+
		"then %v open loop at %.1f× its fresh throughput, past its capacity. **fresh** is its throughput first (%v, %d connections), "+
		"**sustained** the throughput phase's median, measured after all that.\n\n",
		s.AgeCalls, s.Conns, s.StepDuration, s.StepFactor, s.TPDuration, s.Conns)
	p("| gateway | fresh | calls answered (sent) | at | step offered | step answered | goroutines | heap in use | RSS | sustained | ÷ fresh |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, a := range res.Age {
		at := "—"
		if a.Took >= time.Second {
			at = fmt.Sprintf("%.0f/s", a.Rate)
		}
		sus, r := "—", "—"
		if tp := aggThroughput(res.Throughput, a.Target); tp.ok {
			sus = fmt.Sprintf("%.0f/s", tp.Throughput)
			r = ratio(tp.Throughput, a.Fresh)
		}
		p("| %s | %.0f/s | %d (%d) | %s | %d/s | %.0f/s (%s) | %s | %s | %s | %s | %s |\n", a.Target, a.Fresh, a.Answered, a.Calls, at,
			a.StepRate, a.StepAnswered, pct(a.StepSuccess), grew(a, func(g *Gauges) string { return fmt.Sprintf("%.0f", g.Goroutines) }),
			grew(a, func(g *Gauges) string { return mb(int64(g.HeapInuse)) }), grew(a, func(g *Gauges) string { return mb(g.RSS) }), sus, r)
	}
	p("\n")
}

// grew is "before → after" of one gauge, "—" when either was not read.
func grew(a AgeRun, f func(*Gauges) string) string {
	if a.Before == nil || a.After == nil {
		return "—"
	}
	return f(a.Before) + " → " + f(a.After)
}

// sustainedRows are the targets "sustained within 10% of fresh", one per
// aged gateway.
func sustainedRows(res *Results) [][3]string {
	var rows [][3]string
	for _, a := range res.Age {
		name := fmt.Sprintf("%s sustained throughput ≥ %.1f× its fresh, after %d calls answered and a step past capacity", a.Target, limitSustained, a.Answered)
		tp := aggThroughput(res.Throughput, a.Target)
		if !tp.ok || a.Fresh <= 0 {
			rows = append(rows, notMeasured(name))
			continue
		}
		m := fmt.Sprintf("%.0f/s after, %.0f/s fresh: %s (ageing took %v)", tp.Throughput, a.Fresh, ratio(tp.Throughput, a.Fresh), a.Took.Round(time.Second))
		rows = append(rows, [3]string{name, m, verdict(tp.Throughput >= limitSustained*a.Fresh)})
	}
	return rows
}

// limitCPU: the gateway's CPU per call at 1,000/s is at most this many
// times the bare proxy's (each its own process, the provider left out).
const limitCPU = 1.25

// cpuRow is the target "CPU per call at 1,000/s ≤ 1.25× the bare proxy's".
func cpuRow(res *Results) [3]string {
	name := fmt.Sprintf("CPU per call at 1,000/s ≤ %.2f× the bare proxy's", limitCPU)
	g, px := aggLatency(res.Latency, "gateway", targetRate).CPU, aggLatency(res.Latency, "proxy", targetRate).CPU
	if g == nil || px == nil || g.Hop <= 0 || px.Hop <= 0 {
		return notMeasured(name)
	}
	m := fmt.Sprintf("gateway %s, proxy %s: %s", micros(g.Hop), micros(px.Hop), ratio(float64(g.Hop), float64(px.Hop)))
	if c := aggLatency(res.Latency, "control", targetRate).CPU; c != nil && c.Hop > 0 {
		m += fmt.Sprintf("; control %s: %s", micros(c.Hop), ratio(float64(c.Hop), float64(px.Hop)))
	}
	return [3]string{name, m, verdict(float64(g.Hop) <= limitCPU*float64(px.Hop))}
}

package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limits of the gateway with its ledger in PostgreSQL (on the same
// machine) against the Badger gateway of the same run.
const (
	limitPGAddedP50   = 500 * time.Microsecond // gateway-pg's added p50 at 1,000/s ≤ the Badger gateway's + 0.5 ms
	limitPGThroughput = 0.6                    // gateway-pg's max throughput ≥ 0.6 × the Badger gateway's
)

// pgTargetRows evaluates the PostgreSQL limits against the medians. The
// A/A control gives the noise: how far two identical bare proxies measured
// apart in any round, on each limit's terms.
func pgTargetRows(res *Results) [][3]string {
	l := newPGLatency(res)
	return [][3]string{l.p50Row(), l.p99Row(), pgThroughputRow(res)}
}

// pgLatency are the fixed-rate medians at the targets' rate.
type pgLatency struct {
	d, g, pg, px, c latAgg
	latency         []LatencyRun
}

func newPGLatency(res *Results) *pgLatency {
	l := &pgLatency{
		d: aggLatency(res.Latency, "direct", targetRate), g: aggLatency(res.Latency, "gateway", targetRate),
		pg: aggLatency(res.Latency, gatewayPG, targetRate), px: aggLatency(res.Latency, "proxy", targetRate),
		c: aggLatency(res.Latency, "control", targetRate), latency: res.Latency,
	}
	// A target with no call answered has no latency to compare.
	for _, a := range []*latAgg{&l.d, &l.g, &l.pg, &l.px, &l.c} {
		a.ok = a.ok && !a.Lat.none()
	}
	return l
}

// aa is how far the control measured from the proxy in each round, at the
// targets' rate, on the percentile pick reads.
func (l *pgLatency) aa(pick func(Lat) time.Duration) []float64 {
	return latencySpreads(&Results{Latency: l.latency}, pick)
}

// answered says which gateway refused calls at the targets' rate: a
// latency compares only calls answered, and a gateway that refused some did
// not carry the rate. It is "" when neither did.
func (l *pgLatency) answered() string {
	return refusedNote(namedShare{gatewayPG, l.pg.Success}, namedShare{"gateway", l.g.Success})
}

// namedShare is the share of its calls a target answered.
type namedShare struct {
	name  string
	share float64
}

// refusedNote names the targets that answered less than minAnswered of
// their calls, "" when none did.
func refusedNote(shares ...namedShare) string {
	var s []string
	for _, a := range shares {
		if a.share < minAnswered {
			s = append(s, fmt.Sprintf("%s answered only %s of the calls", a.name, pct(a.share)))
		}
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, "; ") + ")"
}

func (l *pgLatency) p50Row() [3]string {
	d, g, pg, px, c := l.d, l.g, l.pg, l.px, l.c
	name := "added p50 at 1,000 req/s ≤ the Badger gateway's + 0.5 ms"
	if d.ok && g.ok && pg.ok {
		og, opg := g.Lat.P50-d.Lat.P50, pg.Lat.P50-d.Lat.P50
		diff := opg - og
		short := l.answered()
		m := fmt.Sprintf("gateway-pg %s, gateway %s: %s", signedMs(opg), signedMs(og), signedMs(diff))
		v := verdict(diff <= limitPGAddedP50 && short == "")
		if px.ok && c.ok {
			spreads := l.aa(func(l Lat) time.Duration { return l.P50 })
			m += fmt.Sprintf(" (control − proxy %s", signedMs(c.Lat.P50-px.Lat.P50))
			m += spreadRange(spreads, "", func(f float64) string { return signedMs(time.Duration(f)) }) + ")"
			v += noise(float64(diff-limitPGAddedP50), widest(spreads, float64(c.Lat.P50-px.Lat.P50)))
		}
		v += short + stolenNote(stolenLimit, d.Stolen, g.Stolen, pg.Stolen)
		return [3]string{name, m, v}
	}
	return notMeasured(name)
}

func (l *pgLatency) p99Row() [3]string {
	d, g, pg, px, c := l.d, l.g, l.pg, l.px, l.c
	name := "added p99 at 1,000 req/s"
	if d.ok && g.ok && pg.ok {
		og, opg := g.Lat.P99-d.Lat.P99, pg.Lat.P99-d.Lat.P99
		m := fmt.Sprintf("gateway-pg %s, gateway %s: %s", signedMs(opg), signedMs(og), signedMs(opg-og))
		if px.ok && c.ok {
			m += fmt.Sprintf(" (proxy %s, control %s", signedMs(px.Lat.P99-d.Lat.P99), signedMs(c.Lat.P99-d.Lat.P99))
			m += spreadRange(l.aa(func(l Lat) time.Duration { return l.P99 }), "control − proxy ", func(f float64) string { return signedMs(time.Duration(f)) }) + ")"
		}
		return [3]string{name, m, "for information" + l.answered() + stolenNote(stolenLimitP99, d.Stolen, g.Stolen, pg.Stolen)}
	}
	return notMeasured(name)
}

func pgThroughputRow(res *Results) [3]string {
	name := "max throughput ≥ 0.6× the Badger gateway's"
	if tg, tpg := aggThroughput(res.Throughput, "gateway"), aggThroughput(res.Throughput, gatewayPG); tg.ok && tpg.ok && tg.Throughput > 0 {
		m := fmt.Sprintf("gateway-pg %.0f/s, gateway %.0f/s: %s", tpg.Throughput, tg.Throughput, ratio(tpg.Throughput, tg.Throughput))
		v := verdict(tpg.Throughput >= limitPGThroughput*tg.Throughput)
		if tp, tc := aggThroughput(res.Throughput, "proxy"), aggThroughput(res.Throughput, "control"); tp.ok && tc.ok && tp.Throughput > 0 {
			spreads := throughputSpreads(res)
			m += fmt.Sprintf(" (control/proxy %s", ratio(tc.Throughput, tp.Throughput))
			m += spreadRange(spreads, "", func(f float64) string { return fmt.Sprintf("%.2f×", 1+f) }) + ")"
			v += noise(tpg.Throughput/tg.Throughput-limitPGThroughput, widest(spreads, tc.Throughput/tp.Throughput-1))
		}
		if tpg.Success < 1 {
			m += fmt.Sprintf("; gateway-pg answered %s", pct(tpg.Success))
		}
		v += stolenNote(stolenLimit, tg.Stolen, tpg.Stolen)
		return [3]string{name, m, v}
	}
	return notMeasured(name)
}

// LedgerMicro is one case of the stores' BenchmarkHoldSettle: the median
// ns/op of its samples (wall time per hold+settle pair, over all callers).
type LedgerMicro struct {
	Store   string  `json:"store"`   // badger, postgres
	Setting string  `json:"setting"` // sync=false, synchronous_commit=on, …
	Case    string  `json:"case"`    // serial, parallel, parallel-one-account
	NsOp    float64 `json:"ns_op"`
	Samples int     `json:"samples"`
}

// ledgerCases are the shapes both stores' BenchmarkHoldSettle measure.
var ledgerCases = [][2]string{
	{"serial", "1 caller, 1 account"},
	{"parallel", "8 callers per CPU, 16 accounts"},
	{"parallel-one-account", "8 callers per CPU, 1 account"},
}

// ledgerMicro picks the stores' BenchmarkHoldSettle cases out of the
// micro-benchmarks, in the order they ran.
func ledgerMicro(samples []microSample) []LedgerMicro {
	var out []LedgerMicro
	for _, st := range []string{"badger", "postgres"} {
		var names []string
		for _, s := range samples {
			if strings.HasSuffix(s.Pkg, "/store/"+st) && strings.HasPrefix(s.Name, "HoldSettle/") && !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
		for _, n := range names {
			parts := strings.Split(n, "/")
			if len(parts) != 3 {
				continue
			}
			ns, k, _ := microMedian(samples, "/store/"+st, n)
			out = append(out, LedgerMicro{Store: st, Setting: parts[1], Case: parts[2], NsOp: ns, Samples: k})
		}
	}
	return out
}

// renderLedgerMicro is the hold+settle pairs per second of both stores,
// one column per store and durability setting.
func renderLedgerMicro(p func(string, ...any), res *Results) {
	if res.Micro == nil || len(res.Micro.Ledger) == 0 {
		return
	}
	type col struct{ store, setting string }
	var cols []col
	cell := map[[3]string]LedgerMicro{}
	for _, l := range res.Micro.Ledger {
		c := col{l.Store, l.Setting}
		if !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
		cell[[3]string{l.Store, l.Setting, l.Case}] = l
	}
	p("### Hold+settle pairs per second (the stores' BenchmarkHoldSettle)\n\n")
	p("The ledger work of one relayed call (a hold, then its settlement) from the micro-benchmarks above, run before the load on both CPUs: " +
		"pairs per second = 10⁹ ÷ the median ns/op. PostgreSQL is the same server as gateway-pg's, a database the benchmark creates, " +
		"through the unix socket; `synchronous_commit` is set per connection. Badger's `sync=false` is the gateway's default " +
		"(`sync_writes: false`: a crashed process loses nothing, a power loss the last writes); PostgreSQL's `on` loses nothing, " +
		"`off` the last few hundred milliseconds of commits if the database server crashes.\n\n")
	head, rule := "| callers / accounts |", "|---|"
	for _, c := range cols {
		head += fmt.Sprintf(" %s %s |", c.store, c.setting)
		rule += "---:|"
	}
	p("%s\n%s\n", head, rule)
	for _, k := range ledgerCases {
		line := fmt.Sprintf("| %s |", k[1])
		measured := false
		for _, c := range cols {
			l, ok := cell[[3]string{c.store, c.setting, k[0]}]
			if !ok || l.NsOp <= 0 {
				line += " — |"
				continue
			}
			measured = true
			line += fmt.Sprintf(" %.0f |", 1e9/l.NsOp)
		}
		if measured {
			p("%s\n", line)
		}
	}
	p("\n")
}

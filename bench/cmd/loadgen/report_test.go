package main

import (
	"strings"
	"testing"
	"time"
)

const us = time.Microsecond

func lat(p50, p99 time.Duration) Lat { return Lat{P50: p50, P90: p50, P99: p99, Max: p99} }

// results builds a run in which the gateway's numbers are set by the caller
// and direct/proxy are fixed: direct p50 200 µs p99 400 µs, proxy +100 µs.
func results(gwP50, gwP99 time.Duration, gwTP float64, gwTTFB time.Duration, pluginNs float64, rss int64, opened int) *Results {
	r := &Results{Settings: Settings{Model: "m", Rates: []int{1000}, Rounds: 1, OpenStreams: 1000}}
	r.Latency = []LatencyRun{
		{Target: "direct", Rate: 1000, Round: 1, Lat: lat(200*us, 400*us), Success: 1},
		{Target: "proxy", Rate: 1000, Round: 1, Lat: lat(300*us, 500*us), Success: 1},
		{Target: "gateway", Rate: 1000, Round: 1, Lat: lat(gwP50, gwP99), Success: 1},
	}
	r.Throughput = []ThroughputRun{{Target: "proxy", Throughput: 10000, Success: 1}, {Target: "gateway", Throughput: gwTP, Success: 1}}
	r.Stream = []StreamRun{{Target: "direct", TTFB: lat(300*us, 600*us)}, {Target: "gateway", TTFB: lat(gwTTFB, gwTTFB)}}
	r.Micro = &Micro{PluginNs: pluginNs, PluginSamples: 6}
	r.RSS = []RSSRun{{Target: "gateway", Streams: 1000, Opened: opened, During: rss}}
	return r
}

func verdicts(r *Results) []string {
	var out []string
	for _, row := range targetRows(r) {
		out = append(out, row[2])
	}
	return out
}

func TestTargetRows(t *testing.T) {
	const miss = "**missed**"
	cases := []struct {
		name string
		res  *Results
		want []string
	}{
		{"all met at the limits", results(325*us, 1400*us, 9000, 800*us, 30000, 200_000_000, 1000),
			[]string{"met", "met", "met", "met", "met", "met", "—"}},
		{"all missed just past the limits", results(326*us, 1401*us, 8999, 801*us, 30001, 200_000_001, 1000),
			[]string{miss, miss, miss, miss, miss, miss, "—"}},
		{"fewer streams than asked is a miss", results(300*us, 500*us, 9000, 300*us, 1000, 1, 999),
			[]string{"met", "met", "met", "met", "met", miss, "—"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := verdicts(c.res)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("verdicts %v, want %v\n%v", got, c.want, targetRows(c.res))
			}
		})
	}
}

// TestCPURow: the gateway's CPU per call at 1,000/s against the bare
// proxy's, met at 1.25× and missed past it.
func TestCPURow(t *testing.T) {
	for _, c := range []struct {
		gw   time.Duration
		want string
	}{{125 * us, "met"}, {126 * us, "**missed**"}} {
		r := results(300*us, 500*us, 9000, 300*us, 1000, 1, 1000)
		for i := range r.Latency {
			switch r.Latency[i].Target {
			case "proxy":
				r.Latency[i].CPU = &CPU{Hop: 100 * us, Provider: 20 * us}
			case "gateway":
				r.Latency[i].CPU = &CPU{Hop: c.gw, Provider: 20 * us}
			}
		}
		if row := cpuRow(r); row[2] != c.want || !strings.Contains(row[1], "proxy 100 µs") {
			t.Errorf("gateway at %v: %q, want %s", c.gw, row, c.want)
		}
	}
}

func TestTargetRowsNotMeasured(t *testing.T) {
	r := &Results{Settings: Settings{Rates: []int{500}}}
	for _, row := range targetRows(r) {
		if row[1] != "not measured" {
			t.Fatalf("row %v", row)
		}
	}
}

func TestProxyOverheadNotPositive(t *testing.T) {
	// Within noise the proxy can measure faster than direct: then the
	// gateway must not be slower than direct either, and the ratio is n/a.
	r := results(250*us, 500*us, 9000, 300*us, 1000, 1, 1000)
	r.Latency[1].Lat = lat(190*us, 400*us)
	row := targetRows(r)[0]
	if row[2] != "**missed**" || !strings.Contains(row[1], "n/a") {
		t.Fatalf("row %v", row)
	}
}

func TestMediansOverRounds(t *testing.T) {
	runs := []LatencyRun{
		{Target: "gateway", Rate: 500, Round: 1, Lat: lat(100*us, 900*us), Success: 1, Requests: 10},
		{Target: "gateway", Rate: 500, Round: 2, Lat: lat(300*us, 100*us), Success: 0.5, Requests: 10},
		{Target: "gateway", Rate: 500, Round: 3, Lat: lat(200*us, 500*us), Success: 0.9, Requests: 10},
		{Target: "gateway", Rate: 1000, Round: 1, Lat: lat(time.Second, time.Second), Success: 0},
		{Target: "proxy", Rate: 500, Round: 1, Lat: lat(time.Second, time.Second), Success: 0},
	}
	a := aggLatency(runs, "gateway", 500)
	if !a.ok || a.Lat.P50 != 200*us || a.Lat.P99 != 500*us || a.Success != 0.9 || a.Requests != 30 {
		t.Fatalf("aggregate %+v", a)
	}
	if aggLatency(runs, "direct", 500).ok {
		t.Fatal("direct has no runs")
	}
}

// TestControlNotesNoise: with the A/A control, a verdict whose margin is
// no larger than how far the two identical proxies measured apart says so;
// the verdict itself still compares the gateway with the limit.
func TestControlNotesNoise(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	r := results(320*us, 1300*us, 9100, 790*us, 1000, 1, 1000) // every margin small
	r.Latency = append(r.Latency, LatencyRun{Target: "control", Rate: 1000, Round: 1, Lat: lat(330*us, 900*us), Success: 1, Stolen: f(0.02)})
	r.Throughput = append(r.Throughput, ThroughputRun{Target: "control", Throughput: 9000, Success: 1})
	r.Stream = append(r.Stream, StreamRun{Target: "proxy", TTFB: lat(500*us, 500*us)}, StreamRun{Target: "control", TTFB: lat(600*us, 600*us)})
	rows := targetRows(r)
	for i, want := range []struct{ verdict, measured string }{
		{"met (within the A/A spread)", "control +0.130 ms: 1.30×"},                            // |1.2-1.25| ≤ |1.3-1|
		{"met (within the A/A spread) (noisy: 2% of the SUT CPU stolen)", "control +0.500 ms"}, // 2% > p99's 1%, not p50's 5%                    // |0.9-1.0| ms ≤ |0.9-0.5| ms (control p99 − proxy p99)
		{"met (within the A/A spread)", "control 9000/s: 0.90×"},                               // |0.91-0.9| ≤ 0.1
		{"met (within the A/A spread)", "(proxy +0.200 ms, control +0.300 ms)"},                // |0.49-0.5| ≤ 0.1 ms
	} {
		if rows[i][2] != want.verdict || !strings.Contains(rows[i][1], want.measured) {
			t.Errorf("row %d = %q, want verdict %q and %q in it", i, rows[i], want.verdict, want.measured)
		}
	}
	// A quiet run: the control matches the proxy, the notes go.
	r.Latency[3].Lat = lat(300*us, 500*us)
	r.Throughput[2].Throughput = 10000
	r.Stream[3].TTFB = lat(500*us, 500*us)
	for i, row := range targetRows(r)[:4] {
		if strings.Contains(row[2], "A/A") {
			t.Errorf("row %d = %q: a note with no spread", i, row)
		}
	}
	// A measurement that lost more than 5% of the SUT CPU marks the verdicts that use it.
	r.Latency[3].Stolen = f(0.2)
	if row := targetRows(r)[0]; row[2] != "met (noisy: 20% of the SUT CPU stolen)" {
		t.Errorf("p50 row %q", row)
	}
	r.Latency[3].Stolen = f(0.02)
	md := renderReport(r)
	for _, want := range []string{"**control** is a second bare proxy", "| 1000 | **control/proxy** |", "| 1000 | control | 0.300 ms |", "2.0%"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRenderReport(t *testing.T) {
	r := results(400*us, 900*us, 8000, 500*us, 25000, 150_000_000, 1000)
	r.Peak = []PeakRSS{{Process: "gateway", Phase: "latency", HWM: 50_000_000}, {Process: "gateway", Phase: "rss", HWM: 150_000_000}}
	md := renderReport(r)
	if strings.Contains(md, "by kind of mapping") {
		t.Error("a mapping table without smaps samples")
	}
	if strings.Contains(md, "**stolen** is") || strings.Contains(md, "**control** is") {
		t.Error("the stolen or control legend without a measurement of either")
	}
	r.RSS[0].Parts = &rssParts{Data: 100_000_000, Code: 30_000_000, Files: 12_000_000, Program: 8_000_000}
	md = renderReport(r)
	for _, want := range []string{
		"| gateway | 100.0 MB | 30.0 MB | 12.0 MB | 8.0 MB |",
		"### Fixed-rate latency", "| 1000 | gateway | 0.400 ms |", "| 1000 | **gw/proxy** |", "2.00×",
		"### Maximum throughput", "| gateway | 8000 |", "0.80×",
		"### Streaming", "### Memory with 1000 concurrent open streams", "150.0 MB",
		"| process | latency | rss | VmRSS at the end: anonymous / file-backed |", "### Targets: the overhead over the bare proxy", "25.0 µs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// A round in which no call was answered has no latencies: it does not pull
// the median over rounds to zero, and a target with none shows "—" rather
// than 0 ms and a negative overhead.
func TestNoCallAnswered(t *testing.T) {
	lat := Lat{P50: time.Millisecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond}
	if got := medianLat([]Lat{{}, lat, {}}); got != lat {
		t.Errorf("median over rounds with one answered: %+v, want %+v", got, lat)
	}
	if got := medianLat([]Lat{{}, {}}); !got.none() {
		t.Errorf("median over rounds with none answered: %+v", got)
	}
	res := &Results{Settings: Settings{Rates: []int{1000}}, Latency: []LatencyRun{
		{Target: "direct", Rate: 1000, Round: 1, Lat: lat, Success: 1},
		{Target: "proxy", Rate: 1000, Round: 1, Lat: lat, Success: 1},
		{Target: "gateway", Rate: 1000, Round: 1, Success: 0},
	}}
	out := renderReport(res)
	if !strings.Contains(out, "| 1000 | gateway | — | — | — | — | 0.00% |") {
		t.Errorf("the gateway's row:\n%s", out)
	}
	if strings.Contains(out, "-1.000 ms") || strings.Contains(out, "| 1000 | **gw/proxy**") {
		t.Errorf("an overhead computed from no latency:\n%s", out)
	}
}

// The noise a verdict is held against is the widest the two identical
// proxies disagreed in any round, not the median round's, and the report
// shows the range.
func TestControlSpreadPerRound(t *testing.T) {
	r := results(320*us, 900*us, 8000, 500*us, 1000, 1, 1000) // p50: 1.20×, 0.05 under the limit
	r.Latency = nil
	for round, control := range []time.Duration{300 * us, 302 * us, 360 * us} { // 1.00×, 1.02×, 1.60×
		r.Latency = append(r.Latency,
			LatencyRun{Target: "direct", Rate: 1000, Round: round + 1, Lat: lat(200*us, 400*us), Success: 1},
			LatencyRun{Target: "proxy", Rate: 1000, Round: round + 1, Lat: lat(300*us, 500*us), Success: 1},
			LatencyRun{Target: "control", Rate: 1000, Round: round + 1, Lat: lat(control, 500*us), Success: 1},
			LatencyRun{Target: "gateway", Rate: 1000, Round: round + 1, Lat: lat(320*us, 900*us), Success: 1})
	}
	row := targetRows(r)[0]
	if row[2] != "met (within the A/A spread)" || !strings.Contains(row[1], "control +0.102 ms: 1.02×, per round 1.00× to 1.60×") {
		t.Errorf("p50 row %q", row)
	}
	// The same rounds without the one wide round: the median's spread
	// (0.02) is under the margin (0.05), no note.
	if row := targetRows(r)[1]; !strings.Contains(row[1], "per round control − proxy +0.000 ms to +0.000 ms") {
		t.Errorf("p99 row %q", row)
	}
	r.Latency = r.Latency[:8]
	if row := targetRows(r)[0]; row[2] != "met" || !strings.Contains(row[1], "per round 1.00× to 1.02×") {
		t.Errorf("p50 row without the wide round %q", row)
	}
}

// A gateway that refused calls at the target's rate did not carry it: the
// latency targets are missed whatever the answered calls' latency.
func TestLatencyTargetsNeedTheCallsAnswered(t *testing.T) {
	r := results(320*us, 600*us, 8000, 500*us, 1000, 1, 1000) // both latency targets met
	if v := verdicts(r); v[0] != "met" || v[1] != "met" {
		t.Fatalf("verdicts %q", v[:2])
	}
	r.Latency[2].Success = 0.8
	for i, v := range verdicts(r)[:2] {
		if v != "**missed** (the gateway answered only 80.00% of the calls)" {
			t.Errorf("row %d verdict %q", i, v)
		}
	}
}

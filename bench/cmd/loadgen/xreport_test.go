package main

import (
	"strings"
	"testing"
	"time"
)

// xResults is results() with gateway-x beside the gateway: the gateway's
// p50 350 µs (+150 µs over direct), throughput 8000/s, stream p50 TTFB
// 500 µs; gateway-x's set by the caller.
func xResults(xP50 time.Duration, xSuccess, xTP float64, xTTFB time.Duration, xStreamSuccess float64) *Results {
	r := results(350*us, 900*us, 8000, 500*us, 1000, 1, 1000)
	r.Stream[1].Success = 1
	r.Latency = append(r.Latency, LatencyRun{Target: gatewayX, Rate: 1000, Round: 1, Lat: lat(xP50, 2*time.Millisecond), Success: xSuccess})
	r.Throughput = append(r.Throughput, ThroughputRun{Target: gatewayX, Throughput: xTP, Success: 1})
	r.Stream = append(r.Stream, StreamRun{Target: gatewayX, TTFB: lat(xTTFB, 2*xTTFB), Success: xStreamSuccess})
	return r
}

func xVerdicts(r *Results) []string {
	var out []string
	for _, row := range xTargetRows(r) {
		out = append(out, row[2])
	}
	return out
}

func TestXTargetRows(t *testing.T) {
	const miss = "**missed**"
	cases := []struct {
		name string
		res  *Results
		want []string
	}{
		{"met at the limits", xResults(450*us, 1, 7200, 600*us, 1), []string{"met", "met", "met"}},
		{"missed just past them", xResults(451*us, 1, 7199, 601*us, 1), []string{miss, miss, miss}},
		{"faster than the gateway is met", xResults(300*us, 1, 9000, 400*us, 1), []string{"met", "met", "met"}},
		{"a p50 of calls not all answered is a miss", xResults(350*us, 0.99, 8000, 500*us, 1),
			[]string{"met", miss + " (gateway-x answered only 99.00% of the calls)", "met"}},
		{"a time to first event of streams not all answered is a miss", xResults(350*us, 1, 8000, 500*us, 0.5),
			[]string{"met", "met", miss + " (gateway-x answered only 50.00% of the calls)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := xVerdicts(c.res); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("verdicts %q, want %q\n%v", got, c.want, xTargetRows(c.res))
			}
		})
	}
	rows := xTargetRows(xResults(450*us, 1, 7200, 600*us, 1))
	for i, want := range []string{
		"gateway-x 7200/s, gateway 8000/s: 0.90×",
		"gateway-x +0.250 ms, gateway +0.150 ms: +0.100 ms",
		"p50 gateway-x 0.600 ms, gateway 0.500 ms: +0.100 ms",
	} {
		if rows[i][1] != want {
			t.Errorf("row %d measured %q, want %q", i, rows[i][1], want)
		}
	}
	// Without gateway-x: no table, and every row not measured.
	plain := results(350*us, 900*us, 8000, 500*us, 1000, 1, 1000)
	if md := renderReport(plain); strings.Contains(md, "Targets: translation") || strings.Contains(md, "gateway-x") {
		t.Errorf("a report without gateway-x mentions it:\n%s", md)
	}
	for _, row := range xTargetRows(plain) {
		if row[1] != "not measured" || row[2] != "—" {
			t.Errorf("row %q without gateway-x", row)
		}
	}
}

// The A/A control holds each difference against how far two identical
// proxies measured apart in any round, on the same terms.
func TestXTargetRowsNoise(t *testing.T) {
	// 10 µs under the p50 and TTFB limits, 0.02× over the throughput one.
	r := xResults(440*us, 1, 7360, 590*us, 1)
	r.Latency = append(r.Latency, LatencyRun{Target: "control", Rate: 1000, Round: 1, Lat: lat(320*us, 500*us), Success: 1})
	r.Throughput = append(r.Throughput, ThroughputRun{Target: "control", Throughput: 9700, Success: 1})
	r.Stream = append(r.Stream, StreamRun{Target: "proxy", TTFB: lat(400*us, 700*us), Success: 1},
		StreamRun{Target: "control", TTFB: lat(415*us, 700*us), Success: 1})
	rows := xTargetRows(r)
	for i, want := range []string{"(control/proxy 0.97×)", "(control − proxy +0.020 ms)", "(control − proxy +0.015 ms)"} {
		if rows[i][2] != "met (within the A/A spread)" || !strings.HasSuffix(rows[i][1], want) {
			t.Errorf("row %d %q, want within the A/A spread and %q", i, rows[i], want)
		}
	}
	// The proxies a few µs (0.01×) apart: the verdicts stand.
	r.Latency[len(r.Latency)-1].Lat = lat(305*us, 500*us)
	r.Throughput[len(r.Throughput)-1].Throughput = 9900
	r.Stream[len(r.Stream)-1].TTFB = lat(405*us, 700*us)
	for i, row := range xTargetRows(r) {
		if row[2] != "met" {
			t.Errorf("row %d %q", i, row)
		}
	}
	// Spreads over rounds: the widest is the one held against the margin.
	r.Latency = append(r.Latency,
		LatencyRun{Target: "direct", Rate: 1000, Round: 2, Lat: lat(200*us, 400*us), Success: 1},
		LatencyRun{Target: "proxy", Rate: 1000, Round: 2, Lat: lat(300*us, 500*us), Success: 1},
		LatencyRun{Target: "control", Rate: 1000, Round: 2, Lat: lat(280*us, 500*us), Success: 1})
	row := xTargetRows(r)[1]
	if row[2] != "met (within the A/A spread)" || !strings.Contains(row[1], "per round -0.020 ms to +0.005 ms") {
		t.Errorf("p50 row over two rounds %q", row)
	}
}

func TestRenderReportWithX(t *testing.T) {
	r := xResults(500*us, 1, 6000, 700*us, 1)
	r.Stream = append(r.Stream, StreamRun{Target: "proxy", TTFB: lat(400*us, 700*us)})
	r.Latency[1].CPU = &CPU{Hop: 100 * us, Provider: 50 * us}
	r.Latency[2].CPU = &CPU{Hop: 200 * us, Provider: 50 * us}
	r.Latency[3].CPU = &CPU{Hop: 250 * us, Provider: 50 * us}
	md := renderReport(r)
	for _, want := range []string{
		"**gateway-x** is a third ModelRelay", "`protocol: gemini`",
		"| 1000 | gateway-x | 0.500 ms |", "| 1000 | **x/proxy** | | | | | | | | 3.00×", "| 1000 | **x − gw** | | | | | | | | +0.150 ms |",
		"| gateway-x | 6000 | 100.00% |", "| 0.60× | 0.75× |",
		"| gateway-x | 0.700 ms |", "| **x/proxy** | | | | | | | | 4.00× |",
		"| 1000 | gateway-x | 250 µs | — | 50 µs | 300 µs | 2.50× | 1.25× |",
		"### Targets: translation, chat → Gemini → chat",
		"| translated max throughput ≥ 0.9× gateway's | gateway-x 6000/s, gateway 8000/s: 0.75× | **missed** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

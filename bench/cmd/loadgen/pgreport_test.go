package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// pgResults is results() with gateway-pg beside the gateway (p50 350 µs:
// +150 µs over direct, so the Badger gateway adds 150 µs less than pgP50
// − 200 µs).
func pgResults(pgP50 time.Duration, pgSuccess, pgTP float64) *Results {
	r := results(350*us, 900*us, 8000, 500*us, 1000, 1, 1000)
	r.Settings.PGDB, r.Settings.PGSync = "relay_bench_x", "on"
	r.Latency = append(r.Latency, LatencyRun{Target: gatewayPG, Rate: 1000, Round: 1, Lat: lat(pgP50, 2*time.Millisecond), Success: pgSuccess})
	r.Throughput = append(r.Throughput, ThroughputRun{Target: gatewayPG, Throughput: pgTP, Success: 1})
	return r
}

func pgVerdicts(r *Results) []string {
	var out []string
	for _, row := range pgTargetRows(r) {
		out = append(out, row[2])
	}
	return out
}

func TestPGTargetRows(t *testing.T) {
	const miss = "**missed**"
	cases := []struct {
		name string
		res  *Results
		want []string
	}{
		{"met at the limits", pgResults(850*us, 1, 4800), []string{"met", "for information", "met"}},
		{"missed just past them", pgResults(851*us, 1, 4799), []string{miss, "for information", miss}},
		{"a p50 of calls not all answered is a miss", pgResults(400*us, 0.99, 8000),
			[]string{miss + " (gateway-pg answered only 99.00% of the calls)", "for information (gateway-pg answered only 99.00% of the calls)", "met"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pgVerdicts(c.res); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("verdicts %q, want %q\n%v", got, c.want, pgTargetRows(c.res))
			}
		})
	}
	rows := pgTargetRows(pgResults(850*us, 1, 4800))
	if want := "gateway-pg +0.650 ms, gateway +0.150 ms: +0.500 ms"; rows[0][1] != want {
		t.Errorf("p50 row %q, want %q", rows[0][1], want)
	}
	if want := "gateway-pg 4800/s, gateway 8000/s: 0.60×"; rows[2][1] != want {
		t.Errorf("throughput row %q, want %q", rows[2][1], want)
	}
	// Without gateway-pg: no table, and every row not measured.
	plain := results(350*us, 900*us, 8000, 500*us, 1000, 1, 1000)
	if md := renderReport(plain); strings.Contains(md, "Targets: the ledger on PostgreSQL") || strings.Contains(md, "gateway-pg") {
		t.Errorf("a report without gateway-pg mentions it:\n%s", md)
	}
	for _, v := range pgVerdicts(plain) {
		if v != "—" {
			t.Errorf("verdict %q without gateway-pg", v)
		}
	}
}

// The A/A control holds the p50 difference against how far two identical
// proxies' p50s were apart in any round.
func TestPGTargetRowsNoise(t *testing.T) {
	r := pgResults(800*us, 1, 8000) // +0.450 ms over the gateway: 50 µs under the limit
	r.Latency = append(r.Latency, LatencyRun{Target: "control", Rate: 1000, Round: 1, Lat: lat(360*us, 500*us), Success: 1})
	rows := pgTargetRows(r)
	if !strings.HasSuffix(rows[0][2], "(within the A/A spread)") || !strings.Contains(rows[0][1], "control − proxy +0.060 ms") {
		t.Errorf("p50 row %q", rows[0])
	}
	r.Latency[len(r.Latency)-1].Lat = lat(310*us, 500*us) // 10 µs apart: the verdict stands
	if rows := pgTargetRows(r); rows[0][2] != "met" {
		t.Errorf("p50 row %q", rows[0])
	}
}

func TestRenderReportWithPG(t *testing.T) {
	r := pgResults(800*us, 1, 4000)
	r.Stream = append(r.Stream, StreamRun{Target: "proxy", TTFB: lat(400*us, 700*us)}, StreamRun{Target: gatewayPG, TTFB: lat(900*us, 900*us)})
	md := renderReport(r)
	for _, want := range []string{
		"**gateway-pg** is a second ModelRelay", "database `relay_bench_x`", "synchronous_commit **on**",
		"| 1000 | gateway-pg | 0.800 ms |", "| 1000 | **pg/proxy** | | | | | | | | 6.00×", "| 1000 | **pg − gw** | | | | | | | | +0.450 ms |",
		"| gateway-pg | 4000 | 100.00% |", "| 0.40× | 0.50× |",
		"| **pg/proxy** | | | | | | | | 6.00× |",
		"### Targets: the ledger on PostgreSQL, synchronous_commit on",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

const ledgerOut = `pkg: github.com/modelrelay/modelrelay/store/badger
BenchmarkHoldSettle/sync=false/serial-2   	  100000	     12500 ns/op	     80000 pairs/s
BenchmarkHoldSettle/sync=false/serial-2   	  100000	     12500 ns/op	     80000 pairs/s
BenchmarkHoldSettle/sync=false/parallel-2 	  100000	     10000 ns/op	    100000 pairs/s
BenchmarkHoldSettle/sync=true/parallel-one-account-2 	  4000	    250000 ns/op	      4000 pairs/s
pkg: github.com/modelrelay/modelrelay/store/postgres
BenchmarkHoldSettle/synchronous_commit=on/serial-2 	  2000	    625000 ns/op	  297 hold-µs	      1600 pairs/s	  328 settle-µs	  1.000 sync_commit
BenchmarkHoldSettle/synchronous_commit=on/parallel-one-account-2 	  1000	   1250000 ns/op	  800 pairs/s
BenchmarkHoldSettle/synchronous_commit=on/parallel-one-account-2 	  1000	   1350000 ns/op	  740 pairs/s
BenchmarkHoldSettle/synchronous_commit=off/parallel-2 	  9000	    125000 ns/op	  8000 pairs/s
pkg: github.com/modelrelay/modelrelay/plugins
BenchmarkRequest-2       	   10000	    4000 ns/op
`

func TestLedgerMicro(t *testing.T) {
	samples, err := parseMicro(strings.NewReader(ledgerOut))
	if err != nil {
		t.Fatal(err)
	}
	m := microSummary(samples)
	if m == nil || m.PluginSamples != 1 || len(m.Ledger) != 6 {
		t.Fatalf("summary %+v", m)
	}
	if l := m.Ledger[4]; l.Store != "postgres" || l.Setting != "synchronous_commit=on" || l.Case != "parallel-one-account" || l.NsOp != 1300000 || l.Samples != 2 {
		t.Errorf("median of two samples: %+v", l)
	}
	var out strings.Builder
	renderLedgerMicro(func(f string, a ...any) { out.WriteString(fmt.Sprintf(f, a...)) }, &Results{Micro: m})
	for _, want := range []string{
		"| callers / accounts | badger sync=false | badger sync=true | postgres synchronous_commit=on | postgres synchronous_commit=off |",
		"| 1 caller, 1 account | 80000 | — | 1600 | — |",
		"| 8 callers per CPU, 16 accounts | 100000 | — | — | 8000 |",
		"| 8 callers per CPU, 1 account | — | 4000 | 769 | — |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// No ledger benchmarks and no plugin benchmark: no summary at all.
	if microSummary(nil) != nil {
		t.Error("a summary of nothing")
	}
	out.Reset()
	renderLedgerMicro(func(f string, a ...any) { out.WriteString(fmt.Sprintf(f, a...)) }, &Results{Micro: &Micro{PluginNs: 1, PluginSamples: 1}})
	if out.Len() != 0 {
		t.Errorf("a ledger table without ledger benchmarks: %q", out.String())
	}
}

package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestStallSpan(t *testing.T) {
	a := time.Unix(100, 0)
	b := a.Add(stallSample)
	// 4 ticks charged: the stall began no earlier than 5 ticks (50 ms) before
	// a, one tick more for when it was charged; the backlog drains for 100 ms.
	s := stallSpan(a, b, 4)
	if want := a.Add(-60 * time.Millisecond); !s.from.Equal(want) {
		t.Errorf("from %v, want %v", s.from.Sub(a), want.Sub(a))
	}
	if want := b.Add(stallDrain); !s.to.Equal(want) {
		t.Errorf("to %v after b, want %v", s.to.Sub(b), stallDrain)
	}
	// A long stall drains for twice its length.
	if s := stallSpan(a, b, 9); !s.to.Equal(b.Add(200 * time.Millisecond)) {
		t.Errorf("9 ticks: to %v after b, want 200ms", s.to.Sub(b))
	}
}

func TestClearOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	at := func(off, lat time.Duration) call { return call{start: t0.Add(off), lat: lat} }
	// One stall span from 500 ms to 700 ms.
	spans := []span{{from: t0.Add(500 * ms), to: t0.Add(700 * ms)}}
	calls := []call{
		at(0, 1*ms),         // long before
		at(490*ms, 5*ms),    // ends before the span
		at(495*ms, 10*ms),   // runs into it: excluded
		at(600*ms, 50*ms),   // inside: excluded
		at(700*ms, 80*ms),   // starts as it ends: excluded
		at(701*ms, 2*ms),    // after
		at(2000*ms, 3*ms),   // long after
		at(-100*ms, 900*ms), // spans it: excluded
	}
	c := clearOf(calls, spans, 7)
	if c.Calls != 4 || c.Excluded != 4 || c.Stalls != 1 || c.Ticks != 7 {
		t.Fatalf("calls %d excluded %d stalls %d ticks %d, want 4 4 1 7", c.Calls, c.Excluded, c.Stalls, c.Ticks)
	}
	if c.Lat.Max != 5*ms {
		t.Errorf("max of the clear calls %v, want 5ms (the 80 ms and 900 ms calls were touched)", c.Lat.Max)
	}
	// Spans out of order are sorted first: the early span must still count.
	late := span{from: t0.Add(5 * time.Second), to: t0.Add(6 * time.Second)}
	early := span{from: t0, to: t0.Add(10 * ms)}
	if c := clearOf([]call{at(0, ms), at(3*time.Second, ms)}, []span{late, early}, 2); c.Excluded != 1 || c.Calls != 1 {
		t.Errorf("unsorted spans: excluded %d calls %d, want 1 1", c.Excluded, c.Calls)
	}
	// No call clear: no latencies, not a panic.
	if c := clearOf([]call{at(600*ms, ms)}, spans, 1); c.Calls != 0 || !c.Lat.none() {
		t.Errorf("all excluded: %+v", c)
	}
}

func TestParseSteals(t *testing.T) {
	const stat = "cpu  4812912 4698 601186 4616124 32326 0 112516 173678 0 0\n" +
		"cpu0 2251445 2316 279274 2484707 19071 0 45334 92246 0 0\n" +
		"cpu1 2561467 2382 321912 2131416 13254 0 67181 81432 0 0\n" +
		"cpu10 1 2 3 4 5 6 7 99 0 0\n" +
		"intr 12345\n"
	got, err := parseSteals(strings.NewReader(stat), []int{10, 1, 0})
	if err != nil || len(got) != 3 || got[0] != 99 || got[1] != 81432 || got[2] != 92246 {
		t.Fatalf("%v, %v; want [99 81432 92246]", got, err)
	}
	if _, err := parseSteals(strings.NewReader(stat), []int{1, 2}); err == nil || !strings.Contains(err.Error(), "cpu2") {
		t.Errorf("a missing cpu: %v, want an error naming cpu2", err)
	}
}

func TestWatchStalls(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	if w := watchStalls(nil); w != nil {
		t.Fatal("no CPUs: a watcher")
	}
	w := watchStalls([]int{0})
	time.Sleep(3 * stallSample)
	spans, ticks, err := w.end()
	if err != nil || ticks < 0 || int64(len(spans)) > max(ticks, 0) {
		t.Fatalf("spans %d ticks %d err %v", len(spans), ticks, err)
	}
	if _, _, err := w.end(); err != nil { // a second end is harmless
		t.Fatal(err)
	}
	var none *stallWatch
	if spans, ticks, err := none.end(); spans != nil || ticks != 0 || err != nil {
		t.Fatal("a nil watcher ended with results")
	}
	if w := watchStalls([]int{100000}); w == nil {
		t.Fatal("nil watcher for a CPU that does not exist")
	} else if _, _, err := w.end(); err == nil {
		t.Error("a CPU that does not exist: no error")
	}
}

func TestRenderClear(t *testing.T) {
	r := results(350*us, 900*us, 9000, 300*us, 1000, 1, 1000)
	ms := time.Millisecond
	clear := func(p99 time.Duration, excluded uint64) *Clear {
		return &Clear{Lat: lat(p99/2, p99), Calls: 1000 - excluded, Excluded: excluded, Stalls: 2, Ticks: 5}
	}
	r.Latency[0].Clear = clear(1*ms, 30)    // direct
	r.Latency[1].Clear = clear(2*ms, 50)    // proxy
	r.Latency[2].Clear = clear(1500*us, 40) // gateway: +0.5 ms
	out := renderReport(r)
	for _, want := range []string{"#### The calls no stall touched", "| 1000 | gateway | 2 | 50 ms | 4.00% |", "+0.500 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	rows := targetRows(r)
	var row [3]string
	for _, x := range rows {
		if x[0] == "the same, of the calls no stall touched" {
			row = x
		}
	}
	if row[2] != "for information: met" || !strings.Contains(row[1], "gateway +0.500 ms (proxy +1.000 ms)") {
		t.Errorf("clear row %q", row)
	}
	// Too many calls excluded: the verdict says so.
	r.Latency[2].Clear = clear(1500*us, 200)
	for _, x := range targetRows(r) {
		if x[0] == row[0] && !strings.Contains(x[2], "not a p99 of the run") {
			t.Errorf("20%% excluded: verdict %q", x[2])
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	ns, err := parseSchedstat([]byte("123456789 2000 31\n"))
	if err != nil || ns != 123456789 {
		t.Fatalf("got %d, %v", ns, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "x 2 3", "-5 2 3"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// spin keeps this goroutine's thread on the CPU for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func TestReadCPUSelf(t *testing.T) {
	before, err := readCPU(os.Getpid())
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	spin(30 * time.Millisecond)
	after, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The spin ran at least 30 ms of wall time; a loaded machine may give
	// it less of a CPU, but not nothing.
	if d := after - before; d < 5*time.Millisecond || d > 10*time.Second {
		t.Fatalf("30 ms of spinning counted as %v", d)
	}
	if _, err := readCPU(1 << 30); err == nil {
		t.Error("a pid that does not exist: no error")
	}
}

func TestCPUMeter(t *testing.T) {
	if _, err := readCPU(os.Getpid()); err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	var log bytes.Buffer
	// The test process plays both the hop and the provider.
	b := &bench{log: &log, simPID: os.Getpid()}
	end := b.cpuMeter(target{Name: "proxy", PID: os.Getpid()})
	spin(40 * time.Millisecond)
	c := end(10)
	if c == nil {
		t.Fatalf("no result; log: %s", log.String())
	}
	// 40 ms over 10 calls: at least 0.5 ms a call on any machine that ran
	// the spin at all, and the two reads saw the same process.
	if c.Hop < 500*time.Microsecond || c.Provider < 500*time.Microsecond {
		t.Errorf("per call: %+v", c)
	}
	if got := (&CPU{Hop: 294 * us, Provider: 83 * us}).summary(); got != "; cpu/call hop 294 µs provider 83 µs" {
		t.Errorf("summary %q", got)
	}
	if got := (&CPU{Hop: 250 * us, DB: 180 * us, Provider: 83 * us}).summary(); got != "; cpu/call hop 250 µs database 180 µs provider 83 µs" {
		t.Errorf("gateway-pg's summary %q", got)
	}
	if got := (&CPU{Provider: 129 * us}).summary(); got != "; cpu/call provider 129 µs" {
		t.Errorf("direct's summary %q", got)
	}
	if got := (*CPU)(nil).summary(); got != "" {
		t.Errorf("nil summary %q", got)
	}
	if end(0) != nil {
		t.Error("no calls: want nil")
	}
	direct := b.cpuMeter(target{Name: "direct"})
	if c := direct(5); c == nil || c.Hop != 0 {
		t.Errorf("direct has no hop: %+v", c)
	}
	if (&bench{log: &log}).cpuMeter(target{Name: "proxy", PID: os.Getpid()})(10) != nil {
		t.Error("without -sim-pid: want nil")
	}
	gone := &bench{log: &log, simPID: 1 << 30}
	if gone.cpuMeter(target{Name: "proxy"})(10) != nil || !strings.Contains(log.String(), "provider (pid") {
		t.Errorf("unreadable provider: want nil and a log line; log: %s", log.String())
	}
}

func TestRenderCPU(t *testing.T) {
	r := results(350*us, 900*us, 9000, 300*us, 1000, 1, 1000)
	if strings.Contains(renderReport(r), "CPU time per call") {
		t.Fatal("a run without CPU readings has a CPU table")
	}
	r.Latency[0].CPU = &CPU{Provider: 130 * us}
	r.Latency[1].CPU = &CPU{Hop: 200 * us, Provider: 110 * us}
	r.Latency[2].CPU = &CPU{Hop: 300 * us, Provider: 90 * us}
	// A hop whose process was not read: its provider, no hop, no total.
	r.Latency = append(r.Latency, LatencyRun{Target: "control", Rate: 1000, Round: 1, Lat: lat(350*us, 900*us), Success: 1, CPU: &CPU{Provider: 100 * us}})
	out := renderReport(r)
	for _, want := range []string{"#### CPU time per call", "| 1000 | direct | — | — | 130 µs | 130 µs | — | — |", "| 1000 | control | — | — | 100 µs | — | — | — |",
		"| 1000 | proxy | 200 µs | — | 110 µs | 310 µs | 1.00× | — |", "| 1000 | gateway | 300 µs | — | 90 µs | 390 µs | 1.50× | — |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "**database** is") {
		t.Error("the database legend without gateway-pg")
	}
	// gateway-pg: its database's processes count in the total, and its hop
	// and database together are set against the Badger gateway's hop.
	r.Latency = append(r.Latency, LatencyRun{Target: gatewayPG, Rate: 1000, Round: 1, Lat: lat(500*us, 900*us), Success: 1,
		CPU: &CPU{Hop: 250 * us, DB: 200 * us, Provider: 90 * us}})
	out = renderReport(r)
	for _, want := range []string{"**database** is", "| 1000 | gateway-pg | 250 µs | 200 µs | 90 µs | 540 µs | 1.25× | 1.50× |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Medians over rounds.
	r.Latency = append(r.Latency,
		LatencyRun{Target: "gateway", Rate: 1000, Round: 2, Lat: lat(350*us, 900*us), Success: 1, CPU: &CPU{Hop: 100 * us, Provider: 80 * us}},
		LatencyRun{Target: "gateway", Rate: 1000, Round: 3, Lat: lat(350*us, 900*us), Success: 1, CPU: &CPU{Hop: 900 * us, Provider: 70 * us}},
		LatencyRun{Target: gatewayPG, Rate: 1000, Round: 2, Lat: lat(500*us, 900*us), Success: 1, CPU: &CPU{Hop: 260 * us, DB: 100 * us, Provider: 90 * us}},
		LatencyRun{Target: gatewayPG, Rate: 1000, Round: 3, Lat: lat(500*us, 900*us), Success: 1, CPU: &CPU{Hop: 270 * us, DB: 700 * us, Provider: 90 * us}})
	if c := aggLatency(r.Latency, "gateway", 1000).CPU; c == nil || c.Hop != 300*us || c.Provider != 80*us || c.DB != 0 {
		t.Errorf("medians: %+v", c)
	}
	if c := aggLatency(r.Latency, gatewayPG, 1000).CPU; c == nil || c.Hop != 260*us || c.DB != 200*us {
		t.Errorf("gateway-pg's medians: %+v", c)
	}
}

func TestWriteCalls(t *testing.T) {
	name := filepath.Join(t.TempDir(), "calls.csv")
	start := time.Unix(1700000000, 5)
	if err := writeCalls(name, []call{{start, 3 * time.Millisecond}, {start.Add(time.Second), 250 * time.Microsecond}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	want := "start_unix_ns,latency_ns\n1700000000000000005,3000000\n1700000001000000005,250000\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	if err := writeCalls(filepath.Join(t.TempDir(), "no", "such", "dir.csv"), nil); err == nil {
		t.Error("an unwritable path: no error")
	}
}

func TestBackendOf(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"postgres: 15/main: postgres relay_bench_ab12 [local] idle", true},
		{"postgres: 15/main: postgres relay_bench_ab12 [local] UPDATE\x00\x00", true},
		{"postgres: postgres relay_bench_ab12 127.0.0.1(40124) idle in transaction", true}, // no cluster name
		{"postgres: 15/main: postgres relay_bench_ab123 [local] idle", false},              // another database
		{"postgres: 15/main: walwriter", false},
		{"/usr/lib/postgresql/15/bin/postgres\x00-D\x00relay_bench_ab12", false}, // not a title
		{"bash\x00-c\x00postgres: relay_bench_ab12", false},
	} {
		if got := backendOf([]byte(c.cmdline), "relay_bench_ab12"); got != c.want {
			t.Errorf("backendOf(%q) = %v", c.cmdline, got)
		}
	}
	if backendOf([]byte("postgres: 15/main: postgres  [local] idle"), "") {
		t.Error("an empty database name matched")
	}
}

func TestBackendsRan(t *testing.T) {
	before := map[int]time.Duration{1: 10 * us, 2: 50 * us, 3: 70 * us}
	after := map[int]time.Duration{1: 30 * us, 2: 50 * us, 4: 5 * us} // 3 ended, 4 began
	if got := backendsRan(before, after); got != 25*us {
		t.Errorf("got %v, want 25µs (20 + 0 + 5)", got)
	}
	// A pid reused by a new process with less time than the old one had:
	// counted from its start.
	if got := backendsRan(map[int]time.Duration{1: 90 * us}, map[int]time.Duration{1: 4 * us}); got != 4*us {
		t.Errorf("reused pid: %v", got)
	}
}

func TestReadBackendsNone(t *testing.T) {
	m, err := readBackends("relay_bench_no_such_database_here")
	if err != nil || len(m) != 0 {
		t.Fatalf("got %v, %v; want none", m, err)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/modelrelay/modelrelay/sim"
)

func proxyTo(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1}
	// Full duplex, as bareproxy: a plain ReverseProxy cuts about 0.5% of
	// streams (golang/go#40747).
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(px.Close)
	return px
}

func simServer(t *testing.T, o sim.Options) *httptest.Server {
	t.Helper()
	s := sim.New(o)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(s.Close)
	return hs
}

// TestPhasesEndToEnd runs every phase, briefly, against the real simulated
// provider and two reverse proxies standing in for the bare proxy and the
// gateway (this test checks the harness, not the gateway), reading this
// process's own memory.
func TestPhasesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load for a few seconds")
	}
	pid := os.Getpid()
	targets, hold := phaseTargets(t, pid)
	s := Settings{
		Model: "modelf-flash", Rates: []int{50, 100}, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Rounds: 1, MaxWorkers: 64, Timeout: 5 * time.Second, TPDuration: 300 * time.Millisecond, Conns: 4,
		StreamRate: 20, StreamDuration: 300 * time.Millisecond, Chunks: 5, ChunkGap: 2 * time.Millisecond,
		OpenStreams: 20, OpenRate: 200, OpenTimeout: 30 * time.Second, Phases: allPhases, Pause: 50 * time.Millisecond,
		Jitter: 200 * time.Millisecond, SUTCPU: 0, AgeCalls: 300, StepFactor: 1.5, StepDuration: 300 * time.Millisecond,
	}
	res := &Results{Settings: s}
	calls := t.TempDir()
	// This process plays the provider too: its CPU time is read as the sim's.
	b := &bench{s: s, log: io.Discard, simPID: pid, callsDir: calls}
	if err := b.runAll(context.Background(), targets, hold, res); err != nil {
		t.Fatal(err)
	}
	_, cpuErr := readCPU(pid)

	// The steal of CPU 0 is read around every measurement where /proc/stat is.
	_, statErr := os.Stat("/proc/stat")
	// No upper bound: the kernel charges steal when the CPU runs again, so a
	// short window can be charged with a stall that began before it.
	stolenOK := func(f *float64) bool { return (f != nil) == (statErr == nil) && (f == nil || *f >= 0) }
	checkLatencyRuns(t, res.Latency, s.Duration, calls, cpuErr == nil, stolenOK)
	checkLoadRuns(t, res, stolenOK)
	checkAgeRuns(t, res)
	if len(res.Serial) != 4 {
		t.Errorf("%d serial runs, want one per target", len(res.Serial))
	}
	for _, r := range res.Serial {
		if r.Success != 1 || r.Calls == 0 || r.Lat.P50 <= 0 || r.Lat.P99 < r.Lat.P50 {
			t.Errorf("serial run %+v", r)
		}
	}
	// start + six phases, three processes each (proxy, gateway, proxy (slow streams)).
	if len(res.Peak) != 7*3 {
		t.Errorf("%d peak readings", len(res.Peak))
	}
	if res.Jitter == nil || res.Jitter.P50 < 0 || res.Jitter.Max < res.Jitter.P99 || res.Jitter.Max > time.Second {
		t.Errorf("jitter %+v", res.Jitter)
	}
	md := renderReport(res)
	if !strings.Contains(md, "### One call at a time") || !strings.Contains(md, "| gateway | ") {
		t.Errorf("no serial table in the report")
	}
	if !strings.Contains(md, "### Sustained, not fresh") || !strings.Contains(md, "gateway sustained throughput ≥ 0.9× its fresh") {
		t.Errorf("no ageing in the report")
	}
	if !strings.Contains(md, "Noise floor: 1 ms sleeps") {
		t.Errorf("no noise floor in the report")
	}
	if !strings.Contains(md, "| 100 | gateway |") || !strings.Contains(md, "| 100 | **control/proxy** |") || !strings.Contains(md, "| control |") ||
		!strings.Contains(md, "plugin time ≤ 30 µs per request | not measured") {
		t.Errorf("report:\n%s", md)
	}
}

// checkAgeRuns wants one ageing, of the gateway alone: fresh throughput
// measured, at least AgeCalls calls sent, a step offered past it.
func checkAgeRuns(t *testing.T, res *Results) {
	t.Helper()
	if len(res.Age) != 1 {
		t.Fatalf("%d ageings, want the gateway's", len(res.Age))
	}
	a := res.Age[0]
	if a.Target != "gateway" || a.Fresh <= 0 || a.FreshSuccess != 1 || a.Answered < res.Settings.AgeCalls || a.Answered > a.Calls ||
		a.StepRate < int(a.Fresh) || a.StepSent == 0 {
		t.Errorf("ageing %+v", a)
	}
}

// phaseTargets starts a fast and a slow simulated provider and returns the
// targets of the load phases (direct to the fast one, and three reverse
// proxies to it) and of the open-stream phase (two proxies to the slow
// one). The proxy and gateway targets name pid as their process.
func phaseTargets(t *testing.T, pid int) (targets, hold []target) {
	t.Helper()
	fast := simServer(t, sim.Options{Chunks: 5, ChunkGap: 2 * time.Millisecond})
	slow := simServer(t, sim.Options{Chunks: 30, ChunkGap: 200 * time.Millisecond})
	targets = []target{
		{Name: "direct", URL: fast.URL, Key: "sk-x"},
		{Name: "proxy", URL: proxyTo(t, fast.URL).URL, Key: "sk-x", PID: pid},
		{Name: "control", URL: proxyTo(t, fast.URL).URL, Key: "sk-x"},
		{Name: "gateway", URL: proxyTo(t, fast.URL).URL, Key: "sk-x", PID: pid},
	}
	hold = []target{
		{Name: "proxy", URL: proxyTo(t, slow.URL).URL, Key: "sk-y", PID: pid},
		{Name: "gateway", URL: proxyTo(t, slow.URL).URL, Key: "sk-y", PID: pid},
	}
	return targets, hold
}

// checkLatencyRuns wants eight latency runs (two rates, four targets), each
// all successful, with about the requests its rate sends in window, sane
// percentiles and steal, CPU per call where schedstat is (haveCPU), and
// every answered call in its CSV under calls.
func checkLatencyRuns(t *testing.T, runs []LatencyRun, window time.Duration, calls string, haveCPU bool, stolenOK func(*float64) bool) {
	t.Helper()
	if len(runs) != 8 {
		t.Fatalf("%d latency runs", len(runs))
	}
	for _, r := range runs {
		// An open loop never sends early, but a machine busy with the
		// rest of the suite (-race, packages in parallel) can keep it from
		// sending for a good part of a 400 ms window: at least half.
		want := uint64(float64(r.Rate) * window.Seconds())
		if r.Success != 1 || r.Requests < want/2 || r.Requests > want*12/10 || r.Lat.P50 <= 0 || r.Lat.P99 < r.Lat.P50 || r.Lat.Max < r.Lat.P99 || !stolenOK(r.Stolen) {
			t.Errorf("latency run %+v (want about %d requests)", r, want)
		}
		// CPU per call: a hop only for the targets with a pid (proxy,
		// gateway), the provider for every one.
		hasPID := r.Target == "proxy" || r.Target == "gateway"
		if haveCPU && (r.CPU == nil || r.CPU.Provider <= 0 || (r.CPU.Hop > 0) != hasPID) {
			t.Errorf("latency run %s at %d/s: CPU %+v", r.Target, r.Rate, r.CPU)
		}
		// Every answered call in its CSV, one line each after the header.
		b, err := os.ReadFile(filepath.Join(calls, fmt.Sprintf("latency-%d-%s-%d.csv", r.Rate, r.Target, r.Round)))
		if lines := bytes.Count(b, []byte("\n")); err != nil || uint64(lines) != r.Requests+1 {
			t.Errorf("calls of %s at %d/s: %d lines for %d requests, %v", r.Target, r.Rate, lines, r.Requests, err)
		}
	}
}

// checkLoadRuns wants four throughput and four stream runs and two
// open-stream (rss) runs, each all successful and sane.
func checkLoadRuns(t *testing.T, res *Results, stolenOK func(*float64) bool) {
	t.Helper()
	if len(res.Throughput) != 4 {
		t.Fatalf("%d throughput runs", len(res.Throughput))
	}
	for _, r := range res.Throughput {
		if r.Success != 1 || r.Throughput < 20 || !stolenOK(r.Stolen) {
			t.Errorf("throughput run %+v", r)
		}
	}
	if len(res.Stream) != 4 {
		t.Fatalf("%d stream runs", len(res.Stream))
	}
	for _, r := range res.Stream {
		// 5 chunks 2 ms apart: the whole stream takes at least 8 ms, its first event much less.
		// 20 streams/s for 300 ms is 6, but a machine busy with the rest of the
		// suite (-race, packages in parallel) can keep the open loop from
		// starting most of them (a fresh-clone CI run started 2): at least one.
		if r.Success != 1 || r.Streams < 1 || r.TTFB.P50 <= 0 || r.Total.P50 < 8*time.Millisecond || r.TTFB.P50 >= r.Total.P50 || !stolenOK(r.Stolen) {
			t.Errorf("stream run %+v", r)
		}
	}
	if len(res.RSS) != 2 {
		t.Fatalf("%d rss runs", len(res.RSS))
	}
	for _, r := range res.RSS {
		if r.Opened != 20 || r.Failed != 0 || r.OpenNow != 20 || r.During <= 0 || r.HWM < r.During || len(r.Errors) != 0 {
			t.Errorf("rss run %+v", r)
		}
	}
}

// TestCheckFailsFast: a target that does not answer 200 stops the run
// before any load, naming the target and its answer.
func TestCheckFailsFast(t *testing.T) {
	fast := simServer(t, sim.Options{})
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"invalid key"}}`, http.StatusUnauthorized)
	}))
	defer deny.Close()
	s := Settings{Model: "modelf-flash", Timeout: 5 * time.Second}
	b := &bench{s: s, log: io.Discard}
	err := b.check(context.Background(), []target{{Name: "direct", URL: fast.URL}, {Name: "gateway", URL: deny.URL}}, true)
	if err == nil || !strings.Contains(err.Error(), "gateway") || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "invalid key") {
		t.Fatalf("err = %v", err)
	}
	if err := b.check(context.Background(), []target{{Name: "direct", URL: fast.URL}}, true); err != nil {
		t.Fatalf("healthy target: %v", err)
	}
}

func TestRunFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing targets", []string{}, "is required"},
		{"bad rate", []string{"-rates", "500,x"}, `-rates: "x"`},
		{"repeated rate", []string{"-rates", "500,500"}, "listed twice"},
		{"bad phase", []string{"-phases", "latency,warp"}, `-phases: "warp"`},
		{"rounds", []string{"-rounds", "0"}, "-rounds"},
		{"rss needs pids", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k"}, "rss:"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
		{"gateway-pg needs its key", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k", "-gateway-pg", "http://d"}, "-gateway-pg needs -key-pg"},
		{"as many keys for both gateways", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k1,k2", "-gateway-pg", "http://d", "-key-pg", "k3"}, "as many accounts"},
		{"pg flags need gateway-pg", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k", "-pg-db", "x"}, "need -gateway-pg"},
		{"gateway-x needs its key", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k", "-gateway-x", "http://d"}, "-gateway-x needs -key-x"},
		{"as many keys for gateway-x", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k1,k2", "-gateway-x", "http://d", "-key-x", "k3"}, "-key-x has 1 keys and -key 2"},
		{"x flags need gateway-x", []string{"-direct", "http://a", "-proxy", "http://b", "-gateway", "http://c", "-key", "k", "-key-x", "x"}, "need -gateway-x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", c.args, err, c.want)
			}
		})
	}
}

// gateway-x and gateway-pg are measured beside the gateway, each with its
// own keys and process.
func TestTargetsSecondGateways(t *testing.T) {
	o, err := parseFlags([]string{"-direct", "http://a", "-proxy", "http://b", "-control", "http://e", "-gateway", "http://c", "-key", "k1,k2",
		"-gateway-x", "http://x", "-key-x", "x1,x2", "-gateway-x-pid", "7", "-gateway-pg", "http://p", "-key-pg", "p1,p2", "-phases", "latency"})
	if err != nil {
		t.Fatal(err)
	}
	ts, hold, err := o.targets()
	if err != nil || hold != nil {
		t.Fatalf("targets: %v, hold %v", err, hold)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	if got := strings.Join(names, ","); got != "direct,proxy,control,gateway,gateway-x,gateway-pg" {
		t.Fatalf("targets %s", got)
	}
	x := ts[4]
	if x.URL != "http://x" || x.PID != 7 || x.key() != "x1" || x.key() != "x2" || x.key() != "x1" {
		t.Errorf("gateway-x %+v", x)
	}
	if !isGateway(gatewayX) {
		t.Error("gateway-x's /metrics are not read")
	}
}

// order is a Williams design: over n rounds (2n for odd n) every target
// runs once per round and right after every other target equally often.
func TestOrder(t *testing.T) {
	for n := 1; n <= 6; n++ {
		var ts []target
		for i := range n {
			ts = append(ts, target{Name: string(rune('a' + i))})
		}
		rounds := n
		if n%2 == 1 {
			rounds = 2 * n
		}
		follows := map[[2]string]int{}
		for r := 1; r <= rounds; r++ {
			o := order(ts, r)
			var got []string
			for i, x := range o {
				got = append(got, x.Name)
				if i > 0 {
					follows[[2]string{o[i-1].Name, x.Name}]++
				}
			}
			slices.Sort(got)
			if len(got) != n || len(slices.Compact(got)) != n {
				t.Fatalf("n %d round %d: %v is not every target once", n, r, o)
			}
		}
		if want := n * (n - 1); n > 1 && len(follows) != want {
			t.Errorf("n %d: %d ordered neighbours, want all %d", n, len(follows), want)
		}
		for pair, c := range follows {
			if c != rounds/n {
				t.Errorf("n %d: %s right after %s %d times in %d rounds, want %d", n, pair[1], pair[0], c, rounds, rounds/n)
			}
		}
	}
}

// The latencies are the answered calls' only: a fast refusal does not
// flatter them, but counts against success.
func TestTallyLatenciesOfAnsweredCalls(t *testing.T) {
	var m tally
	t0 := time.Now()
	for i := range 100 {
		m.add(&vegeta.Result{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Code: 200, Latency: 100 * time.Millisecond})
		m.add(&vegeta.Result{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Code: 503, Latency: 50 * time.Microsecond, Error: "503 Service Unavailable"})
	}
	m.close()
	if l := m.lat(); l.P50 != 100*time.Millisecond || l.P99 != 100*time.Millisecond {
		t.Errorf("latencies %+v, want the answered calls' 100ms", l)
	}
	if m.all.Success != 0.5 || m.all.Requests != 200 {
		t.Errorf("success %v of %d requests, want 0.5 of 200", m.all.Success, m.all.Requests)
	}
}

// Keys of several accounts are taken in turn, by the streams' headers and
// by vegeta's targeter alike.
func TestKeysInTurn(t *testing.T) {
	one := target{Name: "gateway"}.withKeys("sk-a")
	if one.Key != "sk-a" || one.Keys != nil || one.key() != "sk-a" || one.key() != "sk-a" {
		t.Fatalf("one key: %+v", one)
	}
	three := target{Name: "gateway"}.withKeys("sk-a,sk-b,sk-c")
	var got []string
	for range 4 {
		got = append(got, headers(three).Get("Authorization"))
	}
	if want := "Bearer sk-a,Bearer sk-b,Bearer sk-c,Bearer sk-a"; strings.Join(got, ",") != want {
		t.Errorf("streams' keys %v, want %s", got, want)
	}
	seen := map[string]int{}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
	}))
	defer srv.Close()
	three.URL = srv.URL
	b := &bench{s: Settings{Model: "m"}, log: io.Discard}
	b.attack(context.Background(), newClient(0, 4, time.Second), three, vegeta.Rate{Freq: 300, Per: time.Second}, 100*time.Millisecond, 4, 4, false)
	if len(seen) != 3 || seen["Bearer sk-a"] < 9 || seen["Bearer sk-b"] < 9 || seen["Bearer sk-c"] < 9 {
		t.Errorf("calls by key: %v", seen)
	}
}

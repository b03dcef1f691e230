package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// sink keeps the test's allocations from being optimised away.
var sink [][]byte

// TestGCMeter reads a real Go collector's exposition, as the gateway serves
// it, around collections and allocations this test makes.
func TestGCMeter(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var log bytes.Buffer
	b := &bench{log: &log}
	ctx := context.Background()

	meter := b.gcMeter(ctx, target{Name: "gateway", URL: srv.URL})
	const calls, each = 100, 64 << 10
	for range calls {
		sink = append(sink, make([]byte, each))
	}
	sink = nil
	runtime.GC()
	runtime.GC()
	g := meter()
	if g == nil {
		t.Fatalf("no reading; log: %s", log.String())
	}
	if g.Collections < 2 {
		t.Errorf("collections = %d, want at least the 2 the test ran", g.Collections)
	}
	if g.AllocBytes/calls < each {
		t.Errorf("allocated per call = %d bytes, want at least the %d the test allocated per call", g.AllocBytes/calls, each)
	}
	if s := g.summary(calls); !strings.Contains(s, "collections") || !strings.Contains(s, "KB allocated/call") {
		t.Errorf("summary %q", s)
	}
	if s := g.summary(0); s != "" {
		t.Errorf("summary of no calls %q, want none", s)
	}

	if m := b.gcMeter(ctx, target{Name: "proxy", URL: srv.URL}); m() != nil {
		t.Error("a target other than the gateway was read")
	}
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	if m := b.gcMeter(ctx, target{Name: "gateway", URL: missing.URL}); m() != nil {
		t.Error("a reading from a server without the metrics")
	}
	if !strings.Contains(log.String(), "gc per call") {
		t.Errorf("the failed read was not logged: %q", log.String())
	}
	if g := (*GC)(nil); g.summary(calls) != "" {
		t.Error("nil summary not empty")
	}
}

func TestParseGoMetricsRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"empty":       "",
		"no alloc":    "# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_sum 0.1\ngo_gc_duration_seconds_count 7\n",
		"no gc":       "# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 123\n",
		"not metrics": "<html>hello</html>\n",
	} {
		if _, err := parseGoMetrics(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	m, err := parseGoMetrics(strings.NewReader("# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_sum 0.1\ngo_gc_duration_seconds_count 7\n" +
		"# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 1.2345e+06\n"))
	if err != nil || m.collections != 7 || m.allocBytes != 1234500 {
		t.Errorf("got %+v, %v", m, err)
	}
}

func TestRenderGC(t *testing.T) {
	res := &Results{Settings: Settings{Rates: []int{1000}}, Latency: []LatencyRun{
		{Target: "gateway", Rate: 1000, Round: 1, Requests: 5000, GC: &GC{Collections: 3, AllocBytes: 5000 * 15000}},
		{Target: "gateway", Rate: 1000, Round: 2, Requests: 5000, GC: &GC{Collections: 2, AllocBytes: 5000 * 14000}},
		{Target: "proxy", Rate: 1000, Round: 1, Requests: 5000},
		{Target: gatewayPG, Rate: 1000, Round: 1, Requests: 5000, GC: &GC{Collections: 0, AllocBytes: 5000 * 20000}},
	}}
	var out strings.Builder
	renderGC(func(f string, a ...any) { out.WriteString(fmt.Sprintf(f, a...)) }, res)
	for _, want := range []string{"| 1000 | gateway | 5 | 10000 | 2000 | 14.5 KB |", "| 1000 | gateway-pg | 0 | 5000 | — | 20.0 KB |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	renderGC(func(f string, a ...any) { out.WriteString(fmt.Sprintf(f, a...)) }, &Results{Settings: Settings{Rates: []int{1000}}})
	if out.Len() != 0 {
		t.Errorf("rendered without readings: %q", out.String())
	}
}

package gateway

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// metricValue sums the samples of a series whose labels contain every part.
func metricValue(t *testing.T, text, name string, parts ...string) float64 {
	t.Helper()
	total := 0.0
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name) || strings.HasPrefix(l, "#") {
			continue
		}
		rest := l[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		total += v
	}
	return total
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	scrape := func() string {
		st, _, data := e.do("GET", "/metrics", "", nil)
		if st != 200 {
			t.Fatalf("metrics: %d", st)
		}
		return string(data)
	}
	before := scrape()
	e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "metrics"))
	e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "metrics", `"stream":true`))
	e.do("POST", "/v1/chat/completions", key, chatBody("nope", "x"))
	after := scrape()
	for _, c := range []struct {
		name  string
		parts []string
	}{
		{"relay_requests_total", []string{`endpoint="chat_completions"`, `model="modelf-flash"`, `route="economy"`, `status="200"`}},
		{"relay_requests_total", []string{`status="403"`}},
		{"relay_request_duration_seconds_count", []string{`part="gateway"`}},
		{"relay_request_duration_seconds_count", []string{`part="upstream"`}},
		{"relay_stream_first_byte_seconds_count", []string{`endpoint="chat_completions"`}},
		{"relay_tokens_total", []string{`kind="output"`, `model="modelf-flash"`}},
		{"relay_charged_nano_usd_total", []string{`route="economy"`}},
		{"relay_plugin_call_duration_seconds_count", []string{`plugin="tokens"`, `op="admit"`}},
		{"relay_plugin_calls_total", []string{`plugin="tokens"`}},
		{"relay_line_requests_total", []string{`line="eco-a"`}},
	} {
		if b, a := metricValue(t, before, c.name, c.parts...), metricValue(t, after, c.name, c.parts...); a <= b {
			t.Errorf("%s%v did not move: %v → %v", c.name, c.parts, b, a)
		}
	}
	if v := metricValue(t, after, "relay_open_holds"); v != 0 {
		t.Errorf("open holds %v after every call settled", v)
	}
	if !strings.Contains(after, `relay_line_breaker_state{line="eco-a",route="economy"} 0`) {
		t.Error("breaker state of eco-a missing")
	}
	// Health and readiness, without a key; on the ops handler too.
	for _, h := range []string{"/healthz", "/readyz"} {
		if st, _, data := e.do("GET", h, "", nil); st != 200 {
			t.Errorf("%s: %d %s", h, st, data)
		}
	}
	ops := httptest.NewServer(e.gw.OpsHandler())
	defer ops.Close()
	e2 := *e
	e2.url = ops.URL
	if st, _, data := e2.do("GET", "/metrics", "", nil); st != 200 || !strings.Contains(string(data), "relay_requests_total") {
		t.Errorf("ops /metrics: %d", st)
	}
}

// /readyz fails when a model has no line.
func TestReadyzNeedsALinePerModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) {
		c.Lines = []config.LineConfig{{Name: "only", Models: []string{"modelf-flash"}, Route: "economy"}}
	})
	st, _, data := e.do("GET", "/readyz", "", nil)
	if st != 503 || !strings.Contains(string(data), "no line serves modela-opus-5-5") {
		t.Fatalf("readyz: %d %s", st, data)
	}
}

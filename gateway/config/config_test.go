package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimalConfig = `
admin_token: 0123456789abcdef0123
routes: [{name: standard}]
lines:
  - {name: a, base_url: "http://127.0.0.1:9090", models: ["*"], route: standard}
`

func TestConfigDefaults(t *testing.T) {
	c, err := Parse([]byte(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "./data" || c.Plugins.CallTimeout != 250*time.Millisecond ||
		c.Billing.DefaultOutputTokens != 4096 || c.Retry.MaxTries != 0 || c.Retry.Tries(1) != 3 || c.Retry.Tries(5) != 5 || c.Lines[0].Protocol != ProtocolOpenAI ||
		c.Lines[0].Weight != 1 || c.Lines[0].Timeouts.FirstByte != 120*time.Second || *c.SyncWrites ||
		c.Memory.Limit != "192MiB" || c.Memory.Bytes != 192<<20 {
		t.Fatalf("defaults: %+v", c)
	}
	r := c.Retry
	if r.BreakerFailureRatio != 0.8 || r.BreakerMinRequests != 20 || r.BreakerWindow != 10*time.Second ||
		r.BreakerOpen != 10*time.Second || r.BudgetRatio != 1 || r.BudgetMinPerSecond != 10 || *r.PanicShare != 0.5 ||
		r.Max429Wait != 10*time.Second || r.AffinityTTL != time.Hour {
		t.Fatalf("retry defaults: %+v (panic share %v)", r, *r.PanicShare)
	}
	// panic_share 0 is kept: it turns panic mode off.
	c, err = Parse([]byte(minimalConfig + "\nretry: {panic_share: 0}\n"))
	if err != nil || *c.Retry.PanicShare != 0 {
		t.Fatalf("panic_share 0: %v", err)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	t.Setenv("RELAY_ADMIN_TOKEN", "an-admin-token-of-some-length")
	t.Setenv("VENDOR_KEY", "upstream")
	c, err := Load(filepath.Join("..", "..", "relay.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Lines) != 5 || c.Lines[0].UpstreamKey() != "upstream" || c.Routes[1].Rate.Rate != 20 ||
		c.Lines[4].Protocol != ProtocolOpenAIChat || !c.Widens("modele-k3", "standard", "messages") || c.Widens("modele-k3", "economy", "messages") ||
		c.Retry.Max429Wait != 10*time.Second || c.Retry.AffinityTTL != time.Hour {
		t.Fatalf("example: %+v", c)
	}
	// The example's headers: and cors: sections are the defaults.
	var d Config
	if err := d.Headers.Resolve(); err != nil {
		t.Fatal(err)
	}
	if err := d.CORS.Resolve(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Headers) != fmt.Sprint(d.Headers) || fmt.Sprint(c.CORS) != fmt.Sprint(d.CORS) {
		t.Errorf("example headers %+v cors %+v, defaults %+v %+v", c.Headers, c.CORS, d.Headers, d.CORS)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	t.Setenv("EMPTY_VAR", "")
	cases := []struct{ name, yaml, want string }{
		{"unknown key", minimalConfig + "\nlisten_addr: x\n", "listen_addr"},
		{"unknown nested key", strings.Replace(minimalConfig, "route: standard}", "route: standard, prio: 1}", 1), "prio"},
		{"no admin token", "routes: [{name: s}]", "admin_token"},
		{"short admin token", "admin_token: short\nroutes: [{name: s}]", "admin_token"},
		{"sk admin token", "admin_token: sk-0123456789abcdef\nroutes: [{name: s}]", "admin_token"},
		{"empty admin env", "admin_token_env: EMPTY_VAR\nroutes: [{name: s}]", "admin_token_env"},
		{"no routes", "admin_token: 0123456789abcdef0123", "routes"},
		{"auto route", "admin_token: 0123456789abcdef0123\nroutes: [{name: auto}]", "routes[0].name"},
		{"duplicate route", "admin_token: 0123456789abcdef0123\nroutes: [{name: a}, {name: a}]", "routes[1].name"},
		{"line bad url", strings.Replace(minimalConfig, "http://127.0.0.1:9090", "ftp://x", 1), "lines[0] (a).base_url"},
		{"line bad protocol", strings.Replace(minimalConfig, "route: standard}", "route: standard, protocol: grpc}", 1), "lines[0] (a).protocol"},
		{"line unknown route", strings.Replace(minimalConfig, "route: standard}", "route: gold}", 1), "lines[0] (a).route"},
		{"line no models", strings.Replace(minimalConfig, `models: ["*"], `, "", 1), "lines[0] (a).models"},
		{"line empty key env", strings.Replace(minimalConfig, "route: standard}", "route: standard, key_env: EMPTY_VAR}", 1), "lines[0] (a).key_env"},
		{"negative weight", strings.Replace(minimalConfig, "route: standard}", "route: standard, weight: -2}", 1), "lines[0] (a).weight"},
		{"bad duration", minimalConfig + "\nretry: {max_time: soon}\n", "max_time"},
		{"wrong type", minimalConfig + "\nretry: {max_tries: many}\n", "max_tries"},
		{"negative tries", minimalConfig + "\nretry: {max_tries: -1}\n", "retry.max_tries"},
		{"replaced breaker_failures", minimalConfig + "\nretry:\n  breaker_failures: 5\n", "replaced by retry.breaker_failure_ratio"},
		{"ratio above 1", minimalConfig + "\nretry: {breaker_failure_ratio: 1.5}\n", "retry.breaker_failure_ratio"},
		{"tiny window", minimalConfig + "\nretry: {breaker_window: 1ms}\n", "retry.breaker_window"},
		{"negative budget", minimalConfig + "\nretry: {budget_ratio: -1}\n", "retry.budget_ratio"},
		{"panic share above 1", minimalConfig + "\nretry: {panic_share: 2}\n", "retry.panic_share"},
		{"bad rate", minimalConfig + "\nlimits: {key_rate: {rate: -1}}\n", "limits.key_rate.rate"},
		{"bad memory limit", minimalConfig + "\nmemory_limit: lots\n", "memory_limit"},
		{"tiny memory limit", minimalConfig + "\nmemory_limit: 1MiB\n", "memory_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Fatalf("missing file: %v", err)
	}
}

func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestMaxConnectionsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{0, 64}, {100, 64}, {191, 64}, {192, 64}, {256, 96}, {1024, 480}, {20000, 9968}, {^uint64(0), 1 << 24}} {
		if got := maxConnectionsFor(tc.nofile); got != tc.want {
			t.Errorf("maxConnectionsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

func TestServerConfig(t *testing.T) {
	c, err := Parse([]byte(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if s.HeaderTimeout != 10*time.Second || s.BodyTimeout != 120*time.Second || s.IdleTimeout != 120*time.Second ||
		s.MaxConnections != defaultMaxConnections() || s.MaxConnections < 64 || s.MaxConnectionsPerAddress != 512 {
		t.Fatalf("defaults: %+v", s)
	}
	c, err = Parse([]byte(minimalConfig + "\nserver: {body_timeout: 30s, max_connections: -1, max_connections_per_address: 8}\n"))
	if err != nil || c.Server.BodyTimeout != 30*time.Second || c.Server.MaxConnections != -1 || c.Server.MaxConnectionsPerAddress != 8 {
		t.Fatalf("set: %+v %v", c.Server, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"server: {header_timeout: -1s}", "server.header_timeout"},
		{"server: {body_timeout: -1s}", "server.body_timeout"},
		{"server: {idle_timeout: -5s}", "server.idle_timeout"},
		{"server: {header_timeout: 20s, body_timeout: 15s}", "server.body_timeout"},
		{"server: {max_connections: lots}", "server.max_connections"},
	} {
		if _, err := Parse([]byte(minimalConfig + "\n" + tc.yaml + "\n")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v does not name %s", tc.yaml, err, tc.want)
		}
	}
}

func TestCORSConfigErrors(t *testing.T) {
	for _, c := range []CORSConfig{{Origins: []string{""}}, {Origins: []string{"app.example"}}, {Origins: []string{"https://*.*.example"}}} {
		if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "cors.origins[0]") {
			t.Errorf("%v: %v", c.Origins, err)
		}
	}
}

func TestHeadersConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  HeadersConfig
		want string
	}{
		{HeadersConfig{Drop: []string{"ok", "bad name"}}, "headers.drop[1]"},
		{HeadersConfig{Drop: []string{"*"}}, "headers.drop[0]"},
		{HeadersConfig{RequestIDs: []string{""}}, "headers.request_ids[0]"},
		{HeadersConfig{UpstreamPrefix: "up stream-"}, "headers.upstream_prefix"},
	} {
		if err := tc.cfg.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// TestStoreBehindConfig: billing.max_store_backlog and max_store_wait
// default to the measured bounds, take -1 for none, and refuse the rest
// naming the key.
func TestStoreBehindConfig(t *testing.T) {
	var b BillingConfig
	if err := b.resolve(); err != nil || b.MaxStoreBacklog != DefaultMaxStoreBacklog || b.MaxStoreWait != DefaultMaxStoreWait {
		t.Fatalf("defaults: %+v %v", b, err)
	}
	b = BillingConfig{MaxStoreBacklog: -1, MaxStoreWait: -time.Second}
	if err := b.resolve(); err != nil || b.MaxStoreBacklog != -1 || b.MaxStoreWait != -time.Second {
		t.Fatalf("no bounds: %+v %v", b, err)
	}
	for _, bad := range []BillingConfig{{MaxStoreBacklog: -2}, {MaxStoreWait: -time.Millisecond}} {
		err := bad.resolve()
		if err == nil || !strings.Contains(err.Error(), "billing.max_store_") {
			t.Fatalf("%+v: %v, want an error naming the key", bad, err)
		}
	}
}

func TestServeIsChecked(t *testing.T) {
	t.Setenv("RELAY_ADMIN_TOKEN", "an-admin-token-of-some-length")
	base := "routes: [{name: standard}]\nlines: [{name: a, protocol: gemini, base_url: \"http://127.0.0.1:1\", models: [\"*\"], route: standard}]\nadmin_token_env: RELAY_ADMIN_TOKEN\n"
	for _, tc := range []struct{ serve, want string }{
		{"serve: [{models: [\"*\"], endpoints: [images]}]", "serve[0].endpoints[0]"},
		{"serve: [{endpoints: [messages]}]", "serve[0].models"},
		{"serve: [{models: [m], endpoints: []}]", "serve[0].endpoints"},
		{"serve: [{models: [m], route: nope, endpoints: [messages]}]", "serve[0].route"},
	} {
		_, err := Parse([]byte(base + tc.serve))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.serve, err, tc.want)
		}
	}
	c, err := Parse([]byte(base + "serve: [{models: [m], endpoints: [responses]}]"))
	if err != nil || !c.Widens("m", "standard", "responses") || c.Widens("m", "standard", "messages") || c.Widens("x", "standard", "responses") {
		t.Fatalf("%v %+v", err, c.Serve)
	}
	if _, err := Parse([]byte(strings.Replace(base, "gemini", "grpc", 1))); err == nil || !strings.Contains(err.Error(), "openai-chat") {
		t.Fatalf("unknown protocol: %v", err)
	}
}

func TestWildcardLinesServeWhatTheirProtocolCan(t *testing.T) {
	chatOnly, msgs := []string{"chat_completions"}, []string{"chat_completions", "messages"}
	for _, tc := range []struct {
		protocol string
		eps      []string
		want     bool
	}{
		{ProtocolAnthropic, chatOnly, false}, {ProtocolAnthropic, msgs, true},
		{ProtocolOpenAIChat, chatOnly, true}, {ProtocolGemini, chatOnly, true}, {ProtocolGemini, []string{"image_generation"}, false},
		{ProtocolOpenAI, []string{"image_generation"}, true}, {ProtocolAnthropic, nil, true},
	} {
		l := LineConfig{Protocol: tc.protocol, Models: []string{"*"}}
		if got := l.ServesModel("m", tc.eps); got != tc.want {
			t.Errorf("%s \"*\" serving %v: %v, want %v", tc.protocol, tc.eps, got, tc.want)
		}
	}
	l := LineConfig{Protocol: ProtocolAnthropic, Models: []string{"*", "m"}}
	if !l.ServesModel("m", chatOnly) {
		t.Error("a model the line names is served whatever its catalogue")
	}
}

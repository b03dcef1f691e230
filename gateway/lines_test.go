package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// threeLines: route standard served by a, b and c at one priority.
func threeLines(c *config.Config) {
	c.Routes = []config.RouteConfig{{Name: "standard"}, {Name: "economy"}}
	c.Lines = []config.LineConfig{
		{Name: "a", Models: []string{"*"}, Route: "standard"},
		{Name: "b", Models: []string{"*"}, Route: "standard"},
		{Name: "c", Models: []string{"*"}, Route: "standard"},
	}
}

func TestFailoverChargesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeLines)
	e.sims["b"].SetOptions(sim.Options{ErrorRate: 0.5, Status: 500})
	e.account("acme", "10")
	key := e.key("acme", "standard")
	const calls = 60
	for i := 0; i < calls; i++ {
		body := chatBody("modelb-6-astra", "failover", `"stream":`+map[bool]string{true: "true", false: "false"}[i%2 == 0])
		if st, _, data := e.do("POST", "/v1/chat/completions", key, body); st != 200 {
			t.Fatalf("call %d: %d %s", i, st, data)
		}
	}
	if e.sims["b"].Requests() == 0 {
		t.Fatal("the failing line was never tried: the test proves nothing")
	}
	sum, kinds := journalSum(t, e, "acme")
	b := e.balance("acme")
	if kinds[store.KindCharge] != calls || b.Balance != sum || b.Held != 0 {
		t.Fatalf("charges %d (want %d), balance %s, journal %s, held %s", kinds[store.KindCharge], calls, b.Balance.Fixed(), sum.Fixed(), b.Held.Fixed())
	}
	served := e.sims["a"].Requests() + e.sims["b"].Requests()/2 + e.sims["c"].Requests()
	if served < calls-1 || served > calls+1 {
		t.Errorf("lines answered %d successful requests for %d calls", served, calls)
	}
}

func TestBreakersOpenAndRecover(t *testing.T) {
	// Not parallel: it bounds each refusal's latency at 250 ms.
	e := newEnv(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{{Name: "standard"}}
		c.Lines = []config.LineConfig{{Name: "a", Models: []string{"*"}, Route: "standard"}, {Name: "b", Models: []string{"*"}, Route: "standard", Priority: 1}}
		c.Retry.BreakerMinRequests = 3
		c.Retry.BreakerOpen = 300 * time.Millisecond
	})
	for _, s := range e.sims {
		s.SetOptions(sim.Options{Status: 500})
	}
	e.account("acme", "10")
	key := e.key("acme", "standard")
	body := chatBody("modelb-6-astra", "down")
	// Until both breakers open, calls try the lines and fail with 503.
	for i := 0; i < 4; i++ {
		st, _, data := e.do("POST", "/v1/chat/completions", key, body)
		if st != 503 {
			t.Fatalf("call %d: %d %s", i, st, data)
		}
	}
	before := e.sims["a"].Requests() + e.sims["b"].Requests()
	var health []lines.Health
	_, _, data := e.do("GET", "/admin/lines", testAdminToken, nil)
	var hl struct{ Data []lines.Health }
	if err := json.Unmarshal(data, &hl); err != nil {
		t.Fatal(err)
	}
	health = hl.Data
	for _, h := range health {
		if h.Breaker != "open" || h.Failures == 0 || len(h.RecentFailures) == 0 {
			t.Fatalf("line health %+v", h)
		}
	}
	// Open: 503 fast, and the dead provider sees nothing.
	for i := 0; i < 20; i++ {
		start := time.Now()
		st, _, data := e.do("POST", "/v1/chat/completions", key, body)
		msg, _, _ := errBody(t, data)
		if st != 503 || !strings.Contains(msg, "circuit open") {
			t.Fatalf("open: %d %q", st, msg)
		}
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("503 took %v with every breaker open", d)
		}
	}
	if after := e.sims["a"].Requests() + e.sims["b"].Requests(); after != before {
		t.Fatalf("upstreams saw %d requests while their breakers were open", after-before)
	}
	if !strings.Contains(e.logs.String(), `"line breaker state changed"`) {
		t.Error("breaker changes are not logged")
	}
	if b := e.balance("acme"); b.Balance.String() != "10" || b.Held != 0 {
		t.Fatalf("failed calls were charged: %+v", b)
	}
	// The line comes back: after the open period a half-open probe closes it.
	e.sims["a"].SetOptions(sim.Options{})
	time.Sleep(350 * time.Millisecond) // the breaker's open interval must really pass
	st, _, data := e.do("POST", "/v1/chat/completions", key, body)
	if st != 200 {
		t.Fatalf("after recovery: %d %s", st, data)
	}
	_, _, data = e.do("GET", "/admin/lines", testAdminToken, nil)
	if err := json.Unmarshal(data, &hl); err != nil || hl.Data[0].Breaker != "closed" {
		t.Fatalf("line a after recovery: %s", data)
	}
}

func TestTimeoutsMoveToTheNextLine(t *testing.T) {
	// Not parallel: it bounds the move to the next line at 1 s.
	e := newEnv(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{{Name: "standard"}}
		c.Lines = []config.LineConfig{
			{Name: "slow", Models: []string{"*"}, Route: "standard", Timeouts: config.Timeouts{FirstByte: 100 * time.Millisecond, Idle: 150 * time.Millisecond}},
			{Name: "ok", Models: []string{"*"}, Route: "standard", Priority: 1, Timeouts: config.Timeouts{Idle: 150 * time.Millisecond}},
		}
	})
	e.sims["slow"].SetOptions(sim.Options{Latency: 2 * time.Second})
	e.account("acme", "10")
	key := e.key("acme", "standard")
	start := time.Now()
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelb-6-astra", "slow"))
	if st != 200 || time.Since(start) > time.Second {
		t.Fatalf("first-byte timeout did not move on: %d after %v: %s", st, time.Since(start), data)
	}
	// Idle gap between chunks above the line's idle timeout: the stream is cut.
	e.sims["ok"].SetOptions(sim.Options{ChunkGap: 600 * time.Millisecond})
	e.sims["slow"].SetOptions(sim.Options{Status: 500})
	_, _, data = e.do("POST", "/v1/chat/completions", key, chatBody("modelb-6-astra", "gap", `"stream":true`))
	if strings.Contains(string(data), "[DONE]") {
		t.Fatalf("an idle stream should be cut: %s", data)
	}
	testwait.For(t, 10*time.Second, "the hold released", func() bool { return e.balance("acme").Held == 0 })
}

func TestUpstreamStatuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		opts   sim.Options
		status int
		retry  string
		msg    string
	}{
		{"provider rate limit", sim.Options{Status: 429, RetryAfter: 7}, 429, "7", "rate limiting"},
		// Every 503 says when to retry (docs/api.md#headers).
		{"provider overloaded", sim.Options{Status: 503}, 503, "1", "overloaded"},
		{"provider down", sim.Options{Status: 502}, 503, "1", "no line could serve"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.sims["eco-a"].SetOptions(tc.opts)
			e.account("acme", "10")
			key := e.key("acme", "economy")
			st, h, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "x"))
			msg, _, _ := errBody(t, data)
			if st != tc.status || h.Get("Retry-After") != tc.retry || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%d Retry-After %q %q", st, h.Get("Retry-After"), msg)
			}
			if h.Get("Retry-After-Ms") != tc.retry+"000" || h.Get("X-Should-Retry") != "true" {
				t.Errorf("retry-after-ms %q, x-should-retry %q", h.Get("Retry-After-Ms"), h.Get("X-Should-Retry"))
			}
			if b := e.balance("acme"); b.Balance.String() != "10" || b.Held != 0 {
				t.Fatalf("charged: %+v", b)
			}
		})
	}
}

func TestKeyRateLimit(t *testing.T) {
	// Not parallel: it reads the exact Retry-After of a bucket refilling in real time.
	e := newEnv(t, func(c *config.Config) {
		c.Routes[1].Rate = &config.RateConfig{Rate: 0.5, Burst: 2} // economy: 1 call per 2 s, burst 2
	})
	e.account("acme", "10")
	key := e.key("acme", "economy")
	other := e.key("acme", "standard")
	for i := 0; i < 2; i++ {
		if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "x")); st != 200 {
			t.Fatalf("within burst: %d %s", st, data)
		}
	}
	st, h, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "x"))
	msg, typ, _ := errBody(t, data)
	if st != 429 || h.Get("Retry-After") != "2" || typ != "rate_limit_error" || !strings.Contains(msg, "retry in 2 s") {
		t.Fatalf("429: %d Retry-After %q %q %q", st, h.Get("Retry-After"), typ, msg)
	}
	// Another key has its own bucket.
	if st, _, _ := e.do("POST", "/v1/chat/completions", other, chatBody("modelf-flash", "x")); st != 200 {
		t.Fatalf("other key throttled: %d", st)
	}
	// The official SDK (retries off) surfaces it as a rate-limit error.
	c := sdkClient(e, key)
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "modelf-flash", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" {
		t.Fatalf("SDK error: %v", err)
	}
	if apiErr.Response.Header.Get("Retry-After") == "" {
		t.Error("SDK response lacks Retry-After")
	}
}

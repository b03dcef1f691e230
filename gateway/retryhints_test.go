package gateway

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
)

// TestRetryHintsByStatus: the hints each kind of answer carries.
func TestRetryHintsByStatus(t *testing.T) {
	t.Parallel()
	limited := rateLimited("over", 2)
	limited.RetryWait = 1200 * time.Millisecond
	for _, tc := range []struct {
		name   string
		e      *apierr.Error
		secs   int
		ms     int64
		should string
	}{
		{"429 with a precise wait", limited, 2, 1200, "true"},
		{"429 without a wait", apierr.Errf(429, "rate_limit_error", "x", "x"), 1, 1000, "true"},
		{"503 overloaded refusal", apierr.Refusal("overloaded", 1, "x"), 1, 1000, "true"},
		{"503 shutting down, no wait given", apierr.Refusal("shutting_down", 0, "x"), 1, 1000, "true"},
		{"503 upstream transient", apierr.Unavailable("upstream_overloaded", "x"), 1, 1000, "true"},
		{"503 breaker open 60 s", func() *apierr.Error { e := apierr.Unavailable("no_line_available", "x"); e.RetryAfter = 60; return e }(), 60, 60000, "true"},
		{"503 no line serves the model", apierr.Unserved("x"), 1, 1000, "false"},
		{"402", apierr.Errf(402, "insufficient_quota", "insufficient_credit", "x"), 0, 0, "false"},
		{"403", apierr.Forbidden("x"), 0, 0, "false"},
		{"400: the status says it", apierr.BadRequest("model", "x"), 0, 0, ""},
		{"401: the status says it", apierr.Unauthorized("x"), 0, 0, ""},
		{"wait below 1 ms", func() *apierr.Error { e := rateLimited("x", 1); e.RetryWait = time.Microsecond; return e }(), 1, 1, "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secs, ms, should := tc.e.RetryHints()
			if secs != tc.secs || ms != tc.ms || should != tc.should {
				t.Fatalf("hints (%d, %d, %q), want (%d, %d, %q)", secs, ms, should, tc.secs, tc.ms, tc.should)
			}
		})
	}
}

// checkHints checks an answer's retry headers: a wait (Retry-After whole
// seconds ≥ 1, retry-after-ms no more than it) when wait, and should as
// x-should-retry ("" = absent).
func checkHints(t *testing.T, h http.Header, wait bool, should string) {
	t.Helper()
	ra, ms := h.Get("Retry-After"), h.Get("Retry-After-Ms")
	if !wait {
		if ra != "" || ms != "" {
			t.Errorf("Retry-After %q, retry-after-ms %q on an answer with no wait", ra, ms)
		}
	} else {
		s, err1 := strconv.Atoi(ra)
		m, err2 := strconv.ParseInt(ms, 10, 64)
		if err1 != nil || err2 != nil || s < 1 || m < 1 || m > int64(s)*1000 {
			t.Errorf("Retry-After %q, retry-after-ms %q", ra, ms)
		}
	}
	if got := h.Get("X-Should-Retry"); got != should {
		t.Errorf("x-should-retry %q, want %q", got, should)
	}
}

// TestRetryHintsOnEveryPath: every 429 and 503 path of the gateway carries
// Retry-After, retry-after-ms and x-should-retry, and 402 and 403 say a
// retry cannot help.
func TestRetryHintsOnEveryPath(t *testing.T) {
	// Not parallel: its second call must meet a bucket refilling at 1 call per 2 s.
	e := newEnv(t, func(c *config.Config) {
		c.Limits.KeyRate = config.RateConfig{Rate: 0.5, Burst: 1}
		c.Limits.OverloadDelay = time.Hour
		// std-a alone, serving modelf-flash: no line serves modela-sonnet-5-5
		// (over /v1/messages, or translated for another protocol).
		c.Lines = c.Lines[:1]
		c.Lines[0].Models = []string{"modelf-flash"}
	})
	e.account("acme", "5")
	e.account("broke", "0")
	chat := chatBody("modelf-flash", "hi")

	t.Run("429 key rate limit", func(t *testing.T) {
		key := e.key("acme", "standard")
		if st, _, b := e.do("POST", "/v1/chat/completions", key, chat); st != 200 {
			t.Fatalf("first call %d: %s", st, b)
		}
		st, h, b := e.do("POST", "/v1/chat/completions", key, chat)
		if st != 429 {
			t.Fatalf("second call %d: %s", st, b)
		}
		checkHints(t, h, true, "true")
	})
	t.Run("402", func(t *testing.T) {
		st, h, b := e.do("POST", "/v1/chat/completions", e.key("broke", "standard"), chat)
		if st != 402 {
			t.Fatalf("%d: %s", st, b)
		}
		checkHints(t, h, false, "false")
	})
	t.Run("403", func(t *testing.T) {
		st, h, b := e.do("POST", "/v1/chat/completions", e.key("acme", "standard"), chatBody("no-such-model", "x"))
		if st != 403 {
			t.Fatalf("%d: %s", st, b)
		}
		checkHints(t, h, false, "false")
	})
	t.Run("503 no line serves the model", func(t *testing.T) {
		msg := `{"model":"modela-sonnet-5-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
		st, h, b := e.do("POST", "/v1/messages", e.key("acme", "standard"), msg, "anthropic-version", "2023-06-01")
		if st != 503 {
			t.Fatalf("%d: %s", st, b)
		}
		checkHints(t, h, true, "false")
	})
	t.Run("503 upstream failing", func(t *testing.T) {
		e.sims["std-a"].SetOptions(sim.Options{Status: 500})
		defer e.sims["std-a"].SetOptions(sim.Options{})
		st, h, b := e.do("POST", "/v1/chat/completions", e.key("acme", "standard"), chat)
		if st != 503 {
			t.Fatalf("%d: %s", st, b)
		}
		checkHints(t, h, true, "true")
	})
	t.Run("503 overloaded", func(t *testing.T) {
		e.gw.shed.next.Store(math.MaxInt64)
		e.gw.shed.p.Store(shedScale)
		defer e.gw.shed.p.Store(0)
		st, h, b := e.do("POST", "/v1/chat/completions", e.key("acme", "standard"), chat)
		if st != 503 {
			t.Fatalf("%d: %s", st, b)
		}
		checkHints(t, h, true, "true")
		if h.Get("Retry-After-Ms") != "1000" {
			t.Errorf("retry-after-ms %q", h.Get("Retry-After-Ms"))
		}
	})
}

package lines

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/wire"
)

// The affinity map forgets a conversation after its ttl and stays within
// its bound however many conversations come.
func TestAffinityMapBounds(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{}, "a", "b")
	a := newAffinity(time.Minute)
	t0 := time.Unix(1_800_000_000, 0)
	k := affinityKey(wire.ConversationHash(ptr("c1")), "standard", "modelf-flash")
	if k == affinityKey(wire.ConversationHash(ptr("c1")), "standard", "modelf-v4-pro") || k == affinityKey(wire.ConversationHash(ptr("c1")), "economy", "modelf-flash") {
		t.Fatal("the key does not depend on the route and model")
	}
	a.put(k, e.line("b"), t0)
	if a.get(k, t0.Add(59*time.Second)) != e.line("b") || a.get(k, t0.Add(61*time.Second)) != nil {
		t.Fatal("the line is not remembered for exactly the ttl")
	}
	for i := range affinityMax + affinityMax/2 {
		a.put(uint64(i)*0x9e3779b97f4a7c15+1, e.line("a"), t0)
	}
	if n := a.len(); n > affinityMax || n < affinityMax*9/10 {
		t.Fatalf("%d conversations remembered; the bound is %d", n, affinityMax)
	}
	if newAffinity(-1) != nil {
		t.Fatal("a negative ttl does not turn affinity off")
	}
	// prefer moves the remembered line to the front, unless its breaker is open.
	plan := []*Line{e.line("a"), e.line("b")}
	if got := prefer(plan, e.line("b")); got[0] != e.line("b") || got[1] != e.line("a") || plan[0] != e.line("a") {
		t.Fatal("prefer does not move the line first, or changes the plan")
	}
	e.open("b")
	if got := prefer(plan, e.line("b")); got[0] != e.line("a") {
		t.Fatal("prefer moves an open line first")
	}
}

func ptr[T any](v T) *T { return &v }

// retryWait reads retry-after-ms first, then Retry-After in seconds or as
// an HTTP date; anything else is no wait.
func TestRetryWait(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ms, ra string
		want   time.Duration
		ok     bool
	}{
		{"", "1", time.Second, true},
		{"", " 7 ", 7 * time.Second, true},
		{"1500", "9", 1500 * time.Millisecond, true},
		{"12.5", "", 12500 * time.Microsecond, true},
		{"x", "2", 2 * time.Second, true},
		{"", now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second, true},
		{"", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"", "", 0, false},
		{"", "-1", 0, false},
		{"", "1.5", 0, false},
		{"", "soon", 0, false},
		{"-5", "", 0, false},
		{"", "99999999999999999999", 0, false},
		{"1e300", "", 0, false},
	} {
		h := http.Header{}
		if tc.ms != "" {
			h.Set("retry-after-ms", tc.ms)
		}
		if tc.ra != "" {
			h.Set("Retry-After", tc.ra)
		}
		d, ok := retryWait(h, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("retry-after-ms %q, Retry-After %q: %v %v, want %v %v", tc.ms, tc.ra, d, ok, tc.want, tc.ok)
		}
	}
}

// retryWait never panics, never returns a negative wait nor one above a day.
func FuzzRetryWait(f *testing.F) {
	for _, s := range [][2]string{{"", "1"}, {"250", ""}, {"", "Sun, 06 Nov 1994 08:49:37 GMT"}, {"NaN", "-0"}, {"+Inf", "0x10"}} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, ra string) {
		h := http.Header{"Retry-After-Ms": {ms}, "Retry-After": {ra}}
		d, ok := retryWait(h, now)
		if d < 0 || d > maxRetryWait || (!ok && d != 0) {
			t.Fatalf("%q %q: %v %v", ms, ra, d, ok)
		}
	})
}

// A 429's wait ends when the caller goes.
func TestShort429WaitEndsWithCaller(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{}, "only")
	e.sims["only"].SetOptions(sim.Options{Status: 429, RetryAfter: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	st, err := e.send(ctx)
	if took := time.Since(t0); took > 4*time.Second || st == 200 {
		t.Fatalf("status %d (%v) after %v: the wait outlived the caller", st, err, took)
	}
	if n := e.sims["only"].Requests(); n != 1 {
		t.Fatalf("the line saw %d requests, want 1", n)
	}
}

// A provider's Retry-After passed on to the caller is whole seconds, at
// least 1 and at most a day: a broken or hostile upstream's huge value
// neither overflows retry-after-ms nor tells the SDKs to wait for years.
func TestRetryAfterSecondsClamped(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 1}, {"0", 1}, {"-3", 1}, {"7", 7}, {" 12 ", 12}, {"soon", 1},
		{"86400", 86400}, {"86401", 86400}, {"99999999", 86400}, {"9223372036854775807", 86400},
		{time.Now().Add(1000 * time.Hour).UTC().Format(http.TimeFormat), 86400},
	} {
		got := RetryAfterSeconds(tc.in)
		if got != tc.want {
			t.Errorf("RetryAfterSeconds(%q) = %d, want %d", tc.in, got, tc.want)
		}
		e := &apierr.Error{Status: http.StatusTooManyRequests, RetryAfter: got}
		if secs, ms, _ := e.RetryHints(); ms != int64(secs)*1000 || ms <= 0 {
			t.Errorf("Retry-After %q: hints %d s, %d ms", tc.in, secs, ms)
		}
	}
}

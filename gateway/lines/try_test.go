package lines

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
)

// tryEnv is a Set in front of one sim per line: enough for the try loop,
// the breakers, the budget and panic mode.
type tryEnv struct {
	t    *testing.T
	s    *Set
	reg  *prometheus.Registry
	sims map[string]*sim.Server
	logs *lockedBuffer
}

// testAdminToken satisfies the configuration's check; nothing reads it.
const testAdminToken = "test-admin-token-0123456789"

func newTryEnv(t *testing.T, rc config.RetryConfig, names ...string) *tryEnv {
	t.Helper()
	e := &tryEnv{t: t, sims: map[string]*sim.Server{}, logs: &lockedBuffer{}}
	cfg := config.Config{AdminToken: testAdminToken, Routes: []config.RouteConfig{{Name: "standard"}}, Retry: rc}
	for _, n := range names {
		s := sim.New(sim.Options{})
		hs := httptest.NewServer(s)
		t.Cleanup(hs.Close)
		t.Cleanup(s.Close) // first: releases hanging requests
		e.sims[n] = s
		cfg.Lines = append(cfg.Lines, config.LineConfig{Name: n, BaseURL: hs.URL, Models: []string{"*"}, Route: "standard"})
	}
	if cfg.Retry.BackoffMin == 0 {
		cfg.Retry.BackoffMin, cfg.Retry.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	e.s = New(Options{Config: cfg, Log: slog.New(slog.NewJSONHandler(e.logs, nil))})
	e.reg = prometheus.NewRegistry()
	e.reg.MustRegister(e.s.Collectors()...)
	return e
}

// request is a chat call of modelf-flash on route standard.
func (e *tryEnv) request() *Request {
	return &Request{
		Model: "modelf-flash", Route: "standard", Protocol: config.ProtocolOpenAI, Path: "/v1/chat/completions",
		Header: http.Header{}, Body: []byte(`{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}]}`),
	}
}

// lockedBuffer collects logs from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// counter sums the samples of a counter whose labels include every
// name=value pair given.
func (e *tryEnv) counter(name string, pairs ...string) float64 {
	mfs, _ := e.reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			for _, p := range pairs {
				k, v, _ := strings.Cut(p, "=")
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue samples
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

func (e *tryEnv) line(name string) *Line { return e.s.byName[name] }

// plan is what the lines plugin plans: every line but the open ones.
func (e *tryEnv) plan() []*Line {
	var p []*Line
	for _, l := range e.s.all {
		if l.breaker.State() != gobreaker.StateOpen {
			p = append(p, l)
		}
	}
	return p
}

// send runs one call as the gateway does after the plugin's plan; the
// answer's status (200 or the error's) and the error.
func (e *tryEnv) send(ctx context.Context) (int, *apierr.Error) {
	up, err := e.s.sendPlan(ctx, e.request(), e.plan())
	if err != nil {
		var ge *apierr.Error
		if !errors.As(err, &ge) {
			return 0, &apierr.Error{Message: err.Error()}
		}
		return ge.Status, ge
	}
	defer up.Close()
	return up.Resp.StatusCode, nil
}

// open trips a line's breaker by reporting failures to it.
func (e *tryEnv) open(name string) {
	l := e.line(name)
	for l.breaker.State() != gobreaker.StateOpen {
		done, err := l.breaker.Allow()
		if err != nil {
			e.t.Fatalf("line %s: %v", name, err)
		}
		done(errors.New("down"))
	}
}

func (e *tryEnv) requests() map[string]int64 {
	out := map[string]int64{}
	for n, s := range e.sims {
		out[n] = s.Requests()
	}
	return out
}

// A line whose breaker is open costs no try and is no failed attempt: the
// tries go to the lines that allow them, cycling through the plan.
func TestOpenLineCostsNoTry(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{}, "a", "b", "c")
	e.open("a")
	e.sims["b"].SetOptions(sim.Options{Status: 500})
	all := []*Line{e.line("a"), e.line("b"), e.line("c")}
	up, r := e.s.tryLines(context.Background(), e.request(), all, e.s.retry.Tries(3), false)
	if up == nil {
		t.Fatalf("no answer: %+v", r)
	}
	up.Close()
	if r.tries != 2 || len(r.attempts) != 1 || r.attempts[0].line != "b" {
		t.Fatalf("tries %d, attempts %v; want 2 tries, b the one failure", r.tries, r.attempts)
	}
	// Every allowed line fails: the three tries are b, c, b; a is never
	// tried, nor named.
	e.sims["c"].SetOptions(sim.Options{Status: 500})
	up, r = e.s.tryLines(context.Background(), e.request(), all, e.s.retry.Tries(3), false)
	if up != nil {
		t.Fatal("an answer from failing lines")
	}
	msg := r.failure(e.request()).Error()
	if r.tries != 3 || strings.Contains(msg, "a (") || strings.Contains(msg, "circuit") || !strings.Contains(msg, "b (HTTP 500); c (HTTP 500); b (HTTP 500)") {
		t.Fatalf("tries %d: %s", r.tries, msg)
	}
	if n := e.sims["a"].Requests(); n != 0 {
		t.Fatalf("the open line got %d requests", n)
	}
}

// The default number of tries covers every line of the plan: four lines
// failing before the fifth still answer; max_tries 3 stops at the third.
func TestDefaultTriesCoverThePlan(t *testing.T) {
	for _, tc := range []struct {
		maxTries int
		status   int
		lastSeen int64 // requests reaching line e
	}{{0, 200, 1}, {3, 503, 0}} {
		e := newTryEnv(t, config.RetryConfig{MaxTries: tc.maxTries}, "a", "b", "c", "d", "e")
		for _, n := range []string{"a", "b", "c", "d"} {
			e.sims[n].SetOptions(sim.Options{Status: 500})
		}
		st, err := e.send(context.Background())
		if st != tc.status || e.sims["e"].Requests() != tc.lastSeen {
			t.Fatalf("max_tries %d: status %d (%v), line e saw %d", tc.maxTries, st, err, e.sims["e"].Requests())
		}
	}
}

// The budget allows ratio × first tries + the floor over its window, and
// forgets what left the window.
func TestRetryBudget(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := newRetryBudget(config.RetryConfig{BudgetRatio: 0.5, BudgetMinPerSecond: -1})
	if b.retry(t0) {
		t.Fatal("a retry with no first try and no floor")
	}
	for i := 0; i < 10; i++ {
		b.first(t0.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	for i := 0; i < 5; i++ {
		if !b.retry(t0.Add(2 * time.Second)) {
			t.Fatalf("retry %d of 5 refused", i+1)
		}
	}
	if b.retry(t0.Add(3*time.Second)) || b.refused.Load() != 2 {
		t.Fatalf("a 6th retry for 10 first tries at ratio 0.5 (refused %d)", b.refused.Load())
	}
	// 11 s later the first tries have left the window, and so have the retries.
	if b.retry(t0.Add(13 * time.Second)) {
		t.Fatal("retries allowed by first tries that left the window")
	}
	b.first(t0.Add(13 * time.Second))
	b.first(t0.Add(13 * time.Second))
	if !b.retry(t0.Add(13*time.Second)) || b.retry(t0.Add(13*time.Second)) {
		t.Fatal("2 first tries at 0.5 must allow exactly 1 retry")
	}
	// The floor: 2 per second is 20 per window with no traffic at all.
	f := newRetryBudget(config.RetryConfig{BudgetRatio: 1, BudgetMinPerSecond: 2})
	for i := 0; i < 20; i++ {
		if !f.retry(t0) {
			t.Fatalf("floor retry %d of 20 refused", i+1)
		}
	}
	if f.retry(t0) {
		t.Fatal("a 21st retry past a floor of 20")
	}
}

// Past the budget a call does not retry: it answers with its last failure,
// and the refusal is counted.
func TestRetryBudgetStopsRetries(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{BudgetRatio: 0.01, BudgetMinPerSecond: -1}, "a", "b")
	e.sims["a"].SetOptions(sim.Options{Status: 500})
	st, err := e.send(context.Background())
	if st != 503 || !strings.Contains(err.Message, "tried: a (HTTP 500))") {
		t.Fatalf("status %d %v; want a's failure alone", st, err)
	}
	if e.sims["b"].Requests() != 0 {
		t.Fatal("a retry past the budget")
	}
	if got := e.counter("relay_retry_budget_refused_total"); got != 1 {
		t.Fatalf("relay_retry_budget_refused_total %v, want 1", got)
	}
	// A healthy pool (b) needs no retry: the budget is not in the way.
	e.sims["a"].SetOptions(sim.Options{})
	if st, err := e.send(context.Background()); st != 200 {
		t.Fatalf("healthy: %d %v", st, err)
	}
}

// Every line open: panic_share of the calls go to the lines that succeeded
// within the window, best success ratio first, each at most once; a line
// with no success gets nothing; the rest get 503 at once with Retry-After.
func TestPanicMode(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{BreakerOpen: time.Minute}, "a", "b", "c")
	now := time.Now()
	for name, okFail := range map[string][2]int{"a": {1, 9}, "b": {5, 5}, "c": {0, 10}} {
		e.open(name)
		l := e.line(name)
		for i := 0; i < okFail[0]; i++ {
			l.recordResult(now, nil)
		}
		for i := 0; i < okFail[1]; i++ {
			l.recordResult(now, errors.New("HTTP 500"))
		}
	}
	codes := map[int]int{}
	for i := 0; i < 10; i++ {
		st, err := e.send(context.Background())
		codes[st]++
		if st == 503 && (err.RetryAfter < 59 || err.RetryAfter > 60 || err.Code != "no_line_available" || !strings.Contains(err.Message, "circuit open")) {
			t.Fatalf("refused call: %+v", err)
		}
	}
	if codes[200] != 5 || codes[503] != 5 {
		t.Fatalf("statuses %v, want half sent on (panic_share 0.5)", codes)
	}
	if got := e.requests(); got["b"] != 5 || got["a"] != 0 || got["c"] != 0 {
		t.Fatalf("requests %v: want every panic call on b, the best ratio", got)
	}
	// b fails: a panic call moves on to a, the next best, and never to c.
	e.sims["b"].SetOptions(sim.Options{Status: 500})
	for i := 0; i < 2; i++ {
		if st, err := e.send(context.Background()); st != 200 && st != 503 {
			t.Fatalf("status %d %v", st, err)
		}
	}
	if got := e.requests(); got["b"] != 6 || got["a"] != 1 || got["c"] != 0 {
		t.Fatalf("requests %v: want b then a, never c", got)
	}
	if n := e.counter("relay_panic_calls_total", "route=standard", "model=modelf-flash"); n != 6 {
		t.Errorf("relay_panic_calls_total %v, want 6", n)
	}
	if n := strings.Count(e.logs.String(), "panic mode"); n != 1 {
		t.Errorf("panic logged %d times, want once (rate-limited)", n)
	}
	// The breakers stay open: panic traffic does not go through them.
	for _, n := range []string{"a", "b", "c"} {
		if s := e.line(n).breaker.State(); s != gobreaker.StateOpen {
			t.Errorf("line %s %v", n, s)
		}
	}
}

// A dead pool (no line succeeded within the window), or panic mode off:
// every call gets 503 at once and no line sees a request.
func TestDeadPoolRefusesAtOnce(t *testing.T) {
	off := 0.0
	for _, tc := range []struct {
		name  string
		rc    config.RetryConfig
		alive bool
	}{{"dead", config.RetryConfig{BreakerOpen: time.Minute}, false}, {"panic off", config.RetryConfig{BreakerOpen: time.Minute, PanicShare: &off}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTryEnv(t, tc.rc, "a", "b")
			for _, n := range []string{"a", "b"} {
				e.open(n)
				if tc.alive {
					e.line(n).recordResult(time.Now(), nil)
				}
			}
			for i := 0; i < 10; i++ {
				if st, err := e.send(context.Background()); st != 503 || err.RetryAfter < 59 {
					t.Fatalf("status %d %+v", st, err)
				}
			}
			if got := e.requests(); got["a"]+got["b"] != 0 {
				t.Fatalf("requests %v", got)
			}
		})
	}
}

// A dead line is probed once per open interval: while its half-open probe
// is out, the other calls are refused without a request.
func TestDeadLineProbedOncePerInterval(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{BreakerOpen: 500 * time.Millisecond}, "a")
	e.sims["a"].SetOptions(sim.Options{Status: 500, Latency: 200 * time.Millisecond})
	e.open("a")
	time.Sleep(600 * time.Millisecond) // past the open interval: half-open
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = e.send(context.Background())
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != 503 {
			t.Fatalf("call %d: %d", i, st)
		}
	}
	if n := e.sims["a"].Requests(); n != 1 {
		t.Fatalf("the dead line got %d requests in one open interval, want 1 probe", n)
	}
	if s := e.line("a").breaker.State(); s != gobreaker.StateOpen {
		t.Fatalf("after a failed probe the breaker is %v", s)
	}
}

// A client that goes away mid-try is neither a failure nor a success of
// the line: a half-open probe abandoned leaves the breaker half-open (it
// used to close it), and the next probe decides.
func TestClientGoneIsExcluded(t *testing.T) {
	e := newTryEnv(t, config.RetryConfig{BreakerOpen: 50 * time.Millisecond}, "a")
	e.open("a")
	time.Sleep(80 * time.Millisecond) // past the open interval: half-open
	e.sims["a"].SetOptions(sim.Options{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.send(ctx); err == nil || !strings.Contains(err.Message, "context deadline exceeded") {
		t.Fatalf("abandoned call: %+v", err)
	}
	l := e.line("a")
	if s := l.breaker.State(); s != gobreaker.StateHalfOpen {
		t.Fatalf("after an abandoned probe the breaker is %v, want half-open", s)
	}
	if ok, failed := l.window(time.Now()); ok != 0 || failed != 0 {
		t.Fatalf("the abandoned try was counted: %d ok, %d failed", ok, failed)
	}
	e.sims["a"].SetOptions(sim.Options{})
	if st, err := e.send(context.Background()); st != 200 {
		t.Fatalf("probe: %d %+v", st, err)
	}
	if s := l.breaker.State(); s != gobreaker.StateClosed {
		t.Fatalf("after a good probe the breaker is %v", s)
	}
}

// The breaker opens on a failure ratio over the window once enough tries
// finished, not on a few consecutive failures.
func TestBreakerTripsOnRatio(t *testing.T) {
	trip := tripOnRatio(0.8, 20)
	for _, tc := range []struct {
		ok, failed uint32
		want       bool
	}{
		{0, 19, false}, // too few
		{0, 20, true},
		{4, 16, true},  // exactly 0.8
		{5, 15, false}, // 0.75
		{10, 10, false},
		{100, 400, true},
	} {
		c := gobreaker.Counts{Requests: tc.ok + tc.failed + 7, TotalSuccesses: tc.ok, TotalFailures: tc.failed}
		if got := trip(c); got != tc.want {
			t.Errorf("%d ok %d failed: trip %v, want %v", tc.ok, tc.failed, got, tc.want)
		}
	}
	// Through the breaker: ten consecutive failures after 15 successes do
	// not open it (the old rule, five in a row, did); a line failing every
	// request opens at its 20th failure.
	e := newTryEnv(t, config.RetryConfig{}, "a", "b")
	report := func(l *Line, err error) {
		done, aerr := l.breaker.Allow()
		if aerr != nil {
			t.Fatalf("line %s: %v", l.cfg.Name, aerr)
		}
		done(err)
	}
	a, b := e.line("a"), e.line("b")
	for i := 0; i < 15; i++ {
		report(a, nil)
	}
	for i := 0; i < 10; i++ {
		report(a, errors.New("x"))
	}
	if s := a.breaker.State(); s != gobreaker.StateClosed {
		t.Fatalf("10 failures of 25 opened the breaker: %v", s)
	}
	for i := 1; i <= 20; i++ {
		report(b, errors.New("x"))
		if open := b.breaker.State() == gobreaker.StateOpen; open != (i == 20) {
			t.Fatalf("after %d failures of %d the breaker is open: %v", i, i, open)
		}
	}
}

func TestRolling(t *testing.T) {
	r := newRolling(10*time.Second, 10)
	t0 := time.Unix(1_700_000_000, 0)
	r.add(t0, 1, 0)
	r.add(t0.Add(4500*time.Millisecond), 0, 2)
	if a, b := r.totals(t0.Add(9 * time.Second)); a != 1 || b != 2 {
		t.Fatalf("at 9 s: %d %d", a, b)
	}
	if a, b := r.totals(t0.Add(10 * time.Second)); a != 0 || b != 2 {
		t.Fatalf("at 10 s the first bucket has left: %d %d", a, b)
	}
	if a, b := r.totals(t0.Add(time.Hour)); a != 0 || b != 0 {
		t.Fatalf("an hour later: %d %d", a, b)
	}
}

package lines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Line is one upstream connection with its transport and circuit breaker.
type Line struct {
	cfg     config.LineConfig
	rt      http.RoundTripper
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	openedAt  atomic.Int64 // UnixNano of the breaker's last opening
	coolUntil atomic.Int64 // UnixNano until which a shared 429 cooldown holds (cooldown.go)
	lat       atomic.Int64 // recent time to response headers, ns (latency)

	mu       sync.Mutex
	failures []Failure // most recent last, at most maxRecentFailures
	requests uint64
	failed   uint64
	// win counts finished tries over retry.breaker_window (a: successes,
	// b: failures). The breaker's own counts are cleared when it changes
	// state; these are not, so panic mode can rank open lines by them.
	win rolling
}

// Failure is one of a line's recent failures.
type Failure struct {
	Time  time.Time `json:"time"`
	Error string    `json:"error"`
}

const maxRecentFailures = 10

// newLines builds every configured line, in config order: on rt, or on a
// transport of its own with its timeouts when rt is nil.
func newLines(cfg config.Config, rt http.RoundTripper, log *slog.Logger) []*Line {
	var all []*Line
	for _, lc := range cfg.Lines {
		l := &Line{cfg: lc}
		tr := rt
		if tr == nil {
			tr = &http.Transport{
				Proxy:                 nil,
				DialContext:           (&net.Dialer{Timeout: lc.Timeouts.Connect, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConns:          1024,
				MaxIdleConnsPerHost:   512,
				IdleConnTimeout:       90 * time.Second,
				ResponseHeaderTimeout: lc.Timeouts.FirstByte,
				ExpectContinueTimeout: time.Second,
				ForceAttemptHTTP2:     false,
			}
		}
		l.rt = tr
		rc := cfg.Retry
		name := lc.Name
		l.win = newRolling(rc.BreakerWindow, breakerBuckets)
		l.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:         lc.Name,
			MaxRequests:  1, // one half-open probe per open interval
			Interval:     rc.BreakerWindow,
			BucketPeriod: rc.BreakerWindow / breakerBuckets,
			Timeout:      rc.BreakerOpen,
			ReadyToTrip:  tripOnRatio(rc.BreakerFailureRatio, rc.BreakerMinRequests),
			IsExcluded:   func(err error) bool { return errors.Is(err, errNotTried) || errors.Is(err, errClientGone) },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				lvl := slog.LevelInfo
				if to == gobreaker.StateOpen {
					lvl = slog.LevelWarn
					l.openedAt.Store(time.Now().UnixNano())
				}
				log.Log(context.Background(), lvl, "line breaker state changed", "line", name, "from", from.String(), "to", to.String())
			},
		})
		all = append(all, l)
	}
	return all
}

// breakerBuckets is the number of buckets of a line's rolling window.
const breakerBuckets = 10

// tripOnRatio opens a breaker once at least minRequests tries have finished
// in its window and at least ratio of them failed. Requests counts tries
// still in flight too, so the ratio is over the finished ones.
func tripOnRatio(ratio float64, minRequests uint32) func(gobreaker.Counts) bool {
	return func(c gobreaker.Counts) bool {
		done := c.TotalSuccesses + c.TotalFailures
		return done >= minRequests && float64(c.TotalFailures) >= ratio*float64(done)
	}
}

// Do sends req on the line's transport. An http.Client would add nothing the
// gateway wants (it follows no redirect and keeps no cookies) and would copy
// the request's headers on every call for the redirects it might follow.
// What else a client does, Do does: credentials in base_url become basic
// auth when no Authorization is set, a transport's nil body an empty one,
// and errors read "Post "URL": cause".
func (l *Line) Do(req *http.Request) (*http.Response, error) {
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
	}
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		method := req.Method[:1] + strings.ToLower(req.Method[1:])
		// The query string is the caller's: it stays out of the error,
		// which reaches the log, /admin/lines and the caller's 503.
		u := *req.URL
		u.RawQuery, u.ForceQuery = "", false
		return nil, &url.Error{Op: method, URL: u.Redacted(), Err: err}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	return resp, nil
}

// Latency is the line's recent time to response headers: a weighted mean
// (each new round trip weighs 1/8) of the relayed calls' successful round
// trips (try feeds it the time it measures for the access log); 0 before
// the first. The console's lines page shows it.
func (l *Line) Latency() time.Duration { return time.Duration(l.lat.Load()) }

// Name is the line's configured name.
func (l *Line) Name() string { return l.cfg.Name }

// Protocol is what the line's upstream speaks (config.Protocol*).
func (l *Line) Protocol() string { return l.cfg.Protocol }

// Config is the line's configuration; the caller does not change it.
func (l *Line) Config() *config.LineConfig { return &l.cfg }

// Serves reports whether the line serves model.
func (l *Line) Serves(model string) bool { return l.cfg.Serves(model) }

func (l *Line) observeLatency(d time.Duration) {
	for {
		old := l.lat.Load()
		n := int64(d)
		if old != 0 {
			n = old + (int64(d)-old)/8
		}
		if l.lat.CompareAndSwap(old, n) {
			return
		}
	}
}

// States returns every line as the selection plugin sees it.
func (s *Set) States() []abi.Line {
	out := make([]abi.Line, 0, len(s.all))
	for _, l := range s.all {
		out = append(out, abi.Line{
			Name:     l.cfg.Name,
			Route:    l.cfg.Route,
			Models:   l.cfg.Models,
			Priority: l.cfg.Priority,
			Weight:   l.cfg.Weight,
			Open:     l.breaker.State() == gobreaker.StateOpen,
		})
	}
	return out
}

// recordResult records a finished try: err nil is a success. An excluded
// try (the client went away) is not recorded.
func (l *Line) recordResult(now time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.win.add(now, 1, 0)
		return
	}
	l.win.add(now, 0, 1)
	l.failed++
	if len(l.failures) == maxRecentFailures {
		copy(l.failures, l.failures[1:])
		l.failures = l.failures[:maxRecentFailures-1]
	}
	l.failures = append(l.failures, Failure{Time: now.UTC(), Error: err.Error()})
}

// RecordFailure records a failure found after the try was counted a
// success (an answer cut while it was read): it is in the recent failures
// and the failure count, not in the window.
func (l *Line) RecordFailure(now time.Time, err error) {
	l.mu.Lock()
	l.failed++
	if len(l.failures) == maxRecentFailures {
		copy(l.failures, l.failures[1:])
		l.failures = l.failures[:maxRecentFailures-1]
	}
	l.failures = append(l.failures, Failure{Time: now.UTC(), Error: err.Error()})
	l.mu.Unlock()
}

func (l *Line) recordRequest() {
	l.mu.Lock()
	l.requests++
	l.mu.Unlock()
}

// window returns the successes and failures of the line's rolling window.
func (l *Line) window(now time.Time) (ok, failed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.win.totals(now)
}

// reopens is how long until the line's breaker lets a probe through: 0
// when it is not open.
func (l *Line) reopens(now time.Time, open time.Duration) time.Duration {
	if l.breaker.State() != gobreaker.StateOpen {
		return 0
	}
	return max(time.Unix(0, l.openedAt.Load()).Add(open).Sub(now), 0)
}

// Health is a line's state as the admin API shows it.
type Health struct {
	Name           string    `json:"name"`
	Route          string    `json:"route"`
	Protocol       string    `json:"protocol"`
	BaseURL        string    `json:"base_url"`
	Models         []string  `json:"models"`
	Priority       int64     `json:"priority"`
	Weight         int64     `json:"weight"`
	Breaker        string    `json:"breaker"` // closed, half-open, open
	Requests       uint64    `json:"requests"`
	Failures       uint64    `json:"failures"`
	RecentFailures []Failure `json:"recent_failures"`
	// WindowSuccesses and WindowFailures are the tries finished within
	// retry.breaker_window: what the breaker's ratio and panic mode see.
	WindowSuccesses int64 `json:"window_successes"`
	WindowFailures  int64 `json:"window_failures"`
}

// Health returns every line's state, in config order.
func (s *Set) Health() []Health {
	out := make([]Health, 0, len(s.all))
	now := time.Now()
	for _, l := range s.all {
		l.mu.Lock()
		ok, failed := l.win.totals(now)
		h := Health{
			Name: l.cfg.Name, Route: l.cfg.Route, Protocol: l.cfg.Protocol, BaseURL: l.cfg.BaseURL,
			Models: l.cfg.Models, Priority: l.cfg.Priority, Weight: l.cfg.Weight,
			Breaker: l.breaker.State().String(), Requests: l.requests, Failures: l.failed,
			RecentFailures:  append([]Failure{}, l.failures...),
			WindowSuccesses: ok, WindowFailures: failed,
		}
		l.mu.Unlock()
		out = append(out, h)
	}
	return out
}

// OrderPlan turns a plan into the order of lines to try: tiers in order, and
// within a tier a weighted random order (so a cached plan still spreads load
// by weight). r must return a uniform value in [0, n).
func OrderPlan(plan []abi.Step, r func(n int64) int64) []string {
	steps := append([]abi.Step(nil), plan...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Tier < steps[j].Tier })
	out := make([]string, 0, len(steps))
	for i := 0; i < len(steps); {
		j := i
		for j < len(steps) && steps[j].Tier == steps[i].Tier {
			j++
		}
		tier := steps[i:j]
		for len(tier) > 0 {
			var total int64
			for _, s := range tier {
				total += max(s.Weight, 1)
			}
			pick := r(total)
			k := 0
			for ; k < len(tier)-1; k++ {
				pick -= max(tier[k].Weight, 1)
				if pick < 0 {
					break
				}
			}
			out = append(out, tier[k].Line)
			tier = append(tier[:k:k], tier[k+1:]...)
		}
		i = j
	}
	return out
}

// attemptError describes why one try on a line failed.
type attemptError struct {
	line   string
	status int
	err    error
}

func (a attemptError) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s (%v)", a.line, a.err)
	}
	return fmt.Sprintf("%s (HTTP %d)", a.line, a.status)
}

var (
	// errNotTried ends a breaker's step for a try that was allowed but
	// not sent (the retry budget or max_time said no): excluded from the
	// counts, so a half-open probe slot is given back.
	errNotTried = errors.New("not tried")
	// errClientGone ends a try the client abandoned: not the line's fault,
	// and not a success either (a half-open breaker stays half-open).
	errClientGone = errors.New("the client went away")
)

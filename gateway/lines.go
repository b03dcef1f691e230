package gateway

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
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// line is one upstream connection with its transport and circuit breaker.
type line struct {
	cfg     LineConfig
	rt      http.RoundTripper
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu       sync.Mutex
	failures []lineFailure // most recent last, at most maxRecentFailures
	requests uint64
	failed   uint64
}

type lineFailure struct {
	Time  time.Time `json:"time"`
	Error string    `json:"error"`
}

const maxRecentFailures = 10

// lineSet holds every configured line by name.
type lineSet struct {
	byName map[string]*line
	all    []*line // config order
}

func newLineSet(cfg Config, rt http.RoundTripper, log *slog.Logger) *lineSet {
	s := &lineSet{byName: map[string]*line{}}
	for _, lc := range cfg.Lines {
		l := &line{cfg: lc}
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
		failures := cfg.Retry.BreakerFailures
		name := lc.Name
		l.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        lc.Name,
			MaxRequests: 1,
			Interval:    time.Minute,
			Timeout:     cfg.Retry.BreakerOpen,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				lvl := slog.LevelInfo
				if to == gobreaker.StateOpen {
					lvl = slog.LevelWarn
				}
				log.Log(context.Background(), lvl, "line breaker state changed", "line", name, "from", from.String(), "to", to.String())
			},
		})
		s.byName[lc.Name] = l
		s.all = append(s.all, l)
	}
	return s
}

// do sends req on the line's transport. An http.Client would add nothing the
// gateway wants (it follows no redirect and keeps no cookies) and would copy
// the request's headers on every call for the redirects it might follow.
// What else a client does, do does: credentials in base_url become basic
// auth when no Authorization is set, a transport's nil body an empty one,
// and errors read "Post "URL": cause".
func (l *line) do(req *http.Request) (*http.Response, error) {
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

// states returns every line as the selection plugin sees it.
func (s *lineSet) states() []abi.Line {
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

func (l *line) recordFailure(now time.Time, err error) {
	l.mu.Lock()
	l.failed++
	if len(l.failures) == maxRecentFailures {
		copy(l.failures, l.failures[1:])
		l.failures = l.failures[:maxRecentFailures-1]
	}
	l.failures = append(l.failures, lineFailure{Time: now.UTC(), Error: err.Error()})
	l.mu.Unlock()
}

func (l *line) recordRequest() {
	l.mu.Lock()
	l.requests++
	l.mu.Unlock()
}

// LineHealth is a line's state as the admin API shows it.
type LineHealth struct {
	Name           string        `json:"name"`
	Route          string        `json:"route"`
	Protocol       string        `json:"protocol"`
	BaseURL        string        `json:"base_url"`
	Models         []string      `json:"models"`
	Priority       int64         `json:"priority"`
	Weight         int64         `json:"weight"`
	Breaker        string        `json:"breaker"` // closed, half-open, open
	Requests       uint64        `json:"requests"`
	Failures       uint64        `json:"failures"`
	RecentFailures []lineFailure `json:"recent_failures"`
}

func (s *lineSet) health() []LineHealth {
	out := make([]LineHealth, 0, len(s.all))
	for _, l := range s.all {
		l.mu.Lock()
		h := LineHealth{
			Name: l.cfg.Name, Route: l.cfg.Route, Protocol: l.cfg.Protocol, BaseURL: l.cfg.BaseURL,
			Models: l.cfg.Models, Priority: l.cfg.Priority, Weight: l.cfg.Weight,
			Breaker: l.breaker.State().String(), Requests: l.requests, Failures: l.failed,
			RecentFailures: append([]lineFailure{}, l.failures...),
		}
		l.mu.Unlock()
		out = append(out, h)
	}
	return out
}

// orderPlan turns a plan into the order of lines to try: tiers in order, and
// within a tier a weighted random order (so a cached plan still spreads load
// by weight). r must return a uniform value in [0, n).
func orderPlan(plan []abi.Step, r func(n int64) int64) []string {
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

var errBreakerOpen = errors.New("circuit breaker open")

package lines

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/shared"
)

// Options wires a Set.
type Options struct {
	// Config gives the lines (Lines) and how calls are retried on them
	// (Retry); it is resolved (config.Config.Resolve).
	Config config.Config
	// Transport, when set, carries every line's requests (tests); else each
	// line has a transport of its own, with its timeouts.
	Transport http.RoundTripper
	Log       *slog.Logger
	// Shared is the Redis the replicas share their cooldowns through; nil:
	// a 429 leaves a line for the rest of its call only.
	Shared *shared.Client
	// Now is the clock of retry.max_time and of the time to response
	// headers; nil: time.Now.
	Now func() time.Time
}

// Set is every configured line, with what the calls share across them:
// the retry budget, panic mode, conversation affinity and the cooldowns.
type Set struct {
	retry  config.RetryConfig
	byName map[string]*Line
	all    []*Line // config order

	budget   *retryBudget // retries of every call, over 10 s
	panic    *panicMode   // calls sent on when every line of a pool is open
	affinity *affinity    // conversation → the line that last answered it (nil: none)

	sh  *shared.Client // nil: single replica (cooldown.go)
	log *slog.Logger
	now func() time.Time
	met metrics
}

// New builds the lines of o.Config.
func New(o Options) *Set {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Set{
		retry:    o.Config.Retry,
		byName:   map[string]*Line{},
		all:      newLines(o.Config, o.Transport, o.Log),
		budget:   newRetryBudget(o.Config.Retry),
		panic:    newPanicMode(*o.Config.Retry.PanicShare),
		affinity: newAffinity(o.Config.Retry.AffinityTTL),
		sh:       o.Shared,
		log:      o.Log,
		now:      o.Now,
		met:      newMetrics(),
	}
	for _, l := range s.all {
		s.byName[l.cfg.Name] = l
	}
	return s
}

// ByName is the line named name; nil when none is configured.
func (s *Set) ByName(name string) *Line { return s.byName[name] }

// All is every line, in config order; the caller does not change it.
func (s *Set) All() []*Line { return s.all }

// Request is what a call's tries need of it.
type Request struct {
	Model    string
	Route    string
	Protocol string // the line protocol that serves the call's endpoint
	// Plan names the lines to try, in order: the selection plugin's plan
	// (OrderPlan). The lines of another protocol are left out.
	Plan []string
	// Path is the endpoint's canonical path, sent after a line's base URL
	// with RawQuery, the caller's query.
	Path     string
	RawQuery string
	// Header is the caller's request headers, forwarded but for the
	// hop-by-hop and gateway-owned ones (dropRequestHeaders).
	Header http.Header
	// Version, when set, is sent as Anthropic-Version.
	Version string
	Body    []byte
	// Conversation is the hash of the call's conversation identity
	// (Conversation); 0: none, no affinity.
	Conversation uint64
	// Forms, when set, holds the call as the lines of other protocols get
	// it (translated, or chat's body for an openai-chat line). A line
	// whose protocol is neither Protocol nor a key of Forms is not of the
	// call's pool.
	Forms map[string]*Form
	// Endpoints is the model's catalogue endpoints: a line serving "*"
	// serves it only when its protocol can (config.LineConfig.ServesModel).
	// nil: any.
	Endpoints []string

	// Took is set by Send: the last answered try's time to response
	// headers (0 when no try was answered), for the access log.
	Took time.Duration
}

// Form is the call as the lines of one protocol get it.
type Form struct {
	Path     string
	RawQuery string
	Body     []byte
	Version  string // sent as Anthropic-Version when set
	// Translated: the body is the call translated into the line's
	// protocol. A plan tries the lines that take the call as sent first.
	Translated bool
}

// form is the call as a line of protocol gets it; false when no line of
// that protocol is of its pool.
func (req *Request) form(protocol string) (Form, bool) {
	if protocol == req.Protocol {
		return Form{Path: req.Path, RawQuery: req.RawQuery, Body: req.Body, Version: req.Version}, true
	}
	if f := req.Forms[protocol]; f != nil {
		return *f, true
	}
	return Form{}, false
}

// translatedFor is 1 when a line of protocol gets the call translated.
func (req *Request) translatedFor(protocol string) int {
	if f := req.Forms[protocol]; f != nil && f.Translated && protocol != req.Protocol {
		return 1
	}
	return 0
}

// accepts reports whether a line of protocol can take the call.
func (req *Request) accepts(protocol string) bool {
	if protocol == req.Protocol {
		return true
	}
	_, ok := req.Forms[protocol]
	return ok
}

// Upstream is a response from the line that answered.
type Upstream struct {
	Resp   *http.Response
	Line   *Line
	cancel context.CancelFunc
	idle   *idleTimer
}

// Close ends the upstream request: its idle timer, body and context.
func (u *Upstream) Close() {
	u.idle.stop()
	_ = u.Resp.Body.Close()
	u.cancel()
}

// Send tries req's plan. A line whose breaker refuses is skipped without
// spending a try; connection errors, timeouts, 5xx and 429 move to the
// next line of the plan whose breaker allows it (go-retryablehttp's retry
// policy; its backoff only before trying the same line again); the first
// other answer wins. Tries are bounded by retry.max_tries (default: one per
// line of the plan, at least 3), retry.max_time and the retry budget. When
// every line serving the call is open, panic mode may send it to the
// least-bad lines (sendPanic). Nothing has reached the client yet, so
// retrying is safe. Its errors are *apierr.Error, or the context's when
// the client went away.
func (s *Set) Send(ctx context.Context, req *Request) (*Upstream, error) {
	plan := make([]*Line, 0, len(req.Plan))
	for _, name := range req.Plan {
		if l := s.byName[name]; l != nil && req.accepts(l.cfg.Protocol) && l.cfg.ServesModel(req.Model, req.Endpoints) {
			plan = append(plan, l)
		}
	}
	if len(req.Forms) > 0 {
		// Translation serves a call only where no line that takes it as
		// sent can: those lines go first, each group in the plan's order.
		slices.SortStableFunc(plan, func(a, b *Line) int {
			return cmp.Compare(req.translatedFor(a.cfg.Protocol), req.translatedFor(b.cfg.Protocol))
		})
	}
	return s.sendPlan(ctx, req, plan)
}

// sendPlan tries the call's plan: its lines in order, those open left out.
// A call of a conversation tries the line that last answered that
// conversation first, while it is in the plan and its breaker is not open;
// whichever line answers is remembered for the next.
func (s *Set) sendPlan(ctx context.Context, req *Request, plan []*Line) (*Upstream, error) {
	if len(plan) == 0 && !s.anyLineFor(req) {
		return nil, apierr.Unserved("no line is configured to serve %q on route %q", req.Model, req.Route)
	}
	var ak uint64 // the conversation's affinity key; 0: none
	if s.affinity != nil {
		if conv := req.Conversation; conv != 0 {
			ak = affinityKey(conv, req.Route, req.Model)
			if l := s.affinity.get(ak, time.Now()); l != nil {
				plan = prefer(plan, l)
			}
		}
	}
	up, err := s.sendOrdered(ctx, req, plan)
	if ak != 0 {
		// Only a line that served the call keeps the conversation: one
		// whose answer is an error the caller gets (a 4xx its account
		// gives, say, out of credit upstream) would otherwise hold every
		// later turn while its breaker, which counts such answers as
		// served, stays closed.
		if up != nil && up.Resp.StatusCode >= 200 && up.Resp.StatusCode <= 299 {
			s.affinity.put(ak, up.Line, time.Now())
		} else {
			s.affinity.forget(ak)
		}
	}
	return up, err
}

func (s *Set) sendOrdered(ctx context.Context, req *Request, plan []*Line) (*Upstream, error) {
	var r tryResult
	if len(plan) > 0 {
		var up *Upstream
		up, r = s.tryLines(ctx, req, plan, s.retry.Tries(len(plan)), false)
		if up != nil || r.err != nil {
			return up, r.err
		}
	}
	if r.tries == 0 && r.cooled {
		// Lines cool after a 429: the caller hears it as the 429 it is.
		e := apierr.Errf(http.StatusTooManyRequests, "rate_limit_error", "upstream_rate_limited", "the provider is rate limiting %q; retry later", req.Model)
		wait := time.Until(r.coolUntil)
		e.RetryAfter, e.RetryWait = retryAfterFor(wait), max(wait, time.Millisecond)
		return nil, e
	}
	if r.tries == 0 {
		// Every line of the plan is open (the plugin left them out) or
		// refused by its breaker (a half-open line with its probe out).
		return s.sendPanic(ctx, req)
	}
	return nil, s.failure(req, r)
}

// failure is r's error; when no line serving req is closed after the tries
// (they opened the last breakers, or were the pool's probes, or panic
// traffic), a 503 says when the next try can be made, as the calls after
// it hear.
func (s *Set) failure(req *Request, r tryResult) error {
	err := r.failure(req)
	if e, ok := err.(*apierr.Error); ok && e.Status == http.StatusServiceUnavailable {
		if wait, down := s.reopenAfter(req, time.Now()); down {
			e.RetryAfter = retryAfterFor(wait)
		}
	}
	return err
}

// reopenAfter is how long until a line serving req lets a try through (0
// when one is not open), and whether the pool is down: no such line's
// breaker is closed.
func (s *Set) reopenAfter(req *Request, now time.Time) (wait time.Duration, down bool) {
	wait, down = s.retry.BreakerOpen, true
	for _, l := range s.all {
		if l.serves(req) {
			wait = min(wait, l.reopens(now, s.retry.BreakerOpen))
			down = down && l.breaker.State() != gobreaker.StateClosed
		}
	}
	return wait, down
}

// serves reports whether l is of req's pool: its route, protocol and model.
func (l *Line) serves(req *Request) bool {
	return l.cfg.Route == req.Route && req.accepts(l.cfg.Protocol) && l.cfg.ServesModel(req.Model, req.Endpoints)
}

// retryAfterFor is a Retry-After in whole seconds, at least 1.
func retryAfterFor(wait time.Duration) int { return max(int((wait+time.Second-1)/time.Second), 1) }

// sendPanic handles a call whose every line is open (Envoy's panic mode):
// retry.panic_share of such calls go to the lines that had a success within
// retry.breaker_window, best success ratio first, each tried at most once;
// the rest, and every call when no line had a success (the pool is dead:
// only the breakers' half-open probes reach it), get 503 no_line_available
// at once, with Retry-After until the first breaker lets a probe through.
func (s *Set) sendPanic(ctx context.Context, req *Request) (*Upstream, error) {
	now := time.Now()
	type ranked struct {
		l       *Line
		ok, all int64
	}
	var live []ranked
	for _, l := range s.all {
		if !l.serves(req) {
			continue
		}
		if ok, failed := l.window(now); ok > 0 {
			live = append(live, ranked{l, ok, ok + failed})
		}
	}
	wait, _ := s.reopenAfter(req, now)
	retryAfter := retryAfterFor(wait)
	refuse := func(why string) error {
		e := apierr.Unavailable("no_line_available", "every line serving %q on route %q is unavailable (circuit open after repeated failures%s); retry in %d s", req.Model, req.Route, why, retryAfter)
		e.RetryAfter = retryAfter
		return e
	}
	if len(live) == 0 {
		return nil, refuse("")
	}
	if !s.panic.admit() {
		return nil, refuse("; a share of calls is still sent to the lines that answered recently, and this one was not")
	}
	// Best success ratio first: ok/all > ok'/all' ⇔ ok·all' > ok'·all.
	slices.SortStableFunc(live, func(a, b ranked) int { return cmp.Compare(b.ok*a.all, a.ok*b.all) })
	lines := make([]*Line, len(live))
	names := make([]string, len(live))
	for i, x := range live {
		lines[i], names[i] = x.l, x.l.cfg.Name
	}
	s.met.panicCalls.WithLabelValues(req.Route, req.Model).Inc()
	if s.panic.shouldLog(req.Route+"/"+req.Model, now) {
		s.log.Warn("every line of a pool is open: panic mode sends a share of calls to the least-bad lines",
			"route", req.Route, "model", req.Model, "lines", strings.Join(names, ","), "share", s.panic.share)
	}
	up, r := s.tryLines(ctx, req, lines, min(s.retry.Tries(len(lines)), len(lines)), true)
	if up != nil || r.err != nil {
		return up, r.err
	}
	return nil, s.failure(req, r)
}

func (s *Set) anyLineFor(req *Request) bool {
	for _, l := range s.all {
		if l.serves(req) {
			return true
		}
	}
	return false
}

// Protocols is the protocols of the lines configured to serve model, whose
// catalogue endpoints are endpoints, on route, each once, in config order.
func (s *Set) Protocols(model, route string, endpoints []string) []string {
	var out []string
	for _, l := range s.all {
		if l.cfg.Route == route && l.cfg.ServesModel(model, endpoints) && !slices.Contains(out, l.cfg.Protocol) {
			out = append(out, l.cfg.Protocol)
		}
	}
	return out
}

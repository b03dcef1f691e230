package lines

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
)

// tryResult is how a run of tries ended without an answer.
type tryResult struct {
	err       error // the client went away: return it as is
	tries     int
	attempts  []attemptError
	last429   bool
	lastRetry string    // Retry-After of the last 429
	cooled    bool      // a line was left because it is cooling after a 429 (cooldown.go)
	coolUntil time.Time // the last such line's end of cooldown
}

// tryLines tries lines in order, cycling, up to maxTries. In panic mode
// (bypass) the lines' breakers are open and not asked: the tries are
// counted only in the lines' own windows.
//
// A line that answers 429 is left for the rest of the call; when no line
// is left and one of them said when it will take calls again (Retry-After
// or retry-after-ms) within retry.max_429_wait and what is left of
// retry.max_time, the call waits that long and tries it again (a try, from
// the retry budget) rather than pass the 429 on.
func (s *Set) tryLines(ctx context.Context, req *Request, lines []*Line, maxTries int, bypass bool) (*Upstream, tryResult) {
	t := &lineTries{bypass: bypass, start: s.now()}
	// lines and skip (per line: refused by its breaker, or answered 429)
	// are passed beside t rather than held in it, so that they stay where
	// they are: t's other contents reach the heap, and escape analysis
	// would take them along.
	skip := make([]bool, len(lines))
	for t.r.tries < maxTries {
		if t.r.tries > 0 && s.now().Sub(t.start) >= s.retry.MaxTime {
			break
		}
		at, done := t.nextLine(lines, skip)
		if at < 0 {
			// No line left: wait out the soonest 429 if it is short.
			again, err := s.await429(ctx, t, skip)
			if err != nil {
				t.r.err = err
				return nil, t.r
			}
			if !again {
				break
			}
			continue
		}
		l := lines[at]
		t.next = at + 1
		if err := s.pace(ctx, t, l); err != nil {
			done(err)
			if err == errClientGone {
				t.r.err = ctx.Err()
				return nil, t.r
			}
			break
		}
		if t.r.tries == 0 {
			s.budget.first(time.Now())
		}
		t.prev, t.waited = l, false
		t.r.tries++
		l.recordRequest()
		up, err := s.try(ctx, req, l)
		if ctx.Err() != nil {
			// The client went away: not the line's fault, nor a success.
			done(errClientGone)
			if up != nil {
				up.Close()
			}
			t.r.err = ctx.Err()
			return nil, t.r
		}
		var resp *http.Response
		if up != nil {
			resp = up.Resp
		}
		if retry, _ := retryablehttp.DefaultRetryPolicy(ctx, resp, err); err == nil && !retry {
			done(nil)
			l.recordResult(time.Now(), nil)
			return up, t.r
		}
		s.tryFailed(t, skip, at, l, up, err, done)
	}
	return nil, t.r
}

// lineTries is the state of one call's run of tries across its lines.
type lineTries struct {
	bypass bool      // panic mode: the breakers are not asked
	start  time.Time // of the first try, for retry.max_time
	r      tryResult

	next   int         // where the search for the next line starts
	prev   *Line       // the line of the last try
	ready  []time.Time // per line: when its 429 said to come back (zero: not said); made at the first 429
	waited bool        // the next try follows a 429's wait, its retry already taken from the budget
}

// nextLine is the next line, in plan order from where the last try was,
// whose breaker allows a try, with the function that ends the breaker's
// step; -1 when none is left. A refusal costs no try and is no attempt.
func (t *lineTries) nextLine(lines []*Line, skip []bool) (at int, done func(error)) {
	done = noBreakerStep
	for k := range lines {
		j := (t.next + k) % len(lines)
		if skip[j] {
			continue
		}
		if until, cool := lines[j].Cooling(time.Now()); cool {
			// Another try (here or on another replica) had a 429
			// with a wait: leave the line as if this call had it.
			skip[j] = true
			t.comeBack(j, len(lines), until)
			t.r.cooled, t.r.coolUntil = true, until
			continue
		}
		if !t.bypass {
			d, berr := lines[j].breaker.Allow()
			if berr != nil {
				skip[j] = true
				continue
			}
			done = d
		}
		return j, done
	}
	return -1, done
}

// noBreakerStep is the end of a try's breaker step in panic mode, where
// the breakers are not asked.
func noBreakerStep(error) {}

// comeBack notes that line j of n takes calls again at until.
func (t *lineTries) comeBack(j, n int, until time.Time) {
	if t.ready == nil {
		t.ready = make([]time.Time, n)
	}
	t.ready[j] = until
}

// await429 waits until the line whose 429 said to come back soonest does,
// when that is short enough and the retry budget allows, and makes it the
// next line to try. again is false when there is nothing to wait for; err
// is the context's when the client went away during the wait.
func (s *Set) await429(ctx context.Context, t *lineTries, skip []bool) (again bool, err error) {
	j, ok := s.wait429(t.ready, t.start)
	if !ok || !s.budget.retry(time.Now()) {
		return false, nil
	}
	timer := time.NewTimer(time.Until(t.ready[j]))
	select {
	case <-ctx.Done():
		timer.Stop()
		return false, ctx.Err()
	case <-timer.C:
	}
	s.met.waited429.Inc()
	skip[j], t.ready[j], t.next, t.waited = false, time.Time{}, j, true
	return true, nil
}

// pace lets a retry on line l go ahead: it must fit in the retry budget
// and, on the line just tried, after a backoff that must fit in
// retry.max_time. It returns errNotTried when the retry may not be made
// and errClientGone when the client went away during the backoff.
func (s *Set) pace(ctx context.Context, t *lineTries, l *Line) error {
	if t.r.tries == 0 || t.waited {
		return nil
	}
	if !s.budget.retry(time.Now()) {
		return errNotTried
	}
	if t.prev != l {
		return nil
	}
	rc := s.retry
	wait := retryablehttp.DefaultBackoff(rc.BackoffMin, rc.BackoffMax, t.r.tries, nil)
	if s.now().Sub(t.start)+wait >= rc.MaxTime {
		return errNotTried
	}
	timer := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		timer.Stop()
		return errClientGone
	case <-timer.C:
	}
	return nil
}

// tryFailed records a failed try on line l, at in the plan (up is its
// answer, nil when none came): the attempt, the breaker's step and, for a
// 429, that the line is left for this call and cools for as long as it
// asked.
func (s *Set) tryFailed(t *lineTries, skip []bool, at int, l *Line, up *Upstream, err error, done func(error)) {
	ae := attemptError{line: l.cfg.Name, err: err}
	t.r.last429 = false
	if up != nil {
		resp := up.Resp
		ae.status = resp.StatusCode
		if resp.StatusCode == http.StatusTooManyRequests {
			skip[at] = true
			t.r.last429 = true
			t.r.lastRetry = resp.Header.Get("Retry-After")
			if d, ok := retryWait(resp.Header, time.Now()); ok {
				t.comeBack(at, len(skip), time.Now().Add(d))
				s.cool(l, d)
			}
		}
		up.Close()
	}
	t.r.attempts = append(t.r.attempts, ae)
	failErr := err
	if failErr == nil {
		failErr = fmt.Errorf("HTTP %d", ae.status)
	}
	done(failErr)
	l.recordResult(time.Now(), failErr)
}

// wait429 picks the line whose 429 said to come back soonest, when that
// is within retry.max_429_wait from now and before retry.max_time (counted
// from start) runs out.
func (s *Set) wait429(ready []time.Time, start time.Time) (int, bool) {
	at := -1
	for j, t := range ready {
		if !t.IsZero() && (at < 0 || t.Before(ready[at])) {
			at = j
		}
	}
	if at < 0 {
		return -1, false
	}
	d := time.Until(ready[at])
	rc := s.retry
	if rc.Max429Wait < 0 || d > rc.Max429Wait || s.now().Sub(start)+d >= rc.MaxTime {
		return -1, false
	}
	return at, true
}

// retryWait is how long a 429 asks to wait: retry-after-ms (milliseconds,
// as OpenAI sends it) when present and valid, else Retry-After (seconds,
// or an HTTP date, RFC 9110 section 10.2.3). ok is false when neither says.
func retryWait(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(maxRetryWait/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(maxRetryWait/time.Second) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryWait), true
	}
	return 0, false
}

// maxRetryWait bounds what retryWait returns (no overflow on a huge value).
const maxRetryWait = 24 * time.Hour

// failure is the error of a call whose tries all failed: the last 429 as
// 429, an overloaded provider as 503 upstream_overloaded, else 503
// no_line_available naming every try.
func (r tryResult) failure(req *Request) error {
	if r.last429 {
		e := apierr.Errf(http.StatusTooManyRequests, "rate_limit_error", "upstream_rate_limited", "the provider is rate limiting %q; retry later", req.Model)
		e.RetryAfter = RetryAfterSeconds(r.lastRetry)
		return e
	}
	parts := make([]string, len(r.attempts))
	overloaded := false
	for i, a := range r.attempts {
		parts[i] = a.String()
		if a.status == http.StatusServiceUnavailable || a.status == 529 {
			overloaded = true
		}
	}
	if overloaded {
		return apierr.Unavailable("upstream_overloaded", "the provider is overloaded for %q; retry (tried: %s)", req.Model, strings.Join(parts, "; "))
	}
	return apierr.Unavailable("no_line_available", "no line could serve %q right now (tried: %s); retry", req.Model, strings.Join(parts, "; "))
}

// RetryAfterSeconds converts a provider's Retry-After to whole seconds (≥ 1).
// A wait beyond maxRetryWait (a broken or hostile upstream's "wait three
// years") is passed on as maxRetryWait.
func RetryAfterSeconds(v string) int {
	const most = int(maxRetryWait / time.Second)
	if v == "" {
		return 1
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return min(max(n, 1), most)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(int(time.Until(t).Seconds()+0.999), 1), most)
	}
	return 1
}

// hop-by-hop and gateway-owned request headers: never forwarded upstream.
var dropRequestHeaders = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Cookie": true, "Host": true, "Content-Length": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Accept-Encoding": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true, "Forwarded": true,
	"Vendorx-Version": true, "Openai-Organization": true, "Openai-Project": true,
}

// Forwards reports whether the caller's request header name (in canonical
// form) is forwarded upstream.
func Forwards(name string) bool { return !dropRequestHeaders[name] }

// try sends the call to one line.
func (s *Set) try(ctx context.Context, req *Request, l *Line) (*Upstream, error) {
	f, ok := req.form(l.cfg.Protocol)
	if !ok {
		return nil, fmt.Errorf("line %s (%s) cannot take this call", l.cfg.Name, l.cfg.Protocol)
	}
	rctx, cancel := context.WithCancel(ctx)
	target := l.cfg.BaseURL + f.Path
	if f.RawQuery != "" {
		target += "?" + f.RawQuery
	}
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(f.Body))
	if err != nil {
		cancel()
		// Not err: it quotes the target, and with it the caller's query.
		return nil, fmt.Errorf("cannot address the request to line %s", l.cfg.Name)
	}
	for k, vs := range req.Header {
		if !dropRequestHeaders[k] {
			hr.Header[k] = vs
		}
	}
	if f.Version != "" {
		hr.Header.Set("Anthropic-Version", f.Version)
	}
	if l.cfg.Protocol != req.Protocol {
		// A translated body: the caller's length and encoding do not apply.
		hr.Header.Del("Content-Encoding")
		hr.Header.Set("Content-Type", "application/json")
	}
	if key := l.cfg.UpstreamKey(); key != "" {
		switch l.cfg.Protocol {
		case config.ProtocolAnthropic:
			hr.Header.Set("X-Api-Key", key)
		case config.ProtocolGemini:
			hr.Header.Set("X-Goog-Api-Key", key)
		default:
			hr.Header.Set("Authorization", "Bearer "+key)
		}
	}
	hr.ContentLength = int64(len(f.Body))
	start := s.now()
	resp, err := l.Do(hr)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Took = s.now().Sub(start)
	l.observeLatency(req.Took)
	up := &Upstream{Resp: resp, Line: l, cancel: cancel}
	up.idle = newIdleTimer(l.cfg.Timeouts.Idle, cancel)
	resp.Body = &idleBody{rc: resp.Body, t: up.idle}
	return up, nil
}

// idleTimer cancels the upstream request when no bytes arrive for d.
type idleTimer struct {
	d time.Duration
	t *time.Timer
}

func newIdleTimer(d time.Duration, cancel context.CancelFunc) *idleTimer {
	return &idleTimer{d: d, t: time.AfterFunc(d, cancel)}
}

func (t *idleTimer) reset() { t.t.Reset(t.d) }
func (t *idleTimer) stop()  { t.t.Stop() }

type idleBody struct {
	rc io.ReadCloser
	t  *idleTimer
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.t.reset()
	}
	return n, err
}

func (b *idleBody) Close() error { return b.rc.Close() }

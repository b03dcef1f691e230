package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/julienschmidt/httprouter"
	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/billing"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
)

// endpoint describes one relayed POST endpoint.
type endpoint struct {
	name     string // the endpoint type (pricing.Endpoint*)
	label    string // the access log's and metrics' endpoint label; "" = name
	path     string
	aliases  []string
	protocol string // the line protocol that serves it
	xAPIKey  bool   // x-api-key accepted besides Bearer
	maxBody  int64  // 0 = limits.max_body_bytes
	decode   func(body []byte, contentType string) (*summary, error)
	usage    func(body []byte) (pricing.Usage, bool, error) // JSON responses
	meter    func() pricing.Meter                           // SSE responses
	text     func(data []byte) int                          // delivered text bytes of one SSE event
	// rewrite applies the fields a plugin's quote Set to the forwarded body
	// (nil: the body is forwarded unchanged whatever the plugin sets).
	rewrite func(body []byte, set []abi.Param) ([]byte, error)
	// accept replaces relayJSON for a successful JSON answer (video jobs):
	// a method expression, such as (*Gateway).acceptVideo.
	accept func(g *Gateway, ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error
	// estimate is the usage settled when a JSON answer carries none; nil
	// means the token estimate.
	estimate func(c *call, answer []byte) pricing.Usage
	// uncharged endpoints (count_tokens) are relayed like the others —
	// key, rate limit, model and route checks, the same lines — but hold,
	// charge and journal nothing: see relayUncharged.
	uncharged bool
}

// Label is the endpoint's name in the access log and the metrics.
func (ep *endpoint) Label() string { return cmp.Or(ep.label, ep.name) }

var endpoints = []*endpoint{
	{
		name: pricing.EndpointChat, path: "/v1/chat/completions", protocol: config.ProtocolOpenAI,
		decode: jsonOnly(decodeChat), usage: pricing.ChatUsage, meter: pricing.NewChatMeter, text: chatText,
	},
	{
		name: pricing.EndpointResponses, path: "/v1/responses", protocol: config.ProtocolOpenAI,
		decode: jsonOnly(decodeResponses), usage: pricing.ResponsesUsage, meter: pricing.NewResponsesMeter, text: responsesText,
	},
	{
		name: pricing.EndpointMessages, path: "/v1/messages", protocol: config.ProtocolAnthropic, xAPIKey: true,
		decode: jsonOnly(decodeMessages), usage: pricing.MessagesUsage, meter: pricing.NewMessagesMeter, text: messagesText,
	},
	{
		// Token counting: the messages models and lines, never charged.
		name: pricing.EndpointMessages, label: "messages_count_tokens", path: "/v1/messages/count_tokens",
		protocol: config.ProtocolAnthropic, xAPIKey: true, decode: jsonOnly(decodeCountTokens), uncharged: true,
	},
	{
		// Compaction is a responses call on another path: the responses
		// models, their prices and plugin, billed from the usage it returns.
		name: pricing.EndpointResponses, label: "responses_compact", path: "/v1/responses/compact", protocol: config.ProtocolOpenAI,
		decode: jsonOnly(decodeCompact), usage: pricing.ResponsesUsage, meter: pricing.NewResponsesMeter, text: responsesText,
	},
	{
		name: pricing.EndpointImages, path: "/v1/images/generations", protocol: config.ProtocolOpenAI,
		decode: jsonOnly(decodeImages), usage: imagesUsage, meter: newImagesMeter,
		rewrite: rewriteJSONFields, estimate: noUsage,
	},
	{
		name: pricing.EndpointImageEdit, path: "/v1/images/edits", protocol: config.ProtocolOpenAI, maxBody: maxEditBody,
		decode: decodeImageEdit, usage: imagesUsage, meter: newImagesMeter, estimate: noUsage,
	},
	{
		name: pricing.EndpointVideo, path: "/v1/videos/generations", protocol: config.ProtocolOpenAI,
		decode: jsonOnly(decodeVideo), accept: (*Gateway).acceptVideo,
	},
	{
		name: pricing.EndpointSystemOne, path: "/v1/systemone", aliases: []string{"/v1/system_one"},
		protocol: config.ProtocolOpenAI, maxBody: maxSystemOneBody,
		decode: jsonOnly(decodeSystemOne), usage: pricing.SystemOneUsage,
	},
}

// call is one relayed request in flight.
type call struct {
	ep       *endpoint
	r        *http.Request
	info     *reqInfo
	key      store.Key
	sum      *summary
	body     []byte // what is forwarded
	model    pricing.Model
	route    string
	params   []abi.Param // as admitted, after the plugin's Set
	set      []abi.Param // what the plugin's quote set
	hold     pricing.Nano
	admitted time.Time // the gateway's clock at the quote: the hold's time
	// ticket is the call's hold (package billing), from holdAndSend on;
	// nil before.
	ticket *billing.Ticket

	// callerBytes is the length of the body the caller sent, before the
	// gateway's changes to it (a plugin's Set, include_usage): the hold's
	// estimate and those of a call settled without usage count it.
	callerBytes int
}

// relayHandler serves a relayed endpoint: it reads and admits the call,
// holds its cost, sends it upstream and relays the answer; the hold is
// settled or released on the way out.
func (g *Gateway) relayHandler(ep *endpoint) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
		if g.closing.Load() {
			return apierr.EarlyRefusal("shutting_down", 0, "the gateway is shutting down; retry")
		}
		if g.shed.refuse(time.Now()) { // the real clock: it measures the real scheduler
			return apierr.EarlyRefusal("overloaded", shedRetryAfter, "the gateway is overloaded; retry after %d second", shedRetryAfter)
		}
		if !ep.uncharged {
			if err := g.bill.Admit(); err != nil {
				return err
			}
		}
		g.inflight.Add(1)
		defer g.inflight.Done()
		ctx := r.Context()

		c, err := g.readCall(ctx, w, r, ep, info)
		if err != nil {
			return err
		}
		if ep.uncharged {
			return g.relayUncharged(ctx, w, c)
		}
		if err := g.quote(ctx, c); err != nil {
			return err
		}
		// Armed before the hold, so that it covers a panic on the way
		// upstream too; it acts once the hold is taken.
		defer func() { c.ticket.Finish(ctx) }()
		if err := prepareBody(c); err != nil {
			return err
		}
		up, err := g.holdAndSend(ctx, c)
		if err != nil {
			return err
		}
		defer up.close()
		if isEventStream(up.resp) {
			return g.relayStream(ctx, w, c, up)
		}
		if ep.accept != nil {
			return ep.accept(g, ctx, w, c, up)
		}
		return g.relayJSON(ctx, w, c, up)
	}
}

// readCall authenticates the caller, applies its key's rate limit, reads
// and decodes the body, and admits the model (admitModel): the call as far
// as it can be known before anything is held.
func (g *Gateway) readCall(ctx context.Context, w http.ResponseWriter, r *http.Request, ep *endpoint, info *reqInfo) (*call, error) {
	key, err := g.authenticate(ctx, r, ep.xAPIKey, info)
	if err != nil {
		return nil, err
	}
	if err := g.limits.allowKey(ctx, key, g.now()); err != nil {
		return nil, err
	}
	limit := ep.maxBody
	if limit == 0 {
		limit = g.cfg.Limits.MaxBodyBytes
	}
	body, err := readBody(r, limit)
	if err != nil {
		return nil, err
	}
	bodyRead(w)
	sum, err := ep.decode(body, r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	info.stream = sum.stream
	c := &call{ep: ep, r: r, info: info, key: key, sum: sum, body: body, callerBytes: len(body)}
	if err := g.admitModel(c); err != nil {
		return nil, err
	}
	// Only now, a catalogue id: the access log and the metrics' labels
	// never carry a model id the caller made up.
	info.model = c.model.ID
	if ep.name == pricing.EndpointMessages && versionHeader(r) == "" {
		return nil, apierr.BadRequest("anthropic-version", "the vendorx-version header (anthropic-version) is required on %s, e.g. \"anthropic-version: 2023-06-01\"", ep.path)
	}
	return c, nil
}

// prepareBody makes the body sent upstream: the caller's, with the fields
// the model's plugin set, and, on a streamed chat call that did not ask
// for usage, stream_options.include_usage (the chunk is removed again
// before it reaches the caller).
func prepareBody(c *call) error {
	if c.ep.rewrite != nil && len(c.set) > 0 {
		nb, err := c.ep.rewrite(c.body, c.set)
		if err != nil {
			return apierr.BadRequest("body", "cannot apply %s to the body: %s", apierr.Bound(fmt.Sprint(c.set), apierr.MaxMessage), apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		c.body = nb
	}
	if c.ep.name == pricing.EndpointChat && c.sum.stream && !c.sum.includeUsage {
		nb, err := forceIncludeUsage(c.body)
		if err != nil {
			return apierr.BadRequest("body", "cannot read the body: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		c.body = nb
	}
	return nil
}

// readBody reads the request body fully, up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierr.BadRequest("body", "the request body is %d bytes; the limit is %d bytes", r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// ReadFrom wants MinRead bytes free before each read, the one that
		// finds the end included: without them a body of exactly
		// ContentLength bytes is copied into a buffer twice its size.
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		got := strconv.FormatInt(n, 10)
		if r.ContentLength > 0 {
			got += " of " + strconv.FormatInt(r.ContentLength, 10)
		}
		return nil, apierr.Errf(http.StatusRequestTimeout, "invalid_request_error", "body_timeout",
			"the request body did not arrive in time (%s bytes arrived); send it faster, or a smaller one", got)
	}
	if err != nil {
		return nil, apierr.BadRequest("body", "cannot read the request body: %v", err)
	}
	if n > limit {
		return nil, apierr.BadRequest("body", "the request body is larger than the limit of %d bytes", limit)
	}
	return buf.Bytes(), nil
}

func versionHeader(r *http.Request) string {
	if v := r.Header.Get("Anthropic-Version"); v != "" {
		return v
	}
	return r.Header.Get("Vendorx-Version")
}

// admitModel applies the model rules (docs/api.md#authentication): the model must be sold here, served by the
// endpoint, on the key's route and not excluded by the key → 403.
func (g *Gateway) admitModel(c *call) error {
	cat := g.host.Catalog()
	m, ok := cat.Model(c.sum.model)
	if !ok {
		return apierr.Forbidden("the model %s is not sold here; GET /v1/models lists the models your key can call", apierr.Quote(c.sum.model))
	}
	if !contains(m.Endpoints, c.ep.name) {
		served := []string{}
		for _, mm := range cat.Models() {
			if contains(mm.Endpoints, c.ep.name) {
				served = append(served, mm.ID)
			}
		}
		return apierr.Forbidden("the model %q is not served by %s, which serves: %s", m.ID, c.ep.path, strings.Join(served, ", "))
	}
	for _, x := range c.key.Exclude {
		if x == m.ID {
			return apierr.Forbidden("the model %q is excluded by this key's model limits", m.ID)
		}
	}
	route := c.key.Route
	if route == store.AutoRoute {
		route = m.EffectiveAutoRoute()
	} else if _, ok := m.Routes[route]; !ok {
		return apierr.Forbidden("the model %q is not on this key's route %q", m.ID, route)
	}
	c.model, c.route = m, route
	c.info.route = route
	return nil
}

// quote validates and quotes the call with the model's plugin: c.hold is
// what the call may cost, to be held (hold).
func (g *Gateway) quote(ctx context.Context, c *call) error {
	now := g.now()
	c.admitted = now
	t0 := time.Now()
	res, err := g.host.Admit(ctx, abi.AdmitRequest{
		Now:                 now.UnixNano(),
		Endpoint:            c.ep.name,
		Model:               c.model.ID,
		Route:               c.route,
		InputTokens:         holdInputTokens(c.callerBytes),
		MaxOutputTokens:     c.sum.maxOutput,
		DefaultOutputTokens: g.cfg.Billing.DefaultOutputTokens,
		Stream:              c.sum.stream,
		Params:              c.sum.params,
	})
	g.observePlugin(c.model.ID, "admit", t0)
	if err != nil {
		return err
	}
	if res.Hold < 0 {
		return apierr.Internal("plugin_error", "plugin %s quoted a negative hold", g.host.Catalog().PluginFor(c.model.ID))
	}
	c.params = c.sum.params
	if len(res.Set) > 0 {
		c.params = mergeParams(c.params, res.Set)
		c.set = res.Set
	}
	c.hold = pricing.Nano(res.Hold)
	return nil
}

// holdAndSend holds c's quote (package billing), then sends c's prepared
// body upstream (sendOK); c.ticket is the hold, taken or not, whatever it
// returns. Where the hold goes beside the upstream request (the ticket is
// pending), the upstream request goes at once and the hold is waited for
// before anything reaches the client; a refused hold is the call's answer,
// as if it had been made first: the upstream request, if it was sent, is
// cancelled and its answer dropped.
func (g *Gateway) holdAndSend(ctx context.Context, c *call) (*upstream, error) {
	t, err := g.bill.Hold(ctx, billing.Call{
		RequestID: c.info.rid, Key: c.key, Model: c.model, Route: c.route, Endpoint: c.ep.name,
		Params: c.params, Amount: c.hold, Admitted: c.admitted, ChargedFirst: c.ep.accept != nil,
	})
	c.ticket = t
	if err != nil {
		return nil, err
	}
	if !t.Pending() {
		return g.sendOK(ctx, c)
	}
	waited := false
	defer func() {
		if !waited { // a panic on the way upstream: the hold's outcome is still the call's
			_ = t.Wait()
		}
	}()
	up, err := g.sendOK(t.SendContext(), c)
	waited = true
	if herr := t.Wait(); herr != nil {
		if up != nil {
			up.close()
		}
		return nil, herr
	}
	return up, err
}

// observePlugin records a plugin call's duration under the model's plugin.
func (g *Gateway) observePlugin(model, op string, t0 time.Time) {
	name := g.host.Catalog().PluginFor(model)
	if name == "" {
		name = "unknown"
	}
	g.met.pluginDur.WithLabelValues(name, op).Observe(time.Since(t0).Seconds())
}

// holdInputTokens is the input estimate a hold is sized with: one token per
// three body bytes, rounded up. Tokenizers average three to four bytes per
// token on text and JSON, so this rarely under-holds; a call that does use
// more is still charged in full (see store: the overrun bound).
func holdInputTokens(bodyBytes int) int64 { return int64((bodyBytes + 2) / 3) }

// settleInputTokens is the documented estimate of the input tokens of a call
// whose usage never arrived: one token per four bytes of the body the caller
// sent (call.callerBytes), rounded up.
func settleInputTokens(bodyBytes int) int64 { return pricing.EstimateTokens(bodyBytes) }

func mergeParams(ps, set []abi.Param) []abi.Param {
	out := make([]abi.Param, 0, len(ps)+len(set))
	for _, p := range ps {
		overridden := false
		for _, s := range set {
			if s.Name == p.Name {
				overridden = true
				break
			}
		}
		if !overridden {
			out = append(out, p)
		}
	}
	return append(out, set...)
}

// upstream is a response from the line that answered.
type upstream struct {
	resp   *http.Response
	line   *line
	cancel context.CancelFunc
	idle   *idleTimer
	start  time.Time
}

func (u *upstream) close() {
	u.idle.stop()
	_ = u.resp.Body.Close()
	u.cancel()
}

// send tries the line plan. A line whose breaker refuses is skipped
// without spending a try; connection errors, timeouts, 5xx and 429 move to
// the next line of the plan whose breaker allows it (go-retryablehttp's
// retry policy; its backoff only before trying the same line again); the
// first other answer wins. Tries are bounded by retry.max_tries (default:
// one per line of the plan, at least 3), retry.max_time and the gateway's
// retry budget. When every line serving the call is open, panic mode may
// send it to the least-bad lines (sendPanic). Nothing has reached the
// client yet, so retrying is safe.
func (g *Gateway) send(ctx context.Context, c *call) (*upstream, error) {
	t0 := time.Now()
	sel, err := g.host.Select(ctx, abi.SelectRequest{Now: g.now().UnixNano(), Model: c.model.ID, Route: c.route, Lines: g.lines.states()})
	g.met.pluginDur.WithLabelValues("select", "select").Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, err
	}
	plan := make([]*line, 0, len(sel.Plan))
	for _, name := range orderPlan(sel.Plan, rand.Int64N) {
		if l := g.lines.byName[name]; l != nil && l.cfg.Protocol == c.ep.protocol {
			plan = append(plan, l)
		}
	}
	return g.sendPlan(ctx, c, plan)
}

// sendPlan tries the call's plan: its lines in order, those open left out.
// A call of a conversation (see conversation) tries the line that last
// answered that conversation first, while it is in the plan and its
// breaker is not open; whichever line answers is remembered for the next.
func (g *Gateway) sendPlan(ctx context.Context, c *call, plan []*line) (*upstream, error) {
	if len(plan) == 0 && !g.anyLineFor(c) {
		return nil, apierr.Unserved("no line is configured to serve %q on route %q", c.model.ID, c.route)
	}
	var ak uint64 // the conversation's affinity key; 0: none
	if g.affinity != nil {
		if conv := conversation(c); conv != 0 {
			ak = affinityKey(conv, c.route, c.model.ID)
			if l := g.affinity.get(ak, time.Now()); l != nil {
				plan = prefer(plan, l)
			}
		}
	}
	up, err := g.sendOrdered(ctx, c, plan)
	if ak != 0 {
		// Only a line that served the call keeps the conversation: one
		// whose answer is an error the caller gets (a 4xx its account
		// gives, say, out of credit upstream) would otherwise hold every
		// later turn while its breaker, which counts such answers as
		// served, stays closed.
		if up != nil && up.resp.StatusCode >= 200 && up.resp.StatusCode <= 299 {
			g.affinity.put(ak, up.line, time.Now())
		} else {
			g.affinity.forget(ak)
		}
	}
	return up, err
}

func (g *Gateway) sendOrdered(ctx context.Context, c *call, plan []*line) (*upstream, error) {
	var r tryResult
	if len(plan) > 0 {
		var up *upstream
		up, r = g.tryLines(ctx, c, plan, g.cfg.Retry.Tries(len(plan)), false)
		if up != nil || r.err != nil {
			return up, r.err
		}
	}
	if r.tries == 0 && r.cooled {
		// Lines cool after a 429: the caller hears it as the 429 it is.
		e := apierr.Errf(http.StatusTooManyRequests, "rate_limit_error", "upstream_rate_limited", "the provider is rate limiting %q; retry later", c.model.ID)
		wait := time.Until(r.coolUntil)
		e.RetryAfter, e.RetryWait = retryAfterFor(wait), max(wait, time.Millisecond)
		return nil, e
	}
	if r.tries == 0 {
		// Every line of the plan is open (the plugin left them out) or
		// refused by its breaker (a half-open line with its probe out).
		return g.sendPanic(ctx, c)
	}
	return nil, g.failure(c, r)
}

// failure is r's error; when no line serving c is closed after the tries
// (they opened the last breakers, or were the pool's probes, or panic
// traffic), a 503 says when the next try can be made, as the calls after
// it hear.
func (g *Gateway) failure(c *call, r tryResult) error {
	err := r.failure(c)
	if e, ok := err.(*apierr.Error); ok && e.Status == http.StatusServiceUnavailable {
		if wait, down := g.reopenAfter(c, time.Now()); down {
			e.RetryAfter = retryAfterFor(wait)
		}
	}
	return err
}

// reopenAfter is how long until a line serving c lets a try through (0
// when one is not open), and whether the pool is down: no such line's
// breaker is closed.
func (g *Gateway) reopenAfter(c *call, now time.Time) (wait time.Duration, down bool) {
	wait, down = g.cfg.Retry.BreakerOpen, true
	for _, l := range g.lines.all {
		if l.cfg.Route == c.route && l.cfg.Protocol == c.ep.protocol && l.Serves(c.model.ID) {
			wait = min(wait, l.reopens(now, g.cfg.Retry.BreakerOpen))
			down = down && l.breaker.State() != gobreaker.StateClosed
		}
	}
	return wait, down
}

// retryAfterFor is a Retry-After in whole seconds, at least 1.
func retryAfterFor(wait time.Duration) int { return max(int((wait+time.Second-1)/time.Second), 1) }

// tryResult is how a run of tries ended without an answer.
type tryResult struct {
	err       error // the client went away: return it as is
	tries     int
	attempts  []attemptError
	last429   bool
	lastRetry string    // Retry-After of the last 429
	cooled    bool      // a line was left because it is cooling after a 429 (replicas.go)
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
func (g *Gateway) tryLines(ctx context.Context, c *call, lines []*line, maxTries int, bypass bool) (*upstream, tryResult) {
	t := &lineTries{bypass: bypass, start: g.now()}
	// lines and skip (per line: refused by its breaker, or answered 429)
	// are passed beside t rather than held in it, so that they stay where
	// they are: t's other contents reach the heap, and escape analysis
	// would take them along.
	skip := make([]bool, len(lines))
	for t.r.tries < maxTries {
		if t.r.tries > 0 && g.now().Sub(t.start) >= g.cfg.Retry.MaxTime {
			break
		}
		at, done := t.nextLine(lines, skip)
		if at < 0 {
			// No line left: wait out the soonest 429 if it is short.
			again, err := g.await429(ctx, t, skip)
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
		if err := g.pace(ctx, t, l); err != nil {
			done(err)
			if err == errClientGone {
				t.r.err = ctx.Err()
				return nil, t.r
			}
			break
		}
		if t.r.tries == 0 {
			g.budget.first(time.Now())
		}
		t.prev, t.waited = l, false
		t.r.tries++
		l.recordRequest()
		up, err := g.try(ctx, c, l)
		if ctx.Err() != nil {
			// The client went away: not the line's fault, nor a success.
			done(errClientGone)
			if up != nil {
				up.close()
			}
			t.r.err = ctx.Err()
			return nil, t.r
		}
		var resp *http.Response
		if up != nil {
			resp = up.resp
		}
		if retry, _ := retryablehttp.DefaultRetryPolicy(ctx, resp, err); err == nil && !retry {
			done(nil)
			l.recordResult(time.Now(), nil)
			c.info.line = l.cfg.Name
			return up, t.r
		}
		g.tryFailed(t, skip, at, l, up, err, done)
	}
	return nil, t.r
}

// lineTries is the state of one call's run of tries across its lines.
type lineTries struct {
	bypass bool      // panic mode: the breakers are not asked
	start  time.Time // of the first try, for retry.max_time
	r      tryResult

	next   int         // where the search for the next line starts
	prev   *line       // the line of the last try
	ready  []time.Time // per line: when its 429 said to come back (zero: not said); made at the first 429
	waited bool        // the next try follows a 429's wait, its retry already taken from the budget
}

// nextLine is the next line, in plan order from where the last try was,
// whose breaker allows a try, with the function that ends the breaker's
// step; -1 when none is left. A refusal costs no try and is no attempt.
func (t *lineTries) nextLine(lines []*line, skip []bool) (at int, done func(error)) {
	done = noBreakerStep
	for k := range lines {
		j := (t.next + k) % len(lines)
		if skip[j] {
			continue
		}
		if until, cool := lines[j].cooling(time.Now()); cool {
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
func (g *Gateway) await429(ctx context.Context, t *lineTries, skip []bool) (again bool, err error) {
	j, ok := g.wait429(t.ready, t.start)
	if !ok || !g.budget.retry(time.Now()) {
		return false, nil
	}
	timer := time.NewTimer(time.Until(t.ready[j]))
	select {
	case <-ctx.Done():
		timer.Stop()
		return false, ctx.Err()
	case <-timer.C:
	}
	g.met.waited429.Inc()
	skip[j], t.ready[j], t.next, t.waited = false, time.Time{}, j, true
	return true, nil
}

// pace lets a retry on line l go ahead: it must fit in the retry budget
// and, on the line just tried, after a backoff that must fit in
// retry.max_time. It returns errNotTried when the retry may not be made
// and errClientGone when the client went away during the backoff.
func (g *Gateway) pace(ctx context.Context, t *lineTries, l *line) error {
	if t.r.tries == 0 || t.waited {
		return nil
	}
	if !g.budget.retry(time.Now()) {
		return errNotTried
	}
	if t.prev != l {
		return nil
	}
	rc := g.cfg.Retry
	wait := retryablehttp.DefaultBackoff(rc.BackoffMin, rc.BackoffMax, t.r.tries, nil)
	if g.now().Sub(t.start)+wait >= rc.MaxTime {
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
func (g *Gateway) tryFailed(t *lineTries, skip []bool, at int, l *line, up *upstream, err error, done func(error)) {
	ae := attemptError{line: l.cfg.Name, err: err}
	t.r.last429 = false
	if up != nil {
		resp := up.resp
		ae.status = resp.StatusCode
		if resp.StatusCode == http.StatusTooManyRequests {
			skip[at] = true
			t.r.last429 = true
			t.r.lastRetry = resp.Header.Get("Retry-After")
			if d, ok := retryWait(resp.Header, time.Now()); ok {
				t.comeBack(at, len(skip), time.Now().Add(d))
				g.cool(l, d)
			}
		}
		up.close()
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
func (g *Gateway) wait429(ready []time.Time, start time.Time) (int, bool) {
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
	rc := g.cfg.Retry
	if rc.Max429Wait < 0 || d > rc.Max429Wait || g.now().Sub(start)+d >= rc.MaxTime {
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
func (r tryResult) failure(c *call) error {
	if r.last429 {
		e := apierr.Errf(http.StatusTooManyRequests, "rate_limit_error", "upstream_rate_limited", "the provider is rate limiting %q; retry later", c.model.ID)
		e.RetryAfter = retryAfterSeconds(r.lastRetry)
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
		return apierr.Unavailable("upstream_overloaded", "the provider is overloaded for %q; retry (tried: %s)", c.model.ID, strings.Join(parts, "; "))
	}
	return apierr.Unavailable("no_line_available", "no line could serve %q right now (tried: %s); retry", c.model.ID, strings.Join(parts, "; "))
}

// sendPanic handles a call whose every line is open (Envoy's panic mode):
// retry.panic_share of such calls go to the lines that had a success within
// retry.breaker_window, best success ratio first, each tried at most once;
// the rest, and every call when no line had a success (the pool is dead:
// only the breakers' half-open probes reach it), get 503 no_line_available
// at once, with Retry-After until the first breaker lets a probe through.
func (g *Gateway) sendPanic(ctx context.Context, c *call) (*upstream, error) {
	now := time.Now()
	type ranked struct {
		l       *line
		ok, all int64
	}
	var live []ranked
	for _, l := range g.lines.all {
		if l.cfg.Route != c.route || l.cfg.Protocol != c.ep.protocol || !l.Serves(c.model.ID) {
			continue
		}
		if ok, failed := l.window(now); ok > 0 {
			live = append(live, ranked{l, ok, ok + failed})
		}
	}
	wait, _ := g.reopenAfter(c, now)
	retryAfter := retryAfterFor(wait)
	refuse := func(why string) error {
		e := apierr.Unavailable("no_line_available", "every line serving %q on route %q is unavailable (circuit open after repeated failures%s); retry in %d s", c.model.ID, c.route, why, retryAfter)
		e.RetryAfter = retryAfter
		return e
	}
	if len(live) == 0 {
		return nil, refuse("")
	}
	if !g.panic.admit() {
		return nil, refuse("; a share of calls is still sent to the lines that answered recently, and this one was not")
	}
	// Best success ratio first: ok/all > ok'/all' ⇔ ok·all' > ok'·all.
	slices.SortStableFunc(live, func(a, b ranked) int { return cmp.Compare(b.ok*a.all, a.ok*b.all) })
	lines := make([]*line, len(live))
	names := make([]string, len(live))
	for i, x := range live {
		lines[i], names[i] = x.l, x.l.cfg.Name
	}
	g.met.panicCalls.WithLabelValues(c.route, c.model.ID).Inc()
	if g.panic.shouldLog(c.route+"/"+c.model.ID, now) {
		g.log.Warn("every line of a pool is open: panic mode sends a share of calls to the least-bad lines",
			"route", c.route, "model", c.model.ID, "lines", strings.Join(names, ","), "share", g.panic.share)
	}
	up, r := g.tryLines(ctx, c, lines, min(g.cfg.Retry.Tries(len(lines)), len(lines)), true)
	if up != nil || r.err != nil {
		return up, r.err
	}
	return nil, g.failure(c, r)
}

func (g *Gateway) anyLineFor(c *call) bool {
	for _, l := range g.lines.all {
		if l.cfg.Route == c.route && l.cfg.Protocol == c.ep.protocol && l.Serves(c.model.ID) {
			return true
		}
	}
	return false
}

func (l *line) Serves(model string) bool { return l.cfg.Serves(model) }

// retryAfterSeconds converts a provider's Retry-After to whole seconds (≥ 1).
// A wait beyond maxRetryWait (a broken or hostile upstream's "wait three
// years") is passed on as maxRetryWait.
func retryAfterSeconds(v string) int {
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

// try sends the call to one line.
func (g *Gateway) try(ctx context.Context, c *call, l *line) (*upstream, error) {
	rctx, cancel := context.WithCancel(ctx)
	target := l.cfg.BaseURL + c.r.URL.Path
	if c.ep.path != c.r.URL.Path { // an alias: send the canonical path
		target = l.cfg.BaseURL + c.ep.path
	}
	if c.r.URL.RawQuery != "" {
		target += "?" + c.r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(c.body))
	if err != nil {
		cancel()
		// Not err: it quotes the target, and with it the caller's query.
		return nil, fmt.Errorf("cannot address the request to line %s", l.cfg.Name)
	}
	for k, vs := range c.r.Header {
		if !dropRequestHeaders[k] {
			req.Header[k] = vs
		}
	}
	if c.ep.name == pricing.EndpointMessages {
		req.Header.Set("Anthropic-Version", versionHeader(c.r))
	}
	if key := l.cfg.UpstreamKey(); key != "" {
		if l.cfg.Protocol == config.ProtocolAnthropic {
			req.Header.Set("X-Api-Key", key)
		} else {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	req.ContentLength = int64(len(c.body))
	start := g.now()
	resp, err := l.do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	c.info.upstream = g.now().Sub(start)
	l.observeLatency(c.info.upstream)
	up := &upstream{resp: resp, line: l, cancel: cancel, start: start}
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

func isEventStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return strings.HasPrefix(strings.TrimSpace(strings.ToLower(ct)), "text/event-stream")
}

// maxUpstreamBody caps a JSON response read into memory.
const maxUpstreamBody = 256 << 20

// answerBufs holds the buffers JSON answers are read into, each used from
// the read to the end of relayJSON (data is written to the client and
// scanned for usage; nothing keeps it). Reading an answer into a fresh
// buffer was a twelfth of what the gateway allocated per call, and every
// byte allocated is a byte the collector sweeps, on the CPU the gateway
// shares with its upstreams in the benchmark.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer: a buffer grown beyond this by a large answer is dropped
// rather than kept for small ones.
const maxPooledAnswer = 64 << 10

// relayJSON returns a JSON answer unchanged, with its charge in
// x-relay-cost-usd, then settles from its usage.
func (g *Gateway) relayJSON(ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			clear(buf.Bytes()) // no completion outlives its call, even unreachable
			buf.Reset()
			answerBufs.Put(buf)
		}
	}()
	if n := up.resp.ContentLength; n > 0 && n <= maxUpstreamBody {
		buf.Grow(int(n) + bytes.MinRead) // at most one allocation, no regrowth
	}
	_, err := buf.ReadFrom(io.LimitReader(up.resp.Body, maxUpstreamBody))
	data := buf.Bytes()
	if err != nil {
		up.line.recordFailure(g.now(), err)
		return apierr.Unavailable("upstream_error", "the provider's answer was cut before it was complete; you were not charged; retry")
	}
	u, ok, uerr := c.ep.usage(data)
	note := ""
	if uerr != nil || !ok {
		if c.ep.estimate != nil {
			u = c.ep.estimate(c, data)
		} else {
			u = pricing.Usage{InputTokens: settleInputTokens(c.callerBytes), OutputTokens: pricing.EstimateTokens(len(data))}
		}
		note = "estimated: the provider's answer carried no usage"
	}
	// Priced before the answer goes out, so that its headers can say what
	// the call costs (x-relay-cost-usd): the charge settled below, exactly.
	st := c.ticket.Price(ctx, u, note)
	w.Header().Set(costHeader, st.Charge.Fixed())
	c.ticket.Answering(ctx)
	g.writeAnswer(w, up, data)
	_ = http.NewResponseController(w).Flush()
	// The answer is out; the call is settled after it, as a stream is after
	// its last event. Its hold covers it until then: a new hold in between
	// sees it, and it reserves at least the charge unless the call overran
	// its quote; an admin read of the account, and the key holder's reads
	// (holder.go), wait for the settle (see package billing). A settle that fails
	// leaves the call unsettled, so its hold is released: the failure goes
	// the customer's way. The settle goes on in the background
	// (SettleAnswered): the client's connection does not wait for the
	// ledger. A failure is logged; the hold is released.
	if c.ticket.SettleAnswered(ctx, st) == nil {
		c.info.charge = st.Charge.Fixed()
	}
	return nil
}

// costHeader is the header of a JSON answer of a charged call that says
// its charge: exact USD with nine decimals, as the journal records it.
const costHeader = "X-Relay-Cost-Usd"

// relayUncharged relays a call that costs nothing (count_tokens) and
// returns the provider's answer unchanged. It holds nothing, so an account
// without credit can make it, and it leaves no journal entry; the key's
// rate limit and the model and route checks have applied as to any call.
func (g *Gateway) relayUncharged(ctx context.Context, w http.ResponseWriter, c *call) error {
	up, err := g.sendOK(ctx, c)
	if err != nil {
		return err
	}
	defer up.close()
	data, err := io.ReadAll(io.LimitReader(up.resp.Body, maxUpstreamBody))
	if err != nil {
		up.line.recordFailure(g.now(), err)
		return apierr.Unavailable("upstream_error", "the provider's answer was cut before it was complete; retry")
	}
	g.writeAnswer(w, up, data)
	return nil
}

// sendOK sends c and returns the provider's answer when its status is 2xx;
// any other status is passed on as the provider's error (upstreamError)
// and the answer closed.
func (g *Gateway) sendOK(ctx context.Context, c *call) (*upstream, error) {
	up, err := g.send(ctx, c)
	if err != nil {
		return nil, err
	}
	if up.resp.StatusCode < 200 || up.resp.StatusCode > 299 {
		defer up.close()
		return nil, g.upstreamError(up)
	}
	return up, nil
}

// writeAnswer passes on a provider's answer read whole into data: its
// status, its headers as copyResponseHeaders keeps them, and data with its
// length.
func (g *Gateway) writeAnswer(w http.ResponseWriter, up *upstream, data []byte) {
	h := w.Header()
	g.copyResponseHeaders(h, up.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(up.resp.StatusCode)
	_, _ = w.Write(data)
}

// upstreamError passes a provider's non-retryable error on in the error
// shape (docs/api.md#errors), with the provider's status, message, type and code.
func (g *Gateway) upstreamError(up *upstream) error {
	data, _ := io.ReadAll(io.LimitReader(up.resp.Body, 1<<20))
	st := up.resp.StatusCode
	e := &apierr.Error{Status: st, Type: "upstream_error", Code: nil, Provider: true}
	var oa struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(data, &oa) == nil {
		switch {
		case oa.Error != nil:
			e.Message, e.Type, e.Code = oa.Error.Message, oa.Error.Type, oa.Error.Code
		case len(oa.Detail) > 0:
			e.Message = "the provider rejected the request: " + string(oa.Detail)
			e.Type = "invalid_request_error"
		}
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("the provider answered HTTP %d", st)
		if len(data) > 0 && len(data) < 512 && json.Valid(data) {
			e.Message += ": " + string(data)
		}
	}
	if e.Type == "" {
		e.Type = "upstream_error"
	}
	if st == http.StatusNotFound && e.Code == nil {
		e.Code = "model_not_found"
	}
	if st == http.StatusTooManyRequests {
		e.RetryAfter = retryAfterSeconds(up.resp.Header.Get("Retry-After"))
	}
	return e
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

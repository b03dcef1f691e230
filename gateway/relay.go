package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
)

// endpoint describes one relayed POST endpoint.
type endpoint struct {
	name     string // the endpoint type (pricing.Endpoint*)
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
	// accept replaces relayJSON for a successful JSON answer (video jobs).
	accept func(g *Gateway, ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error
	// estimate is the usage settled when a JSON answer carries none; nil
	// means the token estimate.
	estimate func(c *call, answer []byte) pricing.Usage
}

var endpoints = []*endpoint{
	{
		name: pricing.EndpointChat, path: "/v1/chat/completions", protocol: ProtocolOpenAI,
		decode: jsonOnly(decodeChat), usage: pricing.ChatUsage, meter: pricing.NewChatMeter, text: chatText,
	},
	{
		name: pricing.EndpointResponses, path: "/v1/responses", protocol: ProtocolOpenAI,
		decode: jsonOnly(decodeResponses), usage: pricing.ResponsesUsage, meter: pricing.NewResponsesMeter, text: responsesText,
	},
	{
		name: pricing.EndpointMessages, path: "/v1/messages", protocol: ProtocolAnthropic, xAPIKey: true,
		decode: jsonOnly(decodeMessages), usage: pricing.MessagesUsage, meter: pricing.NewMessagesMeter, text: messagesText,
	},
	{
		name: pricing.EndpointImages, path: "/v1/images/generations", protocol: ProtocolOpenAI,
		decode: jsonOnly(decodeImages), usage: imagesUsage, meter: newImagesMeter,
		rewrite: rewriteJSONFields, estimate: noUsage,
	},
	{
		name: pricing.EndpointImageEdit, path: "/v1/images/edits", protocol: ProtocolOpenAI, maxBody: maxEditBody,
		decode: decodeImageEdit, usage: imagesUsage, meter: newImagesMeter, estimate: noUsage,
	},
	{
		name: pricing.EndpointVideo, path: "/v1/videos/generations", protocol: ProtocolOpenAI,
		decode: jsonOnly(decodeVideo), accept: acceptVideo,
	},
	{
		name: pricing.EndpointSystemOne, path: "/v1/systemone", aliases: []string{"/v1/system_one"},
		protocol: ProtocolOpenAI, maxBody: maxSystemOneBody,
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
	settled  bool     // the charge is written (see settle)
	answered *pending // the answer went out before the settle (see relayJSON)
}

func (g *Gateway) relayHandler(ep *endpoint) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
		if g.closing.Load() {
			return refusal("shutting_down", 0, "the gateway is shutting down; retry")
		}
		if g.shed.refuse(time.Now()) { // the real clock: it measures the real scheduler
			return refusal("overloaded", shedRetryAfter, "the gateway is overloaded; retry after %d second", shedRetryAfter)
		}
		g.inflight.Add(1)
		defer g.inflight.Done()
		ctx := r.Context()

		key, err := g.authenticate(ctx, r, ep.xAPIKey, info)
		if err != nil {
			return err
		}
		if err := g.limits.allowKey(key, g.now()); err != nil {
			return err
		}
		limit := ep.maxBody
		if limit == 0 {
			limit = g.cfg.Limits.MaxBodyBytes
		}
		body, err := readBody(r, limit)
		if err != nil {
			return err
		}
		bodyRead(w)
		sum, err := ep.decode(body, r.Header.Get("Content-Type"))
		if err != nil {
			return err
		}
		info.model, info.stream = sum.model, sum.stream
		c := &call{ep: ep, r: r, info: info, key: key, sum: sum, body: body}
		if err := g.admitModel(c); err != nil {
			return err
		}
		if ep.name == pricing.EndpointMessages && versionHeader(r) == "" {
			return badRequest("anthropic-version", "the vendorx-version header (anthropic-version) is required on /v1/messages, e.g. \"anthropic-version: 2023-06-01\"")
		}
		if err := g.admit(ctx, c); err != nil {
			return err
		}
		defer func() {
			if c.answered != nil { // after releaseUnsettled
				g.settling.end(c.key.Account, c.answered)
			}
		}()
		defer g.releaseUnsettled(c)

		if ep.rewrite != nil && len(c.set) > 0 {
			nb, err := ep.rewrite(c.body, c.set)
			if err != nil {
				return badRequest("body", "cannot apply %v to the body: %v", c.set, err)
			}
			c.body = nb
		}
		if ep.name == pricing.EndpointChat && sum.stream && !sum.includeUsage {
			nb, err := forceIncludeUsage(c.body)
			if err != nil {
				return badRequest("body", "cannot read the body: %v", err)
			}
			c.body = nb
		}
		up, err := g.send(ctx, c)
		if err != nil {
			return err
		}
		defer up.close()
		if up.resp.StatusCode < 200 || up.resp.StatusCode > 299 {
			return g.upstreamError(up)
		}
		if isEventStream(up.resp) {
			return g.relayStream(ctx, w, c, up)
		}
		if ep.accept != nil {
			return ep.accept(g, ctx, w, c, up)
		}
		return g.relayJSON(ctx, w, c, up)
	}
}

// readBody reads the request body fully, up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, badRequest("body", "the request body is %d bytes; the limit is %d bytes", r.ContentLength, limit)
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
		return nil, errf(http.StatusRequestTimeout, "invalid_request_error", "body_timeout",
			"the request body did not arrive in time (%s bytes arrived); send it faster, or a smaller one", got)
	}
	if err != nil {
		return nil, badRequest("body", "cannot read the request body: %v", err)
	}
	if n > limit {
		return nil, badRequest("body", "the request body is larger than the limit of %d bytes", limit)
	}
	return buf.Bytes(), nil
}

func versionHeader(r *http.Request) string {
	if v := r.Header.Get("Anthropic-Version"); v != "" {
		return v
	}
	return r.Header.Get("Vendorx-Version")
}

// admitModel applies spec 4.2.9: the model must be sold here, served by the
// endpoint, on the key's route and not excluded by the key → 403.
func (g *Gateway) admitModel(c *call) error {
	cat := g.host.Catalog()
	m, ok := cat.Model(c.sum.model)
	if !ok {
		return forbidden("the model %q is not sold here; GET /v1/models lists the models your key can call", c.sum.model)
	}
	if !contains(m.Endpoints, c.ep.name) {
		served := []string{}
		for _, mm := range cat.Models() {
			if contains(mm.Endpoints, c.ep.name) {
				served = append(served, mm.ID)
			}
		}
		return forbidden("the model %q is not served by %s, which serves: %s", m.ID, c.ep.path, strings.Join(served, ", "))
	}
	for _, x := range c.key.Exclude {
		if x == m.ID {
			return forbidden("the model %q is excluded by this key's model limits", m.ID)
		}
	}
	route := c.key.Route
	if route == store.AutoRoute {
		route = m.EffectiveAutoRoute()
	} else if _, ok := m.Routes[route]; !ok {
		return forbidden("the model %q is not on this key's route %q", m.ID, route)
	}
	c.model, c.route = m, route
	c.info.route = route
	return nil
}

// admit validates and quotes with the model's plugin, then holds the quote.
func (g *Gateway) admit(ctx context.Context, c *call) error {
	now := g.now()
	t0 := time.Now()
	res, err := g.host.Admit(ctx, abi.AdmitRequest{
		Now:                 now.UnixNano(),
		Endpoint:            c.ep.name,
		Model:               c.model.ID,
		Route:               c.route,
		InputTokens:         holdInputTokens(len(c.body)),
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
		return internal("plugin_error", "plugin %s quoted a negative hold", g.host.Catalog().PluginFor(c.model.ID))
	}
	c.params = c.sum.params
	if len(res.Set) > 0 {
		c.params = mergeParams(c.params, res.Set)
		c.set = res.Set
	}
	c.hold = pricing.Nano(res.Hold)
	err = g.store.Hold(ctx, store.Hold{
		RequestID: c.info.rid,
		Account:   c.key.Account,
		KeyID:     c.key.ID,
		Model:     c.model.ID,
		Route:     c.route,
		Endpoint:  c.ep.name,
		Amount:    c.hold,
		Created:   now,
	})
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit", "the account %q has no credit", c.key.Account)
	}
	if err == nil {
		g.met.openHolds.Add(1)
	}
	return err
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
// whose usage never arrived: one token per four body bytes, rounded up.
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

// releaseUnsettled releases the hold of a call that ended without settling
// (a failure before any response reached the client, or a settle that could
// not be written): it is not charged.
func (g *Gateway) releaseUnsettled(c *call) {
	if c.settled {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), 10*time.Second)
	defer cancel()
	err := g.store.Release(ctx, c.info.rid, "call failed")
	switch {
	case err == nil:
		g.met.openHolds.Add(-1)
	case errors.Is(err, store.ErrExists):
		// The request id already had an outcome (a settle whose write
		// reported an error yet landed): the store dropped the hold.
		g.met.openHolds.Add(-1)
		g.log.Error("release hold", "request_id", c.info.rid, "error", err.Error())
	case !errors.Is(err, store.ErrAlreadySettled):
		g.log.Error("release hold", "request_id", c.info.rid, "error", err.Error())
	}
}

// settle prices the usage with the model's plugin and charges it, exactly
// once. It returns once the charge is written; should the write fail, the
// call stays unsettled and releaseUnsettled releases its hold, uncharged.
// A JSON answer and a stream are settled after the client has them (see
// relayJSON); a video job before its answer, which carries the fee.
func (g *Gateway) settle(ctx context.Context, c *call, u pricing.Usage, note string) (pricing.Nano, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := g.host.Settle(ctx, abi.SettleRequest{
		Now:      g.now().UnixNano(),
		Endpoint: c.ep.name,
		Model:    c.model.ID,
		Route:    c.route,
		Usage:    usageToABI(u),
		Params:   c.params,
	})
	g.observePlugin(c.model.ID, "settle", t0)
	if err != nil {
		// The plugin cannot price it: charge the hold, the most the call
		// could cost by the plugin's own quote, and say so in the journal.
		g.log.Error("settle: plugin failed; charging the hold", "request_id", c.info.rid, "error", err.Error())
		res.Charge = int64(c.hold)
		note = strings.TrimSpace(note + " plugin failed to price the usage; charged the hold")
	}
	if res.Charge < 0 {
		res.Charge = int64(c.hold)
		note = strings.TrimSpace(note + " plugin returned a negative charge; charged the hold")
	}
	charge := pricing.Nano(res.Charge)
	if _, err := g.store.Settle(ctx, store.Settlement{RequestID: c.info.rid, Account: c.key.Account, Charge: charge, Usage: u, Note: note}); err != nil {
		g.log.Error("settle", "request_id", c.info.rid, "error", err.Error())
		return 0, err
	}
	c.settled = true
	c.info.charge = charge.Fixed()
	g.met.openHolds.Add(-1)
	g.met.observeSettle(c.model.ID, c.route, u, charge)
	return charge, nil
}

func usageToABI(u pricing.Usage) abi.Usage {
	return abi.Usage{
		InputTokens: u.InputTokens, CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens, OutputTokens: u.OutputTokens, Images: u.Images,
		SizeTier: u.SizeTier, Seconds: u.Seconds, Resolution: u.Resolution, Requests: u.Requests,
	}
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

// send tries the line plan: breaker-open lines are skipped without a request;
// connection errors, timeouts, 5xx and 429 move to the next try (with
// go-retryablehttp's retry policy and backoff); the first other answer wins.
// Nothing has reached the client yet, so retrying is safe.
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
	if len(plan) == 0 {
		if g.anyLineFor(c) {
			return nil, unavailable("no_line_available", "every line serving %q on route %q is unavailable (circuit open after repeated failures); retry shortly", c.model.ID, c.route)
		}
		return nil, unavailable("no_line_available", "no line is configured to serve %q on route %q", c.model.ID, c.route)
	}

	rc := g.cfg.Retry
	start := g.now()
	var (
		attempts  []attemptError
		tries     int
		exhausted = map[*line]bool{} // lines that answered 429: not retried in this call
		lastRetry string             // Retry-After of the last 429
		last429   bool
		opened    int
		prev      *line
	)
	for i := 0; tries < rc.MaxTries && i < len(plan)*rc.MaxTries; i++ {
		l := plan[i%len(plan)]
		if exhausted[l] {
			continue
		}
		if tries > 0 && g.now().Sub(start) >= rc.MaxTime {
			break
		}
		done, berr := l.breaker.Allow()
		if berr != nil {
			opened++
			attempts = append(attempts, attemptError{line: l.cfg.Name, err: errBreakerOpen})
			continue
		}
		if prev == l && tries > 0 {
			wait := retryablehttp.DefaultBackoff(rc.BackoffMin, rc.BackoffMax, tries, nil)
			if g.now().Sub(start)+wait >= rc.MaxTime {
				done(nil) // not tried: do not count against the line
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				done(nil)
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		prev = l
		tries++
		l.recordRequest()
		up, err := g.try(ctx, c, l)
		if ctx.Err() != nil {
			// The client went away: not the line's fault.
			done(nil)
			if up != nil {
				up.close()
			}
			return nil, ctx.Err()
		}
		var resp *http.Response
		if up != nil {
			resp = up.resp
		}
		retry, _ := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		if err == nil && !retry {
			done(nil)
			c.info.line = l.cfg.Name
			return up, nil
		}
		ae := attemptError{line: l.cfg.Name, err: err}
		last429 = false
		if resp != nil {
			ae.status = resp.StatusCode
			if resp.StatusCode == http.StatusTooManyRequests {
				exhausted[l] = true
				last429 = true
				lastRetry = resp.Header.Get("Retry-After")
			}
			up.close()
		}
		attempts = append(attempts, ae)
		failErr := err
		if failErr == nil {
			failErr = fmt.Errorf("HTTP %d", ae.status)
		}
		done(failErr)
		l.recordFailure(g.now(), failErr)
	}
	if tries == 0 && opened > 0 {
		return nil, unavailable("no_line_available", "every line serving %q on route %q is unavailable (circuit open after repeated failures); retry shortly", c.model.ID, c.route)
	}
	if last429 {
		e := errf(http.StatusTooManyRequests, "rate_limit_error", "upstream_rate_limited", "the provider is rate limiting %q; retry later", c.model.ID)
		e.RetryAfter = retryAfterSeconds(lastRetry)
		return nil, e
	}
	parts := make([]string, len(attempts))
	for i, a := range attempts {
		parts[i] = a.String()
	}
	overloaded := false
	for _, a := range attempts {
		if a.status == http.StatusServiceUnavailable || a.status == 529 {
			overloaded = true
		}
	}
	if overloaded {
		return nil, unavailable("upstream_overloaded", "the provider is overloaded for %q; retry (tried: %s)", c.model.ID, strings.Join(parts, "; "))
	}
	return nil, unavailable("no_line_available", "no line could serve %q right now (tried: %s); retry", c.model.ID, strings.Join(parts, "; "))
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
func retryAfterSeconds(v string) int {
	if v == "" {
		return 1
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return max(n, 1)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(int(time.Until(t).Seconds()+0.999), 1)
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
		return nil, err
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
		if l.cfg.Protocol == ProtocolAnthropic {
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

// response headers never copied from upstream.
var dropResponseHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Set-Cookie": true, "X-Request-Id": true, "Date": true, "Server": true,
}

func copyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		if !dropResponseHeaders[k] {
			dst[k] = vs
		}
	}
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

// relayJSON returns a JSON answer unchanged, then settles from its usage.
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
		return unavailable("upstream_error", "the provider's answer was cut before it was complete; you were not charged; retry")
	}
	c.answered = g.settling.begin(c.key.Account)
	h := w.Header()
	copyResponseHeaders(h, up.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(up.resp.StatusCode)
	_, _ = w.Write(data)
	_ = http.NewResponseController(w).Flush()
	u, ok, uerr := c.ep.usage(data)
	note := ""
	if uerr != nil || !ok {
		if c.ep.estimate != nil {
			u = c.ep.estimate(c, data)
		} else {
			u = pricing.Usage{InputTokens: settleInputTokens(len(c.body)), OutputTokens: pricing.EstimateTokens(len(data))}
		}
		note = "estimated: the provider's answer carried no usage"
	}
	// The answer is out; the call is settled after it, as a stream is after
	// its last event. Its hold covers it until then: a new hold in between
	// sees it, and it reserves at least the charge unless the call overran
	// its quote; an admin read of the account waits for the settle (see
	// settling). A settle that fails leaves the call unsettled, so
	// releaseUnsettled releases its hold: the failure goes the customer's
	// way.
	_, _ = g.settle(ctx, c, u, note) // a failure is logged; the hold is released
	return nil
}

// upstreamError passes a provider's non-retryable error on in the spec's
// shape, with the provider's status, message, type and code.
func (g *Gateway) upstreamError(up *upstream) error {
	data, _ := io.ReadAll(io.LimitReader(up.resp.Body, 1<<20))
	st := up.resp.StatusCode
	e := &Error{Status: st, Type: "upstream_error", Code: nil}
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

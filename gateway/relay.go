package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/billing"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/gateway/listen"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// relay is the pipeline of a relayed call, in order: read and decode the
// body, admit the model, quote with its plugin, hold the quote (package
// billing), send on the lines the selection plugin plans (package lines),
// relay the answer and settle it. The Gateway routes each relayed
// endpoint to handler, and the video job reads to handleVideoStatus and
// handleVideoContent. It shares the Gateway's parts; it owns none.
type relay struct {
	cfg    config.Config
	store  Store
	host   *plugins.Host
	log    *slog.Logger
	now    func() time.Time
	lines  *lines.Set
	bill   *billing.Ledger
	limits *limiters
	hdrs   *headerFilter
	met    *metrics
	shed   *shedder
	// authenticate is the Gateway's (auth.go): the caller's key, checked.
	authenticate func(ctx context.Context, r *http.Request, allowXAPIKey bool, info *reqInfo) (store.Key, error)
	// closing and inflight are the Gateway's: a call is refused once it
	// drains, and counted while it runs.
	closing  *atomic.Bool
	inflight *sync.WaitGroup
}

// call is one relayed request in flight.
type call struct {
	ep       *endpoint
	r        *http.Request
	info     *reqInfo
	key      store.Key
	sum      *wire.Summary
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

	// x is the call's translation for lines of other protocols
	// (translate.go); nil when every line serving it speaks its endpoint.
	x *xcall

	// callerBytes is the length of the body the caller sent, before the
	// gateway's changes to it (a plugin's Set, include_usage): the hold's
	// estimate and those of a call settled without usage count it.
	callerBytes int
}

// handler serves a relayed endpoint: it reads and admits the call,
// holds its cost, sends it upstream and relays the answer; the hold is
// settled or released on the way out.
func (rl *relay) handler(ep *endpoint) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
		if rl.closing.Load() {
			return apierr.EarlyRefusal("shutting_down", 0, "the gateway is shutting down; retry")
		}
		if rl.shed.refuse(time.Now()) { // the real clock: it measures the real scheduler
			return apierr.EarlyRefusal("overloaded", shedRetryAfter, "the gateway is overloaded; retry after %d second", shedRetryAfter)
		}
		if !ep.uncharged {
			if err := rl.bill.Admit(); err != nil {
				return err
			}
		}
		rl.inflight.Add(1)
		defer rl.inflight.Done()
		ctx := r.Context()

		c, err := rl.readCall(ctx, w, r, ep, info)
		if err != nil {
			return err
		}
		if ep.uncharged {
			return rl.relayUncharged(ctx, w, c)
		}
		if err := rl.quote(ctx, c); err != nil {
			return err
		}
		// Armed before the hold, so that it covers a panic on the way
		// upstream too; it acts once the hold is taken.
		defer func() { c.ticket.Finish(ctx) }()
		if err := rl.translateCall(c); err != nil {
			return err
		}
		if err := prepareBody(c); err != nil {
			return err
		}
		up, err := rl.holdAndSend(ctx, c)
		if err != nil {
			return err
		}
		defer up.close()
		if isEventStream(up.resp) {
			return rl.relayStream(ctx, w, c, up)
		}
		if ep.accept != nil {
			return ep.accept(rl, ctx, w, c, up)
		}
		return rl.relayJSON(ctx, w, c, up)
	}
}

// readCall authenticates the caller, applies its key's rate limit, reads
// and decodes the body, and admits the model (admitModel): the call as far
// as it can be known before anything is held.
func (rl *relay) readCall(ctx context.Context, w http.ResponseWriter, r *http.Request, ep *endpoint, info *reqInfo) (*call, error) {
	key, err := rl.authenticate(ctx, r, ep.xAPIKey, info)
	if err != nil {
		return nil, err
	}
	if err := rl.limits.allowKey(ctx, key, rl.now()); err != nil {
		return nil, err
	}
	limit := ep.maxBody
	if limit == 0 {
		limit = rl.cfg.Limits.MaxBodyBytes
	}
	body, err := listen.ReadBody(r, limit)
	if err != nil {
		return nil, err
	}
	listen.BodyRead(w)
	sum, err := ep.decode(body, r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	info.stream = sum.Stream
	c := &call{ep: ep, r: r, info: info, key: key, sum: sum, body: body, callerBytes: len(body)}
	if err := rl.admitModel(c); err != nil {
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
	if c.ep.name == pricing.EndpointChat && c.sum.Stream && !c.sum.IncludeUsage {
		nb, err := wire.ForceIncludeUsage(c.body)
		if err != nil {
			return apierr.BadRequest("body", "cannot read the body: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		c.body = nb
	}
	return nil
}

func versionHeader(r *http.Request) string {
	if v := r.Header.Get("Anthropic-Version"); v != "" {
		return v
	}
	return r.Header.Get("Vendorx-Version")
}

// admitModel applies the model rules (docs/api.md#authentication): the model must be sold here, served by the
// endpoint, on the key's route and not excluded by the key → 403.
func (rl *relay) admitModel(c *call) error {
	cat := rl.host.Catalog()
	m, ok := cat.Model(c.sum.Model)
	if !ok {
		return apierr.Forbidden("the model %s is not sold here; GET /v1/models lists the models your key can call", apierr.Quote(c.sum.Model))
	}
	route := keyRoute(c.key, m)
	if !rl.serves(m, route, c.ep) {
		served := []string{}
		for _, mm := range cat.Models() {
			if rl.serves(mm, keyRoute(c.key, mm), c.ep) {
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
	if _, ok := m.Routes[route]; !ok && c.key.Route != store.AutoRoute {
		return apierr.Forbidden("the model %q is not on this key's route %q", m.ID, route)
	}
	c.model, c.route = m, route
	c.info.route = route
	return nil
}

// quote validates and quotes the call with the model's plugin: c.hold is
// what the call may cost, to be held (hold).
func (rl *relay) quote(ctx context.Context, c *call) error {
	now := rl.now()
	c.admitted = now
	t0 := time.Now()
	res, err := rl.host.Admit(ctx, abi.AdmitRequest{
		Now:                 now.UnixNano(),
		Endpoint:            priceEndpoint(c.model, c.ep.name),
		Model:               c.model.ID,
		Route:               c.route,
		InputTokens:         holdInputTokens(c.callerBytes),
		MaxOutputTokens:     c.sum.MaxOutput,
		DefaultOutputTokens: rl.cfg.Billing.DefaultOutputTokens,
		Stream:              c.sum.Stream,
		Params:              c.sum.Params,
	})
	rl.observePlugin(c.model.ID, "admit", t0)
	if err != nil {
		return err
	}
	if res.Hold < 0 {
		return apierr.Internal("plugin_error", "plugin %s quoted a negative hold", rl.host.Catalog().PluginFor(c.model.ID))
	}
	c.params = c.sum.Params
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
func (rl *relay) holdAndSend(ctx context.Context, c *call) (*upstream, error) {
	t, err := rl.bill.Hold(ctx, billing.Call{
		RequestID: c.info.rid, Key: c.key, Model: c.model, Route: c.route, Endpoint: c.ep.name,
		Params: c.params, Amount: c.hold, Admitted: c.admitted, ChargedFirst: c.ep.accept != nil,
	})
	c.ticket = t
	if err != nil {
		return nil, err
	}
	if !t.Pending() {
		return rl.sendOK(ctx, c)
	}
	waited := false
	defer func() {
		if !waited { // a panic on the way upstream: the hold's outcome is still the call's
			_ = t.Wait()
		}
	}()
	up, err := rl.sendOK(t.SendContext(), c)
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
func (rl *relay) observePlugin(model, op string, t0 time.Time) {
	name := rl.host.Catalog().PluginFor(model)
	if name == "" {
		name = "unknown"
	}
	rl.met.pluginDur.WithLabelValues(name, op).Observe(time.Since(t0).Seconds())
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

// upstream is the answer a call relays (lines.Upstream) and the line that
// gave it.
type upstream struct {
	resp *http.Response
	line *lines.Line
	u    *lines.Upstream // nil for a video job's reads (video.go), whose caller closes resp
}

func (u *upstream) close() { u.u.Close() }

// send asks the selection plugin for the call's plan and sends the call on
// its lines (lines.Set.Send); c.info gets the line that answered and the
// time to its response headers.
func (rl *relay) send(ctx context.Context, c *call) (*upstream, error) {
	t0 := time.Now()
	sel, err := rl.host.Select(ctx, abi.SelectRequest{Now: rl.now().UnixNano(), Model: c.model.ID, Route: c.route, Lines: rl.lines.States()})
	rl.met.pluginDur.WithLabelValues("select", "select").Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, err
	}
	var conv uint64
	if c.sum != nil {
		conv = c.sum.Conv
	}
	req := &lines.Request{
		Model: c.model.ID, Route: c.route, Protocol: c.ep.protocol, Plan: lines.OrderPlan(sel.Plan, rand.Int64N),
		Path: c.ep.path, RawQuery: c.r.URL.RawQuery, Header: c.r.Header, Body: c.body,
		Conversation: lines.Conversation(conv, c.r.Header), Endpoints: c.model.Endpoints,
	}
	if c.ep.shape != "" && !c.native() {
		req.Protocol = "" // every line gets the call translated
	}
	if c.ep.name == pricing.EndpointMessages {
		req.Version = versionHeader(c.r)
	}
	if c.x != nil {
		req.Forms = c.x.forms
		if c.x.chatLine {
			if req.Forms == nil {
				req.Forms = make(map[string]*lines.Form, 1)
			}
			req.Forms[config.ProtocolOpenAIChat] = &lines.Form{Path: req.Path, RawQuery: req.RawQuery, Body: c.body}
		}
	}
	lu, err := rl.lines.Send(ctx, req)
	if req.Took != 0 {
		c.info.upstream = req.Took
	}
	if lu == nil {
		return nil, err
	}
	c.info.line = lu.Line.Name()
	return &upstream{resp: lu.Resp, line: lu.Line, u: lu}, err
}

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
func (rl *relay) relayJSON(ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error {
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
		up.line.RecordFailure(rl.now(), err)
		return apierr.Unavailable("upstream_error", "the provider's answer was cut before it was complete; you were not charged; retry")
	}
	usage := c.ep.usage
	translated := c.translated(up.line.Protocol())
	if translated {
		usage = readerFor(lineShape(up.line.Protocol())).usage
	}
	u, ok, uerr := usage(data)
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
	if translated {
		if data, err = translateAnswer(c, up, data); err != nil {
			up.line.RecordFailure(rl.now(), err)
			return err
		}
	}
	st := c.ticket.Price(ctx, u, note)
	w.Header().Set(costHeader, st.Charge.Fixed())
	c.ticket.Answering(ctx)
	rl.writeAnswer(w, up, data)
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
func (rl *relay) relayUncharged(ctx context.Context, w http.ResponseWriter, c *call) error {
	up, err := rl.sendOK(ctx, c)
	if err != nil {
		return err
	}
	defer up.close()
	data, err := io.ReadAll(io.LimitReader(up.resp.Body, maxUpstreamBody))
	if err != nil {
		up.line.RecordFailure(rl.now(), err)
		return apierr.Unavailable("upstream_error", "the provider's answer was cut before it was complete; retry")
	}
	rl.writeAnswer(w, up, data)
	return nil
}

// sendOK sends c and returns the provider's answer when its status is 2xx;
// any other status is passed on as the provider's error (upstreamError)
// and the answer closed.
func (rl *relay) sendOK(ctx context.Context, c *call) (*upstream, error) {
	up, err := rl.send(ctx, c)
	if err != nil {
		return nil, err
	}
	if up.resp.StatusCode < 200 || up.resp.StatusCode > 299 {
		defer up.close()
		e := rl.upstreamError(up)
		if c.translated(up.line.Protocol()) {
			translateStatus(e)
		}
		return nil, e
	}
	return up, nil
}

// writeAnswer passes on a provider's answer read whole into data: its
// status, its headers as the header filter keeps them, and data with its
// length.
func (rl *relay) writeAnswer(w http.ResponseWriter, up *upstream, data []byte) {
	h := w.Header()
	rl.hdrs.copy(h, up.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(up.resp.StatusCode)
	_, _ = w.Write(data)
}

// upstreamError passes a provider's non-retryable error on in the error
// shape (docs/api.md#errors), with the provider's status, message, type and code.
func (rl *relay) upstreamError(up *upstream) *apierr.Error {
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
		e.RetryAfter = lines.RetryAfterSeconds(up.resp.Header.Get("Retry-After"))
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

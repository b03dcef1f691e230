package sdk

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// PriceList is the catalogue of a plugin: the models of a price list in
// pricing.ParseModels format, with their route prices. Configure (or
// CheckedList's) loads it; Describe, Route, UnitRoute, TokenAdmit and
// TokenSettle read it. The zero value is an empty list whose operations fail
// with an internal error until it is loaded. It is safe for concurrent use;
// a reload replaces the whole list.
type PriceList struct {
	cat atomic.Pointer[catalogue]
}

type catalogue struct {
	models []pricing.Model
	index  map[string]int
	desc   abi.Description // Models converted once, at load
	// quotes holds, per model and route, what a token quote needs,
	// precomputed at load so that the per-call path is a few map lookups
	// and one 128-bit multiply-add (every function call is costly in a
	// guarded wasm guest).
	quotes map[string]map[string]*tokenQuote
	// last is the quote of the last (endpoint, model, route) looked up:
	// consecutive calls nearly always repeat it, and three string
	// comparisons cost a guarded guest far less than two map lookups.
	last atomic.Pointer[quoteMemo]
}

type quoteMemo struct {
	endpoint, model, route string
	q                      *tokenQuote
	served                 bool // the model is served on endpoint
}

// tokenQuote is a per_million_tokens route price reduced to what a hold
// needs. The dearest split of n input tokens puts all of them in the most
// expensive input category, and ceil is monotonic, so
// max over categories of Charge = ceil((n × maxIn + out × outPrice) / 1e6).
type tokenQuote struct {
	model     *pricing.Model
	price     *pricing.Price
	maxOutput int64
	in, out   uint64 // nano-USD per million: the dearest input-side price, and output
	long      bool
	longMin   int64
	inLong    uint64
	outLong   uint64
	// settle's prices, nano-USD per million: input, cache read, cache write,
	// 1-hour cache write, output; [1] is the long-context column.
	rate [2][5]uint64
}

func newTokenQuote(m *pricing.Model, p *pricing.Price) *tokenQuote {
	dearest := func(in pricing.Nano) uint64 {
		return uint64(max(in, p.CacheWrite, p.CacheWrite1h, p.CacheRead))
	}
	q := &tokenQuote{model: m, price: p, maxOutput: m.MaxOutput, in: dearest(p.Input), out: uint64(p.Output)}
	q.rate[0] = [5]uint64{uint64(p.Input), uint64(p.CacheRead), uint64(p.CacheWrite), uint64(p.CacheWrite1h), uint64(p.Output)}
	q.rate[1] = q.rate[0]
	if lc := p.LongContext; lc != nil {
		q.long, q.longMin, q.inLong, q.outLong = true, lc.MinInputTokens, dearest(lc.Input), uint64(lc.Output)
		q.rate[1][0], q.rate[1][4] = uint64(lc.Input), uint64(lc.Output)
	}
	return q
}

// settleNano is pricing.Price.Charge of a token usage without its function
// calls and loops (each costs a guarded guest a trip out to the host): the
// exact sum of tokens × price, rounded up once. ok is false when a count is
// negative or too large for this path, or on overflow; the caller then takes
// Charge, which says why.
func (q *tokenQuote) settleNano(u *abi.Usage) (pricing.Nano, bool) {
	const big = 1 << 60 // four of these still sum without overflow
	in, cr, cw, cw1, out := u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.OutputTokens
	if uint64(in) >= big || uint64(cr) >= big || uint64(cw) >= big || uint64(cw1) >= big || uint64(out) >= big {
		return 0, false // negative counts are huge as uint64
	}
	r := &q.rate[0]
	if q.long && in+cr+cw+cw1 > q.longMin {
		r = &q.rate[1]
	}
	var c, c2 uint64
	h, lo := bits.Mul64(uint64(in), r[0])
	h1, l1 := bits.Mul64(uint64(cr), r[1])
	lo, c = bits.Add64(lo, l1, 0)
	h, c2 = bits.Add64(h, h1, c)
	h1, l1 = bits.Mul64(uint64(cw), r[2])
	lo, c = bits.Add64(lo, l1, 0)
	h, c3 := bits.Add64(h, h1, c)
	h1, l1 = bits.Mul64(uint64(cw1), r[3])
	lo, c = bits.Add64(lo, l1, 0)
	h, c4 := bits.Add64(h, h1, c)
	h1, l1 = bits.Mul64(uint64(out), r[4])
	lo, c = bits.Add64(lo, l1, 0)
	h, c5 := bits.Add64(h, h1, c)
	lo, c = bits.Add64(lo, 999_999, 0)
	h, c6 := bits.Add64(h, 0, c)
	if c2|c3|c4|c5|c6 != 0 || h >= 1_000_000 {
		return 0, false
	}
	n, _ := bits.Div64(h, lo, 1_000_000)
	if n > math.MaxInt64 {
		return 0, false
	}
	return pricing.Nano(n), true
}

// quote returns the precomputed quote of a per_million_tokens route (nil
// when there is none), and whether the model is served on endpoint.
func (c *catalogue) quote(endpoint, model, route string) (*tokenQuote, bool) {
	if m := c.last.Load(); m != nil && m.model == model && m.route == route && m.endpoint == endpoint {
		return m.q, m.served
	}
	q := c.quotes[model][route]
	if q == nil {
		return nil, false
	}
	m := &quoteMemo{endpoint: endpoint, model: model, route: route, q: q, served: hasEndpoint(*q.model, endpoint)}
	c.last.Store(m)
	return m.q, m.served
}

// holdNano is ceil((n×in + out×o) / 1e6) in 128 bits; ok is false on overflow.
func holdNano(n int64, in uint64, out int64, o uint64) (pricing.Nano, bool) {
	h1, l1 := bits.Mul64(uint64(n), in)
	h2, l2 := bits.Mul64(uint64(out), o)
	lo, c := bits.Add64(l1, l2, 0)
	hi, c2 := bits.Add64(h1, h2, c)
	lo, c = bits.Add64(lo, 999_999, 0)
	hi, c3 := bits.Add64(hi, 0, c)
	if c2 != 0 || c3 != 0 || hi >= 1_000_000 {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > math.MaxInt64 {
		return 0, false
	}
	return pricing.Nano(q), true
}

// Configure parses config with pricing.ParseModels and replaces the list.
// Empty config is an error.
func (l *PriceList) Configure(config []byte) error {
	if len(config) == 0 {
		return errors.New("no price list: the configuration is empty")
	}
	models, err := pricing.ParseModels(config)
	if err != nil {
		return err
	}
	return l.set(models)
}

// set replaces the list with models, after checking each with
// pricing.Model.Validate and that no id repeats.
func (l *PriceList) set(models []pricing.Model) error {
	if len(models) == 0 {
		return errors.New("no price list: no models")
	}
	c := &catalogue{
		models: make([]pricing.Model, len(models)),
		index:  make(map[string]int, len(models)),
		quotes: make(map[string]map[string]*tokenQuote, len(models)),
		desc: abi.Description{
			Implements: []string{abi.CapValidate, abi.CapQuote, abi.CapPrice},
			Models:     make([]abi.Model, len(models)),
		},
	}
	for i, m := range models {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("models[%d] (%s): %w", i, m.ID, err)
		}
		if j, dup := c.index[m.ID]; dup {
			return fmt.Errorf("models[%d]: id %q is also the id of models[%d]", i, m.ID, j)
		}
		c.index[m.ID] = i
		c.models[i] = m
		c.desc.Models[i] = modelToABI(m)
	}
	for i := range c.models {
		m := &c.models[i]
		for route, p := range m.Routes {
			if p.Unit != pricing.PerMillionTokens {
				continue
			}
			if c.quotes[m.ID] == nil {
				c.quotes[m.ID] = map[string]*tokenQuote{}
			}
			pc := p
			c.quotes[m.ID][route] = newTokenQuote(m, &pc)
		}
	}
	l.cat.Store(c)
	return nil
}

// Models returns the models of the list, in price-list order.
func (l *PriceList) Models() []pricing.Model {
	c := l.cat.Load()
	if c == nil {
		return nil
	}
	return append([]pricing.Model(nil), c.models...)
}

// Model returns the model with the given id.
func (l *PriceList) Model(id string) (pricing.Model, bool) {
	c := l.cat.Load()
	if c == nil {
		return pricing.Model{}, false
	}
	i, ok := c.index[id]
	if !ok {
		return pricing.Model{}, false
	}
	return c.models[i], true
}

// Describe returns the list's Description: no name (Call fills in the
// plugin's), Implements validate, quote and price, and every model.
func (l *PriceList) Describe() abi.Description {
	c := l.cat.Load()
	if c == nil {
		return abi.Description{Implements: []string{abi.CapValidate, abi.CapQuote, abi.CapPrice}}
	}
	return c.desc
}

// Route returns the model and its price on route. An unknown model, or a
// route the model is not priced on, is a 403 *abi.Error (the model is not
// sold on that route); an empty list is an internal error.
func (l *PriceList) Route(model, route string) (pricing.Model, pricing.Price, error) {
	c := l.cat.Load()
	if c == nil {
		return pricing.Model{}, pricing.Price{}, Internal("the price list is not configured")
	}
	i, ok := c.index[model]
	if !ok {
		return pricing.Model{}, pricing.Price{}, Forbidden("model %s is not sold here", model)
	}
	m := c.models[i]
	p, ok := m.Routes[route]
	if !ok {
		return pricing.Model{}, pricing.Price{}, Forbidden("model %s is not sold on route %q (its routes: %s)", model, route, strings.Join(routeNames(m), ", "))
	}
	return m, p, nil
}

func routeNames(m pricing.Model) []string {
	names := make([]string, 0, len(m.Routes))
	for _, r := range modelToABI(m).Routes {
		names = append(names, r.Route)
	}
	return names
}

// outputField is the name of the request field that carries the output
// budget on endpoint: max_output_tokens for responses, max_tokens otherwise
// (chat completions also accept max_completion_tokens; the host passes
// whichever was sent as AdmitRequest.MaxOutputTokens).
func outputField(endpoint string) string {
	if endpoint == pricing.EndpointResponses {
		return "max_output_tokens"
	}
	return "max_tokens"
}

// TokenAdmit validates and quotes a call to a per-million-token model.
//
// Validation: the model is in the list (else 403), priced on req.Route (else
// 403), served on req.Endpoint (else 400 naming model), and
// req.MaxOutputTokens is not negative and not above the model's max_output
// when that is known (else 400 naming max_output_tokens on the responses
// endpoint, max_tokens on the others).
//
// The hold is the most the call can cost with req.InputTokens input tokens
// and an output budget of MaxOutputTokens, or DefaultOutputTokens when it is
// 0, or the model's max_output when both are 0, capped at max_output when
// known. The input tokens are priced at the dearest input-side price of the
// route — plain input (the long-context input price when the input is above
// the long-context threshold), cache write or 1-hour cache write — since a
// message call may write all of its input to a cache. The output is priced
// at the route's output price (long-context when above the threshold). The
// sum is rounded up once, by pricing.Price.Charge.
func (l *PriceList) TokenAdmit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	if c := l.cat.Load(); c != nil {
		if q, served := c.quote(req.Endpoint, req.Model, req.Route); q != nil && served && req.MaxOutputTokens >= 0 && req.InputTokens >= 0 &&
			req.DefaultOutputTokens >= 0 && (q.maxOutput == 0 || req.MaxOutputTokens <= q.maxOutput) {
			out := req.MaxOutputTokens
			if out == 0 {
				out = req.DefaultOutputTokens
			}
			if q.maxOutput > 0 && (out == 0 || out > q.maxOutput) {
				out = q.maxOutput
			}
			in, o := q.in, q.out
			if q.long && req.InputTokens > q.longMin {
				in, o = q.inLong, q.outLong
			}
			if hold, ok := holdNano(req.InputTokens, in, out, o); ok {
				return abi.AdmitResult{Hold: int64(hold)}, nil
			}
		}
	}
	// The slow path: every error, and the overflow case, with its message.
	m, p, err := l.Route(req.Model, req.Route)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	if p.Unit != pricing.PerMillionTokens {
		return abi.AdmitResult{}, Internal("model %s route %s is priced %s; TokenAdmit quotes per_million_tokens prices only", m.ID, req.Route, p.Unit)
	}
	if !hasEndpoint(m, req.Endpoint) {
		return abi.AdmitResult{}, Invalid("model", "model %s is not served on the %s endpoint (it is served on %s)", m.ID, req.Endpoint, strings.Join(m.Endpoints, ", "))
	}
	field := outputField(req.Endpoint)
	switch {
	case req.MaxOutputTokens < 0:
		return abi.AdmitResult{}, Invalid(field, "%s must not be negative (got %d)", field, req.MaxOutputTokens)
	case m.MaxOutput > 0 && req.MaxOutputTokens > m.MaxOutput:
		return abi.AdmitResult{}, Invalid(field, "%s is %d, above the %d output tokens model %s allows", field, req.MaxOutputTokens, m.MaxOutput, m.ID)
	case req.InputTokens < 0:
		return abi.AdmitResult{}, Internal("the host's input token estimate is negative (%d)", req.InputTokens)
	case req.DefaultOutputTokens < 0:
		return abi.AdmitResult{}, Internal("the host's default output tokens are negative (%d)", req.DefaultOutputTokens)
	}
	out := req.MaxOutputTokens
	if out == 0 {
		out = req.DefaultOutputTokens
	}
	if m.MaxOutput > 0 && (out == 0 || out > m.MaxOutput) {
		out = m.MaxOutput
	}
	// Charge is linear in each input category for a given total, so the
	// dearest split puts every input token in one category: try each.
	n := req.InputTokens
	var hold pricing.Nano
	for _, u := range [...]pricing.Usage{
		{InputTokens: n, OutputTokens: out},
		{CacheWriteTokens: n, OutputTokens: out},
		{CacheWrite1hTokens: n, OutputTokens: out},
		{CacheReadTokens: n, OutputTokens: out},
	} {
		c, err := p.Charge(u)
		if err != nil {
			return abi.AdmitResult{}, Internal("quoting model %s on route %s: %v", m.ID, req.Route, err)
		}
		hold = max(hold, c)
	}
	return abi.AdmitResult{Hold: int64(hold)}, nil
}

// TokenSettle prices the real usage of a call with the route's price
// (pricing.Price.Charge: exact, long-context prices above the threshold,
// rounded up once). Unknown models and routes fail as in TokenAdmit; a usage
// Charge rejects (negative counts, overflow) is an internal error.
func (l *PriceList) TokenSettle(req abi.SettleRequest) (abi.SettleResult, error) {
	if c := l.cat.Load(); c != nil {
		if q, _ := c.quote(req.Endpoint, req.Model, req.Route); q != nil {
			if ch, ok := q.settleNano(&req.Usage); ok {
				return abi.SettleResult{Charge: int64(ch)}, nil
			}
		}
	}
	m, p, err := l.Route(req.Model, req.Route)
	if err != nil {
		return abi.SettleResult{}, err
	}
	c, err := p.Charge(usageFromABI(req.Usage))
	if err != nil {
		return abi.SettleResult{}, Internal("pricing model %s on route %s: %v", m.ID, req.Route, err)
	}
	return abi.SettleResult{Charge: int64(c)}, nil
}

func hasEndpoint(m pricing.Model, endpoint string) bool {
	for _, e := range m.Endpoints {
		if e == endpoint {
			return true
		}
	}
	return false
}

// TokenPlugin is a complete plugin for token-priced models: Configure loads
// the price list from NAME.json, or from defaultConfig when the host passes
// none (a plugin may embed its prices), and Describe, Admit and Settle are
// the PriceList's.
func TokenPlugin(name string, defaultConfig []byte) Plugin {
	l := &CheckedList{Name: name, Fallback: defaultConfig}
	return l.Plugin(l.TokenAdmit, l.TokenSettle)
}

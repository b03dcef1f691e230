package main

import (
	"fmt"
	"strings"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pluginName is the plugin's name: images.wasm, images.json.
const pluginName = "images"

// Size tiers, by pixel count (width × height).
const (
	tier1K = "1K" // up to max1K pixels
	tier2K = "2K" // above max1K, up to max2K pixels

	max1K = 1024 * 1024 // 1,048,576 pixels
	max2K = 2048 * 2048 // 4,194,304 pixels; larger is refused
)

// tiers are the size tiers this plugin charges; a price list must price
// exactly these.
var tiers = []string{tier1K, tier2K}

// endpoints are the endpoints this plugin can serve.
var endpoints = []string{pricing.EndpointImages, pricing.EndpointImageEdit}

// plugin is the images plugin: its price list and the embedded default.
type plugin struct {
	list     sdk.PriceList
	fallback []byte // the embedded images.json, used when the host passes none
}

func newPlugin(defaultConfig []byte) *plugin { return &plugin{fallback: defaultConfig} }

// Plugin wires the handlers for sdk.Register.
func (p *plugin) Plugin() sdk.Plugin {
	return sdk.Plugin{
		Name:      pluginName,
		Configure: p.configure,
		Describe:  p.list.Describe,
		Admit:     p.admit,
		Settle:    p.settle,
	}
}

// configure loads config (images.json from the host), or the embedded list
// when config is empty. Besides pricing.ParseModels' rules, every model must
// be served only on image endpoints, and every route price (and the
// reference price) must be per_image with exactly the tiers 1K and 2K. A
// failed configure keeps the previous list.
func (p *plugin) configure(config []byte) error {
	if len(config) == 0 {
		config = p.fallback
	}
	if len(config) == 0 {
		return fmt.Errorf("plugin %s has no price list: put %s.json beside %s.wasm", pluginName, pluginName, pluginName)
	}
	models, err := pricing.ParseModels(config)
	if err != nil {
		return err
	}
	for i, m := range models {
		if err := checkModel(m); err != nil {
			return fmt.Errorf("models[%d] (%s): %w", i, m.ID, err)
		}
	}
	return p.list.Set(models)
}

// checkModel reports why m cannot be priced by this plugin.
func checkModel(m pricing.Model) error {
	for i, e := range m.Endpoints {
		if !contains(endpoints, e) {
			return fmt.Errorf("endpoints[%d]: %q is not an image endpoint (%s)", i, e, strings.Join(endpoints, ", "))
		}
	}
	if m.ContextWindow != 0 || m.MaxOutput != 0 {
		return fmt.Errorf("context_window and max_output do not apply to an image model")
	}
	for name, price := range m.Routes {
		if err := checkPrice(price); err != nil {
			return fmt.Errorf("routes.%s: %w", name, err)
		}
	}
	if m.Reference != nil {
		if err := checkPrice(*m.Reference); err != nil {
			return fmt.Errorf("reference_price: %w", err)
		}
	}
	return nil
}

func checkPrice(price pricing.Price) error {
	if price.Unit != pricing.PerImage {
		return fmt.Errorf("unit: %q, want %q", price.Unit, pricing.PerImage)
	}
	for _, t := range tiers {
		if _, ok := price.Sizes[t]; !ok {
			return fmt.Errorf("sizes: no price for tier %q (the tiers are %s)", t, strings.Join(tiers, ", "))
		}
	}
	for t := range price.Sizes {
		if !contains(tiers, t) {
			return fmt.Errorf("sizes: tier %q is not one this plugin charges (%s)", t, strings.Join(tiers, ", "))
		}
	}
	return nil
}

// admit validates the call and quotes tier price × n. An omitted or "auto"
// size is pinned: the result sets size to 1024x1024 in the forwarded body.
func (p *plugin) admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	price, err := p.route(req.Model, req.Route, req.Endpoint)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	r, aerr := parseParams(req.Params)
	if aerr != nil {
		return abi.AdmitResult{}, aerr
	}
	hold, err := price.Charge(pricing.Usage{Images: r.n, SizeTier: r.tier})
	if err != nil {
		return abi.AdmitResult{}, sdk.Internal("quoting model %s on route %s: %v", req.Model, req.Route, err)
	}
	res := abi.AdmitResult{Hold: int64(hold)}
	if r.pinned {
		res.Set = []abi.Param{{Name: paramSize, Value: pinnedSize}}
	}
	return res, nil
}

// settle charges tier price × the images the provider returned
// (Usage.Images), capped at n: the tier comes from the size param (present
// after admit's Set), never from Usage.SizeTier. No images, no charge.
func (p *plugin) settle(req abi.SettleRequest) (abi.SettleResult, error) {
	price, err := p.route(req.Model, req.Route, req.Endpoint)
	if err != nil {
		return abi.SettleResult{}, err
	}
	r, aerr := parseParams(req.Params)
	if aerr != nil {
		// The params passed admit; failing now is the host's fault.
		return abi.SettleResult{}, sdk.Internal("settle: the admitted params do not validate: %s", aerr.Message)
	}
	if req.Usage.Images < 0 {
		return abi.SettleResult{}, sdk.Internal("usage images is negative (%d)", req.Usage.Images)
	}
	charge, err := price.Charge(pricing.Usage{Images: min(req.Usage.Images, r.n), SizeTier: r.tier})
	if err != nil {
		return abi.SettleResult{}, sdk.Internal("pricing model %s on route %s: %v", req.Model, req.Route, err)
	}
	return abi.SettleResult{Charge: int64(charge)}, nil
}

// route looks up the model's price on route (403 when the model or route is
// not sold) and checks that the model is served on endpoint (400 naming
// model) and is priced per image (500 otherwise: configure forbids it).
func (p *plugin) route(model, route, endpoint string) (pricing.Price, error) {
	m, price, err := p.list.Route(model, route)
	if err != nil {
		return pricing.Price{}, err
	}
	if !contains(m.Endpoints, endpoint) {
		return pricing.Price{}, sdk.Invalid("model", "model %s is not served on the %s endpoint (it is served on %s)", m.ID, endpoint, strings.Join(m.Endpoints, ", "))
	}
	if price.Unit != pricing.PerImage {
		return pricing.Price{}, sdk.Internal("model %s route %s is priced %s, not per_image", m.ID, route, price.Unit)
	}
	return price, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

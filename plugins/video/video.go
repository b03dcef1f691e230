package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pluginName is the plugin's name: video.wasm, video.json.
const pluginName = "video"

// resolutions are the resolutions this plugin charges, cheapest first; a
// price list must price exactly these.
var resolutions = []string{"480p", "720p", "1080p"}

// plugin is the video plugin: its price list and the embedded default.
type plugin struct {
	list     sdk.PriceList
	fallback []byte // the embedded video.json, used when the host passes none
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

// configure loads config (video.json from the host), or the embedded list
// when config is empty. Besides pricing.ParseModels' rules, every model must
// be served only on video_generation, and every route price (and the
// reference price) must be per_second with exactly the resolutions 480p,
// 720p and 1080p. A failed configure keeps the previous list.
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
		if e != pricing.EndpointVideo {
			return fmt.Errorf("endpoints[%d]: %q is not the video endpoint (%s)", i, e, pricing.EndpointVideo)
		}
	}
	if m.ContextWindow != 0 || m.MaxOutput != 0 {
		return fmt.Errorf("context_window and max_output do not apply to a video model")
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
	if price.Unit != pricing.PerSecond {
		return fmt.Errorf("unit: %q, want %q", price.Unit, pricing.PerSecond)
	}
	for _, r := range resolutions {
		if _, ok := price.Resolutions[r]; !ok {
			return fmt.Errorf("resolutions: no price for %q (the resolutions are %s)", r, strings.Join(resolutions, ", "))
		}
	}
	for r := range price.Resolutions {
		if !contains(resolutions, r) {
			return fmt.Errorf("resolutions: %q is not one this plugin charges (%s)", r, strings.Join(resolutions, ", "))
		}
	}
	return nil
}

// admit validates the call and quotes duration × the resolution's price per
// second. It always sets duration and resolution to their effective values
// (defaults applied), for the gateway to record and settle with.
func (p *plugin) admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	price, err := p.route(req.Model, req.Route, req.Endpoint)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	r, aerr := parseParams(req.Params)
	if aerr != nil {
		return abi.AdmitResult{}, aerr
	}
	hold, err := price.Charge(pricing.Usage{Seconds: r.duration, Resolution: r.resolution})
	if err != nil {
		return abi.AdmitResult{}, sdk.Internal("quoting model %s on route %s: %v", req.Model, req.Route, err)
	}
	return abi.AdmitResult{Hold: int64(hold), Set: []abi.Param{
		{Name: paramDuration, Value: strconv.FormatInt(r.duration, 10)},
		{Name: paramResolution, Value: r.resolution},
	}}, nil
}

// settle charges Usage.Seconds × the price per second of Usage.Resolution,
// which the gateway sets from the effective params when the provider
// accepted the job. No seconds (the job was not accepted), no charge; an
// empty Usage.Resolution falls back to the admitted resolution param.
func (p *plugin) settle(req abi.SettleRequest) (abi.SettleResult, error) {
	price, err := p.route(req.Model, req.Route, req.Endpoint)
	if err != nil {
		return abi.SettleResult{}, err
	}
	u := req.Usage
	switch {
	case u.Seconds < 0:
		return abi.SettleResult{}, sdk.Internal("usage seconds is negative (%d)", u.Seconds)
	case u.Seconds == 0:
		return abi.SettleResult{}, nil
	}
	resolution := u.Resolution
	if resolution == "" {
		r, aerr := parseParams(req.Params)
		if aerr != nil {
			return abi.SettleResult{}, sdk.Internal("settle: usage has no resolution, and the admitted params do not validate: %s", aerr.Message)
		}
		resolution = r.resolution
	}
	if !contains(resolutions, resolution) {
		return abi.SettleResult{}, sdk.Internal("usage resolution %s is not one of %s", quote(resolution), strings.Join(resolutions, ", "))
	}
	charge, err := price.Charge(pricing.Usage{Seconds: u.Seconds, Resolution: resolution})
	if err != nil {
		return abi.SettleResult{}, sdk.Internal("pricing model %s on route %s: %v", req.Model, req.Route, err)
	}
	return abi.SettleResult{Charge: int64(charge)}, nil
}

// route looks up the model's price on route (403 when the model or route is
// not sold) and checks that the model is served on endpoint (400 naming
// model) and is priced per second (500 otherwise: configure forbids it).
func (p *plugin) route(model, route, endpoint string) (pricing.Price, error) {
	m, price, err := p.list.Route(model, route)
	if err != nil {
		return pricing.Price{}, err
	}
	if !contains(m.Endpoints, endpoint) {
		return pricing.Price{}, sdk.Invalid("model", "model %s is not served on the %s endpoint (it is served on %s)", m.ID, endpoint, strings.Join(m.Endpoints, ", "))
	}
	if price.Unit != pricing.PerSecond {
		return pricing.Price{}, sdk.Internal("model %s route %s is priced %s, not per_second", m.ID, route, price.Unit)
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

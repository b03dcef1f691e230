package main

import (
	"fmt"

	"github.com/modelrelay/modelrelay/plugins/internal/pricecheck"
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

// plugin is the images plugin: its price list, loaded from images.json or
// the embedded default (defaultConfig), every model through checkModel.
type plugin struct{ list sdk.CheckedList }

func newPlugin(defaultConfig []byte) *plugin {
	return &plugin{list: sdk.CheckedList{Name: pluginName, Fallback: defaultConfig, Check: checkModel}}
}

// Plugin wires the handlers for sdk.Register.
func (p *plugin) Plugin() sdk.Plugin { return p.list.Plugin(p.admit, p.settle) }

// checkModel reports why m cannot be priced by this plugin, besides
// pricing.ParseModels' rules: every model must be served only on image
// endpoints, and every route price (and the reference price) must be
// per_image with exactly the tiers 1K and 2K.
func checkModel(m pricing.Model) error {
	if err := pricecheck.Endpoints(m, "an image endpoint", endpoints...); err != nil {
		return err
	}
	if m.ContextWindow != 0 || m.MaxOutput != 0 {
		return fmt.Errorf("context_window and max_output do not apply to an image model")
	}
	return pricecheck.Prices(m, checkPrice)
}

func checkPrice(price pricing.Price) error {
	if price.Unit != pricing.PerImage {
		return fmt.Errorf("unit: %q, want %q", price.Unit, pricing.PerImage)
	}
	return pricecheck.Tiers("sizes", "tier", price.Sizes, tiers)
}

// admit validates the call and quotes tier price × n. An omitted or "auto"
// size is pinned: the result sets size to 1024x1024 in the forwarded body.
func (p *plugin) admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	price, err := p.list.UnitRoute(req.Model, req.Route, req.Endpoint, pricing.PerImage)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	r, aerr := parseParams(req.Params)
	if aerr != nil {
		return abi.AdmitResult{}, aerr
	}
	res, err := sdk.Hold(req, price, pricing.Usage{Images: r.n, SizeTier: r.tier})
	if err == nil && r.pinned {
		res.Set = []abi.Param{{Name: paramSize, Value: pinnedSize}}
	}
	return res, err
}

// settle charges tier price × the images the provider returned
// (Usage.Images), capped at n: the tier comes from the size param (present
// after admit's Set), never from Usage.SizeTier. No images, no charge.
func (p *plugin) settle(req abi.SettleRequest) (abi.SettleResult, error) {
	price, err := p.list.UnitRoute(req.Model, req.Route, req.Endpoint, pricing.PerImage)
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
	return sdk.Charge(req, price, pricing.Usage{Images: min(req.Usage.Images, r.n), SizeTier: r.tier})
}

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelrelay/modelrelay/plugins/internal/pricecheck"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pluginName is the plugin's name: video.wasm, video.json.
const pluginName = "video"

// resolutions are the resolutions this plugin charges, cheapest first; a
// price list must price exactly these.
var resolutions = []string{"480p", "720p", "1080p"}

// plugin is the video plugin: its price list, loaded from video.json or
// the embedded default (defaultConfig), every model through checkModel.
type plugin struct{ list sdk.CheckedList }

func newPlugin(defaultConfig []byte) *plugin {
	return &plugin{list: sdk.CheckedList{Name: pluginName, Fallback: defaultConfig, Check: checkModel}}
}

// Plugin wires the handlers for sdk.Register.
func (p *plugin) Plugin() sdk.Plugin { return p.list.Plugin(p.admit, p.settle) }

// checkModel reports why m cannot be priced by this plugin, besides
// pricing.ParseModels' rules: every model must be served only on
// video_generation, and every route price (and the reference price) must be
// per_second with exactly the resolutions 480p, 720p and 1080p.
func checkModel(m pricing.Model) error {
	if err := pricecheck.Endpoints(m, "the video endpoint", pricing.EndpointVideo); err != nil {
		return err
	}
	if m.ContextWindow != 0 || m.MaxOutput != 0 {
		return fmt.Errorf("context_window and max_output do not apply to a video model")
	}
	return pricecheck.Prices(m, checkPrice)
}

func checkPrice(price pricing.Price) error {
	if price.Unit != pricing.PerSecond {
		return fmt.Errorf("unit: %q, want %q", price.Unit, pricing.PerSecond)
	}
	return pricecheck.Tiers("resolutions", "", price.Resolutions, resolutions)
}

// admit validates the call and quotes duration × the resolution's price per
// second. It always sets duration and resolution to their effective values
// (defaults applied), for the gateway to record and settle with.
func (p *plugin) admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	price, err := p.list.UnitRoute(req.Model, req.Route, req.Endpoint, pricing.PerSecond)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	r, aerr := parseParams(req.Params)
	if aerr != nil {
		return abi.AdmitResult{}, aerr
	}
	res, err := sdk.Hold(req, price, pricing.Usage{Seconds: r.duration, Resolution: r.resolution})
	if err != nil {
		return abi.AdmitResult{}, err
	}
	res.Set = []abi.Param{
		{Name: paramDuration, Value: strconv.FormatInt(r.duration, 10)},
		{Name: paramResolution, Value: r.resolution},
	}
	return res, nil
}

// settle charges Usage.Seconds × the price per second of Usage.Resolution,
// which the gateway sets from the effective params when the provider
// accepted the job. No seconds (the job was not accepted), no charge; an
// empty Usage.Resolution falls back to the admitted resolution param.
func (p *plugin) settle(req abi.SettleRequest) (abi.SettleResult, error) {
	price, err := p.list.UnitRoute(req.Model, req.Route, req.Endpoint, pricing.PerSecond)
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
	if !slices.Contains(resolutions, resolution) {
		return abi.SettleResult{}, sdk.Internal("usage resolution %s is not one of %s", sdk.QuoteValue(resolution), strings.Join(resolutions, ", "))
	}
	return sdk.Charge(req, price, pricing.Usage{Seconds: u.Seconds, Resolution: resolution})
}

package main

import (
	"fmt"

	"github.com/modelrelay/modelrelay/plugins/internal/pricecheck"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pluginName is the plugin's name: systemone.wasm, systemone.json.
const pluginName = "systemone"

// plugin is the systemone plugin: its price list, loaded from systemone.json or
// the embedded default (defaultConfig), every model through checkModel.
type plugin struct{ list sdk.CheckedList }

func newPlugin(defaultConfig []byte) *plugin {
	return &plugin{list: sdk.CheckedList{Name: pluginName, Fallback: defaultConfig, Check: checkModel}}
}

// Plugin wires the handlers for sdk.Register.
func (p *plugin) Plugin() sdk.Plugin { return p.list.Plugin(p.admit, p.list.TokenSettle) }

// checkModel reports why m cannot be priced by this plugin, besides
// pricing.ParseModels' rules: every model must be served only on systemone,
// and every route price (and the reference price) must be
// per_million_tokens with an output price of 0 and no cache or long-context
// prices: the typed-question usage is input tokens (and free output), and
// the hold covers input only.
func checkModel(m pricing.Model) error {
	if err := pricecheck.Endpoints(m, "the typed-question endpoint", pricing.EndpointSystemOne); err != nil {
		return err
	}
	return pricecheck.Prices(m, checkPrice)
}

func checkPrice(price pricing.Price) error {
	switch {
	case price.Unit != pricing.PerMillionTokens:
		return fmt.Errorf("unit: %q, want %q", price.Unit, pricing.PerMillionTokens)
	case price.Output != 0:
		return fmt.Errorf("output: %s, want 0 (typed-question output is free)", price.Output)
	case price.CacheRead != 0 || price.CacheWrite != 0 || price.CacheWrite1h != 0 || price.LongContext != nil:
		return fmt.Errorf("cache and long_context prices do not apply to typed questions")
	}
	return nil
}

// admit checks the model, route and endpoint and quotes the hold with
// sdk.PriceList.TokenAdmit (the host's estimate of the body's input tokens
// × the input price; output is free), then validates the questions and the
// state size from the params.
func (p *plugin) admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	res, err := p.list.TokenAdmit(req)
	if err != nil {
		return abi.AdmitResult{}, err
	}
	if _, aerr := parseParams(req.Params); aerr != nil {
		return abi.AdmitResult{}, aerr
	}
	return res, nil
}

package main

import (
	"fmt"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pluginName is the plugin's name: systemone.wasm, systemone.json.
const pluginName = "systemone"

// plugin is the systemone plugin: its price list and the embedded default.
type plugin struct {
	list     sdk.PriceList
	fallback []byte // the embedded systemone.json, used when the host passes none
}

func newPlugin(defaultConfig []byte) *plugin { return &plugin{fallback: defaultConfig} }

// Plugin wires the handlers for sdk.Register.
func (p *plugin) Plugin() sdk.Plugin {
	return sdk.Plugin{
		Name:      pluginName,
		Configure: p.configure,
		Describe:  p.list.Describe,
		Admit:     p.admit,
		Settle:    p.list.TokenSettle,
	}
}

// configure loads config (systemone.json from the host), or the embedded
// list when config is empty. Besides pricing.ParseModels' rules, every
// model must be served only on systemone, and every route price (and the
// reference price) must be per_million_tokens with an output price of 0 and
// no cache or long-context prices: the typed-question usage is input tokens
// (and free output), and the hold covers input only. A failed configure
// keeps the previous list.
func (p *plugin) configure(config []byte) error {
	return p.list.Load(pluginName, config, p.fallback, checkModel)
}

// checkModel reports why m cannot be priced by this plugin.
func checkModel(m pricing.Model) error {
	for i, e := range m.Endpoints {
		if e != pricing.EndpointSystemOne {
			return fmt.Errorf("endpoints[%d]: %q is not the typed-question endpoint (%s)", i, e, pricing.EndpointSystemOne)
		}
	}
	return sdk.CheckPrices(m, checkPrice)
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

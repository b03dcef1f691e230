package sdk

import (
	"fmt"
	"strings"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// This file holds what a plugin that prices per unit (per image, per second,
// per request) repeats around PriceList.Route and pricing.Price.Charge:
// loading a checked price list, finding a route's price, and turning a
// priced usage into a hold or a charge with the errors named the same way in
// every plugin.

// load configures l as plugin name: from config (NAME.json from the host),
// or from fallback (the plugin's embedded default) when config is empty.
// The list is parsed with pricing.ParseModels; then check, when not nil,
// must accept every model (its error is reported as "models[i] (id): …");
// then set validates the list. Empty config and fallback is an error that
// says where the price list belongs. A failed load keeps the previous list.
func (l *PriceList) load(name string, config, fallback []byte, check func(pricing.Model) error) error {
	if len(config) == 0 {
		config = fallback
	}
	if len(config) == 0 {
		return fmt.Errorf("plugin %s has no price list: put %s.json beside %s.wasm", name, name, name)
	}
	models, err := pricing.ParseModels(config)
	if err != nil {
		return err
	}
	if check != nil {
		for i, m := range models {
			if err := check(m); err != nil {
				return fmt.Errorf("models[%d] (%s): %w", i, m.ID, err)
			}
		}
	}
	return l.set(models)
}

// CheckedList is the price list of a plugin that loads its own prices:
// Configure loads NAME.json from the host, or Fallback (the plugin's
// embedded default) when the host passes none, every model through Check.
// It is what a first-party plugin and TokenPlugin share; the plugin adds its
// own Admit and Settle with Plugin.
type CheckedList struct {
	PriceList
	// Name is the plugin's name (NAME.wasm, NAME.json).
	Name string
	// Fallback is the embedded default price list; nil for none.
	Fallback []byte
	// Check, when not nil, must accept every model of the list.
	Check func(pricing.Model) error
}

// Configure loads config, or Fallback when config is empty; a failed load
// keeps the previous list.
func (c *CheckedList) Configure(config []byte) error {
	return c.load(c.Name, config, c.Fallback, c.Check)
}

// Plugin is the plugin that serves the list with admit and settle: its
// Configure is c's and its Describe the list's.
func (c *CheckedList) Plugin(admit func(abi.AdmitRequest) (abi.AdmitResult, error), settle func(abi.SettleRequest) (abi.SettleResult, error)) Plugin {
	return Plugin{Name: c.Name, Configure: c.Configure, Describe: c.Describe, Admit: admit, Settle: settle}
}

// UnitRoute returns the price of model on route, for a call to endpoint.
// An unknown model or route is a 403 (as in Route); a model not served on
// endpoint is a 400 naming the field model; a price whose unit is not unit
// is an internal error (a plugin's configure should have refused it).
func (l *PriceList) UnitRoute(model, route, endpoint string, unit pricing.Unit) (pricing.Price, error) {
	m, price, err := l.Route(model, route)
	if err != nil {
		return pricing.Price{}, err
	}
	if !hasEndpoint(m, endpoint) {
		return pricing.Price{}, Invalid("model", "model %s is not served on the %s endpoint (it is served on %s)", m.ID, endpoint, strings.Join(m.Endpoints, ", "))
	}
	if price.Unit != unit {
		return pricing.Price{}, Internal("model %s route %s is priced %s, not %s", m.ID, route, price.Unit, unit)
	}
	return price, nil
}

// Hold prices u, the most the admitted call req can use, with price: the
// hold of the AdmitResult. A usage Charge rejects (a size tier or
// resolution the price lacks, overflow) is an internal error naming the
// model and route.
func Hold(req abi.AdmitRequest, price pricing.Price, u pricing.Usage) (abi.AdmitResult, error) {
	hold, err := price.Charge(u)
	if err != nil {
		return abi.AdmitResult{}, Internal("quoting model %s on route %s: %v", req.Model, req.Route, err)
	}
	return abi.AdmitResult{Hold: int64(hold)}, nil
}

// Charge prices u, what the settled call req used, with price: the charge
// of the SettleResult. A usage Charge rejects is an internal error naming
// the model and route.
func Charge(req abi.SettleRequest, price pricing.Price, u pricing.Usage) (abi.SettleResult, error) {
	charge, err := price.Charge(u)
	if err != nil {
		return abi.SettleResult{}, Internal("pricing model %s on route %s: %v", req.Model, req.Route, err)
	}
	return abi.SettleResult{Charge: int64(charge)}, nil
}

package pricecheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelrelay/modelrelay/pricing"
)

// Endpoints checks that m is served only on the endpoints in allowed;
// the error names the endpoint at fault as not being what ("an image
// endpoint") and lists allowed.
func Endpoints(m pricing.Model, what string, allowed ...string) error {
	for i, e := range m.Endpoints {
		if !slices.Contains(allowed, e) {
			return fmt.Errorf("endpoints[%d]: %q is not %s (%s)", i, e, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Prices runs check on every route price of m and on its reference
// price, when it has one. The error names the price at fault:
// "routes.NAME: …" or "reference_price: …".
func Prices(m pricing.Model, check func(pricing.Price) error) error {
	for name, price := range m.Routes {
		if err := check(price); err != nil {
			return fmt.Errorf("routes.%s: %w", name, err)
		}
	}
	if m.Reference != nil {
		if err := check(*m.Reference); err != nil {
			return fmt.Errorf("reference_price: %w", err)
		}
	}
	return nil
}

// Tiers checks that prices (a price list's sizes or resolutions) has a
// price for exactly the names in want: the error names field, and the name
// at fault prefixed with noun when noun is not empty ("tier \"4K\"").
func Tiers(field, noun string, prices map[string]pricing.Nano, want []string) error {
	label := func(name string) string {
		if noun == "" {
			return strconv.Quote(name)
		}
		return noun + " " + strconv.Quote(name)
	}
	for _, w := range want {
		if _, ok := prices[w]; !ok {
			return fmt.Errorf("%s: no price for %s (this plugin charges %s)", field, label(w), strings.Join(want, ", "))
		}
	}
	for name := range prices {
		if !slices.Contains(want, name) {
			return fmt.Errorf("%s: %s is not one this plugin charges (%s)", field, label(name), strings.Join(want, ", "))
		}
	}
	return nil
}

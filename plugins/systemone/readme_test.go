package main

import (
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

// readmeTable is the README's price table: one row per model and route, USD
// per million tokens, exact (Nano.String).
var readmeTable = sdktest.PriceTable{
	Plugin: pluginName,
	Header: "| Model | Endpoints | Route | Input | Output |\n" +
		"|---|---|---|---:|---:|\n",
	Routes: []string{"standard", "economy"},
	PriceCells: func(p pricing.Price) []string {
		return []string{usd(p.Input), usd(p.Output)}
	},
}

func TestReadmePrices(t *testing.T) {
	sdktest.CheckReadme(t, readmeTable, configured(t).list.Models())
}

// usd formats a price for the README table; a free price is "free".
func usd(n pricing.Nano) string {
	if n == 0 {
		return "free"
	}
	return "$" + n.String()
}

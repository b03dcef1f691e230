package main

import (
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

// readmeTable is the README's price table: one row per model and route, USD
// per image by size tier, exact (Nano.String).
var readmeTable = sdktest.PriceTable{
	Plugin: pluginName,
	Header: "| Model | Endpoints | Route | 1K (up to 1,048,576 px) | 2K (up to 4,194,304 px) |\n" +
		"|---|---|---|---:|---:|\n",
	Routes: []string{"standard", "economy"},
	PriceCells: func(p pricing.Price) []string {
		return []string{usd(p.Sizes[tier1K]), usd(p.Sizes[tier2K])}
	},
}

func TestReadmePrices(t *testing.T) {
	sdktest.CheckReadme(t, readmeTable, configured(t).list.Models())
}

// usd formats a price for the README table.
func usd(n pricing.Nano) string { return "$" + n.String() }

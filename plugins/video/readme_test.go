package main

import (
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

// readmeTable is the README's price table: one row per model and route, USD
// per second by resolution, exact (Nano.String).
var readmeTable = sdktest.PriceTable{
	Plugin: pluginName,
	Header: "| Model | Endpoints | Route | 480p | 720p | 1080p |\n" +
		"|---|---|---|---:|---:|---:|\n",
	Routes: []string{"standard", "economy"},
	PriceCells: func(p pricing.Price) []string {
		cells := make([]string, len(resolutions))
		for i, r := range resolutions {
			cells[i] = usd(p.Resolutions[r])
		}
		return cells
	},
}

func TestReadmePrices(t *testing.T) {
	sdktest.CheckReadme(t, readmeTable, configured(t).list.Models())
}

// usd formats a price for the README table.
func usd(n pricing.Nano) string { return "$" + n.String() }

package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

// readmeTable is the README's price table, generated from the price list:
// one row per model and route, USD per million tokens, exact (Nano.String).
var readmeTable = sdktest.PriceTable{
	Plugin: "tokens",
	Header: "| Model | Endpoints | Context | Max output | Route | Input | Output | Cache read | Cache write 5m | Cache write 1h | Long context |\n" +
		"|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n",
	Routes: []string{"standard", "economy"},
	ModelCells: func(m pricing.Model) []string {
		return []string{strconv.FormatInt(m.ContextWindow, 10), strconv.FormatInt(m.MaxOutput, 10)}
	},
	PriceCells: func(p pricing.Price) []string {
		return []string{usd(p.Input), usd(p.Output), usd(p.CacheRead), usd(p.CacheWrite), usd(p.CacheWrite1h), longContext(p)}
	},
}

func TestReadmePrices(t *testing.T) { sdktest.CheckReadme(t, readmeTable, loadList(t)) }

func usd(n pricing.Nano) string {
	if n == 0 {
		return "–"
	}
	return "$" + n.String()
}

func longContext(p pricing.Price) string {
	l := p.LongContext
	if l == nil {
		return "–"
	}
	return fmt.Sprintf("above %d input: %s / %s", l.MinInputTokens, usd(l.Input), usd(l.Output))
}

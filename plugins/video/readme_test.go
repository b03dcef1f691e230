package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const (
	tableBegin = "<!-- prices:begin (generated from video.json by TestReadmePrices; RELAY_UPDATE=1 rewrites it) -->"
	tableEnd   = "<!-- prices:end -->"
)

// priceTable renders the README's price table: one row per model and
// route, USD per second by resolution, exact (Nano.String).
func priceTable(models []pricing.Model) string {
	var b strings.Builder
	b.WriteString("| Model | Endpoints | Route | 480p | 720p | 1080p |\n")
	b.WriteString("|---|---|---|---:|---:|---:|\n")
	for _, m := range models {
		for _, r := range []string{"standard", "economy"} {
			p, ok := m.Routes[r]
			if !ok {
				continue
			}
			route := r
			if r == m.AutoRoute {
				route += " (auto)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.ID, strings.Join(m.Endpoints, ", "), route, perResolution(p))
		}
		if ref := m.Reference; ref != nil {
			fmt.Fprintf(&b, "| %s | | reference (%s) | %s |\n", m.ID, m.ReferenceSource.Name, perResolution(*ref))
		}
	}
	return b.String()
}

func TestReadmePrices(t *testing.T) {
	models := configured(t).list.Models()
	for _, m := range models {
		for r := range m.Routes {
			if r != "standard" && r != "economy" {
				t.Fatalf("%s: route %q is not in the README table", m.ID, r)
			}
		}
	}
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, tableBegin), strings.Index(text, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q … %q", tableBegin, tableEnd)
	}
	want := priceTable(models)
	if got := text[i+len(tableBegin)+1 : j]; got == want {
		return
	}
	if sdktest.Updating() {
		text = text[:i+len(tableBegin)+1] + want + text[j:]
		if err := os.WriteFile("README.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's price table is not video.json's; run with RELAY_UPDATE=1. Want:\n%s", want)
}

// usd formats a price for the README table.
func usd(n pricing.Nano) string { return "$" + n.String() }

// perResolution is the price cells of p, one per resolution.
func perResolution(p pricing.Price) string {
	cells := make([]string, len(resolutions))
	for i, r := range resolutions {
		cells[i] = usd(p.Resolutions[r])
	}
	return strings.Join(cells, " | ")
}

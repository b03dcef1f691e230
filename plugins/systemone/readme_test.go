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
	tableBegin = "<!-- prices:begin (generated from systemone.json by TestReadmePrices; RELAY_UPDATE=1 rewrites it) -->"
	tableEnd   = "<!-- prices:end -->"
)

// priceTable renders the README's price table: one row per model and
// route, USD per million tokens, exact (Nano.String).
func priceTable(models []pricing.Model) string {
	var b strings.Builder
	b.WriteString("| Model | Endpoints | Route | Input | Output |\n")
	b.WriteString("|---|---|---|---:|---:|\n")
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
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m.ID, strings.Join(m.Endpoints, ", "), route, usd(p.Input), usd(p.Output))
		}
		if ref := m.Reference; ref != nil {
			fmt.Fprintf(&b, "| %s | | reference (%s) | %s | %s |\n", m.ID, m.ReferenceSource.Name, usd(ref.Input), usd(ref.Output))
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
	t.Fatalf("README.md's price table is not systemone.json's; run with RELAY_UPDATE=1. Want:\n%s", want)
}

// usd formats a price for the README table; a free price is "free".
func usd(n pricing.Nano) string {
	if n == 0 {
		return "free"
	}
	return "$" + n.String()
}

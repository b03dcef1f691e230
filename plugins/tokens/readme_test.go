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
	tableBegin = "<!-- prices:begin (generated from tokens.json by TestReadmePrices; RELAY_UPDATE=1 rewrites it) -->"
	tableEnd   = "<!-- prices:end -->"
)

// priceTable renders the README's price table from the price list: one row
// per model and route, USD per million tokens, exact (Nano.String).
func priceTable(models []pricing.Model) string {
	var b strings.Builder
	b.WriteString("| Model | Endpoints | Context | Max output | Route | Input | Output | Cache read | Cache write 5m | Cache write 1h | Long context |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, m := range models {
		routes := []string{"standard", "economy"}
		for _, r := range routes {
			p, ok := m.Routes[r]
			if !ok {
				continue
			}
			route := r
			if r == m.AutoRoute {
				route += " (auto)"
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
				m.ID, strings.Join(m.Endpoints, ", "), m.ContextWindow, m.MaxOutput, route,
				usd(p.Input), usd(p.Output), usd(p.CacheRead), usd(p.CacheWrite), usd(p.CacheWrite1h), longContext(p))
		}
		if ref := m.Reference; ref != nil {
			fmt.Fprintf(&b, "| %s | | | | reference (%s) | %s | %s | %s | %s | %s | %s |\n",
				m.ID, m.ReferenceSource.Name, usd(ref.Input), usd(ref.Output), usd(ref.CacheRead), usd(ref.CacheWrite), usd(ref.CacheWrite1h), longContext(*ref))
		}
	}
	return b.String()
}

func TestReadmePrices(t *testing.T) {
	for _, m := range loadList(t) {
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
	want := priceTable(loadList(t))
	got := text[i+len(tableBegin)+1 : j]
	if got == want {
		return
	}
	if sdktest.Updating() {
		text = text[:i+len(tableBegin)+1] + want + text[j:]
		if err := os.WriteFile("README.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's price table is not tokens.json's; run with RELAY_UPDATE=1. Want:\n%s", want)
}

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

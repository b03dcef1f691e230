package sdktest

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

// PriceTable is the price table of a plugin's README.md, generated from its
// price list: one row per model and route, in Routes order (the auto route
// marked "(auto)"), then the model's reference price when it has one. A row
// is
//
//	| ID | ENDPOINTS | MODEL CELLS… | ROUTE | PRICE CELLS… |
//
// and a reference row leaves the endpoints and model cells blank and names
// its route "reference (SOURCE)".
type PriceTable struct {
	// Plugin is the plugin's name; the table's begin marker names
	// Plugin.json.
	Plugin string
	// Header is the header and delimiter rows, each ending in a newline.
	Header string
	// Routes are the routes the table lists, in row order; a model priced
	// on another route fails CheckReadme.
	Routes []string
	// ModelCells, when not nil, are a model's cells between Endpoints and
	// Route.
	ModelCells func(m pricing.Model) []string
	// PriceCells are a price's cells after Route.
	PriceCells func(p pricing.Price) []string
}

// ReadmeEnd is the marker after a README's generated price table.
const ReadmeEnd = "<!-- prices:end -->"

// Begin is the marker before the generated price table.
func (pt PriceTable) Begin() string {
	return "<!-- prices:begin (generated from " + pt.Plugin + ".json by TestReadmePrices; RELAY_UPDATE=1 rewrites it) -->"
}

// Render returns the table of models: Header, then the rows.
func (pt PriceTable) Render(models []pricing.Model) string {
	var b strings.Builder
	b.WriteString(pt.Header)
	for _, m := range models {
		var mc []string
		if pt.ModelCells != nil {
			mc = pt.ModelCells(m)
		}
		for _, r := range pt.Routes {
			p, ok := m.Routes[r]
			if !ok {
				continue
			}
			route := r
			if r == m.AutoRoute {
				route += " (auto)"
			}
			row(&b, m.ID, strings.Join(m.Endpoints, ", "), mc, route, pt.PriceCells(p))
		}
		if ref := m.Reference; ref != nil {
			source := ""
			if m.ReferenceSource != nil {
				source = m.ReferenceSource.Name
			}
			row(&b, m.ID, "", make([]string, len(mc)), "reference ("+source+")", pt.PriceCells(*ref))
		}
	}
	return b.String()
}

// row writes one table row; an empty cell is written as "| ".
func row(b *strings.Builder, id, endpoints string, modelCells []string, route string, priceCells []string) {
	cell := func(s string) {
		b.WriteString("| ")
		if s != "" {
			b.WriteString(s)
			b.WriteByte(' ')
		}
	}
	cell(id)
	cell(endpoints)
	for _, c := range modelCells {
		cell(c)
	}
	cell(route)
	for _, c := range priceCells {
		cell(c)
	}
	b.WriteString("|\n")
}

// CheckReadme fails the test unless README.md in the working directory
// holds, between pt.Begin() and ReadmeEnd, the table pt renders from models,
// or when a model is priced on a route the table does not list. In update
// mode (Updating) it rewrites the table instead of failing on a difference.
func CheckReadme(t testing.TB, pt PriceTable, models []pricing.Model) {
	t.Helper()
	for _, m := range models {
		for r := range m.Routes {
			if !slices.Contains(pt.Routes, r) {
				t.Fatalf("%s: route %q is not in the README table", m.ID, r)
			}
		}
	}
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text, begin := string(data), pt.Begin()
	i, j := strings.Index(text, begin), strings.Index(text, ReadmeEnd)
	if i < 0 || j < i+len(begin)+1 {
		t.Fatalf("README.md lacks the markers %q … %q", begin, ReadmeEnd)
	}
	want := pt.Render(models)
	if got := text[i+len(begin)+1 : j]; got == want {
		return
	}
	if Updating() {
		text = text[:i+len(begin)+1] + want + text[j:]
		if err := os.WriteFile("README.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's price table is not %s.json's; run with RELAY_UPDATE=1. Want:\n%s", pt.Plugin, want)
}

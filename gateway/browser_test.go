package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/browsertest"
	"github.com/modelrelay/modelrelay/pricing"
)

// displayUSD is how the page must show an amount: "$2.70", "$0.04494",
// "$1,234.50"; zero reads "Free".
func displayUSD(n pricing.Nano) string {
	if n == 0 {
		return "Free"
	}
	s := n.String()
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return "$" + b.String() + "." + frac
}

// displaySaving is the saving against the list price the page must show
// under a route price: "−10%", "−12.5%", "+5% vs list", "list price".
func displaySaving(ours, ref pricing.Nano) string {
	if ref <= 0 {
		return ""
	}
	if ours == ref {
		return "list price"
	}
	diff := int64(ref - ours)
	sign := "−"
	if diff < 0 {
		diff, sign = -diff, "+"
	}
	tenths := (diff*2000/int64(ref) + 1) / 2
	s := strconv.FormatInt(tenths/10, 10)
	if tenths%10 != 0 {
		s += "." + strconv.FormatInt(tenths%10, 10)
	}
	if sign == "+" {
		return "+" + s + "% vs list"
	}
	return sign + s + "%"
}

func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func TestDisplayUSD(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    pricing.Nano
		want string
	}{
		{0, "Free"}, {2_700_000_000, "$2.70"}, {3_000_000_000, "$3.00"}, {44_940_000, "$0.04494"},
		{1, "$0.000000001"}, {1_234_500_000_000, "$1,234.50"}, {1_125_000_000, "$1.125"},
		{123_456_789_000_000_000, "$123,456,789.00"},
	}
	for _, tc := range tests {
		if got := displayUSD(tc.n); got != tc.want {
			t.Errorf("displayUSD(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	savings := []struct {
		ours, ref pricing.Nano
		want      string
	}{
		{2_700_000_000, 3_000_000_000, "−10%"}, {35_000_000, 40_000_000, "−12.5%"}, {44_940_000, 50_000_000, "−10.1%"},
		{105, 100, "+5% vs list"}, {7, 7, "list price"}, {1, 0, ""}, {0, 3, "−100%"}, {2, 3, "−33.3%"}, {1, 3, "−66.7%"},
	}
	for _, tc := range savings {
		if got := displaySaving(tc.ours, tc.ref); got != tc.want {
			t.Errorf("displaySaving(%d, %d) = %q, want %q", tc.ours, tc.ref, got, tc.want)
		}
	}
}

// renderedCell is one price cell as the browser shows it.
type renderedCell struct {
	Model  string `json:"model"`
	Route  string `json:"route"` // "" for the list price
	Ref    bool   `json:"ref"`
	Field  string `json:"field"`
	Price  string `json:"price"`
	Saving string `json:"saving"`
}

const readCellsJS = `Array.from(document.querySelectorAll("article[data-model] td[data-field]")).map(function (td) {
  var p = td.querySelector(".price"), s = td.querySelector(".saving");
  return {model: td.closest("article").getAttribute("data-model"), route: td.getAttribute("data-route") || "",
    ref: td.hasAttribute("data-reference"), field: td.getAttribute("data-field"),
    price: p ? p.textContent : "", saving: s ? s.textContent : ""};
})`

const visibleModelsJS = `Array.from(document.querySelectorAll("article[data-model]")).filter(function (a) {
  return !a.hidden && a.offsetParent !== null;
}).map(function (a) { return a.getAttribute("data-model"); })`

// TestPricingPageInBrowser loads /pricing in headless Chromium from a running
// gateway, compares every rendered price with the API's, exercises the
// filters and saves a screenshot.
func TestPricingPageInBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	table, _ := getPriceTable(t, e)
	// Script errors and console errors (a CSP violation is one) fail the test.
	p := &pricingPage{Tab: browsertest.NewTab(t, browsertest.Start(t, 90*time.Second), e.url, ""), t: t, table: table}
	p.Open("/pricing", `body[data-state="ready"]`, "")
	p.CheckProblems()
	p.checkAmounts()
	p.checkFacts()
	p.checkFilters()
	p.CheckProblems()
	p.Screenshot("pricing")
}

// pricingPage is /pricing in a browser tab, and the price table the API
// serves, to compare it with.
type pricingPage struct {
	*browsertest.Tab
	t     *testing.T
	table []wirePriceModel
}

// checkAmounts checks that the page lists the API's models, in its order,
// and shows every amount the API serves, exactly, with its saving.
func (p *pricingPage) checkAmounts() {
	t, table := p.t, p.table
	t.Helper()
	var cells []renderedCell
	var names []string
	p.Run("read the table", chromedp.Evaluate(readCellsJS, &cells), chromedp.Evaluate(visibleModelsJS, &names))
	var want []string
	for _, pm := range table {
		want = append(want, pm.ModelName)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("the page shows %q, the API serves %q", names, want)
	}

	// Every amount the API serves is shown, exactly, with its saving.
	type key struct {
		model, route, field string
		ref                 bool
	}
	shown := map[key]renderedCell{}
	for _, c := range cells {
		shown[key{c.Model, c.Route, c.Field, c.Ref}] = c
	}
	checked := 0
	for _, pm := range table {
		var ref map[string]pricing.Nano
		if pm.ReferencePrice != nil {
			ref = wireAmounts(t, pm.ModelName+" reference", pm.ReferencePrice)
			for field, n := range ref {
				c, ok := shown[key{pm.ModelName, "", field, true}]
				if !ok {
					t.Errorf("%s: the list price %s is not shown", pm.ModelName, field)
					continue
				}
				if c.Price != displayUSD(n) {
					t.Errorf("%s list price %s shows %q, want %q", pm.ModelName, field, c.Price, displayUSD(n))
				}
				checked++
			}
		}
		for route, raw := range pm.RoutePrices {
			for field, n := range wireAmounts(t, pm.ModelName+" "+route, raw) {
				c, ok := shown[key{pm.ModelName, route, field, false}]
				if !ok {
					t.Errorf("%s route %s: %s is not shown", pm.ModelName, route, field)
					continue
				}
				if c.Price != displayUSD(n) {
					t.Errorf("%s route %s %s shows %q, want %q", pm.ModelName, route, field, c.Price, displayUSD(n))
				}
				wantSaving := ""
				if r, ok := ref[field]; ok {
					wantSaving = displaySaving(n, r)
				}
				if c.Saving != wantSaving {
					t.Errorf("%s route %s %s: saving %q, want %q", pm.ModelName, route, field, c.Saving, wantSaving)
				}
				checked++
			}
		}
	}
	if checked < 3*len(table) {
		t.Fatalf("only %d amounts compared for %d models", checked, len(table))
	}
	t.Logf("compared %d rendered amounts of %d models with the API", checked, len(table))
}

// checkFacts checks each model's context window and maximum output.
func (p *pricingPage) checkFacts() {
	t, table := p.t, p.table
	t.Helper()
	var facts []struct {
		Model, Fact, Text string
	}
	p.Run("read the facts", chromedp.Evaluate(`Array.from(document.querySelectorAll("[data-fact]")).map(function (b) {
	  return {Model: b.closest("article").getAttribute("data-model"), Fact: b.getAttribute("data-fact"), Text: b.textContent};
	})`, &facts))
	gotFacts := map[string]string{}
	for _, f := range facts {
		gotFacts[f.Model+" "+f.Fact] = f.Text
	}
	for _, pm := range table {
		for _, f := range []struct {
			name string
			v    *json.Number
		}{{"context_window", pm.ContextWindow}, {"max_output", pm.MaxOutput}} {
			got, ok := gotFacts[pm.ModelName+" "+f.name]
			if f.v == nil {
				if ok {
					t.Errorf("%s shows %s %q, which the API leaves out", pm.ModelName, f.name, got)
				}
				continue
			}
			n, _ := f.v.Int64()
			if got != groupDigits(n) {
				t.Errorf("%s %s shows %q, want %q", pm.ModelName, f.name, got, groupDigits(n))
			}
		}
	}
}

// visible lists the models the page shows.
func (p *pricingPage) visible() []string {
	p.t.Helper()
	var v []string
	p.Run("read the visible models", chromedp.Evaluate(visibleModelsJS, &v))
	return v
}

// expect lists the models the filters should leave shown.
func (p *pricingPage) expect(query, endpoint string) []string {
	var out []string
	for _, pm := range p.table {
		if strings.Contains(strings.ToLower(pm.ModelName), strings.ToLower(query)) &&
			(endpoint == "" || slices.Contains(pm.SupportedEndpointTypes, endpoint)) {
			out = append(out, pm.ModelName)
		}
	}
	return out
}

// filter types query into the name filter and clicks endpoint's chip.
func (p *pricingPage) filter(query, endpoint string) {
	p.t.Helper()
	p.Run("clear the name filter", chromedp.Evaluate(`(function(){var q=document.getElementById("q");q.value="";q.dispatchEvent(new Event("input"));})()`, nil))
	if query != "" {
		p.Run("type into the name filter", chromedp.SendKeys("#q", query, chromedp.ByID))
	}
	p.Run("click the "+endpoint+" chip", chromedp.Click(fmt.Sprintf(`button[data-endpoint=%q]`, endpoint), chromedp.ByQuery))
}

// checkFilters checks the endpoint chips, then that each combination of
// name and endpoint filter shows the models it should, the no-match notice
// when none, and the chip pressed.
func (p *pricingPage) checkFilters() {
	t, table := p.t, p.table
	t.Helper()
	endpoints := map[string]bool{}
	for _, pm := range table {
		for _, ep := range pm.SupportedEndpointTypes {
			endpoints[ep] = true
		}
	}
	var chips []string
	p.Run("read the chips", chromedp.Evaluate(`Array.from(document.querySelectorAll("button[data-endpoint]")).map(function (b) { return b.getAttribute("data-endpoint"); })`, &chips))
	if len(chips) != len(endpoints)+1 || chips[0] != "" {
		t.Errorf("chips %q for endpoints %v", chips, endpoints)
	}
	steps := []struct {
		name, query, endpoint string
	}{
		{"name sonnet", "sonnet", ""},
		{"name, case-insensitive", "MODELB", ""},
		{"endpoint messages", "", pricing.EndpointMessages},
		{"endpoint responses and name", "modelc", pricing.EndpointResponses},
		{"endpoint chat", "", pricing.EndpointChat},
		{"no match", "zzz-no-such-model", ""},
		{"everything again", "", ""},
	}
	if endpoints[pricing.EndpointImages] {
		steps = append(steps[:len(steps)-1], struct{ name, query, endpoint string }{"endpoint images", "", pricing.EndpointImages}, steps[len(steps)-1])
	}
	for _, s := range steps {
		p.filter(s.query, s.endpoint)
		got, want := p.visible(), p.expect(s.query, s.endpoint)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the page shows %q, want %q", s.name, got, want)
		}
		var empty bool
		p.Run("read the empty notice", chromedp.Evaluate(`!document.getElementById("empty").hidden`, &empty))
		if empty != (len(want) == 0) {
			t.Errorf("%s: the no-match notice shown = %v with %d models", s.name, empty, len(want))
		}
		var pressed []string
		p.Run("read the pressed chip", chromedp.Evaluate(`Array.from(document.querySelectorAll('button[aria-pressed="true"]')).map(function (b) { return b.getAttribute("data-endpoint"); })`, &pressed))
		if !slices.Equal(pressed, []string{s.endpoint}) {
			t.Errorf("%s: pressed chips %q", s.name, pressed)
		}
	}
	if got := p.visible(); len(got) != len(table) {
		t.Fatalf("after clearing the filters %d models are shown, want %d", len(got), len(table))
	}
}

// TestPricingPageShowsRateLimit: when /api/pricing answers 429 the page says
// so instead of an empty table.
func TestPricingPageShowsRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.Limits.PricingRate = config.RateConfig{Rate: 0.001, Burst: 1} })
	if status, _, _ := e.do("GET", "/api/pricing", "", nil); status != http.StatusOK {
		t.Fatalf("first call = %d", status)
	}
	ctx := browsertest.Start(t, 60*time.Second)
	var text string
	var nodes []*cdp.Node
	if err := chromedp.Run(ctx,
		chromedp.Navigate(e.url+"/pricing"),
		chromedp.WaitVisible(`body[data-state="error"]`, chromedp.ByQuery),
		chromedp.Text("#status", &text, chromedp.ByID),
		chromedp.Nodes("article[data-model]", &nodes, chromedp.ByQuery, chromedp.AtLeast(0)),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "too many price-table requests") || !strings.Contains(text, "request id req_") || len(nodes) != 0 {
		t.Fatalf("the page shows %q and %d models", text, len(nodes))
	}
}

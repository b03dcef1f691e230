package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/openapi"
	"github.com/modelrelay/modelrelay/gateway/pricingpage"
	"github.com/modelrelay/modelrelay/pricing"
)

// wirePriceModel is one price model of GET /api/pricing, every number kept
// as its JSON text.
type wirePriceModel struct {
	ModelName              string                     `json:"model_name"`
	Description            string                     `json:"description"`
	Notice                 string                     `json:"notice"`
	EnableGroups           []string                   `json:"enable_groups"`
	SupportedEndpointTypes []string                   `json:"supported_endpoint_types"`
	RoutePrices            map[string]json.RawMessage `json:"route_prices"`
	ReferencePrice         json.RawMessage            `json:"reference_price"`
	ReferencePriceSource   *pricing.Source            `json:"reference_price_source"`
	AutoRoute              string                     `json:"auto_route"`
	ContextWindow          *json.Number               `json:"context_window"`
	MaxOutput              *json.Number               `json:"max_output"`
}

// getPriceTable fetches and strictly decodes GET /api/pricing.
func getPriceTable(t testing.TB, e *env) ([]wirePriceModel, http.Header) {
	t.Helper()
	status, hdr, body := e.do("GET", "/api/pricing", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /api/pricing = %d: %s", status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var doc struct {
		Success *bool            `json:"success"`
		Data    []wirePriceModel `json:"data"`
	}
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the price table does not decode: %v\n%s", err, body)
	}
	if doc.Success == nil || !*doc.Success {
		t.Fatalf("success is not true: %s", body)
	}
	return doc.Data, hdr
}

// wirePrice reads a route price exactly (Price.UnmarshalJSON parses each
// number's text with ParseUSD).
func wirePrice(t testing.TB, where string, raw json.RawMessage) pricing.Price {
	t.Helper()
	var p pricing.Price
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v: %s", where, err, raw)
	}
	return p
}

// wireAmounts parses every amount of a route price with json.Number and
// pricing.ParseUSD, keyed "input", "sizes.1K", "long_context.output", …
func wireAmounts(t testing.TB, where string, raw json.RawMessage) map[string]pricing.Nano {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	out := map[string]pricing.Nano{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, x)
			}
		case json.Number:
			if prefix == "long_context.min_input_tokens" {
				return
			}
			n, err := pricing.ParseUSD(v.String())
			if err != nil {
				t.Fatalf("%s.%s: %v", where, prefix, err)
			}
			out[prefix] = n
		}
	}
	walk("", v)
	return out
}

// catalogAmounts lists the amounts a catalogue price must show, keyed like
// wireAmounts (zero optional prices are left out of the table).
func catalogAmounts(p pricing.Price) map[string]pricing.Nano {
	out := map[string]pricing.Nano{}
	for _, f := range []struct {
		k      string
		v      pricing.Nano
		always bool
	}{
		{"input", p.Input, p.Unit == pricing.PerMillionTokens}, {"output", p.Output, p.Unit == pricing.PerMillionTokens},
		{"cache_read", p.CacheRead, false}, {"cache_write", p.CacheWrite, false}, {"cache_write_1h", p.CacheWrite1h, false},
		{"unit_price", p.UnitPrice, p.Unit == pricing.PerRequest},
	} {
		if f.v != 0 || f.always {
			out[f.k] = f.v
		}
	}
	if lc := p.LongContext; lc != nil {
		out["long_context.input"], out["long_context.output"] = lc.Input, lc.Output
	}
	for k, v := range p.Sizes {
		out["sizes."+k] = v
	}
	for k, v := range p.Resolutions {
		out["resolutions."+k] = v
	}
	return out
}

// TestPriceTable checks GET /api/pricing against the loaded plugins.
func TestPriceTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t.Run("matches the catalogue", func(t *testing.T) { testPriceTableMatchesCatalog(t, e) })
	t.Run("spec fees", func(t *testing.T) { testPriceTableSpecFees(t, e) })
	t.Run("built once per catalogue", func(t *testing.T) { testPriceTableCachedPerCatalog(t, e) })
}

// testPriceTableMatchesCatalog: every model the plugins describe is in the
// table, with every price equal to the catalogue's integers.
func testPriceTableMatchesCatalog(t *testing.T, e *env) {
	table, hdr := getPriceTable(t, e)
	if !strings.HasPrefix(hdr.Get("X-Request-Id"), "req_") {
		t.Errorf("X-Request-Id = %q", hdr.Get("X-Request-Id"))
	}
	models := e.host.Catalog().Models()
	if len(models) == 0 {
		t.Fatal("the catalogue is empty")
	}
	if len(table) != len(models) {
		t.Fatalf("%d price models, the catalogue has %d", len(table), len(models))
	}
	for i, m := range models {
		pm := table[i]
		t.Run(m.ID, func(t *testing.T) {
			if pm.ModelName != m.ID {
				t.Fatalf("data[%d] is %q, want %q (sorted by model_name)", i, pm.ModelName, m.ID)
			}
			if pm.Description != m.Description || pm.Notice != m.Notice {
				t.Errorf("description/notice = %q/%q, want %q/%q", pm.Description, pm.Notice, m.Description, m.Notice)
			}
			routes := make([]string, 0, len(m.Routes))
			for r := range m.Routes {
				routes = append(routes, r)
			}
			slices.Sort(routes)
			if !slices.Equal(pm.EnableGroups, routes) {
				t.Errorf("enable_groups = %q, want %q", pm.EnableGroups, routes)
			}
			if !slices.Equal(pm.SupportedEndpointTypes, m.Endpoints) {
				t.Errorf("supported_endpoint_types = %q, want %q", pm.SupportedEndpointTypes, m.Endpoints)
			}
			if pm.AutoRoute != m.EffectiveAutoRoute() || pm.AutoRoute == "" {
				t.Errorf("auto_route = %q, want %q", pm.AutoRoute, m.EffectiveAutoRoute())
			}
			checkWireCount(t, "context_window", pm.ContextWindow, m.ContextWindow)
			checkWireCount(t, "max_output", pm.MaxOutput, m.MaxOutput)
			if len(pm.RoutePrices) != len(m.Routes) {
				t.Errorf("%d route prices, want %d", len(pm.RoutePrices), len(m.Routes))
			}
			for r, want := range m.Routes {
				raw, ok := pm.RoutePrices[r]
				if !ok {
					t.Errorf("route %s missing", r)
					continue
				}
				if got := wireAmounts(t, r, raw); !reflect.DeepEqual(got, catalogAmounts(want)) {
					t.Errorf("route %s amounts %v, want %v", r, got, catalogAmounts(want))
				}
				if got := wirePrice(t, r, raw); !reflect.DeepEqual(got, want) {
					t.Errorf("route %s reads back as %+v, want %+v", r, got, want)
				}
			}
			switch {
			case m.Reference == nil && pm.ReferencePrice != nil:
				t.Errorf("reference_price %s for a model without one", pm.ReferencePrice)
			case m.Reference != nil:
				if got := wireAmounts(t, "reference_price", pm.ReferencePrice); !reflect.DeepEqual(got, catalogAmounts(*m.Reference)) {
					t.Errorf("reference_price amounts %v, want %v", got, catalogAmounts(*m.Reference))
				}
			}
			if !reflect.DeepEqual(pm.ReferencePriceSource, m.ReferenceSource) {
				t.Errorf("reference_price_source = %+v, want %+v", pm.ReferencePriceSource, m.ReferenceSource)
			}
		})
	}
}

func checkWireCount(t *testing.T, name string, got *json.Number, want int64) {
	t.Helper()
	switch {
	case want == 0 && got != nil:
		t.Errorf("%s = %s, want it left out (unknown)", name, *got)
	case want != 0 && (got == nil || got.String() != fmt.Sprint(want)):
		t.Errorf("%s = %v, want %d", name, got, want)
	}
}

// testPriceTableSpecFees checks the fees docs/api.md#fees-fixed-by-the-contract fixes, on every route, for
// the plugins that are loaded.
func testPriceTableSpecFees(t *testing.T, e *env) {
	usd := func(s string) pricing.Nano {
		n, err := pricing.ParseUSD(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		model, plugin, rule string
		want                pricing.Price
	}{
		{"modelb-image-2.5-sunburst", "images", "4.2.4", pricing.Price{Unit: pricing.PerImage, Sizes: map[string]pricing.Nano{"1K": usd("0.03"), "2K": usd("0.05")}}},
		{"modelb-image-2.5-flare", "images", "4.2.4", pricing.Price{Unit: pricing.PerImage, Sizes: map[string]pricing.Nano{"1K": usd("0.03"), "2K": usd("0.05")}}},
		{"modelc-imagine-video-1.5", "video", "4.2.5", pricing.Price{Unit: pricing.PerSecond, Resolutions: map[string]pricing.Nano{"480p": usd("0.05"), "720p": usd("0.10"), "1080p": usd("0.20")}}},
		{"sysmodel-1.13.0", "systemone", "4.2.7", pricing.Price{Unit: pricing.PerMillionTokens, Input: usd("0.04494")}},
		{"sysmodel-latest", "systemone", "4.2.7", pricing.Price{Unit: pricing.PerMillionTokens, Input: usd("0.04494")}},
		{"sysmodel-preview", "systemone", "4.2.7", pricing.Price{Unit: pricing.PerMillionTokens, Input: usd("0.04494")}},
	}
	table, _ := getPriceTable(t, e)
	byName := map[string]wirePriceModel{}
	for _, pm := range table {
		byName[pm.ModelName] = pm
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			pm, ok := byName[tc.model]
			if !ok {
				if _, inCat := e.host.Catalog().Model(tc.model); inCat {
					t.Fatalf("%s is in the catalogue but not in the price table", tc.model)
				}
				t.Skipf("%s is not in the catalogue: the %s plugin is not built into %s", tc.model, tc.plugin, pluginDir)
			}
			if len(pm.RoutePrices) == 0 {
				t.Fatal("no route prices")
			}
			for r, raw := range pm.RoutePrices {
				if got := wirePrice(t, r, raw); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("route %s: %s, want %+v (spec %s)", r, raw, tc.want, tc.rule)
				}
			}
		})
	}
}

// copyPluginDir copies the built plugins into a fresh directory.
func copyPluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if n := ent.Name(); ent.Type().IsRegular() && (strings.HasSuffix(n, ".wasm") || strings.HasSuffix(n, ".json")) {
			data, err := os.ReadFile(filepath.Join(pluginDir, n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// dropInPlugin installs a copy of the built tokens plugin as NAME, with the
// price list cfg, in the plugin directory dir.
func dropInPlugin(t *testing.T, dir, name, cfg string) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(pluginDir, "tokens.wasm"))
	if err != nil {
		t.Fatalf("the tokens plugin is not built: %v", err)
	}
	// The configuration first: a scan that saw the module without it would
	// load the price list embedded in the module.
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPriceTableShowsDroppedInPlugin: a plugin copied into the plugin
// directory at run time is in the price table after a reload, without a
// restart.
func TestPriceTableShowsDroppedInPlugin(t *testing.T) {
	t.Parallel()
	dir := copyPluginDir(t)
	e := newEnv(t, func(c *config.Config) { c.Plugins.Dir = dir })
	const id = "modelz-dropin-1"
	before, hdr := getPriceTable(t, e)
	for _, pm := range before {
		if pm.ModelName == id {
			t.Fatalf("%s is in the table before the plugin is dropped in", id)
		}
	}
	if _, hdr2 := getPriceTable(t, e); hdr2.Get("ETag") != hdr.Get("ETag") || hdr.Get("ETag") == "" {
		t.Fatalf("ETag changed without a reload: %q then %q", hdr.Get("ETag"), hdr2.Get("ETag"))
	}

	cfg := `{"models": [{"id": "` + id + `", "description": "Dropped in at run time", "notice": "Beta",
	  "endpoints": ["chat_completions"], "context_window": 128000, "auto_route": "economy",
	  "routes": {"economy": {"unit": "per_million_tokens", "input": "0.123456789", "output": "7", "cache_read": "0.01"},
	             "standard": {"unit": "per_million_tokens", "input": "0.2", "output": "8"}},
	  "reference_price": {"unit": "per_million_tokens", "input": "0.25", "output": "10"}}]}`
	dropInPlugin(t, dir, "dropin", cfg)
	if err := e.host.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	after, hdr3 := getPriceTable(t, e)
	if hdr3.Get("ETag") == hdr.Get("ETag") {
		t.Error("ETag unchanged although the table changed")
	}
	if len(after) != len(before)+1 {
		t.Fatalf("%d models after the drop-in, want %d", len(after), len(before)+1)
	}
	var pm *wirePriceModel
	for i := range after {
		if after[i].ModelName == id {
			pm = &after[i]
		}
	}
	if pm == nil {
		t.Fatalf("%s is not in the table after the reload", id)
	}
	if pm.Description != "Dropped in at run time" || pm.Notice != "Beta" || pm.AutoRoute != "economy" ||
		!slices.Equal(pm.EnableGroups, []string{"economy", "standard"}) || pm.ContextWindow == nil || pm.ContextWindow.String() != "128000" {
		t.Errorf("price model = %+v", *pm)
	}
	want := map[string]map[string]pricing.Nano{
		"economy":  {"input": 123_456_789, "output": 7_000_000_000, "cache_read": 10_000_000},
		"standard": {"input": 200_000_000, "output": 8_000_000_000},
	}
	for r, w := range want {
		if got := wireAmounts(t, r, pm.RoutePrices[r]); !reflect.DeepEqual(got, w) {
			t.Errorf("route %s: %v, want %v", r, got, w)
		}
	}
	if got := wireAmounts(t, "reference", pm.ReferencePrice); !reflect.DeepEqual(got, map[string]pricing.Nano{"input": 250_000_000, "output": 10_000_000_000}) {
		t.Errorf("reference: %v", got)
	}
}

// TestPriceTableRateLimit: more than the burst from one address → 429 with
// Retry-After in whole seconds and the error body (docs/api.md#errors); another address
// keeps its own bucket.
func TestPriceTableRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.Limits.PricingRate = config.RateConfig{Rate: 0.01, Burst: 3} })
	for i := 0; i < 3; i++ {
		if status, _, body := e.do("GET", "/api/pricing", "", nil); status != http.StatusOK {
			t.Fatalf("request %d = %d: %s", i+1, status, body)
		}
	}
	status, hdr, body := e.do("GET", "/api/pricing", "", nil)
	if status != http.StatusTooManyRequests {
		t.Fatalf("request 4 = %d, want 429: %s", status, body)
	}
	// One token per 100 s: the wait is just under 100 s, rounded up.
	if ra := hdr.Get("Retry-After"); ra != "100" {
		t.Errorf("Retry-After = %q, want 100", ra)
	}
	msg, typ, code := errBody(t, body)
	rid := hdr.Get("X-Request-Id")
	if typ != "rate_limit_error" || code != "rate_limited" || rid == "" || !strings.HasSuffix(msg, rid) {
		t.Errorf("error = %q %q %v (request id %q)", msg, typ, code, rid)
	}
	if !strings.Contains(msg, "help@relay.test") {
		t.Errorf("message does not name the support address: %q", msg)
	}

	// Another client address has its own bucket.
	req := httptest.NewRequest("GET", "/api/pricing", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	e.gw.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("another address = %d: %s", rec.Code, rec.Body)
	}
	// The document and the page are not rate-limited.
	for _, p := range []string{"/openapi.json", "/pricing"} {
		if status, _, _ := e.do("GET", p, "", nil); status != http.StatusOK {
			t.Errorf("GET %s = %d while /api/pricing is limited", p, status)
		}
	}
}

// TestPublicEndpoints: the three public endpoints need no key, ignore one
// that is sent, and answer a current If-None-Match with 304.
func TestPublicEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		path, contentType string
		body              []byte // nil: not compared
		headers           map[string]string
	}{
		{"/api/pricing", "application/json", nil, map[string]string{"Access-Control-Allow-Origin": "*", "Cache-Control": "no-cache"}},
		{"/openapi.json", "application/json", openapi.Document(), map[string]string{"Access-Control-Allow-Origin": "*"}},
		{"/pricing", "text/html; charset=utf-8", pricingpage.Page(), map[string]string{
			"Content-Security-Policy": pricingpage.ContentSecurityPolicy(), "X-Content-Type-Options": "nosniff"}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			for _, auth := range []string{"", "sk-not-a-real-key-000000000000"} {
				status, hdr, body := e.do("GET", tc.path, auth, nil)
				if status != http.StatusOK {
					t.Fatalf("key %q: status %d: %s", auth, status, body)
				}
				if ct := hdr.Get("Content-Type"); ct != tc.contentType {
					t.Errorf("Content-Type = %q, want %q", ct, tc.contentType)
				}
				if tc.body != nil && !bytes.Equal(body, tc.body) {
					t.Errorf("body differs from the embedded one (%d bytes, want %d)", len(body), len(tc.body))
				}
				for k, v := range tc.headers {
					if hdr.Get(k) != v {
						t.Errorf("%s = %q, want %q", k, hdr.Get(k), v)
					}
				}
				etag := hdr.Get("ETag")
				if etag == "" {
					t.Fatal("no ETag")
				}
				status, hdr2, body2 := e.do("GET", tc.path, "", nil, "If-None-Match", `"other", W/`+etag)
				if status != http.StatusNotModified || len(body2) != 0 || hdr2.Get("ETag") != etag {
					t.Errorf("If-None-Match: status %d, %d bytes, ETag %q", status, len(body2), hdr2.Get("ETag"))
				}
			}
			if status, _, body := e.do("POST", tc.path, "", "{}"); status != http.StatusMethodNotAllowed {
				t.Errorf("POST = %d: %s", status, body)
			} else {
				errBody(t, body)
			}
		})
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, remote, want string }{
		{"ipv4", "203.0.113.9:51000", "203.0.113.9"},
		{"ipv6", "[2001:db8::1]:443", "2001:db8::1"},
		{"no port", "203.0.113.9", "203.0.113.9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/pricing", nil)
			r.RemoteAddr = tc.remote
			r.Header.Set("X-Forwarded-For", "198.51.100.1")
			if got := clientAddr(r); got != tc.want {
				t.Fatalf("clientAddr = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestETagMatches(t *testing.T) {
	t.Parallel()
	const tag = `"abc"`
	tests := []struct {
		name    string
		headers []string
		want    bool
	}{
		{"none", nil, false},
		{"exact", []string{`"abc"`}, true},
		{"weak", []string{`W/"abc"`}, true},
		{"in a list", []string{`"x", "abc"`}, true},
		{"second header", []string{`"x"`, ` "abc" `}, true},
		{"star", []string{"*"}, true},
		{"other", []string{`"abcd"`, `abc`}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := etagMatches(tc.headers, tag); got != tc.want {
				t.Fatalf("etagMatches(%q) = %v", tc.headers, got)
			}
		})
	}
}

// FuzzETagMatches: any If-None-Match text is handled, and a header listing
// the tag matches it.
func FuzzETagMatches(f *testing.F) {
	f.Add(`"abc"`, `"abc"`)
	f.Add(`W/"x", "y"`, `"y"`)
	f.Add(`*`, `"q"`)
	f.Add(",,,", `""`)
	f.Fuzz(func(t *testing.T, header, tag string) {
		etagMatches([]string{header}, tag)
		// An entity tag is a quoted string: no comma, no surrounding space.
		if strings.HasPrefix(tag, `"`) && strings.TrimSpace(tag) == tag && !strings.Contains(tag, ",") {
			if !etagMatches([]string{header + "," + tag}, tag) {
				t.Fatalf("%q does not match a header that lists it", tag)
			}
		}
	})
}

// testPriceTableCachedPerCatalog: the document is built once per catalogue.
func testPriceTableCachedPerCatalog(t *testing.T, e *env) {
	var pt priceTable
	cat := e.host.Catalog()
	a, tagA, err := pt.get(cat, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, tagB, err := pt.get(cat, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if &a[0] != &b[0] || tagA != tagB {
		t.Fatal("the table was rebuilt for the same catalogue")
	}
	want, err := pricing.MarshalTable(cat.Models())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, want) {
		t.Fatal("the cached table differs from MarshalTable's")
	}
}

package plugins

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// tokenModel returns a valid model description to break in table cases.
func tokenModel(id string) abi.Model {
	return abi.Model{
		ID:            id,
		Endpoints:     []string{pricing.EndpointChat},
		ContextWindow: 200_000,
		MaxOutput:     8192,
		AutoRoute:     "standard",
		Routes: []abi.RoutePrice{
			{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 3_000_000_000, Output: 15_000_000_000,
				HasLongContext: true, LongContextMin: 200_000, LongContextInput: 6_000_000_000, LongContextOutput: 22_500_000_000}},
			{Route: "economy", Price: abi.Price{Unit: "per_million_tokens", Input: 2_000_000_000, Output: 10_000_000_000}},
		},
		HasReference:    true,
		Reference:       abi.Price{Unit: "per_million_tokens", Input: 3_500_000_000, Output: 17_000_000_000},
		HasSource:       true,
		ReferenceSource: abi.Source{Kind: "vendor", Name: "Vendor A", URL: "https://example.com", VerifiedAt: "2026-01-01", Model: "a"},
	}
}

func imageModel(id string) abi.Model {
	return abi.Model{
		ID:        id,
		Endpoints: []string{pricing.EndpointImages},
		AutoRoute: "standard",
		Routes: []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_image",
			Sizes: []abi.Tier{{Name: "1K", Price: 40_000_000}, {Name: "2K", Price: 80_000_000}}}}},
	}
}

func TestValidateDescription(t *testing.T) {
	t.Parallel()
	modelCaps := []string{abi.CapValidate, abi.CapQuote, abi.CapPrice}
	cases := []struct {
		name    string
		desc    abi.Description
		wantErr string // substring; "" = valid
	}{
		{name: "token and image models", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("m1"), imageModel("img")}}},
		{name: "select only", desc: abi.Description{Implements: []string{abi.CapSelect}}},
		{name: "implements nothing", desc: abi.Description{}, wantErr: "implements nothing"},
		{name: "unknown capability", desc: abi.Description{Implements: []string{"fly"}}, wantErr: `implements[0]: unknown capability "fly"`},
		{name: "capability twice", desc: abi.Description{Implements: []string{abi.CapSelect, abi.CapSelect}}, wantErr: "implements[1]"},
		{name: "models without price", desc: abi.Description{Implements: []string{abi.CapQuote}, Models: []abi.Model{tokenModel("m1")}}, wantErr: `does not implement "price"`},
		{name: "models without quote", desc: abi.Description{Implements: []string{abi.CapPrice}, Models: []abi.Model{tokenModel("m1")}}, wantErr: `does not implement "quote"`},
		{name: "model twice", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("m1"), tokenModel("m1")}}, wantErr: `models[1]: model "m1" is listed twice`},
		{name: "empty id", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("")}}, wantErr: "id"},
		{name: "id with space", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("a b")}}, wantErr: "space"},
		{name: "no auto route", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.AutoRoute = ""; return m }()}}, wantErr: `model "m1": auto_route: required`},
		{name: "auto route not a route", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.AutoRoute = "gold"; return m }()}}, wantErr: "auto_route"},
		{name: "route twice", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model {
			m := tokenModel("m1")
			m.Routes = append(m.Routes, m.Routes[0])
			return m
		}()}}, wantErr: `routes[2]: route "standard" is listed twice`},
		{name: "negative price", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.Routes[1].Price.Output = -1; return m }()}}, wantErr: "routes.economy: output"},
		{name: "unknown unit", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.Routes[0].Price.Unit = "per_hug"; return m }()}}, wantErr: "routes.standard: unit"},
		{name: "long context min zero", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.Routes[0].Price.LongContextMin = 0; return m }()}}, wantErr: "min_input_tokens"},
		{name: "size tier twice", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model {
			m := imageModel("img")
			m.Routes[0].Price.Sizes = append(m.Routes[0].Price.Sizes, abi.Tier{Name: "1K", Price: 1})
			return m
		}()}}, wantErr: `sizes[2]: "1K" is listed twice`},
		{name: "unknown endpoint", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.Endpoints = []string{"telepathy"}; return m }()}}, wantErr: "endpoints[0]"},
		{name: "bad reference", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.Reference.Input = -3; return m }()}}, wantErr: "reference_price: input"},
		{name: "negative context window", desc: abi.Description{Implements: modelCaps, Models: []abi.Model{func() abi.Model { m := tokenModel("m1"); m.ContextWindow = -1; return m }()}}, wantErr: "context_window"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			models, err := validateDescription(&tc.desc)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if len(models) != len(tc.desc.Models) {
					t.Fatalf("got %d models, want %d", len(models), len(tc.desc.Models))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestConvertModel(t *testing.T) {
	t.Parallel()
	am := tokenModel("modela-opus-5-5")
	m, err := convertModel(&am)
	if err != nil {
		t.Fatal(err)
	}
	std := m.Routes["standard"]
	if std.Unit != pricing.PerMillionTokens || std.Input != 3*pricing.NanoPerUSD || std.Output != 15*pricing.NanoPerUSD {
		t.Errorf("standard route price = %+v", std)
	}
	if std.LongContext == nil || std.LongContext.MinInputTokens != 200_000 || std.LongContext.Input != 6*pricing.NanoPerUSD || std.LongContext.Output != 22_500_000_000 {
		t.Errorf("long context = %+v", std.LongContext)
	}
	if m.Routes["economy"].LongContext != nil {
		t.Errorf("economy has a long context it did not declare")
	}
	if m.Reference == nil || m.Reference.Input != 3_500_000_000 {
		t.Errorf("reference = %+v", m.Reference)
	}
	if m.ReferenceSource == nil || m.ReferenceSource.Name != "Vendor A" || m.ReferenceSource.VerifiedAt != "2026-01-01" {
		t.Errorf("source = %+v", m.ReferenceSource)
	}
	if m.ContextWindow != 200_000 || m.MaxOutput != 8192 || m.AutoRoute != "standard" {
		t.Errorf("model = %+v", m)
	}
	img := imageModel("img")
	mi, err := convertModel(&img)
	if err != nil {
		t.Fatal(err)
	}
	if got := mi.Routes["standard"].Sizes; got["1K"] != 40_000_000 || got["2K"] != 80_000_000 || len(got) != 2 {
		t.Errorf("sizes = %v", got)
	}
}

// fakeVersion is a version with only what the catalogue reads.
func fakeVersion(t *testing.T, name string, d abi.Description) *version {
	t.Helper()
	models, err := validateDescription(&d)
	if err != nil {
		t.Fatal(err)
	}
	return &version{name: name, path: name + ".wasm", desc: d, models: models}
}

func TestBuildCatalog(t *testing.T) {
	t.Parallel()
	modelCaps := []string{abi.CapQuote, abi.CapPrice}
	a := fakeVersion(t, "alpha", abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("z-model"), tokenModel("b-model")}})
	b := fakeVersion(t, "beta", abi.Description{Implements: modelCaps, Models: []abi.Model{imageModel("a-image")}})
	sel := fakeVersion(t, "lines", abi.Description{Implements: []string{abi.CapSelect}})
	c, err := buildCatalog(map[string]*version{"alpha": a, "beta": b, "lines": sel})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range c.Models() {
		ids = append(ids, m.ID)
	}
	if got := strings.Join(ids, ","); got != "a-image,b-model,z-model" {
		t.Errorf("Models() = %s, want sorted ids", got)
	}
	if c.PluginFor("b-model") != "alpha" || c.PluginFor("a-image") != "beta" || c.PluginFor("nope") != "" {
		t.Errorf("PluginFor wrong")
	}
	if _, ok := c.Model("z-model"); !ok {
		t.Errorf("Model(z-model) missing")
	}
	if c.selector != sel {
		t.Errorf("selector = %v", c.selector)
	}
	infos := c.Plugins()
	if len(infos) != 3 || infos[0].Name != "alpha" || strings.Join(infos[0].Models, ",") != "b-model,z-model" || infos[2].Name != "lines" {
		t.Errorf("Plugins() = %+v", infos)
	}

	t.Run("model claimed twice", func(t *testing.T) {
		dup := fakeVersion(t, "gamma", abi.Description{Implements: modelCaps, Models: []abi.Model{tokenModel("b-model")}})
		_, err := buildCatalog(map[string]*version{"alpha": a, "gamma": dup})
		var pe *Error
		if !errors.As(err, &pe) || pe.Plugin != "gamma" || !strings.Contains(err.Error(), `model "b-model" is already served by plugin alpha`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("two selectors", func(t *testing.T) {
		sel2 := fakeVersion(t, "lines2", abi.Description{Implements: []string{abi.CapSelect}})
		_, err := buildCatalog(map[string]*version{"lines": sel, "lines2": sel2})
		if err == nil || !strings.Contains(err.Error(), "plugin lines2") || !strings.Contains(err.Error(), "plugin lines already implements select") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("refused add leaves the catalogue unchanged", func(t *testing.T) {
		c := newCatalog()
		if err := c.add(a); err != nil {
			t.Fatal(err)
		}
		bad := fakeVersion(t, "bad", abi.Description{Implements: append([]string{abi.CapSelect}, modelCaps...), Models: []abi.Model{tokenModel("new-model"), tokenModel("z-model")}})
		if err := c.add(bad); err == nil {
			t.Fatal("conflicting add accepted")
		}
		if c.PluginFor("new-model") != "" || c.selector != nil || len(c.versions) != 1 || len(c.infos) != 1 {
			t.Fatalf("refused add changed the catalogue: %+v", c)
		}
	})
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  *Error
		want string
	}{
		{"full", &Error{Plugin: "tokens", Op: "admit", Err: ErrMalformed}, "plugin tokens: admit: malformed result"},
		{"no plugin", &Error{Op: "select", Err: ErrNoPlugin}, "plugin (none): select: no plugin serves it"},
		{"no op", &Error{Plugin: "bad", Err: errors.New("x")}, "plugin bad: x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if tc.err.Err != nil && !errors.Is(tc.err, tc.err.Err) {
				t.Errorf("Unwrap lost the cause")
			}
		})
	}
}

func TestUsageToABI(t *testing.T) {
	u := pricing.Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5, Images: 6, SizeTier: "1K", Seconds: 7, Resolution: "720p", Requests: 8}
	want := abi.Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5, Images: 6, SizeTier: "1K", Seconds: 7, Resolution: "720p", Requests: 8}
	if got := UsageToABI(u); got != want {
		t.Errorf("UsageToABI = %+v, want %+v", got, want)
	}
	if got := pricing.Usage(UsageToABI(u)); got != u {
		t.Errorf("usage round trip: %+v", got)
	}
}

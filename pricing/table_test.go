package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMarshalTable(t *testing.T) {
	opus := Model{
		ID: "modela-opus-5-5", Description: "Most capable", Notice: "",
		Endpoints:     []string{EndpointChat, EndpointMessages},
		ContextWindow: 1_000_000, MaxOutput: 32_000, AutoRoute: "standard",
		Routes: map[string]Price{
			"standard": {Unit: PerMillionTokens, Input: 13_500_000_000, Output: 67_500_000_000, CacheRead: 1_350_000_000,
				CacheWrite: 16_875_000_000, CacheWrite1h: 27_000_000_000,
				LongContext: &LongContext{MinInputTokens: 200_000, Input: 27_000_000_000, Output: 101_250_000_000}},
			"economy": {Unit: PerMillionTokens, Input: 12_000_000_000, Output: 60_000_000_000},
		},
		Reference: &Price{Unit: PerMillionTokens, Input: 15_000_000_000, Output: 75_000_000_000},
		ReferenceSource: &Source{Kind: "list_price", Name: "vendora list", URL: "https://example.com/p",
			VerifiedAt: "2026-09-19", Model: "opus-5.5"},
	}
	const opusJSON = `{"model_name":"modela-opus-5-5","description":"Most capable","notice":"",` +
		`"enable_groups":["economy","standard"],"supported_endpoint_types":["chat_completions","messages"],` +
		`"route_prices":{"economy":{"unit":"per_million_tokens","input":12,"output":60},` +
		`"standard":{"unit":"per_million_tokens","input":13.5,"output":67.5,"cache_read":1.35,"cache_write":16.875,"cache_write_1h":27,` +
		`"long_context":{"min_input_tokens":200000,"input":27,"output":101.25}}},` +
		`"reference_price":{"unit":"per_million_tokens","input":15,"output":75},` +
		`"reference_price_source":{"kind":"list_price","name":"vendora list","url":"https://example.com/p","verified_at":"2026-09-19","model":"opus-5.5"},` +
		`"auto_route":"standard","context_window":1000000,"max_output":32000}`

	image := Model{
		ID: "modelb-image-2.5-flare", Endpoints: []string{EndpointImages, EndpointImageEdit},
		Routes: map[string]Price{"standard": {Unit: PerImage, Sizes: map[string]Nano{"2K": 50_000_000, "1K": 30_000_000}}},
	}
	const imageJSON = `{"model_name":"modelb-image-2.5-flare","description":"","notice":"",` +
		`"enable_groups":["standard"],"supported_endpoint_types":["image_generation","image_edit"],` +
		`"route_prices":{"standard":{"unit":"per_image","sizes":{"1K":0.03,"2K":0.05}}},"auto_route":"standard"}`

	video := Model{
		ID: "modelc-imagine-video-1.5", Endpoints: []string{EndpointVideo}, Notice: `"beta" <new> & improved`,
		Routes: map[string]Price{
			"standard": {Unit: PerSecond, Resolutions: map[string]Nano{"480p": 50_000_000, "720p": 100_000_000, "1080p": 200_000_000}},
			"economy":  {Unit: PerSecond, Resolutions: map[string]Nano{"480p": 40_000_000}},
		},
	}
	const videoJSON = `{"model_name":"modelc-imagine-video-1.5","description":"","notice":"\"beta\" \u003cnew\u003e \u0026 improved",` +
		`"enable_groups":["economy","standard"],"supported_endpoint_types":["video_generation"],` +
		`"route_prices":{"economy":{"unit":"per_second","resolutions":{"480p":0.04}},` +
		`"standard":{"unit":"per_second","resolutions":{"1080p":0.2,"480p":0.05,"720p":0.1}}},"auto_route":"economy"}`

	sys := Model{
		ID: "sysmodel-1.13.0", Endpoints: []string{EndpointSystemOne}, ContextWindow: 32768, AutoRoute: "standard",
		Routes: map[string]Price{"standard": {Unit: PerMillionTokens, Input: 44_940_000}},
	}
	const sysJSON = `{"model_name":"sysmodel-1.13.0","description":"","notice":"","enable_groups":["standard"],` +
		`"supported_endpoint_types":["systemone"],"route_prices":{"standard":{"unit":"per_million_tokens","input":0.04494,"output":0}},` +
		`"auto_route":"standard","context_window":32768}`

	flat := Model{
		ID: "modeld-tool", Endpoints: []string{EndpointChat}, MaxOutput: 8,
		Routes: map[string]Price{"flat": {Unit: PerRequest, UnitPrice: 1}},
	}
	const flatJSON = `{"model_name":"modeld-tool","description":"","notice":"","enable_groups":["flat"],` +
		`"supported_endpoint_types":["chat_completions"],"route_prices":{"flat":{"unit":"per_request","unit_price":0.000000001}},` +
		`"auto_route":"flat","max_output":8}`

	tests := []struct {
		name    string
		models  []Model
		want    string
		wantErr string
	}{
		{name: "empty", models: nil, want: `{"success":true,"data":[]}`},
		{name: "token model with two routes and a reference", models: []Model{opus}, want: `{"success":true,"data":[` + opusJSON + `]}`},
		{name: "image tiers, no reference, no auto route set", models: []Model{image}, want: `{"success":true,"data":[` + imageJSON + `]}`},
		{name: "video resolutions, auto route defaults to the first route, notice escaped", models: []Model{video}, want: `{"success":true,"data":[` + videoJSON + `]}`},
		{name: "typed question: free output is written as 0", models: []Model{sys}, want: `{"success":true,"data":[` + sysJSON + `]}`},
		{name: "per request, one nano-USD", models: []Model{flat}, want: `{"success":true,"data":[` + flatJSON + `]}`},
		{
			name:   "sorted by model_name",
			models: []Model{sys, video, opus, flat, image},
			want:   `{"success":true,"data":[` + strings.Join([]string{opusJSON, imageJSON, videoJSON, flatJSON, sysJSON}, ",") + `]}`,
		},
		{
			name:    "invalid model is named",
			models:  []Model{opus, {ID: "broken", Endpoints: []string{EndpointChat}, Routes: map[string]Price{"standard": {Unit: PerImage}}}},
			wantErr: `price table: model "broken": routes.standard.sizes: required by unit per_image`,
		},
		{
			name:    "duplicate id",
			models:  []Model{image, opus, image},
			wantErr: `price table: model "modelb-image-2.5-flare" is listed twice`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalTable(tc.models)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("MarshalTable:\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
		})
	}
}

func TestMarshalTableDoesNotReorderInput(t *testing.T) {
	models := []Model{
		{ID: "b", Endpoints: []string{EndpointChat}, Routes: map[string]Price{"r": {Unit: PerRequest, UnitPrice: 1}}},
		{ID: "a", Endpoints: []string{EndpointChat}, Routes: map[string]Price{"r": {Unit: PerRequest, UnitPrice: 1}}},
	}
	if _, err := MarshalTable(models); err != nil {
		t.Fatal(err)
	}
	if models[0].ID != "b" || models[1].ID != "a" {
		t.Fatalf("MarshalTable reordered its argument: %s, %s", models[0].ID, models[1].ID)
	}
}

func TestEffectiveAutoRoute(t *testing.T) {
	tests := []struct {
		name string
		m    Model
		want string
	}{
		{"set", Model{AutoRoute: "standard", Routes: map[string]Price{"economy": {}, "standard": {}}}, "standard"},
		{"first by bytes", Model{Routes: map[string]Price{"standard": {}, "economy": {}, "Zeta": {}}}, "Zeta"},
		{"no routes", Model{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.EffectiveAutoRoute(); got != tc.want {
				t.Fatalf("EffectiveAutoRoute = %q, want %q", got, tc.want)
			}
		})
	}
}

// tableDoc is the price-table document (docs/api.md#prices) with every price kept as a json.Number.
type tableDoc struct {
	Success *bool `json:"success"`
	Data    []struct {
		ModelName              string                    `json:"model_name"`
		Description            string                    `json:"description"`
		Notice                 string                    `json:"notice"`
		EnableGroups           []string                  `json:"enable_groups"`
		SupportedEndpointTypes []string                  `json:"supported_endpoint_types"`
		RoutePrices            map[string]map[string]any `json:"route_prices"`
		ReferencePrice         map[string]any            `json:"reference_price"`
		ReferencePriceSource   *Source                   `json:"reference_price_source"`
		AutoRoute              string                    `json:"auto_route"`
		ContextWindow          *json.Number              `json:"context_window"`
		MaxOutput              *json.Number              `json:"max_output"`
	} `json:"data"`
}

// decodeTable decodes a price table with json.Number for every number.
func decodeTable(t testing.TB, data []byte) tableDoc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var doc tableDoc
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("price table does not decode: %v\n%s", err, data)
	}
	if doc.Success == nil || !*doc.Success {
		t.Fatalf("success is not true: %s", data)
	}
	return doc
}

// priceNumbers parses every amount of a decoded route price with ParseUSD,
// keyed "input", "long_context.output", "sizes.1K", …
func priceNumbers(t testing.TB, p map[string]any) map[string]Nano {
	t.Helper()
	out := map[string]Nano{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case json.Number:
			if prefix == "long_context.min_input_tokens" {
				return
			}
			n, err := ParseUSD(v.String())
			if err != nil {
				t.Fatalf("%s: %v", prefix, err)
			}
			out[prefix] = n
		case map[string]any:
			for k, x := range v {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, x)
			}
		case string:
			if prefix != "unit" {
				t.Fatalf("%s: unexpected string %q", prefix, v)
			}
		default:
			t.Fatalf("%s: unexpected %T", prefix, v)
		}
	}
	walk("", p)
	return out
}

// wantNumbers lists the amounts a Price writes, keyed like priceNumbers.
func wantNumbers(p Price) map[string]Nano {
	out := map[string]Nano{}
	add := func(k string, v Nano, always bool) {
		if v != 0 || always {
			out[k] = v
		}
	}
	add("input", p.Input, p.Unit == PerMillionTokens)
	add("output", p.Output, p.Unit == PerMillionTokens)
	add("cache_read", p.CacheRead, false)
	add("cache_write", p.CacheWrite, false)
	add("cache_write_1h", p.CacheWrite1h, false)
	add("unit_price", p.UnitPrice, p.Unit == PerRequest)
	if lc := p.LongContext; lc != nil {
		out["long_context.input"] = lc.Input
		out["long_context.output"] = lc.Output
	}
	for k, v := range p.Sizes {
		out["sizes."+k] = v
	}
	for k, v := range p.Resolutions {
		out["resolutions."+k] = v
	}
	return out
}

// checkTableExact decodes MarshalTable's output and checks that every number
// parses back, with json.Number and ParseUSD, to exactly the integers.
func checkTableExact(t testing.TB, models []Model, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("not valid JSON: %s", data)
	}
	doc := decodeTable(t, data)
	byID := map[string]Model{}
	ids := []string{}
	for _, m := range models {
		byID[m.ID] = m
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	if len(doc.Data) != len(ids) {
		t.Fatalf("%d price models, want %d", len(doc.Data), len(ids))
	}
	for i, pm := range doc.Data {
		if pm.ModelName != ids[i] {
			t.Fatalf("data[%d].model_name = %q, want %q (sorted)", i, pm.ModelName, ids[i])
		}
		m := byID[pm.ModelName]
		if pm.Description != m.Description || pm.Notice != m.Notice {
			t.Fatalf("%s: description %q notice %q, want %q %q", m.ID, pm.Description, pm.Notice, m.Description, m.Notice)
		}
		if want := sortedKeys(m.Routes); !reflect.DeepEqual(pm.EnableGroups, want) {
			t.Fatalf("%s: enable_groups %q, want %q", m.ID, pm.EnableGroups, want)
		}
		if !reflect.DeepEqual(pm.SupportedEndpointTypes, m.Endpoints) {
			t.Fatalf("%s: supported_endpoint_types %q, want %q", m.ID, pm.SupportedEndpointTypes, m.Endpoints)
		}
		if pm.AutoRoute != m.EffectiveAutoRoute() {
			t.Fatalf("%s: auto_route %q, want %q", m.ID, pm.AutoRoute, m.EffectiveAutoRoute())
		}
		if !reflect.DeepEqual(pm.ReferencePriceSource, m.ReferenceSource) {
			t.Fatalf("%s: reference_price_source %+v, want %+v", m.ID, pm.ReferencePriceSource, m.ReferenceSource)
		}
		if len(pm.RoutePrices) != len(m.Routes) {
			t.Fatalf("%s: %d route prices, want %d", m.ID, len(pm.RoutePrices), len(m.Routes))
		}
		for route, p := range m.Routes {
			got := priceNumbers(t, pm.RoutePrices[route])
			if want := wantNumbers(p); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s route %s: amounts %v, want %v", m.ID, route, got, want)
			}
			raw, _ := json.Marshal(pm.RoutePrices[route])
			var back Price
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatalf("%s route %s: %v", m.ID, route, err)
			}
			if !reflect.DeepEqual(back, normalise(p)) {
				t.Fatalf("%s route %s: read back %+v, want %+v", m.ID, route, back, p)
			}
		}
		if m.Reference != nil {
			got := priceNumbers(t, pm.ReferencePrice)
			if want := wantNumbers(*m.Reference); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s reference: amounts %v, want %v", m.ID, got, want)
			}
		} else if pm.ReferencePrice != nil {
			t.Fatalf("%s: reference_price written for a model without one", m.ID)
		}
		checkCount(t, m.ID+" context_window", pm.ContextWindow, m.ContextWindow)
		checkCount(t, m.ID+" max_output", pm.MaxOutput, m.MaxOutput)
	}
}

// normalise makes empty maps nil, as Price.UnmarshalJSON leaves them.
func normalise(p Price) Price {
	if len(p.Sizes) == 0 {
		p.Sizes = nil
	}
	if len(p.Resolutions) == 0 {
		p.Resolutions = nil
	}
	return p
}

func checkCount(t testing.TB, name string, got *json.Number, want int64) {
	t.Helper()
	if want == 0 {
		if got != nil {
			t.Fatalf("%s: written as %s, want it left out", name, *got)
		}
		return
	}
	if got == nil || got.String() != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %d", name, got, want)
	}
}

func TestMarshalTableNumbersAreExact(t *testing.T) {
	data, err := os.ReadFile("testdata/models.json")
	if err != nil {
		t.Fatal(err)
	}
	models, err := ParseModels(data)
	if err != nil {
		t.Fatal(err)
	}
	// Amounts whose float64 reading would not be exact, and the extremes.
	models = append(models, Model{
		ID: "zz-extremes", Endpoints: []string{EndpointChat},
		Routes: map[string]Price{
			"max":  {Unit: PerMillionTokens, Input: math.MaxInt64, Output: 1, CacheRead: 100_000_000_000_000_003},
			"tiny": {Unit: PerImage, Sizes: map[string]Nano{"1K": 1, "2K": 999_999_999, "4K": 123_456_789_012_345_678}},
			"odd":  {Unit: PerSecond, Resolutions: map[string]Nano{"480p": 1_000_000_001, "720p": 300_000_000_000_000_001}},
		},
		Reference: &Price{Unit: PerRequest, UnitPrice: 9_007_199_254_740_993}, // 2^53+1 nano-USD
	})
	out, err := MarshalTable(models)
	if err != nil {
		t.Fatal(err)
	}
	checkTableExact(t, models, out)
}

// FuzzMarshalTableExact checks that any non-negative amounts survive the
// table exactly.
func FuzzMarshalTableExact(f *testing.F) {
	f.Add(int64(3_000_000_000), int64(15_000_000_000), int64(1), int64(44_940_000), int64(200_000), "standard")
	f.Add(int64(math.MaxInt64), int64(0), int64(999_999_999), int64(1_000_000_001), int64(1), "é\"<")
	f.Fuzz(func(t *testing.T, in, out, size, unit, minTokens int64, route string) {
		if in < 0 || out < 0 || size < 0 || unit < 0 || minTokens <= 0 || route == "" || !utf8.ValidString(route) {
			t.Skip()
		}
		models := []Model{
			{
				ID: "tokens", Endpoints: []string{EndpointChat}, AutoRoute: route,
				Routes: map[string]Price{route: {Unit: PerMillionTokens, Input: Nano(in), Output: Nano(out), CacheRead: Nano(size),
					LongContext: &LongContext{MinInputTokens: minTokens, Input: Nano(out), Output: Nano(in)}}},
				Reference: &Price{Unit: PerRequest, UnitPrice: Nano(unit)},
			},
			{
				ID: "images", Endpoints: []string{EndpointImages},
				Routes: map[string]Price{route: {Unit: PerImage, Sizes: map[string]Nano{route: Nano(size), "1K": Nano(in)}}},
			},
		}
		data, err := MarshalTable(models)
		if err != nil {
			t.Fatal(err)
		}
		checkTableExact(t, models, data)
	})
}

package pricing

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseModelsFile(t *testing.T) {
	data, err := os.ReadFile("testdata/models.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseModels(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{
		{
			ID: "modela-opus-5-5", Description: "Most capable modela model",
			Endpoints:     []string{EndpointChat, EndpointMessages},
			ContextWindow: 200_000, MaxOutput: 64_000, AutoRoute: "standard",
			Routes: map[string]Price{
				"standard": {
					Unit: PerMillionTokens, Input: 15_000_000_000, Output: 75_000_000_000,
					CacheRead: 1_500_000_000, CacheWrite: 18_750_000_000, CacheWrite1h: 30_000_000_000,
					LongContext: &LongContext{MinInputTokens: 200_000, Input: 30_000_000_000, Output: 112_500_000_000},
				},
				// JSON numbers 12.5, 62.50 and 1.25, read from their text.
				"economy": {Unit: PerMillionTokens, Input: 12_500_000_000, Output: 62_500_000_000, CacheRead: 1_250_000_000},
			},
			Reference: &Price{Unit: PerMillionTokens, Input: 15_000_000_000, Output: 75_000_000_000},
			ReferenceSource: &Source{Kind: "list_price", Name: "vendorx price list", URL: "https://example.com/pricing",
				VerifiedAt: "2026-09-19", Model: "modela-opus-5-5"},
		},
		{
			ID: "modelb-image-2.5-sunburst", Endpoints: []string{EndpointImages, EndpointImageEdit}, AutoRoute: "standard",
			Routes: map[string]Price{"standard": {Unit: PerImage, Sizes: map[string]Nano{"1K": 30_000_000, "2K": 50_000_000}}},
		},
		{
			ID: "modelc-imagine-video-1.5", Endpoints: []string{EndpointVideo},
			Routes: map[string]Price{"standard": {Unit: PerSecond, Resolutions: map[string]Nano{"480p": 50_000_000, "720p": 100_000_000, "1080p": 200_000_000}}},
		},
		{
			ID: "sysmodel-1.13.0", Endpoints: []string{EndpointSystemOne}, ContextWindow: 32768, AutoRoute: "standard",
			Routes: map[string]Price{"standard": {Unit: PerMillionTokens, Input: 44_940_000}},
		},
		{
			ID: "modeld-tool", Endpoints: []string{EndpointChat},
			Routes: map[string]Price{"flat": {Unit: PerRequest, UnitPrice: 2_000_000}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("ParseModels:\n got %s\nwant %s", gj, wj)
	}
}

// models wraps model objects in a price-list document.
func models(objs ...string) []byte {
	return []byte(`{"models": [` + strings.Join(objs, ",") + `]}`)
}

const okModel = `{"id": "m%d", "endpoints": ["chat_completions"], "routes": {"standard": {"unit": "per_million_tokens", "input": "1", "output": "2"}}}`

func okModels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Replace(okModel, "%d", string(rune('a'+i)), 1)
	}
	return out
}

// model is a model object with the given route price.
func model(id, price string) string {
	return `{"id": "` + id + `", "endpoints": ["chat_completions"], "routes": {"standard": ` + price + `}}`
}

func TestParseModelsErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string // the whole message
	}{
		{"the example", models(append(okModels(3), `{"id": "modela-opus-5-5", "endpoints": ["messages"], "routes": {"standard":
			{"unit": "per_million_tokens", "input": "15", "output": "75", "cache_write": "1.2345678901"}}}`)...),
			`models[3] (modela-opus-5-5): routes.standard.cache_write: "1.2345678901" has more precision than one nano-USD`},
		{"precision in a JSON number", models(model("x", `{"unit": "per_million_tokens", "input": 0.0000000001, "output": 1}`)),
			`models[0] (x): routes.standard.input: "0.0000000001" has more precision than one nano-USD`},
		{"exponent", models(model("x", `{"unit": "per_million_tokens", "input": 1e3, "output": 1}`)),
			`models[0] (x): routes.standard.input: "1e3" is not a plain decimal amount`},
		{"negative price", models(model("x", `{"unit": "per_million_tokens", "input": -1, "output": 1}`)),
			`models[0] (x): routes.standard.input: "-1" is negative`},
		{"negative price text", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "-0.5"}`)),
			`models[0] (x): routes.standard.output: "-0.5" is negative`},
		{"price is a boolean", models(model("x", `{"unit": "per_million_tokens", "input": true, "output": 1}`)),
			`models[0] (x): routes.standard.input: must be a price (a number or a string), not a boolean`},
		{"price is null", models(model("x", `{"unit": "per_million_tokens", "input": null, "output": 1}`)),
			`models[0] (x): routes.standard.input: must be a price (a number or a string), not null`},
		{"unknown unit", models(model("x", `{"unit": "per_token", "input": "1"}`)),
			`models[0] (x): routes.standard.unit: "per_token" is not one of per_million_tokens, per_image, per_second, per_request`},
		{"missing unit", models(model("x", `{"input": "1"}`)),
			`models[0] (x): routes.standard.unit: required`},
		{"unknown price key", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "1", "cached": "1"}`)),
			`models[0] (x): routes.standard.cached: unknown key`},
		{"key the unit does not use", models(model("x", `{"unit": "per_image", "sizes": {"1K": "1"}, "input": "1"}`)),
			`models[0] (x): routes.standard.input: not used by unit per_image`},
		{"missing output", models(model("x", `{"unit": "per_million_tokens", "input": "1"}`)),
			`models[0] (x): routes.standard.output: required by unit per_million_tokens`},
		{"missing sizes", models(model("x", `{"unit": "per_image"}`)),
			`models[0] (x): routes.standard.sizes: required by unit per_image`},
		{"empty sizes", models(model("x", `{"unit": "per_image", "sizes": {}}`)),
			`models[0] (x): routes.standard.sizes: required by unit per_image`},
		{"bad size price", models(model("x", `{"unit": "per_image", "sizes": {"1K": "0.03", "2K": "abc"}}`)),
			`models[0] (x): routes.standard.sizes.2K: "abc" is not a plain decimal amount`},
		{"missing unit_price", models(model("x", `{"unit": "per_request"}`)),
			`models[0] (x): routes.standard.unit_price: required by unit per_request`},
		{"long context without min", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "1", "long_context": {"input": "2", "output": "2"}}`)),
			`models[0] (x): routes.standard.long_context.min_input_tokens: required`},
		{"long context min zero", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "1", "long_context": {"min_input_tokens": 0, "input": "2", "output": "2"}}`)),
			`models[0] (x): routes.standard.long_context.min_input_tokens: must be above 0`},
		{"long context min fractional", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "1", "long_context": {"min_input_tokens": 1.5, "input": "2", "output": "2"}}`)),
			`models[0] (x): routes.standard.long_context.min_input_tokens: 1.5 is not a non-negative integer`},
		{"long context unknown key", models(model("x", `{"unit": "per_million_tokens", "input": "1", "output": "1", "long_context": {"min_input_tokens": 5, "input": "2", "output": "2", "cache_read": "1"}}`)),
			`models[0] (x): routes.standard.long_context.cache_read: unknown key`},
		{"missing id", models(`{"endpoints": ["chat_completions"], "routes": {}}`),
			`models[0]: id: required`},
		{"empty id", models(`{"id": "", "endpoints": ["chat_completions"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0]: id: required`},
		{"id with a space", models(`{"id": "a b", "endpoints": ["chat_completions"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (a b): id: "a b" contains a space or control character`},
		{"id not a string", models(`{"id": 5}`),
			`models[0]: id: must be a string, not a number`},
		{"duplicate id", models(append(okModels(2), okModels(1)...)...),
			`models[2] (ma): id: "ma" is also the id of models[0]`},
		{"unknown model key", models(`{"id": "x", "endpoints": ["chat_completions"], "route": {}}`),
			`models[0] (x): route: unknown key`},
		{"missing endpoints", models(`{"id": "x", "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): endpoints: required`},
		{"no endpoints", models(`{"id": "x", "endpoints": [], "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): endpoints: no endpoints`},
		{"unknown endpoint", models(`{"id": "x", "endpoints": ["chat_completions", "embeddings"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): endpoints[1]: "embeddings" is not a known endpoint (chat_completions, image_edit, image_generation, messages, responses, systemone, video_generation)`},
		{"endpoint twice", models(`{"id": "x", "endpoints": ["messages", "messages"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): endpoints[1]: "messages" is listed twice`},
		{"endpoint not a string", models(`{"id": "x", "endpoints": ["messages", 3], "routes": {}}`),
			`models[0] (x): endpoints[1]: must be a string, not a number`},
		{"missing routes", models(`{"id": "x", "endpoints": ["messages"]}`),
			`models[0] (x): routes: required`},
		{"no routes", models(`{"id": "x", "endpoints": ["messages"], "routes": {}}`),
			`models[0] (x): routes: no routes`},
		{"routes not an object", models(`{"id": "x", "endpoints": ["messages"], "routes": []}`),
			`models[0] (x): routes: must be an object, not an array`},
		{"auto route not a route", models(`{"id": "x", "endpoints": ["messages"], "auto_route": "fast", "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): auto_route: "fast" is not one of the routes (r)`},
		{"negative context window", models(`{"id": "x", "endpoints": ["messages"], "context_window": -1, "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): context_window: -1 is not a non-negative integer`},
		{"max output a string", models(`{"id": "x", "endpoints": ["messages"], "max_output": "64000", "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): max_output: must be a non-negative integer, not a string`},
		{"context window too large", models(`{"id": "x", "endpoints": ["messages"], "context_window": 99999999999999999999, "routes": {"r": {"unit": "per_request", "unit_price": 1}}}`),
			`models[0] (x): context_window: 99999999999999999999 is out of range`},
		{"bad reference price", models(`{"id": "x", "endpoints": ["messages"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}, "reference_price": {"unit": "per_request", "unit_price": "0.0000000001"}}`),
			`models[0] (x): reference_price.unit_price: "0.0000000001" has more precision than one nano-USD`},
		{"unknown source key", models(`{"id": "x", "endpoints": ["messages"], "routes": {"r": {"unit": "per_request", "unit_price": 1}}, "reference_price_source": {"kind": "list_price", "date": "2026"}}`),
			`models[0] (x): reference_price_source.date: unknown key`},
		{"duplicate key", models(`{"id": "x", "endpoints": ["messages"], "endpoints": ["chat_completions"]}`),
			`models[0] (x): endpoints: duplicate key`},
		{"duplicate route", models(`{"id": "x", "endpoints": ["messages"], "routes": {"r": {"unit": "per_request", "unit_price": 1}, "r": {"unit": "per_request", "unit_price": 2}}}`),
			`models[0] (x): routes.r: duplicate key`},
		{"description not a string", models(`{"id": "x", "description": 5}`),
			`models[0] (x): description: must be a string, not a number`},
		{"model not an object", models(`"x"`),
			`models[0]: must be an object, not a string`},
		{"unknown top-level key", []byte(`{"models": [], "lines": []}`),
			`lines: unknown key`},
		{"no models key", []byte(`{}`),
			`models: required`},
		{"empty models", []byte(`{"models": []}`),
			`models: no models`},
		{"models not an array", []byte(`{"models": {}}`),
			`models: must be an array, not an object`},
		{"top level not an object", []byte(`[]`),
			`price list: must be an object, not an array`},
		{"invalid JSON", []byte(`{"models": [}`),
			`price list: not valid JSON (at byte 13)`},
		{"empty input", nil,
			`price list: not valid JSON (at byte 0)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModels(tt.in)
			if err == nil {
				t.Fatalf("ParseModels succeeded with %+v; want %s", got, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestParseModelsErrorWraps(t *testing.T) {
	_, err := ParseModels(models(model("x", `{"unit": "per_million_tokens", "input": "1.2345678901", "output": 1}`)))
	if !errors.Is(err, ErrPrecision) {
		t.Fatalf("error %v does not wrap ErrPrecision", err)
	}
}

// TestParseModelsNumbersAndStrings checks that a price reads the same from a
// JSON string, a JSON number and any spelling with trailing zeros.
func TestParseModelsNumbersAndStrings(t *testing.T) {
	spellings := []string{`"0.1"`, `0.1`, `"0.10"`, `0.100000000`, `"0.100000000000"`, `0.1000000000000000000000`}
	var first Price
	for i, s := range spellings {
		ms, err := ParseModels(models(model("x", `{"unit": "per_million_tokens", "input": `+s+`, "output": `+s+`}`)))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		p := ms[0].Routes["standard"]
		if p.Input != 100_000_000 || p.Output != 100_000_000 {
			t.Fatalf("%s read as %d, %d", s, p.Input, p.Output)
		}
		if i == 0 {
			first = p
			continue
		}
		u := Usage{InputTokens: 12_345, OutputTokens: 678}
		a, errA := first.Charge(u)
		b, errB := p.Charge(u)
		// 12_345 × 0.1e9/1e6 = 1_234_500; 678 × 0.1e9/1e6 = 67_800.
		if errA != nil || errB != nil || a != b || a != 1_302_300 {
			t.Fatalf("%s charges %d (%v), first spelling %d (%v); want 1302300", s, b, errB, a, errA)
		}
	}
}

func TestPriceMarshalJSON(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		want  string
	}{
		{"tokens with everything", Price{
			Unit: PerMillionTokens, Input: 15_000_000_000, Output: 75_000_000_000, CacheRead: 1_500_000_000,
			CacheWrite: 18_750_000_000, CacheWrite1h: 30_000_000_000,
			LongContext: &LongContext{MinInputTokens: 200_000, Input: 30_000_000_000, Output: 112_500_000_000},
		}, `{"unit":"per_million_tokens","input":15,"output":75,"cache_read":1.5,"cache_write":18.75,"cache_write_1h":30,"long_context":{"min_input_tokens":200000,"input":30,"output":112.5}}`},
		{"typed question keeps a free output", typedQuestion,
			`{"unit":"per_million_tokens","input":0.04494,"output":0}`},
		{"images, sizes sorted", Price{Unit: PerImage, Sizes: map[string]Nano{"2K": 50_000_000, "1K": 30_000_000}},
			`{"unit":"per_image","sizes":{"1K":0.03,"2K":0.05}}`},
		{"video", videoPrice,
			`{"unit":"per_second","resolutions":{"1080p":0.2,"480p":0.05,"720p":0.1}}`},
		{"per request", Price{Unit: PerRequest, UnitPrice: 1},
			`{"unit":"per_request","unit_price":0.000000001}`},
		{"free per request", Price{Unit: PerRequest},
			`{"unit":"per_request","unit_price":0}`},
		{"tier name escaped", Price{Unit: PerImage, Sizes: map[string]Nano{`a"b`: 1}},
			`{"unit":"per_image","sizes":{"a\"b":0.000000001}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.price)
			if err != nil || string(got) != tt.want {
				t.Fatalf("json.Marshal =\n %s, %v\nwant\n %s", got, err, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
		})
	}
}

// TestPriceJSONRoundTrip writes every price of the test catalogue and reads
// it back.
func TestPriceJSONRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/models.json")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ParseModels(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for name, p := range m.Routes {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back Price
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s %s: reading back %s: %v", m.ID, name, b, err)
			}
			if !reflect.DeepEqual(back, p) {
				t.Fatalf("%s %s: %s read back as %+v, want %+v", m.ID, name, b, back, p)
			}
		}
	}
}

func TestPriceUnmarshalJSONErrors(t *testing.T) {
	var p Price
	if err := json.Unmarshal([]byte(`null`), &p); err != nil || p.Unit != "" {
		t.Fatalf("null: %+v, %v", p, err)
	}
	for in, want := range map[string]string{
		`{"unit": "per_request", "unit_price": "x"}`: `unit_price: "x" is not a plain decimal amount`,
		`{"unit": "per_request"`:                     `not valid JSON`,
		`{"unit": "per_image", "sizes": {"": 1}}`:    `sizes: empty name`,
	} {
		err := p.UnmarshalJSON([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalJSON(%s) = %v, want %s", in, err, want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Model{ID: "m", Endpoints: []string{EndpointChat}, Routes: map[string]Price{"r": typedQuestion}}
	tests := []struct {
		name string
		edit func(*Model)
		want string // "" for valid
	}{
		{"valid", func(*Model) {}, ""},
		{"negative input", func(m *Model) { m.Routes = map[string]Price{"r": {Unit: PerMillionTokens, Input: -1}} }, "routes.r.input: negative"},
		{"sizes on a token price", func(m *Model) {
			m.Routes = map[string]Price{"r": {Unit: PerMillionTokens, Sizes: map[string]Nano{"1K": 1}}}
		}, "routes.r.sizes: not used by unit per_million_tokens"},
		{"input on a video price", func(m *Model) {
			m.Routes = map[string]Price{"r": {Unit: PerSecond, Input: 1, Resolutions: map[string]Nano{"480p": 1}}}
		}, "routes.r.input: not used by unit per_second"},
		{"long context on an image price", func(m *Model) {
			m.Routes = map[string]Price{"r": {Unit: PerImage, Sizes: map[string]Nano{"1K": 1}, LongContext: &LongContext{MinInputTokens: 1}}}
		}, "routes.r.long_context: not used by unit per_image"},
		{"negative size", func(m *Model) { m.Routes = map[string]Price{"r": {Unit: PerImage, Sizes: map[string]Nano{"1K": -1}}} }, "routes.r.sizes.1K: negative"},
		{"empty route name", func(m *Model) { m.Routes = map[string]Price{"": typedQuestion} }, "routes: empty route name"},
		{"negative max output", func(m *Model) { m.MaxOutput = -1 }, "max_output: negative"},
		{"bad reference", func(m *Model) { m.Reference = &Price{Unit: "x"} }, `reference_price.unit: "x" is not one of`},
		{"control character in id", func(m *Model) { m.ID = "m\x00" }, `id: "m\x00" contains a space or control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ok
			tt.edit(&m)
			err := m.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want %s", err, tt.want)
			}
		})
	}
}

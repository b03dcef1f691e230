package sdk

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/internal/guest"
)

// testPrices: prices in USD per one million tokens; the hand computations
// below use nano-USD (× 1e9) per million.
const testPrices = `{"models": [
 {"id": "big", "description": "a large model", "endpoints": ["chat_completions", "messages"],
  "context_window": 1000000, "max_output": 64000, "auto_route": "standard",
  "routes": {
   "standard": {"unit": "per_million_tokens", "input": "3", "output": "15", "cache_read": "0.3",
     "cache_write": "3.75", "cache_write_1h": "6",
     "long_context": {"min_input_tokens": 200000, "input": "6", "output": "22.5"}},
   "economy": {"unit": "per_million_tokens", "input": "2", "output": "10"}},
  "reference_price": {"unit": "per_million_tokens", "input": "3.3", "output": "16.5"},
  "reference_price_source": {"kind": "list_price", "name": "Vendor A", "url": "https://example.test", "verified_at": "2026-09-19", "model": "big"}},
 {"id": "small", "endpoints": ["chat_completions", "responses"],
  "routes": {"standard": {"unit": "per_million_tokens", "input": "0.15", "output": "0.6"}}},
 {"id": "tiny", "endpoints": ["chat_completions"],
  "routes": {"standard": {"unit": "per_million_tokens", "input": "0.04494", "output": "0"}}},
 {"id": "img", "endpoints": ["image_generation"],
  "routes": {"standard": {"unit": "per_image", "sizes": {"2K": "0.05", "1K": "0.03"}}}}
]}`

func testList(t *testing.T) *PriceList {
	t.Helper()
	l := new(PriceList)
	if err := l.Configure([]byte(testPrices)); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestTokenAdmit(t *testing.T) {
	l := testList(t)
	req := func(endpoint, model, route string, input, max, def int64) abi.AdmitRequest {
		return abi.AdmitRequest{Endpoint: endpoint, Model: model, Route: route, InputTokens: input, MaxOutputTokens: max, DefaultOutputTokens: def}
	}
	tests := []struct {
		name string
		req  abi.AdmitRequest
		hold int64
		err  abi.Error // Message is a substring
	}{
		// 1000 × 6 (1-hour cache write, the dearest input) + 1000 × 15 = 21e12 / 1e6.
		{"dearest input is the 1h cache write", req("chat_completions", "big", "standard", 1000, 1000, 4096), 21_000_000, abi.Error{}},
		// 1000 × 6 + 4096 × 15 = 67.44e12 / 1e6.
		{"default output", req("messages", "big", "standard", 1000, 0, 4096), 67_440_000, abi.Error{}},
		// No max, no default: the model's max_output, 1000 × 6 + 64000 × 15 = 966e12.
		{"max_output when nothing else", req("chat_completions", "big", "standard", 1000, 0, 0), 966_000_000, abi.Error{}},
		{"default capped at max_output", req("chat_completions", "big", "standard", 1000, 0, 100_000), 966_000_000, abi.Error{}},
		{"max_tokens equal to max_output", req("chat_completions", "big", "standard", 1000, 64000, 0), 966_000_000, abi.Error{}},
		// Above 200000 input: long-context 6 input (= 1h write) and 22.5 output:
		// 250000 × 6 + 1000 × 22.5 = 1.5225e15 / 1e6.
		{"long context", req("messages", "big", "standard", 250_000, 1000, 0), 1_522_500_000, abi.Error{}},
		// Exactly at the threshold is not above it: 200000 × 6 + 1000 × 15.
		{"at the threshold", req("messages", "big", "standard", 200_000, 1000, 0), 1_215_000_000, abi.Error{}},
		// economy: 2 input, 10 output, no cache prices: 1000 × 2 + 100 × 10.
		{"economy route", req("chat_completions", "big", "economy", 1000, 100, 0), 3_000_000, abi.Error{}},
		// 7 × 0.15 + 10 × 0.6 = 7.05e9 / 1e6.
		{"responses", req("responses", "small", "standard", 7, 10, 0), 7050, abi.Error{}},
		// Unknown max_output, no budget: input only.
		{"no output budget", req("chat_completions", "small", "standard", 1000, 0, 0), 150_000, abi.Error{}},
		// 1 × 0.04494 = 44.94 nano-USD, rounded up once.
		{"rounds up", req("chat_completions", "tiny", "standard", 1, 0, 0), 45, abi.Error{}},
		{"zero input", req("chat_completions", "tiny", "standard", 0, 0, 0), 0, abi.Error{}},

		{"max_tokens above max_output", req("messages", "big", "standard", 10, 64001, 0), 0,
			abi.Error{Code: abi.CodeInvalid, Field: "max_tokens", Message: "max_tokens is 64001, above the 64000 output tokens model big allows"}},
		{"max_output_tokens negative", req("responses", "small", "standard", 10, -1, 0), 0,
			abi.Error{Code: abi.CodeInvalid, Field: "max_output_tokens", Message: "must not be negative"}},
		{"endpoint not served", req("responses", "big", "standard", 10, 0, 0), 0,
			abi.Error{Code: abi.CodeInvalid, Field: "model", Message: "not served on the responses endpoint"}},
		{"unknown model", req("chat_completions", "nope", "standard", 10, 0, 0), 0,
			abi.Error{Code: abi.CodeForbidden, Message: "model nope is not sold here"}},
		{"unknown route", req("chat_completions", "big", "premium", 10, 0, 0), 0,
			abi.Error{Code: abi.CodeForbidden, Message: `not sold on route "premium" (its routes: economy, standard)`}},
		{"not a token price", req("image_generation", "img", "standard", 10, 0, 0), 0,
			abi.Error{Code: abi.CodeInternal, Message: "priced per_image"}},
		{"negative input estimate", req("chat_completions", "big", "standard", -1, 0, 0), 0,
			abi.Error{Code: abi.CodeInternal, Message: "input token estimate is negative"}},
		{"negative default", req("chat_completions", "big", "standard", 1, 0, -5), 0,
			abi.Error{Code: abi.CodeInternal, Message: "default output tokens are negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := l.TokenAdmit(tt.req)
			if tt.err.Code == "" {
				if err != nil || res.Hold != tt.hold || res.Set != nil {
					t.Fatalf("TokenAdmit = %+v, %v; want hold %d", res, err, tt.hold)
				}
				return
			}
			ae, ok := err.(*abi.Error)
			if !ok || ae.Code != tt.err.Code || ae.Field != tt.err.Field || !strings.Contains(ae.Message, tt.err.Message) {
				t.Fatalf("TokenAdmit error = %#v, want %+v", err, tt.err)
			}
		})
	}
}

func TestTokenSettle(t *testing.T) {
	l := testList(t)
	tests := []struct {
		name   string
		model  string
		route  string
		usage  abi.Usage
		charge int64
		err    string
	}{
		// 100 × 3 + 1000 × 0.3 + 2000 × 3.75 + 3000 × 6 + 500 × 15 = 33.6e12 / 1e6.
		{"every token kind", "big", "standard", abi.Usage{InputTokens: 100, CacheReadTokens: 1000, CacheWriteTokens: 2000, CacheWrite1hTokens: 3000, OutputTokens: 500}, 33_600_000, ""},
		// Total input 200001 > 200000: long-context input 6 and output 22.5 on
		// the uncached tokens and output, cache prices unchanged:
		// 100001 × 6 + 100000 × 0.3 + 10 × 22.5 = 600006 + 30000 + 225 (e9/1e6).
		{"long context", "big", "standard", abi.Usage{InputTokens: 100_001, CacheReadTokens: 100_000, OutputTokens: 10}, 600_006_000 + 30_000_000 + 225_000, ""},
		{"rounds up", "tiny", "standard", abi.Usage{InputTokens: 3}, 135, ""}, // 134.82
		{"zero", "small", "standard", abi.Usage{}, 0, ""},
		{"unknown model", "nope", "standard", abi.Usage{}, 0, "model nope is not sold here"},
		{"negative usage", "small", "standard", abi.Usage{OutputTokens: -1}, 0, "usage output_tokens is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := l.TokenSettle(abi.SettleRequest{Model: tt.model, Route: tt.route, Usage: tt.usage})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || res.Charge != tt.charge {
				t.Fatalf("TokenSettle = %+v, %v; want %d", res, err, tt.charge)
			}
		})
	}
}

func TestPriceListLoad(t *testing.T) {
	var empty PriceList
	if _, err := empty.TokenAdmit(abi.AdmitRequest{Model: "big"}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("unconfigured admit: %v", err)
	}
	if d := empty.Describe(); len(d.Models) != 0 || len(d.Implements) != 3 {
		t.Fatalf("unconfigured describe: %+v", d)
	}
	if _, ok := empty.Model("big"); ok || empty.Models() != nil {
		t.Fatal("unconfigured list has models")
	}
	tests := []struct {
		name, config, want string
	}{
		{"empty", "", "configuration is empty"},
		{"not json", "{", "price list"},
		{"bad price", `{"models":[{"id":"a","endpoints":["chat_completions"],"routes":{"s":{"unit":"per_million_tokens","input":"1.0000000001","output":"1"}}}]}`, "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := testList(t)
			err := l.Configure([]byte(tt.config))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Configure = %v, want %q", err, tt.want)
			}
			if _, ok := l.Model("big"); !ok {
				t.Fatal("a failed Configure dropped the loaded list")
			}
		})
	}
	var l PriceList
	if err := l.set([]pricing.Model{{ID: "a b"}}); err == nil || !strings.Contains(err.Error(), "models[0] (a b): id") {
		t.Fatalf("Set invalid: %v", err)
	}
	m := pricing.Model{ID: "a", Endpoints: []string{"chat_completions"}, Routes: map[string]pricing.Price{"s": {Unit: pricing.PerMillionTokens}}}
	if err := l.set([]pricing.Model{m, m}); err == nil || !strings.Contains(err.Error(), "also the id of models[0]") {
		t.Fatalf("Set duplicate: %v", err)
	}
	if err := l.set(nil); err == nil {
		t.Fatal("set(nil) accepted")
	}
}

func TestPriceListDescribe(t *testing.T) {
	l := testList(t)
	d := l.Describe()
	if d.Name != "" || !reflect.DeepEqual(d.Implements, []string{abi.CapValidate, abi.CapQuote, abi.CapPrice}) || len(d.Models) != 4 {
		t.Fatalf("Describe = %+v", d)
	}
	big := d.Models[0]
	want := abi.Model{
		ID: "big", Description: "a large model", Endpoints: []string{"chat_completions", "messages"},
		ContextWindow: 1_000_000, MaxOutput: 64000, AutoRoute: "standard",
		Routes: []abi.RoutePrice{
			{Route: "economy", Price: abi.Price{Unit: "per_million_tokens", Input: 2_000_000_000, Output: 10_000_000_000}},
			{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 3_000_000_000, Output: 15_000_000_000,
				CacheRead: 300_000_000, CacheWrite: 3_750_000_000, CacheWrite1h: 6_000_000_000,
				HasLongContext: true, LongContextMin: 200_000, LongContextInput: 6_000_000_000, LongContextOutput: 22_500_000_000}},
		},
		HasReference:    true,
		Reference:       abi.Price{Unit: "per_million_tokens", Input: 3_300_000_000, Output: 16_500_000_000},
		HasSource:       true,
		ReferenceSource: abi.Source{Kind: "list_price", Name: "Vendor A", URL: "https://example.test", VerifiedAt: "2026-09-19", Model: "big"},
	}
	if !reflect.DeepEqual(big, want) {
		t.Fatalf("big =\n%+v\nwant\n%+v", big, want)
	}
	if got := d.Models[3].Routes[0].Price.Sizes; !reflect.DeepEqual(got, []abi.Tier{{Name: "1K", Price: 30_000_000}, {Name: "2K", Price: 50_000_000}}) {
		t.Fatalf("sizes = %+v", got)
	}
}

func TestConversionsRoundTrip(t *testing.T) {
	models, err := pricing.ParseModels([]byte(testPrices))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		if got := modelFromABI(modelToABI(m)); !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", m.ID, got, m)
		}
	}
	u := pricing.Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5, Images: 6, SizeTier: "1K", Seconds: 7, Resolution: "720p", Requests: 8}
	if got := usageFromABI(abi.Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5, Images: 6, SizeTier: "1K", Seconds: 7, Resolution: "720p", Requests: 8}); got != u {
		t.Errorf("usage round trip: %+v", got)
	}
}

// modelFromABI converts a wire model back to a catalogue entry, the inverse
// of modelToABI that TestConversionsRoundTrip checks. A route or
// tier named twice keeps its last price.
func modelFromABI(m abi.Model) pricing.Model {
	out := pricing.Model{
		ID:            m.ID,
		Description:   m.Description,
		Notice:        m.Notice,
		Endpoints:     append([]string(nil), m.Endpoints...),
		ContextWindow: m.ContextWindow,
		MaxOutput:     m.MaxOutput,
		AutoRoute:     m.AutoRoute,
		Routes:        make(map[string]pricing.Price, len(m.Routes)),
	}
	for _, r := range m.Routes {
		out.Routes[r.Route] = priceFromABI(r.Price)
	}
	if m.HasReference {
		p := priceFromABI(m.Reference)
		out.Reference = &p
	}
	if m.HasSource {
		s := m.ReferenceSource
		out.ReferenceSource = &pricing.Source{Kind: s.Kind, Name: s.Name, URL: s.URL, VerifiedAt: s.VerifiedAt, Model: s.Model}
	}
	return out
}

// priceFromABI converts a wire price back to a route price.
func priceFromABI(p abi.Price) pricing.Price {
	out := pricing.Price{
		Unit:         pricing.Unit(p.Unit),
		Input:        pricing.Nano(p.Input),
		Output:       pricing.Nano(p.Output),
		CacheRead:    pricing.Nano(p.CacheRead),
		CacheWrite:   pricing.Nano(p.CacheWrite),
		CacheWrite1h: pricing.Nano(p.CacheWrite1h),
		Sizes:        tiersFromABI(p.Sizes),
		Resolutions:  tiersFromABI(p.Resolutions),
		UnitPrice:    pricing.Nano(p.UnitPrice),
	}
	if p.HasLongContext {
		out.LongContext = &pricing.LongContext{
			MinInputTokens: p.LongContextMin,
			Input:          pricing.Nano(p.LongContextInput),
			Output:         pricing.Nano(p.LongContextOutput),
		}
	}
	return out
}

func tiersFromABI(list []abi.Tier) map[string]pricing.Nano {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]pricing.Nano, len(list))
	for _, t := range list {
		out[t.Name] = pricing.Nano(t.Price)
	}
	return out
}

func TestTokenPlugin(t *testing.T) {
	override := strings.Replace(testPrices, `"input": "0.15"`, `"input": "0.25"`, 1)
	tests := []struct {
		name, def, config string
		wantErr           string
		smallInput        int64
	}{
		{"embedded default", testPrices, "", "", 150_000_000},
		{"NAME.json overrides the default", testPrices, override, "", 250_000_000},
		{"config only", "", testPrices, "", 150_000_000},
		{"neither", "", "", "plugin demo has no price list: put demo.json beside demo.wasm", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withPlugin(t, TokenPlugin("demo", []byte(tt.def)))
			_, gerr := result(t, guest.Call(abi.OpConfigure, []byte(tt.config)))
			if tt.wantErr != "" {
				if gerr == nil || !strings.Contains(gerr.Message, tt.wantErr) {
					t.Fatalf("configure: %+v, want %q", gerr, tt.wantErr)
				}
				return
			}
			if gerr != nil {
				t.Fatal(gerr)
			}
			payload, gerr := result(t, guest.Call(abi.OpDescribe, nil))
			var d abi.Description
			if gerr != nil || d.Decode(payload) != nil {
				t.Fatal(gerr)
			}
			if d.Name != "demo" || d.Models[1].ID != "small" || d.Models[1].Routes[0].Price.Input != tt.smallInput {
				t.Fatalf("describe = %+v", d)
			}
		})
	}
}

// FuzzCall: whatever the host sends, Call answers a well-formed envelope
// and never panics out.
func FuzzCall(f *testing.F) {
	f.Add(uint32(abi.OpAdmit), (&abi.AdmitRequest{Endpoint: "chat_completions", Model: "big", Route: "standard", InputTokens: 10}).AppendTo(nil))
	f.Add(uint32(abi.OpSettle), (&abi.SettleRequest{Model: "big", Route: "standard", Usage: abi.Usage{OutputTokens: 1 << 62}}).AppendTo(nil))
	f.Add(uint32(abi.OpDescribe), []byte{})
	f.Add(uint32(abi.OpSelect), []byte{0})
	f.Add(uint32(abi.OpConfigure), []byte(`{"models":[]}`))
	f.Fuzz(func(t *testing.T, op uint32, input []byte) {
		defer guest.Reset()()
		p := TokenPlugin("fuzz", []byte(testPrices))
		Register(p)
		if _, gerr, derr := abi.DecodeResult(guest.Call(abi.OpConfigure, nil)); derr != nil || gerr != nil {
			t.Fatalf("configure: %v %v", gerr, derr)
		}
		env := guest.Call(abi.Op(op), input)
		payload, gerr, derr := abi.DecodeResult(env)
		if derr != nil {
			t.Fatalf("malformed envelope: %v", derr)
		}
		if gerr != nil {
			if gerr.Code == "" || gerr.Message == "" {
				t.Fatalf("error without code or message: %+v", gerr)
			}
			return
		}
		switch abi.Op(op) {
		case abi.OpAdmit:
			var r abi.AdmitResult
			if err := r.Decode(payload); err != nil || r.Hold < 0 {
				t.Fatalf("admit result %+v, %v", r, err)
			}
		case abi.OpSettle:
			var r abi.SettleResult
			if err := r.Decode(payload); err != nil || r.Charge < 0 {
				t.Fatalf("settle result %+v, %v", r, err)
			}
		}
	})
}

package sdk

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// unitPrices: img is $0.03 (1K) and $0.05 (2K) per image on standard; vid
// is $0.10 per second at 720p; both have a reference price.
const unitPrices = `{"models": [
 {"id": "img", "endpoints": ["image_generation", "image_edit"],
  "routes": {"standard": {"unit": "per_image", "sizes": {"1K": "0.03", "2K": "0.05"}},
             "tokens": {"unit": "per_million_tokens", "input": "1", "output": "2"}},
  "reference_price": {"unit": "per_image", "sizes": {"1K": "0.04"}}},
 {"id": "vid", "endpoints": ["video_generation"],
  "routes": {"standard": {"unit": "per_second", "resolutions": {"720p": "0.10"}}}}
]}`

func TestLoad(t *testing.T) {
	errNoTokens := errors.New("no token prices here")
	noTokens := func(m pricing.Model) error {
		for _, p := range m.Routes {
			if p.Unit == pricing.PerMillionTokens {
				return errNoTokens
			}
		}
		return nil
	}
	tests := []struct {
		name             string
		config, fallback string
		check            func(pricing.Model) error
		err              string // substring; "" for success
		models           int
	}{
		{name: "config", config: unitPrices, models: 2},
		{name: "fallback when config is empty", fallback: unitPrices, models: 2},
		{name: "config wins over fallback", config: unitPrices, fallback: `{"models": []}`, models: 2},
		{name: "neither", err: "plugin demo has no price list: put demo.json beside demo.wasm"},
		{name: "parse error", config: `{"models": [`, err: ""},
		{name: "check names the model", config: unitPrices, check: noTokens, err: "models[0] (img): no token prices here"},
		{name: "set refuses an empty list", config: `{"models": []}`, err: "no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l PriceList
			err := l.load("demo", []byte(tt.config), []byte(tt.fallback), tt.check)
			if tt.models == 0 {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Load error = %v, want one containing %q", err, tt.err)
				}
				if len(l.Models()) != 0 {
					t.Fatal("a failed Load changed the list")
				}
				return
			}
			if err != nil || len(l.Models()) != tt.models {
				t.Fatalf("Load = %v, %d models; want %d", err, len(l.Models()), tt.models)
			}
		})
	}
}

func TestLoadKeepsPreviousList(t *testing.T) {
	var l PriceList
	if err := l.load("demo", []byte(unitPrices), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.load("demo", []byte(`{"models": [`), nil, nil); err == nil {
		t.Fatal("Load accepted malformed JSON")
	}
	if _, ok := l.Model("vid"); !ok {
		t.Fatal("a failed Load dropped the previous list")
	}
}

// CheckedList's plugin loads the host's list, else its fallback, through
// Check, describes the loaded models and answers with the handlers given.
func TestCheckedList(t *testing.T) {
	onlyVideo := func(m pricing.Model) error {
		for i, e := range m.Endpoints {
			if e != pricing.EndpointVideo {
				return fmt.Errorf("endpoints[%d]: %q is not the video endpoint (%s)", i, e, pricing.EndpointVideo)
			}
		}
		return nil
	}
	c := &CheckedList{Name: "demo", Fallback: []byte(unitPrices)}
	admitted := false
	p := c.Plugin(func(abi.AdmitRequest) (abi.AdmitResult, error) { admitted = true; return abi.AdmitResult{}, nil }, nil)
	if p.Name != "demo" || p.Settle != nil {
		t.Fatalf("Plugin() = %+v, want name demo and no Settle", p)
	}
	if err := p.Configure(nil); err != nil {
		t.Fatalf("Configure(nil) with a fallback: %v", err)
	}
	if d := p.Describe(); len(d.Models) != 2 {
		t.Fatalf("Describe lists %d models, want the fallback's 2", len(d.Models))
	}
	if _, err := p.Admit(abi.AdmitRequest{}); err != nil || !admitted {
		t.Fatalf("Admit did not reach the handler given: %v", err)
	}
	c.Check = onlyVideo
	err := p.Configure([]byte(unitPrices))
	if err == nil || !strings.Contains(err.Error(), `models[0] (img): endpoints[0]: "image_generation" is not the video endpoint (video_generation)`) {
		t.Fatalf("Configure through Check = %v", err)
	}
	if _, ok := c.Model("img"); !ok {
		t.Fatal("a refused list replaced the loaded one")
	}
}

func TestUnitRoute(t *testing.T) {
	var l PriceList
	if err := l.load("demo", []byte(unitPrices), nil, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, model, route, endpoint string
		unit                         pricing.Unit
		err                          abi.Error // Message is a substring; zero for success
	}{
		{name: "per image", model: "img", route: "standard", endpoint: "image_edit", unit: pricing.PerImage},
		{name: "per second", model: "vid", route: "standard", endpoint: "video_generation", unit: pricing.PerSecond},
		{name: "unknown model", model: "nope", route: "standard", endpoint: "image_edit", unit: pricing.PerImage,
			err: abi.Error{Code: abi.CodeForbidden, Message: "model nope is not sold here"}},
		{name: "unknown route", model: "img", route: "premium", endpoint: "image_edit", unit: pricing.PerImage,
			err: abi.Error{Code: abi.CodeForbidden, Message: `not sold on route "premium"`}},
		{name: "endpoint not served", model: "vid", route: "standard", endpoint: "image_edit", unit: pricing.PerSecond,
			err: abi.Error{Code: abi.CodeInvalid, Field: "model", Message: "model vid is not served on the image_edit endpoint (it is served on video_generation)"}},
		{name: "wrong unit", model: "img", route: "tokens", endpoint: "image_edit", unit: pricing.PerImage,
			err: abi.Error{Code: abi.CodeInternal, Message: "model img route tokens is priced per_million_tokens, not per_image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := l.UnitRoute(tt.model, tt.route, tt.endpoint, tt.unit)
			if tt.err.Code == "" {
				if err != nil || p.Unit != tt.unit {
					t.Fatalf("UnitRoute = %+v, %v", p, err)
				}
				return
			}
			ae, ok := err.(*abi.Error)
			if !ok || ae.Code != tt.err.Code || ae.Field != tt.err.Field || !strings.Contains(ae.Message, tt.err.Message) {
				t.Fatalf("UnitRoute error = %#v, want %+v", err, tt.err)
			}
		})
	}
	var empty PriceList
	if _, err := empty.UnitRoute("img", "standard", "image_edit", pricing.PerImage); err == nil {
		t.Fatal("an unconfigured list priced a route")
	}
}

func TestHoldAndCharge(t *testing.T) {
	price := pricing.Price{Unit: pricing.PerImage, Sizes: map[string]pricing.Nano{"1K": 30_000_000, "2K": 50_000_000}}
	admit := abi.AdmitRequest{Model: "img", Route: "standard"}
	settle := abi.SettleRequest{Model: "img", Route: "standard"}

	// 2K × 3 = 150,000,000 nano-USD.
	res, err := Hold(admit, price, pricing.Usage{Images: 3, SizeTier: "2K"})
	if err != nil || res.Hold != 150_000_000 || res.Set != nil {
		t.Fatalf("Hold = %+v, %v", res, err)
	}
	// 1K × 2 = 60,000,000.
	sres, err := Charge(settle, price, pricing.Usage{Images: 2, SizeTier: "1K"})
	if err != nil || sres.Charge != 60_000_000 {
		t.Fatalf("Charge = %+v, %v", sres, err)
	}
	// No images, no charge.
	if sres, err := Charge(settle, price, pricing.Usage{SizeTier: "1K"}); err != nil || sres.Charge != 0 {
		t.Fatalf("Charge of nothing = %+v, %v", sres, err)
	}

	bad := pricing.Usage{Images: 1, SizeTier: "4K"}
	if _, err := Hold(admit, price, bad); !isInternal(err, "quoting model img on route standard: ") {
		t.Fatalf("Hold of an unpriced tier: %v", err)
	}
	if _, err := Charge(settle, price, bad); !isInternal(err, "pricing model img on route standard: ") {
		t.Fatalf("Charge of an unpriced tier: %v", err)
	}
}

func isInternal(err error, prefix string) bool {
	ae, ok := err.(*abi.Error)
	return ok && ae.Code == abi.CodeInternal && strings.HasPrefix(ae.Message, prefix)
}

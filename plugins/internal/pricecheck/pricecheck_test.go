package pricecheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

func TestEndpoints(t *testing.T) {
	m := pricing.Model{ID: "img", Endpoints: []string{pricing.EndpointImages, pricing.EndpointImageEdit}}
	if err := Endpoints(m, "an image endpoint", pricing.EndpointImages, pricing.EndpointImageEdit); err != nil {
		t.Fatalf("both allowed: %v", err)
	}
	err := Endpoints(m, "an image generation endpoint", pricing.EndpointImages)
	want := `endpoints[1]: "image_edit" is not an image generation endpoint (image_generation)`
	if err == nil || err.Error() != want {
		t.Fatalf("Endpoints = %v, want %q", err, want)
	}
}

func TestPrices(t *testing.T) {
	m := pricing.Model{
		ID:        "m",
		Routes:    map[string]pricing.Price{"standard": {Unit: pricing.PerImage}},
		Reference: &pricing.Price{Unit: pricing.PerSecond},
	}
	perImage := func(p pricing.Price) error {
		if p.Unit != pricing.PerImage {
			return errors.New("not per image")
		}
		return nil
	}
	if err := Prices(m, perImage); err == nil || err.Error() != "reference_price: not per image" {
		t.Fatalf("reference: %v", err)
	}
	m.Routes["economy"] = pricing.Price{Unit: pricing.PerRequest}
	if err := Prices(m, perImage); err == nil || err.Error() != "routes.economy: not per image" {
		t.Fatalf("route: %v", err)
	}
	m.Reference = nil
	delete(m.Routes, "economy")
	if err := Prices(m, perImage); err != nil {
		t.Fatalf("good model: %v", err)
	}
}

func TestTiers(t *testing.T) {
	want := []string{"1K", "2K"}
	for _, tc := range []struct {
		name   string
		prices map[string]pricing.Nano
		noun   string
		err    string
	}{
		{"exact", map[string]pricing.Nano{"1K": 1, "2K": 2}, "tier", ""},
		{"missing", map[string]pricing.Nano{"1K": 1}, "tier", `sizes: no price for tier "2K" (this plugin charges 1K, 2K)`},
		{"extra", map[string]pricing.Nano{"1K": 1, "2K": 2, "4K": 4}, "tier", `sizes: tier "4K" is not one this plugin charges (1K, 2K)`},
		{"no noun", map[string]pricing.Nano{"2K": 2}, "", `sizes: no price for "1K"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Tiers("sizes", tc.noun, tc.prices, want)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

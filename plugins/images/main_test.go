package main

import (
	"slices"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const fixtures = "../../testdata/plugins/images"

func TestFixtures(t *testing.T) { sdktest.Run(t, fixtures) }

// The embedded list is images.json as it is on disk (the host's copy).
func TestEmbeddedIsImagesJSON(t *testing.T) { sdktest.CheckEmbedded(t, "images", prices) }

// TestCatalogue checks images.json against docs/api.md#models and #fees-fixed-by-the-contract: the two
// image models on both image endpoints, $0.03 at 1K and $0.05 at 2K on the
// standard and economy routes, auto_route standard, and a reference price
// above ours with its source.
func TestCatalogue(t *testing.T) {
	p := configured(t)
	models := p.list.Models()
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
		t.Run(m.ID, func(t *testing.T) {
			if !slices.Equal(m.Endpoints, []string{"image_generation", "image_edit"}) {
				t.Errorf("endpoints %v", m.Endpoints)
			}
			if m.AutoRoute != "standard" || len(m.Routes) != 2 || m.Description == "" {
				t.Errorf("auto_route %q, routes %v, description %q", m.AutoRoute, m.Routes, m.Description)
			}
			for _, route := range []string{"standard", "economy"} {
				price := m.Routes[route]
				if price.Sizes[tier1K] != 30_000_000 || price.Sizes[tier2K] != 50_000_000 {
					t.Errorf("route %s sizes %v, want 1K $0.03 and 2K $0.05", route, price.Sizes)
				}
			}
			ref := m.Reference
			if ref == nil || ref.Sizes[tier1K] <= 30_000_000 || ref.Sizes[tier2K] <= 50_000_000 {
				t.Errorf("reference price %+v is not above ours", ref)
			}
			if s := m.ReferenceSource; s == nil || s.Kind == "" || s.Name == "" || s.URL == "" || s.VerifiedAt == "" || s.Model == "" {
				t.Errorf("reference_price_source %+v is incomplete", s)
			}
		})
	}
	if !slices.Equal(ids, []string{sunburst, flare}) {
		t.Errorf("models %v", ids)
	}
}

// TestHandChecked pins the priced fixtures to arithmetic done by hand from
// images.json: 1K = $0.03 = 30,000,000 nano-USD per image, 2K = $0.05 =
// 50,000,000; the hold is the tier × n, the charge the tier × the images
// returned, at most n.
func TestHandChecked(t *testing.T) {
	tests := []sdktest.Hand{
		{File: "size-omitted-pinned", Hold: 30_000_000, Charge: 30_000_000},  // 1K × 1
		{File: "size-auto-pinned", Hold: 30_000_000, Charge: 30_000_000},     // 1K × 1
		{File: "tier-1k-top", Hold: 30_000_000, Charge: 30_000_000},          // 1024×1024 = 1,048,576 px: 1K
		{File: "tier-2k-bottom", Hold: 50_000_000, Charge: 50_000_000},       // 1025×1024 = 1,049,600 px: 2K
		{File: "tier-2k-n3", Hold: 150_000_000, Charge: 150_000_000},         // 2K × 3
		{File: "n-max", Hold: 3_840_000_000, Charge: 3_840_000_000},          // 1K × 128
		{File: "fewer-images", Hold: 120_000_000, Charge: 60_000_000},        // hold 1K × 4; charge 1K × 2
		{File: "more-images-capped", Hold: 100_000_000, Charge: 100_000_000}, // 1536×1024 = 1,572,864 px: 2K × 2; 5 returned, 2 charged
		{File: "no-images", Hold: 400_000_000, Charge: 0},                    // hold 2K × 8; nothing returned
		{File: "edit-2k", Hold: 100_000_000, Charge: 100_000_000},            // 1024×1536: 2K × 2
		{File: "edit-size-omitted", Hold: 30_000_000, Charge: 30_000_000},    // pinned: 1K × 1
		{File: "economy-route", Hold: 100_000_000, Charge: 100_000_000},      // 2048×1024 = 2,097,152 px: 2K × 2
	}
	sdktest.CheckHand(t, fixtures, tests)
}

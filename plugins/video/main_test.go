package main

import (
	"slices"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const fixtures = "../../testdata/plugins/video"

func TestFixtures(t *testing.T) { sdktest.Run(t, fixtures) }

// The embedded list is video.json as it is on disk (the host's copy).
func TestEmbeddedIsVideoJSON(t *testing.T) { sdktest.CheckEmbedded(t, "video", prices) }

// TestCatalogue checks video.json against docs/api.md#models and #fees-fixed-by-the-contract: the one video
// model on video_generation, $0.05, $0.10 and $0.20 per second at 480p,
// 720p and 1080p on the standard and economy routes, auto_route standard,
// and a reference price above ours with its source.
func TestCatalogue(t *testing.T) {
	models := configured(t).list.Models()
	if len(models) != 1 || models[0].ID != model {
		t.Fatalf("models %+v", models)
	}
	m := models[0]
	if !slices.Equal(m.Endpoints, []string{"video_generation"}) || m.AutoRoute != "standard" || len(m.Routes) != 2 || m.Description == "" {
		t.Errorf("endpoints %v, auto_route %q, routes %v, description %q", m.Endpoints, m.AutoRoute, m.Routes, m.Description)
	}
	want := map[string]int64{"480p": 50_000_000, "720p": 100_000_000, "1080p": 200_000_000}
	for _, route := range []string{"standard", "economy"} {
		for r, price := range want {
			if got := int64(m.Routes[route].Resolutions[r]); got != price {
				t.Errorf("route %s %s: %d nano-USD per second, want %d", route, r, got, price)
			}
		}
	}
	if ref := m.Reference; ref == nil {
		t.Error("no reference price")
	} else {
		for r, price := range want {
			if int64(ref.Resolutions[r]) <= price {
				t.Errorf("reference %s %s is not above ours", r, ref.Resolutions[r])
			}
		}
	}
	if s := m.ReferenceSource; s == nil || s.Kind == "" || s.Name == "" || s.URL == "" || s.VerifiedAt == "" || s.Model == "" {
		t.Errorf("reference_price_source %+v is incomplete", s)
	}
}

// TestHandChecked pins the priced fixtures to arithmetic done by hand from
// video.json: per second 480p $0.05 = 50,000,000 nano-USD, 720p $0.10 =
// 100,000,000, 1080p $0.20 = 200,000,000; the hold is the effective
// duration × the price, the charge the seconds the gateway reports × the
// price.
func TestHandChecked(t *testing.T) {
	tests := []sdktest.Hand{
		{File: "defaults", Hold: 400_000_000, Charge: 400_000_000},              // 8 s × 480p
		{File: "480p-explicit", Hold: 150_000_000, Charge: 150_000_000},         // 3 s × 480p
		{File: "720p-default-duration", Hold: 800_000_000, Charge: 800_000_000}, // 8 s × 720p
		{File: "720p-10s", Hold: 1_000_000_000, Charge: 1_000_000_000},          // 10 s × 720p
		{File: "1080p-15s", Hold: 3_000_000_000, Charge: 3_000_000_000},         // 15 s × 1080p
		{File: "1s-min", Hold: 50_000_000, Charge: 50_000_000},                  // 1 s × 480p
		{File: "economy-route", Hold: 1_200_000_000, Charge: 1_200_000_000},     // 6 s × 1080p
		{File: "job-not-accepted", Hold: 1_200_000_000, Charge: 0},              // hold 12 s × 720p; no seconds
	}
	sdktest.CheckHand(t, fixtures, tests)
}

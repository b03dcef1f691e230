package billing

import (
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

// fallbackCharge prices the usage at the published price of the call's
// route, exactly, and charges nothing when that price cannot price it.
func TestFallbackCharge(t *testing.T) {
	t.Parallel()
	tokens := pricing.Price{Unit: pricing.PerMillionTokens, Input: 3_000_000_000, CacheRead: 300_000_000, Output: 15_000_000_000}
	cheap := pricing.Price{Unit: pricing.PerMillionTokens, Input: 44_940_000}
	images := pricing.Price{Unit: pricing.PerImage, Sizes: map[string]pricing.Nano{"1K": 30_000_000, "2K": 50_000_000}}
	cases := []struct {
		name   string
		price  *pricing.Price // nil: no price on the route
		usage  pricing.Usage
		charge pricing.Nano
		priced bool
		how    string
	}{
		// 1,000 × $3/M + 200 × $0.30/M + 333 × $15/M = 3,000,000 + 60,000 + 4,995,000.
		{"tokens", &tokens, pricing.Usage{InputTokens: 1000, CacheReadTokens: 200, OutputTokens: 333}, 8_055_000, true, "charged the usage at the published price"},
		// One token at $0.04494/M is 44.94 nano: rounded up once, to 45.
		{"rounded up once", &cheap, pricing.Usage{InputTokens: 1}, 45, true, "published price"},
		{"no usage", &tokens, pricing.Usage{}, 0, true, "published price"},
		{"no price on the route", nil, pricing.Usage{InputTokens: 10}, 0, false, `"m" has no published price on route "standard"`},
		{"images without their tier", &images, pricing.Usage{Images: 2}, 0, false, "charged nothing: the published price cannot price it"},
		{"images with their tier", &images, pricing.Usage{Images: 2, SizeTier: "2K"}, 100_000_000, true, "published price"},
		{"overflow", &tokens, pricing.Usage{OutputTokens: 1 << 62}, 0, false, "charged nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := pricing.Model{ID: "m", Routes: map[string]pricing.Price{}}
			if tc.price != nil {
				m.Routes["standard"] = *tc.price
			}
			charge, priced, how := fallbackCharge(&Call{Model: m, Route: "standard"}, tc.usage)
			if charge != tc.charge || priced != tc.priced || !strings.Contains(how, tc.how) {
				t.Errorf("fallbackCharge = %d, %v, %q; want %d, %v, %q", charge, priced, how, tc.charge, tc.priced, tc.how)
			}
		})
	}
}

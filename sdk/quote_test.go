package sdk

import (
	"math/rand/v2"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// The precomputed quote equals the definition: the dearest of the four
// single-category splits, each priced by pricing.Price.Charge.
func TestQuoteFastPathMatchesCharge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	price := func() pricing.Nano { return pricing.Nano(r.Int64N(200_000_000_000)) } // up to $200 per 1M
	for i := 0; i < 2000; i++ {
		p := pricing.Price{Unit: pricing.PerMillionTokens, Input: price(), Output: price(), CacheRead: price(), CacheWrite: price(), CacheWrite1h: price()}
		if i%2 == 0 {
			p.LongContext = &pricing.LongContext{MinInputTokens: r.Int64N(300_000), Input: price(), Output: price()}
		}
		m := pricing.Model{ID: "m", Endpoints: []string{pricing.EndpointChat}, MaxOutput: 100_000, Routes: map[string]pricing.Price{"r": p}}
		var l PriceList
		if err := l.Set([]pricing.Model{m}); err != nil {
			t.Fatal(err)
		}
		req := abi.AdmitRequest{Endpoint: pricing.EndpointChat, Model: "m", Route: "r",
			InputTokens: r.Int64N(1_000_000), MaxOutputTokens: r.Int64N(100_001), DefaultOutputTokens: 4096}
		got, err := l.TokenAdmit(req)
		if err != nil {
			t.Fatal(err)
		}
		out := req.MaxOutputTokens
		if out == 0 {
			out = req.DefaultOutputTokens
		}
		var want pricing.Nano
		n := req.InputTokens
		for _, u := range []pricing.Usage{{InputTokens: n, OutputTokens: out}, {CacheWriteTokens: n, OutputTokens: out},
			{CacheWrite1hTokens: n, OutputTokens: out}, {CacheReadTokens: n, OutputTokens: out}} {
			c, err := p.Charge(u)
			if err != nil {
				t.Fatal(err)
			}
			want = max(want, c)
		}
		if pricing.Nano(got.Hold) != want {
			t.Fatalf("case %d: hold %d, want %d (%+v, %+v)", i, got.Hold, want, p, req)
		}
	}
}

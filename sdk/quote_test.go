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
		if err := l.set([]pricing.Model{m}); err != nil {
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

// The settle fast path equals pricing.Price.Charge, including the long-context
// switch, and results or errors on every usage Charge sees: random counts
// spanning every magnitude, negatives and overflows among them.
func TestSettleFastPathMatchesCharge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	price := func() pricing.Nano { return pricing.Nano(r.Int64N(200_000_000_000)) }
	count := func() int64 {
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return -r.Int64N(1000) - 1
		case 2:
			return r.Int64() // overflows the sum now and then
		default:
			return r.Int64N(1 << uint(r.IntN(40)+1))
		}
	}
	for i := 0; i < 20000; i++ {
		p := pricing.Price{Unit: pricing.PerMillionTokens, Input: price(), Output: price(), CacheRead: price(), CacheWrite: price(), CacheWrite1h: price()}
		if i%2 == 0 {
			p.LongContext = &pricing.LongContext{MinInputTokens: r.Int64N(1 << 20), Input: price(), Output: price()}
		}
		m := pricing.Model{ID: "m", Endpoints: []string{pricing.EndpointMessages}, Routes: map[string]pricing.Price{"r": p}}
		var l PriceList
		if err := l.set([]pricing.Model{m}); err != nil {
			t.Fatal(err)
		}
		u := abi.Usage{InputTokens: count(), CacheReadTokens: count(), CacheWriteTokens: count(), CacheWrite1hTokens: count(), OutputTokens: count()}
		got, err := l.TokenSettle(abi.SettleRequest{Endpoint: pricing.EndpointMessages, Model: "m", Route: "r", Usage: u})
		want, werr := p.Charge(usageFromABI(u))
		if (err != nil) != (werr != nil) || (err == nil && pricing.Nano(got.Charge) != want) {
			t.Fatalf("case %d: TokenSettle = %d, %v; Charge = %d, %v (%+v, %+v)", i, got.Charge, err, want, werr, p, u)
		}
	}
}

package pricing

import (
	"errors"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"
)

// tokenPrice is $3/M input, $15/M output, $0.30/M cache read, $3.75/M 5-minute
// cache write, $6/M 1-hour cache write; above 200_000 input tokens $6/M input
// and $22.50/M output.
var tokenPrice = Price{
	Unit:         PerMillionTokens,
	Input:        3_000_000_000,
	Output:       15_000_000_000,
	CacheRead:    300_000_000,
	CacheWrite:   3_750_000_000,
	CacheWrite1h: 6_000_000_000,
	LongContext:  &LongContext{MinInputTokens: 200_000, Input: 6_000_000_000, Output: 22_500_000_000},
}

// typedQuestion is the typed-question fee: $0.04494 per 1M input tokens,
// output free.
var typedQuestion = Price{Unit: PerMillionTokens, Input: 44_940_000, Output: 0}

var imagePrice = Price{Unit: PerImage, Sizes: map[string]Nano{"1K": 30_000_000, "2K": 50_000_000}}

var videoPrice = Price{Unit: PerSecond, Resolutions: map[string]Nano{"480p": 50_000_000, "720p": 100_000_000, "1080p": 200_000_000}}

func TestCharge(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		usage Usage
		want  Nano
	}{
		{"nothing used", tokenPrice, Usage{}, 0},
		// 1234 × 3e9 / 1e6 = 3_702_000; 567 × 15e9 / 1e6 = 8_505_000.
		{"input and output", tokenPrice, Usage{InputTokens: 1234, OutputTokens: 567}, 12_207_000},
		// input 1000 × 3e9 = 3_000_000; cache read 10_000 × 0.3e9 = 3_000_000;
		// cache write 2000 × 3.75e9 = 7_500_000; 1h write 500 × 6e9 = 3_000_000;
		// output 100 × 15e9 = 1_500_000 (all / 1e6); sum 18_000_000.
		{"every token kind", tokenPrice, Usage{InputTokens: 1000, CacheReadTokens: 10_000, CacheWriteTokens: 2000, CacheWrite1hTokens: 500, OutputTokens: 100}, 18_000_000},
		// total input 150_000 + 50_000 = 200_000, not above the threshold:
		// 150_000 × 3e9/1e6 = 450_000_000; 50_000 × 0.3e9/1e6 = 15_000_000;
		// 1000 × 15e9/1e6 = 15_000_000; sum 480_000_000.
		{"long context threshold not crossed", tokenPrice, Usage{InputTokens: 150_000, CacheReadTokens: 50_000, OutputTokens: 1000}, 480_000_000},
		// total input 200_001 > 200_000: input 150_001 × 6e9/1e6 = 900_006_000;
		// cache read unchanged 15_000_000; output 1000 × 22.5e9/1e6 = 22_500_000;
		// sum 937_506_000.
		{"long context prices input and output only", tokenPrice, Usage{InputTokens: 150_001, CacheReadTokens: 50_000, OutputTokens: 1000}, 937_506_000},
		// cache writes count toward the threshold: 1 + 200_000 > 200_000:
		// 1 × 6e9/1e6 = 6000; 200_000 × 3.75e9/1e6 = 750_000_000; sum 750_006_000.
		{"cache writes count toward long context", tokenPrice, Usage{InputTokens: 1, CacheWriteTokens: 200_000}, 750_006_000},
		// 1 × 3e9 / 1e6 = 3000 exactly.
		{"one input token", tokenPrice, Usage{InputTokens: 1}, 3000},
		// 1_000_000 × 44_940_000 / 1e6 = 44_940_000.
		{"typed question one million", typedQuestion, Usage{InputTokens: 1_000_000, OutputTokens: 500}, 44_940_000},
		// 1 × 44_940_000 / 1e6 = 44.94 nano, rounded up to 45.
		{"typed question one token rounds up", typedQuestion, Usage{InputTokens: 1}, 45},
		// 12_345 × 44_940_000 / 1e6 = 554_784.3, rounded up to 554_785.
		{"typed question 12345 tokens", typedQuestion, Usage{InputTokens: 12_345}, 554_785},
		// 0.5 nano + 0.5 nano = exactly 1: rounding per term would give 2.
		{"rounded once not per term", Price{Unit: PerMillionTokens, Input: 500_000, CacheRead: 500_000}, Usage{InputTokens: 1, CacheReadTokens: 1}, 1},
		// 0.500001 + 0.5 = 1.000001, rounded up to 2.
		{"a millionth of a nano rounds up", Price{Unit: PerMillionTokens, Input: 500_001, CacheRead: 500_000}, Usage{InputTokens: 1, CacheReadTokens: 1}, 2},
		// MaxInt64 tokens at 1 nano per token is MaxInt64 nano exactly.
		{"largest charge", Price{Unit: PerMillionTokens, Input: 1_000_000}, Usage{InputTokens: math.MaxInt64}, math.MaxInt64},
		// 3 × 0.05 = 0.15.
		{"images 2K", imagePrice, Usage{Images: 3, SizeTier: "2K"}, 150_000_000},
		// 128 × 0.03 = 3.84.
		{"images 1K n=128", imagePrice, Usage{Images: 128, SizeTier: "1K"}, 3_840_000_000},
		{"image price ignores tokens", imagePrice, Usage{Images: 1, SizeTier: "1K", InputTokens: 1000}, 30_000_000},
		// 8 × 0.10 = 0.80.
		{"video 720p 8s", videoPrice, Usage{Seconds: 8, Resolution: "720p"}, 800_000_000},
		// 15 × 0.20 = 3.
		{"video 1080p 15s", videoPrice, Usage{Seconds: 15, Resolution: "1080p"}, 3_000_000_000},
		// 3 × 0.002 = 0.006.
		{"per request", Price{Unit: PerRequest, UnitPrice: 2_000_000}, Usage{Requests: 3}, 6_000_000},
		{"per request none", Price{Unit: PerRequest, UnitPrice: 2_000_000}, Usage{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.price.Charge(tt.usage)
			if err != nil || got != tt.want {
				t.Fatalf("Charge = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestChargeErrors(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		usage Usage
		want  string // in the message
		is    error  // when set, errors.Is must hold
	}{
		{"negative input", tokenPrice, Usage{InputTokens: -1}, "input_tokens is negative", nil},
		{"negative output", tokenPrice, Usage{OutputTokens: -5}, "output_tokens is negative (-5)", nil},
		{"negative 1h write", tokenPrice, Usage{CacheWrite1hTokens: -5}, "cache_write_1h_tokens", nil},
		{"negative price", Price{Unit: PerMillionTokens, CacheRead: -1}, Usage{}, "cache_read is negative", nil},
		{"negative long context price", Price{Unit: PerMillionTokens, LongContext: &LongContext{MinInputTokens: 1, Output: -1}}, Usage{InputTokens: 5}, "long_context.output is negative", nil},
		{"unknown size tier", imagePrice, Usage{Images: 1, SizeTier: "4K"}, `size tier "4K" (known: 1K, 2K)`, nil},
		{"empty size tier", imagePrice, Usage{Images: 1}, `size tier ""`, nil},
		{"negative images", imagePrice, Usage{Images: -1, SizeTier: "1K"}, "images is negative", nil},
		{"unknown resolution", videoPrice, Usage{Seconds: 1, Resolution: "4k"}, `resolution "4k" (known: 1080p, 480p, 720p)`, nil},
		{"negative seconds", videoPrice, Usage{Seconds: -8, Resolution: "480p"}, "seconds is negative", nil},
		{"negative requests", Price{Unit: PerRequest, UnitPrice: 1}, Usage{Requests: -1}, "requests is negative", nil},
		{"negative unit price", Price{Unit: PerRequest, UnitPrice: -1}, Usage{Requests: 1}, "unit_price is negative", nil},
		{"unknown unit", Price{Unit: "per_token"}, Usage{}, `unit "per_token"`, nil},
		{"empty unit", Price{}, Usage{}, `unit ""`, nil},
		// (MaxInt64 × 1e6 + 1) / 1e6 rounds up to MaxInt64 + 1.
		{"one past the largest charge", Price{Unit: PerMillionTokens, Input: 1_000_000, CacheRead: 1}, Usage{InputTokens: math.MaxInt64, CacheReadTokens: 1}, "overflow", ErrOverflow},
		{"token overflow", Price{Unit: PerMillionTokens, Input: math.MaxInt64, Output: math.MaxInt64}, Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}, "overflow", ErrOverflow},
		{"128-bit carry", Price{Unit: PerMillionTokens, Input: math.MaxInt64, Output: math.MaxInt64, CacheRead: math.MaxInt64, CacheWrite: math.MaxInt64, CacheWrite1h: math.MaxInt64},
			Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64, CacheWriteTokens: math.MaxInt64, CacheWrite1hTokens: math.MaxInt64}, "overflow", ErrOverflow},
		{"image overflow", Price{Unit: PerImage, Sizes: map[string]Nano{"1K": math.MaxInt64}}, Usage{Images: 2, SizeTier: "1K"}, "overflow", ErrOverflow},
		{"video overflow", Price{Unit: PerSecond, Resolutions: map[string]Nano{"480p": 1 << 62}}, Usage{Seconds: 2, Resolution: "480p"}, "overflow", ErrOverflow},
		{"request overflow", Price{Unit: PerRequest, UnitPrice: 1 << 32}, Usage{Requests: 1 << 31}, "overflow", ErrOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.price.Charge(tt.usage)
			if err == nil {
				t.Fatalf("Charge = %d, want an error containing %q", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error %v is not %v", err, tt.is)
			}
		})
	}
}

// ratCharge is an independent computation of a token charge: the price texts
// are read by math/big as exact rationals in USD per 1M tokens, and the sum is
// converted to nano-USD and rounded up with big integers. ok is false when the
// result does not fit in an int64.
func ratCharge(texts [5]string, tokens [5]int64) (Nano, bool) {
	sum := new(big.Rat)
	for i := range texts {
		r, ok := new(big.Rat).SetString(texts[i])
		if !ok {
			panic("bad price text " + texts[i])
		}
		r.Mul(r, new(big.Rat).SetInt64(tokens[i]))
		sum.Add(sum, r)
	}
	sum.Mul(sum, big.NewRat(int64(NanoPerUSD), 1_000_000))
	q, m := new(big.Int).QuoRem(sum.Num(), sum.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, false
	}
	return Nano(q.Int64()), true
}

// priceTexts writes n as several equal decimal texts: shortest, nine
// decimals, and with zeros padded beyond the ninth decimal.
func priceTexts(n Nano) []string {
	s := n.String()
	padded := s + ".000000000000"
	if strings.Contains(s, ".") {
		padded = s + "000000000000"
	}
	return []string{s, n.Fixed(), padded}
}

// TestChargeMatchesRat checks Charge against ratCharge for random prices and
// usage, with every price written as several equal texts.
func TestChargeMatchesRat(t *testing.T) {
	r := rand.New(rand.NewSource(20260919))
	randNano := func() Nano {
		switch r.Intn(4) {
		case 0:
			return Nano(r.Int63n(1000)) // fractions of a nano per token
		case 1:
			return Nano(r.Int63n(100_000_000_000)) // up to $100/M
		case 2:
			return Nano(r.Int63())
		default:
			return 0
		}
	}
	randTokens := func() int64 {
		switch r.Intn(4) {
		case 0:
			return r.Int63n(10)
		case 1:
			return r.Int63n(2_000_000)
		case 2:
			return r.Int63()
		default:
			return 0
		}
	}
	overflows := 0
	for i := 0; i < 20000; i++ {
		var nanos [5]Nano
		var tokens [5]int64
		for k := range nanos {
			nanos[k] = randNano()
			tokens[k] = randTokens()
		}
		variant := r.Intn(3)
		var texts [5]string
		var parsed [5]Nano
		for k := range nanos {
			texts[k] = priceTexts(nanos[k])[variant]
			p, err := ParseUSD(texts[k])
			if err != nil {
				t.Fatalf("ParseUSD(%q): %v", texts[k], err)
			}
			parsed[k] = p
		}
		p := Price{Unit: PerMillionTokens, Input: parsed[0], CacheRead: parsed[1], CacheWrite: parsed[2], CacheWrite1h: parsed[3], Output: parsed[4]}
		u := Usage{InputTokens: tokens[0], CacheReadTokens: tokens[1], CacheWriteTokens: tokens[2], CacheWrite1hTokens: tokens[3], OutputTokens: tokens[4]}
		got, err := p.Charge(u)
		want, fits := ratCharge(texts, tokens)
		if !fits {
			overflows++
			if !errors.Is(err, ErrOverflow) {
				t.Fatalf("case %d: Charge(%+v, %+v) = %d, %v; want ErrOverflow", i, p, u, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Fatalf("case %d: Charge(%+v, %+v) = %d, %v; big.Rat says %d", i, p, u, got, err, want)
		}
		// Every other spelling of the same prices charges the same.
		for alt := 0; alt < 3; alt++ {
			q := p
			q.Input, _ = ParseUSD(priceTexts(nanos[0])[alt])
			q.Output, _ = ParseUSD(priceTexts(nanos[4])[alt])
			if g, err := q.Charge(u); err != nil || g != got {
				t.Fatalf("case %d spelling %d: %d, %v; want %d", i, alt, g, err, got)
			}
		}
	}
	if overflows == 0 || overflows == 20000 {
		t.Fatalf("%d of 20000 cases overflowed: the generator does not cover both sides", overflows)
	}
}

// TestChargeLongContextMatchesRat checks the long-context switch against
// big.Rat around the threshold.
func TestChargeLongContextMatchesRat(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 5000; i++ {
		p := tokenPrice
		p.LongContext = &LongContext{MinInputTokens: 1 + r.Int63n(1000), Input: Nano(r.Int63n(1e11)), Output: Nano(r.Int63n(1e11))}
		u := Usage{InputTokens: r.Int63n(600), CacheReadTokens: r.Int63n(600), CacheWriteTokens: r.Int63n(300), CacheWrite1hTokens: r.Int63n(300), OutputTokens: r.Int63n(1000)}
		in, out := p.Input, p.Output
		if u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens+u.CacheWrite1hTokens > p.LongContext.MinInputTokens {
			in, out = p.LongContext.Input, p.LongContext.Output
		}
		texts := [5]string{in.String(), p.CacheRead.String(), p.CacheWrite.String(), p.CacheWrite1h.String(), out.String()}
		want, _ := ratCharge(texts, [5]int64{u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.OutputTokens})
		got, err := p.Charge(u)
		if err != nil || got != want {
			t.Fatalf("Charge(%+v) with %+v = %d, %v; want %d", u, *p.LongContext, got, err, want)
		}
	}
}

func BenchmarkCharge(b *testing.B) {
	u := Usage{InputTokens: 12_345, CacheReadTokens: 50_000, CacheWriteTokens: 2_000, CacheWrite1hTokens: 100, OutputTokens: 1_234}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tokenPrice.Charge(u); err != nil {
			b.Fatal(err)
		}
	}
}

package pricing

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
)

// ErrOverflow is wrapped by Charge when a charge does not fit in a Nano.
var ErrOverflow = errors.New("charge overflows int64 nano-USD")

// tokensPerMillion is the divisor of per-million-token prices.
const tokensPerMillion = 1_000_000

// Charge is the exact price of u under p, in nano-USD, rounded once, up.
//
// By p.Unit:
//   - PerMillionTokens: InputTokens at Input, CacheReadTokens at CacheRead,
//     CacheWriteTokens at CacheWrite, CacheWrite1hTokens at CacheWrite1h and
//     OutputTokens at Output, each price per one million tokens. When
//     p.LongContext is set and TotalInputTokens is above
//     LongContext.MinInputTokens, LongContext.Input replaces Input and
//     LongContext.Output replaces Output; the cache prices stay as they are.
//     The products are summed exactly in 128 bits and the sum is divided by
//     one million once, rounding up: one input token at $0.04494/M costs
//     1 nano-USD, not 0.
//   - PerImage: Sizes[u.SizeTier] × u.Images. An unknown tier is an error.
//   - PerSecond: Resolutions[u.Resolution] × u.Seconds. An unknown
//     resolution is an error.
//   - PerRequest: UnitPrice × u.Requests.
//
// Fields of u that p.Unit does not use are ignored. A negative count in u,
// a negative price in p, an unknown unit, or a result above math.MaxInt64
// (wrapping ErrOverflow) is an error.
func (p Price) Charge(u Usage) (Nano, error) {
	switch p.Unit {
	case PerMillionTokens:
		return p.chargeTokens(u)
	case PerImage:
		if err := nonNegative("images", u.Images); err != nil {
			return 0, err
		}
		price, err := tier(p.Sizes, "size tier", u.SizeTier)
		if err != nil {
			return 0, err
		}
		return mulNano(price, u.Images)
	case PerSecond:
		if err := nonNegative("seconds", u.Seconds); err != nil {
			return 0, err
		}
		price, err := tier(p.Resolutions, "resolution", u.Resolution)
		if err != nil {
			return 0, err
		}
		return mulNano(price, u.Seconds)
	case PerRequest:
		if err := nonNegative("requests", u.Requests); err != nil {
			return 0, err
		}
		if p.UnitPrice < 0 {
			return 0, fmt.Errorf("price unit_price is negative (%s)", p.UnitPrice)
		}
		return mulNano(p.UnitPrice, u.Requests)
	default:
		return 0, fmt.Errorf("price unit %q is not one of %s, %s, %s, %s", p.Unit, PerMillionTokens, PerImage, PerSecond, PerRequest)
	}
}

func (p Price) chargeTokens(u Usage) (Nano, error) {
	input, output := p.Input, p.Output
	inputName, outputName := "input", "output"
	if lc := p.LongContext; lc != nil && u.TotalInputTokens() > lc.MinInputTokens {
		input, output = lc.Input, lc.Output
		inputName, outputName = "long_context.input", "long_context.output"
	}
	terms := [...]struct {
		tokens    int64
		price     Nano
		usageName string
		priceName string
	}{
		{u.InputTokens, input, "input_tokens", inputName},
		{u.CacheReadTokens, p.CacheRead, "cache_read_tokens", "cache_read"},
		{u.CacheWriteTokens, p.CacheWrite, "cache_write_tokens", "cache_write"},
		{u.CacheWrite1hTokens, p.CacheWrite1h, "cache_write_1h_tokens", "cache_write_1h"},
		{u.OutputTokens, output, "output_tokens", outputName},
	}
	var hi, lo uint64 // the exact sum of tokens × price, in nano-USD × 1e6
	for _, t := range terms {
		if err := nonNegative(t.usageName, t.tokens); err != nil {
			return 0, err
		}
		if t.price < 0 {
			return 0, fmt.Errorf("price %s is negative (%s)", t.priceName, t.price)
		}
		h, l := bits.Mul64(uint64(t.tokens), uint64(t.price))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, carry = bits.Add64(hi, h, carry)
		if carry != 0 {
			return 0, ErrOverflow
		}
	}
	if hi >= tokensPerMillion { // the quotient would not fit in 64 bits
		return 0, ErrOverflow
	}
	q, r := bits.Div64(hi, lo, tokensPerMillion)
	if q > math.MaxInt64 || (r != 0 && q == math.MaxInt64) {
		return 0, ErrOverflow
	}
	if r != 0 {
		q++ // the one rounding, up
	}
	return Nano(q), nil
}

func nonNegative(name string, v int64) error {
	if v < 0 {
		return fmt.Errorf("usage %s is negative (%d)", name, v)
	}
	return nil
}

// tier looks name up in prices; the error names the kind and lists the known
// names.
func tier(prices map[string]Nano, kind, name string) (Nano, error) {
	price, ok := prices[name]
	if !ok {
		known := make([]string, 0, len(prices))
		for k := range prices {
			known = append(known, k)
		}
		sort.Strings(known)
		return 0, fmt.Errorf("price has no %s %q (known: %s)", kind, name, strings.Join(known, ", "))
	}
	if price < 0 {
		return 0, fmt.Errorf("price of %s %q is negative (%s)", kind, name, price)
	}
	return price, nil
}

// mulNano is price × count, both non-negative, or ErrOverflow.
func mulNano(price Nano, count int64) (Nano, error) {
	hi, lo := bits.Mul64(uint64(price), uint64(count))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return Nano(lo), nil
}

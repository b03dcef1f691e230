package pricing

import "github.com/modelrelay/modelrelay/wire/units"

// Usage is what one call consumed, the token counts and units a price is
// charged on (units.Usage, a leaf beside wire: wire reads it out of the
// providers' answers, pricing turns it into money).
type Usage = units.Usage

// EstimateTokens is the conservative token estimate for n bytes of delivered
// text, ceil(n/4), used to settle a stream that ended without usage (client
// gone, upstream cut). Four bytes per token overestimates English text with
// current tokenizers only slightly and never returns 0 for non-empty text.
func EstimateTokens(n int) int64 {
	if n <= 0 {
		return 0
	}
	return (int64(n) + 3) / 4
}

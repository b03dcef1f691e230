// Package units is the Usage type, what one call consumed, and nothing
// else: wire reads it out of the providers' answers, pricing charges it.
// It is a leaf of its own, apart from wire, because pricing is compiled
// into every WebAssembly plugin: a plugin that prices a Usage must not link
// wire's request decoders (mime/multipart, net/textproto) and their init.
// It imports only the standard library's math, and holds no money.
package units

import "math"

// Usage is what one call consumed, normalised across wire formats. The token
// fields are disjoint: InputTokens are the input tokens billed at the plain
// input price (neither read from nor written to a cache).
//
// Its JSON (the journal entries of the admin API) uses the names of
// abi.Usage, in snake_case like the rest of the API; a zero field is left
// out, so an entry shows the units its call was priced in.
type Usage struct {
	InputTokens        int64 `json:"input_tokens,omitempty"`          // uncached input
	CacheReadTokens    int64 `json:"cache_read_tokens,omitempty"`     // input read from a prompt cache
	CacheWriteTokens   int64 `json:"cache_write_tokens,omitempty"`    // input written to a 5-minute cache
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"` // input written to a 1-hour cache
	OutputTokens       int64 `json:"output_tokens,omitempty"`

	Images     int64  `json:"images,omitempty"`     // images produced (per_image)
	SizeTier   string `json:"size_tier,omitempty"`  // the size tier the images were priced at
	Seconds    int64  `json:"seconds,omitempty"`    // seconds of video (per_second)
	Resolution string `json:"resolution,omitempty"` // the resolution priced (per_second)
	Requests   int64  `json:"requests,omitempty"`   // requests (per_request)
}

// TotalInputTokens is every input token of the call, cached or not:
// InputTokens + CacheReadTokens + CacheWriteTokens + CacheWrite1hTokens. The
// sum saturates at math.MaxInt64 (and math.MinInt64) instead of wrapping.
func (u Usage) TotalInputTokens() int64 {
	var t int64
	for _, v := range [...]int64{u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite1hTokens} {
		s := t + v
		switch {
		case v > 0 && s < t:
			s = math.MaxInt64
		case v < 0 && s > t:
			s = math.MinInt64
		}
		t = s
	}
	return t
}

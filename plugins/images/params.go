package main

import (
	"slices"
	"strconv"
	"strings"

	"github.com/modelrelay/modelrelay/plugins/internal/param"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Params the gateway passes (abi.Param names); each is absent when the
// client did not send the field.
const (
	paramSize           = "size"
	paramN              = "n"
	paramQuality        = "quality"
	paramResponseFormat = "response_format"
	paramStream         = "stream"
)

const (
	autoSize   = "auto"
	pinnedSize = "1024x1024" // what an omitted or auto size becomes

	minN     = 1
	maxN     = 128
	defaultN = 1
)

var (
	qualities       = []string{"auto", "low", "medium", "high", "standard", "hd"}
	responseFormats = []string{"url", "b64_json"}
	booleans        = []string{"true", "false"}
)

// request is what the params say about the fee.
type request struct {
	size   string // the effective size, WIDTHxHEIGHT
	pinned bool   // size was omitted or auto, and is pinned to pinnedSize
	pixels int64
	tier   string // tier1K or tier2K
	n      int64  // images asked for, minN..maxN
}

// parseParams validates params and returns the request they describe. A
// 400 names the param at fault. Each param may be given once; a param not
// listed above is ignored.
func parseParams(params []abi.Param) (request, *abi.Error) {
	var (
		seen [5]bool
		r    = request{n: defaultN}
		size string
	)
	hasSize := false
	for _, prm := range params {
		i := indexOf(prm.Name)
		if i < 0 {
			continue
		}
		if seen[i] {
			return request{}, param.Repeated(prm.Name)
		}
		seen[i] = true
		switch prm.Name {
		case paramSize:
			size, hasSize = prm.Value, true
		case paramN:
			n, aerr := param.Int(paramN, prm.Value, minN, maxN, "an integer", "")
			if aerr != nil {
				return request{}, aerr
			}
			r.n = n
		case paramQuality:
			if aerr := param.OneOf(paramQuality, prm.Value, qualities); aerr != nil {
				return request{}, aerr
			}
		case paramResponseFormat:
			if aerr := param.OneOf(paramResponseFormat, prm.Value, responseFormats); aerr != nil {
				return request{}, aerr
			}
		case paramStream:
			if !slices.Contains(booleans, prm.Value) {
				return request{}, sdk.Invalid(paramStream, "stream must be true or false (got %s)", sdk.QuoteValue(prm.Value))
			}
		}
	}
	if !hasSize || size == autoSize {
		size, r.pinned = pinnedSize, true
	}
	w, h, aerr := parseSize(size)
	if aerr != nil {
		return request{}, aerr
	}
	r.size, r.pixels = size, w*h
	switch {
	case r.pixels <= max1K:
		r.tier = tier1K
	case r.pixels <= max2K:
		r.tier = tier2K
	default:
		return request{}, sdk.Invalid(paramSize, "size %s is %d pixels, above the %d pixels (2048x2048) of the largest tier", size, r.pixels, max2K)
	}
	return r, nil
}

func indexOf(name string) int {
	switch name {
	case paramSize:
		return 0
	case paramN:
		return 1
	case paramQuality:
		return 2
	case paramResponseFormat:
		return 3
	case paramStream:
		return 4
	}
	return -1
}

// parseSize parses WIDTHxHEIGHT: two positive decimal integers without sign
// or leading zeros, joined by a lowercase x. A dimension above max2K is
// refused here (the other is at least 1, so the size is above the largest
// tier), which keeps width × height far from overflowing.
func parseSize(s string) (w, h int64, _ *abi.Error) {
	ws, hs, ok := strings.Cut(s, "x")
	if !ok || strings.Contains(hs, "x") {
		return 0, 0, sdk.Invalid(paramSize, "size must be auto or <WIDTH>x<HEIGHT> with a lowercase x, like 1024x1024 (got %s)", sdk.QuoteValue(s))
	}
	w, aerr := dimension("width", ws, s)
	if aerr != nil {
		return 0, 0, aerr
	}
	h, aerr = dimension("height", hs, s)
	if aerr != nil {
		return 0, 0, aerr
	}
	return w, h, nil
}

func dimension(which, d, size string) (int64, *abi.Error) {
	if !param.Digits(d) {
		return 0, sdk.Invalid(paramSize, "size %s must be a positive integer of decimal digits, like 1024x1024 (got %s)", which, sdk.QuoteValue(size))
	}
	if d[0] == '0' {
		return 0, sdk.Invalid(paramSize, "size %s must be a positive integer without leading zeros (got %s)", which, sdk.QuoteValue(size))
	}
	if len(d) > len(strconv.Itoa(max2K)) {
		return 0, sdk.Invalid(paramSize, "size %s is above the %d pixels (2048x2048) of the largest tier (got %s)", which, max2K, sdk.QuoteValue(size))
	}
	v, _ := strconv.ParseInt(d, 10, 64) // at most 7 digits
	if v > max2K {
		return 0, sdk.Invalid(paramSize, "size %s is above the %d pixels (2048x2048) of the largest tier (got %s)", which, max2K, sdk.QuoteValue(size))
	}
	return v, nil
}

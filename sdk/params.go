package sdk

import (
	"math"
	"strconv"
	"strings"
)

// This file holds the small parsers plugins use on abi.Param values: the
// client's request fields as text. They never allocate on success, which
// keeps the per-call path of a wasm guest cheap.

// Digits reports whether s is one or more ASCII decimal digits.
func Digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ParseInt parses an optionally negative decimal integer: digits only, with
// no plus sign, spaces, fraction or exponent. A value beyond int64
// saturates to math.MinInt64 or math.MaxInt64, so that a caller reports it
// as out of range rather than as malformed.
func ParseInt(s string) (int64, bool) {
	if !Digits(strings.TrimPrefix(s, "-")) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // digits only, so the error is a range error
		if s[0] == '-' {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return v, true
}

// ParseCount parses a non-negative decimal integer (digits only) that fits
// in int64; a larger value is not ok (and 0).
func ParseCount(s string) (int64, bool) {
	if !Digits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// QuoteValue quotes a client's value for an error message (strconv.Quote),
// cut to its first 40 bytes and marked "…" when longer, so that a hostile
// value cannot bloat the error.
func QuoteValue(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}

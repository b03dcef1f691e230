package param

import (
	"math"
	"strconv"
	"strings"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

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

// Int parses the value of the param name as a decimal integer from lo to
// hi. A value that is not an integer is a 400 "NAME must be WHAT from LO to
// HI (got VALUE)"; one out of range is "NAME must be from LO to HI[ UNIT]
// (got VALUE)", both naming the param and quoting the value with
// sdk.QuoteValue.
func Int(name, value string, lo, hi int64, what, unit string) (int64, *abi.Error) {
	v, ok := ParseInt(value)
	if ok && v >= lo && v <= hi {
		return v, nil
	}
	// One message format for both errors keeps a guest's code small.
	var pre, post string
	if !ok {
		pre = what + " "
	} else if unit != "" {
		post = " " + unit
	}
	return 0, sdk.Invalid(name, "%s must be %sfrom %d to %d%s (got %s)", name, pre, lo, hi, post, sdk.QuoteValue(value))
}

// OneOf checks that the value of the param name is one of allowed: else a
// 400 "NAME must be one of A, B, … (got VALUE)".
func OneOf(name, value string, allowed []string) *abi.Error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return sdk.Invalid(name, "%s must be one of %s (got %s)", name, strings.Join(allowed, ", "), sdk.QuoteValue(value))
}

// Repeated is the 400 of a param given more than once.
func Repeated(name string) *abi.Error {
	return sdk.Invalid(name, "%s is given more than once", name)
}

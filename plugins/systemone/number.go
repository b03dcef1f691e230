package main

import "strings"

// decimal is a JSON number as an exact decimal: the value is
// ±0.digits × 10^exp, digits without leading or trailing zeros; zero has no
// digits. It exists to compare a score question's min and max exactly,
// without a float's rounding.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExponent bounds the exponents parseNumber keeps exactly: an exponent
// beyond ±maxExponent (far past any float64) is clamped to it, so that two
// such numbers compare by their digits.
const maxExponent = 1_000_000_000_000_000

// parseNumber parses s by the JSON number grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?); ok is false for
// anything else (spaces, a plus sign, leading zeros, hex, NaN, quotes).
func parseNumber(s string) (d decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return decimal{}, false
	}
	intPart := s[start:i]
	var fracPart string
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == j {
			return decimal{}, false
		}
		fracPart = s[j:i]
	}
	var e int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		j := i
		for i < len(s) && isDigit(s[i]) {
			if e < maxExponent {
				e = e*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == j {
			return decimal{}, false
		}
		e = min(e, maxExponent)
		if eneg {
			e = -e
		}
	}
	if i != len(s) {
		return decimal{}, false
	}
	// intPart.fracPart × 10^e = 0.(intPart fracPart) × 10^(len(intPart)+e).
	mantissa := intPart + fracPart
	point := int64(len(intPart))
	trimmed := strings.TrimLeft(mantissa, "0")
	point -= int64(len(mantissa) - len(trimmed))
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{}, true // zero, whatever its sign
	}
	d.exp = point + e
	return d, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// compare returns -1, 0 or +1 as a is less than, equal to or greater than b.
func compare(a, b decimal) int {
	sa, sb := a.sign(), b.sign()
	switch {
	case sa != sb:
		return cmpInt(int64(sa), int64(sb))
	case sa == 0:
		return 0
	}
	m := cmpInt(a.exp, b.exp)
	if m == 0 {
		// Same magnitude order: 0.d1d2… compares digit by digit, a
		// missing digit being 0 (no trailing zeros, so a prefix is smaller).
		m = strings.Compare(a.digits, b.digits)
	}
	return m * sa
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

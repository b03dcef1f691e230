package pricing

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// Errors an amount parser wraps; test them with errors.Is.
var (
	// ErrSyntax: the text is not a plain decimal number ("12", "0.5").
	// Signs other than a leading "-" in ParseSignedUSD, exponents, spaces,
	// and a dot without digits on both sides are syntax errors.
	ErrSyntax = errors.New("is not a plain decimal amount")
	// ErrNegative: ParseUSD was given a negative amount.
	ErrNegative = errors.New("is negative")
	// ErrPrecision: a non-zero digit beyond the ninth decimal place.
	ErrPrecision = errors.New("has more precision than one nano-USD")
	// ErrRange: the amount does not fit in a Nano (int64 nano-USD, about
	// ±9.2 billion USD).
	ErrRange = errors.New("is out of range for nano-USD")
)

// AmountError is the error of ParseUSD and ParseSignedUSD. Its message quotes
// the text: `"1.2345678901" has more precision than one nano-USD`.
type AmountError struct {
	Text string // the text that was parsed
	Err  error  // ErrSyntax, ErrNegative, ErrPrecision or ErrRange
}

func (e *AmountError) Error() string {
	text := e.Text
	if len(text) > 64 {
		text = text[:64] + "…"
	}
	return strconv.Quote(text) + " " + e.Err.Error()
}

// Unwrap returns the sentinel error.
func (e *AmountError) Unwrap() error { return e.Err }

// ParseUSD parses exact decimal text in US dollars into nano-USD: "3",
// "3.00", "0.04494", "0.000000001". It accepts only digits with at most one
// dot that has digits on both sides; no sign, exponent or spaces. Digits
// beyond the ninth decimal place must be zeros ("0.1000000000" is 0.1 USD),
// otherwise the error wraps ErrPrecision. A negative amount wraps
// ErrNegative; an amount that overflows int64 nano-USD wraps ErrRange.
//
// Token prices use the same function: "3.00" per one million tokens is
// 3_000_000_000 nano-USD per million tokens.
func ParseUSD(s string) (Nano, error) {
	if len(s) > 0 && s[0] == '-' {
		if _, err := parseMagnitude(s, s[1:], false); err != nil && !errors.Is(err, ErrRange) {
			return 0, err // report what else is wrong with it first
		}
		return 0, &AmountError{Text: s, Err: ErrNegative}
	}
	u, err := parseMagnitude(s, s, false)
	return Nano(u), err
}

// ParseSignedUSD is ParseUSD that also accepts a leading "-". It is meant for
// balances and adjustments; prices are parsed with ParseUSD.
func ParseSignedUSD(s string) (Nano, error) {
	if len(s) > 0 && s[0] == '-' {
		u, err := parseMagnitude(s, s[1:], true)
		if err != nil {
			return 0, err
		}
		return Nano(-u), nil // -(1<<63) wraps to math.MinInt64, as intended
	}
	u, err := parseMagnitude(s, s, false)
	return Nano(u), err
}

// parseMagnitude parses the unsigned decimal digits in t (s is the whole text,
// for errors) into nano-USD. The result is at most math.MaxInt64, or
// math.MaxInt64+1 when neg is set.
func parseMagnitude(s, t string, neg bool) (uint64, error) {
	intPart, frac := t, ""
	for i := 0; i < len(t); i++ {
		if t[i] == '.' {
			intPart, frac = t[:i], t[i+1:]
			if frac == "" {
				return 0, &AmountError{Text: s, Err: ErrSyntax}
			}
			break
		}
	}
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return 0, &AmountError{Text: s, Err: ErrSyntax}
	}
	if len(frac) > 9 {
		if !allZeros(frac[9:]) {
			return 0, &AmountError{Text: s, Err: ErrPrecision}
		}
		frac = frac[:9]
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	add := func(c byte) bool {
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return false
		}
		v = v*10 + d
		return true
	}
	for i := 0; i < len(intPart); i++ {
		if !add(intPart[i]) {
			return 0, &AmountError{Text: s, Err: ErrRange}
		}
	}
	for i := 0; i < 9; i++ {
		c := byte('0')
		if i < len(frac) {
			c = frac[i]
		}
		if !add(c) {
			return 0, &AmountError{Text: s, Err: ErrRange}
		}
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// String formats n in US dollars as the shortest exact decimal: "0.03", "3",
// "0.04494", "-1.5", "0".
func (n Nano) String() string {
	var buf [24]byte
	return string(n.appendUSD(buf[:0], false))
}

// Fixed formats n in US dollars with exactly nine decimals: "9.999871250",
// "-0.000000001".
func (n Nano) Fixed() string {
	var buf [24]byte
	return string(n.appendUSD(buf[:0], true))
}

// AppendUSD appends String's text to b.
func (n Nano) AppendUSD(b []byte) []byte { return n.appendUSD(b, false) }

func (n Nano) appendUSD(b []byte, fixed bool) []byte {
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = -u // two's complement magnitude; exact for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/uint64(NanoPerUSD), 10)
	frac := u % uint64(NanoPerUSD)
	if frac == 0 && !fixed {
		return b
	}
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := 9
	if !fixed {
		for digits[end-1] == '0' {
			end--
		}
	}
	b = append(b, '.')
	return append(b, digits[:end]...)
}

// MarshalJSON writes n in US dollars as a JSON number, exactly (String).
func (n Nano) MarshalJSON() ([]byte, error) {
	return n.AppendUSD(make([]byte, 0, 24)), nil
}

// UnmarshalJSON reads US dollars from a JSON number or a JSON string with
// ParseSignedUSD semantics (exact, at most nine significant decimals, no
// exponent). JSON null leaves n unchanged.
func (n *Nano) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	text := string(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &text); err != nil {
			return err
		}
	}
	v, err := ParseSignedUSD(text)
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// MarshalText writes String's text, so that Nano reads and writes as US
// dollars in text formats (YAML configuration, map keys).
func (n Nano) MarshalText() ([]byte, error) {
	return n.AppendUSD(make([]byte, 0, 24)), nil
}

// UnmarshalText parses US dollars with ParseSignedUSD.
func (n *Nano) UnmarshalText(text []byte) error {
	v, err := ParseSignedUSD(string(text))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

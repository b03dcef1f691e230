package main

import (
	"math/big"
	"strings"
	"testing"
)

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in   string
		want decimal
		ok   bool
	}{
		{"0", decimal{}, true},
		{"-0", decimal{}, true},
		{"0.000", decimal{}, true},
		{"0e99", decimal{}, true},
		{"1", decimal{digits: "1", exp: 1}, true},
		{"10", decimal{digits: "1", exp: 2}, true},
		{"-12.50", decimal{neg: true, digits: "125", exp: 2}, true},
		{"0.001", decimal{digits: "1", exp: -2}, true},
		{"1e2", decimal{digits: "1", exp: 3}, true},
		{"1E+2", decimal{digits: "1", exp: 3}, true},
		{"25e-3", decimal{digits: "25", exp: -1}, true},
		{"1e99999999999999999999", decimal{digits: "1", exp: 1 + maxExponent}, true},
		{"1e-99999999999999999999", decimal{digits: "1", exp: 1 - maxExponent}, true},
		{"", decimal{}, false},
		{"-", decimal{}, false},
		{"+1", decimal{}, false},
		{"01", decimal{}, false},
		{"1.", decimal{}, false},
		{".5", decimal{}, false},
		{"1e", decimal{}, false},
		{"1e+", decimal{}, false},
		{" 1", decimal{}, false},
		{"1 ", decimal{}, false},
		{"0x10", decimal{}, false},
		{"NaN", decimal{}, false},
		{"Infinity", decimal{}, false},
		{`"1"`, decimal{}, false},
		{"1.5.5", decimal{}, false},
		{"--1", decimal{}, false},
	}
	for _, tt := range tests {
		got, ok := parseNumber(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseNumber(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0", "-0", 0},
		{"0", "0.0e5", 0},
		{"1", "1.0", 0},
		{"100", "1e2", 0},
		{"0.1", "1e-1", 0},
		{"0", "1", -1},
		{"-1", "0", -1},
		{"-2", "-1", -1},
		{"0.12", "0.123", -1},
		{"0.2", "0.123", 1},
		{"99", "100", -1},
		{"-100", "-99", -1},
		// Beyond float64: equal as floats, not as decimals.
		{"0.1000000000000000001", "0.1000000000000000002", -1},
		{"1e400", "2e400", -1},
		{"-1e400", "1e-400", -1},
		{"123456789012345678901234567890", "123456789012345678901234567891", -1},
	}
	for _, tt := range tests {
		a, okA := parseNumber(tt.a)
		b, okB := parseNumber(tt.b)
		if !okA || !okB {
			t.Fatalf("%q or %q does not parse", tt.a, tt.b)
		}
		if got := compare(a, b); got != tt.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compare(b, a); got != -tt.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// FuzzNumber: parseNumber accepts exactly what big.Rat reads as a JSON
// number (checked by grammar), and compare agrees with big.Rat wherever the
// exponents are small enough for big.Rat to hold the values.
func FuzzNumber(f *testing.F) {
	for _, s := range [][2]string{{"0", "-0"}, {"1.5", "1.50"}, {"-2e3", "-1999.9"}, {"1e-5", "0.00001"}, {"01", "1"}, {"1e", "NaN"}, {"0.000123", "1.23e-4"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, okA := parseNumber(a)
		db, okB := parseNumber(b)
		if okA != jsonNumber(a) || okB != jsonNumber(b) {
			t.Fatalf("parseNumber(%q) ok %v, parseNumber(%q) ok %v: disagrees with the grammar", a, okA, b, okB)
		}
		if !okA || !okB || bigExponent(a) || bigExponent(b) {
			return
		}
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		if ra == nil || rb == nil {
			t.Fatalf("big.Rat cannot read %q or %q", a, b)
		}
		if got, want := compare(da, db), ra.Cmp(rb); got != want {
			t.Fatalf("compare(%q, %q) = %d, big.Rat says %d", a, b, got, want)
		}
	})
}

// jsonNumber is the JSON number grammar, written independently of
// parseNumber as a small state machine.
func jsonNumber(s string) bool {
	i, n := 0, len(s)
	digits := func() int {
		j := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < n && s[i] == '-' {
		i++
	}
	if i < n && s[i] == '0' {
		i++
	} else if i < n && s[i] >= '1' && s[i] <= '9' {
		digits()
	} else {
		return false
	}
	if i < n && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == n
}

// bigExponent reports an exponent too long for big.Rat to expand cheaply.
func bigExponent(s string) bool {
	i := strings.IndexAny(s, "eE")
	return i >= 0 && len(strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")) > 4
}

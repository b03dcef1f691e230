package sdk

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDigits(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0", true},
		{"0123456789", true},
		{"", false},
		{"-1", false},
		{"+1", false},
		{"1.5", false},
		{"1e3", false},
		{" 1", false},
		{"١", false}, // Arabic-Indic one: not ASCII
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			if got := Digits(tt.in); got != tt.want {
				t.Fatalf("Digits(%q) = %v", tt.in, got)
			}
		})
	}
}

// TestParseIntAndCount runs each value through both parsers: ParseInt
// (signed, saturating) and ParseCount (non-negative, in range).
func TestParseIntAndCount(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		intV    int64
		intOK   bool
		count   int64
		countOK bool
	}{
		{"zero", "0", 0, true, 0, true},
		{"leading zeros", "008", 8, true, 8, true},
		{"negative", "-5", -5, true, 0, false},
		{"max", "9223372036854775807", math.MaxInt64, true, math.MaxInt64, true},
		{"min", "-9223372036854775808", math.MinInt64, true, 0, false},
		{"above max", "9223372036854775808", math.MaxInt64, true, 0, false},
		{"below min", "-99999999999999999999", math.MinInt64, true, 0, false},
		{"empty", "", 0, false, 0, false},
		{"lone minus", "-", 0, false, 0, false},
		{"plus sign", "+5", 0, false, 0, false},
		{"fraction", "7.5", 0, false, 0, false},
		{"exponent", "1e3", 0, false, 0, false},
		{"double minus", "--5", 0, false, 0, false},
		{"space", " 5", 0, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, ok := ParseInt(tt.in); v != tt.intV || ok != tt.intOK {
				t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tt.in, v, ok, tt.intV, tt.intOK)
			}
			if n, ok := ParseCount(tt.in); n != tt.count || ok != tt.countOK {
				t.Errorf("ParseCount(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.count, tt.countOK)
			}
		})
	}
}

func TestQuoteValue(t *testing.T) {
	long := strings.Repeat("a", 41)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "4k", `"4k"`},
		{"escaped", "a\"b\n", `"a\"b\n"`},
		{"40 bytes kept", long[:40], strconv.Quote(long[:40])},
		{"41 bytes cut", long, strconv.Quote(long[:40]) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuoteValue(tt.in); got != tt.want {
				t.Fatalf("QuoteValue(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzParseInt checks ParseInt, ParseCount and QuoteValue on any param
// value: ParseInt agrees with strconv on what it accepts, saturates only on
// range errors, and ParseCount accepts exactly the non-negative values that
// fit; QuoteValue stays short and valid UTF-8 for valid input.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "15", "+3", "7.5", "", "-", "9223372036854775808", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseInt(s)
		want, err := strconv.ParseInt(s, 10, 64)
		digitsOnly := Digits(strings.TrimPrefix(s, "-"))
		switch {
		case ok != digitsOnly:
			t.Fatalf("ParseInt(%q) ok = %v, but digits only = %v", s, ok, digitsOnly)
		case ok && err == nil && v != want:
			t.Fatalf("ParseInt(%q) = %d, strconv %d", s, v, want)
		case ok && err != nil && v != math.MaxInt64 && v != math.MinInt64:
			t.Fatalf("ParseInt(%q) = %d: out of range but not saturated", s, v)
		}
		n, ok := ParseCount(s)
		if wantOK := Digits(s) && err == nil; ok != wantOK || (ok && n != want) {
			t.Fatalf("ParseCount(%q) = %d, %v", s, n, ok)
		}
		q := QuoteValue(s)
		if len(q) > len(strconv.Quote(s[:min(len(s), 40)]))+len("…") {
			t.Fatalf("QuoteValue(%q) is %d bytes", s, len(q))
		}
		if utf8.ValidString(s) && len(s) <= 40 && !utf8.ValidString(q) {
			t.Fatalf("QuoteValue(%q) = %q is not UTF-8", s, q)
		}
	})
}

package param

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
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

// FuzzParseInt checks ParseInt and ParseCount on any param value: ParseInt
// agrees with strconv on what it accepts, saturates only on range errors,
// and ParseCount accepts exactly the non-negative values that fit.
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
	})
}

func TestInt(t *testing.T) {
	tests := []struct {
		name, value, what, unit string
		want                    int64
		msg                     string // the 400's message; "" when valid
	}{
		{name: "in range", value: "7", what: "an integer", want: 7},
		{name: "leading zeros", value: "007", what: "an integer", want: 7},
		{name: "low end", value: "1", what: "an integer", want: 1},
		{name: "high end", value: "15", what: "an integer", want: 15},
		{name: "fraction", value: "2.5", what: "an integer", msg: `n must be an integer from 1 to 15 (got "2.5")`},
		{name: "below", value: "0", what: "an integer", msg: `n must be from 1 to 15 (got "0")`},
		{name: "above with unit", value: "16", what: "a whole number of seconds", unit: "seconds", msg: `n must be from 1 to 15 seconds (got "16")`},
		{name: "malformed with unit", value: "1e2", what: "a whole number of seconds", unit: "seconds", msg: `n must be a whole number of seconds from 1 to 15 (got "1e2")`},
		{name: "huge", value: "99999999999999999999", what: "an integer", msg: `n must be from 1 to 15 (got "99999999999999999999")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, aerr := Int("n", tt.value, 1, 15, tt.what, tt.unit)
			if tt.msg == "" {
				if aerr != nil || got != tt.want {
					t.Fatalf("Int = %d, %v; want %d", got, aerr, tt.want)
				}
				return
			}
			if aerr == nil || aerr.Code != abi.CodeInvalid || aerr.Field != "n" || aerr.Message != tt.msg {
				t.Fatalf("Int error = %+v, want a 400 on n: %q", aerr, tt.msg)
			}
		})
	}
}

func TestOneOfAndRepeated(t *testing.T) {
	allowed := []string{"url", "b64_json"}
	if aerr := OneOf("response_format", "url", allowed); aerr != nil {
		t.Fatalf("OneOf(url) = %v", aerr)
	}
	aerr := OneOf("response_format", "URL", allowed)
	if aerr == nil || aerr.Field != "response_format" || aerr.Message != `response_format must be one of url, b64_json (got "URL")` {
		t.Fatalf("OneOf(URL) = %+v", aerr)
	}
	aerr = Repeated("size")
	if aerr.Code != abi.CodeInvalid || aerr.Field != "size" || aerr.Message != "size is given more than once" {
		t.Fatalf("Repeated = %+v", aerr)
	}
}

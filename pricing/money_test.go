package pricing

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
)

func TestParseUSD(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Nano
		err  error // nil: success
	}{
		{"integer", "3", 3_000_000_000, nil},
		{"integer with zeros", "3.00", 3_000_000_000, nil},
		{"typed-question price", "0.04494", 44_940_000, nil},
		{"one nano", "0.000000001", 1, nil},
		{"zero", "0", 0, nil},
		{"zero with decimals", "0.000", 0, nil},
		{"leading zeros", "007.5", 7_500_000_000, nil},
		{"nine decimals", "9.999871250", 9_999_871_250, nil},
		{"trailing zeros beyond nine decimals are exact", "0.1000000000000", 100_000_000, nil},
		{"largest", "9223372036.854775807", math.MaxInt64, nil},
		{"one above largest", "9223372036.854775808", 0, ErrRange},
		{"far too large", "99999999999999999999999", 0, ErrRange},
		{"ten significant decimals", "1.2345678901", 0, ErrPrecision},
		{"tenth decimal one", "0.0000000001", 0, ErrPrecision},
		{"negative", "-1", 0, ErrNegative},
		{"negative zero", "-0", 0, ErrNegative},
		{"negative huge", "-99999999999999999999", 0, ErrNegative},
		{"negative garbage", "-x", 0, ErrSyntax},
		{"plus sign", "+3", 0, ErrSyntax},
		{"empty", "", 0, ErrSyntax},
		{"dot only", ".", 0, ErrSyntax},
		{"no integer digits", ".5", 0, ErrSyntax},
		{"no fraction digits", "5.", 0, ErrSyntax},
		{"two dots", "1.2.3", 0, ErrSyntax},
		{"exponent", "1e3", 0, ErrSyntax},
		{"capital exponent", "1.5E2", 0, ErrSyntax},
		{"leading space", " 3", 0, ErrSyntax},
		{"trailing space", "3 ", 0, ErrSyntax},
		{"comma", "1,000", 0, ErrSyntax},
		{"letters", "abc", 0, ErrSyntax},
		{"dollar sign", "$3", 0, ErrSyntax},
		{"hex", "0x10", 0, ErrSyntax},
		{"infinity", "Inf", 0, ErrSyntax},
		{"non-ASCII digit", "٣", 0, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUSD(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseUSD(%q) = %d, %v; want error %v", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseUSD(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseUSDErrorMessage(t *testing.T) {
	_, err := ParseUSD("1.2345678901")
	if want := `"1.2345678901" has more precision than one nano-USD`; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
	_, err = ParseUSD("-2")
	if err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("error = %v, want it to say negative", err)
	}
	var ae *AmountError
	if !errors.As(err, &ae) || ae.Text != "-2" {
		t.Fatalf("error %v is not an *AmountError for -2", err)
	}
	_, err = ParseUSD(strings.Repeat("9", 1000))
	if err == nil || len(err.Error()) > 120 {
		t.Fatalf("error for 1000 digits = %q, want a short message", err)
	}
}

func TestParseSignedUSD(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Nano
		err  error
	}{
		{"positive", "1.5", 1_500_000_000, nil},
		{"negative", "-1.5", -1_500_000_000, nil},
		{"negative nano", "-0.000000001", -1, nil},
		{"negative zero", "-0", 0, nil},
		{"smallest", "-9223372036.854775808", math.MinInt64, nil},
		{"below smallest", "-9223372036.854775809", 0, ErrRange},
		{"largest", "9223372036.854775807", math.MaxInt64, nil},
		{"above largest", "9223372036.854775808", 0, ErrRange},
		{"double minus", "--1", 0, ErrSyntax},
		{"minus only", "-", 0, ErrSyntax},
		{"plus", "+1", 0, ErrSyntax},
		{"negative precision", "-0.0000000001", 0, ErrPrecision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSignedUSD(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseSignedUSD(%q) = %d, %v; want error %v", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSignedUSD(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNanoFormat(t *testing.T) {
	tests := []struct {
		name  string
		n     Nano
		str   string
		fixed string
	}{
		{"zero", 0, "0", "0.000000000"},
		{"three cents", 30_000_000, "0.03", "0.030000000"},
		{"three dollars", 3_000_000_000, "3", "3.000000000"},
		{"typed-question price", 44_940_000, "0.04494", "0.044940000"},
		{"minus one and a half", -1_500_000_000, "-1.5", "-1.500000000"},
		{"one nano", 1, "0.000000001", "0.000000001"},
		{"minus one nano", -1, "-0.000000001", "-0.000000001"},
		{"odd", 9_999_871_250, "9.99987125", "9.999871250"},
		{"max", math.MaxInt64, "9223372036.854775807", "9223372036.854775807"},
		{"min", math.MinInt64, "-9223372036.854775808", "-9223372036.854775808"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.n.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := tt.n.Fixed(); got != tt.fixed {
				t.Errorf("Fixed() = %q, want %q", got, tt.fixed)
			}
			b, err := json.Marshal(tt.n)
			if err != nil || string(b) != tt.str {
				t.Errorf("json.Marshal = %s, %v; want %s", b, err, tt.str)
			}
		})
	}
}

// TestNanoRoundTrip checks String and Fixed against the parser for random
// amounts across the whole int64 range.
func TestNanoRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		n := Nano(r.Uint64())
		if i%3 == 0 {
			n = Nano(r.Int63n(10_000_000_000)) - 5_000_000_000 // small amounts, both signs
		}
		for _, s := range []string{n.String(), n.Fixed()} {
			got, err := ParseSignedUSD(s)
			if err != nil || got != n {
				t.Fatalf("ParseSignedUSD(%q) = %d, %v; want %d", s, got, err, n)
			}
		}
		if s := n.String(); strings.Contains(s, ".") && strings.HasSuffix(s, "0") {
			t.Fatalf("String() = %q has a trailing zero", s)
		}
	}
}

func TestNanoJSON(t *testing.T) {
	type doc struct {
		A Nano `json:"a"`
		B Nano `json:"b"`
		C Nano `json:"c"`
	}
	var d doc
	d.C = 7
	if err := json.Unmarshal([]byte(`{"a": 0.04494, "b": "-1.5", "c": null}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.A != 44_940_000 || d.B != -1_500_000_000 || d.C != 7 {
		t.Fatalf("decoded %+v", d)
	}
	out, err := json.Marshal(d)
	if err != nil || string(out) != `{"a":0.04494,"b":-1.5,"c":0.000000007}` {
		t.Fatalf("encoded %s, %v", out, err)
	}
	bad := []string{`{"a": 1e3}`, `{"a": "1.2345678901"}`, `{"a": true}`, `{"a": " 1"}`, `{"a": 99999999999}`}
	for _, in := range bad {
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("json.Unmarshal(%s) succeeded", in)
		}
	}
	var n Nano
	if err := n.UnmarshalText([]byte("2.5")); err != nil || n != 2_500_000_000 {
		t.Fatalf("UnmarshalText = %d, %v", n, err)
	}
	if b, _ := n.MarshalText(); string(b) != "2.5" {
		t.Fatalf("MarshalText = %s", b)
	}
}

package sdk

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

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

// FuzzQuoteValue checks QuoteValue on any param value: it stays short, and
// valid UTF-8 for valid input.
func FuzzQuoteValue(f *testing.F) {
	for _, s := range []string{"0", "-1", "15", "+3", "7.5", "", "-", "9223372036854775808", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := QuoteValue(s)
		if len(q) > len(strconv.Quote(s[:min(len(s), 40)]))+len("…") {
			t.Fatalf("QuoteValue(%q) is %d bytes", s, len(q))
		}
		if utf8.ValidString(s) && len(s) <= 40 && !utf8.ValidString(q) {
			t.Fatalf("QuoteValue(%q) = %q is not UTF-8", s, q)
		}
	})
}

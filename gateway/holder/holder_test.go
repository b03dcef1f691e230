package holder

import (
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

func TestCentsNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    pricing.Nano
		want string
	}{
		{0, "0"},
		{1, "0.0000001"},
		{10_000_000, "1"},
		{15_000_000, "1.5"},
		{-15_000_000, "-1.5"},
		{pricing.NanoPerUSD, "100"},
		{1_234_567_891, "123.4567891"},
		{-9223372036854775808, "-922337203685.4775808"},
		{9223372036854775807, "922337203685.4775807"},
	} {
		if got := CentsNumber(tc.n); string(got) != tc.want {
			t.Errorf("CentsNumber(%d) = %s, want %s", tc.n, got, tc.want)
		}
		if _, err := CentsNumber(tc.n).Int64(); err == nil && strings.Contains(tc.want, ".") {
			t.Errorf("%s read as an integer", tc.want)
		}
	}
}

// FuzzParseDate: a date that parses is exactly YYYY-MM-DD, at 00:00 UTC,
// and formats back to the same text; nothing panics.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2026-01-31", "2024-02-29", "2025-02-29", "0000-01-01", "9999-12-31", "2026-1-01",
		"+026-01-01", "2026-01-01T", "２０２６-01-01", "2026-13-01", "2026-00-10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseDate(s)
		if !ok {
			return
		}
		if d.Format(time.DateOnly) != s || d.Location() != time.UTC || d.Hour()+d.Minute()+d.Second()+d.Nanosecond() != 0 {
			t.Fatalf("parseDate(%q) = %v", s, d)
		}
	})
}

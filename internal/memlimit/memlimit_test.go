package memlimit

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"192MiB", 192 << 20, true}, {"1GiB", 1 << 30, true}, {"500MB", 500e6, true}, {"64 KiB", 64 << 10, true},
		{"1048576", 1 << 20, true}, {"2KB", 2000, true}, {"off", 0, true}, {"0", 0, true}, {"10B", 10, true},
		{"", 0, false}, {"-5MiB", 0, false}, {"1.5GiB", 0, false}, {"MiB", 0, false}, {"9999999999GiB", 0, false}, {"12TB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestResolve(t *testing.T) {
	var c Config
	if err := c.Resolve(); err != nil || c.Limit != "192MiB" || c.Bytes != 192<<20 {
		t.Fatalf("default: %+v, %v; want 192MiB", c, err)
	}
	if err := c.Resolve(); err != nil || c.Bytes != 192<<20 {
		t.Fatalf("a second Resolve: %+v, %v", c, err)
	}
	c = Config{Limit: "off"}
	if err := c.Resolve(); err != nil || c.Bytes != 0 {
		t.Fatalf("off: %+v, %v; want no limit", c, err)
	}
	for _, in := range []string{"lots", "1MiB"} {
		c = Config{Limit: in}
		if err := c.Resolve(); err == nil || !strings.HasPrefix(err.Error(), "memory_limit: ") {
			t.Errorf("%q: %v; want an error naming memory_limit", in, err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"192MiB", "off", "0", "64 KiB", "9999999999GiB", "-1B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d: negative", s, n)
		}
	})
}

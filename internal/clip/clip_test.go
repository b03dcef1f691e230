package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven chars", 10, "eleven cha…(12 bytes)"},
		{"aé", 2, "a…(3 bytes)"},   // é is two bytes: not split
		{"日本語", 4, "日…(9 bytes)"},  // three-byte runes
		{"a\xffb", 10, "a\uFFFDb"}, // invalid UTF-8 replaced
		{strings.Repeat("x", 1<<20), 4, "xxxx…(1048576 bytes)"},
	} {
		if got := Text(tc.in, tc.n); got != tc.want {
			t.Errorf("Text(%.20q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "abc", "日本語テキスト", "\xff\xfe\xfd", "a\u2028b"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		out := Text(s, n)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q, %d) = %q: not UTF-8", s, n, out)
		}
		// Each run of invalid bytes becomes one U+FFFD (three bytes): at
		// most three bytes out per byte kept, plus the length note.
		if len(out) > 3*min(n, len(s))+len("…( bytes)")+20 {
			t.Fatalf("Text(%q, %d) is %d bytes", s, n, len(out))
		}
		if len(s) <= n && utf8.ValidString(s) && out != s {
			t.Fatalf("Text(%q, %d) = %q changed a short valid text", s, n, out)
		}
	})
}

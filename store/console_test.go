package store

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com" // 254 bytes
	cases := []struct {
		in, want string
	}{
		{"alice@example.com", "alice@example.com"},
		{"  Alice@Example.COM\n", "alice@example.com"},
		{"al/ice+tag@sub.example.com", "al/ice+tag@sub.example.com"},
		{long, long},
		{"", ""},
		{"   ", ""},
		{"alice", ""},
		{"alice@", ""},
		{"@example.com", ""},
		{"Alice <alice@example.com>", ""},
		{"<alice@example.com>", ""},
		{"alice@example.com, bob@example.com", ""},
		{"alice@example.com (work)", ""},
		{`"alice smith"@example.com`, ""},
		{"alice@exa mple.com", ""},
		{"x" + long, ""},
	}
	for _, c := range cases {
		got, err := NormalizeEmail(c.in)
		if c.want == "" {
			if err == nil || !errors.Is(err, ErrEmail) {
				t.Errorf("NormalizeEmail(%q) = %q, %v; want an ErrEmail", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Whatever NormalizeEmail accepts is lower-cased, trimmed, at most
// MaxEmailLen bytes, and accepted again unchanged.
func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{"alice@example.com", "Bob <bob@x.org>", `"a b"@c.d`, "a@[127.0.0.1]", " A@B.C ", "a@b@c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeEmail(s)
		if err != nil {
			if !errors.Is(err, ErrEmail) {
				t.Fatalf("NormalizeEmail(%q): %v does not wrap ErrEmail", s, err)
			}
			return
		}
		if got != strings.ToLower(got) || got != strings.TrimSpace(got) || len(got) > MaxEmailLen || !strings.Contains(got, "@") {
			t.Fatalf("NormalizeEmail(%q) = %q", s, got)
		}
		if again, err := NormalizeEmail(got); err != nil || again != got {
			t.Fatalf("NormalizeEmail(%q) = %q, %v; not stable", got, again, err)
		}
	})
}

func TestNewSetupToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, hash, err := NewSetupToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, SetupTokenPrefix) || len(tok) != len(SetupTokenPrefix)+43 ||
			strings.Trim(tok[len(SetupTokenPrefix):], base62) != "" {
			t.Fatalf("token %q is not rls- and 43 base62 characters", tok)
		}
		if hash != HashKey(tok) || CheckKeyHash(hash) != nil {
			t.Fatalf("hash %q of %q is not HashKey", hash, tok)
		}
		if seen[tok] {
			t.Fatalf("token %q drawn twice", tok)
		}
		seen[tok] = true
	}
}

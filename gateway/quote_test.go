package gateway

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

func TestQuoted(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100) // 200 bytes: the cut falls inside no rune
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "modelb-6-astra", `"modelb-6-astra"`},
		{"empty", "", `""`},
		{"newline and quote", "a\nb\"c", `"a\nb\"c"`},
		{"invalid UTF-8", "a\xffb", `"a\xffb"`},
		{"line separator and bidi override", "a\u2028b\u202ec", `"a\u2028b\u202ec"`},
		{"at the limit", strings.Repeat("x", apierr.QuoteLimit), strconv.Quote(strings.Repeat("x", apierr.QuoteLimit))},
		{"over the limit", strings.Repeat("x", apierr.QuoteLimit+1), strconv.Quote(strings.Repeat("x", apierr.QuoteLimit)) + "…(97 bytes)"},
		{"cut on a rune boundary", long, strconv.Quote(strings.Repeat("é", apierr.QuoteLimit/2)) + "…(200 bytes)"},
		{"cut before a split rune", "x" + long, strconv.Quote("x"+strings.Repeat("é", apierr.QuoteLimit/2-1)) + "…(201 bytes)"},
	} {
		if got := apierr.Quote(tc.in); got != tc.want {
			t.Errorf("%s: apierr.Quote(%.20q) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
	}
	// 15 MB of model id → a few hundred bytes.
	if got := apierr.Quote(strings.Repeat("m", 15<<20)); len(got) > apierr.QuotedMax || !strings.HasSuffix(got, "…(15728640 bytes)") {
		t.Errorf("15 MB: %d bytes, %q", len(got), got[len(got)-30:])
	}
}

// quoted's output is bounded, valid UTF-8, free of raw newlines and control
// characters, and unquotes to a prefix of its input.
func FuzzQuoted(f *testing.F) {
	for _, s := range []string{"", "modelb-6-astra", "a\nb", "\xff\xfe", "\u2028\u202e", strings.Repeat("é", 60), strings.Repeat("\x01", 200), strings.Repeat("\xf0\x9f\x98", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := apierr.Quote(s)
		if len(q) > apierr.QuotedMax {
			t.Fatalf("%d bytes > %d", len(q), apierr.QuotedMax)
		}
		if !utf8.ValidString(q) {
			t.Fatalf("not UTF-8: %q", q)
		}
		for _, r := range q {
			if r < ' ' || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
				t.Fatalf("control character %U in %q", r, q)
			}
		}
		lit := q
		if i := strings.LastIndex(q, "…("); len(s) > apierr.QuoteLimit {
			if i < 0 || q[i:] != "…("+strconv.Itoa(len(s))+" bytes)" {
				t.Fatalf("cut without its length: %q", q)
			}
			lit = q[:i]
		}
		u, err := strconv.Unquote(lit)
		if err != nil || !strings.HasPrefix(s, u) || len(u) > apierr.QuoteLimit || len(u) < min(len(s), apierr.QuoteLimit-utf8.UTFMax+1) {
			t.Fatalf("%q does not unquote to a prefix of the input (%q, %v)", lit, u, err)
		}
	})
}

// bounded's output is at most n bytes and its note, and valid UTF-8.
func FuzzBounded(f *testing.F) {
	f.Add("short", 10)
	f.Add(strings.Repeat("é", 40), 9)
	f.Add("a\xffb\xfe", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 4096 {
			return
		}
		b := apierr.Bound(s, n)
		note := len("…(") + 19 + len(" bytes)")
		// Each invalid byte kept may become a three-byte U+FFFD.
		if len(b) > 3*n+note || !utf8.ValidString(b) {
			t.Fatalf("apierr.Bound(%d bytes, %d) = %d bytes %q", len(s), n, len(b), b)
		}
		if len(s) <= n && utf8.ValidString(s) && b != s {
			t.Fatalf("short valid text changed: %q → %q", s, b)
		}
	})
}

// invalidUTF8At agrees with utf8.Valid and points at a byte that starts no
// valid encoding, after a valid prefix.
func FuzzInvalidUTF8At(f *testing.F) {
	for _, s := range []string{"", "abc", "a\xffb", "é\xc3", "\xed\xa0\x80", "\xef\xbf\xbd", "\xf4\x90\x80\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		at := apierr.InvalidUTF8At(b)
		if utf8.Valid(b) != (at < 0) {
			t.Fatalf("utf8.Valid %v but offset %d for %q", utf8.Valid(b), at, b)
		}
		if at >= 0 && !utf8.Valid(b[:at]) {
			t.Fatalf("offset %d of %q has an invalid prefix", at, b)
		}
		if at >= 0 && utf8.FullRune(b[at:]) {
			if r, n := utf8.DecodeRune(b[at:]); r != utf8.RuneError || n != 1 {
				t.Fatalf("offset %d of %q starts a valid rune", at, b)
			}
		}
		e := apierr.CheckUTF8(b, "body", "the request body")
		if (e == nil) != (at < 0) {
			t.Fatalf("checkUTF8 %v, offset %d", e, at)
		}
		if e != nil && (e.Status != 400 || e.Code != "invalid_body" || !strings.Contains(e.Message, "offset "+strconv.Itoa(at))) {
			t.Fatalf("checkUTF8: %+v", e)
		}
	})
}

func TestFieldPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"questions.q.type":       "questions.q.type",
		"messages[3].role":       "messages[3].role",
		"questions.a b":          `"questions.a b"`,
		"n\n":                    `"n\n"`,
		strings.Repeat("q", 200): strconv.Quote(strings.Repeat("q", apierr.QuoteLimit)) + "…(200 bytes)",
	} {
		if got := apierr.FieldPath(in); got != want {
			t.Errorf("apierr.FieldPath(%.20q) = %s, want %s", in, got, want)
		}
	}
	// A code never carries a field that is not plain.
	if e := apierr.BadRequest("a\nb", "x"); e.Code != "invalid_field" {
		t.Errorf("code %v", e.Code)
	}
	if e := apierr.BadRequest("questions.q.type", "x"); e.Code != "invalid_questions.q.type" {
		t.Errorf("code %v", e.Code)
	}
}

// A plugin's error passes into an error body bounded, however long the
// caller value it quotes or the field it names.
func TestPluginErrorBounded(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("CANARY", 1<<20)
	for _, ae := range []*abi.Error{
		{Code: abi.CodeInvalid, Field: "size", Message: "size must be like 1024x1024 (got " + huge + ")"},
		{Code: abi.CodeInvalid, Field: "questions." + huge + ".type", Message: "type is required"},
		{Code: abi.CodeForbidden, Message: "model " + huge + " is not sold here"},
		{Code: abi.CodeUnprocessable, Message: huge},
		{Code: abi.CodeInternal, Message: huge + "\xff"},
	} {
		e := apierr.From(ae)
		if len(e.Message) > 2*apierr.MaxMessage || !utf8.ValidString(e.Message) {
			t.Errorf("code %s: a %d-byte message", ae.Code, len(e.Message))
		}
		if c, _ := e.Code.(string); len(c) > 64 {
			t.Errorf("code %s: a %d-byte code", ae.Code, len(c))
		}
	}
	// A provider's error is logged by its status alone.
	pe := &apierr.Error{Status: 501, Message: "your prompt was: secret", Provider: true}
	if strings.Contains(pe.LogText(), "secret") {
		t.Errorf("provider message logged: %s", pe.LogText())
	}
	if got := apierr.From(errors.New(huge)).Message; got != "internal error" {
		t.Errorf("a plain error reached the body: %.40s", got)
	}
}

// BenchmarkCheckUTF8 measures the UTF-8 check every JSON body passes, on a
// small chat body and on a 1 MiB one with non-ASCII text.
func BenchmarkCheckUTF8(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"small", []byte(chatBody("modelf-flash", "benchmark me", `"max_tokens":16`))},
		{"1MiB", []byte(chatBody("modelf-flash", strings.Repeat("a prompt with accents, é and ü, and 漢字 ", 1<<20/44)))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if e := apierr.CheckUTF8(c.body, "body", "the request body"); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// Package clip bounds text that may carry a caller's words before it goes
// into an error message or a log line: cut on a rune boundary, its length
// noted, invalid UTF-8 replaced. It is shared by the gateway and the plugin
// host (a plugin's error may quote the caller's values). Text does not quote;
// Quote shows a caller's value as such.
package clip

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// At returns n, or fewer when s[:n] would end inside a rune (at most
// utf8.UTFMax-1 fewer: bytes of invalid UTF-8 are cut anywhere). n must be
// less than len(s).
func At(s string, n int) int {
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return n
}

// Text returns s cut to n bytes on a rune boundary, followed by …(N bytes)
// with its full length when it was cut, and with invalid UTF-8 replaced.
func Text(s string, n int) string {
	if len(s) > n {
		s = s[:At(s, n)] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Bounds on caller-supplied text (see RATIONALE.md, "Caller text in logs and
// error messages"), shared by the gateway's error type (apierr) and the
// request decoders (wire), so both show a caller's value the same way.
const (
	// QuoteLimit is how many bytes of one caller-supplied value an error
	// message or a log line shows. The catalogue's model ids are under 64.
	QuoteLimit = 96
	// MaxMessage caps a message passed on from a plugin or a library
	// error, whose text may quote caller values.
	MaxMessage = 512
)

// Quote returns caller-supplied text for an error message or a log line:
// in Go's double-quoted syntax (control characters, quotes, invalid UTF-8
// and unprintable runes escaped, so it cannot end a log line or confuse a
// terminal), cut to its first QuoteLimit bytes on a rune boundary, followed
// by …(N bytes) with its full length when it was cut.
func Quote(s string) string {
	if len(s) <= QuoteLimit {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:At(s, QuoteLimit)]) + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// FieldPath returns a field path built from caller text (a typed question's
// name, a form field's name, a plugin's field) for an error message: as it
// is when short and plain (printable ASCII without quotes, backslashes or
// spaces), otherwise quoted.
func FieldPath(f string) string {
	if len(f) > QuoteLimit {
		return Quote(f)
	}
	for i := 0; i < len(f); i++ {
		if c := f[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return Quote(f)
		}
	}
	return f
}

// InvalidUTF8At is the offset of the first byte of b that does not start a
// valid UTF-8 encoding, or -1.
func InvalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

package apierr

import (
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// Bounds on caller-supplied text (see RATIONALE.md, "Caller text in logs and
// error messages"). A caller's model id, path, method, header value, field
// name or value reaches an error message or a log line only through Quote,
// FieldPath or Bound, so no request can make either larger than these
// bounds allow, nor forge a log line.
const (
	// QuoteLimit is how many bytes of one caller-supplied value an error
	// message or a log line shows. The catalogue's model ids are under 64.
	QuoteLimit = clip.QuoteLimit
	// MaxMessage caps a message the gateway passes on from a plugin
	// or a library error, whose text may quote caller values.
	MaxMessage = clip.MaxMessage
)

// Quote returns caller-supplied text for an error message or a log line:
// in Go's double-quoted syntax (control characters, quotes, invalid UTF-8
// and unprintable runes escaped, so it cannot end a log line or confuse a
// terminal), cut to its first QuoteLimit bytes on a rune boundary, followed
// by …(N bytes) with its full length when it was cut. The result is valid
// UTF-8, has no newline and is at most QuotedMax bytes.
func Quote(s string) string { return clip.Quote(s) }

// QuotedMax bounds len(Quote(s)): two quotes, at most four bytes of
// escape per byte shown (\x80), and the length note of the largest int.
const QuotedMax = 2 + 4*QuoteLimit + len("…(") + 19 + len(" bytes)")

// FieldPath returns a field path built from caller text (a typed question's
// name, a form field's name, a plugin's field) for an error message: as it
// is when short and plain (printable ASCII without quotes, backslashes or
// spaces), otherwise quoted.
func FieldPath(f string) string { return clip.FieldPath(f) }

// Bound returns a message whose text may quote caller values (a plugin's
// error, a parser's error) cut to n bytes on a rune boundary, with …(N bytes)
// when it was cut, and with invalid UTF-8 replaced. It is not quoted: the
// JSON of an error body and of a log line escapes control characters.
func Bound(s string, n int) string { return clip.Text(s, n) }

// CheckUTF8 → 400 invalid_<field> naming the offset of the first byte of b
// that is not UTF-8. what names the text ("the request body").
func CheckUTF8(b []byte, field, what string) *Error {
	if utf8.Valid(b) {
		return nil
	}
	return BadRequest(field, "%s is not valid UTF-8 (first invalid byte at offset %d)", what, InvalidUTF8At(b))
}

// InvalidUTF8At is the offset of the first byte of b that does not start a
// valid UTF-8 encoding, or -1.
func InvalidUTF8At(b []byte) int { return clip.InvalidUTF8At(b) }

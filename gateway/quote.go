package gateway

import (
	"strconv"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// Bounds on caller-supplied text (see RATIONALE.md, "Caller text in logs and
// error messages"). A caller's model id, path, method, header value, field
// name or value reaches an error message or a log line only through quoted,
// fieldPath or bounded, so no request can make either larger than these
// bounds allow, nor forge a log line.
const (
	// quoteLimit is how many bytes of one caller-supplied value an error
	// message or a log line shows. The catalogue's model ids are under 64.
	quoteLimit = 96
	// maxModelID is the longest model id a relayed call may name: longer is
	// 400 invalid_model, before the id is looked up, held or sent.
	maxModelID = 256
	// maxMessageText caps a message the gateway passes on from a plugin
	// or a library error, whose text may quote caller values.
	maxMessageText = 512
)

// quoted returns caller-supplied text for an error message or a log line:
// in Go's double-quoted syntax (control characters, quotes, invalid UTF-8
// and unprintable runes escaped, so it cannot end a log line or confuse a
// terminal), cut to its first quoteLimit bytes on a rune boundary, followed
// by …(N bytes) with its full length when it was cut. The result is valid
// UTF-8, has no newline and is at most quotedMax bytes.
func quoted(s string) string {
	if len(s) <= quoteLimit {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cutAt(s, quoteLimit)]) + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// quotedMax bounds len(quoted(s)): two quotes, at most four bytes of
// escape per byte shown (\x80), and the length note of the largest int.
const quotedMax = 2 + 4*quoteLimit + len("…(") + 19 + len(" bytes)")

// cutAt is clip.At: n, or fewer so that s[:n] ends on a rune boundary.
func cutAt(s string, n int) int { return clip.At(s, n) }

// fieldPath returns a field path built from caller text (a typed question's
// name, a form field's name, a plugin's field) for an error message: as it
// is when short and plain (printable ASCII without quotes, backslashes or
// spaces), otherwise quoted.
func fieldPath(f string) string {
	if len(f) > quoteLimit {
		return quoted(f)
	}
	for i := 0; i < len(f); i++ {
		if c := f[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return quoted(f)
		}
	}
	return f
}

// bounded returns a message whose text may quote caller values (a plugin's
// error, a parser's error) cut to n bytes on a rune boundary, with …(N bytes)
// when it was cut, and with invalid UTF-8 replaced. It is not quoted: the
// JSON of an error body and of a log line escapes control characters.
func bounded(s string, n int) string { return clip.Text(s, n) }

// checkUTF8 → 400 invalid_<field> naming the offset of the first byte of b
// that is not UTF-8. what names the text ("the request body").
func checkUTF8(b []byte, field, what string) *Error {
	if utf8.Valid(b) {
		return nil
	}
	return badRequest(field, "%s is not valid UTF-8 (first invalid byte at offset %d)", what, invalidUTF8At(b))
}

// invalidUTF8At is the offset of the first byte of b that does not start a
// valid UTF-8 encoding, or -1.
func invalidUTF8At(b []byte) int {
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

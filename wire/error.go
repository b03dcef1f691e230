package wire

import (
	"fmt"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// An Error is a request body its endpoint refuses: a 400 whose code names
// Field (invalid_<field>). The gateway's error type (apierr.From) turns it
// into the error body with this exact message; wire does not import it, as
// apierr reaches the store and the prices.
type Error struct {
	Field   string // the offending field's path ("body" for the whole)
	Message string // bounded: caller text in it went through clip
}

func (e *Error) Error() string { return e.Message }

// badRequest is the Error naming field, its message formatted.
func badRequest(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// checkUTF8 refuses b when it is not UTF-8, naming the offset of its first
// bad byte. what names the text ("the request body").
func checkUTF8(b []byte, field, what string) *Error {
	if utf8.Valid(b) {
		return nil
	}
	return badRequest(field, "%s is not valid UTF-8 (first invalid byte at offset %d)", what, clip.InvalidUTF8At(b))
}

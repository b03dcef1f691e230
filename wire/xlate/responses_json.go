package xlate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// respHex is 24 random hex digits: an output item's id after its prefix
// (a variable so that tests can make ids that golden files can hold).
var respHex = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// respNow is the time a response is created at (a variable for tests).
var respNow = func() int64 { return time.Now().Unix() }

const respHexDigits = "0123456789abcdef"

// respAppendString appends s as a JSON string, escaped as encoding/json
// escapes it with HTML escaping off: quote, backslash and control bytes,
// U+2028 and U+2029 (which end a line in JavaScript), and invalid UTF-8 as
// U+FFFD. The SSE data line it goes into never holds a raw line break.
func respAppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', respHexDigits[b>>4], respHexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', respHexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// respAppendRaw appends JSON as written by a caller, compacted onto one
// line; null when there is none (or it is not valid JSON, which the
// parser never lets through).
func respAppendRaw(dst []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(dst, "null"...)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// respAppendStringOrNull appends s as a JSON string, or null when empty.
func respAppendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return respAppendString(dst, s)
}

// respAppendBool appends true or false.
func respAppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

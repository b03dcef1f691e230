package xlate

import (
	"unicode/utf16"
	"unicode/utf8"
)

// chatScan reads JSON by hand for the stream decoder's fast path
// (chatFastChunk). It is strict: whatever it is not sure encoding/json
// reads the same way (a key not plain lowercase ASCII, a string with bytes
// that are not UTF-8, a number where an integer is wanted, deep nesting)
// makes it give up, and the chunk is decoded by encoding/json instead.
type chatScan struct {
	b     []byte
	i     int
	depth int
}

// chatScanDepth is the deepest nesting the scan skips; deeper chunks go
// to encoding/json, which bounds its own.
const chatScanDepth = 64

// next is the next byte after white space, 0 at the end.
func (s *chatScan) next() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// null reads a null, if one comes next.
func (s *chatScan) null() bool {
	if s.next() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// str reads a string, unescaped as encoding/json unescapes it.
func (s *chatScan) str() (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	s.i++
	start, ascii := s.i, true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			return string(raw), true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	return "", false
}

// escaped reads the rest of a string that has escapes, from start (after
// its opening quote) with s.i at its first backslash.
func (s *chatScan) escaped(start int) (string, bool) {
	out := make([]byte, 0, s.i-start+16)
	out = append(out, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.unicode()
			if !ok {
				return "", false
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

// unicode reads the XXXX of a \uXXXX escape, and a second escape when
// the first is a surrogate that pairs with it; a lone surrogate is
// U+FFFD, as encoding/json has it.
func (s *chatScan) unicode() (rune, bool) {
	r, ok := chatHex4(s.b[s.i:])
	if !ok {
		return 0, false
	}
	s.i += 4
	if !utf16.IsSurrogate(r) {
		return r, true
	}
	if len(s.b)-s.i >= 6 && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
		if r2, ok := chatHex4(s.b[s.i+2:]); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				s.i += 6
				return dec, true
			}
		}
	}
	return utf8.RuneError, true
}

func chatHex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// strOrNull reads a string or null (as "": encoding/json leaves a string
// unchanged for null, and every target starts empty).
func (s *chatScan) strOrNull() (string, bool) {
	if s.null() {
		return "", true
	}
	return s.str()
}

// int reads a small non-negative or negative integer, as encoding/json
// reads an int (no fraction, no exponent).
func (s *chatScan) int() (int, bool) {
	s.next()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start, n := s.i, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && s.i-start < 9 {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 1 && s.b[start] == '0' || s.i < len(s.b) && chatNumberByte(s.b[s.i]) {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func chatNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// raw reads any value and returns its bytes.
func (s *chatScan) raw() ([]byte, bool) {
	s.next()
	start := s.i
	if !s.skip() {
		return nil, false
	}
	return s.b[start:s.i], true
}

// skip reads any value, checked as encoding/json checks it.
func (s *chatScan) skip() bool {
	switch s.next() {
	case '"':
		return s.skipString()
	case '{':
		return s.object(func([]byte) bool { return s.skip() })
	case '[':
		return s.array(s.skip)
	case 't':
		return s.word("true")
	case 'f':
		return s.word("false")
	case 'n':
		return s.word("null")
	}
	return s.number()
}

func (s *chatScan) word(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// skipString reads a string without keeping it; bytes that are not UTF-8
// are let through, as encoding/json lets them (it replaces them).
func (s *chatScan) skipString() bool {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.b) {
				return false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := chatHex4(s.b[s.i:]); !ok {
					return false
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a JSON number.
func (s *chatScan) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case !s.digits():
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *chatScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// object reads an object, calling member with each key (s.i then at its
// value, which member must read). A key that encoding/json might match
// to a field otherwise than by its plain lowercase bytes gives up.
func (s *chatScan) object(member func(key []byte) bool) bool {
	if s.next() != '{' || s.depth >= chatScanDepth {
		return false
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	if s.next() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.key()
		if !ok || s.next() != ':' {
			return false
		}
		s.i++
		if !member(key) {
			return false
		}
		switch s.next() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// key reads an object's key, its bytes as they stand: lowercase ASCII
// letters, digits, '_' and '-' only, which encoding/json matches to a
// field by those bytes alone (no escapes, no case folding).
func (s *chatScan) key() ([]byte, bool) {
	if s.next() != '"' {
		return nil, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'):
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// cached reads a string or null like strOrNull, but returns *prev, not a
// new copy, when the bytes are prev's: a chunk's id and model repeat.
func (s *chatScan) cached(prev *string) (string, bool) {
	if s.null() {
		return "", true
	}
	if s.next() == '"' {
		rest := s.b[s.i+1:]
		if n := len(*prev); len(rest) > n && rest[n] == '"' && string(rest[:n]) == *prev && !chatHasEscape(*prev) {
			s.i += n + 2
			return *prev, true
		}
	}
	v, ok := s.str()
	if ok {
		*prev = v
	}
	return v, ok
}

// chatHasEscape: s holds what a JSON string must escape, so its bytes in
// a chunk would not be the same.
func chatHasEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}

// array reads an array, calling elem at each element.
func (s *chatScan) array(elem func() bool) bool {
	if s.next() != '[' || s.depth >= chatScanDepth {
		return false
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	if s.next() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.next() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

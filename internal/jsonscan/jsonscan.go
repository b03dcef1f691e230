// Package jsonscan finds a member of a JSON object's top level (Member) or
// the elements of an array (Elements) without decoding the rest of the
// document: strings and brackets are skipped byte by byte. StringLen measures
// a string literal as it would decode. The gateway uses them where a whole
// decode would be wasted work on a hot path — the usage of an answer, the
// stream options of a request, the text of every streamed chunk.
//
// It is not a validator. Each function reports ok only when its answer is
// the one encoding/json would give for a well-formed document; anything it
// is not sure of is for the caller's full decoder.
package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// Member finds the value of the top-level member key of the JSON object in
// body: val is the value's bytes (white space trimmed), a sub-slice of body
// starting at offset start. found is false when there is no such member.
//
// ok is false whenever the answer could differ from encoding/json's, and the
// caller must then decode the whole body: the body is not an object, its
// brackets or strings do not close, there is text after it, the key appears
// twice (encoding/json merges repeated objects into one value), or a
// top-level key is spelled with escapes, non-ASCII bytes or other letter
// case than key (encoding/json matches keys case-insensitively). key must be
// plain ASCII. The rest of the body is not validated.
func Member(body []byte, key string) (val []byte, start int, found, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, 0, false, false
	}
	depth := 0
	expectKey := false
	valStart := -1 // start of the value being scanned, or -1
	for ; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			j, plain := stringEnd(body, i+1)
			if j >= len(body) {
				return nil, 0, false, false
			}
			if depth == 1 && expectKey {
				expectKey = false
				k := body[i+1 : j]
				if !plain {
					return nil, 0, false, false
				}
				if len(k) == len(key) && bytes.EqualFold(k, []byte(key)) {
					if string(k) != key || found {
						return nil, 0, false, false
					}
					colon := skipSpace(body, j+1)
					if colon >= len(body) || body[colon] != ':' {
						return nil, 0, false, false
					}
					valStart = skipSpace(body, colon+1)
					start = valStart
					found = true
					i = valStart - 1 // scan the value itself
					continue
				}
			}
			i = j
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
		case ',':
			if depth == 1 {
				if valStart >= 0 {
					val, valStart = trimRight(body[valStart:i]), -1
				}
				expectKey = true
			}
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, 0, false, false
			}
			if depth == 0 {
				if c != '}' {
					return nil, 0, false, false
				}
				if valStart >= 0 {
					val = trimRight(body[valStart:i])
				}
				if skipSpace(body, i+1) != len(body) || (found && len(val) == 0) {
					return nil, 0, false, false
				}
				if !found {
					start = 0
				}
				return val, start, found, true
			}
		}
	}
	return nil, 0, false, false // the top-level object never closed
}

// stringEnd returns the index of the quote that closes the string whose
// text starts at b[i] (len(b) when none does), and whether the text is
// plain: no escapes and no bytes above ASCII.
func stringEnd(b []byte, i int) (end int, plain bool) {
	plain = true
	for i < len(b) && b[i] != '"' {
		if b[i] == '\\' {
			plain = false
			i++
		} else if b[i] >= 0x80 {
			plain = false
		}
		i++
	}
	return i, plain
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func trimRight(b []byte) []byte {
	j := len(b)
	for j > 0 && isSpace(b[j-1]) {
		j--
	}
	return b[:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Elements calls fn with each element of the JSON array arr, white space
// trimmed, in order, until fn returns false. ok is false when arr is not an
// array whose strings close and whose own bracket closes where it ends, or
// when an element is empty (`[1,,2]`, `[1,]`); it does not depend on fn,
// since the scan goes on to the end after fn stops it. As in Member, the
// elements themselves are not validated.
func Elements(arr []byte, fn func(elem []byte) bool) (ok bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return skipSpace(arr, i+1) == len(arr)
	}
	calling := true
	for {
		start, depth := i, 0
	element:
		for ; i < len(arr); i++ {
			switch arr[i] {
			case '"':
				j := i + 1
				for j < len(arr) && arr[j] != '"' {
					if arr[j] == '\\' {
						j++
					}
					j++
				}
				if j >= len(arr) {
					return false
				}
				i = j
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break element // the array's own closing bracket
				}
				depth--
			case ',':
				if depth == 0 {
					break element
				}
			}
		}
		if i >= len(arr) {
			return false
		}
		elem := trimRight(arr[start:i])
		if len(elem) == 0 {
			return false
		}
		if calling && !fn(elem) {
			calling = false // scan on: ok still says whether the array closes
		}
		switch arr[i] {
		case ']':
			return skipSpace(arr, i+1) == len(arr)
		case '}':
			return false
		}
		i = skipSpace(arr, i+1)
	}
}

// StringLen is the length in bytes of the JSON string literal s, quotes
// included in s, once decoded as encoding/json decodes it. ok is false when s
// is not one string literal, or when it holds what only the full decoder
// should answer for: a \u escape, a control character or bytes that are
// not UTF-8.
func StringLen(s []byte) (n int, ok bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return 0, false
	}
	ascii := true
	for i := 1; i < len(s)-1; i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s)-1 {
				return 0, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			default: // \u and anything invalid
				return 0, false
			}
		case c == '"' || c < 0x20:
			return 0, false
		case c >= 0x80:
			ascii = false
		}
		n++
	}
	if !ascii && !utf8.Valid(s[1:len(s)-1]) {
		return 0, false
	}
	return n, true
}

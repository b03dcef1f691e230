package pricing

import (
	"bytes"
	"encoding/json"
)

// topLevelUsage finds the value of the top-level "usage" member of body
// without decoding the rest of it: a response's choices, output or content
// (most of its bytes) only need their strings and brackets skipped. It is the
// fast path of the usage readers; the full decoder remains their slow path
// and their error messages.
//
// ok is false whenever the answer could differ from encoding/json's, and the
// caller must then decode the whole body: the body is not an object, its
// brackets or strings do not close, there is text after it, the usage key
// appears twice (encoding/json merges repeated objects into one value), or a
// top-level key is spelled with escapes, non-ASCII bytes or other letter
// case (encoding/json matches keys case-insensitively). found is false when
// there is no usage member. The rest of the body is not validated: a body
// malformed elsewhere is billed from its usage, which is what billing needs.
func topLevelUsage(body []byte) (val []byte, found, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false, false
	}
	depth := 0
	expectKey := false
	valStart := -1 // start of the usage value being scanned, or -1
	for ; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			j := i + 1
			plain := true
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					plain = false
					j++
				} else if body[j] >= 0x80 {
					plain = false
				}
				j++
			}
			if j >= len(body) {
				return nil, false, false
			}
			if depth == 1 && expectKey {
				expectKey = false
				key := body[i+1 : j]
				if !plain {
					return nil, false, false
				}
				if len(key) == len("usage") && bytes.EqualFold(key, []byte("usage")) {
					if string(key) != "usage" || found {
						return nil, false, false
					}
					k := skipSpace(body, j+1)
					if k >= len(body) || body[k] != ':' {
						return nil, false, false
					}
					valStart = skipSpace(body, k+1)
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
					val, valStart = trimSpace(body[valStart:i]), -1
				}
				expectKey = true
			}
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, false, false
			}
			if depth == 0 {
				if c != '}' {
					return nil, false, false
				}
				if valStart >= 0 {
					val = trimSpace(body[valStart:i])
				}
				if skipSpace(body, i+1) != len(body) {
					return nil, false, false
				}
				if found && len(val) == 0 {
					return nil, false, false
				}
				return val, found, true
			}
		}
	}
	return nil, false, false // the top-level object never closed
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// fastUsage decodes the top-level usage member of body into w (a pointer to
// a usage wire struct) when topLevelUsage can find it. done is true when the
// answer is final: there is no usage or a null one (present false), or w
// holds it (present true). done is false when the caller must take its
// slow path: the body needs the full decoder, or the usage value does not
// decode (the slow path says why).
func fastUsage(body []byte, w any) (present, done bool) {
	val, found, ok := topLevelUsage(body)
	if !ok {
		return false, false
	}
	if !found || string(val) == "null" {
		return false, true
	}
	if len(val) == 0 || val[0] != '{' || json.Unmarshal(val, w) != nil {
		return false, false
	}
	return true, true
}

package wire

import (
	"encoding/json"

	"github.com/modelrelay/modelrelay/internal/jsonscan"
)

// fastUsage decodes the top-level usage member of body into w (a pointer to
// a usage wire struct) when jsonscan.Member can find it without decoding the
// rest of the body: a response's choices, output or content, most of its
// bytes, only need their strings and brackets skipped. It is the fast path of
// the usage readers; the full decoder remains their slow path and their error
// messages. The rest of the body is not validated: a body malformed
// elsewhere is billed from its usage, which is what billing needs.
//
// done is true when the answer is final: there is no usage or a null one
// (present false), or w holds it (present true). done is false when the
// caller must take its slow path: the body needs the full decoder, or the
// usage value does not decode (the slow path says why).
func fastUsage(body []byte, w any) (present, done bool) {
	val, _, found, ok := jsonscan.Member(body, "usage")
	if !ok {
		return false, false
	}
	if !found || string(val) == "null" {
		return false, true
	}
	if len(val) == 0 || val[0] != '{' {
		return false, false
	}
	if sc, isScanner := w.(usageScanner); isScanner {
		ok := sc.scan(val)
		return ok, ok
	}
	if json.Unmarshal(val, w) != nil {
		return false, false
	}
	return true, true
}

// A usageScanner fills a usage wire struct from the bytes of its object
// without reflection (encoding/json takes about 9 µs for a chat usage
// object, most of reading an answer). scan returns false when it cannot
// be sure to answer as encoding/json would; the caller then decodes.
type usageScanner interface{ scan(obj []byte) bool }

// scanTokens reads the shape chat and responses usage share: two counts and
// a details object with a cached count (nil when absent or null).
func scanTokens(obj []byte, in, out, details string, inV, outV *count, det **tokenDetails) bool {
	var ok bool
	if *inV, ok = intMember(obj, in); !ok {
		return false
	}
	if *outV, ok = intMember(obj, out); !ok {
		return false
	}
	val, _, found, ok := jsonscan.Member(obj, details)
	if !ok {
		return false
	}
	if !found || string(val) == "null" {
		*det = nil
		return true
	}
	if val[0] != '{' {
		return false
	}
	cached, ok := intMember(val, "cached_tokens")
	*det = &tokenDetails{CachedTokens: cached}
	return ok
}

// intMember reads member key of the object obj as encoding/json reads it
// into an int64: absent or null is 0. ok is false for anything but an
// integer literal of at most 18 digits (encoding/json refuses fractions,
// exponents and strings, and the caller's decoder says so).
func intMember(obj []byte, key string) (n int64, ok bool) {
	val, _, found, ok := jsonscan.Member(obj, key)
	if !ok {
		return 0, false
	}
	if !found || string(val) == "null" {
		return 0, true
	}
	neg := len(val) > 0 && val[0] == '-'
	digits := val
	if neg {
		digits = val[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

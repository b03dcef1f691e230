package pricing

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
	if len(val) == 0 || val[0] != '{' || json.Unmarshal(val, w) != nil {
		return false, false
	}
	return true, true
}

package xlate

import (
	"encoding/base64"
	"strings"
)

// # A tool call's signature, in its id
//
// Gemini signs the function calls of a thinking model (thoughtSignature)
// and wants each signature back on its call (Gemini 3 refuses a current
// turn's call without one). Chat carries it in a call's
// extra_content.google.thought_signature; messages and responses have no
// field for it on a tool call, so a translated answer carries it in the
// call's id — the id, "__ts_" and the signature in unpadded base64url,
// as peers do — and the parsers split it off again when the caller sends
// the call, and its result, back.

// callSigMark separates a call's id from its signature.
const callSigMark = "__ts_"

// callIDWithSig is the id a messages or responses caller gets for a call
// with signature sig: id itself when sig is empty.
func callIDWithSig(id, sig string) string {
	if sig == "" {
		return id
	}
	return id + callSigMark + base64.RawURLEncoding.EncodeToString([]byte(sig))
}

// splitCallID is the id and signature of a call id callIDWithSig made
// (the mark's first occurrence: the base64url after it may hold the mark
// again, an upstream's id does not); any other id is itself, without a
// signature.
func splitCallID(full string) (id, sig string) {
	i := strings.Index(full, callSigMark)
	if i < 0 {
		return full, ""
	}
	b, err := base64.RawURLEncoding.DecodeString(full[i+len(callSigMark):])
	if err != nil || len(b) == 0 {
		return full, ""
	}
	return full[:i], string(b)
}

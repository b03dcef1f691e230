package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"

	"github.com/modelrelay/modelrelay/internal/clip"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// A Summary is what the gateway decodes of a request body: only the fields
// it needs to quote, route and meter the call. The body itself is forwarded
// as received.
type Summary struct {
	Model        string
	Stream       bool
	MaxOutput    int64 // 0 when absent
	IncludeUsage bool  // chat: the client asked for stream_options.include_usage
	// Params are the request's pricing parameters, handed to the plugin's
	// quote (image size, video duration, typed questions).
	Params []abi.Param
	// Conv is the hash of the conversation identity the body carries
	// (ConversationHash): prompt_cache_key, or metadata.user_id on
	// messages; 0 when none. Line affinity keys on it.
	Conv uint64
}

// MaxModelID is the longest model id a relayed call may name: longer is
// 400 invalid_model, before the id is looked up, held or sent.
const MaxModelID = 256

// convSeed keys the hashes of conversation identities: they mean nothing
// outside this process and cannot be matched against a known identity.
var convSeed = maphash.MakeSeed()

// ConversationHash is the hash of a conversation identity the caller sent
// (a prompt_cache_key, a metadata.user_id, a session header): 0 when there
// is none. The identity itself is never kept, logged or stored.
func ConversationHash(id *string) uint64 {
	if id == nil || *id == "" {
		return 0
	}
	return max(maphash.String(convSeed, *id), 1)
}

// A Decoder reads the request body of one endpoint, given its Content-Type,
// into a Summary; a body the endpoint refuses is an *Error (400).
type Decoder func(body []byte, contentType string) (*Summary, error)

// jsonError turns a json decoding error into a 400 that names the field.
func jsonError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		// Value is "number " and the number's text, as long as the caller made it.
		return badRequest(field, "%s: expected %s, got JSON %s", field, jsonKind(te.Type.Kind().String()), clip.Text(te.Value, clip.QuoteLimit))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("body", "the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badRequest("body", "the body is not valid JSON: unexpected end of input")
	}
	return badRequest("body", "the body is not valid JSON: %s", clip.Text(err.Error(), clip.MaxMessage))
}

func jsonKind(k string) string {
	switch k {
	case "int64", "int", "int32":
		return "an integer"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return k
}

// decodeObject unmarshals body, which must be one JSON object.
func decodeObject(body []byte, v any) *Error {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 {
		return badRequest("body", "the body is empty; a JSON object is required")
	}
	if t[0] != '{' {
		return badRequest("body", "the body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err)
	}
	return nil
}

func requireModel(m *string) (string, *Error) {
	if m == nil {
		return "", badRequest("model", "model is required")
	}
	if *m == "" {
		return "", badRequest("model", "model must not be empty")
	}
	if len(*m) > MaxModelID {
		return "", badRequest("model", "the model id is %d bytes; the limit is %d", len(*m), MaxModelID)
	}
	return *m, nil
}

func nonNegative(field string, v *int64) (int64, *Error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, badRequest(field, "%s must be a positive integer, got %d", field, *v)
	}
	return *v, nil
}

// JSONOnly adapts a JSON decoder to a Decoder: any
// content type is read as JSON (clients do not always set it). A body that
// is not UTF-8 is refused first, before it is decoded, held or sent (JSON
// is UTF-8, RFC 8259 section 8.1; encoding/json would otherwise replace the
// bad bytes in what it decodes and forward them as they are).
func JSONOnly(dec func([]byte) (*Summary, error)) Decoder {
	return func(body []byte, _ string) (*Summary, error) {
		if e := checkUTF8(body, "body", "the request body"); e != nil {
			return nil, e
		}
		return dec(body)
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/internal/jsonscan"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// summary is what the gateway decodes of a request body: only the fields it
// needs. The body itself is forwarded as received.
type summary struct {
	model        string
	stream       bool
	maxOutput    int64 // 0 when absent
	includeUsage bool  // chat: the client asked for stream_options.include_usage
	params       []abi.Param
	// conv is the hash of the conversation identity the body carries
	// (lines.ConversationHash): prompt_cache_key, or metadata.user_id on
	// messages; 0 when none. Line affinity keys on it.
	conv uint64
}

// jsonError turns a json decoding error into a 400 that names the field.
func jsonError(err error) *apierr.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		// Value is "number " and the number's text, as long as the caller made it.
		return apierr.BadRequest(field, "%s: expected %s, got JSON %s", field, jsonKind(te.Type.Kind().String()), apierr.Bound(te.Value, apierr.QuoteLimit))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return apierr.BadRequest("body", "the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return apierr.BadRequest("body", "the body is not valid JSON: unexpected end of input")
	}
	return apierr.BadRequest("body", "the body is not valid JSON: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
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
func decodeObject(body []byte, v any) *apierr.Error {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 {
		return apierr.BadRequest("body", "the body is empty; a JSON object is required")
	}
	if t[0] != '{' {
		return apierr.BadRequest("body", "the body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err)
	}
	return nil
}

func requireModel(m *string) (string, *apierr.Error) {
	if m == nil {
		return "", apierr.BadRequest("model", "model is required")
	}
	if *m == "" {
		return "", apierr.BadRequest("model", "model must not be empty")
	}
	if len(*m) > maxModelID {
		return "", apierr.BadRequest("model", "the model id is %d bytes; the limit is %d", len(*m), maxModelID)
	}
	return *m, nil
}

func nonNegative(field string, v *int64) (int64, *apierr.Error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, apierr.BadRequest(field, "%s must be a positive integer, got %d", field, *v)
	}
	return *v, nil
}

// chatRequest is the part of a chat request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type chatRequest struct {
	Model               *string          `json:"model"`
	Messages            *[]chatMessage   `json:"messages"`
	Stream              *bool            `json:"stream"`
	MaxTokens           *int64           `json:"max_tokens"`
	MaxCompletionTokens *int64           `json:"max_completion_tokens"`
	StreamOptions       *json.RawMessage `json:"stream_options"`
	PromptCacheKey      *string          `json:"prompt_cache_key"`
}

type chatMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

func decodeChat(body []byte) (*summary, error) {
	var req chatRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Messages == nil {
		return nil, apierr.BadRequest("messages", "messages is required")
	}
	if len(*req.Messages) == 0 {
		return nil, apierr.BadRequest("messages", "messages must contain at least one message")
	}
	for i, m := range *req.Messages {
		f := func() string { return "messages[" + strconv.Itoa(i) + "]" } // built only for an error
		if m.Role == nil {
			return nil, apierr.BadRequest(f()+".role", "%s.role is required", f())
		}
		if !chatRoles[*m.Role] {
			return nil, apierr.BadRequest(f()+".role", "%s.role must be one of system, developer, user, assistant, tool; got %s", f(), apierr.Quote(*m.Role))
		}
		// content may be null for assistant messages carrying tool calls.
		if len(m.Content) == 0 && *m.Role != "assistant" {
			return nil, apierr.BadRequest(f()+".content", "%s.content is required", f())
		}
	}
	s := &summary{model: model, conv: lines.ConversationHash(req.PromptCacheKey)}
	if req.Stream != nil {
		s.stream = *req.Stream
	}
	mt, e := nonNegative("max_tokens", req.MaxTokens)
	if e != nil {
		return nil, e
	}
	mct, e := nonNegative("max_completion_tokens", req.MaxCompletionTokens)
	if e != nil {
		return nil, e
	}
	s.maxOutput = max(mt, mct)
	if req.StreamOptions != nil && !bytes.Equal(bytes.TrimSpace(*req.StreamOptions), []byte("null")) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(*req.StreamOptions, &so); err != nil {
			return nil, apierr.BadRequest("stream_options", "stream_options must be an object with a boolean include_usage")
		}
		s.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	return s, nil
}

// responsesRequest is the part of a responses request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type responsesRequest struct {
	Model           *string         `json:"model"`
	Input           json.RawMessage `json:"input"`
	Stream          *bool           `json:"stream"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	PromptCacheKey  *string         `json:"prompt_cache_key"`
}

func decodeResponses(body []byte) (*summary, error) {
	var req responsesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	given, e := checkInput(req.Input)
	if e != nil {
		return nil, e
	}
	if !given {
		return nil, apierr.BadRequest("input", "input is required (a string or an array of input items)")
	}
	s := &summary{model: model, conv: lines.ConversationHash(req.PromptCacheKey)}
	if req.Stream != nil {
		s.stream = *req.Stream
	}
	if s.maxOutput, e = nonNegative("max_output_tokens", req.MaxOutputTokens); e != nil {
		return nil, e
	}
	return s, nil
}

// checkInput checks a responses input (of /v1/responses or
// /v1/responses/compact): absent or null is not given, anything else must
// be a string or an array of input items.
func checkInput(raw json.RawMessage) (given bool, e *apierr.Error) {
	in := bytes.TrimSpace(raw)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return false, nil
	}
	if in[0] != '"' && in[0] != '[' {
		return true, apierr.BadRequest("input", "input must be a string or an array of input items")
	}
	return true, nil
}

// messagesRequest is the part of a messages request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type messagesRequest struct {
	Model     *string            `json:"model"`
	MaxTokens *int64             `json:"max_tokens"`
	Messages  *[]messagesMessage `json:"messages"`
	Stream    *bool              `json:"stream"`
	Metadata  *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
}

type messagesMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

func decodeMessages(body []byte) (*summary, error) {
	var req messagesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.MaxTokens == nil {
		return nil, apierr.BadRequest("max_tokens", "max_tokens is required on /v1/messages")
	}
	if *req.MaxTokens < 1 {
		return nil, apierr.BadRequest("max_tokens", "max_tokens must be a positive integer, got %d", *req.MaxTokens)
	}
	if e := checkMessages(req.Messages); e != nil {
		return nil, e
	}
	s := &summary{model: model, maxOutput: *req.MaxTokens}
	if req.Metadata != nil {
		s.conv = lines.ConversationHash(req.Metadata.UserID)
	}
	if req.Stream != nil {
		s.stream = *req.Stream
	}
	return s, nil
}

// decodeCountTokens reads a count_tokens request: a messages request
// without max_tokens (any max_tokens, stream or other field is forwarded
// as sent and left to the provider).
func decodeCountTokens(body []byte) (*summary, error) {
	var req messagesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if e := checkMessages(req.Messages); e != nil {
		return nil, e
	}
	return &summary{model: model}, nil
}

// checkMessages requires messages, each with a role and a content; which
// roles and blocks are valid is the provider's to say.
func checkMessages(msgs *[]messagesMessage) *apierr.Error {
	if msgs == nil {
		return apierr.BadRequest("messages", "messages is required")
	}
	for i, m := range *msgs {
		f := func() string { return "messages[" + strconv.Itoa(i) + "]" } // built only for an error
		if m.Role == nil || *m.Role == "" {
			return apierr.BadRequest(f()+".role", "%s.role is required", f())
		}
		if len(m.Content) == 0 {
			return apierr.BadRequest(f()+".content", "%s.content is required", f())
		}
	}
	return nil
}

// compactRequest is the part of a responses compact request the gateway
// reads.
type compactRequest struct {
	Model *string         `json:"model"`
	Input json.RawMessage `json:"input"`
}

// decodeCompact reads a POST /v1/responses/compact request: model is
// required; input is optional upstream (previous_response_id can stand for
// it) but, when present and not null, a string or an array of items.
func decodeCompact(body []byte) (*summary, error) {
	var req compactRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if _, e := checkInput(req.Input); e != nil {
		return nil, e
	}
	return &summary{model: model}, nil
}

// forceIncludeUsage returns body with stream_options.include_usage set to
// true, keeping every other byte of the top-level object. It is the one
// change the gateway makes to a forwarded body (see RATIONALE.md).
func forceIncludeUsage(body []byte) ([]byte, error) {
	// The byte scanner answers for nearly every body; the tokenizing
	// decoder (about ten times slower) takes the ones it is unsure of.
	var start, end int
	val, at, found, ok := jsonscan.Member(body, "stream_options")
	if ok {
		start, end = at, at+len(val)
	} else {
		var err error
		if start, end, found, err = topLevelValueSpan(body, "stream_options"); err != nil {
			return nil, err
		}
	}
	if !found {
		i := bytes.IndexByte(body, '{')
		if i < 0 {
			return nil, errors.New("body is not an object")
		}
		out := make([]byte, 0, len(body)+40)
		out = append(out, body[:i+1]...)
		out = append(out, `"stream_options":{"include_usage":true}`...)
		rest := bytes.TrimLeft(body[i+1:], " \t\r\n")
		if len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, body[i+1:]...), nil
	}
	opts := map[string]json.RawMessage{}
	val = bytes.TrimSpace(body[start:end])
	if !bytes.Equal(val, []byte("null")) {
		if err := json.Unmarshal(val, &opts); err != nil {
			return nil, err
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	nv, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(nv))
	out = append(out, body[:start]...)
	out = append(out, nv...)
	return append(out, body[end:]...), nil
}

// topLevelValueSpan finds the byte span of the value of key in the top-level
// JSON object of body.
func topLevelValueSpan(body []byte, key string) (start, end int, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return 0, 0, false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, 0, false, errors.New("body is not an object")
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return 0, 0, false, err
		}
		k, _ := kt.(string)
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, false, err
		}
		if k == key {
			end = int(dec.InputOffset())
			// skip the colon and white space between key and value
			s := afterKey
			for s < end && (body[s] == ':' || body[s] == ' ' || body[s] == '\t' || body[s] == '\r' || body[s] == '\n') {
				s++
			}
			return s, end, true, nil
		}
	}
	return 0, 0, false, nil
}

// usageNull matches the "usage":null member that include_usage adds to every
// chunk; it can only appear as a key (string content escapes its quotes).
var usageNullForms = [][]byte{[]byte(`,"usage":null`), []byte(`, "usage": null`), []byte(`,"usage": null`), []byte(`"usage":null,`), []byte(`"usage": null, `)}

// stripUsageNull removes the "usage":null member from a chunk's data.
func stripUsageNull(data []byte) []byte {
	for _, f := range usageNullForms {
		if i := bytes.Index(data, f); i >= 0 {
			out := make([]byte, 0, len(data)-len(f))
			out = append(out, data[:i]...)
			return append(out, data[i+len(f):]...)
		}
	}
	return data
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// jsonOnly adapts a JSON decoder to the endpoint's decode signature: any
// content type is read as JSON (clients do not always set it). A body that
// is not UTF-8 is refused first, before it is decoded, held or sent (JSON
// is UTF-8, RFC 8259 section 8.1; encoding/json would otherwise replace the
// bad bytes in what it decodes and forward them as they are).
func jsonOnly(dec func([]byte) (*summary, error)) func([]byte, string) (*summary, error) {
	return func(body []byte, _ string) (*summary, error) {
		if e := apierr.CheckUTF8(body, "body", "the request body"); e != nil {
			return nil, e
		}
		return dec(body)
	}
}

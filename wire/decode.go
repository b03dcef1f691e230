package wire

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/modelrelay/modelrelay/internal/clip"
)

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

// DecodeChat reads a POST /v1/chat/completions request: model and
// messages (each with a known role, and a content unless an assistant's)
// are required; max_tokens and max_completion_tokens, when given, are
// positive and the larger is MaxOutput; stream_options, when not null, is an
// object whose include_usage is IncludeUsage.
func DecodeChat(body []byte) (*Summary, error) {
	var req chatRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Messages == nil {
		return nil, badRequest("messages", "messages is required")
	}
	if len(*req.Messages) == 0 {
		return nil, badRequest("messages", "messages must contain at least one message")
	}
	for i, m := range *req.Messages {
		f := func() string { return "messages[" + strconv.Itoa(i) + "]" } // built only for an error
		if m.Role == nil {
			return nil, badRequest(f()+".role", "%s.role is required", f())
		}
		if !chatRoles[*m.Role] {
			return nil, badRequest(f()+".role", "%s.role must be one of system, developer, user, assistant, tool; got %s", f(), clip.Quote(*m.Role))
		}
		// content may be null for assistant messages carrying tool calls.
		if len(m.Content) == 0 && *m.Role != "assistant" {
			return nil, badRequest(f()+".content", "%s.content is required", f())
		}
	}
	s := &Summary{Model: model, Conv: ConversationHash(req.PromptCacheKey)}
	if req.Stream != nil {
		s.Stream = *req.Stream
	}
	mt, e := nonNegative("max_tokens", req.MaxTokens)
	if e != nil {
		return nil, e
	}
	mct, e := nonNegative("max_completion_tokens", req.MaxCompletionTokens)
	if e != nil {
		return nil, e
	}
	s.MaxOutput = max(mt, mct)
	if req.StreamOptions != nil && !bytes.Equal(bytes.TrimSpace(*req.StreamOptions), []byte("null")) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(*req.StreamOptions, &so); err != nil {
			return nil, badRequest("stream_options", "stream_options must be an object with a boolean include_usage")
		}
		s.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
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

// DecodeResponses reads a POST /v1/responses request: model and input (a
// string or an array of input items) are required; max_output_tokens, when
// given, is positive.
func DecodeResponses(body []byte) (*Summary, error) {
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
		return nil, badRequest("input", "input is required (a string or an array of input items)")
	}
	s := &Summary{Model: model, Conv: ConversationHash(req.PromptCacheKey)}
	if req.Stream != nil {
		s.Stream = *req.Stream
	}
	if s.MaxOutput, e = nonNegative("max_output_tokens", req.MaxOutputTokens); e != nil {
		return nil, e
	}
	return s, nil
}

// checkInput checks a responses input (of /v1/responses or
// /v1/responses/compact): absent or null is not given, anything else must
// be a string or an array of input items.
func checkInput(raw json.RawMessage) (given bool, e *Error) {
	in := bytes.TrimSpace(raw)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return false, nil
	}
	if in[0] != '"' && in[0] != '[' {
		return true, badRequest("input", "input must be a string or an array of input items")
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

// DecodeMessages reads a POST /v1/messages request: model, a positive
// max_tokens and messages (each with a role and a content) are required;
// metadata.user_id is the conversation identity.
func DecodeMessages(body []byte) (*Summary, error) {
	var req messagesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens is required on /v1/messages")
	}
	if *req.MaxTokens < 1 {
		return nil, badRequest("max_tokens", "max_tokens must be a positive integer, got %d", *req.MaxTokens)
	}
	if e := checkMessages(req.Messages); e != nil {
		return nil, e
	}
	s := &Summary{Model: model, MaxOutput: *req.MaxTokens}
	if req.Metadata != nil {
		s.Conv = ConversationHash(req.Metadata.UserID)
	}
	if req.Stream != nil {
		s.Stream = *req.Stream
	}
	return s, nil
}

// DecodeCountTokens reads a count_tokens request: a messages request
// without max_tokens (any max_tokens, stream or other field is forwarded
// as sent and left to the provider).
func DecodeCountTokens(body []byte) (*Summary, error) {
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
	return &Summary{Model: model}, nil
}

// checkMessages requires messages, each with a role and a content; which
// roles and blocks are valid is the provider's to say.
func checkMessages(msgs *[]messagesMessage) *Error {
	if msgs == nil {
		return badRequest("messages", "messages is required")
	}
	for i, m := range *msgs {
		f := func() string { return "messages[" + strconv.Itoa(i) + "]" } // built only for an error
		if m.Role == nil || *m.Role == "" {
			return badRequest(f()+".role", "%s.role is required", f())
		}
		if len(m.Content) == 0 {
			return badRequest(f()+".content", "%s.content is required", f())
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

// DecodeCompact reads a POST /v1/responses/compact request: model is
// required; input is optional upstream (previous_response_id can stand for
// it) but, when present and not null, a string or an array of items.
func DecodeCompact(body []byte) (*Summary, error) {
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
	return &Summary{Model: model}, nil
}

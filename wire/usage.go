package wire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelrelay/modelrelay/wire/units"
)

// This file reads token usage out of provider response bodies and stream
// events. Its errors never quote the body: they name a field and a byte
// offset, so that they can be logged without leaking prompt or completion
// text.

// Usage is what one call consumed (units.Usage): the readers of this
// package fill in its token counts and images.
type Usage = units.Usage

// count is a token count in a usage object; absent and null read as 0.
type count = int64

// tokenDetails is the details object of chat and responses usage.
type tokenDetails struct {
	CachedTokens count `json:"cached_tokens"`
}

// chatUsageWire is a chat-completions usage object.
type chatUsageWire struct {
	PromptTokens        count         `json:"prompt_tokens"`
	CompletionTokens    count         `json:"completion_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details"`
}

func (w *chatUsageWire) scan(obj []byte) bool {
	return scanTokens(obj, "prompt_tokens", "completion_tokens", "prompt_tokens_details", &w.PromptTokens, &w.CompletionTokens, &w.PromptTokensDetails)
}

func (w *chatUsageWire) usage() (Usage, error) {
	var cached count
	if w.PromptTokensDetails != nil {
		cached = w.PromptTokensDetails.CachedTokens
	}
	if err := nonNegativeFields(
		"usage.prompt_tokens", w.PromptTokens,
		"usage.completion_tokens", w.CompletionTokens,
		"usage.prompt_tokens_details.cached_tokens", cached,
	); err != nil {
		return Usage{}, err
	}
	if cached > w.PromptTokens {
		return Usage{}, fmt.Errorf("usage.prompt_tokens_details.cached_tokens (%d) is above usage.prompt_tokens (%d)", cached, w.PromptTokens)
	}
	return Usage{
		InputTokens:     w.PromptTokens - cached,
		CacheReadTokens: cached,
		OutputTokens:    w.CompletionTokens,
	}, nil
}

// ChatUsage reads the usage of a chat-completions response object, or of one
// streamed chunk's data: usage.prompt_tokens, usage.completion_tokens and
// usage.prompt_tokens_details.cached_tokens. InputTokens is prompt minus
// cached, CacheReadTokens is cached, OutputTokens is completion. ok is false
// when the body has no usage object or a null one. Malformed JSON, a
// non-integer or negative count, or cached above prompt is an error.
func ChatUsage(body []byte) (u Usage, ok bool, err error) {
	var w chatUsageWire
	if present, done := fastUsage(body, &w); done {
		if !present {
			return Usage{}, false, nil
		}
		if u, err := w.usage(); err == nil {
			return u, true, nil
		}
	}
	return chatUsageFull(body)
}

// chatUsageFull is ChatUsage by decoding the whole body: the slow path, and
// the reference the fast path is fuzzed against.
func chatUsageFull(body []byte) (u Usage, ok bool, err error) {
	var v struct {
		Usage *chatUsageWire `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Usage{}, false, answerError("chat completion", err)
	}
	if v.Usage == nil {
		return Usage{}, false, nil
	}
	u, err = v.Usage.usage()
	return u, err == nil, err
}

// responsesUsageWire is a Responses API usage object.
type responsesUsageWire struct {
	InputTokens        count         `json:"input_tokens"`
	OutputTokens       count         `json:"output_tokens"`
	InputTokensDetails *tokenDetails `json:"input_tokens_details"`
}

func (w *responsesUsageWire) scan(obj []byte) bool {
	return scanTokens(obj, "input_tokens", "output_tokens", "input_tokens_details", &w.InputTokens, &w.OutputTokens, &w.InputTokensDetails)
}

func (w *responsesUsageWire) usage() (Usage, error) {
	var cached count
	if w.InputTokensDetails != nil {
		cached = w.InputTokensDetails.CachedTokens
	}
	if err := nonNegativeFields(
		"usage.input_tokens", w.InputTokens,
		"usage.output_tokens", w.OutputTokens,
		"usage.input_tokens_details.cached_tokens", cached,
	); err != nil {
		return Usage{}, err
	}
	if cached > w.InputTokens {
		return Usage{}, fmt.Errorf("usage.input_tokens_details.cached_tokens (%d) is above usage.input_tokens (%d)", cached, w.InputTokens)
	}
	return Usage{
		InputTokens:     w.InputTokens - cached,
		CacheReadTokens: cached,
		OutputTokens:    w.OutputTokens,
	}, nil
}

// ResponsesUsage reads the usage of a Responses API response object:
// usage.input_tokens, usage.input_tokens_details.cached_tokens and
// usage.output_tokens (output includes reasoning tokens). InputTokens is
// input minus cached. ok is false when there is no non-null usage object.
func ResponsesUsage(body []byte) (u Usage, ok bool, err error) {
	var w responsesUsageWire
	if present, done := fastUsage(body, &w); done {
		if !present {
			return Usage{}, false, nil
		}
		if u, err := w.usage(); err == nil {
			return u, true, nil
		}
	}
	return responsesUsageFull(body)
}

// responsesUsageFull is ResponsesUsage by decoding the whole body: the slow path, and
// the reference the fast path is fuzzed against.
func responsesUsageFull(body []byte) (u Usage, ok bool, err error) {
	var v struct {
		Usage *responsesUsageWire `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Usage{}, false, answerError("response", err)
	}
	if v.Usage == nil {
		return Usage{}, false, nil
	}
	u, err = v.Usage.usage()
	return u, err == nil, err
}

// messagesUsageWire is a message-API usage object. Pointers tell a field that
// is present from one that is not, which matters for message_delta.
type messagesUsageWire struct {
	InputTokens              *count `json:"input_tokens"`
	OutputTokens             *count `json:"output_tokens"`
	CacheReadInputTokens     *count `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *count `json:"cache_creation_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m count `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h count `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

func deref(p *count) count {
	if p == nil {
		return 0
	}
	return *p
}

func (w *messagesUsageWire) check() error {
	var e5, e1 count
	if w.CacheCreation != nil {
		e5, e1 = w.CacheCreation.Ephemeral5m, w.CacheCreation.Ephemeral1h
	}
	return nonNegativeFields(
		"usage.input_tokens", deref(w.InputTokens),
		"usage.output_tokens", deref(w.OutputTokens),
		"usage.cache_read_input_tokens", deref(w.CacheReadInputTokens),
		"usage.cache_creation_input_tokens", deref(w.CacheCreationInputTokens),
		"usage.cache_creation.ephemeral_5m_input_tokens", e5,
		"usage.cache_creation.ephemeral_1h_input_tokens", e1,
	)
}

// messagesState is the usage of one message as its usage objects report it.
type messagesState struct {
	input, output, cacheRead, creation count
	breakdown                          bool // a cache_creation breakdown was seen
	write5m, write1h                   count
}

// merge takes the fields w carries; absent fields keep their values.
func (s *messagesState) merge(w *messagesUsageWire) {
	if w.InputTokens != nil {
		s.input = *w.InputTokens
	}
	if w.OutputTokens != nil {
		s.output = *w.OutputTokens
	}
	if w.CacheReadInputTokens != nil {
		s.cacheRead = *w.CacheReadInputTokens
	}
	if w.CacheCreationInputTokens != nil {
		s.creation = *w.CacheCreationInputTokens
	}
	if w.CacheCreation != nil {
		s.breakdown = true
		s.write5m, s.write1h = w.CacheCreation.Ephemeral5m, w.CacheCreation.Ephemeral1h
	}
}

// usage splits cache creation into 5-minute and 1-hour writes. With a
// cache_creation breakdown, 1-hour writes are its 1-hour count and 5-minute
// writes its 5-minute count, or the rest of cache_creation_input_tokens when
// that is larger (a breakdown never lowers the total billed). Without one,
// every creation token is a 5-minute write.
func (s *messagesState) usage() Usage {
	u := Usage{InputTokens: s.input, CacheReadTokens: s.cacheRead, OutputTokens: s.output}
	if !s.breakdown {
		u.CacheWriteTokens = s.creation
		return u
	}
	u.CacheWrite1hTokens = s.write1h
	u.CacheWriteTokens = s.write5m
	if rest := s.creation - s.write1h; rest > u.CacheWriteTokens {
		u.CacheWriteTokens = rest
	}
	return u
}

// MessagesUsage reads the usage of a message-API message object:
// usage.input_tokens (which already excludes cached input),
// usage.cache_read_input_tokens, usage.cache_creation_input_tokens with its
// optional breakdown usage.cache_creation.ephemeral_5m_input_tokens and
// ephemeral_1h_input_tokens, and usage.output_tokens. Without the breakdown
// every cache creation token is a 5-minute write; with it, 1-hour writes are
// its 1-hour count and 5-minute writes the larger of its 5-minute count and
// the rest of cache_creation_input_tokens. ok is false when there is no
// non-null usage object.
func MessagesUsage(body []byte) (u Usage, ok bool, err error) {
	var w messagesUsageWire
	if present, done := fastUsage(body, &w); done {
		if !present {
			return Usage{}, false, nil
		}
		if w.check() == nil {
			var st messagesState
			st.merge(&w)
			return st.usage(), true, nil
		}
	}
	return messagesUsageFull(body)
}

// messagesUsageFull is MessagesUsage by decoding the whole body: the slow path, and
// the reference the fast path is fuzzed against.
func messagesUsageFull(body []byte) (u Usage, ok bool, err error) {
	var v struct {
		Usage *messagesUsageWire `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Usage{}, false, answerError("message", err)
	}
	if v.Usage == nil {
		return Usage{}, false, nil
	}
	if err := v.Usage.check(); err != nil {
		return Usage{}, false, err
	}
	var st messagesState
	st.merge(v.Usage)
	return st.usage(), true, nil
}

// SystemOneUsage reads the usage of a typed-question response:
// usage.input_tokens and usage.output_tokens. ok is false when there is no
// non-null usage object.
func SystemOneUsage(body []byte) (u Usage, ok bool, err error) {
	var v struct {
		Usage *struct {
			InputTokens  count `json:"input_tokens"`
			OutputTokens count `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Usage{}, false, answerError("typed-question response", err)
	}
	if v.Usage == nil {
		return Usage{}, false, nil
	}
	if err := nonNegativeFields(
		"usage.input_tokens", v.Usage.InputTokens,
		"usage.output_tokens", v.Usage.OutputTokens,
	); err != nil {
		return Usage{}, false, err
	}
	return Usage{InputTokens: v.Usage.InputTokens, OutputTokens: v.Usage.OutputTokens}, true, nil
}

// nonNegativeFields takes name, value pairs and reports the first negative.
func nonNegativeFields(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1].(count); v < 0 {
			return fmt.Errorf("%s is negative (%d)", pairs[i].(string), v)
		}
	}
	return nil
}

// answerError turns a decoding error into one that names the field or the byte
// offset but never quotes the body.
func answerError(what string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s: invalid JSON at byte %d", what, se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("%s: must be a JSON object, not %s", what, te.Value)
		}
		return fmt.Errorf("%s: %s must be %s, not %s", what, te.Field, te.Type, te.Value)
	default:
		return fmt.Errorf("%s: malformed JSON", what)
	}
}

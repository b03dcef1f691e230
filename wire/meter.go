package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// usageKey is what mayHaveUsage looks for.
var usageKey = []byte(`"usage"`)

// mayHaveUsage is the cheap test run on every stream event before any JSON
// decoding: does data contain the key "usage" with a value other than null?
// It may answer true for data without usage (the text "usage" followed by a
// colon inside a string); it answers false only when no such key is present
// spelled plainly, which is how every provider writes it.
func mayHaveUsage(data []byte) bool {
	for {
		i := bytes.Index(data, usageKey)
		if i < 0 {
			return false
		}
		data = data[i+len(usageKey):]
		j := skipSpace(data, 0)
		if j >= len(data) || data[j] != ':' {
			continue
		}
		j = skipSpace(data, j+1)
		if j < len(data) && data[j] != 'n' {
			return true
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// IsChatUsageOnlyChunk reports whether data, one chat-completions stream
// chunk, is the usage chunk a provider sends when asked for
// stream_options.include_usage: its choices is an empty array and its usage a
// non-null object. The gateway removes that chunk when the client did not ask
// for usage itself.
func IsChatUsageOnlyChunk(data []byte) bool {
	if !mayHaveUsage(data) {
		return false
	}
	var v struct {
		Choices *[]json.RawMessage `json:"choices"`
		Usage   json.RawMessage    `json:"usage"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	return v.Choices != nil && len(*v.Choices) == 0 && len(v.Usage) > 0 && v.Usage[0] == '{'
}

// A Meter reads the usage of one streamed response, event by event. Observe
// takes each server-sent event's name ("" when the event has no event: line)
// and its data (the data: lines joined, without the "data: " prefix). Usage
// returns the usage seen so far and whether any was seen. Observe is cheap for
// events that carry no usage: it looks for the key "usage" before decoding
// anything. An error from Observe concerns that event only (malformed usage);
// the meter keeps what it had and can take later events. A Meter is used by
// one goroutine.
type Meter interface {
	Observe(event string, data []byte) error
	Usage() (Usage, bool)
}

// NewChatMeter returns a Meter for a chat-completions stream: the last chunk
// that carries a non-null usage object gives the usage (ChatUsage); "[DONE]"
// and chunks without usage are skipped. Event names are ignored.
func NewChatMeter() Meter { return &lastUsageMeter{may: mayHaveUsage, read: ChatUsage} }

// lastUsageMeter is a Meter for a stream whose chunks may each carry the
// whole usage so far (chat's usage chunk, Gemini's usageMetadata): the last
// chunk that carries one gives it. may is the cheap test run before read.
type lastUsageMeter struct {
	may  func(data []byte) bool
	read func(data []byte) (Usage, bool, error)
	u    Usage
	ok   bool
}

func (m *lastUsageMeter) Observe(_ string, data []byte) error {
	if !m.may(data) {
		return nil
	}
	u, ok, err := m.read(data)
	if err != nil {
		return err
	}
	if ok {
		m.u, m.ok = u, true
	}
	return nil
}

func (m *lastUsageMeter) Usage() (Usage, bool) { return m.u, m.ok }

// NewResponsesMeter returns a Meter for a Responses API stream: the usage is
// response.usage of the response.completed event, or of response.incomplete
// or response.failed when they carry one. The event type is the SSE event
// name, or the data's "type" field when the name is empty.
func NewResponsesMeter() Meter { return &responsesMeter{} }

type responsesMeter struct {
	u  Usage
	ok bool
}

func (m *responsesMeter) Observe(event string, data []byte) error {
	if !mayHaveUsage(data) {
		return nil
	}
	var v struct {
		Type     string `json:"type"`
		Response *struct {
			Usage *responsesUsageWire `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return answerError("responses event", err)
	}
	if event == "" {
		event = v.Type
	}
	switch event {
	case "response.completed", "response.incomplete", "response.failed":
	default:
		return nil
	}
	if v.Response == nil || v.Response.Usage == nil {
		return nil
	}
	u, err := v.Response.Usage.usage()
	if err != nil {
		return fmt.Errorf("%s: response.%w", event, err)
	}
	m.u, m.ok = u, true
	return nil
}

func (m *responsesMeter) Usage() (Usage, bool) { return m.u, m.ok }

// NewMessagesMeter returns a Meter for a message-API stream. message_start
// gives message.usage: input, cache read, cache creation and the initial
// output count. Each message_delta gives usage.output_tokens, a running
// total, so the latest replaces the earlier; input and cache fields that a
// message_delta repeats replace theirs too (a repeated
// cache_creation_input_tokens without a breakdown keeps the breakdown of
// message_start). Cache creation is split as in MessagesUsage. The
// event type is the data's "type" field, or the SSE event name when the data
// has none.
func NewMessagesMeter() Meter { return &messagesMeter{} }

type messagesMeter struct {
	st messagesState
	ok bool
}

func (m *messagesMeter) Observe(event string, data []byte) error {
	if !mayHaveUsage(data) {
		return nil
	}
	var v struct {
		Type    string             `json:"type"`
		Usage   *messagesUsageWire `json:"usage"`
		Message *struct {
			Usage *messagesUsageWire `json:"usage"`
		} `json:"message"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return answerError("messages event", err)
	}
	if v.Type != "" {
		event = v.Type
	}
	var w *messagesUsageWire
	switch event {
	case "message_start":
		if v.Message != nil {
			w = v.Message.Usage
		}
	case "message_delta":
		w = v.Usage
	}
	if w == nil {
		return nil
	}
	if err := w.check(); err != nil {
		return fmt.Errorf("%s: %w", event, err)
	}
	m.st.merge(w)
	m.ok = true
	return nil
}

func (m *messagesMeter) Usage() (Usage, bool) { return m.st.usage(), m.ok }

var (
	_ Meter = (*lastUsageMeter)(nil)
	_ Meter = (*responsesMeter)(nil)
	_ Meter = (*messagesMeter)(nil)
)

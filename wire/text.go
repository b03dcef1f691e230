package wire

import (
	"bytes"
	"encoding/json"

	"github.com/modelrelay/modelrelay/internal/jsonscan"
)

// ChatText, ResponsesText and MessagesText are the delivered text of one SSE
// event's data, for the estimate of a stream that ends without usage: the
// bytes of generated text (content, reasoning, tool-call arguments) it
// carried. Every event of every stream is measured, so each reader scans
// for its few strings (scanChatText, scanMessagesText, textString) and
// decodes the event with encoding/json (decodeChatText, decodeMessagesText,
// decodeResponsesText) only when the scan is not sure of encoding/json's
// answer: a string with a \u escape, a control character or
// bytes that are not UTF-8; a key repeated, escaped, non-ASCII or in another
// case; a member of another type. The rest of an event is not validated: a
// malformed event whose text the scan finds counts that text (it was
// delivered), where a decode would have counted nothing.
func ChatText(data []byte) int {
	if len(data) == 0 || data[0] != '{' {
		return 0
	}
	if n, ok := scanChatText(data); ok {
		return n
	}
	return decodeChatText(data)
}

// scanChatText sums choices[].delta's content, reasoning_content and
// tool_calls[].function.arguments.
func scanChatText(data []byte) (int, bool) {
	choices, ok := textField(data, "choices", '[')
	if !ok || choices == nil {
		return 0, ok
	}
	return sumElements(choices, scanChoiceText)
}

func scanChoiceText(choice []byte) (int, bool) {
	delta, ok := elementField(choice, "delta", '{')
	if !ok || delta == nil {
		return 0, ok
	}
	n, ok := sumStrings(delta, "content", "reasoning_content")
	if !ok {
		return 0, false
	}
	calls, ok := textField(delta, "tool_calls", '[')
	if !ok || calls == nil {
		return n, ok
	}
	m, ok := sumElements(calls, scanCallText)
	return n + m, ok
}

func scanCallText(call []byte) (int, bool) {
	fn, ok := elementField(call, "function", '{')
	if !ok || fn == nil {
		return 0, ok
	}
	return textString(fn, "arguments")
}

// sumElements adds up text over the elements of the array arr, stopping at
// the first element text is not sure of.
func sumElements(arr []byte, text func(elem []byte) (int, bool)) (int, bool) {
	n, sure := 0, true
	walked := jsonscan.Elements(arr, func(elem []byte) bool {
		m, ok := text(elem)
		n, sure = n+m, ok
		return ok
	})
	return n, walked && sure
}

func decodeChatText(data []byte) int {
	var ch struct {
		Choices []struct {
			Delta struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return 0
	}
	n := 0
	for _, c := range ch.Choices {
		n += len(c.Delta.Content) + len(c.Delta.ReasoningContent)
		for _, t := range c.Delta.ToolCalls {
			n += len(t.Function.Arguments)
		}
	}
	return n
}

// ResponsesText is the length of a Responses API event's delta string
// (the deltas of output text, reasoning and function-call arguments).
func ResponsesText(data []byte) int {
	if !bytes.Contains(data, []byte(`"delta"`)) {
		return 0
	}
	if n, ok := textString(data, "delta"); ok {
		return n
	}
	return decodeResponsesText(data)
}

func decodeResponsesText(data []byte) int {
	var ev struct {
		Delta string `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return 0
	}
	return len(ev.Delta)
}

// MessagesText sums a messages event's delta.text, delta.partial_json and
// delta.thinking.
func MessagesText(data []byte) int {
	if !bytes.Contains(data, []byte(`"delta"`)) {
		return 0
	}
	if n, ok := scanMessagesText(data); ok {
		return n
	}
	return decodeMessagesText(data)
}

func decodeMessagesText(data []byte) int {
	var ev struct {
		Delta struct {
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return 0
	}
	return len(ev.Delta.Text) + len(ev.Delta.PartialJSON) + len(ev.Delta.Thinking)
}

func scanMessagesText(data []byte) (int, bool) {
	delta, ok := textField(data, "delta", '{')
	if !ok || delta == nil {
		return 0, ok
	}
	return sumStrings(delta, "text", "partial_json", "thinking")
}

// sumStrings adds up the decoded lengths of obj's string members named keys.
func sumStrings(obj []byte, keys ...string) (n int, ok bool) {
	for _, k := range keys {
		m, ok := textString(obj, k)
		if !ok {
			return 0, false
		}
		n += m
	}
	return n, true
}

// textField is member key of the object obj when it is of the kind its
// first byte names ('{', '[' or '"'); nil when absent or null. ok is false
// when the scan is not sure or the member is of another kind (which
// encoding/json refuses, making the whole event count nothing).
func textField(obj []byte, key string, kind byte) (val []byte, ok bool) {
	val, _, found, ok := jsonscan.Member(obj, key)
	if !ok || !found {
		return nil, ok
	}
	return nullOr(val, kind)
}

// elementField is textField of an array element that is an object or null
// (nil, as encoding/json decodes null into a struct).
func elementField(elem []byte, key string, kind byte) ([]byte, bool) {
	obj, ok := nullOr(elem, '{')
	if !ok || obj == nil {
		return nil, ok
	}
	return textField(obj, key, kind)
}

// nullOr is val when it is of the kind its first byte names, nil when it is
// null, and not ok otherwise.
func nullOr(val []byte, kind byte) ([]byte, bool) {
	switch {
	case string(val) == "null":
		return nil, true
	case len(val) > 0 && val[0] == kind:
		return val, true
	}
	return nil, false
}

// textString is the decoded length of the string member key of obj: 0 when
// absent or null.
func textString(obj []byte, key string) (int, bool) {
	val, ok := textField(obj, key, '"')
	if !ok || val == nil {
		return 0, ok
	}
	return jsonscan.StringLen(val)
}

package xlate

import (
	"encoding/json"
	"errors"
	"strconv"
)

// chatAnswerWire is an upstream's chat.completion object.
type chatAnswerWire struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Message *struct {
			Content          json.RawMessage       `json:"content"`
			ReasoningContent *string               `json:"reasoning_content"`
			Reasoning        *string               `json:"reasoning"`
			ReasoningDetails []chatReasoningDetail `json:"reasoning_details"`
			Refusal          *string               `json:"refusal"`
			ToolCalls        []chatToolCallWire    `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsageWire `json:"usage"`
}

// chatParseAnswer reads an upstream's chat.completion: the first choice's
// reasoning (reasoning_details, else reasoning_content or vLLM's and
// Ollama's reasoning), content, refusal (kept as text: the finish reason
// says what the server made of it) and tool calls, in that order.
func chatParseAnswer(body []byte) (*Answer, error) {
	var w chatAnswerWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, chatMalformedJSON("the answer", err)
	}
	if len(w.Choices) == 0 || w.Choices[0].Message == nil {
		return nil, malformed("the answer is not a chat completion: it has no choices[0].message")
	}
	c := &w.Choices[0]
	m := c.Message
	a := &Answer{ID: w.ID, Model: w.Model, Created: w.Created}
	a.Parts = chatDetailParts(m.ReasoningDetails)
	if len(m.ReasoningDetails) == 0 {
		for _, rc := range [...]*string{m.ReasoningContent, m.Reasoning} {
			if rc != nil && *rc != "" {
				a.Parts = append(a.Parts, Part{Type: Thinking, Text: *rc})
				break
			}
		}
	}
	if !chatIsNull(m.Content) {
		var text string
		if err := json.Unmarshal(m.Content, &text); err != nil {
			return nil, malformed("choices[0].message.content is not a string")
		}
		if text != "" {
			a.Parts = append(a.Parts, Part{Type: Text, Text: text})
		}
	}
	if m.Refusal != nil && *m.Refusal != "" {
		a.Parts = append(a.Parts, Part{Type: Text, Text: *m.Refusal})
	}
	calls := 0
	for j := range m.ToolCalls {
		p, err := chatAnswerCall(&m.ToolCalls[j], j, &calls)
		if err != nil {
			return nil, err
		}
		a.Parts = append(a.Parts, p)
	}
	var reason string
	if c.FinishReason != nil {
		reason = *c.FinishReason
	}
	a.Finish = chatFinishIn(reason, len(m.ToolCalls) > 0)
	if w.Usage != nil {
		u, err := w.Usage.usage()
		if err != nil {
			return nil, err
		}
		a.Usage, a.HasUsage = u, true
	}
	return a, nil
}

// chatAnswerCall is an answer's tool call j; one without an id gets
// "call_<n>", n counting such calls from 0.
func chatAnswerCall(tc *chatToolCallWire, j int, generated *int) (Part, error) {
	at := "choices[0].message.tool_calls[" + strconv.Itoa(j) + "]"
	if tc.Type != "" && tc.Type != "function" {
		return Part{}, malformed("%s.type is not \"function\"", at)
	}
	if tc.Function.Name == "" {
		return Part{}, malformed("%s.function.name is missing", at)
	}
	args, ok := chatArguments(tc.Function.Arguments)
	if !ok {
		return Part{}, malformed("%s.function.arguments is not a string", at)
	}
	id := tc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(*generated)
		*generated++
	}
	return Part{Type: ToolCall, ID: id, Name: tc.Function.Name, Arguments: args, Signature: tc.ExtraContent.signature()}, nil
}

// chatMalformedJSON is what decoding an upstream's JSON found wrong, as an
// ErrMalformed naming the field but never quoting the value.
func chatMalformedJSON(what string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return malformed("%s: %s is not %s", what, te.Field, chatJSONType(te.Type.Kind().String()))
	}
	return malformed("%s is not a JSON object of the chat shape", what)
}

// chatAnswerOut is the chat.completion chatWriteAnswer writes.
type chatAnswerOut struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int64            `json:"created"`
	Model   string           `json:"model"`
	Choices [1]chatChoiceOut `json:"choices"`
	Usage   json.RawMessage  `json:"usage,omitempty"`
}

type chatChoiceOut struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

// chatWriteAnswer writes a as the chat.completion a chat caller of r
// reads: its id made from the upstream's, the model the caller asked for
// (the upstream's when it named none), content null when there is no
// text, thinking as reasoning_content and reasoning_details, usage in
// chat's convention.
func chatWriteAnswer(a *Answer, r *Request) ([]byte, error) {
	if r == nil {
		r = &Request{}
	}
	out := chatAnswerOut{
		ID:      CallerID("chatcmpl-", a.ID),
		Object:  "chat.completion",
		Created: a.Created,
		Model:   r.Model,
	}
	if out.Model == "" {
		out.Model = a.Model
	}
	if out.Created == 0 {
		out.Created = chatNow()
	}
	var kept []Part
	hasText := false
	for _, p := range a.Parts {
		switch p.Type {
		case Text:
			hasText = hasText || p.Text != ""
			kept = append(kept, p)
		case Thinking, RedactedThinking, ToolCall:
			kept = append(kept, p)
		}
	}
	msg, err := chatAssistantOut(kept)
	if err != nil {
		return nil, err
	}
	if !hasText {
		msg.Content = nil
	}
	out.Choices[0] = chatChoiceOut{Message: msg, FinishReason: chatFinishOut(a.Finish)}
	if a.HasUsage {
		out.Usage = chatAppendUsage(nil, a.Usage)
	}
	return chatMarshal(&out)
}

package xlate

import (
	"encoding/json"
	"errors"
	"strconv"
)

// msgAnswerWire is a message object: an Anthropic upstream's answer, or
// the message of a stream's message_start.
type msgAnswerWire struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Model        string          `json:"model"`
	Content      *[]msgBlockWire `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *msgUsageWire   `json:"usage"`
}

// msgParseAnswer reads an Anthropic upstream's message. A content block
// the gateway never asks for (server tools' blocks) is malformed: it
// cannot be shown to a caller of another shape.
func msgParseAnswer(body []byte) (*Answer, error) {
	var w msgAnswerWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, msgMalformedJSON("message", err)
	}
	if w.Type != "message" || w.Content == nil {
		return nil, malformed("not a message object")
	}
	a := &Answer{ID: w.ID, Model: w.Model, Parts: make([]Part, 0, len(*w.Content)), Finish: FinishStop}
	for i := range *w.Content {
		p, err := msgAnswerPart(i, &(*w.Content)[i])
		if err != nil {
			return nil, err
		}
		a.Parts = append(a.Parts, p)
	}
	if w.StopReason != nil {
		a.Finish = msgFinish(*w.StopReason)
	}
	if a.Finish == FinishStopSequence && w.StopSequence != nil {
		a.StopSequence = *w.StopSequence
	}
	if w.Usage != nil {
		var st msgUsageState
		if err := st.merge(w.Usage); err != nil {
			return nil, err
		}
		u, err := st.usage()
		if err != nil {
			return nil, err
		}
		a.Usage, a.HasUsage = u, true
	}
	return a, nil
}

// msgAnswerPart is the part of one content block of an answer.
func msgAnswerPart(i int, b *msgBlockWire) (Part, error) {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	switch b.Type {
	case "text":
		return Part{Type: Text, Text: str(b.Text)}, nil
	case "thinking":
		return Part{Type: Thinking, Text: str(b.Thinking), Signature: b.Signature}, nil
	case "redacted_thinking":
		return Part{Type: RedactedThinking, Data: str(b.Data)}, nil
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			return Part{}, malformed("content[%d]: a tool_use block without id or name", i)
		}
		raw := string(b.Input)
		if msgAbsent(b.Input) {
			raw = ""
		}
		args, ok := msgAppendObject(nil, raw)
		if !ok {
			return Part{}, malformed("content[%d]: a tool_use input that is not a JSON object", i)
		}
		return Part{Type: ToolCall, ID: b.ID, Name: b.Name, Arguments: string(args)}, nil
	}
	return Part{}, malformed("content[%d]: a %s block cannot be translated", i, msgQuote(b.Type))
}

// msgMalformedJSON describes a decoding error of an upstream's JSON by
// field or offset, never quoting it.
func msgMalformedJSON(what string, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return malformed("%s: %s %s", what, te.Field, msgWant(te.Type))
	case errors.As(err, &se):
		return malformed("%s: invalid JSON at byte %d", what, se.Offset)
	}
	return malformed("%s: cannot be read", what)
}

// msgWriteAnswer writes a as the message a Messages caller receives: the
// model it asked for, its usage in the Messages convention.
func msgWriteAnswer(a *Answer, r *Request) ([]byte, error) {
	b := make([]byte, 0, 256+msgPartsSize(a.Parts))
	b = append(b, `{"id":`...)
	b = appendString(b, CallerID("msg_", a.ID))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, msgModel(r, a.Model))
	b = append(b, `,"content":[`...)
	first := true
	for i := range a.Parts {
		p := &a.Parts[i]
		if p.Type != Text && p.Type != Thinking && p.Type != RedactedThinking && p.Type != ToolCall {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if p.Type != ToolCall {
			b, _ = msgAppendBlock(b, p, "")
			continue
		}
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendString(b, callIDWithSig(p.ID, p.Signature))
		b = append(b, `,"name":`...)
		b = appendString(b, p.Name)
		b = append(b, `,"input":`...)
		var ok bool
		if b, ok = msgAppendObject(b, p.Arguments); !ok {
			return nil, malformed("the arguments of tool call %s are not a JSON object", strconv.Quote(msgClip(p.ID)))
		}
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	b = appendString(b, msgStopReason(a.Finish))
	b = append(b, `,"stop_sequence":`...)
	b = msgAppendStopSequence(b, a.Finish, a.StopSequence)
	b = append(b, `,"usage":`...)
	b = msgAppendUsage(b, &a.Usage, true)
	return append(b, '}'), nil
}

// msgAppendStopSequence appends the matched stop sequence, or null.
func msgAppendStopSequence(b []byte, finish, seq string) []byte {
	if finish != FinishStopSequence {
		return append(b, "null"...)
	}
	return appendString(b, seq)
}

// msgModel is the model a caller sees: the one it asked for, else the
// upstream's.
func msgModel(r *Request, upstream string) string {
	if r != nil && r.Model != "" {
		return r.Model
	}
	return upstream
}

// msgPartsSize is about the bytes the parts take as JSON.
func msgPartsSize(parts []Part) int {
	n := 0
	for i := range parts {
		p := &parts[i]
		n += 64 + len(p.Text) + len(p.Signature) + len(p.Data) + len(p.Arguments) + len(p.ID) + len(p.Name)
	}
	return n
}

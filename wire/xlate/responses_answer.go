package xlate

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// respEcho is what a response object repeats of the caller's request,
// rendered once: a before the model, b between output and usage, c after
// usage (the order of OpenAI's documented Response object).
type respEcho struct {
	a, b, c []byte
}

// respHead is what identifies a response object.
type respHead struct {
	id      string
	created int64
	model   string
}

// respMakeEcho renders the fields of r a response object repeats, so that
// SDKs and Codex find every field they read.
func respMakeEcho(r *Request) *respEcho {
	e := &respEcho{}
	e.a = append(e.a, `"instructions":`...)
	e.a = respAppendStringOrNull(e.a, strings.Join(r.System, "\n\n"))
	e.a = append(e.a, `,"max_output_tokens":`...)
	if r.MaxTokens > 0 {
		e.a = strconv.AppendInt(e.a, r.MaxTokens, 10)
	} else {
		e.a = append(e.a, "null"...)
	}
	e.a = append(e.a, ',')

	e.b = append(e.b, `"parallel_tool_calls":`...)
	e.b = respAppendBool(e.b, r.ParallelToolCalls == nil || *r.ParallelToolCalls)
	e.b = append(e.b, `,"previous_response_id":null,"reasoning":`...)
	e.b = respAppendReasoning(e.b, r.Reasoning)
	e.b = append(e.b, `,"store":false,"temperature":`...)
	e.b = respAppendRaw(e.b, r.Temperature)
	e.b = append(e.b, `,"text":{"format":`...)
	e.b = respAppendFormat(e.b, r.Format)
	e.b = append(e.b, `},"tool_choice":`...)
	e.b = respAppendToolChoice(e.b, r.ToolChoice, respCustomNames(r))
	e.b = append(e.b, `,"tools":`...)
	e.b = respAppendTools(e.b, r.Tools)
	e.b = append(e.b, `,"top_p":`...)
	e.b = respAppendRaw(e.b, r.TopP)
	e.b = append(e.b, `,"truncation":"disabled",`...)

	e.c = append(e.c, `"user":`...)
	e.c = respAppendStringOrNull(e.c, r.User)
	e.c = append(e.c, `,"metadata":`...)
	meta, err := json.Marshal(r.Metadata)
	if r.Metadata == nil || err != nil {
		meta = []byte("{}")
	}
	e.c = append(e.c, meta...)
	return e
}

// respAppendReasoning appends the reasoning object: the effort asked for
// (an Anthropic or Gemini budget mapped to its effort) and the summary.
func respAppendReasoning(dst []byte, re *Reasoning) []byte {
	var effort, summary string
	if re != nil {
		summary = re.Summary
		switch {
		case re.Off:
			effort = "none"
		case re.Effort != "":
			effort = re.Effort
		case re.Budget > 8192:
			effort = "high"
		case re.Budget > 2048:
			effort = "medium"
		case re.Budget > 0:
			effort = "low"
		}
	}
	dst = append(dst, `{"effort":`...)
	dst = respAppendStringOrNull(dst, effort)
	dst = append(dst, `,"summary":`...)
	dst = respAppendStringOrNull(dst, summary)
	return append(dst, '}')
}

// respAppendFormat appends text.format.
func respAppendFormat(dst []byte, f *Format) []byte {
	switch {
	case f == nil:
		return append(dst, `{"type":"text"}`...)
	case f.Type == "json_schema":
		dst = append(dst, `{"type":"json_schema","name":`...)
		dst = appendString(dst, f.Name)
		dst = append(dst, `,"schema":`...)
		dst = respAppendRaw(dst, f.Schema)
		dst = append(dst, `,"strict":`...)
		dst = respAppendBool(dst, f.Strict)
		return append(dst, '}')
	}
	return append(dst, `{"type":"json_object"}`...)
}

// respAppendToolChoice appends tool_choice ("auto" when none was named).
func respAppendToolChoice(dst []byte, c *ToolChoice, custom map[string]bool) []byte {
	switch {
	case c == nil:
		return append(dst, `"auto"`...)
	case c.Mode == ChoiceTool && custom[c.Name]:
		dst = append(dst, `{"type":"custom","name":`...)
		dst = appendString(dst, c.Name)
		return append(dst, '}')
	case c.Mode == ChoiceTool:
		dst = append(dst, `{"type":"function","name":`...)
		dst = appendString(dst, c.Name)
		return append(dst, '}')
	}
	return appendString(dst, c.Mode)
}

// respAppendTools appends the function and custom tools.
func respAppendTools(dst []byte, tools []Tool) []byte {
	dst = append(dst, '[')
	for i, t := range tools {
		if i > 0 {
			dst = append(dst, ',')
		}
		if t.Custom {
			dst = append(dst, `{"type":"custom","name":`...)
			dst = appendString(dst, t.Name)
			dst = append(dst, `,"description":`...)
			dst = respAppendStringOrNull(dst, t.Description)
			dst = append(dst, '}')
			continue
		}
		dst = append(dst, `{"type":"function","name":`...)
		dst = appendString(dst, t.Name)
		dst = append(dst, `,"description":`...)
		dst = respAppendStringOrNull(dst, t.Description)
		dst = append(dst, `,"parameters":`...)
		dst = respAppendRaw(dst, t.Parameters)
		dst = append(dst, `,"strict":`...)
		dst = respAppendBool(dst, t.Strict)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// respAppendResponse appends a whole response object: output is its items,
// already joined with commas; errObj (JSON) is null when nil, as are an
// empty incomplete reason and a nil usage.
func respAppendResponse(dst []byte, e *respEcho, h *respHead, status string, errObj []byte, incomplete string, output []byte, u *Usage) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, h.id)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, h.created, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","error":`...)
	if errObj == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, errObj...)
	}
	dst = append(dst, `,"incomplete_details":`...)
	if incomplete == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"reason":"`...)
		dst = append(dst, incomplete...)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, ',')
	dst = append(dst, e.a...)
	dst = append(dst, `"model":`...)
	dst = appendString(dst, h.model)
	dst = append(dst, `,"output":[`...)
	dst = append(dst, output...)
	dst = append(dst, "],"...)
	dst = append(dst, e.b...)
	dst = append(dst, `"usage":`...)
	dst = respAppendUsage(dst, u)
	dst = append(dst, ',')
	dst = append(dst, e.c...)
	return append(dst, '}')
}

// respAppendUsage appends usage in the responses convention: input_tokens
// count every prompt token, cache reads among them.
func respAppendUsage(dst []byte, u *Usage) []byte {
	if u == nil {
		return append(dst, "null"...)
	}
	in := u.PromptTotal()
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, in, 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheRead, 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.Reasoning, 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, in+u.Output, 10)
	return append(dst, '}')
}

// respStatus is a response's status and incomplete reason for a finish.
func respStatus(finish string) (status, incomplete string) {
	switch finish {
	case FinishLength:
		return "incomplete", "max_output_tokens"
	case FinishContentFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// respAppendMessageItem appends an assistant message item: completed with
// its one output_text, or in progress with no content yet.
func respAppendMessageItem(dst []byte, id string, done bool, text string) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, id...)
	if !done {
		return append(dst, `","type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	}
	dst = append(dst, `","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":`...)
	dst = appendString(dst, text)
	return append(dst, `,"annotations":[]}]}`...)
}

// respAppendCallItem appends a function_call item.
func respAppendCallItem(dst []byte, id string, done bool, callID, name, args string) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, id...)
	if done {
		dst = append(dst, `","type":"function_call","status":"completed","arguments":`...)
	} else {
		dst = append(dst, `","type":"function_call","status":"in_progress","arguments":`...)
	}
	dst = appendString(dst, args)
	dst = append(dst, `,"call_id":`...)
	dst = appendString(dst, callID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, name)
	return append(dst, '}')
}

// respAppendCustomItem appends a custom_tool_call item: a call of a
// custom tool with its input (in progress: none yet).
func respAppendCustomItem(dst []byte, id string, done bool, callID, name, input string) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, id...)
	if done {
		dst = append(dst, `","type":"custom_tool_call","status":"completed","call_id":`...)
	} else {
		dst = append(dst, `","type":"custom_tool_call","status":"in_progress","call_id":`...)
	}
	dst = appendString(dst, callID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, name)
	dst = append(dst, `,"input":`...)
	dst = appendString(dst, input)
	return append(dst, '}')
}

// respAppendReasoningItem appends a reasoning item: its summary texts and,
// when there is one, its encrypted_content.
func respAppendReasoningItem(dst []byte, id string, summary []string, enc string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"type":"reasoning","summary":[`...)
	for i, s := range summary {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"summary_text","text":`...)
		dst = appendString(dst, s)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if enc != "" {
		dst = append(dst, `,"encrypted_content":`...)
		dst = appendString(dst, enc)
	}
	return append(dst, '}')
}

// respEncodeThinking is the encrypted_content of a reasoning item made
// from a run of thinking blocks: "mrx1." and the blocks, texts and
// signatures unchanged, so that they go back to the upstream that signed
// them when the caller sends the item again (respReasoningParts).
func respEncodeThinking(ts []respThought) string {
	js := []byte{'['}
	for i, t := range ts {
		if i > 0 {
			js = append(js, ',')
		}
		if t.T == "redacted" {
			js = append(js, `{"t":"redacted","d":`...)
			js = appendString(js, t.D)
		} else {
			js = append(js, `{"t":"thinking","x":`...)
			js = appendString(js, t.X)
			js = append(js, `,"s":`...)
			js = appendString(js, t.S)
		}
		js = append(js, '}')
	}
	js = append(js, ']')
	return respMRX + base64.RawURLEncoding.EncodeToString(js)
}

// respWriteAnswer writes an answer as the response object a responses
// caller expects.
func respWriteAnswer(a *Answer, r *Request) ([]byte, error) {
	if r == nil {
		r = &Request{}
	}
	h := respHead{id: CallerID("resp_", a.ID), created: a.Created, model: r.Model}
	if h.created == 0 {
		h.created = respNow()
	}
	if h.model == "" {
		h.model = a.Model
	}
	var u *Usage
	if a.HasUsage {
		u = &a.Usage
	}
	status, incomplete := respStatus(a.Finish)
	out := respAnswerOutput(a.Parts, respCustomNames(r))
	return respAppendResponse(nil, respMakeEcho(r), &h, status, nil, incomplete, out, u), nil
}

// respAnswerOutput renders an answer's parts as output items, in order: a
// run of thinking parts as one reasoning item, a run of texts as one
// message, each tool call as a function_call (a custom_tool_call when it
// calls one of custom).
func respAnswerOutput(parts []Part, custom map[string]bool) []byte {
	var (
		out      []byte
		thoughts []respThought
		summary  []string
		text     strings.Builder
	)
	add := func(item []byte) {
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(out, item...)
	}
	flush := func() {
		if len(thoughts) > 0 {
			add(respAppendReasoningItem(nil, "rs_"+respHex(), summary, respEncodeThinking(thoughts)))
			thoughts, summary = nil, nil
		}
		if text.Len() > 0 {
			add(respAppendMessageItem(nil, "msg_"+respHex(), true, text.String()))
			text.Reset()
		}
	}
	for _, p := range parts {
		switch p.Type {
		case Thinking, RedactedThinking:
			if text.Len() > 0 {
				flush()
			}
			thoughts = append(thoughts, respThoughtOf(p.Type, p.Text, p.Signature, p.Data))
			if p.Type == Thinking && p.Text != "" {
				summary = append(summary, p.Text)
			}
		case Text:
			if len(thoughts) > 0 {
				flush()
			}
			text.WriteString(p.Text)
		case ToolCall:
			flush()
			if custom[p.Name] {
				add(respAppendCustomItem(nil, "ctc_"+respHex(), true, callIDWithSig(p.ID, p.Signature), p.Name, respCustomInput(p.Arguments)))
			} else {
				add(respAppendCallItem(nil, "fc_"+respHex(), true, callIDWithSig(p.ID, p.Signature), p.Name, respArguments(p.Arguments)))
			}
		case ReasoningItem:
			flush()
			add(respAppendReasoningItem(nil, respOr(p.ID, "rs_"), respSummaryOf(p.Text), p.Data))
		}
	}
	flush()
	return out
}

// respThoughtOf is one block of an "mrx1." reasoning item.
func respThoughtOf(t PartType, text, sig, data string) respThought {
	if t == RedactedThinking {
		return respThought{T: "redacted", D: data}
	}
	return respThought{T: "thinking", X: text, S: sig}
}

// respArguments is a function call's arguments: "{}" for none, which is
// what a call without parameters takes.
func respArguments(args string) string {
	if args == "" {
		return "{}"
	}
	return args
}

// respOr is id, or a new id with prefix when it is empty.
func respOr(id, prefix string) string {
	if id == "" {
		return prefix + respHex()
	}
	return id
}

// respSummaryOf is the summary of a ReasoningItem part: its text, if any.
func respSummaryOf(text string) []string {
	if text == "" {
		return nil
	}
	return []string{text}
}

package xlate

import (
	"fmt"
	"strconv"
	"strings"
)

// msgBuildRequest writes r as a Messages request body for an Anthropic
// upstream. What the Messages API cannot take is left out: OpenAI-style
// Metadata (only the user id has a field), ReasoningItem parts (OpenAI's
// encrypted reasoning), Thinking parts without a signature (never signed
// by Anthropic), and empty text (Anthropic refuses empty text blocks).
// When thinking is on, temperature, top_p and top_k are left out
// (Anthropic refuses them beside thinking); thinking is turned off when a
// tool_choice forces a tool, or when the last assistant turn calls tools
// without signed thinking first (Anthropic refuses both).
func msgBuildRequest(r *Request) ([]byte, error) {
	maxTokens := r.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, maxTokens, 10)
	if sys := msgJoinSystem(r.System); sys != "" {
		b = append(b, `,"system":`...)
		b = appendString(b, sys)
	}
	b, err := msgBuildMessages(b, r.Messages)
	if err != nil {
		return nil, err
	}
	if b, err = msgBuildTools(b, r); err != nil {
		return nil, err
	}
	budget := msgThinkingBudget(r, maxTokens)
	if budget == 0 {
		for _, f := range [...]struct {
			name string
			raw  []byte
		}{{"temperature", r.Temperature}, {"top_p", r.TopP}, {"top_k", r.TopK}} {
			if b, err = msgAppendNumber(b, f.name, f.raw); err != nil {
				return nil, err
			}
		}
	}
	if len(r.Stop) > 0 {
		b = append(b, `,"stop_sequences":[`...)
		for i, s := range r.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	if r.User != "" {
		b = append(b, `,"metadata":{"user_id":`...)
		b = appendString(b, r.User)
		b = append(b, '}')
	}
	if budget > 0 {
		b = append(b, `,"thinking":{"type":"enabled","budget_tokens":`...)
		b = strconv.AppendInt(b, budget, 10)
		b = append(b, '}')
	}
	if b, err = msgBuildFormat(b, r.Format); err != nil {
		return nil, err
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	return append(b, '}'), nil
}

// msgJoinSystem is the system strings joined by blank lines, empty ones
// left out.
func msgJoinSystem(system []string) string {
	var b strings.Builder
	for _, s := range system {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	return b.String()
}

// msgThinkingBudget is the budget_tokens to ask for, 0 for none: the
// caller's budget or its effort's, below max_tokens, and at least the
// 1024 Anthropic requires.
func msgThinkingBudget(r *Request, maxTokens int64) int64 {
	re := r.Reasoning
	if re == nil || re.Off {
		return 0
	}
	if c := r.ToolChoice; c != nil && len(r.Tools) > 0 && (c.Mode == ChoiceRequired || c.Mode == ChoiceTool) {
		return 0
	}
	if msgUnsignedToolTurn(r.Messages) {
		return 0
	}
	budget := re.Budget
	if budget <= 0 {
		budget = msgEffortBudget(re.Effort)
	}
	budget = min(budget, maxTokens-1)
	if budget < 1024 {
		return 0
	}
	return budget
}

// msgUnsignedToolTurn reports whether the last assistant turn (consecutive
// assistant messages, as they are merged) calls tools without starting
// with thinking Anthropic signed: with thinking on, Anthropic refuses such
// a turn, which callers of other shapes send in every tool loop.
func msgUnsignedToolTurn(msgs []Message) bool {
	first, calls, seen := (*Part)(nil), false, false
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if !msgHasWritable(m) {
			continue
		}
		if m.Role != RoleAssistant {
			if seen {
				break
			}
			continue
		}
		seen = true
		for j := len(m.Parts) - 1; j >= 0; j-- {
			if p := &m.Parts[j]; msgWritable(p) {
				first, calls = p, calls || p.Type == ToolCall
			}
		}
	}
	return calls && first.Type != Thinking && first.Type != RedactedThinking
}

// msgHasWritable reports whether a message has a part a Messages request
// takes.
func msgHasWritable(m *Message) bool {
	for j := range m.Parts {
		if msgWritable(&m.Parts[j]) {
			return true
		}
	}
	return false
}

// msgEffortBudget is the thinking budget of an OpenAI effort; 0 for
// "none" and efforts it does not know.
func msgEffortBudget(effort string) int64 {
	switch effort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "medium":
		return 8192
	case "high", "xhigh":
		return 16384
	}
	return 0
}

// msgAppendNumber appends ,"name":raw when raw is given; raw must be a
// JSON number.
func msgAppendNumber(b []byte, name string, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return b, nil
	}
	if !msgIsNumber(raw) {
		return nil, &Invalid{Field: name, Msg: "must be a number"}
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return append(b, raw...), nil
}

// msgIsNumber reports whether raw is exactly one JSON number.
func msgIsNumber(raw []byte) bool {
	i, n := 0, len(raw)
	digits := func() bool {
		start := i
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < n && raw[i] == '-' {
		i++
	}
	if i < n && raw[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if i < n && raw[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < n && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < n && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == n
}

// msgBuildMessages appends "messages": the turns that have something
// Anthropic takes, consecutive turns of one role merged into one, a user
// turn's tool results first.
func msgBuildMessages(b []byte, msgs []Message) ([]byte, error) {
	b = append(b, `,"messages":[`...)
	kept := make([]int, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return nil, &Invalid{Field: fmt.Sprintf("messages[%d].role", i), Msg: `must be "user" or "assistant"`}
		}
		if msgHasWritable(m) {
			kept = append(kept, i)
		}
	}
	for g := 0; g < len(kept); {
		end := g + 1
		for end < len(kept) && msgs[kept[end]].Role == msgs[kept[g]].Role {
			end++
		}
		if g > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = msgBuildTurn(b, msgs, kept[g:end]); err != nil {
			return nil, err
		}
		g = end
	}
	return append(b, ']'), nil
}

// msgWritable reports whether a part becomes a block of a Messages
// request.
func msgWritable(p *Part) bool {
	switch p.Type {
	case Text:
		return p.Text != ""
	case Thinking:
		return p.Signature != ""
	case Image, ToolCall, ToolResult, RedactedThinking:
		return true
	}
	return false
}

// msgBuildTurn appends one message made of the messages at idx, all of one
// role: tool results first, then the rest in order.
func msgBuildTurn(b []byte, msgs []Message, idx []int) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = appendString(b, msgs[idx[0]].Role)
	b = append(b, `,"content":[`...)
	first := true
	for pass := 0; pass < 2; pass++ {
		for _, i := range idx {
			for j := range msgs[i].Parts {
				p := &msgs[i].Parts[j]
				if !msgWritable(p) || (p.Type == ToolResult) != (pass == 0) {
					continue
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				var err error
				if b, err = msgAppendBlock(b, p, fmt.Sprintf("messages[%d].parts[%d]", i, j)); err != nil {
					return nil, err
				}
			}
		}
	}
	return append(b, ']', '}'), nil
}

// msgAppendBlock appends the content block of a writable part; path names
// the part in errors.
func msgAppendBlock(b []byte, p *Part, path string) ([]byte, error) {
	switch p.Type {
	case Text:
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, p.Text)
		return append(b, '}'), nil
	case Image:
		return msgAppendImage(b, p, path)
	case ToolCall:
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendString(b, p.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, p.Name)
		b = append(b, `,"input":`...)
		b, ok := msgAppendObject(b, p.Arguments)
		if !ok {
			return nil, &Invalid{Field: "the arguments of tool call " + strconv.Quote(msgClip(p.ID)), Msg: "must be a JSON object"}
		}
		return append(b, '}'), nil
	case ToolResult:
		return msgAppendResult(b, p, path)
	case Thinking:
		b = append(b, `{"type":"thinking","thinking":`...)
		b = appendString(b, p.Text)
		b = append(b, `,"signature":`...)
		b = appendString(b, p.Signature)
		return append(b, '}'), nil
	}
	b = append(b, `{"type":"redacted_thinking","data":`...)
	b = appendString(b, p.Data)
	return append(b, '}'), nil
}

// msgAppendResult appends a tool_result block: its text and images as
// blocks.
func msgAppendResult(b []byte, p *Part, path string) ([]byte, error) {
	b = append(b, `{"type":"tool_result","tool_use_id":`...)
	b = appendString(b, p.ID)
	first := true
	for k := range p.Content {
		c := &p.Content[k]
		if (c.Type != Text || c.Text == "") && c.Type != Image {
			continue
		}
		if first {
			b = append(b, `,"content":[`...)
		} else {
			b = append(b, ',')
		}
		first = false
		var err error
		if b, err = msgAppendBlock(b, c, fmt.Sprintf("%s.content[%d]", path, k)); err != nil {
			return nil, err
		}
	}
	if !first {
		b = append(b, ']')
	}
	if p.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}'), nil
}

// msgAppendImage appends an image block: base64 data (a data: URL is
// read as such) or a URL.
func msgAppendImage(b []byte, p *Part, path string) ([]byte, error) {
	mediaType, data, url := p.MediaType, p.Data, p.URL
	if data == "" && strings.HasPrefix(url, "data:") {
		head, payload, ok := strings.Cut(url[len("data:"):], ",")
		mt, isBase64 := strings.CutSuffix(head, ";base64")
		if !ok || !isBase64 || mt == "" {
			return nil, &Invalid{Field: path + ".url", Msg: "a data URL must be base64 with a media type"}
		}
		mediaType, data, url = mt, payload, ""
	}
	switch {
	case data != "":
		if mediaType == "" {
			return nil, &Invalid{Field: path + ".media_type", Msg: "is required with base64 data"}
		}
		b = append(b, `{"type":"image","source":{"type":"base64","media_type":`...)
		b = appendString(b, mediaType)
		b = append(b, `,"data":`...)
		b = appendString(b, data)
	case url != "":
		b = append(b, `{"type":"image","source":{"type":"url","url":`...)
		b = appendString(b, url)
	default:
		return nil, &Invalid{Field: path, Msg: "an image needs data or a URL"}
	}
	return append(b, '}', '}'), nil
}

// msgBuildTools appends tools and tool_choice (only with tools: Anthropic
// refuses a tool_choice without them).
func msgBuildTools(b []byte, r *Request) ([]byte, error) {
	if len(r.Tools) == 0 {
		return b, nil
	}
	b = append(b, `,"tools":[`...)
	for i := range r.Tools {
		t := &r.Tools[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, t.Description)
		}
		b = append(b, `,"input_schema":`...)
		if len(t.Parameters) == 0 {
			b = append(b, `{"type":"object","properties":{}}`...)
		} else {
			var ok bool
			if b, ok = msgAppendObject(b, string(t.Parameters)); !ok {
				return nil, &Invalid{Field: fmt.Sprintf("tools[%d].parameters", i), Msg: "must be a JSON object"}
			}
		}
		if t.Strict {
			b = append(b, `,"strict":true`...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return msgBuildChoice(b, r)
}

// msgBuildChoice appends tool_choice; parallel calls turned off is
// disable_parallel_tool_use on auto, any and tool.
func msgBuildChoice(b []byte, r *Request) ([]byte, error) {
	mode, name := ChoiceAuto, ""
	if r.ToolChoice != nil {
		mode, name = r.ToolChoice.Mode, r.ToolChoice.Name
	}
	serial := r.ParallelToolCalls != nil && !*r.ParallelToolCalls
	if r.ToolChoice == nil && !serial {
		return b, nil
	}
	switch mode {
	case ChoiceAuto:
		b = append(b, `,"tool_choice":{"type":"auto"`...)
	case ChoiceRequired:
		b = append(b, `,"tool_choice":{"type":"any"`...)
	case ChoiceTool:
		if name == "" {
			return nil, &Invalid{Field: "tool_choice.name", Msg: "is required"}
		}
		b = append(b, `,"tool_choice":{"type":"tool","name":`...)
		b = appendString(b, name)
	case ChoiceNone:
		return append(b, `,"tool_choice":{"type":"none"}`...), nil
	default:
		return nil, &Invalid{Field: "tool_choice", Msg: "unknown mode " + msgQuote(mode)}
	}
	if serial {
		b = append(b, `,"disable_parallel_tool_use":true`...)
	}
	return append(b, '}'), nil
}

// msgBuildFormat appends structured output as output_config.format (the
// generally available form, which needs no beta header): json_object is
// a schema of any object.
func msgBuildFormat(b []byte, f *Format) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	switch f.Type {
	case "json_schema":
		b = append(b, `,"output_config":{"format":{"type":"json_schema","schema":`...)
		var ok bool
		if b, ok = msgAppendObject(b, string(f.Schema)); !ok || len(f.Schema) == 0 {
			return nil, &Invalid{Field: "format.schema", Msg: "must be a JSON object"}
		}
		return append(b, '}', '}'), nil
	case "json_object":
		return append(b, `,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}`...), nil
	case "", "text":
		return b, nil
	}
	return nil, &Invalid{Field: "format.type", Msg: "unknown type " + msgQuote(f.Type)}
}

package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// msgRequestWire is a caller's Messages request body. Fields of the
// Messages API it does not name (service_tier, inference_geo and other
// hints that change no output) are ignored.
type msgRequestWire struct {
	Model         string            `json:"model"`
	System        json.RawMessage   `json:"system"`
	Messages      []json.RawMessage `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    *msgChoiceWire    `json:"tool_choice"`
	MaxTokens     *int64            `json:"max_tokens"`
	Temperature   json.RawMessage   `json:"temperature"`
	TopP          json.RawMessage   `json:"top_p"`
	TopK          json.RawMessage   `json:"top_k"`
	StopSequences []string          `json:"stop_sequences"`
	Metadata      *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
	Thinking     *msgThinkingWire `json:"thinking"`
	OutputFormat *msgFormatWire   `json:"output_format"`
	OutputConfig *struct {
		Format *msgFormatWire `json:"format"`
		Effort string         `json:"effort"`
	} `json:"output_config"`
	Stream bool `json:"stream"`
	// What only Anthropic runs: refused by name when given.
	MCPServers json.RawMessage `json:"mcp_servers"`
	Container  json.RawMessage `json:"container"`
}

type msgChoiceWire struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
}

type msgThinkingWire struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens"`
}

type msgFormatWire struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type msgMessageWire struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// OutputConfig of a system turn (Claude Code's per-turn control).
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
}

// msgBlockWire is any content block: of a request's messages, system and
// tool results, of an answer, or of a stream's content_block_start.
type msgBlockWire struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Source    json.RawMessage `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  *string         `json:"thinking"`
	Signature string          `json:"signature"`
	Data      *string         `json:"data"`
}

type msgSourceWire struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type msgToolWire struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      bool            `json:"strict"`
}

// msgParseRequest reads a caller's POST /v1/messages body.
func msgParseRequest(body []byte) (*Request, error) {
	var w msgRequestWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, msgInvalid("", err)
	}
	for _, f := range [...]struct {
		raw  json.RawMessage
		name string
	}{{w.MCPServers, "mcp_servers"}, {w.Container, "container"}} {
		if !msgAbsent(f.raw) {
			return nil, &Unsupported{Feature: f.name}
		}
	}
	r := &Request{Model: w.Model, Stop: w.StopSequences, Stream: w.Stream}
	var err error
	if r.System, err = msgParseSystem("system", w.System); err != nil {
		return nil, err
	}
	effort := ""
	if w.OutputConfig != nil {
		effort = w.OutputConfig.Effort
	}
	if r.Messages, err = msgParseMessages(r, w.Messages, &effort); err != nil {
		return nil, err
	}
	if r.Tools, err = msgParseTools(w.Tools); err != nil {
		return nil, err
	}
	if err = msgParseChoice(r, w.ToolChoice); err != nil {
		return nil, err
	}
	if err = msgParseSettings(r, &w, effort); err != nil {
		return nil, err
	}
	return r, nil
}

// msgParseSystem reads system (or a system turn's content, at field): a
// string or an array of text blocks, one string per block.
func msgParseSystem(field string, raw json.RawMessage) ([]string, error) {
	if msgAbsent(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, msgInvalid(field, err)
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var blocks []msgBlockWire
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, &Invalid{Field: field, Msg: "must be a string or an array of text blocks"}
	}
	out := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return nil, &Invalid{Field: fmt.Sprintf("%s[%d]", field, i), Msg: "must be a text block"}
		}
		out = append(out, *b.Text)
	}
	return out, nil
}

// msgParseMessages reads messages; a tool result is given the name of the
// earlier tool call it answers, when there is one. A system turn inside
// messages (Anthropic's mid-conversation system messages, which Claude
// Code sends) joins r.System: the neutral form holds instructions apart
// from the turns, as chat's system messages do. Its output_config.effort
// (Claude Code's per-turn control) replaces *effort.
func msgParseMessages(r *Request, raws []json.RawMessage, effort *string) ([]Message, error) {
	if len(raws) == 0 {
		return nil, &Invalid{Field: "messages", Msg: "must be a non-empty array"}
	}
	names := map[string]string{}
	out := make([]Message, 0, len(raws))
	for i, raw := range raws {
		path := fmt.Sprintf("messages[%d]", i)
		var m msgMessageWire
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, msgInvalid(path, err)
		}
		if m.Role == "system" {
			sys, err := msgParseSystem(path+".content", m.Content)
			if err != nil {
				return nil, err
			}
			r.System = append(r.System, sys...)
			if m.OutputConfig != nil && m.OutputConfig.Effort != "" {
				*effort = m.OutputConfig.Effort
			}
			continue
		}
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return nil, &Invalid{Field: path + ".role", Msg: `must be "user", "assistant" or "system"`}
		}
		parts, err := msgParseContent(path+".content", m.Role, m.Content, names)
		if err != nil {
			return nil, err
		}
		out = append(out, Message{Role: m.Role, Parts: parts})
	}
	return out, nil
}

// msgParseContent reads a message's content: a string or an array of
// blocks.
func msgParseContent(path, role string, raw json.RawMessage, names map[string]string) ([]Part, error) {
	if msgAbsent(raw) {
		return nil, &Invalid{Field: path, Msg: "is required"}
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, msgInvalid(path, err)
		}
		return []Part{{Type: Text, Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, &Invalid{Field: path, Msg: "must be a string or an array of content blocks"}
	}
	parts := make([]Part, 0, len(raws))
	for j, braw := range raws {
		p, err := msgParseBlock(fmt.Sprintf("%s[%d]", path, j), role, braw, names)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// msgRoles says which role's messages may hold each block type.
var msgRoles = map[string]string{
	"image": RoleUser, "tool_result": RoleUser,
	"tool_use": RoleAssistant, "thinking": RoleAssistant, "redacted_thinking": RoleAssistant,
}

// msgParseBlock reads one content block of a message.
func msgParseBlock(path, role string, raw json.RawMessage, names map[string]string) (Part, error) {
	b, err := msgDecodeBlock(path, raw)
	if err != nil {
		return Part{}, err
	}
	if want := msgRoles[b.Type]; want != "" && want != role {
		return Part{}, &Invalid{Field: path + ".type", Msg: fmt.Sprintf("a %s block must be in a %s message", b.Type, want)}
	}
	switch b.Type {
	case "text", "image":
		return msgParseMedia(path, b)
	case "tool_use":
		return msgParseToolUse(path, b, names)
	case "tool_result":
		id, _ := splitCallID(b.ToolUseID)
		p := Part{Type: ToolResult, ID: id, Name: names[id], IsError: b.IsError}
		if p.ID == "" {
			return Part{}, &Invalid{Field: path + ".tool_use_id", Msg: "is required"}
		}
		p.Content, err = msgParseResultContent(path+".content", b.Content)
		return p, err
	case "thinking":
		if b.Thinking == nil {
			return Part{}, &Invalid{Field: path + ".thinking", Msg: "is required"}
		}
		return Part{Type: Thinking, Text: *b.Thinking, Signature: b.Signature}, nil
	case "redacted_thinking":
		if b.Data == nil {
			return Part{}, &Invalid{Field: path + ".data", Msg: "is required"}
		}
		return Part{Type: RedactedThinking, Data: *b.Data}, nil
	}
	return Part{}, &Unsupported{Feature: "the " + msgQuote(b.Type) + " content block"}
}

// msgDecodeBlock decodes a block; a block of a type this package does not
// know is Unsupported, even when its fields do not fit msgBlockWire.
func msgDecodeBlock(path string, raw json.RawMessage) (*msgBlockWire, error) {
	var b msgBlockWire
	if err := json.Unmarshal(raw, &b); err != nil {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Type != "" && !msgKnownBlock(t.Type) {
			return nil, &Unsupported{Feature: "the " + msgQuote(t.Type) + " content block"}
		}
		return nil, msgInvalid(path, err)
	}
	if b.Type == "" {
		return nil, &Invalid{Field: path + ".type", Msg: "is required"}
	}
	return &b, nil
}

func msgKnownBlock(t string) bool {
	return t == "text" || msgRoles[t] != ""
}

// msgParseMedia reads a text or an image block (of a message or of a tool
// result's content).
func msgParseMedia(path string, b *msgBlockWire) (Part, error) {
	if b.Type == "text" {
		if b.Text == nil {
			return Part{}, &Invalid{Field: path + ".text", Msg: "is required"}
		}
		return Part{Type: Text, Text: *b.Text}, nil
	}
	path += ".source"
	if msgAbsent(b.Source) {
		return Part{}, &Invalid{Field: path, Msg: "is required"}
	}
	var s msgSourceWire
	if err := json.Unmarshal(b.Source, &s); err != nil {
		return Part{}, msgInvalid(path, err)
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" || s.Data == "" {
			return Part{}, &Invalid{Field: path, Msg: "a base64 source needs media_type and data"}
		}
		return Part{Type: Image, MediaType: s.MediaType, Data: s.Data}, nil
	case "url":
		if s.URL == "" {
			return Part{}, &Invalid{Field: path + ".url", Msg: "is required"}
		}
		return Part{Type: Image, URL: s.URL}, nil
	case "file":
		return Part{}, &Unsupported{Feature: "an image given by file_id"}
	}
	return Part{}, &Invalid{Field: path + ".type", Msg: `must be "base64" or "url"`}
}

// msgParseToolUse reads a tool_use block: its input, a JSON object, is
// the call's arguments, compacted; a signature its id carries
// (callIDWithSig) is the call's again.
func msgParseToolUse(path string, b *msgBlockWire, names map[string]string) (Part, error) {
	switch {
	case b.ID == "":
		return Part{}, &Invalid{Field: path + ".id", Msg: "is required"}
	case b.Name == "":
		return Part{}, &Invalid{Field: path + ".name", Msg: "is required"}
	case msgAbsent(b.Input):
		return Part{}, &Invalid{Field: path + ".input", Msg: "is required"}
	}
	args, ok := msgAppendObject(nil, string(b.Input))
	if !ok {
		return Part{}, &Invalid{Field: path + ".input", Msg: "must be a JSON object"}
	}
	id, sig := splitCallID(b.ID)
	names[id] = b.Name
	return Part{Type: ToolCall, ID: id, Name: b.Name, Arguments: string(args), Signature: sig}, nil
}

// msgParseResultContent reads a tool_result's content: absent, a string,
// or an array of text and image blocks.
func msgParseResultContent(path string, raw json.RawMessage) ([]Part, error) {
	if msgAbsent(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, msgInvalid(path, err)
		}
		return []Part{{Type: Text, Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, &Invalid{Field: path, Msg: "must be a string or an array of content blocks"}
	}
	parts := make([]Part, 0, len(raws))
	for j, braw := range raws {
		bpath := fmt.Sprintf("%s[%d]", path, j)
		b, err := msgDecodeBlock(bpath, braw)
		if err != nil {
			return nil, err
		}
		if b.Type != "text" && b.Type != "image" {
			return nil, &Unsupported{Feature: "the " + msgQuote(b.Type) + " content block in a tool_result"}
		}
		p, err := msgParseMedia(bpath, b)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// msgParseTools reads tools: custom tools only; Anthropic's own server
// and client tools (web search, bash, the text editor, computer use, code
// execution, ...) run on Anthropic's side or follow Anthropic's schemas
// and are refused by type. The tool search tool is left out, and the
// tools it would have loaded on demand (defer_loading) are given in full:
// the model sees every tool from the start, as without tool search.
func msgParseTools(raws []json.RawMessage) ([]Tool, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	out := make([]Tool, 0, len(raws))
	for i, raw := range raws {
		path := fmt.Sprintf("tools[%d]", i)
		var t msgToolWire
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, msgInvalid(path, err)
		}
		if strings.HasPrefix(t.Type, "tool_search_tool_") {
			continue
		}
		if t.Type != "" && t.Type != "custom" {
			return nil, &Unsupported{Feature: "the " + msgQuote(t.Type) + " tool"}
		}
		if t.Name == "" {
			return nil, &Invalid{Field: path + ".name", Msg: "is required"}
		}
		tool := Tool{Name: t.Name, Description: t.Description, Strict: t.Strict}
		if !msgAbsent(t.InputSchema) {
			if t.InputSchema[0] != '{' {
				return nil, &Invalid{Field: path + ".input_schema", Msg: "must be a JSON object"}
			}
			tool.Parameters = t.InputSchema
		}
		out = append(out, tool)
	}
	return out, nil
}

// msgWant says what type a field must have.
func msgWant(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "has the wrong type"
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Int, reflect.Int64:
		return "must be an integer"
	case reflect.Bool:
		return "must be a boolean"
	case reflect.Slice:
		return "must be an array"
	case reflect.Struct, reflect.Map:
		return "must be an object"
	}
	return "has the wrong type"
}

// msgAbsent reports whether a field was left out or null.
func msgAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// msgInvalid turns a decoding error under path into an *Invalid naming the
// field, never quoting the body.
func msgInvalid(path string, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := path
		if te.Field != "" {
			if field != "" {
				field += "."
			}
			field += te.Field
		}
		if field == "" {
			field = "body"
		}
		return &Invalid{Field: field, Msg: msgWant(te.Type)}
	case errors.As(err, &se):
		return &Invalid{Field: "body", Msg: fmt.Sprintf("invalid JSON at byte %d", se.Offset)}
	}
	if path == "" {
		path = "body"
	}
	return &Invalid{Field: path, Msg: "cannot be read"}
}

package xlate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// chatMessageWire is one message of a chat request.
type chatMessageWire struct {
	Role             string                `json:"role"`
	Content          json.RawMessage       `json:"content"`
	ToolCalls        json.RawMessage       `json:"tool_calls"`
	ToolCallID       string                `json:"tool_call_id"`
	ReasoningContent *string               `json:"reasoning_content"`
	Reasoning        *string               `json:"reasoning"`
	ReasoningDetails []chatReasoningDetail `json:"reasoning_details"`
	Refusal          *string               `json:"refusal"`
	FunctionCall     json.RawMessage       `json:"function_call"`
	Audio            json.RawMessage       `json:"audio"`
}

// chatContentPartWire is one part of a message's content array.
type chatContentPartWire struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	Refusal  *string         `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

// chatParseMessages reads messages: system and developer messages into
// the system strings, tool messages into ToolResult parts of a user
// message (consecutive ones into the same), the rest into messages.
func chatParseMessages(raw json.RawMessage) (system []string, msgs []Message, err error) {
	if chatIsNull(raw) {
		return nil, nil, &Invalid{Field: "messages", Msg: "is missing"}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, &Invalid{Field: "messages", Msg: "is not an array"}
	}
	if len(items) == 0 {
		return nil, nil, &Invalid{Field: "messages", Msg: "is empty"}
	}
	names := map[string]string{} // tool call id → function name
	inTools := false             // the last message holds tool results
	for i, item := range items {
		path := fmt.Sprintf("messages[%d]", i)
		var m chatMessageWire
		if err := chatDecode(item, path, &m); err != nil {
			return nil, nil, err
		}
		isTool := m.Role == "tool"
		switch m.Role {
		case "system", "developer":
			text, err := chatParseSystem(m.Content, path+".content")
			if err != nil {
				return nil, nil, err
			}
			system = append(system, text)
		case "user":
			parts, err := chatParseContent(m.Content, path+".content", m.Role)
			if err != nil {
				return nil, nil, err
			}
			msgs = append(msgs, Message{Role: RoleUser, Parts: chatNonEmpty(parts)})
		case "assistant":
			msg, err := chatParseAssistant(&m, path, names)
			if err != nil {
				return nil, nil, err
			}
			msgs = append(msgs, msg)
		case "tool":
			res, err := chatParseToolResult(&m, path, names)
			if err != nil {
				return nil, nil, err
			}
			if inTools {
				last := &msgs[len(msgs)-1]
				last.Parts = append(last.Parts, res)
			} else {
				msgs = append(msgs, Message{Role: RoleUser, Parts: []Part{res}})
			}
		case "function":
			return nil, nil, &Unsupported{Feature: "the legacy function role"}
		case "":
			return nil, nil, &Invalid{Field: path + ".role", Msg: "is missing"}
		default:
			return nil, nil, &Invalid{Field: path + ".role", Msg: "is not system, developer, user, assistant or tool"}
		}
		inTools = isTool
	}
	return system, msgs, nil
}

// chatNonEmpty is parts without empty texts; a message whose content was
// all empty keeps one empty Text so that the turn stays.
func chatNonEmpty(parts []Part) []Part {
	out := parts[:0]
	for _, p := range parts {
		if p.Type != Text || p.Text != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []Part{{Type: Text}}
	}
	return out
}

// chatParseSystem reads a system or developer message's content: a string
// or text parts, joined with blank lines.
func chatParseSystem(raw json.RawMessage, path string) (string, error) {
	parts, err := chatParseContent(raw, path, "system")
	if err != nil {
		return "", err
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, "\n\n"), nil
}

// chatParseContent reads a message's content: null, a string, or an array
// of parts, those role may hold (images for user and tool messages,
// refusals for assistant ones).
func chatParseContent(raw json.RawMessage, path, role string) ([]Part, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Part{{Type: Text, Text: s}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &Invalid{Field: path, Msg: "is neither a string nor an array of parts"}
	}
	parts := make([]Part, 0, len(items))
	for j, item := range items {
		p, err := chatParsePart(item, fmt.Sprintf("%s[%d]", path, j), role)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// chatParsePart reads one content part.
func chatParsePart(raw json.RawMessage, path, role string) (Part, error) {
	var w chatContentPartWire
	if err := chatDecode(raw, path, &w); err != nil {
		return Part{}, err
	}
	switch {
	case w.Type == "text":
		if w.Text == nil {
			return Part{}, &Invalid{Field: path + ".text", Msg: "is missing"}
		}
		return Part{Type: Text, Text: *w.Text}, nil
	case w.Type == "refusal" && role == "assistant":
		if w.Refusal == nil {
			return Part{}, &Invalid{Field: path + ".refusal", Msg: "is missing"}
		}
		return Part{Type: Text, Text: *w.Refusal}, nil
	case w.Type == "image_url" && (role == "user" || role == "tool"):
		return chatParseImage(w.ImageURL, path+".image_url")
	case w.Type == "input_audio":
		return Part{}, &Unsupported{Feature: "audio input (input_audio content parts)"}
	case w.Type == "file":
		return Part{}, &Unsupported{Feature: "file content parts"}
	}
	return Part{}, &Invalid{Field: path + ".type", Msg: "is not a content part type a " + role + " message may hold"}
}

// chatParseImage reads image_url: {"url": U} (or, as some clients write
// it, the URL string itself). A data: URL becomes the image's media type
// and base64 data.
func chatParseImage(raw json.RawMessage, path string) (Part, error) {
	var url string
	if json.Unmarshal(raw, &url) != nil {
		var w struct {
			URL string `json:"url"`
		}
		if err := chatDecode(raw, path, &w); err != nil {
			return Part{}, err
		}
		url = w.URL
		path += ".url"
	}
	if url == "" {
		return Part{}, &Invalid{Field: path, Msg: "is missing"}
	}
	if len(url) < 5 || !strings.EqualFold(url[:5], "data:") {
		return Part{Type: Image, URL: url}, nil
	}
	meta, data, ok := strings.Cut(url[5:], ",")
	if !ok || data == "" {
		return Part{}, &Invalid{Field: path, Msg: "is a data URL without data"}
	}
	meta, ok = strings.CutSuffix(meta, ";base64")
	if !ok {
		return Part{}, &Invalid{Field: path, Msg: "is a data URL that is not base64"}
	}
	mediaType, _, _ := strings.Cut(meta, ";")
	if mediaType == "" {
		return Part{}, &Invalid{Field: path, Msg: "is a data URL without a media type"}
	}
	return Part{Type: Image, MediaType: mediaType, Data: data}, nil
}

// chatParseAssistant reads an assistant message: its reasoning (details,
// else reasoning_content) first, then its text, then its tool calls.
func chatParseAssistant(m *chatMessageWire, path string, names map[string]string) (Message, error) {
	switch {
	case !chatIsNull(m.FunctionCall):
		return Message{}, &Unsupported{Feature: "the legacy function_call of assistant messages"}
	case !chatIsNull(m.Audio):
		return Message{}, &Unsupported{Feature: "audio in assistant messages"}
	}
	parts := chatDetailParts(m.ReasoningDetails)
	if len(m.ReasoningDetails) == 0 {
		for _, rc := range [...]*string{m.ReasoningContent, m.Reasoning} {
			if rc != nil && *rc != "" {
				parts = append(parts, Part{Type: Thinking, Text: *rc})
				break
			}
		}
	}
	content, err := chatParseContent(m.Content, path+".content", m.Role)
	if err != nil {
		return Message{}, err
	}
	parts = append(parts, content...)
	if m.Refusal != nil && *m.Refusal != "" {
		parts = append(parts, Part{Type: Text, Text: *m.Refusal})
	}
	calls, err := chatParseToolCalls(m.ToolCalls, path+".tool_calls", names)
	if err != nil {
		return Message{}, err
	}
	parts = append(parts, calls...)
	return Message{Role: RoleAssistant, Parts: chatNonEmpty(parts)}, nil
}

// chatParseToolCalls reads an assistant message's tool_calls, noting each
// call's function name by id for the tool messages that answer it.
func chatParseToolCalls(raw json.RawMessage, path string, names map[string]string) ([]Part, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := chatDecode(raw, path, &items); err != nil {
		return nil, err
	}
	parts := make([]Part, 0, len(items))
	for j, item := range items {
		p := fmt.Sprintf("%s[%d]", path, j)
		var tc chatToolCallWire
		if err := chatDecode(item, p, &tc); err != nil {
			return nil, err
		}
		switch {
		case tc.ID == "":
			return nil, &Invalid{Field: p + ".id", Msg: "is missing"}
		case tc.Type == "custom":
			return nil, &Unsupported{Feature: "custom tool calls"}
		case tc.Type != "" && tc.Type != "function":
			return nil, &Invalid{Field: p + ".type", Msg: `is not "function"`}
		case tc.Function.Name == "":
			return nil, &Invalid{Field: p + ".function.name", Msg: "is missing"}
		}
		args, ok := chatArguments(tc.Function.Arguments)
		if !ok {
			return nil, &Invalid{Field: p + ".function.arguments", Msg: "is not a string"}
		}
		names[tc.ID] = tc.Function.Name
		parts = append(parts, Part{
			Type: ToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: args,
			Signature: tc.ExtraContent.signature(),
		})
	}
	return parts, nil
}

// chatArguments is a tool call's arguments: the JSON text of a string (as
// chat writes them), or an object written as is (as some servers do);
// absent or null is "".
func chatArguments(raw json.RawMessage) (string, bool) {
	if chatIsNull(raw) {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	if raw[0] == '{' {
		return string(raw), true
	}
	return "", false
}

// chatParseToolResult reads a tool message: the result of call
// tool_call_id, named after the call when an earlier message made it.
func chatParseToolResult(m *chatMessageWire, path string, names map[string]string) (Part, error) {
	if m.ToolCallID == "" {
		return Part{}, &Invalid{Field: path + ".tool_call_id", Msg: "is missing"}
	}
	content, err := chatParseContent(m.Content, path+".content", m.Role)
	if err != nil {
		return Part{}, err
	}
	var kept []Part
	for _, p := range content {
		if p.Type != Text || p.Text != "" {
			kept = append(kept, p)
		}
	}
	return Part{Type: ToolResult, ID: m.ToolCallID, Name: names[m.ToolCallID], Content: kept}, nil
}

package xlate

import (
	"encoding/json"
	"strings"
)

// chatRequestOut is the body chatBuildRequest writes.
type chatRequestOut struct {
	Model             string            `json:"model"`
	Messages          []chatMessageOut  `json:"messages"`
	Tools             []chatToolOut     `json:"tools,omitempty"`
	ToolChoice        any               `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	MaxTokens         int64             `json:"max_tokens,omitempty"`
	Temperature       json.RawMessage   `json:"temperature,omitempty"`
	TopP              json.RawMessage   `json:"top_p,omitempty"`
	TopK              json.RawMessage   `json:"top_k,omitempty"`
	Stop              []string          `json:"stop,omitempty"`
	User              string            `json:"user,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	ResponseFormat    any               `json:"response_format,omitempty"`
	ReasoningEffort   string            `json:"reasoning_effort,omitempty"`
	Stream            bool              `json:"stream,omitempty"`
	StreamOptions     *chatStreamOpts   `json:"stream_options,omitempty"`
}

type chatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessageOut is a message of a built request or of a written answer.
// Content is a string, parts, or nil for null.
type chatMessageOut struct {
	Role             string                `json:"role"`
	Content          any                   `json:"content"`
	ReasoningContent string                `json:"reasoning_content,omitempty"`
	ReasoningDetails []chatReasoningDetail `json:"reasoning_details,omitempty"`
	ToolCalls        []chatToolCallOut     `json:"tool_calls,omitempty"`
	ToolCallID       string                `json:"tool_call_id,omitempty"`
}

type chatToolCallOut struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Function     chatFunctionOut `json:"function"`
	ExtraContent *chatGoogleOut  `json:"extra_content,omitempty"`
}

type chatFunctionOut struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatGoogleOut struct {
	Google chatSignatureOut `json:"google"`
}

type chatSignatureOut struct {
	ThoughtSignature string `json:"thought_signature"`
}

// chatCallOut is p, a ToolCall part, as a chat tool call; empty arguments
// are written "{}", which every server parses.
func chatCallOut(p *Part) chatToolCallOut {
	c := chatToolCallOut{ID: p.ID, Type: "function", Function: chatFunctionOut{Name: p.Name, Arguments: p.Arguments}}
	if c.Function.Arguments == "" {
		c.Function.Arguments = "{}"
	}
	if p.Signature != "" {
		c.ExtraContent = &chatGoogleOut{Google: chatSignatureOut{ThoughtSignature: p.Signature}}
	}
	return c
}

type chatPartOut struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *chatImageOut `json:"image_url,omitempty"`
}

type chatImageOut struct {
	URL string `json:"url"`
}

type chatToolOut struct {
	Type     string          `json:"type"`
	Function chatToolFuncOut `json:"function"`
}

type chatToolFuncOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// chatBuildRequest writes r as a chat request for an OpenAI-compatible
// upstream (vLLM, Ollama, DeepSeek and the like): the output bound as
// max_tokens, which they all read; a stream always asks for its usage,
// which the gateway charges by; top_k, when given, as the top_k those
// servers accept beside OpenAI's members.
func chatBuildRequest(r *Request) ([]byte, error) {
	out := chatRequestOut{
		Model:             r.Model,
		ParallelToolCalls: r.ParallelToolCalls,
		MaxTokens:         r.MaxTokens,
		Temperature:       r.Temperature,
		TopP:              r.TopP,
		TopK:              r.TopK,
		Stop:              r.Stop,
		User:              r.User,
		Metadata:          r.Metadata,
		ReasoningEffort:   chatEffortOut(r.Reasoning),
		Stream:            r.Stream,
	}
	if r.Stream {
		out.StreamOptions = &chatStreamOpts{IncludeUsage: true}
	}
	for _, s := range r.System {
		out.Messages = append(out.Messages, chatMessageOut{Role: "system", Content: s})
	}
	for i := range r.Messages {
		msgs, err := chatMessagesOut(&r.Messages[i])
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, chatToolOut{Type: "function", Function: chatToolFuncOut{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
		}})
	}
	out.ToolChoice = chatToolChoiceOut(r.ToolChoice)
	out.ResponseFormat = chatFormatOut(r.Format)
	return chatMarshal(&out)
}

// chatEffortOut is the reasoning_effort standing for rs: off is
// "minimal", the least chat can ask; a budget maps to the effort of its
// size.
func chatEffortOut(rs *Reasoning) string {
	switch {
	case rs == nil:
		return ""
	case rs.Off:
		return "minimal"
	case rs.Effort != "":
		return rs.Effort
	case rs.Budget <= 0:
		return ""
	case rs.Budget <= 2048:
		return "low"
	case rs.Budget <= 8192:
		return "medium"
	}
	return "high"
}

// chatToolChoiceOut is tc as chat's tool_choice; nil when none was named.
func chatToolChoiceOut(tc *ToolChoice) any {
	if tc == nil {
		return nil
	}
	if tc.Mode == ChoiceTool {
		return chatNamedChoice{Type: "function", Function: chatNameOut{Name: tc.Name}}
	}
	return tc.Mode
}

// chatFormatOut is f as chat's response_format; nil for free text.
func chatFormatOut(f *Format) any {
	if f == nil {
		return nil
	}
	if f.Type != "json_schema" {
		return chatFormatWire{Type: f.Type}
	}
	name := f.Name
	if name == "" {
		name = "response" // chat requires a name; the neutral form may have none
	}
	return chatFormatWire{Type: f.Type, JSONSchema: &chatSchemaOut{Name: name, Schema: f.Schema, Strict: f.Strict}}
}

type chatNamedChoice struct {
	Type     string      `json:"type"`
	Function chatNameOut `json:"function"`
}

type chatNameOut struct {
	Name string `json:"name"`
}

type chatFormatWire struct {
	Type       string         `json:"type"`
	JSONSchema *chatSchemaOut `json:"json_schema,omitempty"`
}

type chatSchemaOut struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// chatMessagesOut is m as chat messages: an assistant message, or a user
// message's tool results as one tool message each followed by a user
// message with the rest of its content, if any.
func chatMessagesOut(m *Message) ([]chatMessageOut, error) {
	switch m.Role {
	case RoleAssistant:
		msg, err := chatAssistantOut(m.Parts)
		return []chatMessageOut{msg}, err
	case RoleUser:
	default:
		return nil, &Unsupported{Feature: "a message of role " + m.Role, Target: Chat}
	}
	var out []chatMessageOut
	var content []chatPartOut
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case ToolResult:
			msg, err := chatToolResultOut(p)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
		case Text:
			content = append(content, chatPartOut{Type: "text", Text: &p.Text})
		case Image:
			content = append(content, chatPartOut{Type: "image_url", ImageURL: &chatImageOut{URL: chatImageURL(p)}})
		}
	}
	switch {
	case len(content) == 1 && content[0].Type == "text":
		out = append(out, chatMessageOut{Role: "user", Content: *content[0].Text})
	case len(content) > 0:
		out = append(out, chatMessageOut{Role: "user", Content: content})
	case len(out) == 0:
		out = append(out, chatMessageOut{Role: "user", Content: ""})
	}
	return out, nil
}

// chatImageURL is an image's URL, or its data as a data: URL.
func chatImageURL(p *Part) string {
	if p.URL != "" {
		return p.URL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

// chatToolErrorPrefix starts the content of a tool message whose result
// is an error. Chat has no error flag on tool messages (Anthropic's
// is_error, Gemini's error response), so the flag is said in the content,
// where the model reads it; the prefix, not a wrapper, leaves the result
// as the tool wrote it after it.
const chatToolErrorPrefix = "Error: "

// chatToolResultOut is p, a ToolResult, as a tool message: its text parts
// joined with blank lines. Chat's tool messages hold no images.
func chatToolResultOut(p *Part) (chatMessageOut, error) {
	var texts []string
	for _, c := range p.Content {
		switch c.Type {
		case Text:
			texts = append(texts, c.Text)
		case Image:
			return chatMessageOut{}, &Unsupported{Feature: "images in tool results", Target: Chat}
		}
	}
	text := strings.Join(texts, "\n\n")
	if p.IsError {
		text = chatToolErrorPrefix + text
	}
	return chatMessageOut{Role: "tool", ToolCallID: p.ID, Content: text}, nil
}

// chatAssistantOut is an assistant message: thinking as reasoning_content
// and reasoning_details, texts joined as they were cut (a text split by
// citations reads back whole), tool calls. ReasoningItem parts, OpenAI's
// encrypted reasoning that only an OpenAI line could read, are left out.
func chatAssistantOut(parts []Part) (chatMessageOut, error) {
	msg := chatMessageOut{Role: "assistant"}
	msg.ReasoningContent, msg.ReasoningDetails = chatThinkingOut(parts)
	var text strings.Builder
	for i := range parts {
		p := &parts[i]
		switch p.Type {
		case Text:
			text.WriteString(p.Text)
		case ToolCall:
			msg.ToolCalls = append(msg.ToolCalls, chatCallOut(p))
		case Image:
			return msg, &Unsupported{Feature: "images in assistant messages", Target: Chat}
		case ToolResult:
			return msg, &Unsupported{Feature: "tool results in assistant messages", Target: Chat}
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = text.String()
	}
	return msg, nil
}

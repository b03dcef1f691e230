package xlate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// gemRequestWire is a generateContent request body. The model and whether
// it streams are in the path (GeminiPath), not here.
type gemRequestWire struct {
	SystemInstruction *gemContent     `json:"systemInstruction,omitempty"`
	Contents          []gemContent    `json:"contents"`
	Tools             []gemToolWire   `json:"tools,omitempty"`
	ToolConfig        *gemToolConfig  `json:"toolConfig,omitempty"`
	GenerationConfig  *gemGenerateCfg `json:"generationConfig,omitempty"`
}

type gemContent struct {
	Role  string    `json:"role,omitempty"`
	Parts []gemPart `json:"parts"`
}

// gemPart is one part of a request's content. Text is a pointer so that a
// signed thought with no text still carries "text":"".
type gemPart struct {
	Text             *string              `json:"text,omitempty"`
	Thought          bool                 `json:"thought,omitempty"`
	InlineData       *gemBlob             `json:"inlineData,omitempty"`
	FileData         *gemFileData         `json:"fileData,omitempty"`
	FunctionCall     *gemFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *gemFunctionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string               `json:"thoughtSignature,omitempty"`
}

type gemBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gemFileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type gemFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gemFunctionResponse struct {
	ID       string            `json:"id,omitempty"`
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

type gemToolWire struct {
	FunctionDeclarations []gemFunctionDecl `json:"functionDeclarations"`
}

type gemFunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type gemToolConfig struct {
	FunctionCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	} `json:"functionCallingConfig"`
}

type gemGenerateCfg struct {
	MaxOutputTokens    int64              `json:"maxOutputTokens,omitempty"`
	Temperature        json.RawMessage    `json:"temperature,omitempty"`
	TopP               json.RawMessage    `json:"topP,omitempty"`
	TopK               json.RawMessage    `json:"topK,omitempty"`
	StopSequences      []string           `json:"stopSequences,omitempty"`
	ResponseMimeType   string             `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage    `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *gemThinkingConfig `json:"thinkingConfig,omitempty"`
}

// gemThinkingConfig: ThinkingBudget is a pointer because 0 (thinking off)
// must be written.
type gemThinkingConfig struct {
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
}

// gemEffortBudget is the thinking budget of an OpenAI effort.
var gemEffortBudget = map[string]int64{"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}

// gemBuildRequest writes r as a generateContent body. ParallelToolCalls,
// Metadata, User and tools' Strict have no Gemini field and are left out.
func gemBuildRequest(r *Request) ([]byte, error) {
	var w gemRequestWire
	if len(r.System) > 0 {
		sys := strings.Join(r.System, "\n\n")
		w.SystemInstruction = &gemContent{Parts: []gemPart{{Text: &sys}}}
	}
	contents, err := gemContents(r.Messages)
	if err != nil {
		return nil, err
	}
	w.Contents = contents
	if w.Tools, err = gemTools(r.Tools); err != nil {
		return nil, err
	}
	if w.ToolConfig, err = gemChoice(r.ToolChoice); err != nil {
		return nil, err
	}
	if w.GenerationConfig, err = gemGeneration(r); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, &Invalid{Field: "request", Msg: "cannot be written as JSON"}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// gemContents writes the turns. A ToolResult's function name is the one of
// the earlier ToolCall with its ID. A turn left with no parts (only
// reasoning Gemini cannot read) is left out.
func gemContents(msgs []Message) ([]gemContent, error) {
	names := map[string]string{} // tool call ID → function name
	out := make([]gemContent, 0, len(msgs))
	for i, m := range msgs {
		var role string
		switch m.Role {
		case RoleUser:
			role = "user"
		case RoleAssistant:
			role = "model"
		default:
			return nil, &Invalid{Field: fmt.Sprintf("messages[%d].role", i), Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
		var parts []gemPart
		for j := range m.Parts {
			field := fmt.Sprintf("messages[%d].parts[%d]", i, j)
			ps, err := gemParts(&m.Parts[j], field, names)
			if err != nil {
				return nil, err
			}
			parts = append(parts, ps...)
		}
		if len(parts) > 0 {
			out = append(out, gemContent{Role: role, Parts: parts})
		}
	}
	return out, nil
}

// gemParts is the Gemini parts of one neutral part (none for what Gemini
// drops; a tool result with images is its functionResponse followed by
// the images).
func gemParts(p *Part, field string, names map[string]string) ([]gemPart, error) {
	switch p.Type {
	case Text:
		if p.Text == "" {
			return nil, nil
		}
		return []gemPart{{Text: &p.Text}}, nil
	case Image:
		img, err := gemImage(p, field)
		if err != nil {
			return nil, err
		}
		return []gemPart{img}, nil
	case ToolCall:
		args, err := gemArgs(p.Arguments, field+".arguments")
		if err != nil {
			return nil, err
		}
		if p.ID != "" {
			names[p.ID] = p.Name
		}
		return []gemPart{{
			FunctionCall:     &gemFunctionCall{ID: p.ID, Name: p.Name, Args: args},
			ThoughtSignature: p.Signature,
		}}, nil
	case ToolResult:
		return gemToolResult(p, field, names)
	case Thinking:
		if p.Signature == "" {
			return nil, nil // unsigned thought text: Gemini reads nothing from it
		}
		return []gemPart{{Text: &p.Text, Thought: true, ThoughtSignature: p.Signature}}, nil
	case RedactedThinking, ReasoningItem:
		return nil, nil // another provider's encrypted reasoning
	}
	return nil, &Invalid{Field: field, Msg: fmt.Sprintf("unknown part type %d", p.Type)}
}

// gemArgs is a tool call's arguments as the JSON object functionCall.args
// needs; empty arguments are {}.
func gemArgs(args, field string) (json.RawMessage, error) {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage("{}"), nil
	}
	if t[0] != '{' || !json.Valid([]byte(t)) {
		return nil, &Invalid{Field: field, Msg: "must be a JSON object"}
	}
	return json.RawMessage(t), nil
}

// gemToolResult is a functionResponse: the result's text under "output"
// (or "error" when it is an error), as Google documents the response
// object, then its images as parts of the same turn.
func gemToolResult(p *Part, field string, names map[string]string) ([]gemPart, error) {
	name, ok := names[p.ID]
	if !ok || name == "" {
		name = p.Name
	}
	if name == "" {
		return nil, &Invalid{Field: field, Msg: fmt.Sprintf("the result of tool call %q answers no earlier tool call: Gemini needs the function's name", p.ID)}
	}
	var texts []string
	var images []gemPart
	for k := range p.Content {
		c := &p.Content[k]
		switch c.Type {
		case Text:
			texts = append(texts, c.Text)
		case Image:
			img, err := gemImage(c, fmt.Sprintf("%s.content[%d]", field, k))
			if err != nil {
				return nil, err
			}
			images = append(images, img)
		default:
			return nil, &Invalid{Field: fmt.Sprintf("%s.content[%d]", field, k), Msg: "a tool result holds text and images only"}
		}
	}
	key := "output"
	if p.IsError {
		key = "error"
	}
	fr := &gemFunctionResponse{ID: p.ID, Name: name, Response: map[string]string{key: strings.Join(texts, "\n")}}
	return append([]gemPart{{FunctionResponse: fr}}, images...), nil
}

// gemImage is an image part: inlineData for base64 data (or a base64
// data: URL), fileData for a URL.
func gemImage(p *Part, field string) (gemPart, error) {
	if p.Data != "" {
		return gemPart{InlineData: &gemBlob{MimeType: gemMime(p.MediaType), Data: p.Data}}, nil
	}
	if p.URL == "" {
		return gemPart{}, &Invalid{Field: field, Msg: "an image needs data or a URL"}
	}
	if rest, ok := strings.CutPrefix(p.URL, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 {
			return gemPart{}, &Invalid{Field: field, Msg: "a data: URL image must be base64"}
		}
		return gemPart{InlineData: &gemBlob{MimeType: gemMime(p.MediaType, mediaType), Data: data}}, nil
	}
	return gemPart{FileData: &gemFileData{MimeType: gemMime(p.MediaType, gemMimeOfURL(p.URL)), FileURI: p.URL}}, nil
}

// gemMime is the first of the media types given, else image/jpeg.
func gemMime(given ...string) string {
	for _, m := range given {
		if m != "" {
			return m
		}
	}
	return "image/jpeg"
}

// gemMimeOfURL guesses an image's media type from its URL's extension.
func gemMimeOfURL(raw string) string {
	p := raw
	if u, err := url.Parse(raw); err == nil {
		p = u.Path
	}
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".heic":
		return "image/heic"
	case ".heif":
		return "image/heif"
	}
	return ""
}

// gemTools is one Tool of all function declarations.
func gemTools(tools []Tool) ([]gemToolWire, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	decls := make([]gemFunctionDecl, len(tools))
	for i, t := range tools {
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return nil, &Invalid{Field: fmt.Sprintf("tools[%d].parameters", i), Msg: "is not valid JSON"}
		}
		decls[i] = gemFunctionDecl{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return []gemToolWire{{FunctionDeclarations: decls}}, nil
}

// gemChoice is toolConfig for a tool choice.
func gemChoice(c *ToolChoice) (*gemToolConfig, error) {
	if c == nil {
		return nil, nil
	}
	var tc gemToolConfig
	fc := &tc.FunctionCallingConfig
	switch c.Mode {
	case ChoiceAuto:
		fc.Mode = "AUTO"
	case ChoiceNone:
		fc.Mode = "NONE"
	case ChoiceRequired:
		fc.Mode = "ANY"
	case ChoiceTool:
		if c.Name == "" {
			return nil, &Invalid{Field: "tool_choice", Msg: "names no tool"}
		}
		fc.Mode, fc.AllowedFunctionNames = "ANY", []string{c.Name}
	default:
		return nil, &Invalid{Field: "tool_choice", Msg: fmt.Sprintf("unknown mode %q", c.Mode)}
	}
	return &tc, nil
}

// gemGeneration is generationConfig; nil when the request sets none of it.
func gemGeneration(r *Request) (*gemGenerateCfg, error) {
	g := gemGenerateCfg{MaxOutputTokens: r.MaxTokens, StopSequences: r.Stop}
	for _, n := range [...]struct {
		field string
		raw   json.RawMessage
		dst   *json.RawMessage
	}{{"temperature", r.Temperature, &g.Temperature}, {"top_p", r.TopP, &g.TopP}, {"top_k", r.TopK, &g.TopK}} {
		if len(n.raw) == 0 {
			continue
		}
		if !json.Valid(n.raw) {
			return nil, &Invalid{Field: n.field, Msg: "is not valid JSON"}
		}
		*n.dst = n.raw
	}
	if r.MaxTokens < 0 {
		return nil, &Invalid{Field: "max_tokens", Msg: "is negative"}
	}
	if err := gemFormat(r.Format, &g); err != nil {
		return nil, err
	}
	tc, err := gemThinking(r.Reasoning)
	if err != nil {
		return nil, err
	}
	g.ThinkingConfig = tc
	if g.MaxOutputTokens == 0 && g.Temperature == nil && g.TopP == nil && g.TopK == nil && len(g.StopSequences) == 0 &&
		g.ResponseMimeType == "" && g.ThinkingConfig == nil {
		return nil, nil
	}
	return &g, nil
}

// gemFormat sets the structured output asked for.
func gemFormat(f *Format, g *gemGenerateCfg) error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "json_schema":
		if len(f.Schema) > 0 && !json.Valid(f.Schema) {
			return &Invalid{Field: "response_format.json_schema.schema", Msg: "is not valid JSON"}
		}
		g.ResponseMimeType, g.ResponseJSONSchema = "application/json", f.Schema
	case "json_object":
		g.ResponseMimeType = "application/json"
	case "text", "":
	default:
		return &Invalid{Field: "response_format.type", Msg: fmt.Sprintf("unknown format %q", f.Type)}
	}
	return nil
}

// gemThinking is thinkingConfig: the budget given, or the one of the
// effort given; 0 when thinking is turned off. Thoughts are asked for
// whenever reasoning is.
func gemThinking(rs *Reasoning) (*gemThinkingConfig, error) {
	if rs == nil {
		return nil, nil
	}
	if rs.Off || rs.Effort == "none" {
		zero := int64(0)
		return &gemThinkingConfig{ThinkingBudget: &zero}, nil
	}
	tc := &gemThinkingConfig{IncludeThoughts: true}
	switch {
	case rs.Budget > 0:
		b := rs.Budget
		tc.ThinkingBudget = &b
	case rs.Budget < 0:
		return nil, &Invalid{Field: "reasoning.budget_tokens", Msg: "is negative"}
	case rs.Effort != "":
		b, ok := gemEffortBudget[rs.Effort]
		if !ok {
			return nil, &Invalid{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", rs.Effort)}
		}
		tc.ThinkingBudget = &b
	}
	return tc, nil
}

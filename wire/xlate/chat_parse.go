package xlate

import (
	"encoding/json"
	"fmt"
	"slices"
)

// chatRequestWire is a chat caller's request body. Polymorphic members
// stay raw and are read one by one so that an error names its field.
type chatRequestWire struct {
	Model               string            `json:"model"`
	Messages            json.RawMessage   `json:"messages"`
	Tools               json.RawMessage   `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Temperature         json.RawMessage   `json:"temperature"`
	TopP                json.RawMessage   `json:"top_p"`
	TopK                json.RawMessage   `json:"top_k"`
	Stop                json.RawMessage   `json:"stop"`
	User                string            `json:"user"`
	SafetyIdentifier    string            `json:"safety_identifier"`
	Metadata            map[string]string `json:"metadata"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	ReasoningEffort     string            `json:"reasoning_effort"`
	Thinking            json.RawMessage   `json:"thinking"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`

	// What chat can ask and no other target can express: refused
	// (chatRefused) unless left at its default.
	N                json.RawMessage `json:"n"`
	Logprobs         *bool           `json:"logprobs"`
	TopLogprobs      json.RawMessage `json:"top_logprobs"`
	Modalities       []string        `json:"modalities"`
	Audio            json.RawMessage `json:"audio"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	Prediction       json.RawMessage `json:"prediction"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
	Functions        json.RawMessage `json:"functions"`
	FunctionCall     json.RawMessage `json:"function_call"`
	FrequencyPenalty json.RawMessage `json:"frequency_penalty"`
	PresencePenalty  json.RawMessage `json:"presence_penalty"`
}

// chatParseRequest reads a chat caller's POST /v1/chat/completions body.
// What chat asks that no other target can express is an *Unsupported
// (its Target left for the gateway to fill); what cannot be read, an
// *Invalid naming the field. Members of no consequence to the answer's
// content (seed, service_tier, store, prompt_cache_key, verbosity, a
// message's name) are left out.
func chatParseRequest(body []byte) (*Request, error) {
	var w chatRequestWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, chatInvalid("", err)
	}
	if err := w.refused(); err != nil {
		return nil, err
	}
	r := &Request{
		Model:             w.Model,
		ParallelToolCalls: w.ParallelToolCalls,
		User:              w.User,
		Metadata:          w.Metadata,
		Stream:            w.Stream,
	}
	if r.User == "" {
		r.User = w.SafetyIdentifier
	}
	if w.Stream && w.StreamOptions != nil {
		r.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	var err error
	if r.System, r.Messages, err = chatParseMessages(w.Messages); err != nil {
		return nil, err
	}
	if r.Tools, err = chatParseTools(w.Tools); err != nil {
		return nil, err
	}
	if r.ToolChoice, err = chatParseToolChoice(w.ToolChoice); err != nil {
		return nil, err
	}
	if err = w.sampling(r); err != nil {
		return nil, err
	}
	if r.Format, err = chatParseFormat(w.ResponseFormat); err != nil {
		return nil, err
	}
	if r.Reasoning, err = chatParseReasoning(w.ReasoningEffort, w.Thinking); err != nil {
		return nil, err
	}
	return r, nil
}

// refused is the *Unsupported for the first member of w that asks what
// only chat can do, nil when there is none.
func (w *chatRequestWire) refused() error {
	var feature string
	switch {
	case !chatIsNull(w.N) && string(w.N) != "1":
		feature = "n other than 1"
	case w.Logprobs != nil && *w.Logprobs:
		feature = "logprobs"
	case !chatIsNull(w.TopLogprobs) && !chatIsZero(w.TopLogprobs):
		feature = "top_logprobs"
	case slices.Contains(w.Modalities, "audio") || !chatIsNull(w.Audio):
		feature = "audio output"
	case !chatIsNull(w.LogitBias) && !chatIsEmptyObject(w.LogitBias):
		feature = "logit_bias"
	case !chatIsNull(w.Prediction):
		feature = "prediction"
	case !chatIsNull(w.WebSearchOptions):
		feature = "web_search_options"
	case !chatIsNull(w.Functions):
		feature = "the legacy functions parameter"
	case !chatIsNull(w.FunctionCall):
		feature = "the legacy function_call parameter"
	case !chatIsNull(w.FrequencyPenalty) && !chatIsZero(w.FrequencyPenalty):
		feature = "frequency_penalty"
	case !chatIsNull(w.PresencePenalty) && !chatIsZero(w.PresencePenalty):
		feature = "presence_penalty"
	default:
		return nil
	}
	return &Unsupported{Feature: feature}
}

// chatIsEmptyObject reports whether raw is {}.
func chatIsEmptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil && len(m) == 0
}

// sampling reads the output bound, the sampling numbers and stop.
func (w *chatRequestWire) sampling(r *Request) error {
	for _, m := range [...]struct {
		name string
		n    *int64
	}{{"max_completion_tokens", w.MaxCompletionTokens}, {"max_tokens", w.MaxTokens}} {
		if m.n == nil {
			continue
		}
		if *m.n < 0 {
			return &Invalid{Field: m.name, Msg: "is negative"}
		}
		if r.MaxTokens == 0 {
			r.MaxTokens = *m.n
		}
	}
	for _, n := range [...]struct {
		name string
		raw  json.RawMessage
		dst  *json.RawMessage
	}{{"temperature", w.Temperature, &r.Temperature}, {"top_p", w.TopP, &r.TopP}, {"top_k", w.TopK, &r.TopK}} {
		if chatIsNull(n.raw) {
			continue
		}
		if !chatIsNumber(n.raw) {
			return &Invalid{Field: n.name, Msg: "is not a number"}
		}
		*n.dst = n.raw
	}
	var err error
	r.Stop, err = chatParseStop(w.Stop)
	return err
}

// chatParseStop reads stop: a string or an array of strings.
func chatParseStop(raw json.RawMessage) ([]string, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, &Invalid{Field: "stop", Msg: "is neither a string nor an array of strings"}
	}
	return slices.DeleteFunc(many, func(s string) bool { return s == "" }), nil
}

// chatParseTools reads tools: function tools only.
func chatParseTools(raw json.RawMessage) ([]Tool, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := chatDecode(raw, "tools", &items); err != nil {
		return nil, err
	}
	tools := make([]Tool, 0, len(items))
	for i, item := range items {
		path := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		}
		if err := chatDecode(item, path, &t); err != nil {
			return nil, err
		}
		switch {
		case t.Type == "custom":
			return nil, &Unsupported{Feature: "custom tools"}
		case t.Type != "function":
			return nil, &Invalid{Field: path + ".type", Msg: `is not "function"`}
		case t.Function == nil || t.Function.Name == "":
			return nil, &Invalid{Field: path + ".function.name", Msg: "is missing"}
		}
		tool := Tool{Name: t.Function.Name, Description: t.Function.Description, Strict: t.Function.Strict != nil && *t.Function.Strict}
		if !chatIsNull(t.Function.Parameters) {
			tool.Parameters = t.Function.Parameters
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

// chatParseToolChoice reads tool_choice: "auto", "none", "required" or
// {"type":"function","function":{"name":N}}.
func chatParseToolChoice(raw json.RawMessage) (*ToolChoice, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case ChoiceAuto, ChoiceNone, ChoiceRequired:
			return &ToolChoice{Mode: mode}, nil
		}
		return nil, &Invalid{Field: "tool_choice", Msg: `is not "auto", "none" or "required"`}
	}
	var c struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := chatDecode(raw, "tool_choice", &c); err != nil {
		return nil, err
	}
	switch {
	case c.Type == "allowed_tools":
		return nil, &Unsupported{Feature: "allowed_tools in tool_choice"}
	case c.Type == "custom":
		return nil, &Unsupported{Feature: "custom tools"}
	case c.Type != "function":
		return nil, &Invalid{Field: "tool_choice.type", Msg: `is not "function"`}
	case c.Function == nil || c.Function.Name == "":
		return nil, &Invalid{Field: "tool_choice.function.name", Msg: "is missing"}
	}
	return &ToolChoice{Mode: ChoiceTool, Name: c.Function.Name}, nil
}

// chatParseFormat reads response_format: json_schema, json_object or text.
func chatParseFormat(raw json.RawMessage) (*Format, error) {
	if chatIsNull(raw) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := chatDecode(raw, "response_format", &f); err != nil {
		return nil, err
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &Format{Type: "json_object"}, nil
	case "json_schema":
		if f.JSONSchema == nil {
			return nil, &Invalid{Field: "response_format.json_schema", Msg: "is missing"}
		}
		s := f.JSONSchema
		out := &Format{Type: "json_schema", Name: s.Name, Strict: s.Strict != nil && *s.Strict}
		if !chatIsNull(s.Schema) {
			out.Schema = s.Schema
		}
		return out, nil
	}
	return nil, &Invalid{Field: "response_format.type", Msg: `is not "text", "json_object" or "json_schema"`}
}

// chatParseReasoning reads reasoning_effort and, as Anthropic's and other
// OpenAI-compatible fronts accept, thinking {"type":"enabled",
// "budget_tokens":N} or {"type":"disabled"}. reasoning_effort "none" turns
// reasoning off.
func chatParseReasoning(effort string, thinking json.RawMessage) (*Reasoning, error) {
	var r Reasoning
	switch effort {
	case "":
	case "none":
		r.Off = true
	case "minimal", "low", "medium", "high":
		r.Effort = effort
	default:
		return nil, &Invalid{Field: "reasoning_effort", Msg: `is not "none", "minimal", "low", "medium" or "high"`}
	}
	if !chatIsNull(thinking) {
		var t struct {
			Type         string `json:"type"`
			BudgetTokens int64  `json:"budget_tokens"`
		}
		if err := chatDecode(thinking, "thinking", &t); err != nil {
			return nil, err
		}
		switch {
		case t.Type == "disabled":
			r.Off = true
		case t.Type != "enabled":
			return nil, &Invalid{Field: "thinking.type", Msg: `is not "enabled" or "disabled"`}
		case t.BudgetTokens <= 0:
			return nil, &Invalid{Field: "thinking.budget_tokens", Msg: "is not a positive integer"}
		default:
			r.Budget = t.BudgetTokens
		}
	}
	if r == (Reasoning{}) {
		return nil, nil
	}
	if r.Off && (r.Effort != "" || r.Budget != 0) {
		return nil, &Invalid{Field: "reasoning_effort", Msg: "turns reasoning on while thinking turns it off, or the reverse"}
	}
	return &r, nil
}

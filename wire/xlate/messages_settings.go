package xlate

import "encoding/json"

// The settings of a caller's Messages request: sampling, tool choice,
// thinking and structured output.

// msgParseSettings reads the sampling, thinking and output settings;
// effort is the last output_config.effort given.
func msgParseSettings(r *Request, w *msgRequestWire, effort string) error {
	if w.MaxTokens != nil {
		if *w.MaxTokens < 0 {
			return &Invalid{Field: "max_tokens", Msg: "must not be negative"}
		}
		r.MaxTokens = *w.MaxTokens
	}
	var err error
	if r.Temperature, err = msgNumber("temperature", w.Temperature); err != nil {
		return err
	}
	if r.TopP, err = msgNumber("top_p", w.TopP); err != nil {
		return err
	}
	if r.TopK, err = msgNumber("top_k", w.TopK); err != nil {
		return err
	}
	if w.Metadata != nil && w.Metadata.UserID != nil {
		r.User = *w.Metadata.UserID
	}
	if r.Reasoning, err = msgParseThinking(w.Thinking, effort); err != nil {
		return err
	}
	format, field := w.OutputFormat, "output_format"
	if w.OutputConfig != nil && w.OutputConfig.Format != nil {
		format, field = w.OutputConfig.Format, "output_config.format"
	}
	r.Format, err = msgParseFormat(field, format)
	return err
}

// msgParseChoice reads tool_choice.
func msgParseChoice(r *Request, c *msgChoiceWire) error {
	if c == nil {
		return nil
	}
	mode := ""
	switch c.Type {
	case "auto":
		mode = ChoiceAuto
	case "any":
		mode = ChoiceRequired
	case "none":
		mode = ChoiceNone
	case "tool":
		if c.Name == "" {
			return &Invalid{Field: "tool_choice.name", Msg: "is required"}
		}
		mode = ChoiceTool
	default:
		return &Invalid{Field: "tool_choice.type", Msg: `must be "auto", "any", "tool" or "none"`}
	}
	r.ToolChoice = &ToolChoice{Mode: mode}
	if mode == ChoiceTool {
		r.ToolChoice.Name = c.Name
	}
	if c.DisableParallelToolUse != nil {
		parallel := !*c.DisableParallelToolUse
		r.ParallelToolCalls = &parallel
	}
	return nil
}

// msgParseThinking reads thinking. Adaptive thinking leaves the budget to
// the model: its effort is output_config.effort ("max" is "high"), or
// "medium".
func msgParseThinking(t *msgThinkingWire, effort string) (*Reasoning, error) {
	if t == nil {
		return nil, nil
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil || *t.BudgetTokens <= 0 {
			return nil, &Invalid{Field: "thinking.budget_tokens", Msg: "must be a positive integer"}
		}
		return &Reasoning{Budget: *t.BudgetTokens}, nil
	case "disabled":
		return &Reasoning{Off: true}, nil
	case "adaptive":
		switch effort {
		case "low", "medium", "high":
		case "max":
			effort = "high"
		default:
			effort = "medium"
		}
		return &Reasoning{Effort: effort}, nil
	}
	return nil, &Invalid{Field: "thinking.type", Msg: `must be "enabled", "disabled" or "adaptive"`}
}

// msgParseFormat reads Anthropic's structured output (output_config.format,
// or the beta's output_format): a JSON schema the answer's text follows.
// The Messages API names no schema; other targets that need a name get
// "response". Anthropic enforces the schema, so it is strict.
func msgParseFormat(field string, f *msgFormatWire) (*Format, error) {
	if f == nil {
		return nil, nil
	}
	if f.Type != "json_schema" {
		return nil, &Invalid{Field: field + ".type", Msg: `must be "json_schema"`}
	}
	if msgAbsent(f.Schema) || f.Schema[0] != '{' {
		return nil, &Invalid{Field: field + ".schema", Msg: "must be a JSON object"}
	}
	return &Format{Type: "json_schema", Name: "response", Schema: f.Schema, Strict: true}, nil
}

// msgNumber checks that raw, when given, is a JSON number.
func msgNumber(field string, raw json.RawMessage) (json.RawMessage, error) {
	if msgAbsent(raw) {
		return nil, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return nil, &Invalid{Field: field, Msg: "must be a number"}
	}
	return raw, nil
}

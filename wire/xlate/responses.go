package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Responses is a caller's format only: an upstream that speaks it is an
// openai line, which the gateway never translates to, so the three
// upstream directions stay nil.
func init() {
	register(Responses, &codec{
		parseRequest: respParseRequest,
		writeAnswer:  respWriteAnswer,
		newEncoder:   respNewEncoder,
	})
}

// respRequestWire is a responses request as the caller wrote it: every
// field raw, read one by one so that an error names its field.
type respRequestWire struct {
	Model              json.RawMessage `json:"model"`
	Instructions       json.RawMessage `json:"instructions"`
	Input              json.RawMessage `json:"input"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  json.RawMessage `json:"parallel_tool_calls"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	Temperature        json.RawMessage `json:"temperature"`
	TopP               json.RawMessage `json:"top_p"`
	User               json.RawMessage `json:"user"`
	SafetyIdentifier   json.RawMessage `json:"safety_identifier"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               json.RawMessage `json:"text"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Stream             json.RawMessage `json:"stream"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Store              json.RawMessage `json:"store"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         json.RawMessage `json:"background"`
	Prompt             json.RawMessage `json:"prompt"`
	// include only asks for fields in the answer; a translated answer
	// always carries the encrypted_content of its reasoning items, and
	// has no logprobs to give, so it is not read.
}

// respParseRequest reads a caller's POST /v1/responses body.
func respParseRequest(body []byte) (*Request, error) {
	var w respRequestWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, respInvalid("body", err)
	}
	if err := respStateless(&w); err != nil {
		return nil, err
	}
	r := &Request{}
	if err := respParams(&w, r); err != nil {
		return nil, err
	}
	if err := respOptions(&w, r); err != nil {
		return nil, err
	}
	if respAbsent(w.Input) {
		return nil, &Invalid{Field: "input", Msg: "required (a string or an array of input items)"}
	}
	if err := respParseInput(w.Input, r); err != nil {
		return nil, err
	}
	return r, nil
}

// respStateless refuses what needs state the gateway does not keep: it
// stores no responses, conversations or prompt templates, so a request
// may not refer to one nor ask for one to be kept (store: true) or run in
// the background. store absent or false is what a stateless gateway does.
func respStateless(w *respRequestWire) error {
	var prev string
	if err := respDecode(w.PreviousResponseID, &prev, "previous_response_id"); err != nil {
		return err
	}
	if prev != "" {
		return &Unsupported{Feature: "previous_response_id"}
	}
	if !respAbsent(w.Conversation) {
		return &Unsupported{Feature: "conversation"}
	}
	if !respAbsent(w.Prompt) {
		return &Unsupported{Feature: "prompt (a stored prompt template)"}
	}
	for _, f := range [...]struct {
		raw     json.RawMessage
		name    string
		feature string
	}{{w.Store, "store", "store: true"}, {w.Background, "background", "background: true"}} {
		var on bool
		if err := respDecode(f.raw, &on, f.name); err != nil {
			return err
		}
		if on {
			return &Unsupported{Feature: f.feature}
		}
	}
	return nil
}

// respParams reads the scalar fields: model, instructions, the bounds and
// sampling numbers, user, metadata and stream.
func respParams(w *respRequestWire, r *Request) error {
	if respAbsent(w.Model) {
		return &Invalid{Field: "model", Msg: "required"}
	}
	if err := respDecode(w.Model, &r.Model, "model"); err != nil {
		return err
	}
	var instr string
	if err := respDecode(w.Instructions, &instr, "instructions"); err != nil {
		return err
	}
	if instr != "" {
		r.System = append(r.System, instr)
	}
	if !respAbsent(w.MaxOutputTokens) {
		n, err := strconv.ParseInt(string(w.MaxOutputTokens), 10, 64)
		if err != nil || n < 0 {
			return &Invalid{Field: "max_output_tokens", Msg: "must be a non-negative integer"}
		}
		r.MaxTokens = n
	}
	var err error
	if r.Temperature, err = respNumber(w.Temperature, "temperature"); err != nil {
		return err
	}
	if r.TopP, err = respNumber(w.TopP, "top_p"); err != nil {
		return err
	}
	if err := respDecode(w.User, &r.User, "user"); err != nil {
		return err
	}
	if r.User == "" {
		if err := respDecode(w.SafetyIdentifier, &r.User, "safety_identifier"); err != nil {
			return err
		}
	}
	if err := respMetadata(w.Metadata, r); err != nil {
		return err
	}
	if !respAbsent(w.ParallelToolCalls) {
		var p bool
		if err := respDecode(w.ParallelToolCalls, &p, "parallel_tool_calls"); err != nil {
			return err
		}
		r.ParallelToolCalls = &p
	}
	return respDecode(w.Stream, &r.Stream, "stream")
}

// respMetadata reads metadata, an object of strings.
func respMetadata(raw json.RawMessage, r *Request) error {
	var m map[string]json.RawMessage
	if err := respDecode(raw, &m, "metadata"); err != nil || m == nil {
		return err
	}
	r.Metadata = make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if respAbsent(v) || v[0] != '"' {
			return &Invalid{Field: "metadata." + k, Msg: "must be a string"}
		}
		if err := respDecode(v, &s, "metadata."+k); err != nil {
			return err
		}
		r.Metadata[k] = s
	}
	return nil
}

// respOptions reads tools, tool_choice, text.format and reasoning.
func respOptions(w *respRequestWire, r *Request) error {
	if err := respParseTools(w.Tools, r); err != nil {
		return err
	}
	if err := respParseToolChoice(w.ToolChoice, r); err != nil {
		return err
	}
	if err := respParseText(w.Text, r); err != nil {
		return err
	}
	return respParseReasoning(w.Reasoning, r)
}

// respAbsent: a field not given, or given as null.
func respAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// respDecode reads raw into v, an error naming field; absent or null
// leaves v as it was.
func respDecode(raw json.RawMessage, v any, field string) error {
	if respAbsent(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return respInvalid(field, err)
	}
	return nil
}

// respInvalid names field and, for a value of the wrong type deeper in
// it, the path to that value.
func respInvalid(field string, err error) *Invalid {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			field += "." + te.Field
		}
		return &Invalid{Field: field, Msg: "must not be a JSON " + te.Value}
	}
	return &Invalid{Field: field, Msg: "not valid JSON"}
}

// respNumber is a number field as written (never parsed into a float).
func respNumber(raw json.RawMessage, field string) (json.RawMessage, error) {
	if respAbsent(raw) {
		return nil, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || len(raw) == 0 || raw[0] == '"' {
		return nil, &Invalid{Field: field, Msg: "must be a number"}
	}
	return json.RawMessage(n), nil
}

// respParseTools reads the function tools; any built-in tool is run by
// OpenAI itself and no other upstream can.
func respParseTools(raw json.RawMessage, r *Request) error {
	var tools []json.RawMessage
	if err := respDecode(raw, &tools, "tools"); err != nil {
		return err
	}
	for i, t := range tools {
		field := "tools[" + strconv.Itoa(i) + "]"
		var w struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
			Format      *respToolFormat `json:"format"`
		}
		if err := respDecode(t, &w, field); err != nil {
			return err
		}
		switch {
		case w.Type == "":
			return &Invalid{Field: field + ".type", Msg: "required"}
		case w.Type != "function" && w.Type != "custom":
			return &Unsupported{Feature: "the " + w.Type + " tool"}
		case w.Name == "":
			return &Invalid{Field: field + ".name", Msg: "required"}
		}
		if w.Type == "custom" {
			r.Tools = append(r.Tools, respCustomTool(w.Name, w.Description, w.Format))
			continue
		}
		tool := Tool{Name: w.Name, Description: w.Description, Strict: w.Strict != nil && *w.Strict}
		if !respAbsent(w.Parameters) {
			if w.Parameters[0] != '{' {
				return &Invalid{Field: field + ".parameters", Msg: "must be a JSON Schema object"}
			}
			tool.Parameters = w.Parameters
		}
		r.Tools = append(r.Tools, tool)
	}
	return nil
}

// respCustomParam is the one parameter of the function a custom tool
// becomes: the tool's whole input.
const respCustomParam = "input"

// respToolFormat is a custom tool's format: free text, or a grammar
// (syntax "lark" or "regex") its input follows.
type respToolFormat struct {
	Type       string `json:"type"`
	Syntax     string `json:"syntax"`
	Definition string `json:"definition"`
}

// respCustomTool is a custom (freeform) tool as the function every other
// API can offer, as peers translate it: one required string parameter
// "input", described with the tool's grammar, if any, so that the model
// knows what to write there.
func respCustomTool(name, description string, f *respToolFormat) Tool {
	desc := "The whole input of the tool, as free text."
	if f != nil && f.Type == "grammar" && f.Definition != "" {
		syntax := f.Syntax
		if syntax == "" {
			syntax = "lark"
		}
		desc = "The whole input of the tool: text that follows this " + syntax + " grammar exactly.\n" + f.Definition
	}
	params := append([]byte(`{"type":"object","properties":{"`+respCustomParam+`":{"type":"string","description":`), appendString(nil, desc)...)
	params = append(params, `}},"required":["`+respCustomParam+`"],"additionalProperties":false}`...)
	return Tool{Name: name, Description: description, Parameters: params, Custom: true}
}

// respCustomArgs is the arguments of the function call a custom tool call
// becomes: its input as the one parameter.
func respCustomArgs(input string) string {
	b := append([]byte(`{"`+respCustomParam+`":`), appendString(nil, input)...)
	return string(append(b, '}'))
}

// respCustomInput is the input of a custom tool call made from a function
// call's arguments: the string parameter "input"; arguments that do not
// hold one are passed on as they are, for the tool to refuse.
func respCustomInput(args string) string {
	var w struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &w) != nil || w.Input == nil {
		return args
	}
	return *w.Input
}

// respCustomNames is the set of r's custom tools; nil when it has none.
func respCustomNames(r *Request) map[string]bool {
	var m map[string]bool
	for _, t := range r.Tools {
		if t.Custom {
			if m == nil {
				m = map[string]bool{}
			}
			m[t.Name] = true
		}
	}
	return m
}

// respParseToolChoice reads "auto", "none", "required" or a named
// function or custom tool; a choice of allowed tools or of a built-in
// tool has no counterpart elsewhere.
func respParseToolChoice(raw json.RawMessage, r *Request) error {
	if respAbsent(raw) {
		return nil
	}
	if raw[0] == '"' {
		var mode string
		if err := respDecode(raw, &mode, "tool_choice"); err != nil {
			return err
		}
		switch mode {
		case ChoiceAuto, ChoiceNone, ChoiceRequired:
			r.ToolChoice = &ToolChoice{Mode: mode}
			return nil
		}
		return &Invalid{Field: "tool_choice", Msg: "must be auto, none, required or an object"}
	}
	var w struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := respDecode(raw, &w, "tool_choice"); err != nil {
		return err
	}
	switch {
	case w.Type == "":
		return &Invalid{Field: "tool_choice.type", Msg: "required"}
	case w.Type != "function" && w.Type != "custom":
		return &Unsupported{Feature: "tool_choice " + w.Type}
	case w.Name == "":
		return &Invalid{Field: "tool_choice.name", Msg: "required"}
	}
	r.ToolChoice = &ToolChoice{Mode: ChoiceTool, Name: w.Name}
	return nil
}

// respParseText reads text.format: text (free), json_object or
// json_schema. text.verbosity has no counterpart and is left out.
func respParseText(raw json.RawMessage, r *Request) error {
	var w struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	}
	if err := respDecode(raw, &w, "text"); err != nil {
		return err
	}
	if w.Format == nil {
		return nil
	}
	switch f := w.Format; f.Type {
	case "text":
	case "json_object":
		r.Format = &Format{Type: "json_object"}
	case "json_schema":
		if f.Name == "" {
			return &Invalid{Field: "text.format.name", Msg: "required"}
		}
		if respAbsent(f.Schema) || f.Schema[0] != '{' {
			return &Invalid{Field: "text.format.schema", Msg: "required: a JSON Schema object"}
		}
		r.Format = &Format{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}
	default:
		return &Invalid{Field: "text.format.type", Msg: "must be text, json_object or json_schema"}
	}
	return nil
}

// respParseReasoning reads reasoning.effort and reasoning.summary. Effort
// "none" turns reasoning off; "xhigh" is asked of others as "high", the
// most they know.
func respParseReasoning(raw json.RawMessage, r *Request) error {
	var w struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	}
	if err := respDecode(raw, &w, "reasoning"); err != nil {
		return err
	}
	if w.Effort == nil && w.Summary == nil {
		return nil
	}
	re := &Reasoning{}
	if w.Effort != nil {
		switch e := *w.Effort; e {
		case "none":
			re.Off = true
		case "minimal", "low", "medium", "high":
			re.Effort = e
		case "xhigh":
			re.Effort = "high"
		default:
			return &Invalid{Field: "reasoning.effort", Msg: "must be none, minimal, low, medium, high or xhigh"}
		}
	}
	if w.Summary != nil {
		switch s := *w.Summary; s {
		case "auto", "concise", "detailed":
			re.Summary = s
		default:
			return &Invalid{Field: "reasoning.summary", Msg: "must be auto, concise or detailed"}
		}
	}
	r.Reasoning = re
	return nil
}
